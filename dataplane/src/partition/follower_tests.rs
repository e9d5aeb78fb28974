//! Replication between partition tasks on real disk logs, driven round by
//! round as the fetcher drives it: what a follower reports to its leader,
//! which answers it applies, and how leaders close and followers truncate.

use std::sync::Arc;
use std::time::Duration;

use uuid::Uuid;

use super::replication::fetcher::{self, Followed};
use super::replication::wire::{FetchedPartition, Refusal};
use super::tests::{durable, leadership, partitions, settings};
use super::*;
use crate::backend::disk::DiskLogFactory;
use crate::backend::LogError;
use crate::testing::{batch_of, scratch_dir};

/// One agent's replica: its id and its partition's handle.
pub(super) type Replica<'a> = (u64, &'a PartitionHandle);

/// Two agents' replicas of one partition on their own disks: agent 1
/// leads it at epoch 0, agent 2 follows. The directories live as long as
/// the first value.
async fn leader_and_follower() -> (
    [tempfile::TempDir; 2],
    [Arc<Partitions>; 2],
    PartitionHandle,
    PartitionHandle,
) {
    let dirs = [scratch_dir(), scratch_dir()];
    let id = Uuid::new_v4();
    let regs = [
        partitions(Arc::new(
            DiskLogFactory::new(dirs[0].path()).expect("factory"),
        )),
        partitions(Arc::new(
            DiskLogFactory::new(dirs[1].path()).expect("factory"),
        )),
    ];
    let a1 = regs[0]
        .get_or_open("t", id, 0, settings)
        .await
        .expect("open");
    let a2 = regs[1]
        .get_or_open("t", id, 0, settings)
        .await
        .expect("open");
    a1.lead(leadership(1, 0)).await.expect("lead");
    a2.follow(1, 0).await.expect("follow");
    (dirs, regs, a1, a2)
}

/// The leader's answer to `follower`'s fetch from `pos`, as it travels.
pub(super) async fn leader_answer(
    (_, leader): Replica<'_>,
    (me, follower): Replica<'_>,
    epoch: i32,
    pos: ReplicaPosition,
) -> FetchedPartition {
    let a = leader
        .follower_fetch(FollowerFetch {
            follower: me,
            leader_epoch: epoch,
            fetch_offset: pos.log_end,
            last_fetched_epoch: pos.latest_epoch,
            max_bytes: 1 << 20,
        })
        .await
        .expect("fetch");
    let key = follower.key();
    FetchedPartition {
        topic_id: key.topic_id,
        partition: key.partition,
        error: a.error,
        high_watermark: a.high_watermark,
        log_start_offset: a.local_start_offset,
        diverging: a.diverging,
        records: a.records,
    }
}

pub(super) fn followed(h: &PartitionHandle, epoch: i32) -> Followed {
    Followed {
        key: h.key(),
        leader_epoch: epoch,
        handle: h.clone(),
    }
}

/// One round of a follower's fetcher against its leader, as
/// `replication::fetcher` runs it: ask the follower where its log stands,
/// fetch from there, then cut where the leader says the logs part, or
/// append what came.
async fn fetch_once(leader: Replica<'_>, follower: Replica<'_>, epoch: i32) {
    let pos = follower.1.position().await.expect("position");
    let answer = leader_answer(leader, follower, epoch, pos).await;
    assert_eq!(answer.error, 0, "the leader serves the fetch");
    let fetched = FetchedAt {
        leader: leader.0,
        leader_epoch: epoch,
        fetch_offset: pos.log_end,
    };
    assert!(
        fetcher::apply(&followed(follower.1, epoch), fetched, answer, Vec::new).await,
        "the follower applies the answer"
    );
}

/// Three agents' replicas of one partition on their own disks (the
/// directories and registries live as long as the first two values):
/// agent 1 leads at epoch 0 and has appended three records, which the
/// followers, agents 2 and 3, have not fetched yet.
async fn three_replicas_led_by_agent_1() -> (
    Vec<tempfile::TempDir>,
    Vec<Arc<Partitions>>,
    Vec<PartitionHandle>,
) {
    let dirs = vec![scratch_dir(), scratch_dir(), scratch_dir()];
    let id = Uuid::new_v4();
    let mut registries = Vec::new();
    let mut agents = Vec::new();
    for d in &dirs {
        let p = partitions(Arc::new(DiskLogFactory::new(d.path()).expect("factory")));
        agents.push(p.get_or_open("t", id, 0, settings).await.expect("open"));
        registries.push(p);
    }
    agents[0].lead(leadership(1, 0)).await.expect("lead");
    agents[1].follow(1, 0).await.expect("follow");
    agents[2].follow(1, 0).await.expect("follow");
    for v in [b"a", b"b", b"c"] {
        agents[0]
            .append(batch_of(&[v]), 0, Acks::Leader)
            .await
            .expect("append");
    }
    (dirs, registries, agents)
}

