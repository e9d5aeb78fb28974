//! A broker on the real backends, for tests (compiled for the gateway's own
//! tests and with the `testing` feature, never into the broker binary).
//!
//! The backends are the data plane's ([`dataplane::testing`]): the
//! `storage` crate's logs in a scratch directory, an embedded one-node
//! metastore and, for [`Logs::Tiered`], the production tiering backend.

use std::sync::Arc;

use dataplane::group::coordinator::{Coordinator, Ownership};
use dataplane::partition::Partitions;
pub use dataplane::testing::{batch_of, record_batch, scratch_dir, Backends, Logs};
use tempfile::TempDir;

use crate::broker::{Broker, BrokerConfig};

/// A broker over `backends`, its partition tasks on the current runtime.
pub fn broker(backends: &Backends, config: BrokerConfig) -> Broker {
    let partitions = Arc::new(Partitions::new(
        vec![tokio::runtime::Handle::current()],
        backends.logs.clone(),
    ));
    let ownership = Ownership {
        catalog: backends.meta.clone(),
        agent: u64::try_from(config.node_id).expect("node ids are not negative"),
    };
    let groups = Coordinator::start(config.group.clone(), "test".into(), ownership);
    Broker::new(config, backends.meta.clone(), partitions, groups)
}

/// A broker and its backends, for dispatcher-level tests.
pub struct TestBroker {
    /// Shared, as the listeners share it (native subscriptions are tasks
    /// holding the broker).
    pub broker: Arc<Broker>,
    pub backends: Backends,
}

impl TestBroker {
    pub async fn start(kind: Logs) -> TestBroker {
        Self::start_with(kind, BrokerConfig::default()).await
    }

    pub async fn start_with(kind: Logs, config: BrokerConfig) -> TestBroker {
        let backends = Backends::start(kind, config.node_id).await;
        TestBroker {
            broker: Arc::new(broker(&backends, config)),
            backends,
        }
    }

    /// Closes every partition (clean shutdown) and stops the backends.
    pub async fn stop(self) -> TempDir {
        self.broker.node.partitions.close_all().await;
        self.backends.stop().await
    }
}
