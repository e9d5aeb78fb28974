use std::cell::Cell;
use std::io::{self, Read, Write};
use std::rc::Rc;

use super::*;

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

/// One v2 record with offset delta `index`, a null key and a value of
/// `value_len` zeros.
fn record(index: i64, value_len: usize) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    zigzag(0, &mut body); // timestamp delta
    zigzag(index, &mut body);
    zigzag(-1, &mut body); // null key
    zigzag(value_len as i64, &mut body);
    body.resize(body.len() + value_len, 0);
    zigzag(0, &mut body); // no headers
    let mut out = Vec::new();
    zigzag(body.len() as i64, &mut out);
    out.extend_from_slice(&body);
    out
}

fn records(n: i64, value_len: usize) -> Vec<u8> {
    (0..n).flat_map(|i| record(i, value_len)).collect()
}

/// An endless stream of well-formed records, standing in for a decoder
/// that never runs dry; counts the bytes handed out.
struct Endless {
    next: i64,
    value_len: usize,
    pending: Vec<u8>,
    pos: usize,
    handed_out: Rc<Cell<u64>>,
}

impl Endless {
    fn new(value_len: usize) -> (Endless, Rc<Cell<u64>>) {
        let count = Rc::new(Cell::new(0));
        let e = Endless {
            next: 0,
            value_len,
            pending: Vec::new(),
            pos: 0,
            handed_out: count.clone(),
        };
        (e, count)
    }
}

impl Read for Endless {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.pos == self.pending.len() {
            self.pending = record(self.next, self.value_len);
            self.pos = 0;
            self.next += 1;
        }
        let n = (self.pending.len() - self.pos).min(out.len());
        out[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        self.handed_out.set(self.handed_out.get() + n as u64);
        Ok(n)
    }
}

#[test]
fn a_decoder_that_never_ends_is_stopped_at_the_cap_without_reading_past_it() {
    let cap = 1 << 20;
    let (source, handed_out) = Endless::new(1_000);
    let r = walk_stream(Compression::Gzip, source, i32::MAX, cap, PLAIN);
    assert!(
        matches!(r, Err(Refusal::OverCap { cap: c }) if c == cap),
        "{r:?}"
    );
    assert!(
        handed_out.get() <= cap + 1,
        "pulled {} bytes with a cap of {cap}",
        handed_out.get()
    );
}

#[test]
fn a_record_beyond_the_declared_count_stops_the_walk_at_once() {
    let (source, handed_out) = Endless::new(10);
    let r = walk_stream(Compression::Zstd, source, 3, 1 << 30, PLAIN);
    assert!(matches!(r, Err(Refusal::TooMany { declared: 3 })), "{r:?}");
    assert!(handed_out.get() <= READ_CHUNK as u64, "one read, no more");
}

#[test]
fn uncompressed_records_must_match_the_declared_count_exactly() {
    let bytes = records(5, 3);
    assert!(check(Compression::None, &bytes, 5, 0).is_ok());
    assert!(matches!(
        check(Compression::None, &bytes, 6, 0),
        Err(Refusal::TooFew {
            found: 5,
            declared: 6
        })
    ));
    assert!(matches!(
        check(Compression::None, &bytes, 4, 0),
        Err(Refusal::TooMany { declared: 4 })
    ));
}

#[test]
fn records_that_do_not_parse_are_refused_with_their_index() {
    let mut bytes = records(2, 3);
    bytes.push(0x01); // a third record of length -1
    let r = check(Compression::None, &bytes, 3, u64::MAX);
    assert!(
        matches!(r, Err(Refusal::Malformed { index: 2, .. })),
        "{r:?}"
    );

    let whole = records(2, 30);
    let cut = &whole[..whole.len() - 1];
    let r = check(Compression::None, cut, 2, u64::MAX);
    assert!(
        matches!(&r, Err(Refusal::Malformed { index: 1, reason }) if reason.contains("past the end")),
        "{r:?}"
    );

    let mut out_of_order = record(0, 3);
    out_of_order.extend(record(5, 3));
    let r = check(Compression::None, &out_of_order, 2, u64::MAX);
    assert!(
        matches!(&r, Err(Refusal::Malformed { index: 1, reason }) if reason.contains("offset delta 5")),
        "{r:?}"
    );
}

#[test]
fn a_record_whose_length_alone_passes_the_cap_is_refused_before_its_body_is_read() {
    let mut bytes = Vec::new();
    zigzag(1 << 30, &mut bytes);
    bytes.extend_from_slice(&[0; 16]);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&bytes).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let r = check(Compression::Gzip, &gz, 1, 1 << 20);
    assert!(matches!(r, Err(Refusal::OverCap { .. })), "{r:?}");
}

