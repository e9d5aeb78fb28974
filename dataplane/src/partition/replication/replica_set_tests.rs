use super::*;

const LAG: i64 = 10_000;

fn three(isr: &[AgentId]) -> Assignment {
    Assignment {
        leader_epoch: 5,
        partition_epoch: 9,
        replicas: vec![1, 2, 3],
        isr: isr.to_vec(),
    }
}

fn leader(isr: &[AgentId], log_end: i64, min_insync: usize) -> ReplicaSet {
    ReplicaSet::new(1, three(isr), log_end, min_insync, LAG, 0)
}

#[test]
fn the_high_watermark_waits_for_every_in_sync_follower_to_fetch_past_it() {
    let mut r = leader(&[1, 2, 3], 100, 2);
    assert_eq!(
        r.high_watermark(150),
        i64::MIN,
        "nobody fetched from this leader yet: no new offset is committed"
    );
    r.on_fetch(2, 150, 150, 10).unwrap();
    assert_eq!(r.high_watermark(150), i64::MIN, "follower 3 still silent");
    r.on_fetch(3, 120, 150, 10).unwrap();
    assert_eq!(r.high_watermark(150), 120);
    r.on_fetch(3, 150, 150, 20).unwrap();
    assert_eq!(r.high_watermark(150), 150);
    assert_eq!(
        r.high_watermark(140),
        140,
        "never past what the leader itself exposes (write.caching=false)"
    );
}

#[test]
fn a_replica_outside_the_assignment_cannot_fetch() {
    let mut r = leader(&[1, 2, 3], 0, 1);
    assert_eq!(r.on_fetch(7, 0, 0, 1), Err(FetchRefused::NotAReplica(7)));
}

#[test]
fn a_follower_that_stops_catching_up_leaves_the_isr_after_the_lag_time() {
    let mut r = leader(&[1, 2, 3], 0, 2);
    r.on_fetch(2, 0, 100, 1_000).unwrap();
    r.on_fetch(3, 100, 100, 1_000).unwrap();
    // 2 keeps fetching but never reaches the end the leader had at its
    // previous fetch; it was last caught up when leadership began (0 ms)
    for t in (2_000..=LAG).step_by(1_000) {
        r.on_fetch(2, 10, 100 + t, t).unwrap();
        r.on_fetch(3, 100 + t, 100 + t, t).unwrap();
        assert_eq!(
            r.propose_isr_change(0, t),
            None,
            "at {t} ms it is within the lag time"
        );
    }
    r.on_fetch(2, 10, 100 + LAG + 1, LAG + 1).unwrap();
    r.on_fetch(3, 100 + LAG + 1, 100 + LAG + 1, LAG + 1)
        .unwrap();
    let change = r.propose_isr_change(0, LAG + 1).expect("a shrink");
    assert_eq!(change.isr, vec![1, 3]);
    assert_eq!((change.leader_epoch, change.partition_epoch), (5, 9));
    assert_eq!(
        r.propose_isr_change(0, LAG + 3_000),
        None,
        "one change in flight"
    );
    assert!(r.follower(3).is_some_and(|f| f.caught_up_ms == LAG + 1));
}

#[test]
fn a_follower_reading_everything_there_was_counts_as_caught_up() {
    let mut r = leader(&[1, 2], 0, 1);
    // Each fetch asks for the end the leader had at the previous one, while
    // producers keep the leader a little ahead: that is caught up.
    let mut end = 0;
    for t in (1..=30).map(|i| i * 1_000) {
        r.on_fetch(2, end, end + 50, t).unwrap();
        end += 50;
    }
    // caught up as of the previous fetch, one second before the last one
    assert_eq!(r.follower(2).map(|f| f.caught_up_ms), Some(29_000));
    assert_eq!(r.propose_isr_change(end, 29_000 + LAG), None);
}

#[test]
fn a_silent_follower_is_dropped_once_the_lag_time_passes() {
    let mut r = leader(&[1, 2, 3], 0, 1);
    r.on_fetch(2, 0, 0, 5).unwrap();
    assert_eq!(r.propose_isr_change(0, LAG), None);
    r.on_fetch(2, 0, 0, LAG + 6).unwrap();
    let change = r.propose_isr_change(0, LAG + 6).expect("3 never fetched");
    assert_eq!(change.isr, vec![1, 2]);
}

#[test]
fn a_follower_rejoins_once_it_holds_the_high_watermark_and_this_epochs_start() {
    let mut r = leader(&[1, 2], 500, 1);
    r.on_fetch(2, 600, 600, 1).unwrap();
    r.on_fetch(3, 400, 600, 1).unwrap();
    assert_eq!(
        r.propose_isr_change(600, 2),
        None,
        "3 is behind the epoch start"
    );
    r.on_fetch(3, 550, 600, 3).unwrap();
    assert_eq!(
        r.propose_isr_change(600, 4),
        None,
        "3 is behind the high watermark"
    );
    r.on_fetch(3, 600, 600, 5).unwrap();
    let change = r.propose_isr_change(600, 6).expect("an expansion");
    assert_eq!(change.isr, vec![1, 2, 3]);
}

