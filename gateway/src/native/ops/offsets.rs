//! Offsets: list a partition's offsets, commit and fetch a group's.

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use kafka_protocol::messages::{
    BrokerId, GroupId, ListOffsetsRequest, OffsetCommitRequest, TopicName,
};
use metastore::acl::{AclOperation as Op, ResourceType as Rt};
use metastore::Groups;
use sdk::proto::{self, ErrorCode};

use super::shared::{partition_index, refine};
use crate::broker::Broker;
use crate::kafka::api::{bridge, s, Client};
use crate::native::codes::from_kafka_for_member;
use crate::native::groups;

pub(super) async fn list_offsets(
    b: &Broker,
    c: &Client,
    client_id: &str,
    l: proto::ListOffsets,
) -> proto::ListOffsetsResponse {
    let mut out: Vec<Option<proto::OffsetFound>> = Vec::with_capacity(l.partitions.len());
    let mut topics: Vec<ListOffsetsTopic> = Vec::new();
    for (topic, partition, spec) in &l.partitions {
        if proto::OffsetSpec::from_wire(*spec).is_none() {
            out.push(Some(proto::OffsetFound {
                topic: topic.clone(),
                partition: *partition,
                error: ErrorCode::INVALID_REQUEST,
                offset: -1,
                timestamp: -1,
            }));
            continue;
        }
        out.push(None);
        let p = ListOffsetsPartition::default()
            .with_partition_index(partition_index(*partition))
            .with_current_leader_epoch(-1)
            .with_timestamp(*spec);
        // one request entry per partition asked, in order, so the answers
        // line up with the question
        topics.push(
            ListOffsetsTopic::default()
                .with_name(TopicName(s(topic.clone())))
                .with_partitions(vec![p]),
        );
    }
    let resp = bridge::list_offsets(
        b,
        c,
        client_id,
        ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_topics(topics),
    )
    .await;
    let mut answers = resp
        .topics
        .into_iter()
        .flat_map(|t| {
            let name = t.name.to_string();
            t.partitions.into_iter().map(move |p| (name.clone(), p))
        })
        .map(|(name, p)| proto::OffsetFound {
            error: refine(b, &name, p.error_code),
            topic: name,
            partition: u32::try_from(p.partition_index).unwrap_or(u32::MAX),
            offset: p.offset,
            timestamp: p.timestamp,
        });
    let partitions = out
        .into_iter()
        .map(|o| {
            o.or_else(|| answers.next()).unwrap_or(proto::OffsetFound {
                error: ErrorCode::UNKNOWN_SERVER_ERROR,
                offset: -1,
                timestamp: -1,
                ..Default::default()
            })
        })
        .collect();
    proto::ListOffsetsResponse {
        correlation: l.correlation,
        partitions,
    }
}

pub(super) async fn commit_offsets(
    b: &Broker,
    c: &Client,
    client_id: &str,
    o: proto::CommitOffsets,
) -> proto::CommitOffsetsResponse {
    let member = !o.member_id.is_empty() || o.generation >= 0;
    let refused = if o.group.is_empty() {
        Some(ErrorCode::INVALID_GROUP)
    } else if !groups::coordinates(b, &o.group) {
        // a commit is checked against the group's members, which only its
        // coordinator knows (a commit outside membership is taken only
        // while the group has none)
        Some(ErrorCode::NOT_COORDINATOR)
    } else {
        None
    };
    if let Some(error) = refused {
        return proto::CommitOffsetsResponse {
            correlation: o.correlation,
            partitions: o
                .offsets
                .into_iter()
                .map(|x| (x.topic, x.partition, error))
                .collect(),
        };
    }
    // one topic entry per offset, in order, so answers line up
    let topics = o
        .offsets
        .iter()
        .map(|x| {
            OffsetCommitRequestTopic::default()
                .with_name(TopicName(s(x.topic.clone())))
                .with_partitions(vec![OffsetCommitRequestPartition::default()
                    .with_partition_index(partition_index(x.partition))
                    .with_committed_offset(x.offset)
                    .with_committed_leader_epoch(-1)
                    .with_committed_metadata(Some(s(x.metadata.clone())))])
        })
        .collect();
    let resp = bridge::offset_commit(
        b,
        c,
        client_id,
        OffsetCommitRequest::default()
            .with_group_id(GroupId(s(o.group)))
            .with_generation_id_or_member_epoch(o.generation)
            .with_member_id(s(o.member_id))
            .with_topics(topics),
    )
    .await;
    let mut answers = resp
        .topics
        .into_iter()
        .flat_map(|t| t.partitions.into_iter().map(|p| p.error_code));
    proto::CommitOffsetsResponse {
        correlation: o.correlation,
        partitions: o
            .offsets
            .into_iter()
            .map(|x| {
                let code = answers.next().map(|c| {
                    if member {
                        match from_kafka_for_member(c) {
                            ErrorCode::UNKNOWN_TOPIC => refine(b, &x.topic, c),
                            other => other,
                        }
                    } else {
                        refine(b, &x.topic, c)
                    }
                });
                (
                    x.topic,
                    x.partition,
                    code.unwrap_or(ErrorCode::UNKNOWN_SERVER_ERROR),
                )
            })
            .collect(),
    }
}

pub(super) fn fetch_offsets(
    b: &Broker,
    c: &Client,
    o: proto::FetchOffsets,
) -> proto::FetchOffsetsResponse {
    let error = if o.group.is_empty() {
        ErrorCode::INVALID_GROUP
    } else if !bridge::may(b, c, Op::Describe, Rt::Group, &o.group) {
        ErrorCode::UNAUTHORIZED
    } else {
        ErrorCode::NONE
    };
    let committed = b.node.catalog.committed_offsets(&o.group);
    let offsets = o
        .partitions
        .into_iter()
        .map(|(topic, partition)| {
            let error = if error == ErrorCode::NONE
                && !bridge::may(b, c, Op::Describe, Rt::Topic, &topic)
            {
                ErrorCode::UNAUTHORIZED
            } else {
                error
            };
            let found = (error == ErrorCode::NONE)
                .then(|| committed.get(&(topic.clone(), partition_index(partition))))
                .flatten();
            (
                proto::CommittedOffset {
                    offset: found.map(|c| c.offset).unwrap_or(-1),
                    metadata: found.and_then(|c| c.metadata.clone()).unwrap_or_default(),
                    topic,
                    partition,
                },
                error,
            )
        })
        .collect();
    proto::FetchOffsetsResponse {
        correlation: o.correlation,
        offsets,
    }
}
