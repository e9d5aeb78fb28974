use super::*;
use crate::batch::{validate, Limits};

const LIMITS: Limits = Limits {
    require_keys: false,
    sparse_offsets: false,
    max_batch_bytes: 1 << 20,
    max_uncompressed_bytes: 1 << 24,
};

#[test]
fn a_marker_is_a_valid_control_batch_that_reads_back() {
    for (control, epoch) in [(ControlType::Commit, 7), (ControlType::Abort, 0)] {
        let bytes = encode_marker(42, 3, control, epoch, 1_700_000_000_000);
        let b = validate(&bytes, 0, LIMITS).expect("a marker passes the batch checks");
        let h = b.header;
        assert!(h.is_control() && h.is_transactional());
        assert_eq!(
            (h.producer_id, h.producer_epoch, h.records_count),
            (42, 3, 1)
        );
        assert_eq!(h.base_sequence, -1);
        assert_eq!(read_marker(&h, &bytes), Some((control, epoch)));
    }
}

#[test]
fn a_marker_that_does_not_parse_is_none_not_a_panic() {
    let bytes = encode_marker(1, 0, ControlType::Abort, 5, 0);
    let h = validate(&bytes, 0, LIMITS).unwrap().header;
    for cut in 0..bytes.len() {
        let _ = read_marker(&h, &bytes[..cut]);
    }
    let mut odd = bytes.clone();
    odd[61 + 1 + 3 + 1 + 3] = 9; // the control type's low byte
    assert_eq!(read_marker(&h, &odd), None);
}

#[test]
fn a_fetch_names_the_aborted_transactions_it_overlaps() {
    let mut idx = AbortedIndex::default();
    let t = |pid, first, last| AbortedTxn {
        producer_id: pid,
        first_offset: first,
        last_offset: last,
    };
    idx.insert(t(1, 0, 10));
    idx.insert(t(2, 5, 20));
    idx.insert(t(3, 30, 40));
    // a fetch of [12, 30) overlaps the second only; [0, 100) all three
    assert_eq!(idx.overlapping(12, 30), vec![t(2, 5, 20)]);
    assert_eq!(idx.overlapping(0, 100).len(), 3);
    assert_eq!(idx.overlapping(41, 100), vec![]);
    idx.truncate_from(20);
    assert_eq!(idx.len(), 1);
    idx.insert(t(2, 5, 20));
    idx.remove_below(11);
    assert_eq!(idx.overlapping(0, 100), vec![t(2, 5, 20)]);
}

#[test]
fn an_index_file_round_trips_and_refuses_damage() {
    let entries = vec![
        AbortedTxn {
            producer_id: 9,
            first_offset: 100,
            last_offset: 180,
        },
        AbortedTxn {
            producer_id: -1,
            first_offset: 0,
            last_offset: i64::MAX,
        },
    ];
    let bytes = encode_entries(&entries);
    assert_eq!(decode_entries(&bytes), Some(entries.clone()));
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 1;
        assert_eq!(decode_entries(&bad), None);
        assert_ne!(decode_entries(&bytes[..i]), Some(entries.clone()));
    }
}