/// Waits until `h`'s log ends at `end` (a spawned append reached its task).
async fn appended(h: &PartitionHandle, end: i64) {
    while h.position().await.expect("position").log_end < end {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A leader that closes (the agent shutting down) while acks=all writes
/// wait for its followers must not acknowledge them: its own fsync does not
/// put them on the followers, and the follower that takes over would not
/// have them. They get NOT_LEADER_OR_FOLLOWER (producers retry at the next
/// leader); what the followers had before stays acknowledged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closing_leader_fails_acks_all_writes_its_followers_do_not_have() {
    let dirs = [scratch_dir(), scratch_dir()];
    let id = Uuid::new_v4();
    let leader_reg = partitions(Arc::new(
        DiskLogFactory::new(dirs[0].path()).expect("factory"),
    ));
    let follower_reg = partitions(Arc::new(
        DiskLogFactory::new(dirs[1].path()).expect("factory"),
    ));
    let leader = leader_reg
        .get_or_open("t", id, 0, settings)
        .await
        .expect("open");
    let follower = follower_reg
        .get_or_open("t", id, 0, settings)
        .await
        .expect("open");
    let mut lead = leadership(1, 0);
    lead.assignment.replicas = vec![1, 2];
    lead.assignment.isr = vec![1, 2];
    leader.lead(lead).await.expect("lead");
    follower.follow(1, 0).await.expect("follow");

    // a write the follower fetches is acknowledged as usual
    let replicated = {
        let h = leader.clone();
        tokio::spawn(async move { h.append(batch_of(&[b"kept"]), 0, Acks::All).await })
    };
    appended(&leader, 1).await;
    fetch_once((1, &leader), (2, &follower), 0).await;
    fetch_once((1, &leader), (2, &follower), 0).await;
    replicated
        .await
        .expect("task")
        .expect("acknowledged once the follower has it");

    // one the follower never fetches waits, and the close must not ack it
    let unreplicated = {
        let h = leader.clone();
        tokio::spawn(async move { h.append(batch_of(&[b"lost?"]), 0, Acks::All).await })
    };
    appended(&leader, 2).await;
    leader_reg.close_all().await;
    let answer = unreplicated.await.expect("task");
    assert!(
        matches!(answer, Err(LogError::NotServing(_))),
        "a write only the closing leader holds is not acknowledged: {answer:?}"
    );
    follower_reg.close_all().await;
}

/// Leadership moved twice in quick succession: agent 2 led epoch 1 and
/// wrote one batch that agent 1 fetched, then agent 3 (in sync, but
/// without that batch) took over at epoch 2 before writing anything.
/// Agent 1's newest epoch is then newer than any in agent 3's log; it
/// must cut only that batch, not the committed records below it, or it
/// stays in the ISR with an empty log and may lead with it, handing out
/// offsets from 0 again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_ahead_in_an_epoch_its_new_leader_never_saw_keeps_the_committed_records() {
    let (_dirs, _registries, agents) = three_replicas_led_by_agent_1().await;
    let (a1, a2, a3) = (&agents[0], &agents[1], &agents[2]);
    // epoch 0: three committed records on every replica
    for _ in 0..2 {
        fetch_once((1, a1), (2, a2), 0).await;
        fetch_once((1, a1), (3, a3), 0).await;
    }
    assert_eq!(a2.position().await.expect("pos").log_end, 3);
    assert_eq!(a3.position().await.expect("pos").log_end, 3);

    // epoch 1: agent 2 leads and writes one batch; only agent 1 fetches it
    a2.lead(leadership(2, 1)).await.expect("lead");
    a1.follow(2, 1).await.expect("follow");
    a3.follow(2, 1).await.expect("follow");
    a2.append(batch_of(&[b"d"]), 1, Acks::Leader)
        .await
        .expect("append");
    fetch_once((2, a2), (1, a1), 1).await;
    assert_eq!(a1.position().await.expect("pos").latest_epoch, 1);

    // epoch 2: agent 3 leads before writing anything
    a3.lead(leadership(3, 2)).await.expect("lead");
    a1.follow(3, 2).await.expect("follow");
    a2.follow(3, 2).await.expect("follow");
    fetch_once((3, a3), (1, a1), 2).await;
    let pos = a1.position().await.expect("pos");
    assert_eq!(
        pos.log_end, 3,
        "agent 1 cuts the batch agent 3 never had and keeps the three committed records"
    );
    assert_eq!(pos.latest_epoch, 0);
}

