use std::time::Duration;

use super::*;

fn key(p: i32) -> PartitionKey {
    PartitionKey::new(uuid::Uuid::from_u128(7), p)
}

fn seg(base: i64, last: i64) -> SealedSegment {
    SealedSegment {
        base_offset: base,
        last_offset: last,
        size: 100,
        path: PathBuf::from(format!("/x/{base:020}.log")),
        offset_index_path: PathBuf::from(format!("/x/{base:020}.index")),
        time_index_path: PathBuf::from(format!("/x/{base:020}.timeindex")),
        first_timestamp: 1,
        max_timestamp: 2,
        crc32c: None,
        producer_snapshot_path: PathBuf::from(format!("/x/{:020}.snapshot", last + 1)),
        txn_index_path: PathBuf::from(format!("/x/{base:020}.txnindex")),
    }
}

fn entry(s: &SealedSegment) -> TieredSegment {
    TieredSegment {
        key: format!("k/{}", s.base_offset),
        base_offset: s.base_offset,
        last_offset: s.last_offset,
        size: s.size,
        ..TieredSegment::default()
    }
}

fn engine(max: usize, per_partition: usize) -> UploaderEngine {
    UploaderEngine::new(EngineConfig {
        max_in_flight: max,
        max_in_flight_per_partition: per_partition,
        retry: RetrySchedule {
            initial: Duration::from_millis(100),
            max: Duration::from_secs(10),
            multiplier: 2.0,
        },
    })
}

fn register(
    e: &mut UploaderEngine,
    p: PartitionKey,
    sealed: Vec<SealedSegment>,
    hw: i64,
) -> Vec<Action> {
    e.handle(
        0,
        Event::Register {
            partition: p,
            registration: 1,
            committed: Vec::new(),
            sealed,
            high_watermark: hw,
        },
    )
}

fn uploads(actions: &[Action]) -> Vec<(OpId, PartitionKey, i64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Upload {
                op,
                partition,
                segment,
                ..
            } => Some((*op, *partition, segment.base_offset)),
            _ => None,
        })
        .collect()
}

fn commits(actions: &[Action]) -> Vec<(OpId, i64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Commit { op, entry, .. } => Some((*op, entry.base_offset)),
            _ => None,
        })
        .collect()
}

fn deletable(actions: &[Action], p: PartitionKey) -> Option<i64> {
    actions.iter().rev().find_map(|a| match a {
        Action::Deletable {
            partition,
            deletable_below,
        } if *partition == p => Some(*deletable_below),
        _ => None,
    })
}

#[test]
fn uploads_start_oldest_first_within_the_agent_and_partition_limits() {
    let mut e = engine(3, 2);
    let a = register(
        &mut e,
        key(0),
        vec![seg(0, 9), seg(10, 19), seg(20, 29)],
        100,
    );
    let b = register(&mut e, key(1), vec![seg(0, 4)], 100);
    let started: Vec<_> = uploads(&a).into_iter().chain(uploads(&b)).collect();
    assert_eq!(
        started
            .iter()
            .map(|(_, p, b)| (p.partition, *b))
            .collect::<Vec<_>>(),
        vec![(0, 0), (0, 10), (1, 0)],
        "two for partition 0 (its limit), then partition 1's"
    );
    assert_eq!(e.stats(0).uploads_in_flight, 3);
    // A finished upload frees a slot for the oldest waiting segment.
    let (op, _, _) = started[0];
    let acts = e.handle(
        5,
        Event::UploadDone {
            op,
            entry: entry(&seg(0, 9)),
        },
    );
    assert_eq!(commits(&acts), vec![(commits(&acts)[0].0, 0)]);
    assert_eq!(
        uploads(&acts)
            .iter()
            .map(|(_, p, b)| (p.partition, *b))
            .collect::<Vec<_>>(),
        vec![(0, 20)]
    );
}

#[test]
fn segments_at_or_above_the_high_watermark_wait_for_it() {
    let mut e = engine(4, 4);
    let acts = register(&mut e, key(0), vec![seg(0, 9), seg(10, 19)], 15);
    assert_eq!(
        uploads(&acts).len(),
        1,
        "offset 19 is not below the high watermark 15"
    );
    let acts = e.handle(
        1,
        Event::HighWatermark {
            partition: key(0),
            high_watermark: 20,
        },
    );
    assert_eq!(uploads(&acts)[0].2, 10);
}

