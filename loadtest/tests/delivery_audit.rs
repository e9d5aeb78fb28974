//! The runner against an in-memory broker whose faults we choose: a run
//! passes only when every acknowledged message comes back intact, and says
//! so loudly when the broker loses or mangles acknowledged messages.
#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use loadtest::driver::{ConsumerClient, Driver, ProducerClient, SendOutcome, TopicSpec};
use loadtest::error::LoadError;
use loadtest::probe::{ConsumerProbe, ProducerProbe};
use loadtest::report::RunResult;
use loadtest::runner::{run, RunOptions};
use loadtest::workload::Workload;

#[derive(Default, Clone, Copy)]
struct Faults {
    /// Acknowledge, but do not store, every n-th message.
    lose_every: Option<u64>,
    /// Flip a byte of every n-th stored message.
    corrupt_every: Option<u64>,
}

/// A broker in memory: partitions are vectors, acknowledgements immediate.
struct MemBroker {
    partitions: Vec<Mutex<Vec<Vec<u8>>>>,
    next: AtomicU64,
    faults: Faults,
    consumers: u32,
}

impl MemBroker {
    fn new(partitions: u32, consumers: u32, faults: Faults) -> Arc<MemBroker> {
        Arc::new(MemBroker {
            partitions: (0..partitions).map(|_| Mutex::default()).collect(),
            next: AtomicU64::new(0),
            faults,
            consumers,
        })
    }
}

struct MemDriver(Arc<MemBroker>);

impl Driver for MemDriver {
    fn name(&self) -> &'static str {
        "memory"
    }
    fn prepare_topic(&self, topic: &TopicSpec) -> Result<(), LoadError> {
        assert_eq!(topic.partitions as usize, self.0.partitions.len());
        Ok(())
    }
    fn delete_topic(&self, _topic: &str) -> Result<(), LoadError> {
        Ok(())
    }
    fn producer(
        &self,
        _topic: &str,
        probe: Arc<ProducerProbe>,
    ) -> Result<Box<dyn ProducerClient>, LoadError> {
        Ok(Box::new(MemProducer {
            broker: self.0.clone(),
            probe,
        }))
    }
    fn consumer(
        &self,
        _topic: &str,
        _group: &str,
        probe: Arc<ConsumerProbe>,
    ) -> Result<Box<dyn ConsumerClient>, LoadError> {
        let n = self.0.partitions.len() as u32;
        let mine: Vec<usize> = (0..n)
            .filter(|p| p % self.0.consumers == probe.index)
            .map(|p| p as usize)
            .collect();
        probe.on_assignment(mine.len() as i64);
        let cursors = vec![0; mine.len()];
        Ok(Box::new(MemConsumer {
            broker: self.0.clone(),
            probe,
            mine,
            cursors,
        }))
    }
}

struct MemProducer {
    broker: Arc<MemBroker>,
    probe: Arc<ProducerProbe>,
}

impl ProducerClient for MemProducer {
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError> {
        let b = &self.broker;
        let n = b.next.fetch_add(1, Ordering::Relaxed) + 1;
        let mut stored = payload.to_vec();
        if b.faults.corrupt_every.is_some_and(|k| n.is_multiple_of(k)) {
            let last = stored.len() - 1;
            stored[last] ^= 0xff;
        }
        if b.faults.lose_every.is_none_or(|k| !n.is_multiple_of(k)) {
            let p = (n % b.partitions.len() as u64) as usize;
            b.partitions[p].lock().unwrap().push(stored);
        }
        self.probe.on_ack(payload, Ok(()));
        Ok(SendOutcome::Queued)
    }
    fn flush(&mut self, _timeout: Duration) -> u64 {
        0
    }
}

struct MemConsumer {
    broker: Arc<MemBroker>,
    probe: Arc<ConsumerProbe>,
    mine: Vec<usize>,
    cursors: Vec<usize>,
}

impl ConsumerClient for MemConsumer {
    fn poll(&mut self, timeout: Duration) {
        let mut got = false;
        for (i, &p) in self.mine.iter().enumerate() {
            let log = self.broker.partitions[p].lock().unwrap();
            for m in &log[self.cursors[i]..] {
                self.probe.on_message(m);
                got = true;
            }
            self.cursors[i] = log.len();
        }
        if !got {
            std::thread::sleep(timeout.min(Duration::from_millis(5)));
        }
    }
}

fn workload(rate: &str) -> Workload {
    Workload::from_yaml(&format!(
        "name: mem\npartitions: 4\nmessage_size: 128\nproducers: 2\nconsumers: 2\nrate: {rate}\nwarmup: 300ms\nduration: 1500ms\ndrain_timeout: 2s\n"
    ))
    .unwrap()
}

fn run_against(faults: Faults, rate: &str) -> RunResult {
    let w = workload(rate);
    let broker = MemBroker::new(w.partitions, w.consumers, faults);
    let mut opts = RunOptions::new(w, "memory", "mem://");
    opts.progress_every = Duration::from_millis(500);
    run(Arc::new(MemDriver(broker)), &opts, &mut |_| {}).unwrap()
}

#[test]
fn run_passes_when_every_acknowledged_message_arrives_intact() {
    let r = run_against(Faults::default(), "2000");
    assert!(
        r.verdict.delivery_ok && r.verdict.clean,
        "{}",
        r.verdict.message
    );
    assert!(r.delivery.acked > 0);
    assert_eq!(r.delivery.lost, 0);
    assert_eq!(r.delivery.received, r.delivery.acked);
    assert!(r.drained);
    assert!(r.publish_latency.count > 0 && r.end_to_end_latency.count > 0);
    assert!(
        r.loadgen_resources.is_some(),
        "the generator samples itself"
    );
}

#[test]
fn run_fails_loudly_when_the_broker_drops_acknowledged_messages() {
    let r = run_against(
        Faults {
            lose_every: Some(50),
            ..Faults::default()
        },
        "2000",
    );
    assert!(!r.verdict.delivery_ok);
    assert!(r.delivery.lost > 0);
    assert!(!r.drained, "a lost message never drains");
    assert!(
        r.verdict.message.starts_with("FAILED"),
        "{}",
        r.verdict.message
    );
    assert!(!r.delivery.lost_examples.is_empty());
}

#[test]
fn run_fails_when_the_broker_returns_changed_bytes() {
    let r = run_against(
        Faults {
            corrupt_every: Some(40),
            ..Faults::default()
        },
        "2000",
    );
    assert!(!r.verdict.delivery_ok);
    assert!(r.errors.corrupt > 0);
    assert!(
        r.delivery.lost > 0,
        "a corrupt copy does not count as delivered"
    );
}

#[test]
fn max_rate_search_raises_the_offer_while_the_broker_keeps_up() {
    let r = run_against(Faults::default(), "max");
    assert!(!r.rate_history.is_empty());
    let peak = r.rate_history.iter().cloned().fold(0.0, f64::max);
    assert!(peak > 10_000.0, "{:?}", r.rate_history);
    assert!(r.verdict.delivery_ok, "{}", r.verdict.message);
}
