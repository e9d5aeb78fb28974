//! Wiring of tiered storage: the object store named by the settings, the
//! cold cache, the uploader service and the tiered log factory.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use cache::{CacheConfig, ColdCache, DiskTierConfig, ObjectStoreHandle, StoreEnv};
use dataplane::backend::disk::DiskLogFactory;
use dataplane::backend::manifest::MetastoreManifest;
use dataplane::backend::tiered::TieredLogFactory;
use gateway::http::HttpExtension;
use storage::tier::wal::{WalConfig, WalWriter};
use storage::tier::{DeleteMode, EngineConfig, PackConfig, Tier, TierConfig};

use crate::config::Settings;

/// What the gateway needs of tiering.
pub struct Wired {
    pub tier: Tier,
    /// Writes partitions durable in object storage ahead into it.
    pub wal: WalWriter,
    pub http: Arc<dyn HttpExtension>,
    pub logs: TieredLogFactory,
}

/// The tier's figures on `/metrics` and `/v1/tiering`, and in test builds
/// the object-store fault endpoint.
struct TierHttp {
    tier: Tier,
    /// Requests counted on the object store, for `/v1/cost` and `/metrics`.
    requests: cache::metered::RequestCounters,
    #[cfg(feature = "fault-injection")]
    faults: Option<cache::fault::FaultController>,
}

impl HttpExtension for TierHttp {
    fn metrics(&self) -> String {
        let mut text = self.tier.snapshot().render();
        text.push_str(&gateway::cost::render_object_store(
            &self.requests.snapshot(),
        ));
        text
    }

    fn tiering(&self) -> Option<storage::tier::TierSnapshot> {
        Some(self.tier.snapshot())
    }

    fn object_requests(&self) -> Option<cache::metered::RequestCounts> {
        Some(self.requests.snapshot())
    }

    #[cfg(feature = "fault-injection")]
    fn handle(&self, target: &str) -> Option<(u16, String)> {
        let faults = self.faults.as_ref()?;
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        if path != "/admin/object-store/faults" {
            return None;
        }
        Some(match faults.apply_query(query) {
            Ok(status) => (200, format!("{status}\n")),
            Err(e) => (400, format!("{e}\n")),
        })
    }

    #[cfg(not(feature = "fault-injection"))]
    fn handle(&self, _target: &str) -> Option<(u16, String)> {
        None
    }
}

/// The local disk limit when none is configured: 90% of what the partition
/// data may use, which is the space free now plus what the log directory
/// already holds. Counting the held bytes keeps the limit the same across
/// restarts; 90% of the free space alone shrank with every restart, until
/// tiered segments were evicted at once and producers refused.
pub fn default_disk_limit(free: u64, held: u64) -> u64 {
    free.saturating_add(held) / 10 * 9
}

/// Bytes of the files under `dir`, recursively (0 if it does not exist).
fn bytes_under(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => bytes_under(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map(|m| m.len()).unwrap_or(0),
            _ => 0,
        })
        .sum()
}

fn measured_disk_limit(log_dir: &Path) -> Option<u64> {
    let st = nix::sys::statvfs::statvfs(log_dir).ok()?;
    let free = st.blocks_available().saturating_mul(st.fragment_size());
    Some(default_disk_limit(free, bytes_under(log_dir)))
}

/// Builds the store, cache and uploader; call on the control-plane runtime.
pub async fn wire(s: &Settings, meta: &metastore::Metastore) -> anyhow::Result<Wired> {
    #[cfg_attr(not(feature = "fault-injection"), allow(unused_mut))]
    let mut store = match &s.object_store {
        Some(url) => cache::store_from_url(url, &StoreEnv::from_process())
            .with_context(|| format!("cannot use object store {url}"))?,
        None => ObjectStoreHandle::local_default(&s.data_dir)
            .context("cannot prepare the object folder under the data dir")?,
    };
    #[cfg(feature = "fault-injection")]
    let faults = if s.object_store_faults {
        tracing::warn!("object store fault injection is on (testing only)");
        let wrapper = cache::fault::FaultInjectingStore::new(Arc::clone(&store.store));
        let controller = wrapper.controller();
        store = store.with_store(Arc::new(wrapper));
        Some(controller)
    } else {
        None
    };
    // outermost, so an injected fault is counted as the failed request it stands for
    let (store, requests) = store.metered();
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
    let limit = s.local_disk_limit.or_else(|| measured_disk_limit(&log_dir));
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
        compaction_grace: std::time::Duration::from_millis(s.tiered_compaction_grace_ms),
        pack: (s.pack_target_bytes > 0).then(|| PackConfig {
            target_bytes: s.pack_target_bytes,
            floor_bytes: s.pack_floor_bytes.min(s.pack_target_bytes),
            max_wait: std::time::Duration::from_millis(s.pack_max_wait_ms),
            linger: std::time::Duration::from_millis(s.pack_max_wait_ms / 6),
            grace: std::time::Duration::from_millis(s.pack_grace_ms),
            sweep_interval: std::time::Duration::from_millis(
                (s.pack_grace_ms / 2).clamp(1000, 300_000),
            ),
            ..PackConfig::default()
        }),
        ..TierConfig::default()
    };
    tracing::info!(
        object_store = ?store,
        local_disk_limit = ?limit,
        cache_memory_bytes = s.cache_memory_bytes,
        cache_disk_bytes = s.cache_disk_bytes,
        pack_target_bytes = s.pack_target_bytes,
        "tiered storage ready"
    );
    let manifest = Arc::new(MetastoreManifest::new(meta.clone()));
    let wal = WalWriter::start(
        store.clone(),
        manifest.clone(),
        WalConfig {
            linger: std::time::Duration::from_millis(s.wal_linger_ms),
            ..WalConfig::default()
        },
    );
    let tier = Tier::start(config, store, cache, manifest);
    Ok(Wired {
        wal,
        http: Arc::new(TierHttp {
            tier: tier.clone(),
            requests,
            #[cfg(feature = "fault-injection")]
            faults,
        }),
        logs: TieredLogFactory::new(disk_logs, tier.clone()),
        tier,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_disk_limit_survives_a_restart_with_data_on_disk() {
        // 100 GB free and nothing held at the first start...
        let first = default_disk_limit(100_000_000_000, 0);
        // ...and after 80 GB of partition data, 20 GB free at the restart.
        let again = default_disk_limit(20_000_000_000, 80_000_000_000);
        assert_eq!(first, again);
        assert_eq!(first, 90_000_000_000);
    }

    #[test]
    fn held_bytes_count_every_file_under_the_log_dir() {
        let dir = tempfile::tempdir().expect("tmp");
        std::fs::create_dir_all(dir.path().join("t-0")).expect("mkdir");
        std::fs::write(
            dir.path().join("t-0/00000000000000000000.log"),
            vec![1u8; 4096],
        )
        .expect("write");
        std::fs::write(dir.path().join("topic-id"), b"x").expect("write");
        assert_eq!(bytes_under(dir.path()), 4097);
        assert_eq!(bytes_under(&dir.path().join("missing")), 0);
    }
}
