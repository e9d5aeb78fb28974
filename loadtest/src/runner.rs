//! The run: topic, consumers, producers, warm-up, measurement, drain and
//! the delivery audit, driven through any [`Driver`].
//!
//! Threads: one per consumer (poll loop), one per producer (paced send
//! loop; the client's own threads deliver acknowledgements), one sampler of
//! `/proc`, and the calling thread, which ticks once a second to move the
//! phases, feed the rate controller and print progress.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::driver::{ConsumerClient, Driver, ProducerClient, SendOutcome, TopicSpec};
use crate::error::LoadError;
use crate::payload::PayloadWriter;
use crate::probe::{ConsumerProbe, CounterSnapshot, ProducerProbe, RunClock, RunShared};
use crate::procstat::{self, ProcSample};
use crate::rate::{Observation, Pacer, RateController};
use crate::report::{ErrorCounts, Progress, RunResult, Throughput, Verdict};
use crate::stats::LatencyHist;
use crate::workload::{Rate, Workload};

/// How a run is set up beyond its workload.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub workload: Workload,
    /// Name of the broker under test, for reports.
    pub broker_label: String,
    pub bootstrap: String,
    /// Process to sample for CPU and RSS.
    /// Broker processes whose CPU and memory are sampled (summed).
    pub broker_pid: Vec<u32>,
    /// Use this topic instead of a fresh one.
    pub topic: Option<String>,
    pub create_topic: bool,
    pub delete_topic: bool,
    pub replication_factor: u16,
    pub progress_every: Duration,
    /// How long consumers may take to be assigned every partition.
    pub assignment_timeout: Duration,
}

impl RunOptions {
    pub fn new(workload: Workload, broker_label: &str, bootstrap: &str) -> RunOptions {
        RunOptions {
            workload,
            broker_label: broker_label.to_string(),
            bootstrap: bootstrap.to_string(),
            broker_pid: Vec::new(),
            topic: None,
            create_topic: true,
            delete_topic: false,
            replication_factor: 1,
            progress_every: Duration::from_secs(5),
            assignment_timeout: Duration::from_secs(60),
        }
    }
}

/// Starting point of the `rate: max` search, msg/s over all producers.
const MAX_RATE_START: f64 = 10_000.0;
const MAX_RATE_FLOOR: f64 = 100.0;
const MAX_RATE_CEILING: f64 = 10_000_000.0;
/// Messages due within this horizon are sent now rather than slept for:
/// thread wake-ups cost more CPU than they buy precision below this.
const LOOKAHEAD_NS: u64 = 200_000;
const TICK: Duration = Duration::from_secs(1);
/// How often queue levels are sampled within a tick.
const LEVEL_SAMPLE: Duration = Duration::from_millis(100);

/// Running mean of (unacked, backlog) samples.
#[derive(Debug, Default)]
struct LevelAverage {
    unacked: u64,
    backlog: u64,
    n: u64,
}

impl LevelAverage {
    fn add(&mut self, unacked: u64, backlog: u64) {
        self.unacked += unacked;
        self.backlog += backlog;
        self.n += 1;
    }

    fn take(&mut self) -> (u64, u64) {
        let n = self.n.max(1);
        let out = (self.unacked / n, self.backlog / n);
        *self = LevelAverage::default();
        out
    }
}
/// A drain ends early when consumers receive nothing new for this long
/// (or a quarter of the drain timeout, if that is shorter; at least 1 s).
const DRAIN_STALL: Duration = Duration::from_secs(15);