#[test]
fn commits_go_in_offset_order_and_local_deletion_follows_them() {
    let mut e = engine(4, 4);
    let acts = register(
        &mut e,
        key(0),
        vec![seg(0, 9), seg(10, 19), seg(20, 29)],
        100,
    );
    assert_eq!(deletable(&acts, key(0)), Some(0));
    let ups = uploads(&acts);
    // The second segment finishes uploading first; its commit waits.
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[1].0,
            entry: entry(&seg(10, 19)),
        },
    );
    assert!(
        commits(&acts).is_empty(),
        "no commit before the older segment's: the manifest never has a gap"
    );
    assert_eq!(e.deletable_below(key(0)), Some(0));
    let acts = e.handle(
        3,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(0, 9)),
        },
    );
    let c = commits(&acts);
    assert_eq!(c.iter().map(|(_, b)| *b).collect::<Vec<_>>(), vec![0]);
    let acts = e.handle(4, Event::CommitDone { op: c[0].0 });
    assert_eq!(deletable(&acts, key(0)), Some(10));
    let c = commits(&acts);
    assert_eq!(
        c.iter().map(|(_, b)| *b).collect::<Vec<_>>(),
        vec![10],
        "the next one commits as soon as the older one is in"
    );
    let acts = e.handle(5, Event::CommitDone { op: c[0].0 });
    assert_eq!(
        deletable(&acts, key(0)),
        Some(20),
        "0..=19 committed; 20 still pending"
    );
    let acts = e.handle(
        5,
        Event::UploadDone {
            op: ups[2].0,
            entry: entry(&seg(20, 29)),
        },
    );
    let c = commits(&acts);
    let acts = e.handle(6, Event::CommitDone { op: c[0].0 });
    assert_eq!(deletable(&acts, key(0)), Some(30));
    assert_eq!(e.stats(6).pending_segments, 0);
}

#[test]
fn failed_uploads_are_retried_after_a_growing_jittered_backoff() {
    let mut e = engine(1, 1);
    let acts = register(&mut e, key(0), vec![seg(0, 9)], 100);
    let op = uploads(&acts)[0].0;
    let acts = e.handle(1_000, Event::UploadFailed { op, jitter: 0.0 });
    assert!(
        uploads(&acts).is_empty(),
        "no retry before the backoff ends"
    );
    assert_eq!(
        e.next_wake(1_000),
        Some(1_050),
        "half of the 100 ms ceiling with zero jitter"
    );
    assert!(uploads(&e.tick(1_049)).is_empty());
    let acts = e.tick(1_050);
    let (op, _, base) = uploads(&acts)[0];
    assert_eq!(base, 0);
    assert!(matches!(acts[0], Action::Upload { attempt: 1, .. }));
    e.handle(2_000, Event::UploadFailed { op, jitter: 0.999 });
    let wake = e.next_wake(2_000).unwrap();
    assert!(
        (2_100..2_200).contains(&wake),
        "second retry waits within [100, 200) ms: {wake}"
    );
    assert_eq!(
        e.deletable_below(key(0)),
        Some(0),
        "nothing may be deleted meanwhile"
    );
}

#[test]
fn failed_commits_are_retried_without_uploading_again() {
    let mut e = engine(1, 1);
    let acts = register(&mut e, key(0), vec![seg(0, 9)], 100);
    let op = uploads(&acts)[0].0;
    let acts = e.handle(
        0,
        Event::UploadDone {
            op,
            entry: entry(&seg(0, 9)),
        },
    );
    let (c, _) = commits(&acts)[0];
    let acts = e.handle(10, Event::CommitFailed { op: c, jitter: 0.0 });
    assert!(commits(&acts).is_empty() && uploads(&acts).is_empty());
    let acts = e.tick(60);
    assert_eq!(commits(&acts).len(), 1, "the commit is retried");
    assert!(
        uploads(&acts).is_empty(),
        "the objects are not uploaded again"
    );
    let acts = e.handle(
        61,
        Event::CommitDone {
            op: commits(&acts)[0].0,
        },
    );
    assert_eq!(deletable(&acts, key(0)), Some(10));
}

