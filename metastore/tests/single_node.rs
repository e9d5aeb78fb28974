//! An embedded one-node metastore: the default deployment.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use common::{agent, embedded, eventually};
use metastore::{ClusterControl, Groups, Manifests, Topics};
use metastore::{
    CommittedOffset, ConfigOp, CreateTopic, MetaError, MetaEvent, Metastore, MetastoreConfig,
    OffsetCommit, SegmentEntry,
};

fn commit(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
    OffsetCommit {
        topic: topic.into(),
        partition,
        offset,
        leader_epoch: 0,
        metadata: None,
        commit_time_ms: 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_embedded_node_applies_writes_and_serves_them_locally() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    let cluster = ms.cluster();
    assert_eq!(
        cluster.cluster_id.len(),
        22,
        "Kafka-style cluster id: {cluster:?}"
    );
    assert_eq!(cluster.controller, Some(1));
    let mut events = ms.subscribe();

    ms.register_agent(agent(1)).await.unwrap();
    let t = ms
        .create_topic(
            CreateTopic::new("orders", 3, -1).with_config("retention.ms", "1000"),
            false,
        )
        .await
        .unwrap();
    assert_eq!(t.partitions.len(), 3);
    assert!(t
        .partitions
        .iter()
        .all(|p| p.leader == Some(1) && p.replicas == vec![1] && p.leader_epoch == 0));
    assert_eq!(t.config("retention.ms"), Some("1000"));
    assert_eq!(
        ms.topic("orders"),
        Some(std::sync::Arc::new(t.clone())),
        "visible locally as soon as the write returns"
    );
    assert_eq!(ms.topic_by_id(t.id).as_deref(), Some(&t));
    assert_eq!(
        events.recv().await.unwrap(),
        MetaEvent::AgentRegistered { agent_id: 1 }
    );
    assert_eq!(
        events.recv().await.unwrap(),
        MetaEvent::TopicCreated {
            id: t.id,
            name: "orders".into()
        }
    );

    let err = ms
        .create_topic(CreateTopic::new("orders", 1, 1), false)
        .await
        .unwrap_err();
    assert_eq!(
        err,
        MetaError::TopicAlreadyExists {
            name: "orders".into()
        }
    );
    let err = ms
        .create_topic(CreateTopic::new("wide", 1, 3), false)
        .await
        .unwrap_err();
    assert!(
        matches!(err, MetaError::InvalidReplicationFactor { .. }),
        "{err}"
    );

    let a = ms.allocate_producer_ids(1000).await.unwrap();
    let b = ms.allocate_producer_ids(1000).await.unwrap();
    assert_eq!(a.end, b.start, "blocks are disjoint and dense: {a:?} {b:?}");

    let results = ms
        .commit_offsets(
            "g",
            None,
            vec![commit("orders", 0, 42), commit("missing", 0, 1)],
        )
        .await
        .unwrap();
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(MetaError::UnknownTopic { .. })));
    let offsets = ms.committed_offsets("g");
    assert_eq!(offsets.len(), 1);
    assert_eq!(offsets[&("orders".to_string(), 0)].offset, 42);
    assert_eq!(ms.groups(), vec!["g".to_string()]);

    let entry = SegmentEntry {
        key: "k0".into(),
        base_offset: 0,
        last_offset: 99,
        size: 4096,
        ..Default::default()
    };
    ms.commit_segment(t.id, 0, entry.clone(), None)
        .await
        .unwrap();
    ms.commit_segment(t.id, 0, entry.clone(), None)
        .await
        .unwrap();
    assert_eq!(ms.segments(t.id, 0), vec![entry.clone()]);
    assert_eq!(ms.trim_segments(t.id, 0, 100).await.unwrap(), vec![entry]);

    let t2 = ms
        .alter_topic_configs(
            "orders",
            vec![ConfigOp::Set("segment.ms".into(), "60000".into())],
            false,
            false,
        )
        .await
        .unwrap();
    assert_eq!(t2.config("segment.ms"), Some("60000"));
    assert_eq!(t2.config("retention.ms"), Some("1000"));
    let grown = ms.create_partitions("orders", 5, false).await.unwrap();
    assert_eq!(grown.partitions.len(), 5);

    assert_eq!(ms.staleness(), Some(Duration::ZERO));
    ms.ensure_fresh(Duration::ZERO).await.unwrap();
    ms.linearizable_barrier().await.unwrap();
    let deleted = ms.delete_topic("orders").await.unwrap();
    assert_eq!(deleted.id, t.id);
    assert!(ms.topic("orders").is_none());
    assert!(
        ms.committed_offsets("g").is_empty(),
        "offsets of a deleted topic go with it"
    );
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn committed_writes_and_the_cluster_id_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    let cluster_id = ms.cluster().cluster_id;
    ms.register_agent(agent(7)).await.unwrap();
    for i in 0..5 {
        ms.create_topic(CreateTopic::new(format!("t{i}"), 2, 1), false)
            .await
            .unwrap();
    }
    ms.commit_offsets("g", None, vec![commit("t3", 1, 77)])
        .await
        .unwrap();
    let ids = ms.allocate_producer_ids(10).await.unwrap();
    let before = ms.topics();
    ms.shutdown().await.unwrap();

    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    assert_eq!(ms.cluster().cluster_id, cluster_id);
    assert_eq!(ms.topics(), before);
    assert_eq!(ms.committed_offsets("g")[&("t3".to_string(), 1)].offset, 77);
    assert_eq!(ms.agents().len(), 1);
    let next = ms.allocate_producer_ids(10).await.unwrap();
    assert_eq!(
        next.start, ids.end,
        "producer ids are never handed out twice"
    );
    ms.shutdown().await.unwrap();
}