fn stall_limit(drain_timeout: Duration) -> Duration {
    (drain_timeout / 4).clamp(Duration::from_secs(1), DRAIN_STALL)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DrainEnd {
    Drained,
    Stalled,
    TimedOut,
}

fn per_producer(total: f64, producers: u32) -> f64 {
    total / f64::from(producers.max(1))
}

struct ProducerThread {
    handle: JoinHandle<u64>,
}

fn spawn_producer(
    mut client: Box<dyn ProducerClient>,
    probe: Arc<ProducerProbe>,
    w: &Workload,
    rate_bits: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    flush_timeout: Duration,
) -> Result<ProducerThread, LoadError> {
    let shared = probe.shared().clone();
    let mut writer = PayloadWriter::framed(
        w.message_size,
        shared.run_id,
        probe.index,
        w.value_schema_id,
    );
    let handle = std::thread::Builder::new()
        .name(format!("producer-{}", probe.index))
        .spawn(move || {
            let clock = shared.clock;
            let mut pacer = Pacer::new(
                clock.now_ns(),
                f64::from_bits(rate_bits.load(Ordering::Relaxed)),
            );
            let mut seq: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                let now = clock.now_ns();
                let target = f64::from_bits(rate_bits.load(Ordering::Relaxed));
                if target != pacer.rate() {
                    pacer.set_rate(now, seq, target);
                }
                if seq < pacer.due(now + LOOKAHEAD_NS) {
                    let intended = pacer.intended_ns(seq);
                    let send_us = clock.now_us();
                    match client.send(writer.stamp(seq, send_us)) {
                        Ok(SendOutcome::Queued) => {
                            probe.on_send(send_us, now.saturating_sub(intended) / 1000);
                            seq += 1;
                        }
                        Ok(SendOutcome::Full) => {
                            probe.on_refused();
                            std::thread::sleep(Duration::from_micros(500));
                        }
                        Err(e) => {
                            shared.note_error("send", &e.to_string());
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                } else {
                    let wait = pacer
                        .intended_ns(seq)
                        .saturating_sub(now + LOOKAHEAD_NS / 2);
                    std::thread::sleep(Duration::from_nanos(wait.clamp(50_000, 100_000_000)));
                }
            }
            // Dropping the client after flush purges anything still queued;
            // the purge is reported as failed sends, never as acks.
            client.flush(flush_timeout)
        })
        .map_err(|e| LoadError::Thread(e.to_string()))?;
    Ok(ProducerThread { handle })
}

fn spawn_consumer(
    mut client: Box<dyn ConsumerClient>,
    index: u32,
    stop: Arc<AtomicBool>,
) -> Result<JoinHandle<()>, LoadError> {
    std::thread::Builder::new()
        .name(format!("consumer-{index}"))
        .spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                client.poll(Duration::from_millis(100));
            }
        })
        .map_err(|e| LoadError::Thread(e.to_string()))
}

/// Samples the broker (if given) and this process once a second.
struct Sampler {
    stop: Arc<AtomicBool>,
    handle: JoinHandle<()>,
    broker: Arc<Mutex<Vec<ProcSample>>>,
    own: Arc<Mutex<Vec<ProcSample>>>,
}

