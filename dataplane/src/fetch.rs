//! Reading many partitions for one consumer's request, and the long poll
//! that waits for data: the same for every front end that fetches.
//!
//! Limits as Kafka keeps them: a response holds at most `max_total` record
//! bytes and each partition at most its own `max_bytes`, except that the
//! first batch of the first partition returning data comes whole even when
//! larger, so a consumer always makes progress.
//!
//! The long poll reads, and while fewer than `min_bytes` are available it
//! sleeps until some partition's high watermark moves, the deadline passes,
//! the front end asks it to hurry, or the broker begins shutting down. Each
//! partition's watch is marked seen right before the read it guards, so a
//! wake-up means an append happened after that read: an idle consumer costs
//! one read at the start and one at the deadline, never a loop of re-reads.

use std::time::Duration;

use futures::future::select_all;
use tokio::sync::{watch, Notify};
use tokio::time::Instant;

use crate::backend::{LogError, Records};
use crate::partition::{Isolation, PartitionHandle, ReadResult};

/// One partition of a fetch.
pub struct PartitionRead<'a> {
    /// The partition's task; `None` when the front end could not resolve
    /// it (the poll then answers at once, and the front end says why).
    pub handle: Option<&'a PartitionHandle>,
    pub offset: i64,
    /// The partition's own byte limit.
    pub max_bytes: usize,
    /// Report the partition's offsets only: the consumer reads it from
    /// another replica (KIP-392). The poll answers at once.
    pub offsets_only: bool,
    /// read_committed or read_uncommitted.
    pub isolation: Isolation,
}

/// What one partition's read gave.
#[derive(Debug)]
pub enum ReadOutcome {
    /// The partition had no handle ([`PartitionRead::handle`] was `None`).
    Unresolved,
    /// Records (possibly none) and the partition's offsets.
    Read(ReadResult),
    /// The read failed.
    Failed(LogError),
}

impl ReadOutcome {
    fn bytes(&self) -> usize {
        match self {
            ReadOutcome::Read(r) => r.records.len(),
            _ => 0,
        }
    }
}

/// When a long poll answers.
pub struct Wait<'a> {
    /// Answer once this many record bytes are available.
    pub min_bytes: usize,
    /// Answer at this instant whatever is available.
    pub deadline: Instant,
    /// Once notified, the next read is the answer.
    pub hurry: Option<&'a Notify>,
    /// Turns true when the broker begins shutting down: the next read is
    /// the answer.
    pub stop: watch::Receiver<bool>,
}

/// Reads every partition once, within `max_total` bytes; the outcomes in
/// `reads` order and the record bytes they hold.
pub async fn read_all(reads: &[PartitionRead<'_>], max_total: usize) -> (Vec<ReadOutcome>, usize) {
    let mut total = 0usize;
    let mut out = Vec::with_capacity(reads.len());
    for r in reads {
        let Some(h) = r.handle else {
            out.push(ReadOutcome::Unresolved);
            continue;
        };
        let budget = max_total.saturating_sub(total).min(r.max_bytes);
        let read = if (budget == 0 && total > 0) || r.offsets_only {
            // The response is full, or the consumer reads elsewhere: the
            // partition reports its offsets only.
            match (h.bounds().await, h.last_stable().await) {
                (Ok((log_start_offset, high_watermark)), Ok(last_stable_offset)) => {
                    Ok(ReadResult {
                        records: Records::empty(),
                        high_watermark,
                        log_start_offset,
                        last_stable_offset,
                        aborted: Vec::new(),
                    })
                }
                (Err(e), _) | (_, Err(e)) => Err(e),
            }
        } else {
            h.read(r.offset, budget, total == 0, r.isolation).await
        };
        out.push(match read {
            Ok(r) => {
                total += r.records.len();
                ReadOutcome::Read(r)
            }
            Err(e) => ReadOutcome::Failed(e),
        });
    }
    (out, total)
}

/// Long poll (see the module's docs): the outcomes, the record bytes they
/// hold, and how long the poll slept (time request-rate quotas do not
/// count). Each partition whose records are answered counts them as sent.
pub async fn long_poll(
    reads: &[PartitionRead<'_>],
    max_total: usize,
    mut wait: Wait<'_>,
) -> (Vec<ReadOutcome>, usize, Duration) {
    let mut slept = Duration::ZERO;
    let mut watches: Vec<watch::Receiver<i64>> = reads
        .iter()
        .filter_map(|r| r.handle.map(|h| h.high_watermark()))
        .collect();
    let mut hurried = false;
    let hurry = wait.hurry;
    let hurried_now = async {
        match hurry {
            Some(h) => h.notified().await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(hurried_now);
    loop {
        for w in &mut watches {
            w.borrow_and_update();
        }
        let (outcomes, total) = read_all(reads, max_total).await;
        let done = total >= wait.min_bytes
            || outcomes.iter().any(|o| !matches!(o, ReadOutcome::Read(_)))
            || reads.iter().any(|r| r.offsets_only)
            || Instant::now() >= wait.deadline
            || hurried
            || *wait.stop.borrow();
        if done {
            // what the consumer is sent, counted once however many re-reads
            // the long poll made
            for (r, o) in reads.iter().zip(&outcomes) {
                if let (Some(h), n @ 1..) = (r.handle, o.bytes()) {
                    h.stats().sent(n as u64);
                }
            }
            return (outcomes, total, slept);
        }
        let asleep = Instant::now();
        let deadline = wait.deadline;
        let stopping = wait.stop.wait_for(|s| *s);
        if watches.is_empty() {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = stopping => {}
                _ = &mut hurried_now => hurried = true,
            }
            slept += asleep.elapsed();
            continue;
        }
        let stopped = {
            let changed = select_all(watches.iter_mut().map(|w| Box::pin(w.changed())));
            tokio::select! {
                (result, i, _) = changed => result.is_err().then_some(i),
                _ = tokio::time::sleep_until(deadline) => None,
                _ = stopping => None,
                _ = &mut hurried_now => {
                    hurried = true;
                    None
                }
            }
        };
        slept += asleep.elapsed();
        if let Some(i) = stopped {
            // The partition's task stopped: the next read reports it.
            watches.swap_remove(i);
        }
    }
}
