//! Protobuf: a payload to JSON with the message type its message indexes
//! name in the registered file, through prost-reflect's `DynamicMessage`.
//!
//! Every field of the message is in the object, under its name in the
//! `.proto` file (as Connect's `ProtobufConverter` names a struct's
//! fields): unset scalars with their default, an unset message, oneof
//! member or optional field as null. 64-bit integers are numbers, enums
//! their value's name (the number when the file does not name it), bytes
//! base64, maps objects (keys as text), well-known types as the messages
//! they are (a `Timestamp` is `{"seconds": …, "nanos": …}`).

use base64::Engine as _;
use prost_reflect::{
    DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage as _, Value as Proto,
};
use registry::protobuf::ProtobufSchema;
use serde_json::{json, Map, Number, Value};

/// The message type `indexes` names: the `indexes[0]`th message of the
/// file, then the `indexes[i]`th message nested in it.
pub fn message_type(schema: &ProtobufSchema, indexes: &[i32]) -> Result<MessageDescriptor, String> {
    let nth = |mut it: Box<dyn Iterator<Item = MessageDescriptor> + '_>, i: i32| {
        usize::try_from(i).ok().and_then(|i| it.nth(i))
    };
    let file = schema.file();
    let Some((first, rest)) = indexes.split_first() else {
        return Err("no message index".into());
    };
    let mut message = nth(Box::new(file.messages()), *first).ok_or_else(|| {
        format!(
            "message index {first} is out of range: the file {} has {} message types",
            file.name(),
            file.messages().len()
        )
    })?;
    for i in rest {
        let parent = message.full_name().to_owned();
        message = nth(Box::new(message.child_messages()), *i)
            .ok_or_else(|| format!("message index {i} is out of range in {parent}"))?;
    }
    Ok(message)
}

/// Decodes `payload`, a message of the type `indexes` names.
pub fn decode(schema: &ProtobufSchema, indexes: &[i32], payload: &[u8]) -> Result<Value, String> {
    let desc = message_type(schema, indexes)?;
    let name = desc.full_name().to_owned();
    let message =
        DynamicMessage::decode(desc, payload).map_err(|e| format!("not a {name} message: {e}"))?;
    Ok(message_to_json(&message))
}

fn message_to_json(message: &DynamicMessage) -> Value {
    let mut out = Map::new();
    for field in message.descriptor().fields() {
        let value = if field.supports_presence() && !message.has_field(&field) {
            Value::Null
        } else {
            to_json(&message.get_field(&field), &field.kind())
        };
        out.insert(field.name().to_owned(), value);
    }
    Value::Object(out)
}

fn to_json(value: &Proto, kind: &Kind) -> Value {
    let float = |f: f64| match Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None if f.is_nan() => Value::String("NaN".into()),
        None if f > 0.0 => Value::String("Infinity".into()),
        None => Value::String("-Infinity".into()),
    };
    match value {
        Proto::Bool(b) => Value::Bool(*b),
        Proto::I32(i) => json!(i),
        Proto::I64(i) => json!(i),
        Proto::U32(u) => json!(u),
        Proto::U64(u) => json!(u),
        Proto::F32(f) => float(f64::from(*f)),
        Proto::F64(f) => float(*f),
        Proto::String(s) => Value::String(s.clone()),
        Proto::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Proto::EnumNumber(n) => match kind {
            Kind::Enum(e) => match e.get_value(*n) {
                Some(v) => Value::String(v.name().to_owned()),
                None => json!(n),
            },
            _ => json!(n),
        },
        Proto::Message(m) => message_to_json(m),
        Proto::List(items) => Value::Array(items.iter().map(|v| to_json(v, kind)).collect()),
        Proto::Map(entries) => {
            let value_kind = match kind {
                Kind::Message(entry) => entry.map_entry_value_field().kind(),
                other => other.clone(),
            };
            let sorted: std::collections::BTreeMap<String, Value> = entries
                .iter()
                .map(|(k, v)| (map_key(k), to_json(v, &value_kind)))
                .collect();
            Value::Object(sorted.into_iter().collect())
        }
    }
}

fn map_key(key: &MapKey) -> String {
    match key {
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(i) => i.to_string(),
        MapKey::I64(i) => i.to_string(),
        MapKey::U32(u) => u.to_string(),
        MapKey::U64(u) => u.to_string(),
        MapKey::String(s) => s.clone(),
    }
}

#[cfg(test)]
#[path = "protobuf_tests.rs"]
mod tests;
