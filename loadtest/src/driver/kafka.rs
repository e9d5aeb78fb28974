//! The Kafka driver: librdkafka through the `rdkafka` crate, so what is
//! measured is the broker as real Kafka clients see it, independent of our
//! own protocol code. Shaped like the OpenMessaging Benchmark's Kafka
//! driver: one client instance per producer and per consumer.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::executor::block_on;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::{ClientContext, DefaultClientContext};
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::metadata::Metadata;
use rdkafka::producer::{BaseRecord, DeliveryResult, Producer, ProducerContext, ThreadedProducer};

use super::{ConsumerClient, Driver, ProducerClient, SendOutcome, TopicSpec};
use crate::error::LoadError;
use crate::probe::{ConsumerProbe, ProducerProbe, RunShared};
use crate::workload::Workload;

/// How long topic creation and metadata propagation may take.
const TOPIC_READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Reaches a Kafka-wire broker at `bootstrap`.
#[derive(Debug, Clone)]
pub struct KafkaDriver {
    bootstrap: String,
    producer_props: BTreeMap<String, String>,
    consumer_props: BTreeMap<String, String>,
    /// The workload's `client_config`, for the admin client (the two maps
    /// above include it).
    common_props: BTreeMap<String, String>,
    /// The workload's `keys`.
    keys: Option<u64>,
}

impl KafkaDriver {
    /// Client settings come from the workload; its `producer_config` and
    /// `consumer_config` entries win over the derived ones.
    pub fn new(bootstrap: &str, w: &Workload) -> KafkaDriver {
        let mut producer_props = w.client_config.clone();
        for (k, v) in [
            ("acks", w.acks.as_str().to_string()),
            ("linger.ms", w.linger_ms.to_string()),
            ("batch.size", w.batch_size.to_string()),
            ("compression.type", w.compression.as_str().to_string()),
        ] {
            producer_props.insert(k.to_string(), v);
        }
        producer_props.extend(w.producer_config.clone());
        let mut consumer_props = w.client_config.clone();
        for (k, v) in [
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "true"),
            ("enable.partition.eof", "false"),
        ] {
            consumer_props.insert(k.to_string(), v.to_string());
        }
        consumer_props.extend(w.consumer_config.clone());
        KafkaDriver {
            bootstrap: bootstrap.to_string(),
            producer_props,
            consumer_props,
            common_props: w.client_config.clone(),
            keys: w.keys.filter(|k| *k > 0),
        }
    }

    fn config(&self, props: &BTreeMap<String, String>, client_id: &str) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.bootstrap);
        c.set("client.id", client_id);
        for (k, v) in props {
            c.set(k, v);
        }
        c.set_log_level(RDKafkaLogLevel::Error);
        c
    }

    fn admin(&self) -> Result<AdminClient<DefaultClientContext>, LoadError> {
        let mut props = self.common_props.clone();
        // Looking a topic up must not create it with the broker's defaults.
        props.insert("allow.auto.create.topics".to_string(), "false".to_string());
        self.config(&props, "loadtest-admin")
            .create()
            .map_err(|e| LoadError::ClientConfig(e.to_string()))
    }
}

fn topic_err(topic: &str, reason: impl ToString) -> LoadError {
    LoadError::Topic {
        topic: topic.to_string(),
        reason: reason.to_string(),
    }
}

/// Why the topic in `md` is not ready for the run, or `Ok` when it has the
/// partition count wanted and every partition has a leader.
fn topic_status(md: &Metadata, name: &str, partitions: u32) -> Result<(), String> {
    let Some(t) = md.topics().iter().find(|t| t.name() == name) else {
        return Err("topic missing from metadata".into());
    };
    if let Some(e) = t.error() {
        return Err(format!("metadata error: {}", RDKafkaErrorCode::from(e)));
    }
    if t.partitions().len() != partitions as usize {
        return Err(format!(
            "it has {} partitions, the workload needs {partitions}",
            t.partitions().len()
        ));
    }
    if t.partitions()
        .iter()
        .all(|p| p.error().is_none() && p.leader() >= 0)
    {
        Ok(())
    } else {
        Err("partitions without a leader".into())
    }
}

