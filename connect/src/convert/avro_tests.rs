use apache_avro::types::Value as Avro;
use registry::{Resolved, SchemaType};
use serde_json::json;

use super::*;

const ORDER: &str = r#"{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "long"},
    {"name": "customer", "type": {"type": "record", "name": "Customer", "fields": [
      {"name": "name", "type": "string"},
      {"name": "email", "type": ["null", "string"], "default": null}
    ]}},
    {"name": "status", "type": {"type": "enum", "name": "Status", "symbols": ["NEW", "PAID"]}},
    {"name": "lines", "type": {"type": "array", "items": "int"}},
    {"name": "notes", "type": {"type": "map", "values": "string"}},
    {"name": "blob", "type": "bytes"},
    {"name": "amount", "type": ["null", "double"], "default": null}
  ]
}"#;

fn schema(text: &str, references: &[Resolved]) -> AvroSchema {
    registry::avro::parse(text, references).expect("an Avro schema")
}

fn order_value(email: Avro) -> Avro {
    Avro::Record(vec![
        ("id".into(), Avro::Long(7)),
        (
            "customer".into(),
            Avro::Record(vec![
                ("name".into(), Avro::String("ada".into())),
                ("email".into(), email),
            ]),
        ),
        ("status".into(), Avro::Enum(1, "PAID".into())),
        (
            "lines".into(),
            Avro::Array(vec![Avro::Int(1), Avro::Int(2)]),
        ),
        (
            "notes".into(),
            Avro::Map([("k".to_owned(), Avro::String("v".into()))].into()),
        ),
        ("blob".into(), Avro::Bytes(vec![0xff, 0x00])),
        ("amount".into(), Avro::Union(1, Box::new(Avro::Double(9.5)))),
    ])
}

#[test]
fn a_nested_record_with_unions_decodes_to_json() {
    let s = schema(ORDER, &[]);
    let value = order_value(Avro::Union(
        1,
        Box::new(Avro::String("ada@example.com".into())),
    ));
    let bytes = apache_avro::to_avro_datum(s.schema(), value).expect("encodes");
    let decoded = decode(&s, &bytes).expect("decodes");
    assert_eq!(
        decoded,
        json!({
            "id": 7,
            "customer": {"name": "ada", "email": "ada@example.com"},
            "status": "PAID",
            "lines": [1, 2],
            "notes": {"k": "v"},
            "blob": "/wA=",
            "amount": 9.5
        })
    );
    // the null branch of a union is null
    let value = order_value(Avro::Union(0, Box::new(Avro::Null)));
    let bytes = apache_avro::to_avro_datum(s.schema(), value).expect("encodes");
    assert_eq!(
        decode(&s, &bytes).expect("decodes")["customer"]["email"],
        Value::Null
    );
}

#[test]
fn a_type_from_a_referenced_schema_is_resolved() {
    let customer = r#"{"type": "record", "name": "Customer", "namespace": "shop",
        "fields": [{"name": "name", "type": "string"}]}"#;
    let order = r#"{"type": "record", "name": "Order", "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "shop.Customer"}]}"#;
    let s = schema(
        order,
        &[Resolved {
            name: "shop.Customer".into(),
            schema_type: SchemaType::Avro,
            schema: customer.into(),
        }],
    );
    // long 3 (zigzag 6), then the string "ada"
    let bytes = [6u8, 6, b'a', b'd', b'a'];
    assert_eq!(
        decode(&s, &bytes).expect("decodes"),
        json!({"id": 3, "customer": {"name": "ada"}})
    );
}

#[test]
fn truncated_or_overlong_payloads_are_errors() {
    let s = schema(ORDER, &[]);
    let value = order_value(Avro::Union(0, Box::new(Avro::Null)));
    let bytes = apache_avro::to_avro_datum(s.schema(), value).expect("encodes");
    assert!(decode(&s, &bytes[..bytes.len() - 3]).is_err(), "cut short");
    // a string cut short (apache-avro alone reads it as null)
    let user = schema(
        r#"{"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"}]}"#,
        &[],
    );
    let err = decode(&user, b"\x06ad").expect_err("2 bytes of 3");
    assert!(err.contains("ends before"), "{err}");
    let mut longer = bytes.clone();
    longer.push(0);
    let err = decode(&s, &longer).expect_err("a byte too many");
    assert!(err.contains("1 bytes are left"), "{err}");
}

#[test]
fn json_encodes_with_a_schema_and_decodes_back() {
    let s = schema(ORDER, &[]);
    let value = json!({
        "id": 7,
        "customer": {"name": "ada"},
        "status": "NEW",
        "lines": [3],
        "notes": {},
        "blob": "",
        "amount": 2.5
    });
    let bytes = encode(&s, &value).expect("fits");
    let back = decode(&s, &bytes).expect("decodes");
    assert_eq!(
        back["customer"],
        json!({"name": "ada", "email": null}),
        "defaults fill"
    );
    assert_eq!(back["amount"], json!(2.5));
    assert_eq!(back["status"], json!("NEW"));
    let err = encode(&s, &json!({"id": "seven"})).expect_err("does not fit");
    assert!(err.contains("does not fit"), "{err}");
}

#[test]
fn an_inferred_schema_is_valid_and_writes_its_value() {
    let value = json!({"seq": 4, "user": "ada", "score": 0.5, "ok": true, "tags": ["a", "b"],
                       "where": {"city": "Paris"}, "none": null});
    let inferred = infer(&value).expect("inferred");
    assert_eq!(inferred["name"], json!(DEFAULT_NAME));
    assert_eq!(inferred["namespace"], json!(DEFAULT_NAMESPACE));
    let s = schema(&inferred.to_string(), &[]);
    let back = decode(&s, &encode(&s, &value).expect("fits")).expect("decodes");
    assert_eq!(back, value);
    assert!(infer(&json!({"bad name": 1})).is_err());
    assert!(infer(&json!({"mixed": [1, "a"]})).is_err());
}
