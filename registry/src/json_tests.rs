use super::*;

fn json(text: &str) -> JsonSchema {
    match parse(text, &[]) {
        Ok(s) => s,
        Err(e) => panic!("{text}: {e}"),
    }
}

/// (rule, writer, reader, compatible?)
fn check_table(cases: &[(&str, &str, &str, bool)]) {
    for (rule, writer, reader, compatible) in cases {
        let why = cannot_read(&json(reader), &json(writer));
        assert_eq!(why.is_empty(), *compatible, "{rule}: {why:?}");
    }
}

#[test]
fn types() {
    check_table(&[
        (
            "same type",
            r#"{"type":"string"}"#,
            r#"{"type":"string"}"#,
            true,
        ),
        (
            "integer widened to number",
            r#"{"type":"integer"}"#,
            r#"{"type":"number"}"#,
            true,
        ),
        (
            "number narrowed to integer",
            r#"{"type":"number"}"#,
            r#"{"type":"integer"}"#,
            false,
        ),
        (
            "type changed",
            r#"{"type":"string"}"#,
            r#"{"type":"integer"}"#,
            false,
        ),
        (
            "reader accepts anything",
            r#"{"type":"string"}"#,
            r#"{}"#,
            true,
        ),
        ("reader true", r#"{"type":"string"}"#, "true", true),
        (
            "writer accepts nothing",
            "false",
            r#"{"type":"string"}"#,
            true,
        ),
        (
            "reader constrains an unconstrained writer",
            r#"{}"#,
            r#"{"type":"string"}"#,
            false,
        ),
        (
            "type gains a member",
            r#"{"type":"string"}"#,
            r#"{"type":["string","null"]}"#,
            true,
        ),
        (
            "type loses a member",
            r#"{"type":["string","null"]}"#,
            r#"{"type":"string"}"#,
            false,
        ),
    ]);
}

#[test]
fn string_bounds() {
    check_table(&[
        (
            "maxLength increased",
            r#"{"type":"string","maxLength":5}"#,
            r#"{"type":"string","maxLength":9}"#,
            true,
        ),
        (
            "maxLength decreased",
            r#"{"type":"string","maxLength":9}"#,
            r#"{"type":"string","maxLength":5}"#,
            false,
        ),
        (
            "maxLength added",
            r#"{"type":"string"}"#,
            r#"{"type":"string","maxLength":5}"#,
            false,
        ),
        (
            "maxLength removed",
            r#"{"type":"string","maxLength":5}"#,
            r#"{"type":"string"}"#,
            true,
        ),
        (
            "minLength decreased",
            r#"{"type":"string","minLength":3}"#,
            r#"{"type":"string","minLength":1}"#,
            true,
        ),
        (
            "minLength increased",
            r#"{"type":"string","minLength":1}"#,
            r#"{"type":"string","minLength":3}"#,
            false,
        ),
        (
            "minLength added",
            r#"{"type":"string"}"#,
            r#"{"type":"string","minLength":1}"#,
            false,
        ),
        (
            "minLength removed",
            r#"{"type":"string","minLength":1}"#,
            r#"{"type":"string"}"#,
            true,
        ),
        (
            "pattern added",
            r#"{"type":"string"}"#,
            r#"{"type":"string","pattern":"^a"}"#,
            false,
        ),
        (
            "pattern removed",
            r#"{"type":"string","pattern":"^a"}"#,
            r#"{"type":"string"}"#,
            true,
        ),
        (
            "pattern changed",
            r#"{"type":"string","pattern":"^a"}"#,
            r#"{"type":"string","pattern":"^b"}"#,
            false,
        ),
    ]);
}

#[test]
fn number_bounds() {
    check_table(&[
        (
            "maximum increased",
            r#"{"type":"number","maximum":5}"#,
            r#"{"type":"number","maximum":9}"#,
            true,
        ),
        (
            "maximum decreased",
            r#"{"type":"number","maximum":9}"#,
            r#"{"type":"number","maximum":5}"#,
            false,
        ),
        (
            "maximum added",
            r#"{"type":"number"}"#,
            r#"{"type":"number","maximum":5}"#,
            false,
        ),
        (
            "maximum removed",
            r#"{"type":"number","maximum":5}"#,
            r#"{"type":"number"}"#,
            true,
        ),
        (
            "minimum decreased",
            r#"{"type":"integer","minimum":3}"#,
            r#"{"type":"integer","minimum":0}"#,
            true,
        ),
        (
            "minimum increased",
            r#"{"type":"integer","minimum":0}"#,
            r#"{"type":"integer","minimum":3}"#,
            false,
        ),
        (
            "exclusiveMaximum decreased",
            r#"{"type":"number","exclusiveMaximum":9}"#,
            r#"{"type":"number","exclusiveMaximum":5}"#,
            false,
        ),
        (
            "exclusiveMinimum removed",
            r#"{"type":"number","exclusiveMinimum":1}"#,
            r#"{"type":"number"}"#,
            true,
        ),
        (
            "multipleOf reduced",
            r#"{"type":"integer","multipleOf":10}"#,
            r#"{"type":"integer","multipleOf":5}"#,
            true,
        ),
        (
            "multipleOf expanded",
            r#"{"type":"integer","multipleOf":5}"#,
            r#"{"type":"integer","multipleOf":10}"#,
            false,
        ),
        (
            "multipleOf added",
            r#"{"type":"integer"}"#,
            r#"{"type":"integer","multipleOf":2}"#,
            false,
        ),
    ]);
}

#[test]
fn enums() {
    check_table(&[
        (
            "enum extended",
            r#"{"enum":["a","b"]}"#,
            r#"{"enum":["a","b","c"]}"#,
            true,
        ),
        (
            "enum narrowed",
            r#"{"enum":["a","b"]}"#,
            r#"{"enum":["a"]}"#,
            false,
        ),
        (
            "enum changed",
            r#"{"enum":["a","b"]}"#,
            r#"{"enum":["a","c"]}"#,
            false,
        ),
        (
            "const widened to an enum",
            r#"{"const":"a"}"#,
            r#"{"enum":["a","b"]}"#,
            true,
        ),
        (
            "typed enum extended",
            r#"{"type":"string","enum":["a"]}"#,
            r#"{"type":"string","enum":["a","b"]}"#,
            true,
        ),
    ]);
}

const OPEN: &str = r#"{"type":"object","properties":{"a":{"type":"string"}}}"#;
const OPEN_AB: &str =
    r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}}}"#;