impl Driver for KafkaDriver {
    fn name(&self) -> &'static str {
        "kafka"
    }

    fn prepare_topic(&self, topic: &TopicSpec) -> Result<(), LoadError> {
        let admin = self.admin()?;
        // A topic that is already there as the run needs it is used as it
        // is: a broker without CreateTopics (librdkafka's mock cluster, the
        // floor) lets that request time out rather than refuse it.
        let exists = admin
            .inner()
            .fetch_metadata(Some(&topic.name), Duration::from_secs(5))
            .is_ok_and(|md| topic_status(&md, &topic.name, topic.partitions).is_ok());
        if topic.create && !exists {
            let mut new = NewTopic::new(
                &topic.name,
                topic.partitions as i32,
                TopicReplication::Fixed(i32::from(topic.replication_factor)),
            );
            for (k, v) in &topic.configs {
                new = new.set(k, v);
            }
            let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
            let results = block_on(admin.create_topics([&new], &opts)).map_err(|e| match e {
                KafkaError::AdminOp(RDKafkaErrorCode::OperationTimedOut) => topic_err(
                    &topic.name,
                    format!(
                        "{e} (a broker without CreateTopics, such as librdkafka's mock cluster, \
                         lets it time out: create the topic beforehand, e.g. `loadtest mock-broker \
                         --topic {} --partitions {}`, and pass --topic {} --no-create)",
                        topic.name, topic.partitions, topic.name
                    ),
                ),
                e => topic_err(&topic.name, e),
            })?;
            for r in results {
                match r {
                    Ok(_) | Err((_, RDKafkaErrorCode::TopicAlreadyExists)) => {}
                    Err((_, code)) => return Err(topic_err(&topic.name, code)),
                }
            }
        }
        // Wait until metadata shows every partition with a leader: a
        // broker may acknowledge creation before leaders are in place.
        let deadline = Instant::now() + TOPIC_READY_TIMEOUT;
        let mut last = String::from("no metadata yet");
        while Instant::now() < deadline {
            match admin
                .inner()
                .fetch_metadata(Some(&topic.name), Duration::from_secs(5))
            {
                Ok(md) => match topic_status(&md, &topic.name, topic.partitions) {
                    Ok(()) => return Ok(()),
                    Err(why) => last = why,
                },
                Err(e) => last = e.to_string(),
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(topic_err(
            &topic.name,
            format!("not ready after {TOPIC_READY_TIMEOUT:?}: {last}"),
        ))
    }

    fn delete_topic(&self, topic: &str) -> Result<(), LoadError> {
        let admin = self.admin()?;
        let opts = AdminOptions::new().operation_timeout(Some(Duration::from_secs(30)));
        let results =
            block_on(admin.delete_topics(&[topic], &opts)).map_err(|e| topic_err(topic, e))?;
        for r in results {
            if let Err((_, code)) = r {
                return Err(topic_err(topic, code));
            }
        }
        Ok(())
    }

    fn producer(
        &self,
        topic: &str,
        probe: Arc<ProducerProbe>,
    ) -> Result<Box<dyn ProducerClient>, LoadError> {
        let id = format!("loadtest-producer-{}", probe.index);
        let producer: ThreadedProducer<ProducerCtx> = self
            .config(&self.producer_props, &id)
            .create_with_context(ProducerCtx { probe })
            .map_err(|e| LoadError::ClientConfig(e.to_string()))?;
        Ok(Box::new(KafkaProducer {
            producer,
            topic: topic.to_string(),
            keys: self.keys,
            sent: 0,
        }))
    }

    fn consumer(
        &self,
        topic: &str,
        group: &str,
        probe: Arc<ConsumerProbe>,
    ) -> Result<Box<dyn ConsumerClient>, LoadError> {
        let id = format!("loadtest-consumer-{}", probe.index);
        let mut cfg = self.config(&self.consumer_props, &id);
        cfg.set("group.id", group);
        let consumer: BaseConsumer<ConsumerCtx> = cfg
            .create_with_context(ConsumerCtx {
                probe: probe.clone(),
            })
            .map_err(|e| LoadError::ClientConfig(e.to_string()))?;
        consumer
            .subscribe(&[topic])
            .map_err(|e| LoadError::Consume(e.to_string()))?;
        Ok(Box::new(KafkaConsumer { consumer, probe }))
    }
}

/// Client-level errors (connection refused, broker down, ...) are worth
/// seeing in the report even when they do not fail a message.
fn note_client_error(shared: &RunShared, error: &KafkaError, reason: &str) {
    shared.note_error("client", &format!("{error}: {reason}"));
}

struct ProducerCtx {
    probe: Arc<ProducerProbe>,
}

impl ClientContext for ProducerCtx {
    fn log(&self, _level: RDKafkaLogLevel, _fac: &str, _msg: &str) {}
    fn error(&self, error: KafkaError, reason: &str) {
        note_client_error(self.probe.shared(), &error, reason);
    }
}

impl ProducerContext for ProducerCtx {
    type DeliveryOpaque = ();

    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        match result {
            Ok(m) => self.probe.on_ack(m.payload().unwrap_or(&[]), Ok(())),
            Err((e, m)) => self
                .probe
                .on_ack(m.payload().unwrap_or(&[]), Err(&e.to_string())),
        }
    }
}

