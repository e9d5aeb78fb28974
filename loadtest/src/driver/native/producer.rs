//! The producer side: sends handed to the SDK producer, and the collector
//! task that reports each send's answer to the probe exactly once.

use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use sdk::{Delivery, Record};
use tokio::sync::mpsc;

use super::runtime::ClientRuntime;
use crate::driver::{ProducerClient, SendOutcome};
use crate::error::LoadError;
use crate::probe::ProducerProbe;

/// Sends taken and answers reported per poll of a producer's collector
/// before it lets the runtime's other tasks run.
const WORK_PER_POLL: usize = 1024;
/// How long dropping a producer waits for its collector to report the
/// sends still unanswered.
const PURGE_TIMEOUT: Duration = Duration::from_secs(10);

/// Sends neither answered nor failed yet.
#[derive(Debug, Default)]
struct Pending {
    msgs: AtomicU64,
    bytes: AtomicU64,
}

enum ToCollector<F> {
    Sent(F, Bytes),
    /// Report what is still unanswered as failed, then confirm.
    Purge(std::sync::mpsc::SyncSender<()>),
}

pub(super) struct NativeProducer<S, F> {
    send: S,
    flusher: sdk::Producer,
    to_collector: mpsc::UnboundedSender<ToCollector<F>>,
    pending: Arc<Pending>,
    max_msgs: u64,
    max_bytes: u64,
    // Last: dropped after the collector was told to purge.
    rt: ClientRuntime,
}

type SendResult = Result<Delivery, sdk::Error>;

impl<S, F> NativeProducer<S, F>
where
    S: FnMut(Record) -> F + Send + 'static,
    F: Future<Output = SendResult> + Send + 'static,
{
    pub(super) fn start(
        send: S,
        flusher: sdk::Producer,
        probe: Arc<ProducerProbe>,
        rt: ClientRuntime,
        max_msgs: u64,
        max_bytes: u64,
    ) -> NativeProducer<S, F> {
        let (to_collector, queue) = mpsc::unbounded_channel();
        let pending = Arc::new(Pending::default());
        // Unconstrained: tokio's cooperative budget would make the answers'
        // oneshot receivers return Pending past 128 polls and defer their
        // wake-ups, which hides them from FuturesUnordered's own yielding:
        // every poll then walks every waiting answer, and a collector that
        // fell behind falls further behind (seen at 50k msg/s: the load
        // generator's core spinning in FuturesUnordered wake-ups). The
        // collector bounds its own work per poll instead.
        rt.handle().spawn(tokio::task::unconstrained(collect(
            queue,
            probe,
            Arc::clone(&pending),
        )));
        NativeProducer {
            send,
            flusher,
            to_collector,
            pending,
            max_msgs,
            max_bytes,
            rt,
        }
    }
}

/// A send's answer, with the send's number.
fn numbered<F>(answer: F, n: u64) -> impl Future<Output = (u64, SendResult)>
where
    F: Future<Output = SendResult>,
{
    answer.map(move |r| (n, r))
}