const CLOSED: &str =
    r#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":false}"#;
const CLOSED_AB: &str = r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"additionalProperties":false}"#;

#[test]
fn properties_and_content_models() {
    check_table(&[
        (
            "property added to an open writer model",
            OPEN,
            OPEN_AB,
            false,
        ),
        (
            "property with an empty schema added to an open writer model",
            OPEN,
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{}}}"#,
            true,
        ),
        (
            "property removed from an open reader model",
            OPEN_AB,
            OPEN,
            true,
        ),
        (
            "optional property added to a closed writer model",
            CLOSED,
            CLOSED_AB,
            true,
        ),
        (
            "property removed from a closed reader model",
            CLOSED_AB,
            CLOSED,
            false,
        ),
        (
            "property with false removed from a closed model",
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":false},"additionalProperties":false}"#,
            CLOSED,
            true,
        ),
        (
            "property added covered by the writer's additionalProperties schema",
            r#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}"#,
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"number"}},"additionalProperties":{"type":"integer"}}"#,
            true,
        ),
        (
            "property added not covered by the writer's additionalProperties schema",
            r#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}}"#,
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"string"}},"additionalProperties":{"type":"integer"}}"#,
            false,
        ),
        (
            "property removed covered by the reader's patternProperties",
            r#"{"type":"object","properties":{"x_b":{"type":"integer"}},"additionalProperties":false,"patternProperties":{"^x_":{"type":"number"}}}"#,
            r#"{"type":"object","additionalProperties":false,"patternProperties":{"^x_":{"type":"number"}}}"#,
            true,
        ),
        (
            "property type changed in a nested object",
            r#"{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer"}}}}}"#,
            r#"{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"string"}}}}}"#,
            false,
        ),
        (
            "nested property widened",
            r#"{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"integer"}}}}}"#,
            r#"{"type":"object","properties":{"o":{"type":"object","properties":{"n":{"type":"number"}}}}}"#,
            true,
        ),
        ("additionalProperties allowed again", CLOSED, OPEN, true),
        ("additionalProperties refused", OPEN, CLOSED, false),
        (
            "additionalProperties given a schema",
            OPEN,
            r#"{"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"string"}}"#,
            false,
        ),
        (
            "maxProperties added",
            OPEN,
            r#"{"type":"object","properties":{"a":{"type":"string"}},"maxProperties":3}"#,
            false,
        ),
    ]);
}

