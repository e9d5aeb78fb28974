//! Consumer groups and committed offsets against the real metastore.

use bytes::Bytes;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, StrBytes};
use kafka_protocol::records::Compression;

use super::dispatch;
use super::test_support::*;
use crate::broker::BrokerConfig;
use crate::testing::{Logs, TestBroker};

on_every_backend!(
    populated_group_and_offset_answers_encode_in_every_advertised_version,
    joins_that_fail_validation_leave_no_group_behind,
);

async fn populated_group_and_offset_answers_encode_in_every_advertised_version(logs: Logs) {
    let mut config = BrokerConfig::default();
    config.group.initial_rebalance_delay_ms = 0;
    let t = TestBroker::start_with(logs, config).await;
    let b = &t.broker;
    create(b, "t", 2).await;
    produce(b, "t", batch(&["a", "b"], None, Compression::Lz4)).await;
    let join = JoinGroupRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_session_timeout_ms(10_000)
        .with_rebalance_timeout_ms(10_000)
        .with_protocol_type(StrBytes::from_static_str("consumer"))
        .with_protocols(vec![join_group_request::JoinGroupRequestProtocol::default(
        )
        .with_name(StrBytes::from_static_str("range"))
        .with_metadata(Bytes::from_static(b"meta"))]);
    let first: JoinGroupResponse = call(b, ApiKey::JoinGroup, 7, &join).await;
    assert_eq!(first.error_code, 79, "MEMBER_ID_REQUIRED");
    let joined: JoinGroupResponse = call(
        b,
        ApiKey::JoinGroup,
        7,
        &join.clone().with_member_id(first.member_id.clone()),
    )
    .await;
    assert_eq!((joined.error_code, joined.generation_id), (0, 1));
    let synced: SyncGroupResponse = call(
        b,
        ApiKey::SyncGroup,
        5,
        &SyncGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_generation_id(1)
            .with_member_id(joined.member_id.clone())
            .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
            .with_protocol_name(Some(StrBytes::from_static_str("range")))
            .with_assignments(vec![
                sync_group_request::SyncGroupRequestAssignment::default()
                    .with_member_id(joined.member_id.clone())
                    .with_assignment(Bytes::from_static(b"assigned")),
            ]),
    )
    .await;
    assert_eq!(
        (synced.error_code, &synced.assignment[..]),
        (0, &b"assigned"[..])
    );
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(1)
        .with_member_id(joined.member_id.clone())
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("t")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(2),
                ]),
        ]);
    let committed: OffsetCommitResponse = call(b, ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    let g = || GroupId(StrBytes::from_static_str("g"));
    let t = || TopicName(StrBytes::from_static_str("t"));
    type MakeFrame = Box<dyn Fn(i16) -> Option<Bytes>>;
    let requests: Vec<(ApiKey, MakeFrame)> = vec![
        (
            ApiKey::DescribeGroups,
            Box::new(move |v| {
                frame(
                    ApiKey::DescribeGroups,
                    v,
                    &DescribeGroupsRequest::default().with_groups(vec![g()]),
                )
            }),
        ),
        (
            ApiKey::ListGroups,
            Box::new(|v| frame(ApiKey::ListGroups, v, &ListGroupsRequest::default())),
        ),
        (
            ApiKey::OffsetFetch,
            Box::new(move |v| {
                let req = if v >= 8 {
                    OffsetFetchRequest::default().with_groups(vec![
                        offset_fetch_request::OffsetFetchRequestGroup::default().with_group_id(g()),
                    ])
                } else {
                    OffsetFetchRequest::default()
                        .with_group_id(g())
                        .with_topics(Some(vec![
                            offset_fetch_request::OffsetFetchRequestTopic::default()
                                .with_name(t())
                                .with_partition_indexes(vec![0, 1]),
                        ]))
                };
                frame(ApiKey::OffsetFetch, v, &req)
            }),
        ),
        (
            ApiKey::Metadata,
            Box::new(move |v| {
                frame(
                    ApiKey::Metadata,
                    v,
                    &MetadataRequest::default().with_topics(Some(vec![
                        metadata_request::MetadataRequestTopic::default().with_name(Some(t())),
                    ])),
                )
            }),
        ),
        (
            ApiKey::Fetch,
            Box::new(|v| frame(ApiKey::Fetch, v, &fetch_req("t", 0, 0, 1))),
        ),
        (
            ApiKey::DescribeConfigs,
            Box::new(|v| {
                frame(
                    ApiKey::DescribeConfigs,
                    v,
                    &DescribeConfigsRequest::default().with_resources(vec![
                        describe_configs_request::DescribeConfigsResource::default()
                            .with_resource_type(2)
                            .with_resource_name(StrBytes::from_static_str("t")),
                    ]),
                )
            }),
        ),
    ];
    for (api, make) in requests {
        let (lo, hi) = crate::kafka::versions::range(api).expect("advertised");
        for v in lo..=hi {
            let Some(f) = make(v) else { continue };
            let resp = dispatch(b, &client(), f)
                .await
                .unwrap_or_else(|e| panic!("{api:?} v{v}: {e}"))
                .expect("response");
            let mut bytes = resp.to_bytes().expect("bytes").slice(4..);
            ResponseHeader::decode(&mut bytes, api.response_header_version(v)).expect("header");
            ResponseKind::decode(api, &mut bytes, v)
                .unwrap_or_else(|e| panic!("{api:?} v{v} decodes: {e}"));
        }
    }
    let d: DescribeGroupsResponse = call(
        b,
        ApiKey::DescribeGroups,
        5,
        &DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_static_str("g"))]),
    )
    .await;
    assert_eq!(d.groups[0].group_state.as_str(), "Stable");
    assert_eq!(&d.groups[0].members[0].member_assignment[..], b"assigned");
}

/// A JoinGroup refused for its protocols (here: none) must not leave group
/// state behind, or random group ids grow the coordinator without bound.
async fn joins_that_fail_validation_leave_no_group_behind(logs: Logs) {
    let t = TestBroker::start(logs).await;
    let b = &t.broker;
    for i in 0..50 {
        let join = JoinGroupRequest::default()
            .with_group_id(GroupId(StrBytes::from_string(format!("junk-{i}"))))
            .with_session_timeout_ms(10_000)
            .with_rebalance_timeout_ms(10_000)
            .with_protocol_type(StrBytes::from_static_str("consumer"));
        let resp: JoinGroupResponse = call(b, ApiKey::JoinGroup, 7, &join).await;
        assert_eq!(resp.error_code, 23, "INCONSISTENT_GROUP_PROTOCOL");
    }
    let listed: ListGroupsResponse =
        call(b, ApiKey::ListGroups, 4, &ListGroupsRequest::default()).await;
    assert!(listed.groups.is_empty(), "{:?}", listed.groups);
}
