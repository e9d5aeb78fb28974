//! Authorization through the dispatcher, against the real metastore and
//! logs: ACLs made with CreateAcls decide what a principal may do, and what
//! it may not is answered with Kafka's authorization errors.

use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::*;
use kafka_protocol::protocol::StrBytes;
use kafka_protocol::records::Compression;
use kafka_protocol::ResponseError;

use super::test_support::*;
use crate::broker::{Broker, BrokerConfig};
use crate::testing::{Logs, TestBroker};
use security::authz::AuthzConfig;

on_every_backend!(
    acls_decide_what_a_principal_may_do,
    authorized_operations_say_what_a_principal_may_do,
);

const ADMIN: &str = "User:admin";
const ALICE: &str = "User:alice";

fn alice_writes(topic: &str) -> AclCreation {
    AclCreation::default()
        .with_resource_type(2)
        .with_resource_name(StrBytes::from_string(topic.into()))
        .with_resource_pattern_type(3)
        .with_principal(StrBytes::from_static_str(ALICE))
        .with_host(StrBytes::from_static_str("*"))
        .with_operation(4)
        .with_permission_type(3)
}

async fn produce_as(b: &Broker, principal: &str, topic: &str) -> i16 {
    let req = produce_req(topic, 0, batch(&["x"], None, Compression::None), -1);
    let resp: ProduceResponse = call_as(b, principal, ApiKey::Produce, 9, &req).await;
    resp.responses[0].partition_responses[0].error_code
}

async fn acls_decide_what_a_principal_may_do(logs: Logs) {
    let config = BrokerConfig {
        authz: AuthzConfig {
            enabled: true,
            superusers: vec![ADMIN.into()],
            allow_if_no_acl: false,
        },
        ..BrokerConfig::default()
    };
    let t = TestBroker::start_with(logs, config).await;
    let b = &t.broker;
    let refused = ResponseError::TopicAuthorizationFailed.code();
    for topic in ["open", "secret"] {
        let req = CreateTopicsRequest::default().with_topics(vec![
            create_topics_request::CreatableTopic::default()
                .with_name(TopicName(StrBytes::from_static_str(topic)))
                .with_num_partitions(1)
                .with_replication_factor(1),
        ]);
        let anonymous: CreateTopicsResponse = call(b, ApiKey::CreateTopics, 7, &req).await;
        assert_eq!(anonymous.topics[0].error_code, refused);
        let admin: CreateTopicsResponse = call_as(b, ADMIN, ApiKey::CreateTopics, 7, &req).await;
        assert_eq!(admin.topics[0].error_code, 0);
    }
    assert_eq!(produce_as(b, ALICE, "open").await, refused);

    let grant = CreateAclsRequest::default().with_creations(vec![alice_writes("open")]);
    let by_alice: CreateAclsResponse = call_as(b, ALICE, ApiKey::CreateAcls, 3, &grant).await;
    assert_eq!(
        by_alice.results[0].error_code,
        ResponseError::ClusterAuthorizationFailed.code()
    );
    let by_admin: CreateAclsResponse = call_as(b, ADMIN, ApiKey::CreateAcls, 3, &grant).await;
    assert_eq!(by_admin.results[0].error_code, 0);

    assert_eq!(produce_as(b, ALICE, "open").await, 0);
    assert_eq!(produce_as(b, ALICE, "secret").await, refused);
    // WRITE implies DESCRIBE: Metadata shows "open" and hides "secret"
    let every = MetadataRequest::default().with_topics(None);
    let md: MetadataResponse = call_as(b, ALICE, ApiKey::Metadata, 9, &every).await;
    let names: Vec<String> = md
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect();
    assert_eq!(names, vec!["open".to_string()]);
    // but not READ
    let f: FetchResponse = call_as(b, ALICE, ApiKey::Fetch, 12, &fetch_req("open", 0, 0, 0)).await;
    assert_eq!(f.responses[0].partitions[0].error_code, refused);
    // DescribeProducers needs READ too
    let producers = DescribeProducersRequest::default().with_topics(vec![
        describe_producers_request::TopicRequest::default()
            .with_name(TopicName(StrBytes::from_static_str("open")))
            .with_partition_indexes(vec![0]),
    ]);
    let d: DescribeProducersResponse =
        call_as(b, ALICE, ApiKey::DescribeProducers, 0, &producers).await;
    assert_eq!(d.topics[0].partitions[0].error_code, refused);
    let d: DescribeProducersResponse =
        call_as(b, ADMIN, ApiKey::DescribeProducers, 0, &producers).await;
    assert_eq!(d.topics[0].partitions[0].error_code, 0);
    let f: FetchResponse = call_as(b, ADMIN, ApiKey::Fetch, 12, &fetch_req("open", 0, 0, 0)).await;
    assert_eq!(
        values_of(f.responses[0].partitions[0].records.clone()),
        vec![(0, "x".into())]
    );

    let filter = DeleteAclsFilter::default()
        .with_resource_type_filter(1)
        .with_resource_name_filter(None)
        .with_host_filter(None)
        .with_pattern_type_filter(1)
        .with_principal_filter(Some(StrBytes::from_static_str(ALICE)))
        .with_operation(1)
        .with_permission_type(1);
    let del = DeleteAclsRequest::default().with_filters(vec![filter]);
    let gone: DeleteAclsResponse = call_as(b, ADMIN, ApiKey::DeleteAcls, 3, &del).await;
    assert_eq!(gone.filter_results[0].matching_acls.len(), 1);
    assert_eq!(produce_as(b, ALICE, "open").await, refused);
}

