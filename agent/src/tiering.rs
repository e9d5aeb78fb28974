//! Wiring of tiered storage: the object store named by the settings, the
//! cold cache, the uploader service and the tiered log factory.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use cache::fault::FaultInjectingStore;
use cache::{CacheConfig, ColdCache, DiskTierConfig, ObjectStoreHandle, StoreEnv};
use gateway::backend::disk::DiskLogFactory;
use gateway::tiering::log::TieredLogFactory;
use gateway::tiering::manifest::MetastoreManifest;
use gateway::tiering::Tiering;
use storage::tier::{DeleteMode, EngineConfig, Tier, TierConfig};

use crate::config::Settings;

/// What the gateway needs of tiering.
pub struct Wired {
    pub tier: Tier,
    pub tiering: Arc<Tiering>,
    pub logs: TieredLogFactory,
}

/// 90% of the space free under `dir` now.
fn default_disk_limit(dir: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(dir).ok()?;
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    Some(free / 10 * 9)
}

/// Builds the store, cache and uploader; call on the control-plane runtime.
pub async fn wire(s: &Settings, meta: &metastore::Metastore) -> anyhow::Result<Wired> {
    let mut store = match &s.object_store {
        Some(url) => cache::store_from_url(url, &StoreEnv::from_process())
            .with_context(|| format!("cannot use object store {url}"))?,
        None => ObjectStoreHandle::local_default(&s.data_dir)
            .context("cannot prepare the object folder under the data dir")?,
    };
    let faults = if s.object_store_faults {
        tracing::warn!("object store fault injection is on (testing only)");
        let wrapper = FaultInjectingStore::new(Arc::clone(&store.store));
        let controller = wrapper.controller();
        store = store.with_store(Arc::new(wrapper));
        Some(controller)
    } else {
        None
    };
    let disk = (s.cache_disk_bytes > 0).then(|| DiskTierConfig {
        dir: s.cache_dir.clone(),
        capacity_bytes: usize::try_from(s.cache_disk_bytes).unwrap_or(usize::MAX),
        recover: true,
    });
    let cache = ColdCache::open(
        CacheConfig {
            memory_bytes: usize::try_from(s.cache_memory_bytes).unwrap_or(usize::MAX),
            disk,
            ..CacheConfig::default()
        },
        store.clone(),
    )
    .await
    .context("cannot open the cold-read cache")?;
    let log_dir = s.data_dir.join("log");
    let disk_logs = DiskLogFactory::new(&log_dir).context("cannot open the log directory")?;
    let limit = s.local_disk_limit.or_else(|| default_disk_limit(&log_dir));
    let config = TierConfig {
        engine: EngineConfig {
            max_in_flight: s.upload_concurrency,
            max_in_flight_per_partition: s.upload_concurrency,
            ..EngineConfig::default()
        },
        delete_mode: if s.object_store_tombstones {
            DeleteMode::Tombstone
        } else {
            DeleteMode::Delete
        },
        local_disk_limit: limit,
        ..TierConfig::default()
    };
    tracing::info!(
        object_store = ?store,
        local_disk_limit = ?limit,
        cache_memory_bytes = s.cache_memory_bytes,
        cache_disk_bytes = s.cache_disk_bytes,
        "tiered storage ready"
    );
    let manifest = Arc::new(MetastoreManifest::new(meta.clone()));
    let tier = Tier::start(config, store, cache, manifest);
    Ok(Wired {
        tiering: Arc::new(Tiering::new(tier.clone(), faults)),
        logs: TieredLogFactory::new(disk_logs, tier.clone()),
        tier,
    })
}
