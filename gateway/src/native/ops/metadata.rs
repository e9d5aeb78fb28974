//! Metadata: the cluster's nodes and the topics asked for, as Kafka's
//! Metadata answers them.

use std::sync::Arc;

use metastore::acl::{AclOperation as Op, ResourceType as Rt};
use metastore::Topics;
use sdk::proto::{self, ErrorCode};

use crate::broker::Broker;
use crate::kafka::api::{bridge, Client};
use crate::native::codes::from_kafka;

/// The cluster's nodes and the topics asked for (every topic the client may
/// describe when none are named), as Kafka's Metadata answers them: a
/// named topic the client may not describe is UNAUTHORIZED, and one that
/// does not exist is created only if it may create it.
pub(super) async fn metadata(
    b: &Broker,
    c: &Client,
    m: proto::Metadata,
) -> proto::MetadataResponse {
    let describable = |name: &str| bridge::may(b, c, Op::Describe, Rt::Topic, name);
    let nodes = crate::brokers::native_agents(&b.node.catalog, &b.config)
        .into_iter()
        .filter_map(|e| {
            Some(proto::Node {
                id: u32::try_from(e.id).ok()?,
                host: e.host,
                port: u16::try_from(e.port).ok()?,
                rack: e.rack.unwrap_or_default(),
            })
        })
        .collect();
    // answers in the order asked; all topics when none are named
    let wanted: Vec<Result<Arc<metastore::TopicInfo>, (String, ErrorCode)>> = if m.topics.is_empty()
    {
        b.node
            .catalog
            .topics()
            .into_iter()
            .filter(|t| describable(&t.name))
            .map(Ok)
            .collect()
    } else {
        let mut found = Vec::with_capacity(m.topics.len());
        for name in &m.topics {
            let t = match b.node.catalog.topic(name) {
                _ if !describable(name) => {
                    found.push(Err((name.clone(), ErrorCode::UNAUTHORIZED)));
                    continue;
                }
                Some(t) => Ok(t),
                None if b.config.auto_create_topics
                    && (bridge::may(b, c, Op::Create, Rt::Topic, name)
                        || bridge::may(
                            b,
                            c,
                            Op::Create,
                            Rt::Cluster,
                            security::authz::CLUSTER_RESOURCE,
                        )) =>
                {
                    b.node.auto_create(name).await
                }
                None => Err(metastore::MetaError::UnknownTopic { name: name.clone() }),
            };
            found.push(t.map_err(|e| {
                let code = from_kafka(crate::codes::meta_error(&e).code());
                (name.clone(), code)
            }));
        }
        found
    };
    let ids = |v: &[u64]| v.iter().filter_map(|r| u32::try_from(*r).ok()).collect();
    let mut topics = Vec::with_capacity(wanted.len());
    for t in wanted {
        let t = match t {
            Ok(t) => t,
            Err((name, error)) => {
                topics.push(proto::TopicMetadata {
                    name,
                    error,
                    partitions: Vec::new(),
                });
                continue;
            }
        };
        topics.push(proto::TopicMetadata {
            name: t.name.clone(),
            error: ErrorCode::NONE,
            partitions: t
                .partitions
                .iter()
                .map(|p| proto::PartitionMetadata {
                    index: u32::try_from(p.index).unwrap_or(0),
                    leader: p.leader.and_then(|l| i32::try_from(l).ok()).unwrap_or(-1),
                    leader_epoch: p.leader_epoch,
                    replicas: ids(&p.replicas),
                    in_sync: ids(&p.isr),
                })
                .collect(),
        });
    }
    proto::MetadataResponse {
        correlation: m.correlation,
        nodes,
        topics,
    }
}