#[test]
fn a_commit_too_late_for_its_objects_uploads_the_segment_again() {
    let mut e = engine(1, 1);
    let acts = register(&mut e, key(0), vec![seg(0, 9)], 100);
    let op = uploads(&acts)[0].0;
    let acts = e.handle(
        0,
        Event::UploadDone {
            op,
            entry: entry(&seg(0, 9)),
        },
    );
    let (c, _) = commits(&acts)[0];
    let acts = e.handle(10, Event::CommitStale { op: c });
    let again = uploads(&acts);
    assert_eq!(again.len(), 1, "uploaded again: {acts:?}");
    assert_eq!(again[0].2, 0);
    assert_eq!(
        e.deletable_below(key(0)),
        Some(0),
        "nothing may be deleted meanwhile"
    );
    let acts = e.handle(
        20,
        Event::UploadDone {
            op: again[0].0,
            entry: entry(&seg(0, 9)),
        },
    );
    let acts = e.handle(
        30,
        Event::CommitDone {
            op: commits(&acts)[0].0,
        },
    );
    assert_eq!(deletable(&acts, key(0)), Some(10));
}

#[test]
fn a_restart_uploads_sealed_segments_the_manifest_lacks() {
    let mut e = engine(4, 4);
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(0, 9), (20, 29)],
            sealed: vec![seg(0, 9), seg(10, 19), seg(20, 29), seg(30, 39)],
            high_watermark: 100,
        },
    );
    let bases: Vec<i64> = uploads(&acts).iter().map(|u| u.2).collect();
    assert_eq!(bases, vec![10, 30], "only what the manifest lacks goes up");
    assert_eq!(deletable(&acts, key(0)), Some(10));
}

#[test]
fn with_nothing_pending_everything_reported_is_deletable() {
    let mut e = engine(4, 4);
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(0, 9), (10, 19)],
            sealed: vec![seg(0, 9), seg(10, 19)],
            high_watermark: 25,
        },
    );
    assert!(uploads(&acts).is_empty());
    assert_eq!(deletable(&acts, key(0)), Some(20));
}

#[test]
fn raising_the_log_start_drops_segments_below_it_even_mid_upload() {
    let mut e = engine(1, 1);
    let acts = register(&mut e, key(0), vec![seg(0, 9), seg(10, 19)], 100);
    let op = uploads(&acts)[0].0;
    let acts = e.handle(
        1,
        Event::LogStartRaised {
            partition: key(0),
            log_start: 10,
        },
    );
    assert_eq!(deletable(&acts, key(0)), Some(10));
    assert!(
        uploads(&acts).is_empty(),
        "the agent slot is held until the upload ends"
    );
    let acts = e.handle(
        2,
        Event::UploadDone {
            op,
            entry: entry(&seg(0, 9)),
        },
    );
    assert!(
        commits(&acts).is_empty(),
        "a dropped segment is never committed"
    );
    assert_eq!(
        uploads(&acts)[0].2,
        10,
        "the freed slot goes to the next segment"
    );
}

#[test]
fn an_unregistered_partition_is_forgotten_and_late_completions_are_ignored() {
    let mut e = engine(2, 2);
    let acts = register(&mut e, key(0), vec![seg(0, 9)], 100);
    let op = uploads(&acts)[0].0;
    e.handle(
        1,
        Event::Unregister {
            partition: key(0),
            registration: 1,
        },
    );
    let acts = register(&mut e, key(1), vec![seg(0, 9), seg(10, 19)], 100);
    assert_eq!(
        uploads(&acts).len(),
        1,
        "one agent slot is still held by the old upload"
    );
    let acts = e.handle(
        2,
        Event::UploadDone {
            op,
            entry: entry(&seg(0, 9)),
        },
    );
    assert!(commits(&acts).is_empty());
    assert_eq!(uploads(&acts).len(), 1, "the slot is free again");
    assert_eq!(e.stats(2).partitions, 1);
}

#[test]
fn duplicate_reports_do_not_upload_twice() {
    let mut e = engine(4, 4);
    let acts = register(&mut e, key(0), vec![seg(0, 9)], 100);
    assert_eq!(uploads(&acts).len(), 1);
    let acts = e.handle(
        1,
        Event::Sealed {
            partition: key(0),
            segments: vec![seg(0, 9), seg(10, 19)],
            high_watermark: 100,
        },
    );
    assert_eq!(
        uploads(&acts).iter().map(|u| u.2).collect::<Vec<_>>(),
        vec![10]
    );
    let st = e.stats(11);
    assert_eq!((st.pending_segments, st.pending_bytes), (2, 200));
    assert_eq!(st.oldest_pending_ms, 11);
}

