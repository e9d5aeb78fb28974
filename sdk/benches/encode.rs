//! What writing one produce batch costs per record: the SDK's batch writer
//! (`sdk::record::encode_batch`) next to kafka-protocol's
//! `RecordBatchEncoder` fed the same records as its own record type (what
//! the SDK did before it wrote batches itself), for the load generator's
//! record shapes. Each is timed for `--seconds` (default 3) after a
//! warm-up of a third of that, and reported in ns per record with the
//! ratio between the two. Reports, never asserts.
//!
//! ```text
//! cargo bench -p sdk --bench encode [-- --seconds 3]
//! ```

use std::hint::black_box;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::indexmap::IndexMap;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::{self as kp, RecordBatchEncoder, RecordEncodeOptions, TimestampType};
use sdk::record::{encode_batch, BatchOptions, ProducerIdentity, Record};

/// Records as an idempotent producer batches them: `n` values of `size`
/// bytes, no key, no headers (the load generator's records).
fn records(n: usize, size: usize) -> Vec<Record> {
    (0..n)
        .map(|i| Record::new(Bytes::from(vec![(i % 251) as u8; size])))
        .collect()
}

fn options() -> BatchOptions {
    BatchOptions {
        producer: Some(ProducerIdentity {
            producer_id: 7,
            producer_epoch: 0,
            base_sequence: 1_000,
        }),
        now_ms: 1_765_000_000_000,
        ..BatchOptions::default()
    }
}

/// The same batch through kafka-protocol's own record type and encoder.
fn through_kafka_protocol(records: &[Record], options: &BatchOptions) -> Bytes {
    let p = options.producer.unwrap_or(ProducerIdentity {
        producer_id: -1,
        producer_epoch: -1,
        base_sequence: -1,
    });
    let kafka: Vec<kp::Record> = records
        .iter()
        .enumerate()
        .map(|(i, r)| kp::Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: p.producer_id,
            producer_epoch: p.producer_epoch,
            timestamp_type: TimestampType::Creation,
            offset: i as i64,
            sequence: p.base_sequence.wrapping_add(i as i32),
            timestamp: r.timestamp.unwrap_or(options.now_ms),
            key: r.key.clone(),
            value: r.value.clone(),
            headers: r
                .headers
                .iter()
                .map(|(k, v)| (StrBytes::from_string(k.clone()), v.clone()))
                .collect::<IndexMap<_, _>>(),
        })
        .collect();
    let mut buf =
        BytesMut::with_capacity(61 + records.iter().map(|r| r.estimated_size()).sum::<usize>());
    RecordBatchEncoder::encode(
        &mut buf,
        &kafka,
        &RecordEncodeOptions {
            version: 2,
            compression: kp::Compression::None,
        },
    )
    .expect("the batch encodes");
    buf.freeze()
}

/// Nanoseconds per record of `f` encoding `n` records, run for `time`.
fn per_record(n: usize, time: Duration, mut f: impl FnMut() -> Bytes) -> f64 {
    let warm = Instant::now();
    while warm.elapsed() < time / 3 {
        black_box(f());
    }
    let (start, mut batches) = (Instant::now(), 0u64);
    while start.elapsed() < time {
        black_box(f());
        batches += 1;
    }
    start.elapsed().as_nanos() as f64 / (batches as f64 * n as f64)
}

fn main() {
    let mut seconds = 3.0f64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--seconds" {
            seconds = args
                .next()
                .and_then(|s| s.parse().ok())
                .filter(|s: &f64| *s > 0.0)
                .unwrap_or_else(|| {
                    eprintln!("--seconds needs a positive number");
                    std::process::exit(2)
                });
        }
    }
    let time = Duration::from_secs_f64(seconds);
    let options = options();
    println!(
        "{:<26} {:>18} {:>24} {:>7}",
        "batch", "sdk writer ns/rec", "kafka-protocol ns/rec", "ratio"
    );
    for (n, size) in [(128, 1024), (1000, 100)] {
        let batch = records(n, size);
        let writer = per_record(n, time, || {
            encode_batch(&batch, &options).expect("the batch encodes")
        });
        let reference = per_record(n, time, || through_kafka_protocol(&batch, &options));
        println!(
            "{:<26} {:>18.1} {:>24.1} {:>6.2}x",
            format!("{n} records of {size} B"),
            writer,
            reference,
            reference / writer
        );
    }
}
