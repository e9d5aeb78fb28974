//! KIP-951: NOT_LEADER_OR_FOLLOWER answers name the current leader and its
//! endpoint, encoded at the versions that carry them.

use kafka_protocol::messages::*;
use kafka_protocol::records::Compression;
use metastore::Topics;

use super::super::test_support::*;
use crate::broker::BrokerConfig;
use crate::testing::{Logs, TestBroker};

/// A broker of the same cluster (same metastore) that does not lead.
fn follower(t: &TestBroker) -> crate::broker::Broker {
    crate::testing::broker(
        &t.backends,
        BrokerConfig {
            node_id: 2,
            ..BrokerConfig::default()
        },
    )
}

#[tokio::test]
async fn a_produce_refused_by_a_follower_names_the_leader_and_its_endpoint() {
    let t = TestBroker::start(Logs::Disk).await;
    create(&t.broker, "led", 1).await;
    let epoch = t
        .broker
        .node
        .catalog
        .topic("led")
        .expect("topic")
        .partitions[0]
        .leader_epoch;
    let other = follower(&t);
    let req = produce_req("led", 0, batch(&["x"], None, Compression::None), -1);
    let resp: ProduceResponse = call(&other, ApiKey::Produce, 10, &req).await;
    let p = &resp.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(
        (p.current_leader.leader_id, p.current_leader.leader_epoch),
        (BrokerId(1), epoch)
    );
    assert_eq!(resp.node_endpoints.len(), 1);
    let e = &resp.node_endpoints[0];
    assert_eq!(
        (e.node_id, e.host.as_str(), e.port),
        (BrokerId(1), "127.0.0.1", 9092)
    );
    // before v10 the fields do not exist: nothing is filled in
    let old: ProduceResponse = call(&other, ApiKey::Produce, 9, &req).await;
    let p = &old.responses[0].partition_responses[0];
    assert_eq!(p.error_code, 6);
    assert_eq!(p.current_leader.leader_id, BrokerId(-1));
    assert!(old.node_endpoints.is_empty());
    // a successful write carries no hint
    let ok: ProduceResponse = call(&t.broker, ApiKey::Produce, 11, &req).await;
    assert_eq!(ok.responses[0].partition_responses[0].error_code, 0);
    assert!(ok.node_endpoints.is_empty());
}

#[tokio::test]
async fn a_fetch_refused_by_a_follower_names_the_leader_and_its_endpoint() {
    let t = TestBroker::start(Logs::Disk).await;
    create(&t.broker, "led", 1).await;
    let topic = t.broker.node.catalog.topic("led").expect("topic");
    let other = follower(&t);
    let mut req = fetch_req("led", 0, 0, 1);
    req.topics[0].topic_id = topic.id;
    let resp: FetchResponse = call(&other, ApiKey::Fetch, 16, &req).await;
    let p = &resp.responses[0].partitions[0];
    assert_eq!(p.error_code, 6, "NOT_LEADER_OR_FOLLOWER");
    assert_eq!(
        (p.current_leader.leader_id, p.current_leader.leader_epoch),
        (BrokerId(1), topic.partitions[0].leader_epoch)
    );
    assert_eq!(resp.node_endpoints.len(), 1);
    assert_eq!(resp.node_endpoints[0].node_id, BrokerId(1));
    assert_eq!(resp.node_endpoints[0].port, 9092);
    let old: FetchResponse = call(&other, ApiKey::Fetch, 12, &fetch_req("led", 0, 0, 1)).await;
    assert_eq!(old.responses[0].partitions[0].error_code, 6);
    assert!(old.node_endpoints.is_empty());
}
