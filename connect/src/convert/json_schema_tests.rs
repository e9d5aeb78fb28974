use serde_json::json;

use super::*;

fn validator(schema: &Value) -> jsonschema::Validator {
    let parsed = registry::json::parse(&schema.to_string(), &[]).expect("a JSON Schema");
    parsed.validator().expect("a validator")
}

#[test]
fn a_value_that_does_not_match_is_refused_naming_where() {
    let v = validator(&json!({
        "type": "object",
        "properties": {"seq": {"type": "integer"}},
        "required": ["seq"]
    }));
    assert!(check(&v, &json!({"seq": 1})).is_ok());
    let err = check(&v, &json!({"seq": "one"})).expect_err("a string is not an integer");
    assert!(err.contains("/seq"), "{err}");
    assert!(check(&v, &json!({})).is_err(), "seq is required");
}

#[test]
fn an_inferred_schema_accepts_its_value() {
    let value = json!({"seq": 1, "user": "ada", "score": 0.5, "tags": ["x", "y"], "none": null,
                       "nested": {"ok": true}});
    let schema = infer(&value);
    assert_eq!(schema["properties"]["seq"], json!({"type": "integer"}));
    assert_eq!(
        schema["properties"]["nested"]["properties"]["ok"],
        json!({"type": "boolean"})
    );
    let v = validator(&schema);
    assert!(check(&v, &value).is_ok());
    assert!(
        check(&v, &json!({"seq": "x"})).is_err(),
        "another type is refused"
    );
}
