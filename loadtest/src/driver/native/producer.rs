//! The producer side: records handed to the SDK producer with a delivery
//! callback, and the reports that count each send's answer exactly once.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use sdk::{Delivery, Record};

use super::runtime::ClientRuntime;
use crate::driver::{ProducerClient, SendOutcome};
use crate::error::LoadError;
use crate::payload::{self, Stamp};
use crate::probe::ProducerProbe;

/// What a purge reports for the sends it gives up on.
const PURGED: &str = "purged: the producer closed before the broker answered";

/// The answers of one producer's sends, reported to its probe: each
/// accepted send exactly once (answered, failed or purged).
pub(super) struct Reports {
    probe: Arc<ProducerProbe>,
    /// Sends neither answered nor failed yet.
    msgs: AtomicU64,
    bytes: AtomicU64,
    /// Set by the purge: answers arriving later were reported as failed
    /// already and are not counted again.
    purged: Mutex<bool>,
}

impl Reports {
    pub(super) fn new(probe: Arc<ProducerProbe>) -> Reports {
        Reports {
            probe,
            msgs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
            purged: Mutex::new(false),
        }
    }

    /// A send of `len` bytes is about to be handed to the SDK.
    fn sending(&self, len: u64) {
        self.msgs.fetch_add(1, Ordering::AcqRel);
        self.bytes.fetch_add(len, Ordering::AcqRel);
    }

    /// The SDK took nothing (its answer will never come).
    fn not_sent(&self, len: u64) {
        self.msgs.fetch_sub(1, Ordering::AcqRel);
        self.bytes.fetch_sub(len, Ordering::AcqRel);
    }

    /// A send's answer, from the SDK's delivery callback.
    pub(super) fn answer(&self, stamp: &Stamp, len: u64, result: Result<Delivery, sdk::Error>) {
        let purged = self.purged.lock().unwrap_or_else(PoisonError::into_inner);
        if *purged {
            return;
        }
        match result {
            Ok(_) => self.probe.on_answer(stamp, len, Ok(())),
            Err(e) => self.probe.on_answer(stamp, len, Err(&e.to_string())),
        }
        self.not_sent(len);
    }

    /// Reports every send still unanswered as failed, and any answer
    /// that comes later as nothing.
    pub(super) fn purge(&self) {
        let mut purged = self.purged.lock().unwrap_or_else(PoisonError::into_inner);
        if *purged {
            return;
        }
        *purged = true;
        let left = self.msgs.swap(0, Ordering::AcqRel);
        self.bytes.store(0, Ordering::Release);
        self.probe.on_purged(left, PURGED);
    }

    pub(super) fn pending(&self) -> (u64, u64) {
        (
            self.msgs.load(Ordering::Acquire),
            self.bytes.load(Ordering::Acquire),
        )
    }
}

/// Payloads are copied into chunks of this size, each record's value a
/// shared slice of one: one allocation per chunk rather than per record
/// (the SDK takes `Bytes` and copies no further until the batch).
const PAYLOAD_CHUNK: usize = 256 * 1024;

pub(super) struct NativeProducer {
    producer: sdk::Producer,
    topic: String,
    chunk: BytesMut,
    reports: Arc<Reports>,
    max_msgs: u64,
    max_bytes: u64,
    // Last: dropped after the reports were purged.
    rt: ClientRuntime,
}

impl NativeProducer {
    pub(super) fn start(
        producer: sdk::Producer,
        topic: String,
        probe: Arc<ProducerProbe>,
        rt: ClientRuntime,
        max_msgs: u64,
        max_bytes: u64,
    ) -> NativeProducer {
        NativeProducer {
            producer,
            topic,
            chunk: BytesMut::new(),
            reports: Arc::new(Reports::new(probe)),
            max_msgs,
            max_bytes,
            rt,
        }
    }
}

impl ProducerClient for NativeProducer {
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError> {
        let len = payload.len() as u64;
        let (msgs, bytes) = self.reports.pending();
        if msgs >= self.max_msgs || bytes + len > self.max_bytes {
            return Ok(SendOutcome::Full);
        }
        // Read now, so the answer needs no copy of the payload.
        let stamp = payload::peek(payload)
            .map_err(|e| LoadError::Send(format!("a payload of this tool's own: {e}")))?;
        if self.chunk.capacity() - self.chunk.len() < payload.len() {
            self.chunk = BytesMut::with_capacity(PAYLOAD_CHUNK.max(payload.len()));
        }
        self.chunk.extend_from_slice(payload);
        let record = Record::new(self.chunk.split().freeze());
        let reports = Arc::clone(&self.reports);
        self.reports.sending(len);
        let sent = self.producer.send_with(&self.topic, record, move |result| {
            reports.answer(&stamp, len, result)
        });
        match sent {
            Ok(()) => Ok(SendOutcome::Queued),
            Err(e) => {
                self.reports.not_sent(len);
                match e {
                    sdk::Error::BufferFull { .. } => Ok(SendOutcome::Full),
                    e => Err(LoadError::Send(e.to_string())),
                }
            }
        }
    }

    fn flush(&mut self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let flusher = self.producer.clone();
        // Sends lingering batches at once and waits for the SDK's answers,
        // each reported by its callback before the flush returns.
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, flusher.flush()).await });
        loop {
            let (left, _) = self.reports.pending();
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl Drop for NativeProducer {
    fn drop(&mut self) {
        // As the Kafka driver's purge: what is still unanswered is
        // reported as failed now, never later as acknowledged.
        self.reports.purge();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered() -> Result<Delivery, sdk::Error> {
        Ok(Delivery {
            partition: 0,
            offset: 0,
        })
    }

    #[test]
    fn every_send_is_reported_once_answered_failed_or_purged() {
        let shared = crate::probe::RunShared::new(1, 1);
        let reports = Reports::new(Arc::new(ProducerProbe::new(0, shared.clone())));
        let mut writer = crate::payload::PayloadWriter::new(64, 1, 0);
        let stamps: Vec<Stamp> = (0..5)
            .map(|seq| {
                reports.sending(64);
                payload::peek(writer.stamp(seq, 0)).unwrap()
            })
            .collect();
        // Out of order: 1 then 0 succeed, 2 fails, 3 and 4 never answer.
        reports.answer(&stamps[1], 64, delivered());
        reports.answer(&stamps[0], 64, delivered());
        reports.answer(&stamps[2], 64, Err(sdk::Error::Timeout));
        assert_eq!(reports.pending(), (2, 128));
        reports.purge();
        assert_eq!(reports.pending(), (0, 0));
        // an answer after the purge was counted by it already
        reports.answer(&stamps[3], 64, delivered());
        reports.purge();
        let c = shared.counters.snapshot();
        assert_eq!((c.acked, c.failed), (2, 3));
        assert_eq!(reports.pending(), (0, 0));
    }
}