#[test]
fn a_late_unregister_of_an_earlier_opening_leaves_the_new_one_alone() {
    let mut e = engine(2, 2);
    register(&mut e, key(0), vec![seg(0, 9)], 100);
    e.handle(
        1,
        Event::Register {
            partition: key(0),
            registration: 2,
            committed: Vec::new(),
            sealed: vec![seg(0, 9), seg(10, 19)],
            high_watermark: 100,
        },
    );
    e.handle(
        2,
        Event::Unregister {
            partition: key(0),
            registration: 1,
        },
    );
    assert_eq!(e.stats(2).partitions, 1);
    assert_eq!(e.stats(2).pending_segments, 2);
}

#[test]
fn segments_a_truncation_cut_are_withdrawn_and_their_late_uploads_ignored() {
    let mut e = engine(4, 4);
    let p = key(0);
    let acts = register(&mut e, p, vec![seg(0, 9), seg(10, 19), seg(20, 29)], 100);
    let started = uploads(&acts);
    assert_eq!(started.len(), 3);
    let (first_op, _, _) = started[0];
    let (cut_op, _, _) = started[1];

    // The follower truncated into the segment at 10: it and everything
    // after are withdrawn; the segment at 0 goes on.
    let acts = e.handle(
        1,
        Event::Truncated {
            partition: p,
            from: 10,
            high_watermark: 12,
        },
    );
    assert_eq!(deletable(&acts, p), None, "0 is still pending");
    assert_eq!(e.stats(1).pending_segments, 1);
    assert_eq!(
        e.stats(1).uploads_in_flight,
        3,
        "uploads in flight still run"
    );

    // The withdrawn upload completes into nothing: no commit.
    let acts = e.handle(
        2,
        Event::UploadDone {
            op: cut_op,
            entry: entry(&seg(10, 19)),
        },
    );
    assert!(commits(&acts).is_empty());

    // The segment re-sealed at 10 with other offsets waits for the new
    // upload bound before it is uploaded.
    let acts = e.handle(
        3,
        Event::Sealed {
            partition: p,
            segments: vec![seg(10, 14)],
            high_watermark: 12,
        },
    );
    assert!(uploads(&acts).is_empty(), "14 is above the lowered bound");
    let acts = e.handle(
        4,
        Event::HighWatermark {
            partition: p,
            high_watermark: 15,
        },
    );
    assert_eq!(
        uploads(&acts).iter().map(|u| u.2).collect::<Vec<_>>(),
        vec![10]
    );

    // Once 0 is committed, local deletion stops below the new segment.
    let acts = e.handle(
        5,
        Event::UploadDone {
            op: first_op,
            entry: entry(&seg(0, 9)),
        },
    );
    let (commit_op, _) = commits(&acts)[0];
    let acts = e.handle(6, Event::CommitDone { op: commit_op });
    assert_eq!(deletable(&acts, p), Some(10));
}

/// The entries a commit action carries, as `(base, first served, last)`.
fn committed_entries(actions: &[Action]) -> Vec<(OpId, i64, i64, i64)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Commit { op, entry, .. } => Some((
                *op,
                entry.base_offset,
                entry.first_served(),
                entry.last_offset,
            )),
            _ => None,
        })
        .collect()
}

fn manifest_read(p: PartitionKey, committed: &[(i64, i64)]) -> Event {
    Event::ManifestRead {
        partition: p,
        committed: committed.to_vec(),
    }
}

#[test]
fn a_follower_uploads_nothing_and_may_delete_what_its_leader_committed() {
    let mut e = engine(4, 4);
    let acts = register(
        &mut e,
        key(0),
        vec![seg(0, 14), seg(15, 30), seg(31, 40)],
        i64::MIN,
    );
    assert!(uploads(&acts).is_empty(), "a follower uploads nothing");
    assert_eq!(deletable(&acts, key(0)), Some(0));
    // the leader's segments have other boundaries
    let acts = e.handle(1, manifest_read(key(0), &[(0, 9), (10, 19)]));
    assert_eq!(
        deletable(&acts, key(0)),
        Some(15),
        "0..=14 is served by the leader's objects; 15..=30 only in part"
    );
    assert!(uploads(&acts).is_empty() && commits(&acts).is_empty());
    let acts = e.handle(2, manifest_read(key(0), &[(0, 9), (10, 19), (20, 35)]));
    assert_eq!(deletable(&acts, key(0)), Some(31));
    let acts = e.handle(3, manifest_read(key(0), &[(20, 35), (37, 41)]));
    assert_eq!(
        deletable(&acts, key(0)),
        None,
        "36 is not served yet: nothing changes"
    );
    let acts = e.handle(4, manifest_read(key(0), &[(20, 35), (36, 36), (37, 41)]));
    assert_eq!(deletable(&acts, key(0)), Some(41));
    assert_eq!(e.stats(4).pending_segments, 0);
    let acts = e.handle(
        5,
        Event::HighWatermark {
            partition: key(0),
            high_watermark: 100,
        },
    );
    assert!(uploads(&acts).is_empty(), "nothing is left to upload");
}