/// KIP-430's bit field of Kafka operation codes.
fn bits(codes: &[i8]) -> i32 {
    codes.iter().fold(0, |b, c| b | 1 << c)
}

/// Metadata and DescribeCluster asked for the authorized operations (as
/// the Java admin's `includeAuthorizedOperations` asks) answer with what
/// the principal's ACLs allow; not asked, with Kafka's "not requested".
async fn authorized_operations_say_what_a_principal_may_do(logs: Logs) {
    let config = BrokerConfig {
        authz: AuthzConfig {
            enabled: true,
            superusers: vec![ADMIN.into()],
            allow_if_no_acl: false,
        },
        ..BrokerConfig::default()
    };
    let t = TestBroker::start_with(logs, config).await;
    let b = &t.broker;
    let req = CreateTopicsRequest::default().with_topics(vec![
        create_topics_request::CreatableTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("open")))
            .with_num_partitions(1)
            .with_replication_factor(1),
    ]);
    let created: CreateTopicsResponse = call_as(b, ADMIN, ApiKey::CreateTopics, 7, &req).await;
    assert_eq!(created.topics[0].error_code, 0);
    let grant = CreateAclsRequest::default().with_creations(vec![alice_writes("open")]);
    let granted: CreateAclsResponse = call_as(b, ADMIN, ApiKey::CreateAcls, 3, &grant).await;
    assert_eq!(granted.results[0].error_code, 0);

    let open = || {
        vec![metadata_request::MetadataRequestTopic::default()
            .with_name(Some(TopicName(StrBytes::from_static_str("open"))))]
    };
    let asked = MetadataRequest::default()
        .with_topics(Some(open()))
        .with_include_topic_authorized_operations(true)
        .with_include_cluster_authorized_operations(true);
    let ops = |md: &MetadataResponse| {
        (
            md.topics[0].topic_authorized_operations,
            md.cluster_authorized_operations,
        )
    };
    // topic: READ 3, WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8,
    // DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11; cluster: CREATE 5, ALTER 7,
    // DESCRIBE 8, CLUSTER_ACTION 9, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11,
    // IDEMPOTENT_WRITE 12
    let every_topic_op = bits(&[3, 4, 5, 6, 7, 8, 10, 11]);
    let every_cluster_op = bits(&[5, 7, 8, 9, 10, 11, 12]);
    let md: MetadataResponse = call_as(b, ADMIN, ApiKey::Metadata, 9, &asked).await;
    assert_eq!(
        ops(&md),
        (every_topic_op, every_cluster_op),
        "a superuser may do all"
    );
    let md: MetadataResponse = call_as(b, ALICE, ApiKey::Metadata, 9, &asked).await;
    assert_eq!(
        ops(&md),
        (bits(&[4, 8]), 0),
        "alice may WRITE (and so DESCRIBE) the topic, nothing on the cluster"
    );
    // v11+ has no field for the cluster's: DescribeCluster says them
    let asked_v12 = MetadataRequest::default()
        .with_topics(Some(open()))
        .with_include_topic_authorized_operations(true);
    let md: MetadataResponse = call_as(b, ALICE, ApiKey::Metadata, 12, &asked_v12).await;
    assert_eq!(ops(&md), (bits(&[4, 8]), i32::MIN), "the topic's alone");
    let not_asked = MetadataRequest::default().with_topics(Some(open()));
    let md: MetadataResponse = call_as(b, ALICE, ApiKey::Metadata, 12, &not_asked).await;
    assert_eq!(ops(&md), (i32::MIN, i32::MIN), "not asked");

    let describe =
        |asked| DescribeClusterRequest::default().with_include_cluster_authorized_operations(asked);
    let dc: DescribeClusterResponse =
        call_as(b, ADMIN, ApiKey::DescribeCluster, 1, &describe(true)).await;
    assert_eq!(dc.cluster_authorized_operations, every_cluster_op);
    let dc: DescribeClusterResponse =
        call_as(b, ALICE, ApiKey::DescribeCluster, 1, &describe(true)).await;
    assert_eq!(dc.cluster_authorized_operations, 0);
    let dc: DescribeClusterResponse =
        call_as(b, ADMIN, ApiKey::DescribeCluster, 1, &describe(false)).await;
    assert_eq!(dc.cluster_authorized_operations, i32::MIN);

    // a group, made by a commit outside any generation
    let commit = OffsetCommitRequest::default()
        .with_group_id(GroupId(StrBytes::from_static_str("g")))
        .with_generation_id_or_member_epoch(-1)
        .with_topics(vec![
            offset_commit_request::OffsetCommitRequestTopic::default()
                .with_name(TopicName(StrBytes::from_static_str("open")))
                .with_partitions(vec![
                    offset_commit_request::OffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(0),
                ]),
        ]);
    let committed: OffsetCommitResponse = call_as(b, ADMIN, ApiKey::OffsetCommit, 8, &commit).await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);
    let groups = |asked| {
        DescribeGroupsRequest::default()
            .with_groups(vec![GroupId(StrBytes::from_static_str("g"))])
            .with_include_authorized_operations(asked)
    };
    let group =
        |d: &DescribeGroupsResponse| (d.groups[0].error_code, d.groups[0].authorized_operations);
    // group: READ 3, DELETE 6, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11
    let d: DescribeGroupsResponse =
        call_as(b, ADMIN, ApiKey::DescribeGroups, 5, &groups(true)).await;
    assert_eq!(group(&d), (0, bits(&[3, 6, 8, 10, 11])));
    let d: DescribeGroupsResponse =
        call_as(b, ADMIN, ApiKey::DescribeGroups, 5, &groups(false)).await;
    assert_eq!(group(&d), (0, i32::MIN));
    let d: DescribeGroupsResponse =
        call_as(b, ALICE, ApiKey::DescribeGroups, 5, &groups(true)).await;
    assert_eq!(
        group(&d),
        (ResponseError::GroupAuthorizationFailed.code(), i32::MIN),
        "alice may not describe the group"
    );
}