#[test]
fn a_follower_that_stopped_fetching_does_not_rejoin_on_its_last_log_end() {
    let mut r = leader(&[1, 2, 3], 100, 2);
    r.on_fetch(2, 100, 100, 1).unwrap();
    r.on_fetch(3, 100, 100, 1).unwrap();
    // 3 stops; 2 keeps fetching; nothing new is written
    r.on_fetch(2, 100, 100, LAG + 2).unwrap();
    let shrink = r.propose_isr_change(100, LAG + 2).expect("3 lags");
    assert_eq!(shrink.isr, vec![1, 2]);
    r.on_assignment(Assignment {
        isr: vec![1, 2],
        partition_epoch: 10,
        ..three(&[1, 2, 3])
    });
    for t in [LAG + 3, LAG + 500, 3 * LAG] {
        r.on_fetch(2, 100, 100, t).unwrap();
        assert_eq!(
            r.propose_isr_change(100, t),
            None,
            "at {t} ms 3 still reports the high watermark but has not fetched since 1 ms"
        );
    }
    r.on_fetch(3, 100, 100, 3 * LAG + 1).unwrap();
    let change = r
        .propose_isr_change(100, 3 * LAG + 1)
        .expect("3 fetches again");
    assert_eq!(change.isr, vec![1, 2, 3]);
}

#[test]
fn a_joining_member_counts_for_the_high_watermark_before_its_change_commits() {
    let mut r = leader(&[1, 2], 0, 1);
    r.on_fetch(2, 100, 100, 1).unwrap();
    r.on_fetch(3, 100, 100, 1).unwrap();
    r.propose_isr_change(100, 2).expect("3 joins");
    r.on_fetch(2, 200, 200, 3).unwrap();
    assert_eq!(
        r.high_watermark(200),
        100,
        "3 may already be counted as in sync by a new leader: wait for it"
    );
    assert!(r.on_assignment(Assignment {
        partition_epoch: 10,
        ..three(&[1, 2, 3])
    }));
    assert_eq!(r.high_watermark(200), 100);
    r.on_fetch(3, 200, 200, 4).unwrap();
    assert_eq!(r.high_watermark(200), 200);
}

#[test]
fn a_refused_proposal_may_be_proposed_again() {
    let mut r = leader(&[1, 2, 3], 0, 1);
    r.on_fetch(2, 0, 0, LAG * 2).unwrap();
    let change = r.propose_isr_change(0, LAG * 2).expect("a shrink");
    assert!(r.propose_isr_change(0, LAG * 2).is_none());
    r.isr_change_failed(&change);
    assert_eq!(
        r.propose_isr_change(0, LAG * 2).map(|c| c.isr),
        Some(vec![1, 2])
    );
}

#[test]
fn a_follower_the_metastore_refused_to_add_waits_for_its_next_fetch() {
    // 3 was caught up when it shut down (the metastore fenced it and took
    // it out of the ISR); its last log end is the high watermark
    let mut r = leader(&[1, 2], 100, 1);
    r.on_fetch(2, 100, 100, 1).unwrap();
    r.on_fetch(3, 100, 100, 1).unwrap();
    let add = r.propose_isr_change(100, 2).expect("3 looks caught up");
    assert_eq!(add.isr, vec![1, 2, 3]);
    r.isr_change_failed(&add);
    for t in [3, 100, LAG / 2] {
        r.on_fetch(2, 100, 100, t).unwrap();
        assert_eq!(
            r.propose_isr_change(100, t),
            None,
            "at {t} ms 3 is not proposed again: it has not fetched since"
        );
    }
    r.on_fetch(2, 200, 200, LAG / 2 + 1).unwrap();
    assert_eq!(
        r.high_watermark(200),
        200,
        "nor counted for the high watermark"
    );
    r.on_fetch(3, 200, 200, LAG / 2 + 2).unwrap();
    assert_eq!(
        r.propose_isr_change(200, LAG / 2 + 2).map(|c| c.isr),
        Some(vec![1, 2, 3]),
        "once it fetches again it may join"
    );
}

#[test]
fn a_fenced_follower_is_never_proposed_even_while_it_still_fetches() {
    // 3 shut down: the metastore fenced it and took it out of the ISR, and
    // it fetches on, caught up, until it closes
    let mut r = leader(&[1, 2], 100, 1);
    r.set_ineligible(vec![3]);
    for t in 1..5 {
        r.on_fetch(2, 100, 100, t).unwrap();
        r.on_fetch(3, 100, 100, t).unwrap();
        assert_eq!(r.propose_isr_change(100, t), None, "at {t} ms");
    }
    r.set_ineligible(Vec::new());
    r.on_fetch(3, 100, 100, 6).unwrap();
    assert_eq!(
        r.propose_isr_change(100, 6).map(|c| c.isr),
        Some(vec![1, 2, 3]),
        "back (unfenced), it joins"
    );
}

