use super::*;

fn avro(fields: &str) -> Parsed {
    let text = format!(r#"{{"type":"record","name":"User","fields":[{fields}]}}"#);
    match parse(SchemaType::Avro, &text, &[]) {
        Ok(p) => p,
        Err(e) => panic!("{text}: {e}"),
    }
}

const ID: &str = r#"{"name":"id","type":"long"}"#;

fn with(extra: &str) -> Parsed {
    avro(&format!("{ID},{extra}"))
}

#[test]
fn backward_refuses_a_new_field_without_default_and_accepts_one_with() {
    let v1 = avro(ID);
    let no_default = with(r#"{"name":"email","type":"string"}"#);
    let why = incompatibilities(
        Compatibility::Backward,
        &no_default,
        std::slice::from_ref(&v1),
    );
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("the new schema cannot read data written with the latest version"));
    assert!(why[0].contains("email"), "{why:?}");

    let defaulted = with(r#"{"name":"email","type":"string","default":""}"#);
    assert!(incompatibilities(Compatibility::Backward, &defaulted, &[v1]).is_empty());
}

#[test]
fn forward_refuses_removing_a_field_without_default() {
    let v1 = with(r#"{"name":"email","type":"string"}"#);
    let removed = avro(ID);
    let why = incompatibilities(Compatibility::Forward, &removed, std::slice::from_ref(&v1));
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("the latest version cannot read data written with the new schema"));
    // BACKWARD allows the same change: the new schema ignores the field.
    assert!(
        incompatibilities(Compatibility::Backward, &removed, std::slice::from_ref(&v1)).is_empty()
    );
    // Adding a field without default is fine FORWARD: the old schema ignores it.
    let added = with(r#"{"name":"email","type":"string"},{"name":"age","type":"int"}"#);
    assert!(incompatibilities(Compatibility::Forward, &added, &[v1]).is_empty());
}

#[test]
fn full_needs_both_directions() {
    let v1 = avro(ID);
    let without_default = with(r#"{"name":"email","type":"string"}"#);
    let why = incompatibilities(
        Compatibility::Full,
        &without_default,
        std::slice::from_ref(&v1),
    );
    assert_eq!(why.len(), 1, "{why:?}");
    let defaulted = with(r#"{"name":"email","type":"string","default":""}"#);
    assert!(
        incompatibilities(Compatibility::Full, &defaulted, std::slice::from_ref(&v1)).is_empty()
    );
    // A promotion reads one way only.
    let promoted = avro(r#"{"name":"id","type":"double"}"#);
    let int_id = avro(r#"{"name":"id","type":"int"}"#);
    assert!(incompatibilities(
        Compatibility::Backward,
        &promoted,
        std::slice::from_ref(&int_id)
    )
    .is_empty());
    let why = incompatibilities(Compatibility::Full, &promoted, &[int_id]);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(
        why[0].contains("cannot read data written with the new schema"),
        "{why:?}"
    );
}

#[test]
fn backward_transitive_checks_every_earlier_version() {
    // v1 has no email; v2 adds it with a default; v3 drops the default.
    // v3 reads v2's data (email is there), not v1's.
    let v1 = avro(ID);
    let v2 = with(r#"{"name":"email","type":"string","default":""}"#);
    let v3 = with(r#"{"name":"email","type":"string"}"#);
    let earlier = [v1, v2];
    assert!(incompatibilities(Compatibility::Backward, &v3, &earlier).is_empty());
    let why = incompatibilities(Compatibility::BackwardTransitive, &v3, &earlier);
    assert_eq!(why.len(), 1, "{why:?}");
    assert!(why[0].contains("version 1"), "{why:?}");
}

#[test]
fn none_accepts_anything() {
    let v1 = avro(ID);
    let other = avro(r#"{"name":"id","type":"string"}"#);
    assert!(incompatibilities(Compatibility::None, &other, &[v1]).is_empty());
}
