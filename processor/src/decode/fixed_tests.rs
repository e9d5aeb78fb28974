use super::*;
use crate::filter::Predicates;
use crate::testing::binary_record;
use arrow_array::Array;

fn pipeline(endian: &str) -> Pipeline {
    Pipeline::parse(&format!(
        r#"
name: t
source:
  bootstrap: "b:9092"
  topic: t
  format: fixed
  {endian}
  layout: [{{name: ts, type: i64}}, {{name: sym, type: "str:8"}}, {{name: price, type: f64}}, {{name: size, type: i32}}, {{name: flags, type: u16}}]
  event_time: ts
  key: sym
window: {{type: tumbling, size: 1s}}
filter: [{{any: [{{field: size, op: gt, value: 100}}, {{field: sym, op: eq, value: MSFT}}]}}]
aggregates: [{{op: count, as: n}}, {{op: wavg, field: price, weight: size, as: vwap}}, {{op: distinct, field: flags, as: f}}]
sink: {{type: parquet, url: "file:///tmp/x"}}
"#
    ))
    .unwrap()
}

/// A tick in the layout: 8 + 8 + 8 + 4 + 2 = 30 bytes.
fn tick(big: bool, ts: i64, sym: &[u8], price: f64, size: i32, flags: u16) -> Vec<u8> {
    let mut v = Vec::new();
    let mut padded = [0u8; 8];
    padded[..sym.len()].copy_from_slice(sym);
    if big {
        v.extend(ts.to_be_bytes());
        v.extend(padded);
        v.extend(price.to_be_bytes());
        v.extend(size.to_be_bytes());
        v.extend(flags.to_be_bytes());
    } else {
        v.extend(ts.to_le_bytes());
        v.extend(padded);
        v.extend(price.to_le_bytes());
        v.extend(size.to_le_bytes());
        v.extend(flags.to_le_bytes());
    }
    v
}

fn check_ticks(endian: &str, big: bool) {
    let mut d = FixedDecoder::new(&pipeline(endian));
    let mut long = tick(big, 3_000, b"GOOG", 3.0, 300, 3);
    long.extend_from_slice(b"trailing bytes are ignored");
    let records = [
        binary_record(0, &tick(big, 1_000, b"AAPL", 1.25, 200, 1)),
        binary_record(1, &tick(big, -2_000, b"MSFT  \0\0", -2.5, -1, 65_535)),
        binary_record(2, &long),
    ];
    let cols = d.decode(0, &records);
    assert_eq!(d.skipped(), 0);
    let keys: Vec<_> = (0..cols.len()).map(|i| cols.keys.value(i)).collect();
    assert_eq!(keys, ["AAPL", "MSFT", "GOOG"], "NULs and spaces trimmed");
    assert_eq!(
        cols.event_times.values().to_vec(),
        vec![1_000, -2_000, 3_000]
    );
    let (price, size) = (&cols.values[0], &cols.values[1]);
    assert_eq!(price.values().to_vec(), vec![1.25, -2.5, 3.0]);
    assert_eq!(size.values().to_vec(), vec![200.0, -1.0, 300.0]);
    assert_eq!(cols.hashes[0].value(1), crate::sketch::hash("65535"));
    let (kept, dropped) = Predicates::new(&pipeline(endian)).apply(cols).unwrap();
    assert_eq!(dropped, 0, "size > 100 or sym = MSFT holds for each");
    assert_eq!(kept.len(), 3);
}

#[test]
fn little_endian_values_are_read_by_offset() {
    check_ticks("", false);
    check_ticks("endian: little", false);
}

#[test]
fn big_endian_values_are_read_by_offset() {
    check_ticks("endian: big", true);
}

#[test]
fn short_values_and_unusable_keys_are_skipped_and_counted() {
    let mut d = FixedDecoder::new(&pipeline(""));
    let good = tick(false, 1_000, b"AAPL", 1.0, 1, 0);
    let mut not_utf8 = good.clone();
    not_utf8[8] = 0xff;
    let mut blank = good.clone();
    blank[8..16].copy_from_slice(b"        ");
    let records = [
        binary_record(0, &good[..good.len() - 1]),
        binary_record(1, b""),
        binary_record(2, &not_utf8),
        binary_record(3, &good),
        binary_record(4, &blank),
    ];
    let cols = d.decode(0, &records);
    assert_eq!(cols.offsets.values().to_vec(), vec![3, 4]);
    assert_eq!(cols.keys.value(0), "AAPL");
    assert_eq!(cols.keys.value(1), "", "a blank string is an empty key");
    assert_eq!(d.skipped(), 3);
    assert!(cols.values[0].is_valid(1));
}

proptest::proptest! {
    /// Any bytes are a row (long enough, a UTF-8 key) or a skipped record.
    #[test]
    fn arbitrary_bytes_are_decoded_or_skipped(value in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64), big in proptest::prelude::any::<bool>()) {
        let mut d = FixedDecoder::new(&pipeline(if big { "endian: big" } else { "" }));
        let cols = d.decode(0, &[binary_record(0, &value)]);
        proptest::prop_assert_eq!(cols.len() as u64 + d.skipped(), 1);
        proptest::prop_assert_eq!(cols.len() == 1, value.len() >= 30 && std::str::from_utf8(&value[8..16]).is_ok());
    }
}
