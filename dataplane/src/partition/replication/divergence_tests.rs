use super::*;
use crate::partition::replication::fetcher::truncation_point;

fn leader(epoch_end: Option<(i32, i64)>, latest_epoch: Option<i32>, log_end: i64) -> LeaderLog {
    LeaderLog {
        epoch_end,
        latest_epoch,
        log_end,
        local_start: 0,
    }
}

#[test]
fn a_follower_in_step_with_the_leader_fetches_on() {
    // leader: epoch 3 from 100 to its end at 500; follower at 480 in epoch 3
    assert_eq!(
        diverging(leader(Some((3, 500)), Some(3), 500), 3, 480),
        None
    );
    assert_eq!(
        diverging(leader(None, None, 0), -1, 0),
        None,
        "an empty follower"
    );
}

#[test]
fn a_follower_past_the_end_of_an_epoch_cuts_there() {
    // the follower has epoch 2 up to 260, the leader's epoch 2 ends at 250
    assert_eq!(
        diverging(leader(Some((2, 250)), Some(3), 500), 2, 260),
        Some(Diverging {
            epoch: 2,
            end_offset: 250
        })
    );
}

#[test]
fn a_follower_ahead_in_an_epoch_the_new_leader_never_saw_keeps_what_they_share() {
    // The old leader began epoch 4 at 500 and one follower fetched that
    // batch; the new leader (in sync, but without it) ends at 500 in
    // epoch 3 and has written nothing yet in its own epoch 5.
    let new_leader = leader(None, Some(3), 500);
    let d = diverging(new_leader, 4, 520).expect("the follower parts from the leader");
    assert_eq!(
        d,
        Diverging {
            epoch: 3,
            end_offset: 500
        }
    );
    // the follower holds epoch 3 up to 500, then epoch 4 up to 520: it
    // cuts the epoch 4 batch and keeps the committed records below 500
    assert_eq!(truncation_point(d, Some((3, 500)), 0), 500);
}

#[test]
fn a_follower_of_a_leader_with_no_batch_keeps_nothing_above_its_start() {
    let empty = LeaderLog {
        epoch_end: None,
        latest_epoch: None,
        log_end: 300,
        local_start: 300,
    };
    assert_eq!(
        diverging(empty, 2, 350),
        Some(Diverging {
            epoch: 0,
            end_offset: 300
        })
    );
}
