//! The Kafka driver end to end against librdkafka's built-in mock cluster:
//! topic metadata, a consumer group, paced producers, acknowledgements and
//! the delivery audit all run through real librdkafka clients.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use loadtest::driver::kafka::KafkaDriver;
use loadtest::runner::{run, RunOptions};
use loadtest::workload::Workload;
use rdkafka::mocking::MockCluster;

#[test]
fn kafka_driver_delivers_and_audits_every_message_through_librdkafka() {
    let cluster = MockCluster::new(1).unwrap();
    cluster.create_topic("mock-topic", 4, 1).unwrap();
    let bootstrap = cluster.bootstrap_servers();
    let w = Workload::from_yaml(
        "name: mock\npartitions: 4\nmessage_size: 256\nproducers: 2\nconsumers: 2\nrate: 1000\nacks: all\nwarmup: 1s\nduration: 3s\ndrain_timeout: 30s\n\
         consumer_config:\n  session.timeout.ms: \"6000\"\n  heartbeat.interval.ms: \"500\"\n",
    )
    .unwrap();
    let driver = Arc::new(KafkaDriver::new(&bootstrap, &w));
    let mut opts = RunOptions::new(w, "librdkafka-mock", &bootstrap);
    opts.topic = Some("mock-topic".into());
    opts.create_topic = false;
    let mut lines = Vec::new();
    let r = run(driver, &opts, &mut |l| lines.push(l.to_string())).unwrap();
    assert!(
        r.verdict.delivery_ok,
        "{}\n{}",
        r.verdict.message,
        lines.join("\n")
    );
    assert!(r.delivery.acked > 0);
    assert_eq!(r.delivery.lost, 0);
    assert!(r.drained);
    assert_eq!(r.errors.failed_sends, 0, "{:?}", r.errors.texts);
    assert!(r.publish_latency.count > 0);
    assert!(r.end_to_end_latency.count > 0);
}