fn xerial(blocks: &[&[u8]]) -> Vec<u8> {
    let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    for b in blocks {
        let c = snap::raw::Encoder::new().compress_vec(b).expect("snappy");
        out.extend_from_slice(&(c.len() as u32).to_be_bytes());
        out.extend_from_slice(&c);
    }
    out
}

#[test]
fn snappy_is_read_in_xerial_blocks_or_as_one_raw_block() {
    let plain = records(40, 100);
    let (a, b) = plain.split_at(1_000);
    assert!(check(Compression::Snappy, &xerial(&[a, b]), 40, 1 << 20).is_ok());
    let raw = snap::raw::Encoder::new()
        .compress_vec(&plain)
        .expect("snappy");
    assert!(check(Compression::Snappy, &raw, 40, 1 << 20).is_ok());
    assert!(matches!(
        check(Compression::Snappy, &raw, 40, 1_000),
        Err(Refusal::OverCap { cap: 1_000 })
    ));
    assert!(matches!(
        check(Compression::Snappy, &xerial(&[a, b]), 40, 2_000),
        Err(Refusal::OverCap { cap: 2_000 })
    ));
    let mut cut = xerial(&[a, b]);
    cut.truncate(cut.len() - 3);
    assert!(matches!(
        check(Compression::Snappy, &cut, 40, 1 << 20),
        Err(Refusal::Codec {
            codec: Compression::Snappy,
            ..
        })
    ));
}

#[test]
fn streams_cut_short_do_not_decode_for_any_codec() {
    let plain = records(50, 200);
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&plain).expect("gzip");
    let gz = gz.finish().expect("gzip");
    let zs = zstd::stream::encode_all(plain.as_slice(), 3).expect("zstd");
    let mut lz = lz4::EncoderBuilder::new().build(Vec::new()).expect("lz4");
    lz.write_all(&plain).expect("lz4");
    let (lz, done) = lz.finish();
    done.expect("lz4");
    for (codec, bytes) in [
        (Compression::Gzip, gz),
        (Compression::Zstd, zs),
        (Compression::Lz4, lz),
    ] {
        assert!(check(codec, &bytes, 50, 1 << 20).is_ok(), "{codec:?} whole");
        let cut = &bytes[..bytes.len() - 4];
        let r = check(codec, cut, 50, 1 << 20);
        assert!(
            matches!(r, Err(Refusal::Codec { codec: c, .. }) if c == codec),
            "{codec:?} cut: {r:?}"
        );
    }
}

/// One v2 record with offset delta `index` and the key `key` (`None`: a
/// null key), value "v".
fn keyed_record(index: i64, key: Option<&[u8]>) -> Vec<u8> {
    let mut body = vec![0u8]; // attributes
    zigzag(0, &mut body); // timestamp delta
    zigzag(index, &mut body);
    match key {
        Some(k) => {
            zigzag(k.len() as i64, &mut body);
            body.extend_from_slice(k);
        }
        None => zigzag(-1, &mut body),
    }
    zigzag(1, &mut body);
    body.push(b'v');
    zigzag(0, &mut body); // no headers
    let mut out = Vec::new();
    zigzag(body.len() as i64, &mut out);
    out.extend_from_slice(&body);
    out
}

#[test]
fn a_compacted_topic_refuses_a_record_without_a_key_naming_it_in_any_codec() {
    let mixed: Vec<u8> = [Some(&b"a"[..]), Some(b""), None, Some(b"b"), None]
        .iter()
        .enumerate()
        .flat_map(|(i, k)| keyed_record(i as i64, *k))
        .collect();
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    gz.write_all(&mixed).unwrap();
    let gzipped = gz.finish().unwrap();
    for (codec, bytes) in [(Compression::None, &mixed), (Compression::Gzip, &gzipped)] {
        match check_keyed(codec, bytes, 5, 1 << 20, KEYED) {
            Err(Refusal::Keyless { indexes }) => {
                assert_eq!(indexes, vec![2, 4], "{codec:?}: each record without a key")
            }
            other => panic!("{codec:?}: {other:?}"),
        }
        assert!(
            check_keyed(codec, bytes, 5, 1 << 20, PLAIN).is_ok(),
            "{codec:?}: other topics take records without keys"
        );
    }
    // an empty key is a key, as in Kafka
    let keyed: Vec<u8> = (0..3).flat_map(|i| keyed_record(i, Some(b""))).collect();
    assert!(check_keyed(Compression::None, &keyed, 3, 1 << 20, KEYED).is_ok());
}

const PLAIN: Rules<'static> = Rules {
    keys: false,
    sparse_up_to: None,
    schemas: None,
};
const KEYED: Rules<'static> = Rules {
    keys: true,
    sparse_up_to: None,
    schemas: None,
};
