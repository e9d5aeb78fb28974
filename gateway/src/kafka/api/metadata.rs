//! Metadata (with Kafka-style topic auto-creation) and DescribeCluster.

use kafka_protocol::messages::describe_cluster_response::DescribeClusterBroker;
use kafka_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use kafka_protocol::messages::{
    BrokerId, DescribeClusterRequest, DescribeClusterResponse, MetadataRequest, MetadataResponse,
    TopicName,
};
use kafka_protocol::ResponseError;

use super::{s, RequestContext};
use crate::broker::{Broker, BrokerConfig};
use crate::brokers;
use crate::codes;
use dataplane::topic_config;
use metastore::acl::{AclOperation, ResourceType};
use metastore::{ClusterControl, MetaError, TopicInfo, Topics};

/// Kafka's "authorized operations not requested" value.
const OPS_NOT_REQUESTED: i32 = i32::MIN;

/// The operations Kafka reports on a topic when asked which ones the client
/// may perform (KIP-430; its `AclEntry.supportedOperations`).
const TOPIC_OPERATIONS: [AclOperation; 8] = [
    AclOperation::Read,
    AclOperation::Write,
    AclOperation::Create,
    AclOperation::Delete,
    AclOperation::Alter,
    AclOperation::Describe,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
];

/// The same for the cluster.
const CLUSTER_OPERATIONS: [AclOperation; 7] = [
    AclOperation::Create,
    AclOperation::ClusterAction,
    AclOperation::DescribeConfigs,
    AclOperation::AlterConfigs,
    AclOperation::IdempotentWrite,
    AclOperation::Alter,
    AclOperation::Describe,
];

/// KIP-430's bit field (bit n for Kafka's operation code n) of the
/// `operations` the client may perform on the resource: all of them with
/// authorization off, as Kafka's broker without an authorizer says.
pub(super) fn authorized(
    b: &Broker,
    ctx: &RequestContext,
    operations: &[AclOperation],
    resource_type: ResourceType,
    name: &str,
) -> i32 {
    operations
        .iter()
        .filter(|op| ctx.may(b, **op, resource_type, name))
        .fold(0, |bits, op| bits | 1 << op.code())
}

/// Kafka's broker id of an agent (-1 for none, as Kafka reports a missing
/// leader); behind a load balancer every agent is the one broker clients see.
fn broker_id(config: &BrokerConfig, agent: Option<u64>) -> BrokerId {
    BrokerId(
        agent
            .and_then(|a| i32::try_from(a).ok())
            .map(|id| brokers::shown_id(config, id))
            .unwrap_or(-1),
    )
}

/// The replicas (or in-sync replicas) as clients see them: behind a load
/// balancer, the one broker that stands for the cluster.
fn replica_ids(config: &BrokerConfig, agents: &[u64]) -> Vec<BrokerId> {
    if config.load_balanced {
        return vec![BrokerId(brokers::LOAD_BALANCER_ID)];
    }
    agents.iter().map(|r| broker_id(config, Some(*r))).collect()
}

fn topic_entry(config: &BrokerConfig, t: &TopicInfo) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(Some(TopicName(s(t.name.clone()))))
        .with_topic_id(t.id)
        .with_is_internal(false)
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
        .with_partitions(
            t.partitions
                .iter()
                .map(|p| {
                    // Kafka's answer for a partition whose leader is gone
                    let code = if p.leader.is_none() {
                        ResponseError::LeaderNotAvailable.code()
                    } else {
                        0
                    };
                    MetadataResponsePartition::default()
                        .with_error_code(code)
                        .with_partition_index(p.index)
                        .with_leader_id(broker_id(config, p.leader))
                        .with_leader_epoch(p.leader_epoch)
                        .with_replica_nodes(replica_ids(config, &p.replicas))
                        .with_isr_nodes(replica_ids(config, &p.isr))
                })
                .collect(),
        )
}

fn topic_error(name: Option<String>, id: uuid::Uuid, e: ResponseError) -> MetadataResponseTopic {
    MetadataResponseTopic::default()
        .with_name(name.map(|n| TopicName(s(n))))
        .with_topic_id(id)
        .with_error_code(e.code())
        .with_topic_authorized_operations(OPS_NOT_REQUESTED)
}

