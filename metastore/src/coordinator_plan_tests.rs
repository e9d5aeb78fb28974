use std::collections::BTreeMap;

use super::*;
use crate::coordinators::COORDINATOR_SLOTS;
use crate::error::MetaError;
use crate::state::testkit::{apply_at, register, with_agents, T0};

const LEASE: u64 = 1_000;
const HOLD: i64 = REJOIN_HOLD_MIN_MS;

/// Plans and applies, as the lease driver does, until the planner is
/// quiet; returns the moves applied.
fn settle(s: &mut MetaState, now: i64) -> Vec<Command> {
    let mut applied = Vec::new();
    for _ in 0..3 {
        let cmds = plan(s, now, LEASE);
        if cmds.is_empty() {
            return applied;
        }
        for c in cmds {
            let (r, _) = apply_at(s, now, c.clone());
            r.expect("the planner proposes only valid moves");
            applied.push(c);
        }
    }
    panic!("the coordinator planner did not settle");
}

fn holders(s: &MetaState) -> Vec<SlotHolder> {
    s.coordinator_slots().iter().map(|(_, h)| h).collect()
}

fn counts(s: &MetaState) -> BTreeMap<AgentId, usize> {
    let mut c = BTreeMap::new();
    for h in holders(s) {
        *c.entry(h.agent).or_default() += 1;
    }
    c
}

fn fence(s: &mut MetaState, id: AgentId, now: i64) {
    let generation = s.agent(id).expect("registered").lease_generation;
    let cmd = Command::FenceAgent {
        agent_id: id,
        observed_generation: Some(generation),
        observed_heartbeat_ms: None,
    };
    apply_at(s, now, cmd).0.expect("fenced");
}

fn heartbeat(s: &mut MetaState, id: AgentId, now: i64) {
    apply_at(s, now, Command::Heartbeat { agent_id: id })
        .0
        .expect("heartbeat");
}

/// Three agents that have shared the slots out.
fn three_balanced() -> MetaState {
    let mut s = with_agents(3);
    settle(&mut s, T0);
    s
}

#[test]
fn the_first_agent_holds_every_slot_and_agents_that_join_take_their_share_at_once() {
    let mut s = with_agents(1);
    assert_eq!(s.coordinator_slots().count(), COORDINATOR_SLOTS);
    assert!(holders(&s)
        .iter()
        .all(|h| *h == SlotHolder { agent: 1, epoch: 1 }));
    assert!(plan(&s, T0, LEASE).is_empty(), "alone, nothing moves");
    register(&mut s, 2);
    register(&mut s, 3);
    let moves = settle(&mut s, T0);
    assert_eq!(moves.len(), 42, "{moves:?}");
    assert_eq!(counts(&s), BTreeMap::from([(1, 22), (2, 21), (3, 21)]));
    for h in holders(&s) {
        let epoch = if h.agent == 1 { 1 } else { 2 };
        assert_eq!(h.epoch, epoch, "{h:?}: a slot moved once, or not at all");
    }
}

#[test]
fn a_new_agent_registering_twice_as_it_starts_takes_its_share_at_once() {
    let mut s = with_agents(1);
    register(&mut s, 2);
    register(&mut s, 2);
    settle(&mut s, T0);
    assert_eq!(counts(&s), BTreeMap::from([(1, 32), (2, 32)]));
}

#[test]
fn a_slot_keeps_its_holder_and_epoch_when_an_agent_that_does_not_hold_it_leaves() {
    let mut s = three_balanced();
    let before = holders(&s);
    let now = T0 + 10 * LEASE as i64;
    fence(&mut s, 3, now);
    let moves = settle(&mut s, now);
    assert_eq!(moves.len(), 21);
    let after = holders(&s);
    for (slot, (b, a)) in before.iter().zip(&after).enumerate() {
        if b.agent == 3 {
            assert_ne!(a.agent, 3, "slot {slot} left the fenced agent");
            assert_eq!(a.epoch, b.epoch + 1, "slot {slot} moved with a new epoch");
        } else {
            assert_eq!(a, b, "slot {slot} of a live agent stayed put");
        }
    }
    assert_eq!(counts(&s), BTreeMap::from([(1, 32), (2, 32)]));
}

