//! KIP-951 leader discovery: a Produce (v10+) or Fetch (v16+) partition
//! answered NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH carries the
//! leader this agent knows now (`current_leader`: id and leader epoch), and
//! the response lists those leaders' endpoints (`node_endpoints`), so
//! clients that read them (librdkafka 2.4+, the Java client 3.7+) move to
//! the new leader without a metadata round trip.
//!
//! Ids and endpoints are the ones Metadata shows: in load-balancer mode the
//! one broker at the balancer's address.

use std::collections::BTreeSet;

use kafka_protocol::messages::{fetch_response, produce_response, BrokerId};
use kafka_protocol::messages::{FetchResponse, ProduceResponse};
use kafka_protocol::ResponseError;
use metastore::{TopicInfo, Topics};
use uuid::Uuid;

use crate::broker::Broker;
use crate::brokers;

/// The first versions that carry the fields.
const PRODUCE_SINCE: i16 = 10;
const FETCH_SINCE: i16 = 16;

fn moved(code: i16) -> bool {
    code == ResponseError::NotLeaderOrFollower.code()
        || code == ResponseError::FencedLeaderEpoch.code()
}

/// The leader (as clients know it) and leader epoch of a partition, when
/// it has a leader.
fn leader_of(b: &Broker, topic: Option<&TopicInfo>, partition: i32) -> Option<(i32, i32)> {
    let p = topic?.partition(partition)?;
    let leader = i32::try_from(p.leader?).ok()?;
    Some((brokers::shown_id(&b.config, leader), p.leader_epoch))
}

fn lookup(b: &Broker, name: &str, id: Uuid) -> Option<std::sync::Arc<TopicInfo>> {
    if id.is_nil() {
        b.node.catalog.topic(name)
    } else {
        b.node.catalog.topic_by_id(id)
    }
}

/// The endpoints of `leaders`, as Metadata lists them.
fn endpoints(
    b: &Broker,
    zone: Option<&str>,
    leaders: &BTreeSet<i32>,
) -> Vec<(i32, String, i32, Option<String>)> {
    brokers::for_zone(&b.config, zone, brokers::live(&b.node.catalog, &b.config))
        .into_iter()
        .filter(|e| leaders.contains(&e.id))
        .map(|e| (e.id, e.host, e.port, e.rack))
        .collect()
}

/// Fills `current_leader` and `node_endpoints` of a Produce response.
pub(super) fn produce(b: &Broker, version: i16, zone: Option<&str>, resp: &mut ProduceResponse) {
    if version < PRODUCE_SINCE {
        return;
    }
    let mut leaders = BTreeSet::new();
    for t in &mut resp.responses {
        let topic = lookup(b, t.name.as_str(), t.topic_id);
        for p in t
            .partition_responses
            .iter_mut()
            .filter(|p| moved(p.error_code))
        {
            if let Some((leader, epoch)) = leader_of(b, topic.as_deref(), p.index) {
                p.current_leader = produce_response::LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.insert(leader);
            }
        }
    }
    resp.node_endpoints = endpoints(b, zone, &leaders)
        .into_iter()
        .map(|(id, host, port, rack)| {
            produce_response::NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(super::s(host))
                .with_port(port)
                .with_rack(rack.map(super::s))
        })
        .collect();
}

/// Fills `current_leader` and `node_endpoints` of a Fetch response.
pub(super) fn fetch(b: &Broker, version: i16, zone: Option<&str>, resp: &mut FetchResponse) {
    if version < FETCH_SINCE {
        return;
    }
    let mut leaders = BTreeSet::new();
    for t in &mut resp.responses {
        let topic = lookup(b, t.topic.as_str(), t.topic_id);
        for p in t.partitions.iter_mut().filter(|p| moved(p.error_code)) {
            if let Some((leader, epoch)) = leader_of(b, topic.as_deref(), p.partition_index) {
                p.current_leader = fetch_response::LeaderIdAndEpoch::default()
                    .with_leader_id(BrokerId(leader))
                    .with_leader_epoch(epoch);
                leaders.insert(leader);
            }
        }
    }
    resp.node_endpoints = endpoints(b, zone, &leaders)
        .into_iter()
        .map(|(id, host, port, rack)| {
            fetch_response::NodeEndpoint::default()
                .with_node_id(BrokerId(id))
                .with_host(super::s(host))
                .with_port(port)
                .with_rack(rack.map(super::s))
        })
        .collect();
}

#[cfg(test)]
#[path = "leader_hints_tests.rs"]
mod tests;