/// A follower that took over holds records its old leader acknowledged
/// but has not yet heard their high watermark: until its own followers
/// confirm the log it took over, ListOffsets' latest and time lookups
/// answer OFFSET_NOT_AVAILABLE (clients retry) rather than an end offset
/// below acknowledged writes (Kafka's KIP-207); the earliest offset does
/// not depend on it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_leader_answers_offsets_once_its_followers_confirm_what_it_took_over() {
    let (_dirs, _registries, agents) = three_replicas_led_by_agent_1().await;
    let (a1, a2, a3) = (&agents[0], &agents[1], &agents[2]);
    // one round each: both followers hold the three records, and the
    // answers told them the high watermark before their fetches counted
    fetch_once((1, a1), (2, a2), 0).await;
    fetch_once((1, a1), (3, a3), 0).await;
    assert_eq!(a2.position().await.expect("pos").log_end, 3);

    a2.lead(leadership(2, 1)).await.expect("lead");
    a1.follow(2, 1).await.expect("follow");
    a3.follow(2, 1).await.expect("follow");
    for query in [
        OffsetQuery::Latest,
        OffsetQuery::LastStable,
        OffsetQuery::Timestamp(0),
        OffsetQuery::MaxTimestamp,
    ] {
        let answer = a2.offsets(query).await;
        assert!(
            matches!(answer, Err(LogError::OffsetNotAvailable(_))),
            "{query:?}: {answer:?}"
        );
    }
    let earliest = a2.offsets(OffsetQuery::Earliest).await.expect("earliest");
    assert_eq!(earliest.map(|e| e.offset), Some(0));

    fetch_once((2, a2), (1, a1), 1).await;
    fetch_once((2, a2), (3, a3), 1).await;
    let latest = a2.offsets(OffsetQuery::Latest).await.expect("latest");
    assert_eq!(
        latest.map(|l| l.offset),
        Some(3),
        "every acknowledged record"
    );
}

/// Opens a held durability point when dropped.
struct OpenOnDrop(Arc<super::task::SyncGate>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.release();
    }
}

/// Without write caching a follower reports to its leader (as the offset
/// it fetches from, which the leader counts toward the high watermark)
/// only what it has fsynced: a correlated power loss keeps the ISR, and a
/// follower that had counted unsynced records could lead without records
/// the leader acknowledged. One fdatasync covers everything a fetch brought.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_without_write_caching_reports_only_what_it_fsynced() {
    let dirs = [scratch_dir(), scratch_dir()];
    let id = Uuid::new_v4();
    let leader_reg = partitions(Arc::new(
        DiskLogFactory::new(dirs[0].path()).expect("factory"),
    ));
    let follower_reg = partitions(Arc::new(
        DiskLogFactory::new(dirs[1].path()).expect("factory"),
    ));
    // released on a failed assertion too: the runtime's shutdown waits
    // for the held fdatasync thread
    let gate = OpenOnDrop(follower_reg.hold_syncs());
    let leader = leader_reg
        .get_or_open("t", id, 0, settings)
        .await
        .expect("open");
    let follower = follower_reg
        .get_or_open("t", id, 0, durable)
        .await
        .expect("open");
    let mut lead = leadership(1, 0);
    lead.assignment.replicas = vec![1, 2];
    lead.assignment.isr = vec![1, 2];
    leader.lead(lead).await.expect("lead");
    follower.follow(1, 0).await.expect("follow");
    for v in [b"a", b"b"] {
        leader
            .append(batch_of(&[v]), 0, Acks::Leader)
            .await
            .expect("append");
    }

    // the follower appends both batches; its fdatasync is held
    fetch_once((1, &leader), (2, &follower), 0).await;
    let next_round = {
        let (leader, follower) = (leader.clone(), follower.clone());
        tokio::spawn(async move { fetch_once((1, &leader), (2, &follower), 0).await })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(
        !next_round.is_finished(),
        "the follower does not report a log end it has not fsynced"
    );
    assert_eq!(
        leader.bounds().await.expect("bounds").1,
        0,
        "the leader's high watermark counts nothing the follower could lose"
    );

    gate.0.release();
    next_round
        .await
        .expect("the next round runs once the fsync completed");
    assert_eq!(
        leader.bounds().await.expect("bounds").1,
        2,
        "what the follower fsynced counts"
    );
    assert_eq!(
        follower_reg
            .counters()
            .syncs
            .load(std::sync::atomic::Ordering::Relaxed),
        1,
        "one fdatasync covered both batches of the fetch"
    );
    leader_reg.close_all().await;
    follower_reg.close_all().await;
}