/// The answers of one producer's sends, reported to its probe as they
/// arrive; each accepted send is reported exactly once (answered, failed
/// or purged).
async fn collect<F>(
    mut queue: mpsc::UnboundedReceiver<ToCollector<F>>,
    probe: Arc<ProducerProbe>,
    pending: Arc<Pending>,
) where
    F: Future<Output = SendResult> + Send + 'static,
{
    // Payloads by send number (from `base`); answers come mostly in order.
    let mut payloads: VecDeque<Option<Bytes>> = VecDeque::new();
    let mut base: u64 = 0;
    let mut answers = FuturesUnordered::new();
    let mut open = true;
    let report = |payloads: &mut VecDeque<Option<Bytes>>,
                  base: &mut u64,
                  n: u64,
                  outcome: Result<(), &str>| {
        let Some(payload) = n
            .checked_sub(*base)
            .and_then(|i| payloads.get_mut(i as usize))
            .and_then(Option::take)
        else {
            return;
        };
        probe.on_ack(&payload, outcome);
        pending
            .bytes
            .fetch_sub(payload.len() as u64, Ordering::AcqRel);
        pending.msgs.fetch_sub(1, Ordering::AcqRel);
        while payloads.front().is_some_and(Option::is_none) {
            payloads.pop_front();
            *base += 1;
        }
    };
    poll_fn(|cx| {
        let mut work = 0;
        while open {
            if work >= WORK_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            work += 1;
            match queue.poll_recv(cx) {
                Poll::Ready(Some(ToCollector::Sent(answer, payload))) => {
                    let n = base + payloads.len() as u64;
                    payloads.push_back(Some(payload));
                    answers.push(numbered(answer, n));
                }
                Poll::Ready(Some(ToCollector::Purge(done))) => {
                    let (first, end) = (base, base + payloads.len() as u64);
                    for n in first..end {
                        report(
                            &mut payloads,
                            &mut base,
                            n,
                            Err("purged: the producer closed before the broker answered"),
                        );
                    }
                    answers.clear();
                    let _ = done.send(());
                    open = false;
                }
                Poll::Ready(None) => open = false,
                Poll::Pending => break,
            }
        }
        loop {
            if work >= 2 * WORK_PER_POLL {
                cx.waker().wake_by_ref();
                return Poll::Pending;
            }
            work += 1;
            match answers.poll_next_unpin(cx) {
                Poll::Ready(Some((n, Ok(_)))) => report(&mut payloads, &mut base, n, Ok(())),
                Poll::Ready(Some((n, Err(e)))) => {
                    report(&mut payloads, &mut base, n, Err(&e.to_string()))
                }
                Poll::Ready(None) | Poll::Pending => break,
            }
        }
        if !open && answers.is_empty() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await
}

impl<S, F> ProducerClient for NativeProducer<S, F>
where
    S: FnMut(Record) -> F + Send + 'static,
    F: Future<Output = SendResult> + Send + 'static,
{
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError> {
        let len = payload.len() as u64;
        if self.pending.msgs.load(Ordering::Acquire) >= self.max_msgs
            || self.pending.bytes.load(Ordering::Acquire) + len > self.max_bytes
        {
            return Ok(SendOutcome::Full);
        }
        let payload = Bytes::copy_from_slice(payload);
        // Queued by the SDK now; the future only waits for the answer.
        let answer = (self.send)(Record::new(payload.clone()));
        self.pending.msgs.fetch_add(1, Ordering::AcqRel);
        self.pending.bytes.fetch_add(len, Ordering::AcqRel);
        self.to_collector
            .send(ToCollector::Sent(answer, payload))
            .map_err(|_| LoadError::Send("the native producer's collector has stopped".into()))?;
        Ok(SendOutcome::Queued)
    }

    fn flush(&mut self, timeout: Duration) -> u64 {
        let deadline = Instant::now() + timeout;
        let flusher = self.flusher.clone();
        // Sends lingering batches at once and waits for the SDK's answers;
        // the collector reports them a moment later.
        let _ = self
            .rt
            .block_on(async { tokio::time::timeout(timeout, flusher.flush()).await });
        loop {
            let left = self.pending.msgs.load(Ordering::Acquire);
            if left == 0 || Instant::now() >= deadline {
                return left;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

impl<S, F> Drop for NativeProducer<S, F> {
    fn drop(&mut self) {
        // As the Kafka driver's purge: what is still unanswered is
        // reported as failed now, never later as acknowledged.
        let (done, confirmed) = std::sync::mpsc::sync_channel(1);
        if self.to_collector.send(ToCollector::Purge(done)).is_ok() {
            let _ = confirmed.recv_timeout(PURGE_TIMEOUT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::native::runtime::current_thread;
    use tokio::runtime::Runtime;

    /// A collector fed with answers the test settles by hand.
    struct Harness {
        rt: Runtime,
        to_collector: mpsc::UnboundedSender<ToCollector<BoxedAnswer>>,
        shared: Arc<crate::probe::RunShared>,
        pending: Arc<Pending>,
        writer: crate::payload::PayloadWriter,
        done: Option<tokio::task::JoinHandle<()>>,
    }

    type BoxedAnswer = futures::future::BoxFuture<'static, SendResult>;

    impl Harness {
        fn new() -> Harness {
            let rt = current_thread().unwrap();
            let shared = crate::probe::RunShared::new(1, 1);
            let probe = Arc::new(ProducerProbe::new(0, shared.clone()));
            let pending = Arc::new(Pending::default());
            let (to_collector, queue) = mpsc::unbounded_channel();
            let done = rt.spawn(tokio::task::unconstrained(collect(
                queue,
                probe,
                Arc::clone(&pending),
            )));
            Harness {
                rt,
                to_collector,
                shared,
                pending,
                writer: crate::payload::PayloadWriter::new(64, 1, 0),
                done: Some(done),
            }
        }

        /// Sends message `seq`; the returned sender answers it.
        fn send(&mut self, seq: u64) -> tokio::sync::oneshot::Sender<SendResult> {
            let (answer, answered) = tokio::sync::oneshot::channel();
            let payload = Bytes::copy_from_slice(self.writer.stamp(seq, 0));
            self.pending.msgs.fetch_add(1, Ordering::AcqRel);
            self.pending
                .bytes
                .fetch_add(payload.len() as u64, Ordering::AcqRel);
            let fut: BoxedAnswer =
                Box::pin(async move { answered.await.unwrap_or(Err(sdk::Error::Closed)) });
            self.to_collector
                .send(ToCollector::Sent(fut, payload))
                .unwrap();
            answer
        }

        fn settle(&self) {
            self.rt.block_on(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
            });
        }

        fn purge_and_finish(mut self) -> crate::probe::CounterSnapshot {
            let (purged, confirmed) = std::sync::mpsc::sync_channel(1);
            self.to_collector.send(ToCollector::Purge(purged)).unwrap();
            drop(self.to_collector);
            let done = self.done.take().unwrap();
            self.rt.block_on(done).unwrap();
            confirmed.recv().unwrap();
            assert_eq!(self.pending.msgs.load(Ordering::Acquire), 0);
            assert_eq!(self.pending.bytes.load(Ordering::Acquire), 0);
            self.shared.counters.snapshot()
        }
    }

    fn delivered() -> SendResult {
        Ok(Delivery {
            partition: 0,
            offset: 0,
        })
    }

    #[test]
    fn every_send_is_reported_once_answered_failed_or_purged() {
        let mut h = Harness::new();
        let answers: Vec<_> = (0..5).map(|seq| h.send(seq)).collect();
        let mut answers = answers.into_iter();
        // Out of order: 1 then 0 succeed, 2 fails, 3 and 4 never answer.
        let (a0, a1, a2) = (answers.next(), answers.next(), answers.next());
        a1.unwrap().send(delivered()).unwrap();
        a0.unwrap().send(delivered()).unwrap();
        a2.unwrap().send(Err(sdk::Error::Timeout)).unwrap();
        h.settle();
        assert_eq!(h.pending.msgs.load(Ordering::Acquire), 2);
        let _unanswered: Vec<_> = answers.collect();
        let c = h.purge_and_finish();
        assert_eq!((c.acked, c.failed), (2, 3));
    }

    #[test]
    fn a_flood_of_answers_is_reported_without_spinning() {
        // Tens of thousands of answers ready at once: with tokio's budget
        // deferring their wake-ups, FuturesUnordered walked all of them per
        // poll and the collector never caught up.
        let mut h = Harness::new();
        let n = 50_000;
        let answers: Vec<_> = (0..n).map(|seq| h.send(seq)).collect();
        h.settle();
        let start = Instant::now();
        for a in answers {
            a.send(delivered()).unwrap();
        }
        while h.pending.msgs.load(Ordering::Acquire) > 0 {
            assert!(start.elapsed() < Duration::from_secs(5), "collector stuck");
            h.settle();
        }
        let c = h.purge_and_finish();
        assert_eq!((c.acked, c.failed), (n, 0));
    }
}
