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

on_every_backend!(acls_decide_what_a_principal_may_do);

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
