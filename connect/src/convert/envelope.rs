//! `JsonConverter` with `schemas.enable=true`: each value is the envelope
//! `{"schema": <Connect schema>, "payload": <value>}`. Reads take the
//! payload; writes infer the Connect schema from the value (`struct`,
//! `array`, `boolean`, `int64`, `float64`, `string`; a null field an
//! optional `string`).

use serde_json::{json, Map, Value};

/// The payload of an envelope.
pub fn unwrap(value: Value) -> Result<Value, String> {
    match value {
        Value::Object(mut m)
            if m.len() == 2 && m.contains_key("schema") && m.contains_key("payload") =>
        {
            Ok(m.remove("payload").unwrap_or(Value::Null))
        }
        _ => Err(
            "JsonConverter with schemas.enable requires \"schema\" and \"payload\" fields \
                  and may not contain additional fields; for plain JSON set schemas.enable=false"
                .into(),
        ),
    }
}

/// `value` in an envelope with its inferred schema.
pub fn wrap(value: Value) -> Value {
    let schema = connect_schema(&value, false);
    json!({ "schema": schema, "payload": value })
}

fn connect_schema(value: &Value, optional: bool) -> Value {
    let simple = |t: &str| json!({ "type": t, "optional": optional });
    match value {
        Value::Null => json!({ "type": "string", "optional": true }),
        Value::Bool(_) => simple("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => simple("int64"),
        Value::Number(_) => simple("float64"),
        Value::String(_) => simple("string"),
        Value::Array(items) => {
            let item = items.first().map_or_else(
                || json!({ "type": "string", "optional": true }),
                |i| connect_schema(i, false),
            );
            json!({ "type": "array", "items": item, "optional": optional })
        }
        Value::Object(fields) => {
            let fields: Vec<Value> = fields
                .iter()
                .map(|(name, v)| {
                    let mut f: Map<String, Value> = match connect_schema(v, v.is_null()) {
                        Value::Object(m) => m,
                        _ => Map::new(),
                    };
                    f.insert("field".into(), Value::String(name.clone()));
                    Value::Object(f)
                })
                .collect();
            json!({ "type": "struct", "fields": fields, "optional": optional })
        }
    }
}

#[cfg(test)]
#[path = "envelope_tests.rs"]
mod tests;
