//! Consumer groups: committed offsets, shared with Kafka clients of the
//! same group, and the membership (coordinator, join, heartbeat, leave)
//! through which the server assigns partitions.

use bytes::{BufMut, BytesMut};

use super::codec::{message, put_ids};
use super::error_code::ErrorCode;
use super::op::{self, RESPONSE};
use crate::wire::{DecodeError, Reader, WireWrite};

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CommittedOffset {
    pub topic: String,
    pub partition: u32,
    /// The next offset to read.
    pub offset: i64,
    pub metadata: String,
}

/// Commits offsets for a group, where Kafka clients of the group see
/// them too: outside any membership (generation -1 and no member id), as
/// Kafka's standalone consumers do, or as a member of the group
/// ([`JoinGroup`]), with the generation and member id its join gave.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CommitOffsets {
    pub correlation: u32,
    pub group: String,
    pub offsets: Vec<CommittedOffset>,
    /// The member's generation; -1 outside membership.
    pub generation: i32,
    /// The member's id; empty outside membership.
    pub member_id: String,
}

impl Default for CommitOffsets {
    /// A commit outside membership.
    fn default() -> Self {
        CommitOffsets {
            correlation: 0,
            group: String::new(),
            offsets: Vec::new(),
            generation: -1,
            member_id: String::new(),
        }
    }
}

message!(
    CommitOffsets,
    op::COMMIT_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_count(s.offsets.len());
        for o in &s.offsets {
            b.put_string(&o.topic);
            b.put_u32(o.partition);
            b.put_i64(o.offset);
            b.put_string(&o.metadata);
        }
        b.put_i32(s.generation);
        b.put_string(&s.member_id);
    },
    |r| {
        Ok(CommitOffsets {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            offsets: r.array("offsets", 16, |r| {
                Ok(CommittedOffset {
                    topic: r.string("topic")?,
                    partition: r.u32("partition")?,
                    offset: r.i64("offset")?,
                    metadata: r.string("metadata")?,
                })
            })?,
            generation: r.i32("generation")?,
            member_id: r.string("member id")?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct CommitOffsetsResponse {
    pub correlation: u32,
    /// (topic, partition, error), in request order.
    pub partitions: Vec<(String, u32, ErrorCode)>,
}

message!(
    CommitOffsetsResponse,
    op::COMMIT_OFFSETS | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.partitions.len());
        for (t, p, e) in &s.partitions {
            b.put_string(t);
            b.put_u32(*p);
            b.put_u16(e.0);
        }
    },
    |r| {
        Ok(CommitOffsetsResponse {
            correlation: r.u32("correlation id")?,
            partitions: r.array("partitions", 8, |r| {
                Ok((
                    r.string("topic")?,
                    r.u32("partition")?,
                    ErrorCode(r.u16("error")?),
                ))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchOffsets {
    pub correlation: u32,
    pub group: String,
    pub partitions: Vec<(String, u32)>,
}

message!(
    FetchOffsets,
    op::FETCH_OFFSETS,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_count(s.partitions.len());
        for (t, p) in &s.partitions {
            b.put_string(t);
            b.put_u32(*p);
        }
    },
    |r| {
        Ok(FetchOffsets {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            partitions: r.array("partitions", 6, |r| {
                Ok((r.string("topic")?, r.u32("partition")?))
            })?,
        })
    }
);

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FetchOffsetsResponse {
    pub correlation: u32,
    /// -1 offset: nothing committed.
    pub offsets: Vec<(CommittedOffset, ErrorCode)>,
}

message!(
    FetchOffsetsResponse,
    op::FETCH_OFFSETS | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_count(s.offsets.len());
        for (o, e) in &s.offsets {
            b.put_string(&o.topic);
            b.put_u32(o.partition);
            b.put_u16(e.0);
            b.put_i64(o.offset);
            b.put_string(&o.metadata);
        }
    },
    |r| {
        Ok(FetchOffsetsResponse {
            correlation: r.u32("correlation id")?,
            offsets: r.array("offsets", 18, |r| {
                let topic = r.string("topic")?;
                let partition = r.u32("partition")?;
                let e = ErrorCode(r.u16("error")?);
                let offset = r.i64("offset")?;
                let metadata = r.string("metadata")?;
                Ok((
                    CommittedOffset {
                        topic,
                        partition,
                        offset,
                        metadata,
                    },
                    e,
                ))
            })?,
        })
    }
);

/// Asks which server coordinates a consumer group.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindCoordinator {
    pub correlation: u32,
    pub group: String,
}

message!(
    FindCoordinator,
    op::FIND_COORDINATOR,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
    },
    |r| {
        Ok(FindCoordinator {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
        })
    }
);

/// The server coordinating a group, at its native address.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct FindCoordinatorResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    pub node_id: u32,
    /// Empty on error.
    pub host: String,
    /// 0 on error.
    pub port: u16,
}

message!(
    FindCoordinatorResponse,
    op::FIND_COORDINATOR | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_u32(s.node_id);
        b.put_string(&s.host);
        b.put_u16(s.port);
    },
    |r| {
        Ok(FindCoordinatorResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            node_id: r.u32("node id")?,
            host: r.string("host")?,
            port: r.u16("port")?,
        })
    }
);

