//! A follower that restarts past what its leader keeps locally, with the
//! idempotent producer state object storage holds where it restarts.

use std::sync::Arc;

use uuid::Uuid;

use super::follower_tests::{followed, leader_answer};
use super::replication::fetcher;
use super::replication::wire::Refusal;
use super::tests::{leadership, partitions, settings};
use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::backend::LogError;
use crate::testing::{batch_of, scratch_dir};

/// Object storage as a restarting follower asks it for producer state: the
/// snapshot its leader wrote when it sealed the segment ending at an
/// offset, which the tiered backend uploads with that segment.
struct LeaderSnapshots(std::path::PathBuf);

#[async_trait::async_trait]
impl crate::backend::ColdLog for LeaderSnapshots {
    async fn read(&self, _: i64, _: usize) -> Result<Option<bytes::Bytes>, LogError> {
        Ok(None)
    }
    async fn offset_for_timestamp(
        &self,
        _: i64,
        _: i64,
    ) -> Result<Option<crate::backend::TimestampOffset>, LogError> {
        Ok(None)
    }
    async fn max_timestamp(
        &self,
        _: i64,
    ) -> Result<Option<crate::backend::TimestampOffset>, LogError> {
        Ok(None)
    }
    async fn persist_log_start(&self, _: i64) -> Result<(), LogError> {
        Ok(())
    }
    async fn producer_snapshot(&self, at: i64) -> Result<Option<bytes::Bytes>, LogError> {
        let path = self.0.join(format!("{at:020}.snapshot"));
        Ok(std::fs::read(path).ok().map(bytes::Bytes::from))
    }
    async fn aborted_transactions(
        &self,
        _: i64,
        _: i64,
    ) -> Result<Vec<storage::AbortedTxn>, LogError> {
        Ok(Vec::new())
    }
}

/// Disk logs with [`LeaderSnapshots`] behind them.
struct WithLeaderSnapshots(DiskLogFactory, std::path::PathBuf);

impl crate::backend::LogFactory for WithLeaderSnapshots {
    fn open(
        &self,
        topic: &str,
        topic_id: Uuid,
        partition: i32,
        settings: &crate::backend::LogSettings,
    ) -> Result<crate::backend::OpenedLog, LogError> {
        let mut opened = self.0.open(topic, topic_id, partition, settings)?;
        opened.cold = Some(Arc::new(LeaderSnapshots(self.1.clone())));
        Ok(opened)
    }
    fn remove(&self, topic: &str, topic_id: Uuid, partition: i32) -> Result<(), LogError> {
        self.0.remove(topic, topic_id, partition)
    }
}

/// A follower that fell below its leader's local start restarts there with
/// the producer state of the segment sealed there; promoted, it answers an
/// idempotent producer's retry of a batch from before the seal as a
/// duplicate instead of writing it a second time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_restarted_past_its_leaders_old_segments_still_knows_their_producers() {
    let dirs = [scratch_dir(), scratch_dir()];
    let id = Uuid::new_v4();
    let small = || crate::backend::LogSettings {
        segment_bytes: 1 << 20,
        ..settings()
    };
    let leader_reg = partitions(Arc::new(
        DiskLogFactory::new(dirs[0].path()).expect("factory"),
    ));
    let follower_reg = partitions(Arc::new(WithLeaderSnapshots(
        DiskLogFactory::new(dirs[1].path()).expect("factory"),
        dirs[0].path().join("t-0"),
    )));
    let leader = leader_reg
        .get_or_open("t", id, 0, small)
        .await
        .expect("open");
    let follower = follower_reg
        .get_or_open("t", id, 0, small)
        .await
        .expect("open");
    let mut lead = leadership(1, 0);
    lead.assignment.replicas = vec![1, 2];
    lead.assignment.isr = vec![1];
    leader.lead(lead).await.expect("lead");
    follower.follow(1, 0).await.expect("follow");

    let idem = |seq| {
        let b = crate::testing::record_batch(
            &[b"once"],
            false,
            Some((9, 0, seq)),
            kafka_protocol::records::Compression::None,
        );
        bytes::BytesMut::from(&b[..])
    };
    leader
        .append(idem(0), 0, Acks::Leader)
        .await
        .expect("append");
    let (original, _) = leader
        .append(idem(1), 0, Acks::Leader)
        .await
        .expect("append");
    let filler = vec![b'x'; 64 << 10];
    for _ in 0..24 {
        leader
            .append(batch_of(&[&filler]), 0, Acks::Leader)
            .await
            .expect("append");
    }
    // the roll's snapshot: where the sealed segment ends
    let sealed_end = std::fs::read_dir(dirs[0].path().join("t-0"))
        .expect("list")
        .filter_map(|e| {
            e.ok()?
                .file_name()
                .to_str()?
                .strip_suffix(".snapshot")?
                .parse::<i64>()
                .ok()
        })
        .max()
        .expect("a segment was sealed");
    assert!(sealed_end > original.last_offset);
    // what lies below is only in object storage now
    leader.delete_before(sealed_end).await.expect("delete");

    let pos = follower.position().await.expect("position");
    let answer = leader_answer((1, &leader), (2, &follower), 0, pos).await;
    assert_eq!(answer.error, Refusal::OffsetOutOfRange.code());
    let fetched = FetchedAt {
        leader: 1,
        leader_epoch: 0,
        fetch_offset: pos.log_end,
    };
    let manifest = || {
        vec![metastore::SegmentEntry {
            base_offset: 0,
            last_offset: sealed_end - 1,
            ..Default::default()
        }]
    };
    assert!(fetcher::apply(&followed(&follower, 0), fetched, answer, manifest).await);
    assert_eq!(
        follower.position().await.expect("position").log_end,
        sealed_end
    );

    // the follower leads now; the producer retries its second batch
    follower.lead(leadership(2, 1)).await.expect("lead");
    let (retry, _) = follower
        .append(idem(1), 1, Acks::Leader)
        .await
        .expect("append");
    assert!(retry.duplicate, "{retry:?}");
    assert_eq!(
        (retry.base_offset, retry.last_offset),
        (original.base_offset, original.last_offset)
    );
    leader_reg.close_all().await;
    follower_reg.close_all().await;
}
