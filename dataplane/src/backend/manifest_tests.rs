//! The metastore-backed manifest keeps the same contract as every other
//! manifest backend: storage's conformance suite, run against a real
//! embedded metastore.

use std::sync::Mutex;

use async_trait::async_trait;
use metastore::Topics;
use storage::tier::manifest_suite::{run_all, ManifestUnderTest};
use uuid::Uuid;

use super::MetastoreManifest;
use crate::testing::{Backends, Logs};

#[async_trait]
impl ManifestUnderTest for MetastoreManifest {
    async fn new_topic(&self) -> Uuid {
        let name = format!("suite-{}", Uuid::new_v4().simple());
        let spec = metastore::CreateTopic {
            name,
            partitions: 2,
            replication_factor: 1,
            configs: Default::default(),
            assignments: Vec::new(),
        };
        self.meta
            .create_topic(spec, false)
            .await
            .expect("the topic is created")
            .id
    }

    async fn delete_topic(&self, topic_id: Uuid) {
        let name = self
            .meta
            .topic_by_id(topic_id)
            .expect("the topic exists")
            .name
            .clone();
        self.meta
            .delete_topic(&name)
            .await
            .expect("the topic is deleted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_metastore_manifest_keeps_the_manifest_contract() {
    let running = Mutex::new(Vec::new());
    run_all(|| async {
        let b = Backends::start(Logs::Disk, 1).await;
        let m = MetastoreManifest::new(b.meta.clone());
        running.lock().expect("list").push(b);
        m
    })
    .await;
}
