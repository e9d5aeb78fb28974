use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, Value as Proto};
use serde_json::json;

use super::*;

const FILE: &str = r#"
syntax = "proto3";
package shop;
message Header { string trace = 1; }
message Order {
  message Customer { string name = 1; }
  enum Status { NEW = 0; PAID = 1; }
  int64 id = 1;
  Customer customer = 2;
  Status status = 3;
  repeated string tags = 4;
  map<string, int32> counts = 5;
  bytes blob = 6;
  optional string note = 7;
}
"#;

fn schema() -> ProtobufSchema {
    registry::protobuf::parse(FILE, &[]).expect("a .proto file")
}

#[test]
fn the_message_index_names_the_type_even_when_not_the_first() {
    let s = schema();
    let order = message_type(&s, &[1]).expect("Order");
    assert_eq!(order.full_name(), "shop.Order");
    let customer = message_type(&s, &[1, 0]).expect("Order.Customer");
    assert_eq!(customer.full_name(), "shop.Order.Customer");
    assert!(
        message_type(&s, &[2]).is_err(),
        "two top-level messages only"
    );
    assert!(
        message_type(&s, &[0, 0]).is_err(),
        "Header has no nested message"
    );

    let mut m = DynamicMessage::new(order);
    m.set_field_by_name("id", Proto::I64(9));
    let mut c = DynamicMessage::new(customer);
    c.set_field_by_name("name", Proto::String("ada".into()));
    m.set_field_by_name("customer", Proto::Message(c));
    m.set_field_by_name("status", Proto::EnumNumber(1));
    m.set_field_by_name(
        "tags",
        Proto::List(vec![Proto::String("a".into()), Proto::String("b".into())]),
    );
    m.set_field_by_name(
        "counts",
        Proto::Map([(MapKey::String("x".into()), Proto::I32(2))].into()),
    );
    m.set_field_by_name("blob", Proto::Bytes(vec![1u8, 2].into()));
    let bytes = m.encode_to_vec();
    assert_eq!(
        decode(&s, &[1], &bytes).expect("decodes"),
        json!({
            "id": 9,
            "customer": {"name": "ada"},
            "status": "PAID",
            "tags": ["a", "b"],
            "counts": {"x": 2},
            "blob": "AQI=",
            "note": null
        })
    );
}

#[test]
fn unset_fields_take_their_defaults_or_null() {
    let s = schema();
    let decoded = decode(&s, &[1], &[]).expect("an empty message");
    assert_eq!(decoded["id"], json!(0));
    assert_eq!(decoded["status"], json!("NEW"));
    assert_eq!(decoded["customer"], Value::Null);
    assert_eq!(decoded["note"], Value::Null);
}

#[test]
fn bytes_that_are_not_the_message_are_an_error() {
    let s = schema();
    // field 1 as a length-delimited value whose length runs past the end
    let err = decode(&s, &[1], &[0x0a, 0x05, 0x01]).expect_err("truncated");
    assert!(err.contains("shop.Order"), "{err}");
}
