//! Probes: what producer and consumer clients report into while a run goes
//! on. A driver calls them from its own threads (send loop, delivery
//! callbacks, poll loop); the runner reads them for progress lines, the
//! rate controller and the final report.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::ledger::{Ledger, Receipt};
use crate::payload::{self, PayloadError};
use crate::stats::LatencyHist;

/// The run's monotonic clock; all probe timestamps count from its origin,
/// which is also what producers write into payloads (one process sends and
/// receives, so one clock serves both ends).
#[derive(Debug, Clone, Copy)]
pub struct RunClock {
    origin: Instant,
}

impl RunClock {
    pub fn start() -> RunClock {
        RunClock {
            origin: Instant::now(),
        }
    }
    pub fn now_ns(&self) -> u64 {
        self.origin.elapsed().as_nanos() as u64
    }
    pub fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }
}

/// Whole-run counters (cumulative; the runner takes differences).
#[derive(Debug, Default)]
pub struct Counters {
    pub sent: AtomicU64,
    pub acked: AtomicU64,
    pub failed: AtomicU64,
    pub received: AtomicU64,
    pub received_new: AtomicU64,
    pub corrupt: AtomicU64,
    pub foreign: AtomicU64,
    pub consume_errors: AtomicU64,
    pub bytes_acked: AtomicU64,
    pub bytes_received: AtomicU64,
    /// Sends the client refused because its queue was full.
    pub refused: AtomicU64,
}

/// A point-in-time copy of [`Counters`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CounterSnapshot {
    pub sent: u64,
    pub acked: u64,
    pub failed: u64,
    pub received: u64,
    pub received_new: u64,
    pub corrupt: u64,
    pub foreign: u64,
    pub consume_errors: u64,
    pub bytes_acked: u64,
    pub bytes_received: u64,
    #[serde(default)]
    pub refused: u64,
}

impl Counters {
    pub fn snapshot(&self) -> CounterSnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        CounterSnapshot {
            sent: g(&self.sent),
            acked: g(&self.acked),
            failed: g(&self.failed),
            received: g(&self.received),
            received_new: g(&self.received_new),
            corrupt: g(&self.corrupt),
            foreign: g(&self.foreign),
            consume_errors: g(&self.consume_errors),
            bytes_acked: g(&self.bytes_acked),
            bytes_received: g(&self.bytes_received),
            refused: g(&self.refused),
        }
    }
}

impl CounterSnapshot {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &CounterSnapshot) -> CounterSnapshot {
        CounterSnapshot {
            sent: self.sent.saturating_sub(earlier.sent),
            acked: self.acked.saturating_sub(earlier.acked),
            failed: self.failed.saturating_sub(earlier.failed),
            received: self.received.saturating_sub(earlier.received),
            received_new: self.received_new.saturating_sub(earlier.received_new),
            corrupt: self.corrupt.saturating_sub(earlier.corrupt),
            foreign: self.foreign.saturating_sub(earlier.foreign),
            consume_errors: self.consume_errors.saturating_sub(earlier.consume_errors),
            bytes_acked: self.bytes_acked.saturating_sub(earlier.bytes_acked),
            bytes_received: self.bytes_received.saturating_sub(earlier.bytes_received),
            refused: self.refused.saturating_sub(earlier.refused),
        }
    }

    /// Sent but neither acknowledged nor failed yet.
    pub fn unacked(&self) -> u64 {
        self.sent.saturating_sub(self.acked + self.failed)
    }
}

/// State shared by every probe of one run.
#[derive(Debug)]
pub struct RunShared {
    pub run_id: u32,
    pub clock: RunClock,
    /// Measurement window in µs of the run clock; `u64::MAX` while unset.
    /// A message belongs to the measurement when it was *sent* inside the
    /// window, so its publish and end-to-end latency count even when the
    /// ack or the receipt comes after the window closed: a broker that
    /// queues for seconds cannot hide its slowest messages in the drain.
    window_start_us: AtomicU64,
    window_end_us: AtomicU64,
    pub counters: Counters,
    pub ledger: Ledger,
    /// Partitions currently assigned over all consumers.
    pub assigned: AtomicI64,
    errors: Mutex<BTreeMap<String, u64>>,
}

