//! Broker-side schema validation against the real logs and the metastore's
//! registry: what a topic with `confluent.value.schema.validation` or
//! `confluent.key.schema.validation` takes and refuses, and how the refusal
//! names each record (KIP-467).

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use kafka_protocol::ResponseError;
use metastore::registry::{RegistryCommand, RegistryOutput, StoredSchema};

use super::test_support::*;
use crate::broker::Broker;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    without_validation_a_topic_takes_any_value,
    value_validation_takes_registered_ids_and_names_each_refused_record,
    key_validation_checks_keys_and_leaves_values_alone,
);

/// Creates a one-partition topic with `configs`.
async fn create_with(b: &Broker, name: &str, configs: &[(&str, &str)]) {
    let req = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_string(name.into())))
            .with_num_partitions(1)
            .with_replication_factor(1)
            .with_configs(
                configs
                    .iter()
                    .map(|(k, v)| {
                        create_topics_request::CreatableTopicConfig::default()
                            .with_name(StrBytes::from_string((*k).into()))
                            .with_value(Some(StrBytes::from_string((*v).into())))
                    })
                    .collect(),
            ),
    ]);
    let created: CreateTopicsResponse = call(b, ApiKey::CreateTopics, 5, &req).await;
    assert_eq!(
        created.topics[0].error_code, 0,
        "{:?}",
        created.topics[0].error_message
    );
}

/// Registers an Avro record schema named `name` under `subject` as its
/// next version; returns its id and version.
async fn register(b: &Broker, subject: &str, name: &str) -> (i32, i32) {
    let text = format!(r#"{{"type":"record","name":"{name}","fields":[]}}"#);
    let expect_latest = b.node.catalog.read(|s| {
        s.registry()
            .subject(subject)
            .and_then(|s| s.latest_live())
            .map(|(v, _)| v)
    });
    let out = b
        .node
        .catalog
        .registry_command(RegistryCommand::Register {
            subject: subject.into(),
            schema: StoredSchema {
                schema_type: "AVRO".into(),
                schema: text.clone(),
                canonical: text,
                references: Vec::new(),
            },
            expect_latest,
            id: None,
            version: None,
        })
        .await
        .expect("registered");
    match out {
        RegistryOutput::Registered { id, version } => (id, version),
        other => panic!("registering answered {other:?}"),
    }
}

/// Bytes in the registry's wire format: magic byte 0, the id, a payload.
fn wire(id: i32) -> Option<Vec<u8>> {
    let mut v = vec![0u8];
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(b"payload");
    Some(v)
}

fn text(s: &str) -> Option<Vec<u8>> {
    Some(s.as_bytes().to_vec())
}

/// A record's key and value (`None`: null).
type KeyValue = (Option<Vec<u8>>, Option<Vec<u8>>);

/// One batch whose record `i` has key `records[i].0` and value
/// `records[i].1`.
fn batch_of(records: &[KeyValue], compression: Compression) -> Bytes {
    let records: Vec<Record> = records
        .iter()
        .enumerate()
        .map(|(i, (key, value))| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: i as i32,
            timestamp: 1_700_000_000_000 + i as i64,
            key: key.clone().map(Bytes::from),
            value: value.clone().map(Bytes::from),
            headers: Default::default(),
        })
        .collect();
    let mut buf = bytes::BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        &records,
        &RecordEncodeOptions {
            version: 2,
            compression,
        },
    )
    .expect("a batch encodes");
    buf.freeze()
}

/// Values only, no keys.
fn values(values: &[Option<Vec<u8>>], compression: Compression) -> Bytes {
    let records: Vec<_> = values.iter().map(|v| (None, v.clone())).collect();
    batch_of(&records, compression)
}

/// The indexes and messages of a refusal's record errors.
fn record_errors(p: &produce_response::PartitionProduceResponse) -> Vec<(i32, String)> {
    p.record_errors
        .iter()
        .map(|e| {
            (
                e.batch_index,
                e.batch_index_error_message
                    .as_ref()
                    .map(|m| m.to_string())
                    .unwrap_or_default(),
            )
        })
        .collect()
}

/// Validation is off by default: values and keys of any form are taken,
/// even with ids the registry has never seen.
async fn without_validation_a_topic_takes_any_value(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create(b, "free", 1).await;
    let anything = batch_of(
        &[
            (None, text("{\"plain\":\"json\"}")),
            (text("k"), None),
            (wire(4242), wire(999)),
            (None, Some(vec![0, 0])),
        ],
        Compression::None,
    );
    let taken = produce(b, "free", anything).await;
    assert_eq!((taken.error_code, taken.base_offset), (0, 0));
    // explicitly off is off too
    create_with(b, "off", &[("confluent.value.schema.validation", "false")]).await;
    let taken = produce(b, "off", values(&[text("x")], Compression::None)).await;
    assert_eq!(taken.error_code, 0);
}

