//! Cluster metadata (servers, topics, partition leaders) and the admin
//! operations that create and delete topics.

use bytes::{BufMut, BytesMut};

use super::codec::{message, put_ids};
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::{DecodeError, Reader, WireWrite};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Metadata {
    pub correlation: u32,
    /// Topics to describe; empty for all.
    pub topics: Vec<String>,
}

message!(
    Metadata,
    op::METADATA,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(t);
        }
    },
    |r| {
        Ok(Metadata {
            correlation: r.u32("correlation id")?,
            topics: r.array("topics", 2, |r| r.string("topic"))?,
        })
    }
);

/// A server of the cluster, at its native address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Node {
    pub id: u32,
    pub host: String,
    pub port: u16,
    /// Empty when the server has no rack.
    pub rack: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct PartitionMetadata {
    pub index: u32,
    /// The leader's node id, or -1 when the partition has none right now.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<u32>,
    pub in_sync: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicMetadata {
    pub name: String,
    pub error: ErrorCode,
    pub partitions: Vec<PartitionMetadata>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct MetadataResponse {
    pub correlation: u32,
    pub nodes: Vec<Node>,
    pub topics: Vec<TopicMetadata>,
}

message!(
    MetadataResponse,
    op::METADATA | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.nodes.len());
        for n in &s.nodes {
            b.put_u32(n.id);
            b.put_string(&n.host);
            b.put_u16(n.port);
            b.put_string(&n.rack);
        }
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(&t.name);
            b.put_u16(t.error.0);
            b.put_count(t.partitions.len());
            for p in &t.partitions {
                b.put_u32(p.index);
                b.put_i32(p.leader);
                b.put_i32(p.leader_epoch);
                put_ids(b, &p.replicas);
                put_ids(b, &p.in_sync);
            }
        }
    },
    |r| {
        Ok(MetadataResponse {
            correlation: r.u32("correlation id")?,
            nodes: r.array("nodes", 10, |r| {
                Ok(Node {
                    id: r.u32("node id")?,
                    host: r.string("host")?,
                    port: r.u16("port")?,
                    rack: r.string("rack")?,
                })
            })?,
            topics: r.array("topics", 8, |r| {
                Ok(TopicMetadata {
                    name: r.string("topic")?,
                    error: ErrorCode(r.u16("error")?),
                    partitions: r.array("partitions", 20, |r| {
                        Ok(PartitionMetadata {
                            index: r.u32("partition")?,
                            leader: r.i32("leader")?,
                            leader_epoch: r.i32("leader epoch")?,
                            replicas: r.array("replicas", 4, |r| r.u32("replica"))?,
                            in_sync: r.array("in-sync replicas", 4, |r| r.u32("replica"))?,
                        })
                    })?,
                })
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CreateTopic {
    pub correlation: u32,
    pub name: String,
    /// -1 for the server's default (`num.partitions`).
    pub partitions: i32,
    /// -1 for the server's default (`default.replication.factor`).
    pub replication_factor: i16,
    /// Kafka topic settings, e.g. `retention.ms`.
    pub configs: Vec<(String, String)>,
}

message!(
    CreateTopic,
    op::CREATE_TOPIC,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.name);
        b.put_i32(s.partitions);
        b.put_i16(s.replication_factor);
        b.put_count(s.configs.len());
        for (k, v) in &s.configs {
            b.put_string(k);
            b.put_string(v);
        }
    },
    |r| {
        Ok(CreateTopic {
            correlation: r.u32("correlation id")?,
            name: r.string("topic")?,
            partitions: r.i32("partitions")?,
            replication_factor: r.i16("replication factor")?,
            configs: r.array("configs", 4, |r| {
                Ok((r.string("config name")?, r.string("config value")?))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DeleteTopic {
    pub correlation: u32,
    pub name: String,
}

message!(
    DeleteTopic,
    op::DELETE_TOPIC,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.name);
    },
    |r| {
        Ok(DeleteTopic {
            correlation: r.u32("correlation id")?,
            name: r.string("topic")?,
        })
    }
);

/// The answer to [`CreateTopic`] and [`DeleteTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// Empty when `error` is NONE.
    pub message: String,
}

impl TopicResponse {
    fn encode(&self, b: &mut BytesMut) {
        b.put_u32(self.correlation);
        b.put_u16(self.error.0);
        b.put_string(&self.message);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(TopicResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            message: r.string("message")?,
        })
    }
}

/// [`TopicResponse`] to a [`CreateTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CreateTopicResponse(pub TopicResponse);
message!(
    CreateTopicResponse,
    op::CREATE_TOPIC | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(CreateTopicResponse(TopicResponse::decode(r)?)) }
);

/// [`TopicResponse`] to a [`DeleteTopic`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct DeleteTopicResponse(pub TopicResponse);
message!(
    DeleteTopicResponse,
    op::DELETE_TOPIC | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(DeleteTopicResponse(TopicResponse::decode(r)?)) }
);