#[test]
fn an_agent_that_joins_a_balanced_cluster_takes_only_its_share() {
    let mut s = three_balanced();
    let before = holders(&s);
    register(&mut s, 4);
    let moves = settle(&mut s, T0);
    assert_eq!(moves.len(), 16);
    for (b, a) in before.iter().zip(holders(&s)) {
        assert!(a == *b || a.agent == 4, "{b:?} -> {a:?}");
    }
    assert_eq!(counts(&s).get(&4), Some(&16));
}

#[test]
fn an_agent_back_from_a_failure_waits_before_it_takes_slots_again() {
    let mut s = three_balanced();
    let failed = T0 + 10 * LEASE as i64;
    fence(&mut s, 3, failed);
    settle(&mut s, failed);
    let back = failed + 2 * LEASE as i64;
    heartbeat(&mut s, 3, back);
    assert!(plan(&s, back, LEASE).is_empty());
    assert!(plan(&s, failed + HOLD - 1, LEASE).is_empty());
    let moves = settle(&mut s, failed + HOLD);
    assert_eq!(moves.len(), 21);
    assert_eq!(counts(&s).get(&3), Some(&21));
}

#[test]
fn a_restarted_agent_waits_too_but_a_failover_may_use_it() {
    let mut s = three_balanced();
    let failed = T0 + 10 * LEASE as i64;
    fence(&mut s, 3, failed);
    settle(&mut s, failed);
    // agent 3 restarts (a second registration) long after
    let restarted = failed + 5 * HOLD;
    let (r, _) = apply_at(
        &mut s,
        restarted,
        Command::RegisterAgent {
            registration: crate::types::AgentRegistration {
                id: 3,
                ..Default::default()
            },
        },
    );
    r.expect("registered again");
    assert!(plan(&s, restarted + 1, LEASE).is_empty());
    // agent 2 fails meanwhile: its slots go to 1, the agent that may take them
    fence(&mut s, 2, restarted + 1);
    settle(&mut s, restarted + 1);
    assert_eq!(counts(&s), BTreeMap::from([(1, 64)]));
    // then agent 1 fails too: agent 3 is the only one left and takes all
    fence(&mut s, 1, restarted + 2);
    settle(&mut s, restarted + 2);
    assert_eq!(counts(&s), BTreeMap::from([(3, 64)]));
}

#[test]
fn a_draining_agent_hands_its_slots_to_the_others() {
    let mut s = three_balanced();
    let (r, _) = apply_at(
        &mut s,
        T0,
        Command::SetAgentDraining {
            agent_id: 2,
            draining: true,
        },
    );
    r.expect("draining");
    settle(&mut s, T0);
    assert_eq!(counts(&s), BTreeMap::from([(1, 32), (3, 32)]));
}

#[test]
fn slots_stay_with_their_holder_while_no_agent_is_live() {
    let mut s = with_agents(1);
    fence(&mut s, 1, T0 + 5 * LEASE as i64);
    assert!(plan(&s, T0 + 5 * LEASE as i64, LEASE).is_empty());
}

#[test]
fn a_move_planned_on_a_view_that_changed_is_refused() {
    let mut s = with_agents(2);
    let stale = Command::MoveCoordinatorSlot {
        slot: 0,
        expected_epoch: 7,
        holder: 2,
    };
    assert!(matches!(
        apply_at(&mut s, T0, stale).0,
        Err(MetaError::StaleRequest { .. })
    ));
    fence(&mut s, 2, T0);
    let to_fenced = Command::MoveCoordinatorSlot {
        slot: 0,
        expected_epoch: 1,
        holder: 2,
    };
    assert!(matches!(
        apply_at(&mut s, T0, to_fenced).0,
        Err(MetaError::StaleRequest { .. })
    ));
    assert_eq!(
        s.coordinator_slots().holder(0),
        Some(SlotHolder { agent: 1, epoch: 1 })
    );
}

#[test]
fn an_agent_back_from_a_failure_waits_ten_leases_but_never_less_than_thirty_seconds() {
    // sub-second leases: ten of them would let a flapping agent drag its
    // groups through a rebalance every few seconds
    assert_eq!(rejoin_hold_ms(800), 30_000);
    assert_eq!(rejoin_hold_ms(3_000), 30_000);
    assert_eq!(rejoin_hold_ms(10_000), 100_000);
    assert_eq!(rejoin_hold_ms(u64::MAX), i64::MAX);
}