#[test]
fn a_new_leader_uploads_only_what_the_manifest_lacks_and_commits_it_past_the_end() {
    let mut e = engine(4, 4);
    // the old leader committed 0..=19 in segments of ten; this agent rolled
    // its own segments as a follower
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(0, 9), (10, 19)],
            sealed: vec![seg(0, 14), seg(15, 30), seg(31, 40)],
            high_watermark: 100,
        },
    );
    assert_eq!(
        uploads(&acts).iter().map(|u| u.2).collect::<Vec<_>>(),
        vec![15, 31],
        "the segment the manifest serves entirely is not uploaded"
    );
    assert_eq!(deletable(&acts, key(0)), Some(15));
    let ups = uploads(&acts);
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[1].0,
            entry: entry(&seg(31, 40)),
        },
    );
    assert!(commits(&acts).is_empty(), "31 waits for 15");
    let acts = e.handle(
        2,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(15, 30)),
        },
    );
    let c = committed_entries(&acts);
    assert_eq!(
        c.iter()
            .map(|(_, b, f, l)| (*b, *f, *l))
            .collect::<Vec<_>>(),
        vec![(15, 20, 30)],
        "uploaded whole, serving only what follows the manifest's end"
    );
    let acts = e.handle(3, Event::CommitDone { op: c[0].0 });
    assert_eq!(deletable(&acts, key(0)), Some(31));
    let c = committed_entries(&acts);
    assert_eq!(
        c.iter()
            .map(|(_, b, f, l)| (*b, *f, *l))
            .collect::<Vec<_>>(),
        vec![(31, 31, 40)],
        "adjacent to the new leader's own entry: served from its base"
    );
    let acts = e.handle(4, Event::CommitDone { op: c[0].0 });
    assert_eq!(deletable(&acts, key(0)), Some(41));
}

#[test]
fn a_second_failover_continues_after_a_straddling_entry() {
    let mut e = engine(4, 4);
    // first leader: 0..=19; second: object 15..=30 serving 20..=30
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(0, 9), (10, 19), (20, 30)],
            sealed: vec![seg(0, 25), seg(26, 45)],
            high_watermark: 100,
        },
    );
    let ups = uploads(&acts);
    assert_eq!(ups.iter().map(|u| u.2).collect::<Vec<_>>(), vec![26]);
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(26, 45)),
        },
    );
    let c = committed_entries(&acts);
    assert_eq!(
        c.iter()
            .map(|(_, b, f, l)| (*b, *f, *l))
            .collect::<Vec<_>>(),
        vec![(26, 31, 45)]
    );
}

#[test]
fn a_commit_refused_for_a_stale_view_is_retried_past_the_fresh_end() {
    let mut e = engine(4, 4);
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(0, 9)],
            sealed: vec![seg(5, 30)],
            high_watermark: 100,
        },
    );
    let ups = uploads(&acts);
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(5, 30)),
        },
    );
    let c = committed_entries(&acts);
    assert_eq!((c[0].1, c[0].2), (5, 10));
    // the old leader's last commit had not reached this agent's view yet
    e.handle(2, manifest_read(key(0), &[(0, 9), (10, 19)]));
    let acts = e.handle(
        3,
        Event::CommitFailed {
            op: c[0].0,
            jitter: 0.0,
        },
    );
    assert!(commits(&acts).is_empty(), "the retry waits for its backoff");
    let wake = e.next_wake(3).expect("a retry is due");
    let acts = e.tick(wake);
    let c = committed_entries(&acts);
    assert_eq!(
        c.iter()
            .map(|(_, b, f, l)| (*b, *f, *l))
            .collect::<Vec<_>>(),
        vec![(5, 20, 30)],
        "recomputed from the fresh view, without uploading again"
    );
    assert!(uploads(&acts).is_empty());
}

