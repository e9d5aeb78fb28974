//! The consumer side: which partitions a consumer reads, and the polling
//! that passes their records to the probe and commits the group's offsets.

use std::future::poll_fn;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::stream::StreamExt;

use super::runtime::ClientRuntime;
use crate::driver::ConsumerClient;
use crate::probe::ConsumerProbe;

/// Records taken per poll call after the first (as the Kafka driver).
const POLL_BURST: usize = 4096;

/// The partitions consumer `index` of `consumers` reads: `p % n == k`.
///
/// SEAM (group membership): this static split stands in for a consumer
/// group because the SDK only has [`Membership::Manual`](sdk::Membership::Manual) today. When the
/// SDK gains group membership (another `Membership` variant), the native
/// consumer subscribes with the run's group instead of calling this, and
/// reports the assignments the group hands it through
/// `ConsumerProbe::on_assignment` (+n on assign, -n on revoke), as the
/// Kafka driver's rebalance callback does; see `NativeDriver::consumer`.
pub fn static_split(index: u32, consumers: u32, partitions: u32) -> Vec<u32> {
    let n = consumers.max(1);
    (0..partitions).filter(|p| p % n == index % n).collect()
}

pub(super) struct NativeConsumer {
    pub(super) consumer: sdk::Consumer,
    pub(super) probe: Arc<ConsumerProbe>,
    pub(super) assigned: usize,
    pub(super) auto_commit: Option<Duration>,
    pub(super) last_commit: Instant,
    // Last: the consumer's connections go before their runtime.
    pub(super) rt: ClientRuntime,
}

impl ConsumerClient for NativeConsumer {
    fn poll(&mut self, timeout: Duration) {
        if self.assigned == 0 {
            std::thread::sleep(timeout);
            return;
        }
        let consumer = &mut self.consumer;
        let probe = &self.probe;
        let burst = poll_fn(|cx| {
            let mut taken = 0;
            loop {
                match consumer.poll_next_unpin(cx) {
                    Poll::Ready(Some(Ok(record))) => {
                        probe.on_message(record.value.as_deref().unwrap_or_default());
                        taken += 1;
                        if taken >= POLL_BURST {
                            return Poll::Ready(());
                        }
                    }
                    Poll::Ready(Some(Err(e))) => {
                        probe.on_error(&e.to_string());
                        return Poll::Ready(());
                    }
                    Poll::Ready(None) => return Poll::Ready(()),
                    Poll::Pending if taken > 0 => return Poll::Ready(()),
                    Poll::Pending => return Poll::Pending,
                }
            }
        });
        self.rt.block_on(async {
            let _ = tokio::time::timeout(timeout, burst).await;
        });
        if let Some(every) = self.auto_commit {
            if self.last_commit.elapsed() >= every {
                self.last_commit = Instant::now();
                let consumer = &mut self.consumer;
                let result = self
                    .rt
                    .block_on(async { tokio::time::timeout(every, consumer.commit()).await });
                let problem = match result {
                    Ok(Ok(())) => None,
                    Ok(Err(e)) => Some(e.to_string()),
                    Err(_) => Some("timed out".to_string()),
                };
                if let Some(p) = problem {
                    self.probe
                        .shared()
                        .note_error("client", &format!("committing offsets: {p}"));
                }
            }
        }
    }
}

impl Drop for NativeConsumer {
    fn drop(&mut self) {
        // As the Kafka driver's revoke on unsubscribe.
        self.probe.on_assignment(-(self.assigned as i64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn static_split_gives_every_partition_to_exactly_one_consumer() {
        assert_eq!(static_split(0, 2, 8), vec![0, 2, 4, 6]);
        assert_eq!(static_split(1, 2, 8), vec![1, 3, 5, 7]);
        assert_eq!(static_split(0, 1, 3), vec![0, 1, 2]);
        // More consumers than partitions: the last ones hold nothing.
        assert_eq!(static_split(2, 3, 2), Vec::<u32>::new());
        for (n, parts) in [(1, 1), (3, 8), (4, 4), (5, 3), (7, 64)] {
            let mut all: Vec<u32> = (0..n).flat_map(|k| static_split(k, n, parts)).collect();
            all.sort_unstable();
            assert_eq!(
                all,
                (0..parts).collect::<Vec<_>>(),
                "{n} consumers, {parts} partitions"
            );
        }
    }
}