fn start_sampler(pids: Vec<u32>, shared: Arc<RunShared>) -> Result<Sampler, LoadError> {
    let stop = Arc::new(AtomicBool::new(false));
    let broker = Arc::new(Mutex::new(Vec::new()));
    let own = Arc::new(Mutex::new(Vec::new()));
    let (s, b, o) = (stop.clone(), broker.clone(), own.clone());
    let handle = std::thread::Builder::new()
        .name("sampler".into())
        .spawn(move || {
            let mut broker_pids = pids;
            loop {
                let t = shared.clock.now_ns() / 1_000_000;
                if !broker_pids.is_empty() {
                    let samples: Result<Vec<_>, _> = broker_pids
                        .iter()
                        .map(|p| procstat::sample(Some(*p), t))
                        .collect();
                    match samples {
                        Ok(xs) => lock(&b).push(procstat::ProcSample {
                            t_ms: t,
                            cpu_ticks: xs.iter().map(|x| x.cpu_ticks).sum(),
                            rss_kib: xs.iter().map(|x| x.rss_kib).sum(),
                        }),
                        Err(e) => {
                            shared.note_error("broker sampling", &e.to_string());
                            broker_pids.clear();
                        }
                    }
                }
                if let Ok(x) = procstat::sample(None, t) {
                    lock(&o).push(x);
                }
                // Sleep in small steps so stopping is prompt.
                for _ in 0..10 {
                    if s.load(Ordering::Relaxed) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
        })
        .map_err(|e| LoadError::Thread(e.to_string()))?;
    Ok(Sampler {
        stop,
        handle,
        broker,
        own,
    })
}

/// Raises every flag when dropped.
struct StopOnDrop(Vec<Arc<AtomicBool>>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        for f in &self.0 {
            f.store(true, Ordering::Relaxed);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn secs(clock: &RunClock) -> f64 {
    clock.now_ns() as f64 / 1e9
}

/// Merges and empties the window histograms of every client.
fn take_windows(
    producers: &[Arc<ProducerProbe>],
    consumers: &[Arc<ConsumerProbe>],
) -> (LatencyHist, LatencyHist) {
    let mut p = LatencyHist::new();
    for x in producers {
        p.merge(&x.take_window());
    }
    let mut c = LatencyHist::new();
    for x in consumers {
        c.merge(&x.take_window());
    }
    (p, c)
}

fn backlog(s: &CounterSnapshot) -> u64 {
    s.acked.saturating_sub(s.received_new)
}

/// Runs one workload against the broker behind `driver`. Progress lines go
/// to `progress`. Returns the result even when delivery failed (the
/// verdict says so); errors are failures to run at all.
pub fn run(
    driver: Arc<dyn Driver>,
    opts: &RunOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<RunResult, LoadError> {
    let w = &opts.workload;
    let run_id: u32 = rand::random();
    let topic = opts
        .topic
        .clone()
        .unwrap_or_else(|| format!("loadtest-{}-{run_id:08x}", w.name));
    let group = format!("loadtest-{run_id:08x}");
    let started_unix_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0);
    let shared = RunShared::new(run_id, w.producers);
    let clock = shared.clock;

    driver.prepare_topic(&TopicSpec {
        name: topic.clone(),
        partitions: w.partitions,
        replication_factor: opts.replication_factor,
        create: opts.create_topic,
        configs: w.topic_config.clone(),
    })?;
    progress(&format!(
        "topic {topic} ready ({} partitions)",
        w.partitions
    ));

    let sampler = start_sampler(opts.broker_pid.clone(), shared.clone())?;

    // Consumers first, and wait for the group to cover every partition, so
    // warm-up starts with the read path live.
    let consumer_stop = Arc::new(AtomicBool::new(false));
    let producer_stop = Arc::new(AtomicBool::new(false));
    // If setup fails half-way, the threads already started must not run on.
    let _stop_guard = StopOnDrop(vec![
        consumer_stop.clone(),
        producer_stop.clone(),
        sampler.stop.clone(),
    ]);
    let mut consumer_probes = Vec::new();
    let mut consumer_threads = Vec::new();
    for i in 0..w.consumers {
        let probe = Arc::new(ConsumerProbe::new(i, shared.clone()));
        let client = driver.consumer(&topic, &group, probe.clone())?;
        consumer_threads.push(spawn_consumer(client, i, consumer_stop.clone())?);
        consumer_probes.push(probe);
    }
    let assign_deadline = clock.now_ns() + opts.assignment_timeout.as_nanos() as u64;
    while shared.assigned.load(Ordering::Acquire) < i64::from(w.partitions)
        && clock.now_ns() < assign_deadline
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    let assigned = shared.assigned.load(Ordering::Acquire);
    if assigned < i64::from(w.partitions) {
        progress(&format!(
            "WARNING: consumers hold {assigned} of {} partitions after {:?}; starting anyway (they read from the earliest offset)",
            w.partitions, opts.assignment_timeout
        ));
    } else {
        progress(&format!(
            "{} consumers assigned all {} partitions in group {group}",
            w.consumers, w.partitions
        ));
    }

    // Producers.
    let mut controller = match w.rate {
        Rate::Max => Some(RateController::new(
            MAX_RATE_START,
            MAX_RATE_FLOOR,
            MAX_RATE_CEILING,
        )),
        Rate::Fixed(_) => None,
    };
    let total_rate = match w.rate {
        Rate::Fixed(r) => r as f64,
        Rate::Max => MAX_RATE_START,
    };
    let rate_bits = Arc::new(AtomicU64::new(
        per_producer(total_rate, w.producers).to_bits(),
    ));
    let mut producer_probes = Vec::new();
    let mut producer_threads = Vec::new();
    for i in 0..w.producers {
        let probe = Arc::new(ProducerProbe::new(i, shared.clone()));
        let client = driver.producer(&topic, probe.clone())?;
        producer_threads.push(spawn_producer(
            client,
            probe.clone(),
            w,
            rate_bits.clone(),
            producer_stop.clone(),
            w.drain_timeout.max(Duration::from_secs(10)),
        )?);
        producer_probes.push(probe);
    }

    // Phases.
    let start_ns = clock.now_ns();
    let warmup_end = start_ns + w.warmup.as_nanos() as u64;
    let measure_end = warmup_end + w.duration.as_nanos() as u64;
    let mut measure_start: Option<(u64, CounterSnapshot)> = if w.warmup.is_zero() {
        shared.begin_measurement(start_ns / 1000);
        Some((start_ns, shared.counters.snapshot()))
    } else {
        None
    };
    let mut rate_history = Vec::new();
    let mut tick_prev = (start_ns, shared.counters.snapshot());
    let mut progress_prev = tick_prev;
    // Queue levels averaged over each tick (see `Observation::backlog`).
    let mut levels = LevelAverage::default();
    let measure_stop = loop {
        let next_tick = tick_prev.0 + TICK.as_nanos() as u64;
        let now = clock.now_ns();
        let boundary = if measure_start.is_none() {
            warmup_end
        } else {
            measure_end
        };
        let wake = next_tick
            .min(boundary)
            .min(now + LEVEL_SAMPLE.as_nanos() as u64);
        if wake > now {
            std::thread::sleep(Duration::from_nanos(wake - now));
        }
        let now = clock.now_ns();
        let snap = shared.counters.snapshot();
        levels.add(snap.unacked(), backlog(&snap));
        if measure_start.is_none() && now >= warmup_end {
            shared.begin_measurement(now / 1000);
            measure_start = Some((now, snap));
            progress("warm-up done; measuring");
        }
        if now >= measure_end {
            shared.end_measurement(now / 1000);
            break (now, snap);
        }
        if now >= next_tick {
            let (unacked, backlog_avg) = levels.take();
            if let Some(c) = controller.as_mut() {
                let d = snap.since(&tick_prev.1);
                let next = c.observe(&Observation {
                    window_s: (now - tick_prev.0) as f64 / 1e9,
                    sent: d.sent,
                    acked: d.acked,
                    received: d.received_new,
                    unacked,
                    backlog: backlog_avg,
                    refused: d.refused,
                });
                rate_bits.store(per_producer(next, w.producers).to_bits(), Ordering::Relaxed);
                rate_history.push(next);
            }
            tick_prev = (now, snap);
        }
        if now >= progress_prev.0 + opts.progress_every.as_nanos() as u64 {
            let d = snap.since(&progress_prev.1);
            let window_s = (now - progress_prev.0) as f64 / 1e9;
            let (p, c) = take_windows(&producer_probes, &consumer_probes);
            progress(&crate::report::progress_line(&Progress {
                phase: if measure_start.is_some() {
                    "measure"
                } else {
                    "warm-up"
                },
                elapsed_s: (now - start_ns) as f64 / 1e9,
                publish_rate: d.acked as f64 / window_s,
                publish_mib: d.bytes_acked as f64 / window_s / 1048576.0,
                publish_p99_ms: p.p99_ms(),
                consume_rate: d.received as f64 / window_s,
                e2e_p99_ms: c.p99_ms(),
                backlog: backlog(&snap),
                errors: snap.failed + snap.consume_errors + snap.corrupt,
                target_rate: controller.as_ref().map(|c| c.rate()),
            }));
            progress_prev = (now, snap);
        }
    };
    let (measure_start_ns, measure_start_snap) =
        measure_start.unwrap_or((start_ns, CounterSnapshot::default()));

    // Stop producing; wait for outstanding acknowledgements.
    producer_stop.store(true, Ordering::Relaxed);
    let mut unflushed = 0;
    for t in producer_threads {
        unflushed += t
            .handle
            .join()
            .map_err(|_| LoadError::Thread("producer".into()))?;
    }
    progress(&format!(
        "producers stopped ({unflushed} unacknowledged); draining consumers"
    ));

    // Drain: until every acknowledged message arrived, the timeout, or the
    // consumers stall (nothing new for DRAIN_STALL while some are missing).
    let drain_start = clock.now_ns();
    let drain_deadline = drain_start + w.drain_timeout.as_nanos() as u64;
    let stall = stall_limit(w.drain_timeout);
    let mut last_print = drain_start;
    let mut last_progress = (drain_start, shared.counters.snapshot().received_new);
    let drain_end = loop {
        let snap = shared.counters.snapshot();
        if snap.received_new >= snap.acked && shared.ledger.outstanding() == 0 {
            break DrainEnd::Drained;
        }
        let now = clock.now_ns();
        if snap.received_new > last_progress.1 {
            last_progress = (now, snap.received_new);
        }
        if now >= drain_deadline {
            break DrainEnd::TimedOut;
        }
        if now >= last_progress.0 + stall.as_nanos() as u64 {
            break DrainEnd::Stalled;
        }
        if now >= last_print + opts.progress_every.as_nanos() as u64 {
            progress(&format!(
                "[  drain {:>6.1}s] backlog {}",
                secs(&clock) - start_ns as f64 / 1e9,
                backlog(&snap)
            ));
            last_print = now;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let drained = drain_end == DrainEnd::Drained;
    let drain_secs = (clock.now_ns() - drain_start) as f64 / 1e9;
    consumer_stop.store(true, Ordering::Relaxed);
    for t in consumer_threads {
        t.join().map_err(|_| LoadError::Thread("consumer".into()))?;
    }
    sampler.stop.store(true, Ordering::Relaxed);
    sampler
        .handle
        .join()
        .map_err(|_| LoadError::Thread("sampler".into()))?;
    if opts.delete_topic && opts.create_topic {
        if let Err(e) = driver.delete_topic(&topic) {
            progress(&format!("note: could not delete topic {topic}: {e}"));
        }
    }

    // Figures.
    let (m_end_ns, m_end_snap) = measure_stop;
    let measured_secs = (m_end_ns - measure_start_ns) as f64 / 1e9;
    let m = m_end_snap.since(&measure_start_snap);
    let mut publish_latency = LatencyHist::new();
    let mut publish_delay = LatencyHist::new();
    for p in &producer_probes {
        let (lat, delay) = p.totals();
        publish_latency.merge(&lat);
        publish_delay.merge(&delay);
    }
    let mut e2e = LatencyHist::new();
    for c in &consumer_probes {
        e2e.merge(&c.total());
    }
    let final_snap = shared.counters.snapshot();
    let audit = shared.ledger.audit();
    let errors = ErrorCounts {
        failed_sends: final_snap.failed,
        unflushed,
        consume_errors: final_snap.consume_errors,
        corrupt: final_snap.corrupt,
        foreign: final_snap.foreign,
        texts: shared.errors(),
    };
    let ticks = procstat::ticks_per_sec();
    let (from_ms, to_ms) = (measure_start_ns / 1_000_000, m_end_ns / 1_000_000);
    let broker_samples = lock(&sampler.broker).clone();
    let own_samples = lock(&sampler.own).clone();
    let delivery_ok = audit.lost == 0 && errors.corrupt == 0;
    let clean = delivery_ok && errors.total() == 0;
    let message = if !delivery_ok {
        let why = match drain_end {
            DrainEnd::Stalled => format!(
                "consumers received nothing new for {stall:?} while these were missing: lost"
            ),
            DrainEnd::TimedOut => format!(
                "consumers were still catching up when the {:?} drain timeout expired: backlog, not proven loss",
                w.drain_timeout
            ),
            DrainEnd::Drained => "consumers drained".to_string(),
        };
        format!(
            "FAILED: {} acknowledged messages were not received ({why}); {} arrived corrupt; first missing (producer, sequence): {:?}",
            audit.lost, errors.corrupt, audit.lost_examples
        )
    } else if !clean {
        format!("delivered, but with {} errors (see above)", errors.total())
    } else {
        format!(
            "ok: all {} acknowledged messages received intact",
            audit.acked
        )
    };
    Ok(RunResult {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        broker: opts.broker_label.clone(),
        bootstrap: opts.bootstrap.clone(),
        driver: driver.name().to_string(),
        workload: w.clone(),
        topic,
        started_unix_ms,
        measured_secs,
        offered: Throughput::over(m.sent, m.sent * w.message_size as u64, measured_secs),
        publish: Throughput::over(m.acked, m.bytes_acked, measured_secs),
        consume: Throughput::over(m.received, m.bytes_received, measured_secs),
        publish_latency: publish_latency.summary(),
        publish_delay: publish_delay.summary(),
        end_to_end_latency: e2e.summary(),
        errors,
        delivery: audit,
        backlog_at_measure_end: backlog(&m_end_snap),
        drained,
        drain_secs,
        rate_history,
        broker_resources: procstat::summarize(&broker_samples, from_ms, to_ms, ticks),
        loadgen_resources: procstat::summarize(&own_samples, from_ms, to_ms, ticks),
        broker_rss_series: broker_samples
            .iter()
            .map(|s| (s.t_ms as f64 / 1000.0, s.rss_kib as f64 / 1024.0))
            .collect(),
        verdict: Verdict {
            delivery_ok,
            clean,
            message,
        },
    })
}
