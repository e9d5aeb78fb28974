use super::super::engine::tests::{
    committable, described, engine, join_reply, join_req, stable_pair, sync_reply, sync_req, DELAY,
    EPOCH, SLOTS,
};
use super::super::engine::{GroupState, HeldSlots, SlotFence};
use super::*;

/// Every slot at [`EPOCH`] but the one of `group`, which is at `epoch` or,
/// with `None`, held elsewhere.
fn all_but(group: &str, epoch: Option<i32>) -> HeldSlots {
    let slot = HeldSlots::all(SLOTS, EPOCH).slot_of(group);
    HeldSlots::new(
        SLOTS,
        (0..SLOTS).filter_map(|s| match s == slot {
            true => epoch.map(|e| (s, e)),
            false => Some((s, EPOCH)),
        }),
    )
}

/// A group id in another slot than `g`'s.
fn other_group() -> String {
    let held = HeldSlots::all(SLOTS, EPOCH);
    (0..100)
        .map(|i| format!("other-{i}"))
        .find(|k| held.slot_of(k) != held.slot_of("g"))
        .expect("a group in another slot")
}

#[test]
fn a_group_whose_slot_is_held_elsewhere_is_answered_not_coordinator() {
    let mut e = GroupEngine::new(Default::default(), "t");
    assert!(e.hold(all_but("g", None)).is_empty());
    let out = e.join(0, join_req("", None), 1);
    assert_eq!(join_reply(&out, 1).error, Some(GroupError::NotCoordinator));
    let out = e.sync(0, sync_req("m", 1, vec![]), 2);
    assert_eq!(sync_reply(&out, 2).error, Some(GroupError::NotCoordinator));
    let nc = Err(GroupError::NotCoordinator);
    assert_eq!(e.heartbeat(0, "g", "m", None, 1), nc);
    assert_eq!(e.leave(0, "g", "m", None).0, nc);
    assert_eq!(committable(&mut e, "g", "", None, -1), nc);
    assert_eq!(committable(&mut e, "g", "m", None, 1), nc);
    assert_eq!(e.describe("g").map(|_| ()), nc);
    assert_eq!(e.delete("g").map(|_| ()), nc);
    assert_eq!(e.group_count(), 0, "nothing was created for it");
    assert_eq!(
        committable(&mut e, &other_group(), "", None, -1),
        Ok(()),
        "a group of a held slot is served"
    );
}

#[test]
fn a_commit_carries_the_fence_of_the_slot_as_held() {
    let mut e = engine();
    let (leader, _, generation) = stable_pair(&mut e);
    let slot = e.held().slot_of("g");
    assert_eq!(
        e.validate_commit("g", &leader, None, generation),
        Ok(SlotFence { slot, epoch: EPOCH })
    );
}

#[test]
fn losing_a_slot_drops_its_groups_and_answers_their_parked_members_not_coordinator() {
    let mut e = engine();
    let (leader, follower, generation) = stable_pair(&mut e);
    let mut elsewhere = join_req("", None);
    elsewhere.group_id = other_group();
    e.join(DELAY, elsewhere, 10);
    // the leader rejoins: its join waits for the follower's
    assert!(e.join(DELAY, join_req(&leader, None), 11).is_empty());

    let out = e.hold(all_but("g", None));
    assert_eq!(join_reply(&out, 11).error, Some(GroupError::NotCoordinator));
    assert_eq!(out.len(), 1, "{out:?}");
    assert_eq!(
        e.heartbeat(DELAY, "g", &follower, None, generation),
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(
        committable(&mut e, "g", &follower, None, generation),
        Err(GroupError::NotCoordinator)
    );
    assert_eq!(e.group_count(), 1, "the other slot's group stays");
}

#[test]
fn a_slot_back_at_a_newer_epoch_starts_its_groups_fresh() {
    let mut e = engine();
    let (leader, follower, generation) = stable_pair(&mut e);
    assert!(e.hold(all_but("g", Some(EPOCH + 2))).is_empty());
    assert_eq!(described(&e, "g").map(|d| d.state), None);
    // members of the generation the slot's other holder served meanwhile
    // are strangers here
    assert_eq!(
        e.heartbeat(DELAY, "g", &follower, None, generation),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        committable(&mut e, "g", &leader, None, generation),
        Err(GroupError::IllegalGeneration)
    );
    let fence = e.validate_commit("g", "", None, -1);
    assert_eq!(fence.map(|f| f.epoch), Ok(EPOCH + 2));
    // and the group forms again
    assert!(e.join(DELAY, join_req("", None), 20).is_empty());
    let out = e.tick(2 * DELAY);
    assert_eq!(join_reply(&out, 20).generation_id, 1);
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::CompletingRebalance)
    );
}

#[test]
fn the_same_slots_again_change_nothing() {
    let mut e = engine();
    stable_pair(&mut e);
    assert!(e.hold(HeldSlots::all(SLOTS, EPOCH)).is_empty());
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::Stable)
    );
}
