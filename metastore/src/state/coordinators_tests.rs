use super::super::testkit::*;
use super::*;
use crate::command::Command;
use crate::coordinators::slot_of;
use crate::types::OffsetCommit;

fn commit(group: &str, offset: i64, coordinator: Option<SlotFence>) -> Command {
    Command::CommitOffsets {
        group: group.into(),
        offsets: vec![OffsetCommit {
            topic: "t".into(),
            partition: 0,
            offset,
            leader_epoch: -1,
            metadata: None,
            commit_time_ms: 0,
        }],
        coordinator,
    }
}

fn committed(s: &MetaState, group: &str) -> Option<i64> {
    Some(s.group(group)?.get("t")?.get(&0)?.offset)
}

/// Two agents, agent 1 holding every slot, and topic `t`.
fn two_agents() -> MetaState {
    let mut s = with_agents(2);
    create(&mut s, "t", 1, 1);
    s
}

#[test]
fn a_commit_fenced_at_the_slots_epoch_before_it_moved_is_refused() {
    let mut s = two_agents();
    let place = s.coordinator_slots().place("g").expect("slots are filled");
    assert_eq!(place.holder, SlotHolder { agent: 1, epoch: 1 });
    let old = place.fence();
    apply(&mut s, commit("g", 10, Some(old))).expect("the holder commits");
    assert_eq!(committed(&s, "g"), Some(10));

    let (moved, events) = apply_at(
        &mut s,
        T0,
        Command::MoveCoordinatorSlot {
            slot: old.slot,
            expected_epoch: 1,
            holder: 2,
        },
    );
    moved.expect("the slot moves");
    assert_eq!(
        events,
        vec![MetaEvent::CoordinatorSlotMoved {
            slot: old.slot,
            holder: 2,
            epoch: 2
        }]
    );
    // the previous holder, not aware yet, commits an older position
    assert!(matches!(
        apply(&mut s, commit("g", 3, Some(old))),
        Err(MetaError::NotCoordinator { .. })
    ));
    assert!(matches!(
        apply(
            &mut s,
            Command::DeleteGroup {
                group: "g".into(),
                coordinator: Some(old)
            }
        ),
        Err(MetaError::NotCoordinator { .. })
    ));
    assert_eq!(committed(&s, "g"), Some(10), "nothing moved backwards");
    let new = SlotFence { epoch: 2, ..old };
    apply(&mut s, commit("g", 12, Some(new))).expect("the new holder commits");
    assert_eq!(committed(&s, "g"), Some(12));
}

#[test]
fn a_fence_of_another_slot_is_refused_and_an_unfenced_write_is_not() {
    let mut s = two_agents();
    let slot = slot_of("g", s.coordinator_slots().count());
    let other = SlotFence {
        slot: (slot + 1) % s.coordinator_slots().count(),
        epoch: 1,
    };
    assert!(matches!(
        apply(&mut s, commit("g", 1, Some(other))),
        Err(MetaError::NotCoordinator { .. })
    ));
    apply(&mut s, commit("g", 2, None)).expect("an unfenced write applies");
    assert_eq!(committed(&s, "g"), Some(2));
}

#[test]
fn a_fenced_write_before_any_agent_registered_is_refused() {
    let mut s = MetaState::default();
    let fence = SlotFence { slot: 0, epoch: 1 };
    assert!(matches!(
        apply(&mut s, commit("g", 1, Some(fence))),
        Err(MetaError::NotCoordinator { .. })
    ));
}

#[test]
fn the_slot_table_survives_a_snapshot() {
    let s = two_agents();
    let bytes = serde_json::to_vec(&s).expect("encodes");
    let back: MetaState = serde_json::from_slice(&bytes).expect("decodes");
    assert_eq!(back.coordinator_slots(), s.coordinator_slots());
}