#[test]
fn required() {
    let req = |props: &str, required: &str| {
        format!(r#"{{"type":"object","properties":{{{props}}},"required":[{required}]}}"#)
    };
    let a = r#""a":{"type":"string"}"#;
    let a_default = r#""a":{"type":"string","default":""}"#;
    check_table(&[
        ("required removed", &req(a, r#""a""#), &req(a, ""), true),
        ("required added", &req(a, ""), &req(a, r#""a""#), false),
        (
            "required added with a default",
            &req(a, ""),
            &req(a_default, r#""a""#),
            true,
        ),
        (
            "required property added to a closed model",
            CLOSED,
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"required":["b"],"additionalProperties":false}"#,
            false,
        ),
        (
            "required property with a default added to a closed model",
            CLOSED,
            r#"{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer","default":0}},"required":["b"],"additionalProperties":false}"#,
            true,
        ),
    ]);
}

#[test]
fn arrays() {
    check_table(&[
        (
            "items widened",
            r#"{"type":"array","items":{"type":"integer"}}"#,
            r#"{"type":"array","items":{"type":"number"}}"#,
            true,
        ),
        (
            "items changed",
            r#"{"type":"array","items":{"type":"integer"}}"#,
            r#"{"type":"array","items":{"type":"string"}}"#,
            false,
        ),
        (
            "items removed",
            r#"{"type":"array","items":{"type":"integer"}}"#,
            r#"{"type":"array"}"#,
            true,
        ),
        (
            "items added",
            r#"{"type":"array"}"#,
            r#"{"type":"array","items":{"type":"integer"}}"#,
            false,
        ),
        (
            "maxItems increased",
            r#"{"type":"array","maxItems":2}"#,
            r#"{"type":"array","maxItems":3}"#,
            true,
        ),
        (
            "maxItems decreased",
            r#"{"type":"array","maxItems":3}"#,
            r#"{"type":"array","maxItems":2}"#,
            false,
        ),
        (
            "minItems decreased",
            r#"{"type":"array","minItems":2}"#,
            r#"{"type":"array","minItems":1}"#,
            true,
        ),
        (
            "minItems increased",
            r#"{"type":"array","minItems":1}"#,
            r#"{"type":"array","minItems":2}"#,
            false,
        ),
        (
            "uniqueItems added",
            r#"{"type":"array"}"#,
            r#"{"type":"array","uniqueItems":true}"#,
            false,
        ),
        (
            "uniqueItems removed",
            r#"{"type":"array","uniqueItems":true}"#,
            r#"{"type":"array"}"#,
            true,
        ),
        (
            "tuple item added to a closed writer tuple",
            r#"{"type":"array","prefixItems":[{"type":"string"}],"items":false}"#,
            r#"{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}"#,
            true,
        ),
        (
            "tuple item added to an open writer tuple",
            r#"{"type":"array","prefixItems":[{"type":"string"}]}"#,
            r#"{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}]}"#,
            false,
        ),
        (
            "tuple item removed from a closed reader tuple",
            r#"{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"}],"items":false}"#,
            r#"{"type":"array","prefixItems":[{"type":"string"}],"items":false}"#,
            false,
        ),
    ]);
}

#[test]
fn combined_schemas() {
    let s = r#"{"type":"string"}"#;
    let i = r#"{"type":"integer"}"#;
    let b = r#"{"type":"boolean"}"#;
    let comb = |k: &str, subs: &[&str]| format!(r#"{{"{k}":[{}]}}"#, subs.join(","));
    check_table(&[
        (
            "oneOf gains a subschema",
            &comb("oneOf", &[s, i]),
            &comb("oneOf", &[s, i, b]),
            true,
        ),
        (
            "oneOf loses a subschema",
            &comb("oneOf", &[s, i, b]),
            &comb("oneOf", &[s, i]),
            false,
        ),
        (
            "anyOf gains a subschema",
            &comb("anyOf", &[s]),
            &comb("anyOf", &[s, i]),
            true,
        ),
        (
            "allOf loses a subschema",
            &comb("allOf", &[s, r#"{"maxLength":3}"#]),
            &comb("allOf", &[s]),
            true,
        ),
        (
            "allOf gains a subschema",
            &comb("allOf", &[s]),
            &comb("allOf", &[s, r#"{"maxLength":3}"#]),
            false,
        ),
        (
            "oneOf subschema changed",
            &comb("oneOf", &[s, i]),
            &comb("oneOf", &[s, b]),
            false,
        ),
        (
            "oneOf subschema widened",
            &comb("oneOf", &[s, i]),
            &comb("oneOf", &[r#"{"type":"number"}"#, s]),
            true,
        ),
        (
            "allOf changed to anyOf",
            &comb("allOf", &[s, i]),
            &comb("anyOf", &[s, i]),
            true,
        ),
        (
            "anyOf changed to allOf",
            &comb("anyOf", &[s, i]),
            &comb("allOf", &[s, i]),
            false,
        ),
        (
            "plain schema read by a oneOf with it",
            s,
            &comb("oneOf", &[s, i]),
            true,
        ),
        (
            "plain schema read by a oneOf without it",
            b,
            &comb("oneOf", &[s, i]),
            false,
        ),
        (
            "writer anyOf all read by a plain reader",
            &comb("anyOf", &[i, r#"{"type":"number","maximum":3}"#]),
            r#"{"type":"number"}"#,
            true,
        ),
        (
            "writer anyOf partly read by a plain reader",
            &comb("anyOf", &[i, s]),
            r#"{"type":"number"}"#,
            false,
        ),
        (
            "writer allOf with one subschema the reader reads",
            &comb("allOf", &[s, r#"{"maxLength":3}"#]),
            s,
            true,
        ),
        (
            "typed enum read by its type",
            r#"{"type":"string","enum":["a"]}"#,
            s,
            true,
        ),
    ]);
}

#[test]
fn local_refs_and_recursion() {
    let tree = |value_type: &str| {
        format!(
            r##"{{"$ref":"#/definitions/node","definitions":{{"node":{{"type":"object","properties":{{"value":{{"type":"{value_type}"}},"children":{{"type":"array","items":{{"$ref":"#/definitions/node"}}}}}}}}}}}}"##
        )
    };
    check_table(&[
        (
            "recursive schema reads itself",
            &tree("integer"),
            &tree("integer"),
            true,
        ),
        (
            "recursive schema widened",
            &tree("integer"),
            &tree("number"),
            true,
        ),
        (
            "recursive schema changed",
            &tree("integer"),
            &tree("string"),
            false,
        ),
    ]);
}

fn with_refs(text: &str, refs: &[Resolved]) -> JsonSchema {
    match parse(text, refs) {
        Ok(s) => s,
        Err(e) => panic!("{text}: {e}"),
    }
}

#[test]
fn references_resolve_by_name() {
    let customer = |t: &str| Resolved {
        name: "customer.json".into(),
        schema_type: SchemaType::Json,
        schema: format!(r#"{{"type":"object","properties":{{"id":{{"type":"{t}"}}}}}}"#),
    };
    let order = r#"{"type":"object","properties":{"customer":{"$ref":"customer.json"}}}"#;
    assert!(matches!(parse(order, &[]), Err(SchemaError::Invalid(_))));
    let v1 = with_refs(order, &[customer("integer")]);
    let v2 = with_refs(order, &[customer("number")]);
    let v3 = with_refs(order, &[customer("string")]);
    assert!(cannot_read(&v2, &v1).is_empty());
    assert!(!cannot_read(&v1, &v2).is_empty());
    let why = cannot_read(&v3, &v1);
    assert!(why.len() == 1 && why[0].contains("customer"), "{why:?}");

    // By URL, with a pointer into the reference.
    let defs = Resolved {
        name: "https://example.com/defs.json".into(),
        schema_type: SchemaType::Json,
        schema: r#"{"$defs":{"id":{"type":"integer"}}}"#.into(),
    };
    let text = r#"{"$schema":"https://json-schema.org/draft/2020-12/schema","$id":"https://example.com/order.json","type":"object","properties":{"id":{"$ref":"defs.json#/$defs/id"}}}"#;
    let s = with_refs(text, std::slice::from_ref(&defs));
    assert!(cannot_read(&s, &s).is_empty());
}

#[test]
fn invalid_schemas_are_refused_clearly() {
    for (text, expect) in [
        ("{nope", "JSON"),
        ("42", "object or a boolean"),
        (r#"{"type":"invalid_type"}"#, "not a valid JSON Schema"),
        (
            r#"{"type":"string","minLength":-1}"#,
            "not a valid JSON Schema",
        ),
        (
            r##"{"$ref":"#/definitions/missing"}"##,
            "not a valid JSON Schema",
        ),
        (
            r#"{"$ref":"https://example.com/elsewhere.json"}"#,
            "not a valid JSON Schema",
        ),
        (
            r#"{"$schema":"http://json-schema.org/draft-04/schema#","type":"object","required":[]}"#,
            "not a valid JSON Schema",
        ),
    ] {
        match parse(text, &[]) {
            Err(SchemaError::Invalid(m)) => assert!(m.contains(expect), "{text}: {m}"),
            Ok(_) => panic!("{text} accepted"),
        }
    }
    for draft in [
        "http://json-schema.org/draft-04/schema#",
        "http://json-schema.org/draft-06/schema#",
        "http://json-schema.org/draft-07/schema#",
        "https://json-schema.org/draft/2019-09/schema",
        "https://json-schema.org/draft/2020-12/schema",
    ] {
        json(&format!(r#"{{"$schema":"{draft}","type":"object"}}"#));
    }
}

#[test]
fn canonical_ignores_layout_not_meaning() {
    let a = json(r#"{"type":"object","properties":{"a":{"type":"string","default":"x"}}}"#);
    let b = json("{\n  \"properties\": { \"a\": { \"default\": \"x\", \"type\": \"string\" } },\n  \"type\": \"object\"\n}");
    let c = json(r#"{"type":"object","properties":{"a":{"type":"string","default":"y"}}}"#);
    assert_eq!(a.canonical(), b.canonical());
    assert_ne!(a.canonical(), c.canonical());
    assert!(!a.canonical().contains(' '));
}

#[test]
fn messages_say_where() {
    let writer = json(OPEN_AB);
    let reader = json(
        r#"{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer","maximum":3}}}"#,
    );
    let why = cannot_read(&reader, &writer).join("\n");
    assert!(
        why.contains("#/properties/a") && why.contains("integer"),
        "{why}"
    );
    assert!(why.contains("#/properties/b/maximum"), "{why}");
}
