//! An in-process transport: nodes in one process call each other's handlers
//! directly. For tests that run many nodes without sockets; links are cut
//! with each node's [`super::NetworkFaults`].

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use parking_lot::RwLock;

use super::{Envelope, RpcHandler, RpcResponse, Transport, TransportError};
use crate::raft_types::NodeId;

/// Routes calls between the nodes registered with it. Clones share routes.
#[derive(Clone, Default)]
pub struct LocalRouter {
    nodes: Arc<RwLock<HashMap<NodeId, Arc<dyn RpcHandler>>>>,
}

impl std::fmt::Debug for LocalRouter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalRouter")
            .field("nodes", &self.nodes.read().keys().collect::<Vec<_>>())
            .finish()
    }
}

impl LocalRouter {
    pub fn new() -> LocalRouter {
        LocalRouter::default()
    }

    /// The address a node registered here is known by.
    pub fn addr(id: NodeId) -> String {
        format!("local:{id}")
    }

    pub(crate) fn register(&self, id: NodeId, handler: Arc<dyn RpcHandler>) {
        self.nodes.write().insert(id, handler);
    }

    pub(crate) fn unregister(&self, id: NodeId) {
        self.nodes.write().remove(&id);
    }
}

impl Transport for LocalRouter {
    fn call(
        &self,
        _addr: &str,
        envelope: Envelope,
    ) -> BoxFuture<'_, Result<RpcResponse, TransportError>> {
        let handler = self.nodes.read().get(&envelope.to).cloned();
        Box::pin(async move {
            match handler {
                Some(h) => Ok(h.handle(envelope).await),
                None => Err(TransportError::NotSent {
                    node: envelope.to,
                    reason: "node is not running".into(),
                }),
            }
        })
    }
}
