//! UnregisterBroker (KIP-500's `kafka-cluster.sh unregister`): removes a
//! fenced agent for good, so the balancer places its replicas on the
//! others. An agent holding its lease is refused: stop it first.

use kafka_protocol::messages::{UnregisterBrokerRequest, UnregisterBrokerResponse};
use kafka_protocol::ResponseError;
use metastore::acl::AclOperation;
use metastore::{ClusterControl, MetaError};

use super::RequestContext;
use crate::broker::Broker;
use crate::codes;

fn answer(code: ResponseError, message: Option<String>) -> UnregisterBrokerResponse {
    UnregisterBrokerResponse::default()
        .with_error_code(code.code())
        .with_error_message(message.map(super::s))
}

pub(super) async fn unregister_broker(
    b: &Broker,
    ctx: &RequestContext,
    req: UnregisterBrokerRequest,
) -> UnregisterBrokerResponse {
    if !ctx.may_on_cluster(b, AclOperation::Alter) {
        return answer(ResponseError::ClusterAuthorizationFailed, None);
    }
    let Ok(id) = u64::try_from(req.broker_id.0) else {
        return answer(ResponseError::BrokerIdNotRegistered, None);
    };
    match b.node.catalog.remove_agent(id).await {
        Ok(()) => {
            tracing::info!(
                agent = id,
                "agent removed from the cluster; its replicas will be placed on other agents"
            );
            UnregisterBrokerResponse::default()
        }
        Err(e @ MetaError::UnknownAgent { .. }) => {
            answer(ResponseError::BrokerIdNotRegistered, Some(e.to_string()))
        }
        Err(e) => answer(codes::meta_error(&e), Some(e.to_string())),
    }
}

#[cfg(test)]
#[path = "unregister_broker_tests.rs"]
mod tests;
