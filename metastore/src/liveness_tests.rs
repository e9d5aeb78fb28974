use super::*;

const LEASE: Duration = Duration::from_millis(800);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A leader that took over at `t0` and heard agent 1 at `t0 + 100 ms`.
fn leading(t0: Instant) -> Liveness {
    let mut l = Liveness::default();
    l.took_over(t0);
    l.heard(1, t0 + ms(100));
    l
}

#[test]
fn silence_is_the_time_since_this_node_last_heard_the_agent() {
    let t0 = Instant::now();
    let l = leading(t0);
    assert_eq!(l.silent_for(1, t0 + ms(900), LEASE), ms(800));
    assert_eq!(l.silent_for(1, t0 + ms(901), LEASE), ms(801));
    assert!(
        l.silent_for(1, t0 + ms(901), LEASE) > LEASE,
        "its lease ran out"
    );
}

#[test]
fn a_new_leader_gives_every_agent_half_a_lease_from_its_takeover() {
    let t0 = Instant::now();
    let mut l = Liveness::default();
    l.took_over(t0);
    // agent 2 was never heard by this node: it counts as heard half a lease
    // before the takeover, so it is fenced half a lease after it
    assert_eq!(l.silent_for(2, t0 + LEASE / 2, LEASE), LEASE);
    assert!(l.silent_for(2, t0 + LEASE / 2 + ms(1), LEASE) > LEASE);
    // one heard since has its full lease from then
    l.heard(3, t0 + ms(300));
    assert_eq!(l.silent_for(3, t0 + ms(300) + LEASE, LEASE), LEASE);
}

#[test]
fn only_a_leader_judges_and_a_successor_starts_over() {
    let t0 = Instant::now();
    let mut l = leading(t0);
    l.stepped_down();
    assert_eq!(
        l.silent_for(1, t0 + 10 * LEASE, LEASE),
        Duration::ZERO,
        "a follower judges nobody"
    );
    let again = t0 + 20 * LEASE;
    l.took_over(again);
    assert_eq!(
        l.silent_for(1, again, LEASE),
        LEASE / 2,
        "what it heard in an earlier term is forgotten"
    );
}

/// The leader's own process was starved (or stopped) for a second: the
/// heartbeats that queued meanwhile are not read yet, so every agent looks
/// silent. It judges again from when it resumed.
#[test]
fn a_leader_that_stalled_judges_again_from_when_it_resumed() {
    let t0 = Instant::now();
    let mut l = leading(t0);
    l.rest(t0 + ms(150));
    assert!(!l.wake(t0 + ms(200), LEASE), "on time");
    l.rest(t0 + ms(210));
    let resumed = t0 + ms(1_400);
    assert!(
        l.wake(resumed, LEASE),
        "a stall of more than a quarter lease"
    );
    assert_eq!(l.silent_for(1, resumed, LEASE), LEASE / 2);
    assert_eq!(l.silent_for(1, resumed + LEASE / 2, LEASE), LEASE);
}

#[test]
fn a_heartbeat_racing_a_fence_must_be_logged_until_the_fence_settles() {
    let t0 = Instant::now();
    let mut l = leading(t0);
    assert!(!l.heard(1, t0 + ms(200)), "no fence under way");
    l.fencing(1);
    assert!(
        l.heard(1, t0 + ms(300)),
        "logged: it may land before the fence"
    );
    assert!(!l.heard(2, t0 + ms(300)), "only the agent being fenced");
    l.fence_settled(1);
    assert!(!l.heard(1, t0 + ms(400)));
}

#[test]
fn heard_never_moves_back() {
    let t0 = Instant::now();
    let mut l = leading(t0);
    l.heard(1, t0 + ms(500));
    l.heard(1, t0 + ms(200));
    assert_eq!(l.silent_for(1, t0 + ms(600), LEASE), ms(100));
}
