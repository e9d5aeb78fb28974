//! The floor end to end: `loadtest mock-broker`'s broker (librdkafka's mock
//! cluster, started in this process as the subcommand starts it) serves the
//! ci-smoke workload through the Kafka driver exactly as `side-by-side.sh`
//! runs it (`--topic NAME --no-create`), and the ledger must be exact.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use loadtest::driver::kafka::KafkaDriver;
use loadtest::driver::{Driver, TopicSpec};
use loadtest::mock_broker::{MockBroker, MockTopic};
use loadtest::runner::{run, RunOptions};
use loadtest::workload::{Overrides, Workload};

fn ci_smoke() -> Workload {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/ci-smoke.yaml");
    // The workload as CI runs it, with shorter phases.
    Workload::from_file(&path)
        .unwrap()
        .with_overrides(&Overrides {
            warmup: Some(Duration::from_secs(1)),
            duration: Some(Duration::from_secs(3)),
            ..Overrides::default()
        })
        .unwrap()
}

fn spec(name: &str, partitions: u32, create: bool) -> TopicSpec {
    TopicSpec {
        name: name.into(),
        partitions,
        replication_factor: 1,
        create,
        configs: Default::default(),
    }
}

#[test]
fn ci_smoke_runs_against_the_floor_with_an_exact_ledger() {
    let mut w = ci_smoke();
    // As side-by-side.sh runs the floor: the mock holds an empty fetch for
    // the whole wait, so the consumers use a short one.
    w.consumer_config
        .insert("fetch.wait.max.ms".into(), "1".into());
    let floor = MockBroker::start(&[MockTopic {
        name: "floor-ci-smoke".into(),
        partitions: w.partitions,
    }])
    .unwrap();
    let bootstrap = floor.bootstrap();
    let driver = Arc::new(KafkaDriver::new(&bootstrap, &w));
    let mut opts = RunOptions::new(w, "floor", &bootstrap);
    opts.topic = Some("floor-ci-smoke".into());
    opts.create_topic = false;
    let mut lines = Vec::new();
    let r = run(driver, &opts, &mut |l| lines.push(l.to_string())).unwrap();
    let log = lines.join("\n");
    assert!(r.verdict.delivery_ok, "{}\n{log}", r.verdict.message);
    assert!(r.delivery.acked > 0, "{log}");
    assert_eq!(r.delivery.lost, 0, "{log}");
    assert_eq!(r.errors.corrupt, 0, "{log}");
    assert_eq!(r.errors.failed_sends, 0, "{:?}", r.errors.texts);
    assert!(r.drained, "{log}");
    // The group covered all of ci-smoke's partitions before producing.
    assert!(
        lines
            .iter()
            .any(|l| l.contains("consumers assigned all 4 partitions")),
        "{log}"
    );
    assert!(r.publish_latency.count > 0);
    assert!(r.end_to_end_latency.count > 0);
}

#[test]
fn a_run_that_asks_to_create_the_floors_topic_uses_it_as_it_is() {
    let floor = MockBroker::start(&[MockTopic {
        name: "made-at-start".into(),
        partitions: 6,
    }])
    .unwrap();
    let w = ci_smoke();
    let driver = KafkaDriver::new(&floor.bootstrap(), &w);
    // The mock has no CreateTopics (it would time out); the topic is there
    // with the partition count asked for, so it is used without creating.
    driver
        .prepare_topic(&spec("made-at-start", 6, true))
        .unwrap();
}