pub(super) async fn metadata(
    b: &Broker,
    ctx: &RequestContext,
    req: MetadataRequest,
) -> MetadataResponse {
    let v = ctx.api_version;
    // v0: an empty list means every topic; v1+: null means every topic.
    let all = match &req.topics {
        None => true,
        Some(t) => t.is_empty() && v == 0,
    };
    let allow_create = b.config.auto_create_topics && (v < 4 || req.allow_auto_topic_creation);
    let describable = |name: &str| ctx.may(b, AclOperation::Describe, ResourceType::Topic, name);
    let refused =
        |name: Option<String>, id| topic_error(name, id, ResponseError::TopicAuthorizationFailed);
    let mut topics = Vec::new();
    if all {
        // every topic the client may see, and no other
        topics.extend(
            b.node
                .catalog
                .topics()
                .iter()
                .filter(|t| describable(&t.name))
                .map(|t| topic_entry(&b.config, t)),
        );
    } else {
        for wanted in req.topics.unwrap_or_default() {
            // A topic named by id is looked up by id whatever its name says:
            // the Java client leaves the name empty ("", not null), and
            // Kafka's broker goes by any id that is not zero.
            let name = if wanted.topic_id.is_nil() {
                wanted.name
            } else {
                None
            };
            match name {
                Some(name) => {
                    let name = name.0.to_string();
                    if !describable(&name) {
                        topics.push(refused(Some(name), uuid::Uuid::nil()));
                        continue;
                    }
                    match b.node.catalog.topic(&name) {
                        Some(t) => topics.push(topic_entry(&b.config, &t)),
                        // Kafka: CREATE on the cluster or on the topic
                        None if allow_create
                            && !ctx.may_on_cluster(b, AclOperation::Create)
                            && !ctx.may(b, AclOperation::Create, ResourceType::Topic, &name) =>
                        {
                            topics.push(refused(Some(name), uuid::Uuid::nil()))
                        }
                        None if allow_create => match b.node.auto_create(&name).await {
                            Ok(t) => topics.push(topic_entry(&b.config, &t)),
                            Err(e @ MetaError::InvalidTopicName { .. }) => topics.push(
                                topic_error(Some(name), uuid::Uuid::nil(), codes::meta_error(&e)),
                            ),
                            Err(e) => {
                                tracing::warn!(topic = %name, error = %e, "topic auto-creation failed");
                                topics.push(topic_error(
                                    Some(name),
                                    uuid::Uuid::nil(),
                                    ResponseError::LeaderNotAvailable,
                                ))
                            }
                        },
                        None => {
                            let code = if topic_config::validate_topic_name(&name).is_err() {
                                ResponseError::InvalidTopicException
                            } else {
                                ResponseError::UnknownTopicOrPartition
                            };
                            topics.push(topic_error(Some(name), uuid::Uuid::nil(), code));
                        }
                    }
                }
                None => match b.node.catalog.topic_by_id(wanted.topic_id) {
                    Some(t) if !describable(&t.name) => topics.push(refused(None, wanted.topic_id)),
                    Some(t) => topics.push(topic_entry(&b.config, &t)),
                    None => topics.push(topic_error(
                        None,
                        wanted.topic_id,
                        ResponseError::UnknownTopicId,
                    )),
                },
            }
        }
    }
    await_suspected_leaders(b, &mut topics).await;
    if v >= 8 && req.include_topic_authorized_operations {
        for t in topics.iter_mut().filter(|t| t.error_code == 0) {
            if let Some(name) = &t.name {
                t.topic_authorized_operations = authorized(
                    b,
                    ctx,
                    &TOPIC_OPERATIONS,
                    ResourceType::Topic,
                    name.0.as_str(),
                );
            }
        }
    }
    // v8 to v10 (v11 moved it to DescribeCluster)
    let cluster_operations = if (8..=10).contains(&v) && req.include_cluster_authorized_operations {
        cluster_authorized(b, ctx)
    } else {
        OPS_NOT_REQUESTED
    };
    let live = brokers::for_zone(
        &b.config,
        ctx.zone.as_deref(),
        brokers::listed(&b.node.catalog, &b.config, &b.fenced_since),
    );
    MetadataResponse::default()
        .with_brokers(
            live.into_iter()
                .map(|e| {
                    MetadataResponseBroker::default()
                        .with_node_id(BrokerId(e.id))
                        .with_host(s(e.host))
                        .with_port(e.port)
                        .with_rack(e.rack.map(s))
                })
                .collect(),
        )
        .with_cluster_id(Some(s(b.node.catalog.cluster().cluster_id)))
        .with_controller_id(BrokerId(brokers::controller(&b.node.catalog, &b.config)))
        .with_topics(topics)
        .with_cluster_authorized_operations(cluster_operations)
}

