//! Any bytes handed to append give a valid append or a typed error; the
//! header parsers and record walker never panic or over-allocate.
#![no_main]

use std::sync::{Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use storage::batch::{self, BatchIter, Limits, RecordTimestamps};
use storage::{LogConfig, PartitionLog};

struct Fixture {
    _dir: tempfile::TempDir,
    log: PartitionLog,
}

fn fixture() -> &'static Mutex<Fixture> {
    static F: OnceLock<Mutex<Fixture>> = OnceLock::new();
    F.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let cfg = LogConfig {
            segment_bytes: 1 << 20,
            ..LogConfig::default()
        };
        let log = PartitionLog::open(dir.path(), cfg).expect("open log");
        Mutex::new(Fixture { _dir: dir, log })
    })
}

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_batch_bytes: 1 << 20,
        max_uncompressed_bytes: 64 << 20,
        // both walks: with and without the key check of compacted topics
        require_keys: data.first().is_some_and(|b| b & 1 == 1),
        sparse_offsets: data.first().is_some_and(|b| b & 2 == 2),
    };
    if let Ok(batches) = batch::validate_all(data, limits) {
        let total: usize = batches.iter().map(|b| b.len).sum();
        assert_eq!(total, data.len());
    }
    for item in BatchIter::new(data) {
        if let Ok((h, raw)) = item {
            assert_eq!(h.total_len(), Some(raw.len()));
            let n = RecordTimestamps::new(raw).count();
            assert!(n <= h.records_count.max(0) as usize);
        }
    }
    let mut f = fixture().lock().unwrap_or_else(|e| e.into_inner());
    let before = f.log.log_end_offset();
    let mut copy = data.to_vec();
    match f.log.append(&mut copy, 0, 0) {
        Ok(outcome) => assert!(outcome.info().last_offset >= before),
        Err(_) => assert_eq!(f.log.log_end_offset(), before),
    }
    if f.log.segments().len() > 8 {
        let end = f.log.log_end_offset();
        f.log.delete_records_before(end).expect("delete records");
    }
});
