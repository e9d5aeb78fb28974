//! Append benchmark: 1 KiB records in batches of a given size, written to a
//! fresh partition log for many GiB, with paced writeback on and off in the
//! same run, next to the device's sequential buffered write bandwidth
//! measured by `fio` (or `dd` when fio is missing). Reports, never asserts.
//!
//! ```text
//! cargo bench -p storage --bench append -- \
//!     --total-bytes 8GiB --batch-bytes 16KiB,1MiB --dir /path/on/the/data/disk
//! ```
//! Options: `--total-bytes N` (per run, default 4GiB), `--batch-bytes A,B`
//! (default 16KiB,1MiB), `--record-bytes N` (default 1KiB), `--segment-bytes
//! N` (default 128MiB), `--chunk-bytes N` (paced writeback chunk, default
//! 8MiB), `--rate-mbps R` (append at a fixed rate instead of as fast as
//! possible), `--no-drop-behind`, `--modes paced,unpaced`, `--dir D` (default a temp
//! dir under the system temp dir), `--no-fio`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use hdrhistogram::Histogram;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};
use storage::{LogConfig, PartitionLog, WritebackConfig};

struct Args {
    total: u64,
    batches: Vec<u64>,
    record: u64,
    segment: u64,
    chunk: u64,
    rate_mbps: Option<f64>,
    drop_behind: bool,
    modes: Vec<bool>,
    dir: Option<PathBuf>,
    fio: bool,
}

fn parse_size(s: &str) -> u64 {
    let s = s.trim();
    let (num, mult) = [
        ("GiB", 1u64 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
        ("G", 1 << 30),
        ("M", 1 << 20),
        ("K", 1 << 10),
    ]
    .iter()
    .find_map(|(suf, m)| s.strip_suffix(suf).map(|n| (n, *m)))
    .unwrap_or((s, 1));
    let v: f64 = num.parse().unwrap_or_else(|_| panic!("bad size {s}"));
    (v * mult as f64) as u64
}

fn parse_args() -> Args {
    let mut a = Args {
        total: 4 << 30,
        batches: vec![16 << 10, 1 << 20],
        record: 1 << 10,
        segment: 128 << 20,
        chunk: WritebackConfig::default().chunk_bytes,
        rate_mbps: None,
        drop_behind: true,
        modes: vec![true, false],
        dir: None,
        fio: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut val = || it.next().unwrap_or_else(|| panic!("{arg} needs a value"));
        match arg.as_str() {
            "--total-bytes" => a.total = parse_size(&val()),
            "--batch-bytes" => a.batches = val().split(',').map(parse_size).collect(),
            "--record-bytes" => a.record = parse_size(&val()),
            "--segment-bytes" => a.segment = parse_size(&val()),
            "--chunk-bytes" => a.chunk = parse_size(&val()),
            "--rate-mbps" => a.rate_mbps = Some(val().parse().expect("--rate-mbps takes MB/s")),
            "--modes" => a.modes = val().split(',').map(|m| m.trim() == "paced").collect(),
            "--dir" => a.dir = Some(PathBuf::from(val())),
            "--no-fio" => a.fio = false,
            "--no-drop-behind" => a.drop_behind = false,
            "--bench" => {}
            other => eprintln!("ignoring argument {other}"),
        }
    }
    a
}

/// One v2 batch of `batch_bytes / record_bytes` records of `record_bytes`.
fn make_batch(batch_bytes: u64, record_bytes: u64) -> Vec<u8> {
    let n = (batch_bytes / record_bytes).max(1);
    let value = Bytes::from(vec![b'v'; record_bytes.saturating_sub(20) as usize]);
    let records: Vec<Record> = (0..n as i64)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: i as i32 - 1,
            timestamp: 1_700_000_000_000 + i,
            key: Some(Bytes::from(format!("key-{i:08}"))),
            value: Some(value.clone()),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).unwrap();
    buf.to_vec()
}

struct RunResult {
    label: String,
    bytes: u64,
    appends: u64,
    elapsed: Duration,
    with_fsync: Duration,
    hist: Histogram<u64>,
    segments: usize,
}

fn run(dir: &Path, batch_bytes: u64, paced: bool, a: &Args) -> RunResult {
    let _ = std::fs::remove_dir_all(dir);
    let cfg = LogConfig {
        segment_bytes: a.segment,
        max_message_bytes: (batch_bytes * 2).max(1 << 20) as u32,
        writeback: WritebackConfig {
            paced,
            chunk_bytes: a.chunk,
            drop_behind: a.drop_behind,
            ..WritebackConfig::default()
        },
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir, cfg).unwrap();
    // Stamped fields sit outside the CRC, so one buffer can be re-appended.
    let mut batch = make_batch(batch_bytes, a.record);
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    let mut written = 0u64;
    let mut appends = 0u64;
    let start = Instant::now();
    while written < a.total {
        if let Some(rate) = a.rate_mbps {
            // Open-loop producer at a fixed rate: sleep until this append's
            // scheduled time; latency is still measured per append call.
            let due = Duration::from_secs_f64(written as f64 / (rate * 1e6));
            if let Some(ahead) = due.checked_sub(start.elapsed()) {
                std::thread::sleep(ahead);
            }
        }
        let t = Instant::now();
        log.append(&mut batch, 0, 1_700_000_000_000).unwrap();
        let us = t.elapsed().as_micros() as u64;
        hist.record(us.clamp(1, 60_000_000)).unwrap();
        written += batch.len() as u64;
        appends += 1;
    }
    let elapsed = start.elapsed();
    log.flush().unwrap();
    let with_fsync = start.elapsed();
    let segments = log.segments().len();
    log.close().unwrap();
    let _ = std::fs::remove_dir_all(dir);
    RunResult {
        label: format!(
            "{} batches, {} writeback",
            human(batch_bytes),
            if paced { "paced" } else { "unpaced" }
        ),
        bytes: written,
        appends,
        elapsed,
        with_fsync,
        hist,
        segments,
    }
}