/// With value validation on, a record's value must be magic byte 0 and the
/// id of a live version of `<topic>-value`. Every other record is named
/// with the reason, and nothing of its batch is written.
async fn value_validation_takes_registered_ids_and_names_each_refused_record(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create_with(
        b,
        "orders",
        &[("confluent.value.schema.validation", "true")],
    )
    .await;

    // no version registered yet: nothing passes
    let early = produce(b, "orders", values(&[wire(1)], Compression::None)).await;
    assert_eq!(early.error_code, ResponseError::InvalidRecord.code());

    let (live, _) = register(b, "orders-value", "Order").await;
    let (elsewhere, _) = register(b, "payments-value", "Payment").await;
    let (deleted, deleted_version) = register(b, "orders-value", "OrderV2").await;
    b.node
        .catalog
        .registry_command(RegistryCommand::DeleteVersion {
            subject: "orders-value".into(),
            version: deleted_version,
            permanent: false,
        })
        .await
        .expect("soft-deleted");

    for compression in [Compression::None, Compression::Gzip, Compression::Zstd] {
        let mixed = values(
            &[
                wire(live),
                text("{\"plain\":\"json\"}"),
                wire(deleted),
                wire(elsewhere),
                wire(live),
                None,
                Some(vec![0, 0, 0]),
                wire(9999),
            ],
            compression,
        );
        let refused = produce(b, "orders", mixed).await;
        assert_eq!(
            refused.error_code,
            ResponseError::InvalidRecord.code(),
            "{compression:?}"
        );
        let errors = record_errors(&refused);
        let named: Vec<i32> = errors.iter().map(|(i, _)| *i).collect();
        assert_eq!(named, vec![1, 2, 3, 5, 6, 7], "{compression:?}");
        for (i, why) in &errors {
            assert!(why.starts_with(&format!("record {i}: value ")), "{why}");
        }
        assert!(
            errors[0].1.contains("not the magic byte 0"),
            "{:?}",
            errors[0]
        );
        assert_eq!(
            errors[1].1,
            format!("record 2: value has schema id {deleted}, which is not a version of subject orders-value"),
            "a soft-deleted version no longer counts"
        );
        assert_eq!(
            errors[2].1,
            format!("record 3: value has schema id {elsewhere}, which is not a version of subject orders-value"),
            "an id of another subject does not count"
        );
        assert!(errors[3].1.contains("value is null"), "{:?}", errors[3]);
        assert!(errors[4].1.contains("is 3 bytes"), "{:?}", errors[4]);
        assert!(errors[5].1.contains("schema id 9999"), "{:?}", errors[5]);
        let message = refused
            .error_message
            .as_ref()
            .map(|m| m.to_string())
            .unwrap_or_default();
        assert!(message.contains("schema validation"), "{message}");
    }

    // the refused batches left nothing behind; keys are not checked
    let good = batch_of(
        &[(None, wire(live)), (text("any key"), wire(live))],
        Compression::Gzip,
    );
    let taken = produce(b, "orders", good).await;
    assert_eq!((taken.error_code, taken.base_offset), (0, 0));
}

/// Key validation checks keys against `<topic>-key`, and values not at all.
async fn key_validation_checks_keys_and_leaves_values_alone(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    create_with(b, "users", &[("confluent.key.schema.validation", "true")]).await;
    let (key_id, _) = register(b, "users-key", "UserId").await;
    let (value_id, _) = register(b, "users-value", "User").await;

    let taken = produce(
        b,
        "users",
        batch_of(
            &[
                (wire(key_id), text("not wire format")),
                (wire(key_id), None),
            ],
            Compression::None,
        ),
    )
    .await;
    assert_eq!((taken.error_code, taken.base_offset), (0, 0));

    let refused = produce(
        b,
        "users",
        batch_of(
            &[
                (text("k0"), wire(value_id)),
                (wire(key_id), wire(value_id)),
                (wire(value_id), wire(value_id)),
                (None, wire(value_id)),
            ],
            Compression::Lz4,
        ),
    )
    .await;
    assert_eq!(refused.error_code, ResponseError::InvalidRecord.code());
    let errors = record_errors(&refused);
    let named: Vec<i32> = errors.iter().map(|(i, _)| *i).collect();
    assert_eq!(named, vec![0, 2, 3]);
    assert_eq!(
        errors[1].1,
        format!(
            "record 2: key has schema id {value_id}, which is not a version of subject users-key"
        )
    );
    assert!(errors[2].1.contains("key is null"), "{:?}", errors[2]);

    // both on: a record failing both is named once, with both reasons
    create_with(
        b,
        "both",
        &[
            ("confluent.key.schema.validation", "true"),
            ("confluent.value.schema.validation", "true"),
        ],
    )
    .await;
    let refused = produce(
        b,
        "both",
        batch_of(&[(text("k"), text("v"))], Compression::None),
    )
    .await;
    let errors = record_errors(&refused);
    assert_eq!(errors.len(), 1);
    assert!(
        errors[0].1.starts_with("record 0: key ") && errors[0].1.contains("; value "),
        "{:?}",
        errors[0]
    );
}
