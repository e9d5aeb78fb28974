use openraft::testing::{StoreBuilder, Suite};
use tokio::sync::broadcast;

use super::log_store::LogStore;
use super::state_machine::StateMachineStore;
use crate::raft_types::{StorageError, TypeConfig};

struct DiskBuilder;

impl StoreBuilder<TypeConfig, LogStore, StateMachineStore, tempfile::TempDir> for DiskBuilder {
    async fn build(
        &self,
    ) -> Result<(tempfile::TempDir, LogStore, StateMachineStore), StorageError> {
        // tmpfs when there is one: the suite checks logic, not fsync speed
        let shm = std::path::Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("tempdir");
        // tiny segments so the suite's purges and truncations cross files
        let (log, _exit) = LogStore::open(&dir.path().join("raft"), 1024)?;
        let (tx, _) = broadcast::channel(16);
        let purged = log.last_purged().map(|l| l.index);
        let sm = StateMachineStore::open(&dir.path().join("snapshots"), tx, purged)?;
        Ok((dir, log, sm))
    }
}

/// openraft's own storage conformance suite, run against our disk store.
#[test]
fn disk_store_passes_the_openraft_storage_suite() {
    Suite::test_all(DiskBuilder).expect("openraft storage suite");
}