fn human(b: u64) -> String {
    if b >= 1 << 30 && b.is_multiple_of(1 << 30) {
        format!("{} GiB", b >> 30)
    } else if b >= 1 << 20 {
        format!("{} MiB", b >> 20)
    } else {
        format!("{} KiB", b >> 10)
    }
}

fn mbps(bytes: u64, d: Duration) -> f64 {
    bytes as f64 / d.as_secs_f64() / 1e6
}

/// Sequential buffered write bandwidth of the disk holding `dir`, in MB/s.
fn device_bandwidth(dir: &Path, bytes: u64) -> Option<(String, f64)> {
    let file = dir.join("bandwidth.tmp");
    let size_mib = (bytes >> 20).max(64);
    let fio = Command::new("fio")
        .args([
            "--name=seqwrite",
            "--rw=write",
            "--bs=1M",
            &format!("--size={size_mib}M"),
            "--ioengine=psync",
            "--end_fsync=1",
            &format!("--filename={}", file.display()),
            "--minimal",
        ])
        .output();
    let _ = std::fs::remove_file(&file);
    if let Ok(out) = fio {
        // Terse v3: field 48 is write bandwidth in KiB/s.
        let text = String::from_utf8_lossy(&out.stdout);
        if let Some(kib) = text.split(';').nth(47).and_then(|f| f.parse::<f64>().ok()) {
            return Some((
                format!("fio seq write 1 MiB blocks, {size_mib} MiB, end_fsync"),
                kib * 1024.0 / 1e6,
            ));
        }
    }
    let start = Instant::now();
    let dd = Command::new("dd")
        .args([
            "if=/dev/zero",
            &format!("of={}", file.display()),
            "bs=1M",
            &format!("count={size_mib}"),
            "conv=fdatasync",
        ])
        .output()
        .ok()?;
    let secs = start.elapsed().as_secs_f64();
    let _ = std::fs::remove_file(&file);
    dd.status.success().then(|| {
        (
            format!("dd bs=1M count={size_mib} conv=fdatasync"),
            (size_mib << 20) as f64 / secs / 1e6,
        )
    })
}

fn proc_value(path: &str) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

fn mem_available_kib() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    meminfo
        .lines()
        .find(|l| l.starts_with("MemAvailable:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn main() {
    let a = parse_args();
    let base = a
        .dir
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("aerostream-append-bench"));
    std::fs::create_dir_all(&base).unwrap();
    println!("AeroStream storage append benchmark");
    println!(
        "  dir {}  record {}  segment {}  writeback chunk {}  total per run {}",
        base.display(),
        human(a.record),
        human(a.segment),
        human(a.chunk),
        human(a.total)
    );
    if let Some(r) = a.rate_mbps {
        println!("  producer rate fixed at {r} MB/s");
    }
    let ratio = proc_value("/proc/sys/vm/dirty_ratio");
    let bg = proc_value("/proc/sys/vm/dirty_background_ratio");
    let avail = mem_available_kib().unwrap_or(0);
    let limit = ratio
        .parse::<u64>()
        .map(|r| avail * 1024 * r / 100)
        .unwrap_or(0);
    println!(
        "  vm.dirty_ratio {ratio}%  vm.dirty_background_ratio {bg}%  MemAvailable {:.1} GiB  => dirty limit ~{:.1} GiB (run writes {:.1}x that)",
        avail as f64 / (1 << 20) as f64,
        limit as f64 / (1u64 << 30) as f64,
        if limit > 0 { a.total as f64 / limit as f64 } else { 0.0 }
    );
    let device = if a.fio {
        device_bandwidth(&base, a.total.min(4 << 30))
    } else {
        None
    };
    match &device {
        Some((how, bw)) => println!("  device: {how}: {bw:.0} MB/s"),
        None => println!("  device bandwidth: not measured"),
    }
    println!();
    println!(
        "{:<32} {:>9} {:>9} {:>7} {:>9} {:>9} {:>9} {:>10} {:>5}",
        "run", "MB/s", "+fsync", "%dev", "p50 us", "p99 us", "p99.9 us", "max us", "segs"
    );
    let mut results = Vec::new();
    for &b in &a.batches {
        for &paced in &a.modes {
            let r = run(&base.join("log"), b, paced, &a);
            let tput = mbps(r.bytes, r.elapsed);
            let dev = device.as_ref().map_or(String::from("-"), |(_, bw)| {
                format!("{:.0}%", 100.0 * tput / bw)
            });
            println!(
                "{:<32} {:>9.0} {:>9.0} {:>7} {:>9} {:>9} {:>9} {:>10} {:>5}",
                r.label,
                tput,
                mbps(r.bytes, r.with_fsync),
                dev,
                r.hist.value_at_quantile(0.50),
                r.hist.value_at_quantile(0.99),
                r.hist.value_at_quantile(0.999),
                r.hist.max(),
                r.segments
            );
            results.push(r);
        }
    }
    println!();
    for pair in results.chunks(2) {
        if let [p, u] = pair {
            let (pp, up) = (
                p.hist.value_at_quantile(0.999),
                u.hist.value_at_quantile(0.999),
            );
            println!(
                "{}: p99.9 paced/unpaced = {pp}/{up} us ({:.2}x); appends {} / {}",
                human(p.bytes / p.appends.max(1)).trim(),
                pp as f64 / up.max(1) as f64,
                p.appends,
                u.appends
            );
        }
    }
}