/// Drops from the raft log every record of the committed log id written
/// after the entry that mentions `marker`, as a SIGKILL between an entry's
/// fsync and the (unsynced) record of its commit leaves the log. Records are
/// `u32 len | u32 crc | u8 kind | u64 index | payload`, kind 2 the commit.
fn forget_commits_after(raft_dir: &std::path::Path, marker: &[u8]) -> usize {
    let mut dropped = 0;
    for e in std::fs::read_dir(raft_dir).unwrap() {
        let path = e.unwrap().path();
        if !path
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with("wal-")
        {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let (mut pos, mut seen, mut kept) = (0, false, Vec::new());
        while pos < bytes.len() {
            let len = u32::from_le_bytes(bytes[pos..pos + 4].try_into().unwrap()) as usize;
            let record = &bytes[pos..pos + 17 + len];
            let payload = &record[17..];
            if record[8] == 1 && payload.windows(marker.len()).any(|w| w == marker) {
                seen = true;
            }
            if seen && record[8] == 2 {
                dropped += 1;
            } else {
                kept.extend_from_slice(record);
            }
            pos += record.len();
        }
        std::fs::write(&path, kept).unwrap();
    }
    dropped
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_node_serves_writes_logged_before_their_commit_was_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    ms.create_topic(CreateTopic::new("early", 1, 1), false)
        .await
        .unwrap();
    ms.create_topic(CreateTopic::new("late-topic", 1, 1), false)
        .await
        .unwrap();
    ms.shutdown().await.unwrap();
    assert!(forget_commits_after(&dir.path().join("raft"), b"late-topic") > 0);

    // acknowledged, so on disk: the restarted node must serve it from the start
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    let names: Vec<String> = ms.topics().into_iter().map(|t| t.name.clone()).collect();
    assert!(
        names.contains(&"early".to_string()) && names.contains(&"late-topic".to_string()),
        "topics after the restart: {names:?}"
    );
    assert_eq!(ms.staleness(), Some(Duration::ZERO));
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn state_is_rebuilt_from_a_snapshot_and_the_log_tail_after_purging() {
    let dir = tempfile::tempdir().unwrap();
    let config = || MetastoreConfig {
        snapshot_every: 40,
        wal_segment_bytes: 16 << 10,
        ..embedded(dir.path())
    };
    let ms = Metastore::start(config()).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    for i in 0..150 {
        ms.create_topic(CreateTopic::new(format!("topic-{i}"), 1, 1), false)
            .await
            .unwrap();
    }
    eventually("a snapshot is taken", Duration::from_secs(10), || {
        ms.raft_metrics().snapshot.is_some()
    })
    .await;
    eventually("old log entries purged", Duration::from_secs(10), || {
        ms.raft_metrics().purged.is_some()
    })
    .await;
    let before = ms.topics();
    ms.shutdown().await.unwrap();

    let ms = Metastore::start(config()).await.unwrap();
    assert_eq!(ms.topics(), before);
    assert_eq!(ms.topics().len(), 150);
    ms.create_topic(CreateTopic::new("after-restart", 1, 1), false)
        .await
        .unwrap();
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_raft_entries() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    ms.create_topic(CreateTopic::new("t", 1, 1), false)
        .await
        .unwrap();
    let start = ms.raft_metrics().last_log_index.unwrap();
    let writers: Vec<_> = (0..400)
        .map(|i| {
            let ms = ms.clone();
            tokio::spawn(async move {
                ms.commit_offsets(&format!("group-{i}"), None, vec![commit("t", 0, i)])
                    .await
            })
        })
        .collect();
    for w in writers {
        assert!(w.await.unwrap().unwrap()[0].is_ok());
    }
    assert_eq!(ms.groups().len(), 400);
    let entries = ms.raft_metrics().last_log_index.unwrap() - start;
    assert!(
        entries < 200,
        "400 concurrent commits took {entries} raft entries"
    );
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_data_directory_is_owned_by_one_node_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    let err = Metastore::start(embedded(dir.path())).await.unwrap_err();
    assert!(
        matches!(err, MetaError::InvalidSettings { ref reason } if reason.contains("in use")),
        "{err}"
    );
    ms.shutdown().await.unwrap();
    let again = Metastore::start(embedded(dir.path())).await.unwrap();
    again.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_agent_loses_its_partitions_to_an_in_sync_replica() {
    let dir = tempfile::tempdir().unwrap();
    let config = MetastoreConfig {
        agent_lease: Duration::from_millis(400),
        ..embedded(dir.path())
    };
    let ms = Metastore::start(config).await.unwrap();
    let keep1 = ms.keep_agent_alive(agent(1), Duration::from_millis(80));
    let _keep2 = ms.keep_agent_alive(agent(2), Duration::from_millis(80));
    eventually("both agents registered", Duration::from_secs(5), || {
        ms.agents().len() == 2
    })
    .await;
    let t = ms
        .create_topic(CreateTopic::new("t", 4, 2), false)
        .await
        .unwrap();
    let led_by_1: Vec<i32> = t
        .partitions
        .iter()
        .filter(|p| p.leader == Some(1))
        .map(|p| p.index)
        .collect();
    assert_eq!(led_by_1.len(), 2);
    let mut events = ms.subscribe();

    drop(keep1);
    eventually(
        "agent 2 leads every partition",
        Duration::from_secs(10),
        || {
            ms.topic("t")
                .unwrap()
                .partitions
                .iter()
                .all(|p| p.leader == Some(2))
        },
    )
    .await;
    let t = ms.topic("t").unwrap();
    for i in &led_by_1 {
        let p = &t.partitions[*i as usize];
        assert_eq!(p.leader_epoch, 1, "a new leader means a new epoch");
        assert_eq!(p.isr, vec![2], "the silent agent left the ISR");
    }
    assert!(ms.agents().iter().any(|a| a.id == 1 && a.fenced));
    let mut seen = Vec::new();
    while let Ok(e) = events.try_recv() {
        seen.push(e);
    }
    assert!(
        seen.contains(&MetaEvent::AgentFenced { agent_id: 1 }),
        "{seen:?}"
    );
    assert!(seen.iter().any(|e| matches!(
        e,
        MetaEvent::LeaderChanged {
            leader: Some(2),
            leader_epoch: 1,
            ..
        }
    )));

    // agent 1 returns: it is unfenced and the leader may add it back to the ISR
    ms.heartbeat(1).await.unwrap();
    let p = t.partitions[led_by_1[0] as usize].clone();
    ms.alter_isr(
        t.id,
        p.index,
        (2, p.leader_epoch),
        p.partition_epoch,
        vec![2, 1],
    )
    .await
    .unwrap();
    assert_eq!(
        ms.topic("t").unwrap().partitions[p.index as usize].isr,
        vec![2, 1]
    );
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sole_replica_that_goes_silent_takes_its_partition_offline_until_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let config = MetastoreConfig {
        agent_lease: Duration::from_millis(300),
        ..embedded(dir.path())
    };
    let ms = Metastore::start(config).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    ms.create_topic(CreateTopic::new("solo", 1, 1), false)
        .await
        .unwrap();
    eventually(
        "the partition goes offline",
        Duration::from_secs(10),
        || ms.topic("solo").unwrap().partitions[0].leader.is_none(),
    )
    .await;
    ms.heartbeat(1).await.unwrap();
    eventually("the replica leads again", Duration::from_secs(10), || {
        ms.topic("solo").unwrap().partitions[0].leader == Some(1)
    })
    .await;
    assert_eq!(ms.topic("solo").unwrap().partitions[0].leader_epoch, 2);
    let committed = CommittedOffset {
        offset: 1,
        leader_epoch: 2,
        metadata: None,
        commit_time_ms: 5,
    };
    let mut c = commit("solo", 0, 1);
    c.leader_epoch = 2;
    c.commit_time_ms = 5;
    ms.commit_offsets("g", None, vec![c]).await.unwrap();
    assert_eq!(
        ms.committed_offsets("g")[&("solo".to_string(), 0)],
        committed
    );
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_too_large_to_replicate_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    let huge = CreateTopic::new("huge", 1, 1).with_config("cleanup.policy", "d".repeat(5 << 20));
    let err = ms.create_topic(huge, false).await.unwrap_err();
    assert!(
        matches!(&err, MetaError::InvalidRequest { reason } if reason.contains("exceeds the limit")),
        "{err}"
    );
    assert!(ms.topic("huge").is_none());
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_too_large_for_one_write_is_stored_in_several() {
    let dir = tempfile::tempdir().unwrap();
    let ms = Metastore::start(embedded(dir.path())).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    ms.create_topic(CreateTopic::new("wide", 2000, 1), false)
        .await
        .unwrap();
    let before = ms.raft_metrics().last_log_index.unwrap();
    // about 4.5 MiB of offsets: more than one write may hold
    let commits: Vec<OffsetCommit> = (0..1100)
        .map(|p| OffsetCommit {
            metadata: Some("m".repeat(4096)),
            ..commit("wide", p, i64::from(p))
        })
        .chain(std::iter::once(commit("missing", 0, 1)))
        .collect();
    let results = ms.commit_offsets("g", None, commits).await.unwrap();
    assert_eq!(results.len(), 1101, "one result per offset, in order");
    assert!(results[..1100].iter().all(Result::is_ok));
    assert!(matches!(results[1100], Err(MetaError::UnknownTopic { .. })));
    let stored = ms.committed_offsets("g");
    assert_eq!(stored.len(), 1100);
    assert_eq!(stored[&("wide".to_string(), 1099)].offset, 1099);
    let entries = ms.raft_metrics().last_log_index.unwrap() - before;
    assert!(entries >= 2, "split across {entries} entries");
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_log_start_floor_only_rises_and_survives_snapshots_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = || MetastoreConfig {
        snapshot_every: 10,
        ..embedded(dir.path())
    };
    let ms = Metastore::start(config()).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    let t = ms
        .create_topic(CreateTopic::new("purged", 2, 1), false)
        .await
        .unwrap();
    assert_eq!(ms.log_start(t.id, 0), None);
    assert_eq!(ms.set_log_start(t.id, 0, 150).await.unwrap(), 150);
    assert_eq!(ms.log_start(t.id, 0), Some(150), "read locally at once");
    assert_eq!(
        ms.set_log_start(t.id, 0, 100).await.unwrap(),
        150,
        "lower is a no-op"
    );
    let err = ms.set_log_start(t.id, 7, 1).await.unwrap_err();
    assert!(matches!(err, MetaError::UnknownPartition { .. }), "{err}");
    // enough writes for a snapshot that holds the floor, and a purged log
    for i in 0..30 {
        ms.allocate_producer_ids(1 + i).await.unwrap();
    }
    eventually("a snapshot is taken", Duration::from_secs(10), || {
        ms.raft_metrics().snapshot.is_some()
    })
    .await;
    ms.shutdown().await.unwrap();

    let ms = Metastore::start(config()).await.unwrap();
    assert_eq!(ms.log_start(t.id, 0), Some(150));
    assert_eq!(ms.log_start(t.id, 1), None);
    ms.delete_topic("purged").await.unwrap();
    assert_eq!(ms.log_start(t.id, 0), None, "dropped with the topic");
    ms.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_whose_newest_snapshot_is_damaged_past_the_log_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    // the log keeps 1000 entries below a snapshot, so with snapshots 1001
    // entries apart the older snapshot falls out of the log's reach
    let config = || MetastoreConfig {
        snapshot_every: 1001,
        ..embedded(dir.path())
    };
    let ms = Metastore::start(config()).await.unwrap();
    ms.register_agent(agent(1)).await.unwrap();
    // heartbeats themselves stay off the log; a logged renewal is a small entry
    while ms.raft_metrics().purged.is_none_or(|p| p.index < 1005) {
        ms.submit(vec![metastore::command::Command::Heartbeat { agent_id: 1 }])
            .await
            .unwrap();
    }
    ms.shutdown().await.unwrap();

    let mut snapshots: Vec<_> = std::fs::read_dir(dir.path().join("snapshots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            name.starts_with("snap-") && name.ends_with(".bin")
        })
        .collect();
    snapshots.sort();
    assert_eq!(
        snapshots.len(),
        2,
        "the newest and one older: {snapshots:?}"
    );
    let newest = snapshots.pop().unwrap();
    let good = std::fs::read(&newest).unwrap();
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x20;
    std::fs::write(&newest, &bad).unwrap();

    let err = Metastore::start(config()).await.unwrap_err();
    let name = newest.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        matches!(&err, MetaError::Storage { reason } if reason.contains(&name)),
        "the error names the damaged file: {err}"
    );

    std::fs::write(&newest, &good).unwrap();
    let ms = Metastore::start(config()).await.unwrap();
    assert_eq!(ms.agents().len(), 1);
    ms.shutdown().await.unwrap();
}
