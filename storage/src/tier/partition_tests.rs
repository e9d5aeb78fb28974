//! The uploader sees a sealed segment only once the local log has fsynced it.

use std::sync::Arc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use cache::{CacheConfig, ColdCache, ObjectStoreHandle};
use futures::StreamExt;
use kafka_protocol::records::{
    Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
};

use crate::tier::{Manifest, MemoryManifest, PartitionKey, Tier, TierConfig, TierRetention};
use crate::{LogConfig, PartitionLog};

/// A batch of 4 records of 30 KB each.
fn batch() -> Vec<u8> {
    let records: Vec<Record> = (0..4)
        .map(|i| Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: i,
            sequence: -1,
            timestamp: 1_000 + i,
            key: None,
            value: Some(Bytes::from(vec![b'v'; 30_000])),
            headers: Default::default(),
        })
        .collect();
    let mut buf = BytesMut::new();
    let opts = RecordEncodeOptions {
        version: 2,
        compression: Compression::None,
    };
    RecordBatchEncoder::encode(&mut buf, &records, &opts).expect("encode");
    buf.to_vec()
}

async fn objects(store: &ObjectStoreHandle) -> usize {
    store.store.list(None).collect::<Vec<_>>().await.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_segment_is_uploaded_only_after_its_background_fsync() {
    let store = ObjectStoreHandle::in_memory();
    let cache = ColdCache::open(CacheConfig::default(), store.clone())
        .await
        .expect("cache");
    let manifest = Arc::new(MemoryManifest::new());
    let tier = Tier::start(
        TierConfig::default(),
        store.clone(),
        cache,
        Arc::clone(&manifest) as Arc<dyn Manifest>,
    );
    let dir = tempfile::tempdir().expect("dir");
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let mut log = PartitionLog::open(dir.path(), config).expect("open");
    let gate = log.hold_flushes();
    let key = PartitionKey::new(uuid::Uuid::new_v4(), 0);
    let mut p = tier
        .open_partition(key, log, TierRetention::default())
        .expect("partition");
    // Rebound after the partition so that, should an assertion fail, the
    // gate opens before the partition's log waits for its held flushes.
    let gate = gate;

    while p.log().segments().len() < 2 {
        p.append(&mut batch(), 0, 1_000).expect("append");
    }
    let sealed_end = p.log().segments()[1].base_offset;
    // With the seal's fsync held, ticking and waiting upload nothing.
    for _ in 0..10 {
        p.tick(1_001).expect("tick");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        objects(&store).await,
        0,
        "not durable locally, not uploaded"
    );
    assert!(p.shared().deletable_below() < sealed_end);

    gate.open();
    let mut uploaded = false;
    for _ in 0..1_500 {
        p.tick(1_002).expect("tick");
        if p.shared().deletable_below() >= sealed_end {
            uploaded = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        uploaded,
        "the segment is uploaded and committed once fsynced"
    );
    assert!(objects(&store).await > 0);
    p.close().expect("close");
    tier.shutdown().await;
}
