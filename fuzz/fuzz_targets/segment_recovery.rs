//! Whatever a partition directory holds after a crash or a disk fault,
//! opening it gives a usable log (a prefix of the valid batches) or a typed
//! error, and never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use storage::{LogConfig, PartitionLog};

/// A valid uncompressed v2 batch of `n` empty records at `base`.
fn batch(base: i64, n: i32) -> Vec<u8> {
    let record = [12u8, 0, 0, 0, 1, 1, 0]; // length 6 (zigzag) + 6 bytes
    let mut b = vec![0u8; 61];
    let len = 49 + record.len() * n as usize;
    b[0..8].copy_from_slice(&base.to_be_bytes());
    b[8..12].copy_from_slice(&(len as i32).to_be_bytes());
    b[16] = 2;
    b[23..27].copy_from_slice(&(n - 1).to_be_bytes());
    b[43..51].copy_from_slice(&(-1i64).to_be_bytes());
    b[51..53].copy_from_slice(&(-1i16).to_be_bytes());
    b[53..57].copy_from_slice(&(-1i32).to_be_bytes());
    b[57..61].copy_from_slice(&n.to_be_bytes());
    for i in 0..n {
        let mut r = record;
        r[3] = (i as u8) << 1; // offset delta (zigzag)
        b.extend_from_slice(&r);
    }
    let crc = crc32c(&b[21..]);
    b[17..21].copy_from_slice(&crc.to_be_bytes());
    b
}

fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 != 0 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}

const FILES: [&str; 6] = [
    "00000000000000000000.log",
    "00000000000000000000.index",
    "00000000000000000000.timeindex",
    "00000000000000000000.snapshot",
    "leader-epoch-checkpoint",
    "log-start-offset",
];

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    // tmpfs keeps the many fsyncs of each iteration cheap.
    let shm = std::path::Path::new("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::tempdir_in(shm)
    } else {
        tempfile::tempdir()
    }
    .expect("temp dir");
    let cfg = LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    };
    // A valid log first, closed cleanly or not.
    let mut offset = 0i64;
    {
        let mut log = PartitionLog::open(dir.path(), cfg.clone()).expect("open");
        for i in 0..(sel % 16) as i32 {
            let mut b = batch(offset, 1 + i % 4);
            offset = log.append(&mut b, 0, 0).expect("append").info().last_offset + 1;
        }
        if sel & 0x10 != 0 {
            log.close().expect("close");
        }
    }
    // Then the fuzz input overwrites or extends one of its files.
    let name = FILES[usize::from(sel >> 5) % FILES.len()];
    let path = dir.path().join(name);
    let mut content = std::fs::read(&path).unwrap_or_default();
    if sel & 0x80 != 0 {
        content.extend_from_slice(rest);
    } else {
        let at = rest.first().map_or(0, |b| usize::from(*b) * content.len() / 256);
        content.truncate(at);
        content.extend_from_slice(rest.get(1..).unwrap_or_default());
    }
    std::fs::write(&path, content).expect("write");
    let _ = std::fs::remove_file(dir.path().join("clean-shutdown"));

    let Ok(mut log) = PartitionLog::open(dir.path(), cfg.clone()) else { return };
    let end = log.log_end_offset();
    let mut at = log.log_start_offset();
    while at < end {
        match log.read(at, 1 << 16, end) {
            Ok(s) if s.next_offset > at => at = s.next_offset,
            _ => at += 1,
        }
    }
    let _ = log.offset_for_timestamp(0);
    let _ = log.max_timestamp();
    let mut b = batch(0, 1);
    if log.append(&mut b, 0, 0).is_ok() {
        drop(log);
        let log = PartitionLog::open(dir.path(), cfg).expect("reopen after a good append");
        assert_eq!(log.log_end_offset(), end + 1);
    }
});