fn cluster_authorized(b: &Broker, ctx: &RequestContext) -> i32 {
    authorized(
        b,
        ctx,
        &CLUSTER_OPERATIONS,
        ResourceType::Cluster,
        security::authz::CLUSTER_RESOURCE,
    )
}

/// Leaders named in `topics` that the metastore leader has not heard from
/// for a while (`Metastore::suspected_agents`), other than this agent.
fn suspected_leaders(b: &Broker, topics: &[MetadataResponseTopic]) -> Vec<i32> {
    let suspects = b.node.catalog.suspected_agents();
    if suspects.is_empty() {
        return Vec::new();
    }
    let mut out: Vec<i32> = topics
        .iter()
        .flat_map(|t| t.partitions.iter().map(|p| p.leader_id.0))
        .filter(|id| *id != b.config.node_id)
        .filter(|id| u64::try_from(*id).is_ok_and(|a| suspects.contains(&a)))
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// How often a held Metadata answer looks again.
const SUSPECT_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// Holds a Metadata answer that would name a leader the metastore has not
/// heard from for a while, until that agent is heard again (the answer
/// stands) or its partitions move (the answer names the new leaders), at
/// most a lease and a bit.
///
/// Why: a client whose leader died asks for metadata and, until the lease
/// runs out, hears the dead leader again; librdkafka then waits for its
/// once-a-second partition scan before asking again, so it learns the new
/// leader up to a second after the election. Held, the answer arrives as
/// the election lands. A held answer delays the answers after it on the
/// same connection (Kafka answers in order), only while an agent is in
/// doubt. Not in load-balanced mode: clients there see one broker.
async fn await_suspected_leaders(b: &Broker, topics: &mut [MetadataResponseTopic]) {
    if b.config.load_balanced || suspected_leaders(b, topics).is_empty() {
        return;
    }
    let deadline = std::time::Instant::now()
        + b.node.catalog.agent_lease()
        + metastore::agent_heartbeat_interval(b.node.catalog.agent_lease()) * 2;
    loop {
        tokio::time::sleep(SUSPECT_POLL).await;
        // the partitions as the local metastore replica says now
        for t in topics.iter_mut() {
            let fresh = t
                .name
                .as_ref()
                .and_then(|n| b.node.catalog.topic(n.0.as_str()));
            if let Some(info) = fresh {
                if info.id == t.topic_id {
                    t.partitions = topic_entry(&b.config, &info).partitions;
                }
            }
        }
        if suspected_leaders(b, topics).is_empty() || std::time::Instant::now() >= deadline {
            return;
        }
    }
}

pub(super) fn describe_cluster(
    b: &Broker,
    ctx: &RequestContext,
    req: DescribeClusterRequest,
) -> DescribeClusterResponse {
    let operations = if req.include_cluster_authorized_operations {
        cluster_authorized(b, ctx)
    } else {
        OPS_NOT_REQUESTED
    };
    let resp = DescribeClusterResponse::default()
        .with_endpoint_type(1)
        .with_cluster_id(s(b.node.catalog.cluster().cluster_id))
        .with_controller_id(BrokerId(brokers::controller(&b.node.catalog, &b.config)))
        .with_cluster_authorized_operations(operations);
    if req.endpoint_type != 1 {
        return resp
            .with_error_code(ResponseError::UnsupportedEndpointType.code())
            .with_error_message(Some(s("only broker endpoints are described")));
    }
    resp.with_brokers(
        brokers::for_zone(
            &b.config,
            ctx.zone.as_deref(),
            brokers::live(&b.node.catalog, &b.config),
        )
        .into_iter()
        .map(|e| {
            DescribeClusterBroker::default()
                .with_broker_id(BrokerId(e.id))
                .with_host(s(e.host))
                .with_port(e.port)
                .with_rack(e.rack.map(s))
        })
        .collect(),
    )
}
