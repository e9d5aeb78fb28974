//! The batching engine stepped by hand: records in, requests out, time
//! passed in.

use super::*;
use crate::proto::ErrorCode;
use crate::record::encode_batch;

const LINGER: Duration = Duration::from_millis(5);

fn settings(idempotent: bool) -> Settings {
    Settings {
        linger: LINGER,
        batch_bytes: 1 << 20,
        compression: Compression::None,
        idempotent,
        retries: 3,
        backoff: Backoff {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(1),
        },
    }
}

fn tp(topic: &str, partition: u32) -> Tp {
    (Arc::from(topic), partition)
}

fn record(value: &str) -> Record {
    Record::new(value.to_owned()).with_timestamp(1)
}

/// Every partition is led by node `partition % 2`.
fn leaders(_: &str, partition: u32) -> Option<u32> {
    Some(partition % 2)
}

fn unlimited(_: u32) -> usize {
    usize::MAX
}

fn ready(acc: &mut Accumulator<u32>, now: Instant) -> Ready<u32> {
    acc.ready(now, 0, leaders, unlimited)
}

/// (producer id, epoch, base sequence, record count) of a batch.
fn header(bytes: &Bytes) -> (i64, i16, i32, i32) {
    let h = &bytes[43..61];
    (
        i64::from_be_bytes(h[0..8].try_into().unwrap()),
        i16::from_be_bytes(h[8..10].try_into().unwrap()),
        i32::from_be_bytes(h[10..14].try_into().unwrap()),
        i32::from_be_bytes(h[14..18].try_into().unwrap()),
    )
}

fn only_batch(r: &Ready<u32>) -> &Sent {
    assert_eq!(r.requests.len(), 1, "{r:?}");
    assert_eq!(r.requests[0].batches.len(), 1, "{r:?}");
    &r.requests[0].batches[0]
}

fn written(base_offset: i64) -> Outcome {
    Outcome::Written { base_offset }
}

fn not_leader() -> Outcome {
    Outcome::Failed(Error::server(ErrorCode::NOT_LEADER, ""))
}

#[test]
fn a_batch_waits_for_linger_unless_a_flush_is_under_way() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(false));
    acc.push(t0, tp("t", 0), record("a"), 1);
    acc.push(t0 + Duration::from_millis(1), tp("t", 0), record("b"), 2);
    assert!(ready(&mut acc, t0 + Duration::from_millis(4))
        .requests
        .is_empty());
    assert_eq!(acc.next_wakeup(), Some(t0 + LINGER));
    let r = ready(&mut acc, t0 + LINGER);
    let sent = only_batch(&r);
    assert_eq!(header(&sent.bytes).3, 2, "both records in one batch");
    assert_eq!(r.requests[0].node, 0);

    acc.push(t0 + LINGER, tp("t", 2), record("c"), 3);
    acc.set_flushing(true);
    let r = ready(&mut acc, t0 + LINGER);
    assert_eq!(
        only_batch(&r).partition,
        2,
        "flushing does not wait for linger"
    );
}

#[test]
fn a_full_batch_is_sealed_and_the_next_one_waits_for_its_answer() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(Settings {
        batch_bytes: 2 * record("a").estimated_size(),
        ..settings(false)
    });
    for id in 1..=3 {
        acc.push(t0, tp("t", 1), record("a"), id);
    }
    // The third record sealed the first two; their batch goes without
    // waiting for linger, and only it: one batch in flight per partition.
    let r = ready(&mut acc, t0);
    let first = only_batch(&r).clone();
    assert_eq!(header(&first.bytes).3, 2);
    assert_eq!(r.requests[0].node, 1);
    assert!(ready(&mut acc, t0 + LINGER).requests.is_empty());

    let answers = acc.complete(t0, &tp("t", 1), first.batch, written(40));
    let answers: Vec<_> = answers.into_iter().map(|(w, r)| (w, r.unwrap())).collect();
    assert_eq!(answers, vec![(1, (1, 40)), (2, (1, 41))]);
    let r = ready(&mut acc, t0 + LINGER);
    assert_eq!(header(&only_batch(&r).bytes).3, 1);
}

#[test]
fn a_retried_batch_resends_the_same_bytes_before_anything_after_it() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(true));
    acc.push(t0, tp("t", 0), record("first"), 1);
    assert!(acc.needs_producer_id());
    assert!(
        ready(&mut acc, t0 + LINGER).requests.is_empty(),
        "an idempotent producer waits for its id"
    );
    acc.set_producer_id(ProducerId { id: 77, epoch: 2 });
    let r = ready(&mut acc, t0 + LINGER);
    let first = only_batch(&r).clone();
    assert_eq!(header(&first.bytes), (77, 2, 0, 1));

    acc.push(t0 + LINGER, tp("t", 0), record("second"), 2);
    assert!(acc
        .complete(t0 + LINGER, &tp("t", 0), first.batch, not_leader())
        .is_empty());
    let soon = t0 + LINGER + Duration::from_millis(10);
    assert!(ready(&mut acc, soon).requests.is_empty(), "backing off");
    let wake = acc.next_wakeup().unwrap();
    assert!(wake > soon);

    let r = ready(&mut acc, wake);
    let again = only_batch(&r);
    assert_eq!(again.batch, first.batch);
    assert_eq!(again.bytes, first.bytes, "same bytes, same sequence");

    let answers = acc.complete(wake, &tp("t", 0), first.batch, written(0));
    assert_eq!(answers.len(), 1);
    let r = ready(&mut acc, wake + LINGER);
    assert_eq!(
        header(&only_batch(&r).bytes),
        (77, 2, 1, 1),
        "next sequence"
    );
}

