//! What the HTTP listener's handlers share, and the seam through which the
//! embedding binary adds figures and endpoints.

use std::sync::Arc;

use crate::broker::Broker;

/// Extra figures and endpoints the embedding binary adds to the listener.
pub trait HttpExtension: Send + Sync + 'static {
    /// Prometheus text appended to `/metrics`.
    fn metrics(&self) -> String;
    /// The status and body for `target` (path and query) if this extension
    /// serves it, else `None`. Extensions are asked before any route.
    fn handle(&self, target: &str) -> Option<(u16, String)>;
    /// The tiering figures `/v1/tiering` shows, when this extension owns
    /// the node's tiered storage. Most extensions do not.
    fn tiering(&self) -> Option<storage::tier::TierSnapshot> {
        None
    }
    /// The requests counted on the node's object store since start, when
    /// this extension owns it. Most extensions do not.
    fn object_requests(&self) -> Option<cache::metered::RequestCounts> {
        None
    }
    /// Routes the extension serves under a path of its own (`/connect`),
    /// behind the listener's login, with DESCRIBE on the cluster for reads
    /// and ALTER for changes. Most extensions have none.
    fn routes(&self) -> Option<(&'static str, axum::Router)> {
        None
    }
}

/// The bounded per-partition and per-group series: figures only.
impl HttpExtension for dataplane::telemetry::Series {
    fn metrics(&self) -> String {
        self.render()
    }

    fn handle(&self, _target: &str) -> Option<(u16, String)> {
        None
    }
}

/// What every HTTP handler shares.
#[derive(Clone)]
pub struct HttpState {
    pub broker: Arc<Broker>,
    pub extensions: Arc<Vec<Arc<dyn HttpExtension>>>,
}
