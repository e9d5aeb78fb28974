use super::*;

fn avro(text: &str) -> AvroSchema {
    match parse(text, &[]) {
        Ok(s) => s,
        Err(e) => panic!("{text}: {e}"),
    }
}

fn record(fields: &str) -> String {
    format!(r#"{{"type":"record","name":"R","namespace":"aero","fields":[{fields}]}}"#)
}

/// (rule, writer, reader, compatible?)
fn check_table(cases: &[(&str, String, String, bool)]) {
    for (rule, writer, reader, compatible) in cases {
        let why = cannot_read(&avro(reader), &avro(writer));
        assert_eq!(why.is_empty(), *compatible, "{rule}: {why:?}");
    }
}

fn s(text: &str) -> String {
    text.to_owned()
}

#[test]
fn primitives_and_promotions() {
    check_table(&[
        ("same primitive", s(r#""int""#), s(r#""int""#), true),
        ("int promotes to long", s(r#""int""#), s(r#""long""#), true),
        (
            "int promotes to float",
            s(r#""int""#),
            s(r#""float""#),
            true,
        ),
        (
            "int promotes to double",
            s(r#""int""#),
            s(r#""double""#),
            true,
        ),
        (
            "long promotes to float",
            s(r#""long""#),
            s(r#""float""#),
            true,
        ),
        (
            "long promotes to double",
            s(r#""long""#),
            s(r#""double""#),
            true,
        ),
        (
            "float promotes to double",
            s(r#""float""#),
            s(r#""double""#),
            true,
        ),
        (
            "string reads as bytes",
            s(r#""string""#),
            s(r#""bytes""#),
            true,
        ),
        (
            "bytes reads as string",
            s(r#""bytes""#),
            s(r#""string""#),
            true,
        ),
        (
            "long does not narrow to int",
            s(r#""long""#),
            s(r#""int""#),
            false,
        ),
        (
            "double does not narrow to float",
            s(r#""double""#),
            s(r#""float""#),
            false,
        ),
        (
            "int is not a string",
            s(r#""int""#),
            s(r#""string""#),
            false,
        ),
        (
            "boolean is not an int",
            s(r#""boolean""#),
            s(r#""int""#),
            false,
        ),
        (
            "a logical type reads as its underlying type",
            s(r#"{"type":"int","logicalType":"date"}"#),
            s(r#""long""#),
            true,
        ),
    ]);
}

#[test]
fn record_fields() {
    check_table(&[
        (
            "reader field missing from the writer needs a default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#),
            false,
        ),
        (
            "reader field missing from the writer with a default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string","default":"x"}"#),
            true,
        ),
        (
            "writer field missing from the reader is ignored",
            record(r#"{"name":"a","type":"int"},{"name":"b","type":"string"}"#),
            record(r#"{"name":"a","type":"int"}"#),
            true,
        ),
        (
            "field type promoted",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"long"}"#),
            true,
        ),
        (
            "field type changed",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"a","type":"string"}"#),
            false,
        ),
        (
            "field renamed with an alias",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"b","type":"int","aliases":["a"]}"#),
            true,
        ),
        (
            "field renamed without an alias or default",
            record(r#"{"name":"a","type":"int"}"#),
            record(r#"{"name":"b","type":"int"}"#),
            false,
        ),
        (
            "record names must match",
            s(r#"{"type":"record","name":"A","fields":[]}"#),
            s(r#"{"type":"record","name":"B","fields":[]}"#),
            false,
        ),
        (
            "record renamed with an alias",
            s(r#"{"type":"record","name":"A","namespace":"n","fields":[]}"#),
            s(r#"{"type":"record","name":"B","namespace":"n","aliases":["A"],"fields":[]}"#),
            true,
        ),
        (
            "nested record recursively",
            record(
                r#"{"name":"in","type":{"type":"record","name":"In","fields":[{"name":"x","type":"int"}]}}"#,
            ),
            record(
                r#"{"name":"in","type":{"type":"record","name":"In","fields":[{"name":"x","type":"int"},{"name":"y","type":"int"}]}}"#,
            ),
            false,
        ),
    ]);
}

#[test]
fn enums() {
    let e = |symbols: &str, default: &str| {
        format!(r#"{{"type":"enum","name":"E","symbols":[{symbols}]{default}}}"#)
    };
    check_table(&[
        (
            "reader enum adds a symbol",
            e(r#""A","B""#, ""),
            e(r#""A","B","C""#, ""),
            true,
        ),
        (
            "writer symbol missing from the reader",
            e(r#""A","B""#, ""),
            e(r#""A""#, ""),
            false,
        ),
        (
            "writer symbol missing from a reader enum with a default",
            e(r#""A","B""#, ""),
            e(r#""A""#, r#","default":"A""#),
            true,
        ),
        (
            "enum names must match",
            s(r#"{"type":"enum","name":"E","symbols":["A"]}"#),
            s(r#"{"type":"enum","name":"F","symbols":["A"]}"#),
            false,
        ),
    ]);
}

#[test]
fn fixed_arrays_maps() {
    let f = |name: &str, size: u32| format!(r#"{{"type":"fixed","name":"{name}","size":{size}}}"#);
    check_table(&[
        ("fixed of the same size", f("F", 4), f("F", 4), true),
        ("fixed sizes differ", f("F", 4), f("F", 8), false),
        ("fixed names differ", f("F", 4), f("G", 4), false),
        (
            "array items promoted",
            s(r#"{"type":"array","items":"int"}"#),
            s(r#"{"type":"array","items":"long"}"#),
            true,
        ),
        (
            "array items changed",
            s(r#"{"type":"array","items":"int"}"#),
            s(r#"{"type":"array","items":"string"}"#),
            false,
        ),
        (
            "map values promoted",
            s(r#"{"type":"map","values":"float"}"#),
            s(r#"{"type":"map","values":"double"}"#),
            true,
        ),
        (
            "map values changed",
            s(r#"{"type":"map","values":"string"}"#),
            s(r#"{"type":"map","values":"int"}"#),
            false,
        ),
        (
            "array is not a map",
            s(r#"{"type":"array","items":"int"}"#),
            s(r#"{"type":"map","values":"int"}"#),
            false,
        ),
    ]);
}

#[test]
fn unions() {
    check_table(&[
        (
            "writer type is a reader union branch",
            s(r#""string""#),
            s(r#"["null","string"]"#),
            true,
        ),
        (
            "writer type promotes into a reader branch",
            s(r#""int""#),
            s(r#"["null","long"]"#),
            true,
        ),
        (
            "writer type in no reader branch",
            s(r#""int""#),
            s(r#"["null","string"]"#),
            false,
        ),
        (
            "reader union gains a branch",
            s(r#"["null","int"]"#),
            s(r#"["null","int","string"]"#),
            true,
        ),
        (
            "reader union loses a branch",
            s(r#"["null","int","string"]"#),
            s(r#"["null","int"]"#),
            false,
        ),
        (
            "every writer branch read by a non-union reader",
            s(r#"["int","long"]"#),
            s(r#""long""#),
            true,
        ),
        (
            "a writer branch not read by a non-union reader",
            s(r#"["null","int"]"#),
            s(r#""int""#),
            false,
        ),
    ]);
}

#[test]
fn recursive_types_terminate() {
    let list = |extra: &str| {
        format!(
            r#"{{"type":"record","name":"Node","fields":[{{"name":"value","type":"int"}},{{"name":"next","type":["null","Node"]}}{extra}]}}"#
        )
    };
    check_table(&[
        ("recursive record reads itself", list(""), list(""), true),
        (
            "recursive record with a new defaulted field",
            list(""),
            list(r#",{"name":"tag","type":"string","default":""}"#),
            true,
        ),
        (
            "recursive record with a new field without default",
            list(""),
            list(r#",{"name":"tag","type":"string"}"#),
            false,
        ),
    ]);
}

#[test]
fn types_used_by_name_resolve() {
    // The reader defines F where the writer uses it by name and the
    // reverse: both are the same fixed.
    let writer = record(
        r#"{"name":"a","type":{"type":"fixed","name":"F","size":4}},{"name":"b","type":"F"}"#,
    );
    let reader = record(
        r#"{"name":"b","type":{"type":"fixed","name":"F","size":4}},{"name":"a","type":"F"}"#,
    );
    check_table(&[("named types defined in another place", writer, reader, true)]);
}

#[test]
fn messages_name_the_field() {
    let writer = avro(&record(r#"{"name":"a","type":"int"}"#));
    let reader = avro(&record(
        r#"{"name":"a","type":"string"},{"name":"b","type":"int"}"#,
    ));
    let why = cannot_read(&reader, &writer).join("\n");
    assert!(
        why.contains("R.a") && why.contains("string") && why.contains("int"),
        "{why}"
    );
    assert!(why.contains("R.b") && why.contains("no default"), "{why}");
}

#[test]
fn invalid_schemas_are_refused_clearly() {
    for (text, expect) in [
        ("{not json", "JSON"),
        (r#"{"type":"record","name":"R"}"#, "not a valid Avro schema"),
        (r#""nosuchtype""#, "not a valid Avro schema"),
        (
            r#"{"type":"record","name":"1bad","fields":[]}"#,
            "not a valid Avro schema",
        ),
        (
            r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":"x"}]}"#,
            "not a valid Avro schema",
        ),
        (
            r#"{"type":"enum","name":"E","symbols":["A","A"]}"#,
            "not a valid Avro schema",
        ),
    ] {
        match parse(text, &[]) {
            Err(SchemaError::Invalid(m)) => assert!(m.contains(expect), "{text}: {m}"),
            Ok(_) => panic!("{text} accepted"),
        }
    }
}

#[test]
fn references_resolve_by_full_name() {
    let address = Resolved {
        name: "aero.Address".into(),
        schema_type: SchemaType::Avro,
        schema: r#"{"type":"record","name":"Address","namespace":"aero","fields":[{"name":"city","type":"string"}]}"#.into(),
    };
    let text = r#"{"type":"record","name":"Person","namespace":"aero","fields":[{"name":"home","type":"aero.Address"}]}"#;
    assert!(matches!(parse(text, &[]), Err(SchemaError::Invalid(_))));
    let person = match parse(text, std::slice::from_ref(&address)) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    assert!(cannot_read(&person, &person).is_empty());

    // The referenced type's own changes count.
    let wider = Resolved {
        schema: r#"{"type":"record","name":"Address","namespace":"aero","fields":[{"name":"city","type":"string"},{"name":"zip","type":"string"}]}"#.into(),
        ..address.clone()
    };
    let newer = match parse(text, &[wider]) {
        Ok(p) => p,
        Err(e) => panic!("{e}"),
    };
    let why = cannot_read(&newer, &person);
    assert!(
        why.len() == 1 && why[0].contains("Person.home.zip"),
        "{why:?}"
    );
    assert!(cannot_read(&person, &newer).is_empty());

    let json_ref = Resolved {
        schema_type: SchemaType::Json,
        ..address
    };
    assert!(matches!(
        parse(text, &[json_ref]),
        Err(SchemaError::Invalid(_))
    ));
}

#[test]
fn canonical_ignores_layout_not_meaning() {
    let a =
        avro(r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":1}]}"#);
    let b = avro(
        "{ \"fields\" : [ { \"default\": 1, \"type\": \"int\", \"name\": \"a\" } ],\n  \"name\": \"R\", \"type\": \"record\" }",
    );
    let c =
        avro(r#"{"type":"record","name":"R","fields":[{"name":"a","type":"int","default":2}]}"#);
    let d = avro(
        r#"{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"int"},"default":1}]}"#,
    );
    assert_eq!(a.canonical(), b.canonical());
    assert_eq!(a.canonical(), d.canonical());
    assert_ne!(a.canonical(), c.canonical());
    let e1 = avro(r#"{"type":"enum","name":"E","symbols":["A","B"],"default":"A"}"#);
    let e2 = avro(r#"{"type":"enum","name":"E","symbols":["A","B"]}"#);
    assert_ne!(e1.canonical(), e2.canonical());
}