#[test]
fn a_segment_the_manifest_comes_to_serve_mid_upload_is_dropped() {
    let mut e = engine(4, 4);
    let acts = register(&mut e, key(0), vec![seg(0, 9), seg(10, 19)], 100);
    let ups = uploads(&acts);
    let acts = e.handle(1, manifest_read(key(0), &[(0, 12)]));
    assert_eq!(deletable(&acts, key(0)), Some(10));
    assert_eq!(e.stats(1).uploads_in_flight, 2, "uploads run to their end");
    let acts = e.handle(
        2,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(0, 9)),
        },
    );
    assert!(
        commits(&acts).is_empty(),
        "a late upload completes into nothing"
    );
    let acts = e.handle(
        3,
        Event::UploadDone {
            op: ups[1].0,
            entry: entry(&seg(10, 19)),
        },
    );
    let c = committed_entries(&acts);
    assert_eq!(
        c.iter()
            .map(|(_, b, f, l)| (*b, *f, *l))
            .collect::<Vec<_>>(),
        vec![(10, 13, 19)]
    );
}

#[test]
fn offsets_below_the_manifests_first_entry_count_as_served() {
    let mut e = engine(4, 4);
    // retention trimmed the manifest up to 20 before this agent opened the
    // partition with older local segments
    let acts = e.handle(
        0,
        Event::Register {
            partition: key(0),
            registration: 1,
            committed: vec![(20, 29)],
            sealed: vec![seg(0, 14), seg(15, 35)],
            high_watermark: 100,
        },
    );
    let ups = uploads(&acts);
    assert_eq!(ups.iter().map(|u| u.2).collect::<Vec<_>>(), vec![15]);
    assert_eq!(deletable(&acts, key(0)), Some(15));
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[0].0,
            entry: entry(&seg(15, 35)),
        },
    );
    let c = committed_entries(&acts);
    assert_eq!((c[0].1, c[0].2, c[0].3), (15, 30, 35));
}

// Re-uploads of compacted segments (rules 6 to 8).

/// A partition whose segments `[0, 9]`, `[10, 19]`, `[20, 29]` are
/// committed, nothing pending, as a leader with the given limits.
fn committed_partition(e: &mut UploaderEngine, p: PartitionKey) {
    e.handle(
        0,
        Event::Register {
            partition: p,
            registration: 1,
            committed: vec![(0, 9), (10, 19), (20, 29)],
            sealed: vec![seg(0, 9), seg(10, 19), seg(20, 29)],
            high_watermark: 100,
        },
    );
}

/// The compacted copy of `[base, last]`: a smaller local segment.
fn compacted(base: i64, last: i64) -> SealedSegment {
    SealedSegment {
        size: 40,
        ..seg(base, last)
    }
}

fn recompacted(p: PartitionKey, segments: Vec<SealedSegment>) -> Event {
    Event::Recompacted {
        partition: p,
        registration: 1,
        segments,
        generation: 5,
    }
}

fn reuploads(actions: &[Action]) -> Vec<(OpId, i64, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Reupload {
                op,
                segment,
                attempt,
                generation,
                ..
            } => {
                assert_eq!(*generation, 5);
                Some((*op, segment.base_offset, *attempt))
            }
            _ => None,
        })
        .collect()
}

fn replaces(actions: &[Action]) -> Vec<(OpId, String, String, u32)> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Replace {
                op,
                old,
                entry,
                attempt,
                ..
            } => Some((*op, old[0].key.clone(), entry.key.clone(), *attempt)),
            _ => None,
        })
        .collect()
}

fn released(actions: &[Action]) -> Vec<i64> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Released { base_offset, .. } => Some(*base_offset),
            _ => None,
        })
        .collect()
}

fn discarded(actions: &[Action]) -> Vec<String> {
    actions
        .iter()
        .filter_map(|a| match a {
            Action::Discard { entry, .. } => Some(entry.key.clone()),
            _ => None,
        })
        .collect()
}

fn copy_of(base: i64, last: i64) -> TieredSegment {
    TieredSegment {
        key: format!("k/{base}.c5"),
        size: 40,
        ..entry(&seg(base, last))
    }
}