#[test]
fn retries_run_out_and_the_records_get_the_error() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(Settings {
        retries: 1,
        ..settings(false)
    });
    acc.push(t0, tp("t", 0), record("a"), 1);
    let mut now = t0 + LINGER;
    let batch = only_batch(&ready(&mut acc, now)).batch;
    assert!(acc
        .complete(now, &tp("t", 0), batch, not_leader())
        .is_empty());
    now = acc.next_wakeup().unwrap();
    assert_eq!(only_batch(&ready(&mut acc, now)).batch, batch);
    let answers = acc.complete(now, &tp("t", 0), batch, not_leader());
    assert_eq!(answers.len(), 1);
    assert_eq!(
        answers[0].1.as_ref().unwrap_err().code(),
        Some(ErrorCode::NOT_LEADER)
    );
    assert!(acc.is_idle());
}

#[test]
fn a_batch_that_fails_for_good_is_not_retried() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(false));
    acc.push(t0, tp("t", 0), record("a"), 1);
    let batch = only_batch(&ready(&mut acc, t0 + LINGER)).batch;
    let too_large = Outcome::Failed(Error::server(ErrorCode::RECORDS_TOO_LARGE, ""));
    let answers = acc.complete(t0, &tp("t", 0), batch, too_large);
    assert_eq!(answers.len(), 1);
    assert!(acc.is_idle());
}

#[test]
fn an_idempotent_batch_that_fails_for_good_drops_the_id_and_sequences_restart() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(true));
    acc.set_producer_id(ProducerId { id: 5, epoch: 0 });
    acc.push(t0, tp("t", 0), record("a"), 1);
    acc.push(t0, tp("t", 1), record("b"), 2);
    let r = ready(&mut acc, t0 + LINGER);
    assert_eq!(r.requests.len(), 2, "one request per leader");
    let b0 = r.requests[0].batches[0].clone();
    let b1 = r.requests[1].batches[0].clone();
    acc.complete(t0, &tp("t", 1), b1.batch, written(0));
    let fenced = Outcome::Failed(Error::server(ErrorCode::OUT_OF_ORDER_SEQUENCE, ""));
    assert_eq!(acc.complete(t0, &tp("t", 0), b0.batch, fenced).len(), 1);

    acc.push(t0, tp("t", 1), record("c"), 3);
    assert!(acc.needs_producer_id());
    acc.set_producer_id(ProducerId { id: 6, epoch: 0 });
    let r = ready(&mut acc, t0 + LINGER);
    assert_eq!(
        header(&only_batch(&r).bytes),
        (6, 0, 0, 1),
        "partition 1 was at sequence 1 under id 5; under id 6 it starts at 0"
    );
}

#[test]
fn partitions_of_one_leader_share_requests_up_to_the_size_limit() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(false));
    for p in [0, 2, 4] {
        acc.push(t0, tp("t", p), record("x"), p);
    }
    acc.push(t0, tp("u", 0), record("y"), 10);
    let one_batch = encode_batch(&[record("x")], &BatchOptions::default())
        .unwrap()
        .len();
    let r = acc.ready(t0 + LINGER, 0, leaders, |_| 2 * one_batch);
    let shapes: Vec<(u32, usize)> = r
        .requests
        .iter()
        .map(|d| (d.node, d.batches.len()))
        .collect();
    assert_eq!(shapes, vec![(0, 2), (0, 2)]);
}

#[test]
fn a_partition_without_leader_backs_off_then_fails_after_the_retries() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(Settings {
        retries: 2,
        ..settings(false)
    });
    acc.push(t0, tp("t", 0), record("a"), 1);
    let mut now = t0 + LINGER;
    for _ in 0..2 {
        let r = acc.ready(now, 0, |_, _| None, unlimited);
        assert_eq!(r.no_leader, vec![Arc::<str>::from("t")]);
        assert!(r.failed.is_empty());
        now = acc.next_wakeup().unwrap();
    }
    let r = acc.ready(now, 0, |_, _| None, unlimited);
    assert_eq!(r.failed.len(), 1);
    assert_eq!(
        r.failed[0].1.as_ref().unwrap_err().code(),
        Some(ErrorCode::NOT_AVAILABLE)
    );
    assert!(acc.is_idle());
}

#[test]
fn without_a_producer_id_waiting_records_can_be_failed() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(true));
    acc.push(t0, tp("t", 0), record("a"), 1);
    acc.push(t0, tp("t", 1), record("b"), 2);
    let failed = acc.fail_waiting(&Error::server(ErrorCode::UNAUTHORIZED, ""));
    let mut ids: Vec<u32> = failed.into_iter().map(|(w, _)| w).collect();
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2]);
    assert!(acc.is_idle());
    assert!(!acc.needs_producer_id());
}

#[test]
fn sequences_wrap_from_i32_max_to_zero_like_kafkas() {
    assert_eq!(next_sequence(0, 5), 5);
    assert_eq!(next_sequence(i32::MAX, 1), 0);
    assert_eq!(next_sequence(i32::MAX - 1, 3), 1);
}

#[test]
fn a_stale_or_unknown_completion_changes_nothing() {
    let t0 = Instant::now();
    let mut acc = Accumulator::new(settings(false));
    acc.push(t0, tp("t", 0), record("a"), 1);
    let batch = only_batch(&ready(&mut acc, t0 + LINGER)).batch;
    assert!(acc
        .complete(t0, &tp("t", 0), batch + 1, written(0))
        .is_empty());
    assert!(acc.complete(t0, &tp("t", 9), batch, written(0)).is_empty());
    assert_eq!(acc.complete(t0, &tp("t", 0), batch, written(0)).len(), 1);
}
