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
fn local_deletion_follows_only_the_contiguous_committed_prefix() {
    let mut e = engine(4, 4);
    let acts = register(
        &mut e,
        key(0),
        vec![seg(0, 9), seg(10, 19), seg(20, 29)],
        100,
    );
    assert_eq!(deletable(&acts, key(0)), Some(0));
    let ups = uploads(&acts);
    // The second segment finishes first and commits first.
    let acts = e.handle(
        1,
        Event::UploadDone {
            op: ups[1].0,
            entry: entry(&seg(10, 19)),
        },
    );
    let c = commits(&acts);
    let acts = e.handle(2, Event::CommitDone { op: c[0].0 });
    assert_eq!(
        deletable(&acts, key(0)),
        None,
        "segment 0 still waits: nothing changes"
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
    let acts = e.handle(4, Event::CommitDone { op: c[0].0 });
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