/// Joins a consumer group (or rejoins it after a rebalance) and waits for
/// the member's share of the subscribed topics' partitions.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct JoinGroup {
    pub correlation: u32,
    pub group: String,
    /// Empty on a first join; the id the last join gave afterwards.
    pub member_id: String,
    /// The topics the member reads.
    pub topics: Vec<String>,
    /// How long the member stays in the group without a heartbeat.
    pub session_timeout_ms: u32,
    /// How long a rebalance waits for the members to join again.
    pub rebalance_timeout_ms: u32,
}

message!(
    JoinGroup,
    op::JOIN_GROUP,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
        b.put_count(s.topics.len());
        for t in &s.topics {
            b.put_string(t);
        }
        b.put_u32(s.session_timeout_ms);
        b.put_u32(s.rebalance_timeout_ms);
    },
    |r| {
        Ok(JoinGroup {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
            topics: r.array("topics", 2, |r| r.string("topic"))?,
            session_timeout_ms: r.u32("session timeout")?,
            rebalance_timeout_ms: r.u32("rebalance timeout")?,
        })
    }
);

/// Partitions of one topic assigned to a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct TopicAssignment {
    pub topic: String,
    pub partitions: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct JoinGroupResponse {
    pub correlation: u32,
    pub error: ErrorCode,
    /// The generation the member belongs to; -1 on error.
    pub generation: i32,
    /// The member's id (given on a first join); the request's on error.
    pub member_id: String,
    /// The member's partitions; empty on error.
    pub assignment: Vec<TopicAssignment>,
}

message!(
    JoinGroupResponse,
    op::JOIN_GROUP | RESPONSE,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_u16(s.error.0);
        b.put_i32(s.generation);
        b.put_string(&s.member_id);
        b.put_count(s.assignment.len());
        for t in &s.assignment {
            b.put_string(&t.topic);
            put_ids(b, &t.partitions);
        }
    },
    |r| {
        Ok(JoinGroupResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
            generation: r.i32("generation")?,
            member_id: r.string("member id")?,
            assignment: r.array("assignment", 6, |r| {
                Ok(TopicAssignment {
                    topic: r.string("topic")?,
                    partitions: r.array("partitions", 4, |r| r.u32("partition"))?,
                })
            })?,
        })
    }
);

/// Keeps a member in its group; tells it when to join again.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct Heartbeat {
    pub correlation: u32,
    pub group: String,
    pub member_id: String,
    pub generation: i32,
}

message!(
    Heartbeat,
    op::HEARTBEAT,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
        b.put_i32(s.generation);
    },
    |r| {
        Ok(Heartbeat {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
            generation: r.i32("generation")?,
        })
    }
);

/// The answer to a [`Heartbeat`] and to a [`LeaveGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct GroupResponse {
    pub correlation: u32,
    pub error: ErrorCode,
}

impl GroupResponse {
    fn encode(&self, b: &mut BytesMut) {
        b.put_u32(self.correlation);
        b.put_u16(self.error.0);
    }
    fn decode(r: &mut Reader) -> Result<Self, DecodeError> {
        Ok(GroupResponse {
            correlation: r.u32("correlation id")?,
            error: ErrorCode(r.u16("error")?),
        })
    }
}

/// [`GroupResponse`] to a [`Heartbeat`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct HeartbeatResponse(pub GroupResponse);
message!(
    HeartbeatResponse,
    op::HEARTBEAT | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(HeartbeatResponse(GroupResponse::decode(r)?)) }
);

/// Leaves a group at once, so that the others rebalance without waiting
/// for the member's session to expire.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeaveGroup {
    pub correlation: u32,
    pub group: String,
    pub member_id: String,
}

message!(
    LeaveGroup,
    op::LEAVE_GROUP,
    |s, b| {
        b.put_u32(s.correlation);
        b.put_string(&s.group);
        b.put_string(&s.member_id);
    },
    |r| {
        Ok(LeaveGroup {
            correlation: r.u32("correlation id")?,
            group: r.string("group")?,
            member_id: r.string("member id")?,
        })
    }
);

/// [`GroupResponse`] to a [`LeaveGroup`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(test, derive(serde::Serialize, serde::Deserialize))]
pub struct LeaveGroupResponse(pub GroupResponse);
message!(
    LeaveGroupResponse,
    op::LEAVE_GROUP | RESPONSE,
    |s, b| { s.0.encode(b) },
    |r| { Ok(LeaveGroupResponse(GroupResponse::decode(r)?)) }
);
