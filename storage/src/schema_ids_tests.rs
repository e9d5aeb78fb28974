use std::io::Write;

use super::*;
use crate::records::{check_keyed, Compression, Refusal, Rules};

fn zigzag(v: i64, out: &mut Vec<u8>) {
    let mut raw = ((v << 1) ^ (v >> 63)) as u64;
    loop {
        let b = (raw & 0x7f) as u8;
        raw >>= 7;
        if raw == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn field(bytes: Option<&[u8]>, out: &mut Vec<u8>) {
    match bytes {
        Some(b) => {
            zigzag(b.len() as i64, out);
            out.extend_from_slice(b);
        }
        None => zigzag(-1, out),
    }
}

/// One v2 record with offset delta `index`.
fn record(index: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    zigzag(0, &mut body); // timestamp delta
    zigzag(index, &mut body);
    field(key, &mut body);
    field(value, &mut body);
    zigzag(0, &mut body); // no headers
    let mut out = Vec::new();
    zigzag(body.len() as i64, &mut out);
    out.extend_from_slice(&body);
    out
}

fn wire(id: i32) -> Vec<u8> {
    let mut v = vec![0u8];
    v.extend_from_slice(&id.to_be_bytes());
    v.extend_from_slice(b"avro");
    v
}

fn rules(schemas: &SchemaRule, keys: bool) -> Rules<'_> {
    Rules {
        keys,
        sparse_up_to: None,
        schemas: Some(schemas),
    }
}

fn values_of_orders() -> SchemaRule {
    SchemaRule {
        key: None,
        value: Some(SubjectIds::new("orders-value", [3, 7])),
    }
}

#[test]
fn ids_are_looked_up_in_the_subjects_set() {
    let ids = SubjectIds::new("orders-value", [7, 3, 7]);
    assert!(ids.admits(3) && ids.admits(7));
    assert!(!ids.admits(4));
    assert_eq!(ids.subject(), "orders-value");
    assert!(SchemaRule::default().is_empty());
}

#[test]
fn each_way_of_failing_says_why() {
    let ids = SubjectIds::new("orders-value", [3, 7]);
    assert_eq!(judge(Part::Value, &ids, 12, &[0, 0, 0, 0, 7]), None);
    let null = judge(Part::Value, &ids, -1, &[]).unwrap_or_default();
    assert!(null.contains("value is null"), "{null}");
    let short = judge(Part::Key, &ids, 3, &[0, 0, 0]).unwrap_or_default();
    assert!(short.starts_with("key is 3 bytes"), "{short}");
    let magic = judge(Part::Value, &ids, 9, b"{\"a\":").unwrap_or_default();
    assert!(magic.contains("byte 0x7b"), "{magic}");
    let unknown = judge(Part::Value, &ids, 9, &[0, 0, 0, 0, 17]).unwrap_or_default();
    assert_eq!(
        unknown,
        "value has schema id 17, which is not a version of subject orders-value"
    );
}

#[test]
fn the_record_walk_names_every_record_off_schema_in_any_codec() {
    let mixed: Vec<u8> = [
        record(0, Some(b"a long key, skipped"), Some(&wire(3))),
        record(1, None, Some(b"{}")),
        record(2, None, Some(&wire(4))),
        record(3, Some(b"k"), Some(&wire(7))),
        record(4, None, None),
    ]
    .concat();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&mixed).unwrap();
    let gzipped = gz.finish().unwrap();
    let schemas = values_of_orders();
    for (codec, bytes) in [(Compression::None, &mixed), (Compression::Gzip, &gzipped)] {
        match check_keyed(codec, bytes, 5, 1 << 20, rules(&schemas, false)) {
            Err(Refusal::Schema { records }) => {
                let named: Vec<i64> = records.iter().map(|(i, _)| *i).collect();
                assert_eq!(named, vec![1, 2, 4], "{codec:?}");
                assert_eq!(
                    records[1].1,
                    "record 2: value has schema id 4, which is not a version of subject orders-value"
                );
            }
            other => panic!("{codec:?}: {other:?}"),
        }
    }
    let good: Vec<u8> = (0..3)
        .flat_map(|i| record(i, Some(b"k"), Some(&wire(7))))
        .collect();
    assert!(check_keyed(Compression::None, &good, 3, 1 << 20, rules(&schemas, false)).is_ok());
}

#[test]
fn keyless_records_of_a_compacted_topic_are_refused_first() {
    let schemas = values_of_orders();
    let batch = [
        record(0, None, Some(b"x")),
        record(1, Some(b"k"), Some(b"y")),
    ]
    .concat();
    match check_keyed(Compression::None, &batch, 2, 1 << 20, rules(&schemas, true)) {
        Err(Refusal::Keyless { indexes }) => assert_eq!(indexes, vec![0]),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_key_or_value_running_past_its_record_is_malformed_not_a_panic() {
    let schemas = SchemaRule {
        key: Some(SubjectIds::new("t-key", [1])),
        value: Some(SubjectIds::new("t-value", [1])),
    };
    // the key claims 100 bytes of a record that holds far fewer
    let mut body = vec![0u8];
    zigzag(0, &mut body);
    zigzag(0, &mut body);
    zigzag(100, &mut body);
    body.extend_from_slice(&wire(1));
    zigzag(-1, &mut body);
    zigzag(0, &mut body);
    let mut bad = Vec::new();
    zigzag(body.len() as i64, &mut bad);
    bad.extend_from_slice(&body);
    bad.extend(record(1, Some(&wire(1)), Some(&wire(1))));
    match check_keyed(Compression::None, &bad, 2, 1 << 20, rules(&schemas, false)) {
        Err(Refusal::Malformed { index: 0, reason }) => {
            assert!(reason.contains("key"), "{reason}")
        }
        other => panic!("{other:?}"),
    }
    // a record cut off inside its value
    let whole = record(0, Some(&wire(1)), Some(&wire(1)));
    let cut = &whole[..whole.len() - 4];
    assert!(matches!(
        check_keyed(Compression::None, cut, 1, 1 << 20, rules(&schemas, false)),
        Err(Refusal::Malformed { index: 0, .. })
    ));
}
