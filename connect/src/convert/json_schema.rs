//! JSON Schema: the payload is the JSON document itself; it is checked
//! against its schema when asked (`json.fail.invalid.schema`, as
//! Confluent's `JsonSchemaConverter` does on reads, always before a
//! write with a registered schema). Schemas are inferred from values as
//! `type` and `properties` (no `required`: every field may be missing).

use serde_json::{json, Map, Value};

/// Why `value` does not fit `validator`'s schema (its first few
/// problems), `Ok` when it does.
pub fn check(validator: &jsonschema::Validator, value: &Value) -> Result<(), String> {
    let problems: Vec<String> = validator
        .iter_errors(value)
        .take(3)
        .map(|e| {
            let at = e.instance_path().to_string();
            if at.is_empty() {
                e.to_string()
            } else {
                format!("{at}: {e}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "the value does not match its JSON Schema: {}",
            problems.join("; ")
        ))
    }
}

/// A JSON Schema (draft 7) for `value`.
pub fn infer(value: &Value) -> Value {
    let mut schema = infer_type(value);
    if let Value::Object(m) = &mut schema {
        m.insert(
            "$schema".into(),
            Value::String("http://json-schema.org/draft-07/schema#".into()),
        );
    }
    schema
}

fn infer_type(value: &Value) -> Value {
    match value {
        Value::Null => json!({ "type": "null" }),
        Value::Bool(_) => json!({ "type": "boolean" }),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!({ "type": "integer" }),
        Value::Number(_) => json!({ "type": "number" }),
        Value::String(_) => json!({ "type": "string" }),
        Value::Array(items) => match items.first() {
            Some(first) if items.iter().all(|i| infer_type(i) == infer_type(first)) => {
                json!({ "type": "array", "items": infer_type(first) })
            }
            _ => json!({ "type": "array" }),
        },
        Value::Object(fields) => {
            let properties: Map<String, Value> = fields
                .iter()
                .map(|(k, v)| {
                    let t = if v.is_null() {
                        json!({})
                    } else {
                        infer_type(v)
                    };
                    (k.clone(), t)
                })
                .collect();
            json!({ "type": "object", "properties": properties })
        }
    }
}

#[cfg(test)]
#[path = "json_schema_tests.rs"]
mod tests;
