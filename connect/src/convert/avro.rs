//! Avro: binary data to JSON with the writer's schema (named types from
//! references resolved), JSON to binary with a registered schema, and a
//! schema inferred from a JSON value.
//!
//! Decoded values follow Connect's JSON rendering: records and maps are
//! objects, a union is the value of its branch (no `{"type": value}`
//! wrapper), an enum is its symbol, `bytes`, `fixed` and `decimal` are
//! base64 (as `JsonConverter` writes bytes and decimals by default),
//! dates, times and timestamps their numbers, a `uuid` its text, a float
//! that is not finite the string `NaN`, `Infinity` or `-Infinity`.

use apache_avro::types::Value as Avro;
use base64::Engine as _;
use registry::avro::AvroSchema;
use serde_json::{json, Map, Number, Value};

/// The name inferred record schemas are given (Connect's default).
pub const DEFAULT_NAME: &str = "ConnectDefault";
/// Their namespace.
pub const DEFAULT_NAMESPACE: &str = "io.confluent.connect.avro";

/// Decodes Avro binary `payload` written with `schema`.
pub fn decode(schema: &AvroSchema, payload: &[u8]) -> Result<Value, String> {
    // apache-avro reads a string or boolean cut short by the end of its
    // input as null rather than failing; one sentinel byte after the
    // payload tells: a value that ends within the payload leaves exactly
    // it unread.
    let mut guarded = Vec::with_capacity(payload.len() + 1);
    guarded.extend_from_slice(payload);
    guarded.push(0);
    let mut reader = guarded.as_slice();
    let value = apache_avro::from_avro_datum_schemata(
        schema.schema(),
        schema.schemata(),
        &mut reader,
        None,
    )
    .map_err(|e| e.to_string())?;
    match reader.len() {
        1 => Ok(to_json(value)),
        0 => Err("the payload ends before the value does".into()),
        n => Err(format!("{} bytes are left after the value", n - 1)),
    }
}

/// An Avro value as JSON (see the module's docs).
pub fn to_json(value: Avro) -> Value {
    let b64 = |b: &[u8]| Value::String(base64::engine::general_purpose::STANDARD.encode(b));
    let float = |f: f64| match Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None if f.is_nan() => Value::String("NaN".into()),
        None if f > 0.0 => Value::String("Infinity".into()),
        None => Value::String("-Infinity".into()),
    };
    match value {
        Avro::Null => Value::Null,
        Avro::Boolean(b) => Value::Bool(b),
        Avro::Int(i) | Avro::Date(i) | Avro::TimeMillis(i) => json!(i),
        Avro::Long(l)
        | Avro::TimeMicros(l)
        | Avro::TimestampMillis(l)
        | Avro::TimestampMicros(l)
        | Avro::TimestampNanos(l)
        | Avro::LocalTimestampMillis(l)
        | Avro::LocalTimestampMicros(l)
        | Avro::LocalTimestampNanos(l) => json!(l),
        Avro::Float(f) => float(f64::from(f)),
        Avro::Double(d) => float(d),
        Avro::Bytes(b) | Avro::Fixed(_, b) => b64(&b),
        Avro::String(s) | Avro::Enum(_, s) => Value::String(s),
        Avro::Union(_, inner) => to_json(*inner),
        Avro::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Avro::Map(entries) => {
            // sorted, so that the same value gives the same text
            let sorted: std::collections::BTreeMap<String, Avro> = entries.into_iter().collect();
            Value::Object(sorted.into_iter().map(|(k, v)| (k, to_json(v))).collect())
        }
        Avro::Record(fields) => {
            Value::Object(fields.into_iter().map(|(k, v)| (k, to_json(v))).collect())
        }
        Avro::Decimal(d) => match <Vec<u8>>::try_from(&d) {
            Ok(bytes) => b64(&bytes),
            Err(_) => Value::Null,
        },
        Avro::BigDecimal(d) => Value::String(d.to_string()),
        Avro::Uuid(u) => Value::String(u.to_string()),
        Avro::Duration(d) => json!({
            "months": u32::from(d.months()),
            "days": u32::from(d.days()),
            "millis": u32::from(d.millis()),
        }),
    }
}

/// Encodes `value` as Avro binary with `schema`: objects fill records
/// (missing fields take their defaults) and maps, a union takes the first
/// branch the value fits, integers widen to `long`, `float` and `double`.
pub fn encode(schema: &AvroSchema, value: &Value) -> Result<Vec<u8>, String> {
    let avro = Avro::from(value.clone())
        .resolve_schemata(schema.schema(), schema.schemata())
        .map_err(|e| format!("the value does not fit the Avro schema: {e}"))?;
    apache_avro::to_avro_datum_schemata(schema.schema(), schema.schemata(), avro)
        .map_err(|e| e.to_string())
}

/// An Avro schema for `value`: an object is a record (named
/// `ConnectDefault`, nested ones after their field), `null` is `null`, a
/// boolean `boolean`, an integer `long`, another number `double`, a
/// string `string`, an array of its first element's type (`string` when
/// empty). Fields that are null are `["null", "string"]` with default
/// null.
pub fn infer(value: &Value) -> Result<Value, String> {
    let mut record = infer_type(value, DEFAULT_NAME)?;
    if let Value::Object(m) = &mut record {
        if m.get("type").and_then(Value::as_str) == Some("record") {
            m.insert("namespace".into(), Value::String(DEFAULT_NAMESPACE.into()));
        }
    }
    Ok(record)
}

fn infer_type(value: &Value, name: &str) -> Result<Value, String> {
    Ok(match value {
        Value::Null => json!("null"),
        Value::Bool(_) => json!("boolean"),
        Value::Number(n) if n.is_i64() || n.is_u64() => json!("long"),
        Value::Number(_) => json!("double"),
        Value::String(_) => json!("string"),
        Value::Array(items) => {
            let item = match items.first() {
                None => json!("string"),
                Some(first) => infer_type(first, &format!("{name}_item"))?,
            };
            for other in items.iter().skip(1) {
                if infer_type(other, &format!("{name}_item"))? != item {
                    return Err(format!(
                        "the array {name} mixes types: an Avro array has one item type"
                    ));
                }
            }
            json!({ "type": "array", "items": item })
        }
        Value::Object(fields) => {
            let mut out = Vec::with_capacity(fields.len());
            for (field, v) in fields {
                let field_name = avro_name(field)
                    .ok_or_else(|| format!("the field {field:?} is not a valid Avro name"))?;
                let mut f = Map::new();
                f.insert("name".into(), Value::String(field_name.clone()));
                if v.is_null() {
                    f.insert("type".into(), json!(["null", "string"]));
                    f.insert("default".into(), Value::Null);
                } else {
                    f.insert(
                        "type".into(),
                        infer_type(v, &format!("{name}_{field_name}"))?,
                    );
                }
                out.push(Value::Object(f));
            }
            json!({ "type": "record", "name": name, "fields": out })
        }
    })
}

/// `name` when it is a valid Avro name.
fn avro_name(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first = chars.next()?;
    let ok = (first.is_ascii_alphabetic() || first == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    ok.then(|| name.to_owned())
}

#[cfg(test)]
#[path = "avro_tests.rs"]
mod tests;