/// A fetch answered by agent 1 at epoch 0 arrives after the follower was
/// told that agent 3 leads at epoch 1: it must change nothing. A late
/// out-of-range answer from the old leader would otherwise cut the log back
/// to the old leader's high watermark, below what the new leader's high
/// watermark may already count; Kafka drops such answers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_fetched_under_an_older_epoch_neither_truncates_nor_appends() {
    let (_dirs, regs, a1, a2) = leader_and_follower().await;
    for v in [b"a", b"b", b"c"] {
        a1.append(batch_of(&[v]), 0, Acks::Leader)
            .await
            .expect("append");
    }
    fetch_once((1, &a1), (2, &a2), 0).await;
    let pos = a2.position().await.expect("position");
    assert_eq!(pos.log_end, 3);

    // two answers to fetches made at epoch 0 from offset 3, still on the way
    a1.append(batch_of(&[b"d"]), 0, Acks::Leader)
        .await
        .expect("append");
    let late_append = leader_answer((1, &a1), (2, &a2), 0, pos).await;
    assert!(!late_append.records.is_empty());
    let late_out_of_range = FetchedPartition {
        error: Refusal::OffsetOutOfRange.code(),
        high_watermark: 1,
        log_start_offset: 0,
        diverging: None,
        records: bytes::Bytes::new(),
        ..late_append.clone()
    };
    let fetched = FetchedAt {
        leader: 1,
        leader_epoch: 0,
        fetch_offset: 3,
    };

    // agent 3 leads at epoch 1 now
    a2.follow(3, 1).await.expect("follow");
    let stale = followed(&a2, 0);
    assert!(
        !fetcher::still_followed(&[followed(&a2, 1)], &stale),
        "the fetcher drops answers for a view it no longer holds"
    );
    // and the task refuses them should one get through
    assert!(!fetcher::apply(&stale, fetched, late_out_of_range, Vec::new).await);
    assert!(!fetcher::apply(&stale, fetched, late_append, Vec::new).await);
    let after = a2.position().await.expect("position");
    assert_eq!(
        after, pos,
        "neither the truncation nor the append of epoch 0 reached the log"
    );
    for r in &regs {
        r.close_all().await;
    }
}

/// An answer applies only to the log end its fetch started from: applied
/// twice (or after a truncation moved the log), it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_another_fetch_offset_is_refused() {
    let (_dirs, regs, a1, a2) = leader_and_follower().await;
    a1.append(batch_of(&[b"a", b"b"]), 0, Acks::Leader)
        .await
        .expect("append");
    let pos = a2.position().await.expect("position");
    let answer = leader_answer((1, &a1), (2, &a2), 0, pos).await;
    let fetched = FetchedAt {
        leader: 1,
        leader_epoch: 0,
        fetch_offset: pos.log_end,
    };
    let f = followed(&a2, 0);
    assert!(fetcher::apply(&f, fetched, answer.clone(), Vec::new).await);
    let out_of_range = FetchedPartition {
        error: Refusal::OffsetOutOfRange.code(),
        high_watermark: 0,
        log_start_offset: 0,
        records: bytes::Bytes::new(),
        ..answer.clone()
    };
    assert!(!fetcher::apply(&f, fetched, out_of_range, Vec::new).await);
    assert_eq!(a2.position().await.expect("position").log_end, 2);
    let refused = a2.replica_append(fetched, answer.records, 2).await;
    assert!(
        matches!(refused, Err(LogError::NotServing(_))),
        "{refused:?}"
    );
    for r in &regs {
        r.close_all().await;
    }
}