#[test]
fn a_compacted_segment_is_uploaded_again_then_replaced_then_released() {
    let mut e = engine(4, 2);
    let p = key(0);
    committed_partition(&mut e, p);
    let acts = e.handle(1, recompacted(p, vec![compacted(10, 19)]));
    let started = reuploads(&acts);
    assert_eq!(started.iter().map(|r| r.1).collect::<Vec<_>>(), vec![10]);
    assert_eq!(e.stats(1).reuploads_pending, 1);
    assert_eq!(e.stats(1).uploads_in_flight, 1, "it takes an upload slot");
    assert_eq!(deletable(&acts, p), None, "re-uploads never move deletion");
    let acts = e.handle(
        2,
        Event::ReuploadDone {
            op: started[0].0,
            old: vec![entry(&seg(10, 19))],
            entry: copy_of(10, 19),
        },
    );
    assert_eq!(e.stats(2).uploads_in_flight, 0, "the slot is free again");
    let rep = replaces(&acts);
    assert_eq!(
        rep.iter()
            .map(|r| (r.1.as_str(), r.2.as_str()))
            .collect::<Vec<_>>(),
        vec![("k/10", "k/10.c5")]
    );
    assert!(released(&acts).is_empty(), "still pending until replaced");
    let acts = e.handle(3, Event::ReplaceDone { op: rep[0].0 });
    assert_eq!(released(&acts), vec![10]);
    assert_eq!(e.stats(3).reuploads_pending, 0);
    assert!(discarded(&acts).is_empty());
}

#[test]
fn reuploads_share_the_upload_limits_and_come_after_first_uploads() {
    let mut e = engine(2, 2);
    let p = key(0);
    committed_partition(&mut e, p);
    let acts = e.handle(
        1,
        recompacted(
            p,
            vec![compacted(0, 9), compacted(10, 19), compacted(20, 29)],
        ),
    );
    let started = reuploads(&acts);
    assert_eq!(started.iter().map(|r| r.1).collect::<Vec<_>>(), vec![0, 10]);
    assert_eq!(e.stats(1).uploads_in_flight, 2, "the agent's limit");
    // a segment sealed meanwhile waits for a slot, then goes first
    let acts = e.handle(
        2,
        Event::Sealed {
            partition: p,
            segments: vec![seg(30, 39)],
            high_watermark: 100,
        },
    );
    assert!(uploads(&acts).is_empty() && reuploads(&acts).is_empty());
    let first = e.handle(3, Event::ReuploadSkipped { op: started[0].0 });
    assert_eq!(released(&first), vec![0], "skipped: nothing to replace");
    assert_eq!(
        uploads(&first).iter().map(|u| u.2).collect::<Vec<_>>(),
        vec![30],
        "a first upload before the re-upload still waiting"
    );
    assert!(reuploads(&first).is_empty());
}

#[test]
fn failed_reuploads_and_replaces_are_retried_after_a_backoff() {
    let mut e = engine(4, 2);
    let p = key(0);
    committed_partition(&mut e, p);
    let acts = e.handle(0, recompacted(p, vec![compacted(10, 19)]));
    let (op, _, _) = reuploads(&acts)[0];
    let acts = e.handle(10, Event::ReuploadFailed { op, jitter: 0.0 });
    assert!(reuploads(&acts).is_empty(), "not before the backoff ends");
    let wake = e.next_wake(10).expect("a backoff");
    assert!(wake > 10);
    assert!(reuploads(&e.tick(wake - 1)).is_empty());
    let acts = e.tick(wake);
    let again = reuploads(&acts);
    assert_eq!(
        again.iter().map(|r| (r.1, r.2)).collect::<Vec<_>>(),
        vec![(10, 1)]
    );
    let acts = e.handle(
        wake,
        Event::ReuploadDone {
            op: again[0].0,
            old: vec![entry(&seg(10, 19))],
            entry: copy_of(10, 19),
        },
    );
    let (rop, _, _, attempt) = replaces(&acts)[0].clone();
    assert_eq!(attempt, 0);
    let acts = e.handle(
        wake,
        Event::ReplaceFailed {
            op: rop,
            jitter: 0.0,
            retriable: true,
        },
    );
    assert!(replaces(&acts).is_empty() && reuploads(&acts).is_empty());
    let failed_at = wake;
    let wake = e.next_wake(failed_at).expect("a backoff");
    assert!(wake > failed_at && replaces(&e.tick(wake - 1)).is_empty());
    let acts = e.tick(wake);
    let rep = replaces(&acts);
    assert_eq!(rep.len(), 1, "the replace alone is retried, not the upload");
    assert_eq!(rep[0].3, 1);
    // refused for good: dropped and released (the driver deletes the copy)
    let acts = e.handle(
        wake,
        Event::ReplaceFailed {
            op: rep[0].0,
            jitter: 0.0,
            retriable: false,
        },
    );
    assert_eq!(released(&acts), vec![10]);
    assert_eq!(e.stats(wake).reuploads_pending, 0);
    assert_eq!(e.next_wake(wake), None);
}