fn relock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Probe state is counters and histograms: still meaningful after a
    // panic elsewhere, so a poisoned lock is taken over rather than spread.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl RunShared {
    pub fn new(run_id: u32, producers: u32) -> Arc<RunShared> {
        Arc::new(RunShared {
            run_id,
            clock: RunClock::start(),
            window_start_us: AtomicU64::new(u64::MAX),
            window_end_us: AtomicU64::new(u64::MAX),
            counters: Counters::default(),
            ledger: Ledger::new(producers),
            assigned: AtomicI64::new(0),
            errors: Mutex::default(),
        })
    }

    /// Opens the measurement window at `at_us`.
    pub fn begin_measurement(&self, at_us: u64) {
        self.window_start_us.store(at_us, Ordering::Release);
    }

    /// Closes the measurement window at `at_us`.
    pub fn end_measurement(&self, at_us: u64) {
        self.window_end_us.store(at_us, Ordering::Release);
    }

    /// Whether a message sent at `send_us` is part of the measurement.
    pub fn in_measurement(&self, send_us: u64) -> bool {
        send_us >= self.window_start_us.load(Ordering::Acquire)
            && send_us < self.window_end_us.load(Ordering::Acquire)
    }

    /// Counts an error by its text (the report lists the distinct ones).
    pub fn note_error(&self, what: &str, detail: &str) {
        let mut key = format!("{what}: {detail}");
        key.truncate(240);
        *relock(&self.errors).entry(key).or_insert(0) += 1;
    }

    pub fn errors(&self) -> BTreeMap<String, u64> {
        relock(&self.errors).clone()
    }
}

/// Histograms of one producer: publish latency (send call to ack) and
/// publish delay (intended send time to actual send call).
#[derive(Debug, Default)]
struct ProducerHists {
    window: LatencyHist,
    total: LatencyHist,
    delay: LatencyHist,
}

/// What one producer client reports into.
#[derive(Debug)]
pub struct ProducerProbe {
    pub index: u32,
    shared: Arc<RunShared>,
    hists: Mutex<ProducerHists>,
}

impl ProducerProbe {
    pub fn new(index: u32, shared: Arc<RunShared>) -> ProducerProbe {
        ProducerProbe {
            index,
            shared,
            hists: Mutex::default(),
        }
    }

    pub fn shared(&self) -> &Arc<RunShared> {
        &self.shared
    }

    /// A message was handed to the client `delay_us` after it was due.
    pub fn on_send(&self, send_us: u64, delay_us: u64) {
        self.shared.counters.sent.fetch_add(1, Ordering::Relaxed);
        if self.shared.in_measurement(send_us) {
            relock(&self.hists).delay.record_us(delay_us);
        }
    }

    /// The client refused a send: its queue of unacknowledged messages is
    /// full, so the offer runs ahead of what the broker takes.
    pub fn on_refused(&self) {
        self.shared.counters.refused.fetch_add(1, Ordering::Relaxed);
    }

    /// The client reported the outcome of a send. `payload` is the message
    /// as sent (its header gives sequence and send time).
    pub fn on_ack(&self, payload: &[u8], outcome: Result<(), &str>) {
        match payload::peek(payload) {
            Ok(stamp) => self.on_answer(&stamp, payload.len() as u64, outcome),
            Err(e) => {
                self.shared.counters.failed.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error("delivery report", &e.to_string());
            }
        }
    }

    /// Sends that will never be answered (their client closed first):
    /// failed, as librdkafka's purge reports them.
    pub fn on_purged(&self, n: u64, why: &str) {
        if n > 0 {
            self.shared.counters.failed.fetch_add(n, Ordering::Relaxed);
            self.shared.note_error("produce", why);
        }
    }

    /// [`ProducerProbe::on_ack`] for a message whose stamp the client read
    /// when sending it (`len`: the message's size).
    pub fn on_answer(&self, stamp: &payload::Stamp, len: u64, outcome: Result<(), &str>) {
        let now = self.shared.clock.now_us();
        let c = &self.shared.counters;
        match outcome {
            Ok(()) => {
                self.shared.ledger.acked(stamp.producer, stamp.sequence);
                c.acked.fetch_add(1, Ordering::Relaxed);
                c.bytes_acked.fetch_add(len, Ordering::Relaxed);
                let latency = now.saturating_sub(stamp.send_us);
                let mut h = relock(&self.hists);
                h.window.record_us(latency);
                if self.shared.in_measurement(stamp.send_us) {
                    h.total.record_us(latency);
                }
            }
            Err(e) => {
                c.failed.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error("produce", e);
            }
        }
    }

    /// Publish latency since the last call.
    pub fn take_window(&self) -> LatencyHist {
        relock(&self.hists).window.take()
    }

    /// Publish latency and publish delay over the measurement phase.
    pub fn totals(&self) -> (LatencyHist, LatencyHist) {
        let h = relock(&self.hists);
        (h.total.clone(), h.delay.clone())
    }
}

#[derive(Debug, Default)]
struct ConsumerHists {
    window: LatencyHist,
    total: LatencyHist,
}

/// What one consumer client reports into.
#[derive(Debug)]
pub struct ConsumerProbe {
    pub index: u32,
    shared: Arc<RunShared>,
    hists: Mutex<ConsumerHists>,
}

impl ConsumerProbe {
    pub fn new(index: u32, shared: Arc<RunShared>) -> ConsumerProbe {
        ConsumerProbe {
            index,
            shared,
            hists: Mutex::default(),
        }
    }