struct KafkaProducer {
    producer: ThreadedProducer<ProducerCtx>,
    topic: String,
    keys: Option<u64>,
    /// Records queued so far (picks the next key).
    sent: u64,
}

impl ProducerClient for KafkaProducer {
    fn send(&mut self, payload: &[u8]) -> Result<SendOutcome, LoadError> {
        let key = self.keys.map(|n| (self.sent % n).to_string());
        let mut record: BaseRecord<'_, str, [u8]> = BaseRecord::to(&self.topic).payload(payload);
        if let Some(k) = key.as_deref() {
            record = record.key(k);
        }
        match self.producer.send(record) {
            Ok(()) => {
                self.sent += 1;
                Ok(SendOutcome::Queued)
            }
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), _)) => {
                Ok(SendOutcome::Full)
            }
            Err((e, _)) => Err(LoadError::Send(e.to_string())),
        }
    }

    fn flush(&mut self, timeout: Duration) -> u64 {
        let _ = self.producer.flush(timeout);
        self.producer.in_flight_count().max(0) as u64
    }
}

struct ConsumerCtx {
    probe: Arc<ConsumerProbe>,
}

impl ClientContext for ConsumerCtx {
    fn log(&self, _level: RDKafkaLogLevel, _fac: &str, _msg: &str) {}
    fn error(&self, error: KafkaError, reason: &str) {
        note_client_error(self.probe.shared(), &error, reason);
    }
}

impl ConsumerContext for ConsumerCtx {
    fn post_rebalance(&self, _c: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        match rebalance {
            Rebalance::Assign(tpl) => self.probe.on_assignment(tpl.count() as i64),
            Rebalance::Revoke(tpl) => self.probe.on_assignment(-(tpl.count() as i64)),
            Rebalance::Error(e) => self.probe.on_error(&format!("rebalance: {e}")),
        }
    }
}

struct KafkaConsumer {
    consumer: BaseConsumer<ConsumerCtx>,
    probe: Arc<ConsumerProbe>,
}

/// Records taken per poll call after the first, before returning to the
/// runner's loop (keeps stop checks responsive under heavy load).
const POLL_BURST: usize = 4096;

impl ConsumerClient for KafkaConsumer {
    fn poll(&mut self, timeout: Duration) {
        let mut wait = timeout;
        for _ in 0..POLL_BURST {
            match self.consumer.poll(wait) {
                None => return,
                Some(Ok(m)) => self.probe.on_message(m.payload().unwrap_or(&[])),
                Some(Err(KafkaError::MessageConsumption(RDKafkaErrorCode::PartitionEOF))) => {}
                Some(Err(e)) => self.probe.on_error(&e.to_string()),
            }
            wait = Duration::ZERO;
        }
    }
}

impl Drop for KafkaConsumer {
    fn drop(&mut self) {
        self.consumer.unsubscribe();
    }
}
