use serde_json::json;

use super::*;

#[test]
fn an_envelope_gives_its_payload() {
    let v = json!({"schema": {"type": "int64", "optional": false}, "payload": 42});
    assert_eq!(unwrap(v).expect("an envelope"), json!(42));
}

#[test]
fn plain_json_is_not_an_envelope() {
    let err = unwrap(json!({"seq": 1})).expect_err("no schema and payload");
    assert!(err.contains("schemas.enable=false"), "{err}");
    assert!(unwrap(json!({"schema": null, "payload": 1, "extra": 2})).is_err());
}

#[test]
fn a_wrapped_value_carries_its_connect_schema_and_reads_back() {
    let value =
        json!({"seq": 3, "user": "ada", "score": 1.5, "ok": true, "tags": ["a"], "gone": null});
    let wrapped = wrap(value.clone());
    assert_eq!(
        wrapped["schema"],
        json!({"type": "struct", "optional": false, "fields": [
            {"field": "gone", "type": "string", "optional": true},
            {"field": "ok", "type": "boolean", "optional": false},
            {"field": "score", "type": "float64", "optional": false},
            {"field": "seq", "type": "int64", "optional": false},
            {"field": "tags", "type": "array", "optional": false,
             "items": {"type": "string", "optional": false}},
            {"field": "user", "type": "string", "optional": false},
        ]})
    );
    assert_eq!(unwrap(wrapped).expect("an envelope"), value);
}