#[test]
fn a_new_leader_epoch_ends_this_leadership() {
    let mut r = leader(&[1, 2, 3], 0, 1);
    assert!(!r.on_assignment(Assignment {
        leader_epoch: 6,
        ..three(&[2, 3])
    }));
}

#[test]
fn acks_all_needs_min_insync_replicas_before_and_after_the_append() {
    let mut r = leader(&[1, 2, 3], 0, 2);
    assert_eq!(r.check_acks_all(), Ok(()));
    assert!(r.on_assignment(Assignment {
        partition_epoch: 10,
        ..three(&[1])
    }));
    assert_eq!(
        r.check_acks_all(),
        Err(NotEnoughReplicas::Before {
            in_sync: 1,
            required: 2
        })
    );
    assert_eq!(
        r.check_acks_all_after_append(),
        Err(NotEnoughReplicas::AfterAppend {
            in_sync: 1,
            required: 2
        })
    );
    r.set_min_insync(1);
    assert_eq!(r.check_acks_all(), Ok(()));
}

#[test]
fn a_single_replica_partition_commits_what_the_leader_exposes() {
    let r = ReplicaSet::new(
        1,
        Assignment {
            leader_epoch: 0,
            partition_epoch: 0,
            replicas: vec![1],
            isr: vec![1],
        },
        0,
        1,
        LAG,
        0,
    );
    assert_eq!(r.high_watermark(42), 42);
}

/// A proposal whose answer was lost (the metastore timed out while it
/// changed leaders) may still be applied: until the metadata says how it
/// ended, the member it adds keeps holding the high watermark back, and
/// the same change is proposed again at the same partition epoch.
#[test]
fn an_isr_change_with_an_unknown_outcome_stays_counted_until_the_metadata_settles_it() {
    let mut r = leader(&[1, 2], 0, 1);
    r.on_fetch(2, 100, 100, 1).unwrap();
    r.on_fetch(3, 100, 100, 1).unwrap();
    let change = r.propose_isr_change(100, 2).expect("3 joins");
    r.on_fetch(2, 200, 200, 3).unwrap();
    r.isr_change_unknown(&change, 10);
    assert_eq!(
        r.high_watermark(200),
        100,
        "3 may be in the ISR already, as far as anyone knows"
    );
    assert_eq!(r.propose_isr_change(100, 10 + ISR_RETRY_MS - 1), None);
    let again = r
        .propose_isr_change(100, 10 + ISR_RETRY_MS)
        .expect("proposed again");
    assert_eq!(
        again, change,
        "the same change, at the same partition epoch"
    );
    assert_eq!(r.propose_isr_change(100, 10 + 2 * ISR_RETRY_MS), None);
    r.isr_change_unknown(&again, 20);
    // metadata still at the epoch it was proposed at: nothing is settled
    assert!(r.on_assignment(three(&[1, 2])));
    assert_eq!(r.high_watermark(200), 100);
    // a later partition epoch without 3: the change can no longer apply
    assert!(r.on_assignment(Assignment {
        partition_epoch: 10,
        ..three(&[1, 2])
    }));
    assert_eq!(r.high_watermark(200), 200, "3 no longer counts");
}

#[test]
fn an_answer_to_an_earlier_proposal_does_not_settle_the_current_one() {
    let mut r = leader(&[1, 2, 3], 0, 1);
    r.on_fetch(2, 0, 0, LAG * 2).unwrap();
    let first = r.propose_isr_change(0, LAG * 2).expect("3 leaves");
    assert_eq!(first.isr, vec![1, 2]);
    // the metadata moved on (the lease engine dropped 2): the first
    // proposal is settled and a new one goes out at the new epoch
    assert!(r.on_assignment(Assignment {
        partition_epoch: 10,
        ..three(&[1, 3])
    }));
    r.on_fetch(2, 0, 0, LAG * 2 + 1).unwrap();
    let second = r.propose_isr_change(0, LAG * 2 + 1).expect("3 leaves");
    assert_eq!((second.partition_epoch, second.isr.clone()), (10, vec![1]));
    r.isr_change_failed(&first);
    r.isr_change_unknown(&first, LAG * 3);
    assert_eq!(
        r.propose_isr_change(0, LAG * 4),
        None,
        "the second is still in flight"
    );
    r.isr_change_failed(&second);
    assert!(r.propose_isr_change(0, LAG * 4).is_some());
}
