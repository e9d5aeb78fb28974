//! What the client knows of the cluster: a metadata call's answer, and the
//! cache of servers and partition leaders that requests are routed by.

use std::collections::HashMap;
use std::sync::Arc;

#[cfg(doc)]
use super::Client;
use crate::bootstrap::Address;
use crate::proto::{ErrorCode, MetadataResponse, Node, PartitionMetadata, TopicMetadata};

/// What [`Client::metadata`] found: the servers and the topics asked
/// about, each with its error code (UNKNOWN_TOPIC for a missing one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClusterMetadata {
    pub nodes: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
}

impl ClusterMetadata {
    /// The topic of this name, if it exists.
    pub fn topic(&self, name: &str) -> Option<&TopicMetadata> {
        self.topics
            .iter()
            .find(|t| t.name == name && t.error == ErrorCode::NONE)
    }
}

/// A topic's partitions as the client routes to them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TopicRoute {
    pub name: Arc<str>,
    /// The leader of partition `i` at index `i`; `None` while it has none.
    pub leaders: Vec<Option<u32>>,
}

impl TopicRoute {
    fn from_metadata(t: &TopicMetadata) -> TopicRoute {
        let count = t
            .partitions
            .iter()
            .map(|p| p.index as usize + 1)
            .max()
            .unwrap_or(0);
        let mut leaders = vec![None; count];
        for PartitionMetadata { index, leader, .. } in &t.partitions {
            leaders[*index as usize] = u32::try_from(*leader).ok();
        }
        TopicRoute {
            name: Arc::from(t.name.as_str()),
            leaders,
        }
    }

    pub(crate) fn partitions(&self) -> u32 {
        self.leaders.len() as u32
    }

    pub(crate) fn leader(&self, partition: u32) -> Option<u32> {
        self.leaders.get(partition as usize).copied().flatten()
    }
}

#[derive(Debug, Default)]
pub(super) struct MetaCache {
    pub(super) nodes: HashMap<u32, Address>,
    /// Looked up once per record a producer routes: a fast hasher.
    pub(super) topics: HashMap<String, Arc<TopicRoute>, foldhash::fast::RandomState>,
}

impl MetaCache {
    pub(super) fn apply(&mut self, answer: &MetadataResponse, all_topics: bool) {
        if !answer.nodes.is_empty() {
            self.nodes = answer
                .nodes
                .iter()
                .map(|n| {
                    let addr = Address {
                        host: n.host.clone(),
                        port: n.port,
                    };
                    (n.id, addr)
                })
                .collect();
        }
        if all_topics {
            self.topics.clear();
        }
        for t in &answer.topics {
            if t.error == ErrorCode::NONE {
                self.topics
                    .insert(t.name.clone(), Arc::new(TopicRoute::from_metadata(t)));
            } else {
                self.topics.remove(&t.name);
            }
        }
    }
}