    pub fn shared(&self) -> &Arc<RunShared> {
        &self.shared
    }

    /// A message arrived.
    pub fn on_message(&self, bytes: &[u8]) {
        let now = self.shared.clock.now_us();
        let c = &self.shared.counters;
        let stamp = match payload::verify(bytes) {
            Ok(s) if s.run_id == self.shared.run_id => s,
            Ok(_) | Err(PayloadError::Foreign) => {
                c.foreign.fetch_add(1, Ordering::Relaxed);
                return;
            }
            Err(e) => {
                c.corrupt.fetch_add(1, Ordering::Relaxed);
                self.shared.note_error("consume", &e.to_string());
                return;
            }
        };
        c.received.fetch_add(1, Ordering::Relaxed);
        c.bytes_received
            .fetch_add(bytes.len() as u64, Ordering::Relaxed);
        match self.shared.ledger.received(stamp.producer, stamp.sequence) {
            Receipt::New => {
                c.received_new.fetch_add(1, Ordering::Relaxed);
            }
            Receipt::Duplicate => {}
            Receipt::UnknownProducer => {
                c.corrupt.fetch_add(1, Ordering::Relaxed);
                self.shared
                    .note_error("consume", "message names a producer this run does not have");
                return;
            }
        }
        let latency = now.saturating_sub(stamp.send_us);
        let mut h = relock(&self.hists);
        h.window.record_us(latency);
        if self.shared.in_measurement(stamp.send_us) {
            h.total.record_us(latency);
        }
    }

    /// The client reported an error while consuming.
    pub fn on_error(&self, detail: &str) {
        self.shared
            .counters
            .consume_errors
            .fetch_add(1, Ordering::Relaxed);
        self.shared.note_error("consume", detail);
    }

    /// The group gave this consumer `delta` more (or fewer) partitions.
    pub fn on_assignment(&self, delta: i64) {
        self.shared.assigned.fetch_add(delta, Ordering::AcqRel);
    }

    pub fn take_window(&self) -> LatencyHist {
        relock(&self.hists).window.take()
    }

    pub fn total(&self) -> LatencyHist {
        relock(&self.hists).total.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::PayloadWriter;

    #[test]
    fn totals_count_messages_sent_inside_the_window_however_late_they_return() {
        let shared = RunShared::new(1, 1);
        let p = ProducerProbe::new(0, shared.clone());
        let c = ConsumerProbe::new(0, shared.clone());
        let mut w = PayloadWriter::new(64, 1, 0);
        shared.begin_measurement(100);
        shared.end_measurement(200);
        // Sent before, inside (twice) and after the window; every ack and
        // receipt happens now, long after the window closed.
        for (seq, sent) in [(0, 50), (1, 100), (2, 199), (3, 200)] {
            p.on_ack(w.stamp(seq, sent), Ok(()));
            c.on_message(w.stamp(seq, sent));
        }
        assert_eq!(p.totals().0.len(), 2);
        assert_eq!(c.total().len(), 2);
        assert_eq!(p.take_window().len(), 4, "progress windows see everything");
        assert_eq!(shared.counters.snapshot().acked, 4);
    }

    #[test]
    fn failed_sends_are_counted_and_described_not_acked() {
        let shared = RunShared::new(1, 1);
        let p = ProducerProbe::new(0, shared.clone());
        let mut w = PayloadWriter::new(64, 1, 0);
        p.on_ack(w.stamp(0, 0), Err("Message timed out"));
        let s = shared.counters.snapshot();
        assert_eq!((s.acked, s.failed), (0, 1));
        assert_eq!(shared.ledger.audit().acked, 0);
        assert_eq!(shared.errors().get("produce: Message timed out"), Some(&1));
    }

    #[test]
    fn consumer_ignores_other_runs_and_flags_mangled_bytes() {
        let shared = RunShared::new(7, 1);
        let c = ConsumerProbe::new(0, shared.clone());
        let mut other_run = PayloadWriter::new(64, 8, 0);
        c.on_message(other_run.stamp(0, 0));
        let mut mine = PayloadWriter::new(64, 7, 0);
        let mut bad = mine.stamp(1, 0).to_vec();
        bad[40] ^= 1;
        c.on_message(&bad);
        c.on_message(mine.stamp(2, 0));
        let s = shared.counters.snapshot();
        assert_eq!(
            (s.foreign, s.corrupt, s.received, s.received_new),
            (1, 1, 1, 1)
        );
    }

    #[test]
    fn snapshot_differences_give_window_figures() {
        let a = CounterSnapshot {
            sent: 10,
            acked: 7,
            failed: 1,
            ..CounterSnapshot::default()
        };
        let b = CounterSnapshot {
            sent: 25,
            acked: 20,
            failed: 1,
            ..CounterSnapshot::default()
        };
        assert_eq!(b.since(&a).sent, 15);
        assert_eq!(b.unacked(), 4);
    }
}