#[test]
fn a_truncation_drops_reuploads_it_cut_and_their_late_copies_are_discarded() {
    let mut e = engine(4, 4);
    let p = key(0);
    committed_partition(&mut e, p);
    let acts = e.handle(1, recompacted(p, vec![compacted(0, 9), compacted(20, 29)]));
    let started = reuploads(&acts);
    assert_eq!(started.len(), 2);
    let acts = e.handle(
        2,
        Event::ReuploadDone {
            op: started[0].0,
            old: vec![entry(&seg(0, 9))],
            entry: copy_of(0, 9),
        },
    );
    assert_eq!(replaces(&acts).len(), 1);
    let acts = e.handle(
        3,
        Event::Truncated {
            partition: p,
            from: 15,
            high_watermark: 15,
        },
    );
    assert_eq!(released(&acts), vec![20], "the one at 20 was cut");
    assert_eq!(e.stats(3).reuploads_pending, 1);
    assert_eq!(e.stats(3).uploads_in_flight, 1, "its upload still runs");
    let acts = e.handle(
        4,
        Event::ReuploadDone {
            op: started[1].0,
            old: vec![entry(&seg(20, 29))],
            entry: copy_of(20, 29),
        },
    );
    assert_eq!(
        discarded(&acts),
        vec!["k/20.c5".to_string()],
        "a copy uploaded for a dropped re-upload is deleted"
    );
    assert!(replaces(&acts).is_empty());
    assert_eq!(e.stats(4).uploads_in_flight, 0);
    // DeleteRecords past the other one drops it too, mid-replace
    let acts = e.handle(
        5,
        Event::LogStartRaised {
            partition: p,
            log_start: 10,
        },
    );
    assert_eq!(released(&acts), vec![0]);
    assert_eq!(e.stats(5).reuploads_pending, 0);
}

#[test]
fn a_newer_report_for_the_same_base_replaces_the_stale_reupload() {
    let mut e = engine(4, 4);
    let p = key(0);
    committed_partition(&mut e, p);
    let acts = e.handle(1, recompacted(p, vec![compacted(10, 19)]));
    let (stale_op, _, _) = reuploads(&acts)[0];
    let newer = SealedSegment {
        size: 30,
        ..seg(10, 19)
    };
    let acts = e.handle(2, recompacted(p, vec![newer]));
    assert!(released(&acts).is_empty(), "the base stays pending");
    let fresh = reuploads(&acts);
    assert_eq!(fresh.len(), 1, "the newer copy goes up at once");
    assert_eq!(e.stats(2).reuploads_pending, 1);
    let acts = e.handle(
        3,
        Event::ReuploadDone {
            op: stale_op,
            old: vec![entry(&seg(10, 19))],
            entry: copy_of(10, 19),
        },
    );
    assert_eq!(discarded(&acts), vec!["k/10.c5".to_string()]);
    assert!(
        replaces(&acts).is_empty(),
        "the stale copy is never recorded"
    );
    let acts = e.handle(
        4,
        Event::ReuploadDone {
            op: fresh[0].0,
            old: vec![entry(&seg(10, 19))],
            entry: copy_of(10, 19),
        },
    );
    assert_eq!(replaces(&acts).len(), 1);
}

#[test]
fn a_follower_reuploads_nothing_and_a_closed_partition_releases_everything() {
    let mut e = engine(4, 4);
    let p = key(0);
    e.handle(
        0,
        Event::Register {
            partition: p,
            registration: 1,
            committed: vec![(0, 9), (10, 19)],
            sealed: vec![seg(0, 9), seg(10, 19)],
            high_watermark: i64::MIN,
        },
    );
    let acts = e.handle(1, recompacted(p, vec![compacted(0, 9)]));
    assert!(reuploads(&acts).is_empty(), "below no high watermark");
    let acts = e.handle(
        2,
        Event::Recompacted {
            partition: p,
            registration: 7,
            segments: vec![compacted(10, 19)],
            generation: 5,
        },
    );
    assert_eq!(released(&acts), vec![10], "another opening's report");
    let acts = e.handle(
        3,
        Event::Unregister {
            partition: p,
            registration: 1,
        },
    );
    assert_eq!(released(&acts), vec![0]);
}
