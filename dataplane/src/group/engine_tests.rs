use std::collections::HashMap;

use super::*;

pub(crate) const DELAY: i64 = 3_000;

/// The epoch of every slot the test engines hold.
pub(crate) const EPOCH: i32 = 1;

/// An engine whose agent holds every coordinator slot.
pub(crate) fn engine() -> GroupEngine {
    let mut e = GroupEngine::new(GroupLimits::default(), "t");
    assert!(e.hold(HeldSlots::all(SLOTS, EPOCH)).is_empty());
    e
}

pub(crate) const SLOTS: u32 = 8;

pub(crate) fn described(e: &GroupEngine, group: &str) -> Option<GroupDescription> {
    e.describe(group).expect("the group's slot is held")
}

/// A commit's verdict, without the fence.
pub(crate) fn committable(
    e: &mut GroupEngine,
    group: &str,
    member: &str,
    instance: Option<&str>,
    generation: i32,
) -> Result<(), GroupError> {
    e.validate_commit(group, member, instance, generation)
        .map(|_| ())
}

pub(crate) fn join_req(member: &str, instance: Option<&str>) -> JoinRequest {
    JoinRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: instance.map(str::to_string),
        client_id: "c".into(),
        client_host: "/127.0.0.1".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 20_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Bytes::from_static(b"meta"))],
        require_known_member_id: false,
        supports_skip_assignment: false,
    }
}

pub(crate) fn sync_req(
    member: &str,
    generation: i32,
    assignments: Vec<(String, Bytes)>,
) -> SyncRequest {
    SyncRequest {
        group_id: "g".into(),
        member_id: member.into(),
        group_instance_id: None,
        generation_id: generation,
        protocol_type: Some("consumer".into()),
        protocol_name: Some("range".into()),
        assignments,
    }
}

pub(crate) fn join_reply(replies: &[Reply], id: ReplyId) -> JoinResponse {
    replies
        .iter()
        .find_map(|r| match r {
            Reply::Join(rid, resp) if *rid == id => Some(resp.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no join reply for {id} in {replies:?}"))
}

pub(crate) fn sync_reply(replies: &[Reply], id: ReplyId) -> SyncResponse {
    replies
        .iter()
        .find_map(|r| match r {
            Reply::Sync(rid, resp) if *rid == id => Some(resp.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("no sync reply for {id} in {replies:?}"))
}

/// Brings two members to a stable generation; returns (leader, follower, generation).
/// The members join a full delay early: the second one's arrival extends
/// the initial delay once, so generation 1 forms at `DELAY`.
pub(crate) fn stable_pair(e: &mut GroupEngine) -> (String, String, i32) {
    assert!(e.join(-DELAY, join_req("", None), 1).is_empty());
    assert!(e.join(10 - DELAY, join_req("", None), 2).is_empty());
    assert!(
        e.tick(0).is_empty(),
        "a second member extends the initial delay"
    );
    let out = e.tick(DELAY);
    let a = join_reply(&out, 1);
    let b = join_reply(&out, 2);
    assert_eq!(a.generation_id, 1);
    let (leader, follower) = if a.leader == a.member_id {
        (a.member_id.clone(), b.member_id.clone())
    } else {
        (b.member_id.clone(), a.member_id.clone())
    };
    assert!(e.sync(DELAY, sync_req(&follower, 1, vec![]), 3).is_empty());
    let out = e.sync(
        DELAY,
        sync_req(
            &leader,
            1,
            vec![
                (leader.clone(), Bytes::from_static(b"A")),
                (follower.clone(), Bytes::from_static(b"B")),
            ],
        ),
        4,
    );
    assert_eq!(out.len(), 2);
    (leader, follower, 1)
}

#[test]
fn first_member_waits_for_initial_delay_then_leads_generation_one() {
    let mut e = engine();
    assert!(
        e.join(0, join_req("", None), 7).is_empty(),
        "join is parked"
    );
    assert_eq!(e.next_deadline(), Some(DELAY));
    assert!(e.tick(DELAY - 1).is_empty());
    let out = e.tick(DELAY);
    let resp = join_reply(&out, 7);
    assert_eq!(resp.error, None);
    assert_eq!(resp.generation_id, 1);
    assert_eq!(resp.leader, resp.member_id);
    assert_eq!(resp.protocol_name.as_deref(), Some("range"));
    assert_eq!(resp.members.len(), 1);
    assert_eq!(resp.members[0].metadata, Bytes::from_static(b"meta"));
}

#[test]
fn join_without_member_id_gets_member_id_required_then_joins_with_it() {
    let mut e = engine();
    let mut req = join_req("", None);
    req.require_known_member_id = true;
    let out = e.join(0, req, 1);
    let first = join_reply(&out, 1);
    assert_eq!(first.error, Some(GroupError::MemberIdRequired));
    assert!(!first.member_id.is_empty());
    let mut again = join_req(&first.member_id, None);
    again.require_known_member_id = true;
    assert!(e.join(5, again, 2).is_empty());
    let resp = join_reply(&e.tick(DELAY + 5), 2);
    assert_eq!(resp.member_id, first.member_id);
    assert_eq!(resp.generation_id, 1);
}

#[test]
fn only_the_leader_receives_the_member_list() {
    let mut e = engine();
    e.join(-DELAY, join_req("", None), 1);
    e.join(-DELAY, join_req("", None), 2);
    // the second member's arrival extended the initial delay once
    assert!(e.tick(0).is_empty());
    let out = e.tick(DELAY);
    let a = join_reply(&out, 1);
    let b = join_reply(&out, 2);
    assert_eq!(a.leader, b.leader);
    let (leader, follower) = if a.leader == a.member_id {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(leader.members.len(), 2);
    assert!(follower.members.is_empty());
}

#[test]
fn sync_hands_each_member_the_assignment_the_leader_chose() {
    let mut e = engine();
    e.join(-DELAY, join_req("", None), 1);
    e.join(-DELAY, join_req("", None), 2);
    // the second member's arrival extended the initial delay once
    assert!(e.tick(0).is_empty());
    let out = e.tick(DELAY);
    let a = join_reply(&out, 1);
    let b = join_reply(&out, 2);
    let (leader, follower) = if a.leader == a.member_id {
        (a.member_id, b.member_id)
    } else {
        (b.member_id, a.member_id)
    };
    assert!(e.sync(DELAY, sync_req(&follower, 1, vec![]), 10).is_empty());
    let out = e.sync(
        DELAY,
        sync_req(
            &leader,
            1,
            vec![
                (leader.clone(), Bytes::from_static(b"L")),
                (follower.clone(), Bytes::from_static(b"F")),
            ],
        ),
        11,
    );
    assert_eq!(sync_reply(&out, 10).assignment, Bytes::from_static(b"F"));
    assert_eq!(sync_reply(&out, 11).assignment, Bytes::from_static(b"L"));
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::Stable)
    );
}

#[test]
fn new_member_triggers_rebalance_seen_through_heartbeats() {
    let mut e = engine();
    let (leader, follower, gen) = stable_pair(&mut e);
    assert_eq!(e.heartbeat(4_000, "g", &follower, None, gen), Ok(()));
    assert!(e.join(4_000, join_req("", None), 20).is_empty());
    assert_eq!(
        e.heartbeat(4_100, "g", &follower, None, gen),
        Err(GroupError::RebalanceInProgress)
    );
    assert!(e.join(4_200, join_req(&follower, None), 21).is_empty());
    let out = e.join(4_300, join_req(&leader, None), 22);
    assert_eq!(out.len(), 3, "all three rejoined: the join phase completes");
    for id in [20, 21, 22] {
        assert_eq!(join_reply(&out, id).generation_id, 2);
    }
}

#[test]
fn member_that_stops_heartbeating_is_removed_after_session_timeout() {
    let mut e = engine();
    let (leader, follower, gen) = stable_pair(&mut e);
    let mut now = DELAY;
    while now < DELAY + 12_000 {
        now += 1_000;
        let _ = e.heartbeat(now, "g", &leader, None, gen);
        e.tick(now);
    }
    assert_eq!(
        e.heartbeat(now, "g", &follower, None, gen),
        Err(GroupError::UnknownMemberId)
    );
    let d = described(&e, "g").expect("group exists");
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.state, GroupState::PreparingRebalance);
}

#[test]
fn member_missing_the_rejoin_is_dropped_when_the_rebalance_times_out() {
    let mut e = engine();
    let (leader, follower, _) = stable_pair(&mut e);
    let (res, _) = e.leave(4_000, "g", "not-a-member", None);
    assert_eq!(res, Err(GroupError::UnknownMemberId));
    assert!(e.join(4_000, join_req(&leader, None), 30).is_empty());
    // the follower keeps heartbeating but never rejoins
    let _ = e.heartbeat(10_000, "g", &follower, None, 1);
    let out = e.tick(4_000 + 20_000);
    let resp = join_reply(&out, 30);
    assert_eq!(resp.generation_id, 2);
    assert_eq!(resp.members.len(), 1);
    assert_eq!(
        e.heartbeat(24_001, "g", &follower, None, 2),
        Err(GroupError::UnknownMemberId)
    );
}

/// An empty group's state is dropped from memory (its committed offsets
/// stay in the metastore, where ListGroups and DescribeGroups find it).
#[test]
fn last_member_leaving_forgets_the_group_state() {
    let mut e = engine();
    let (leader, follower, _) = stable_pair(&mut e);
    assert_eq!(e.leave(4_000, "g", &follower, None).0, Ok(()));
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::PreparingRebalance)
    );
    assert_eq!(e.leave(4_000, "g", &leader, None).0, Ok(()));
    assert_eq!(described(&e, "g").map(|d| d.state), None);
    assert_eq!(e.group_count(), 0);
    assert_eq!(e.delete("g").map(|d| d.had_state), Ok(false));
}

#[test]
fn refused_joins_leave_no_groups_and_expired_groups_are_forgotten() {
    let mut e = engine();
    for i in 0..100 {
        let mut req = join_req("", None);
        req.group_id = format!("junk-{i}");
        req.protocols.clear();
        let out = e.join(0, req, i);
        assert_eq!(
            join_reply(&out, i).error,
            Some(GroupError::InconsistentGroupProtocol)
        );
    }
    assert_eq!(e.group_count(), 0, "a refused join keeps nothing");
    // A member that joins and then stops heartbeating: once its session
    // expires the group is empty and goes.
    let (_, _, _) = stable_pair(&mut e);
    assert_eq!(e.group_count(), 1);
    let _ = e.tick(10_000_000);
    let _ = e.tick(20_000_000);
    assert_eq!(e.group_count(), 0);
}

#[test]
fn deleting_a_group_with_members_is_refused() {
    let mut e = engine();
    stable_pair(&mut e);
    assert_eq!(e.delete("g"), Err(GroupError::NonEmptyGroup));
}

#[test]
fn static_member_restart_fences_its_previous_incarnation() {
    let mut e = engine();
    e.join(0, join_req("", Some("host-1")), 1);
    let first = join_reply(&e.tick(DELAY), 1);
    let mut sync = sync_req(&first.member_id, 1, vec![]);
    sync.group_instance_id = Some("host-1".into());
    let out = e.sync(DELAY, sync, 2);
    assert_eq!(sync_reply(&out, 2).error, None);
    // The process restarts and joins again with the same instance id and no member id.
    let out = e.join(5_000, join_req("", Some("host-1")), 3);
    let err = e.heartbeat(5_001, "g", &first.member_id, Some("host-1"), 1);
    assert_eq!(err, Err(GroupError::FencedInstanceId));
    let second = join_reply(&out, 3);
    assert_ne!(second.member_id, first.member_id);
    assert_eq!(second.generation_id, 1, "nothing changed: no rebalance");
}

#[test]
fn member_with_no_common_protocol_is_rejected() {
    let mut e = engine();
    stable_pair(&mut e);
    let mut req = join_req("", None);
    req.protocols = vec![("roundrobin".into(), Bytes::new())];
    let out = e.join(4_000, req, 9);
    assert_eq!(
        join_reply(&out, 9).error,
        Some(GroupError::InconsistentGroupProtocol)
    );
}

#[test]
fn session_timeout_outside_limits_is_rejected() {
    let mut e = engine();
    let mut req = join_req("", None);
    req.session_timeout_ms = 10;
    let out = e.join(0, req, 1);
    assert_eq!(
        join_reply(&out, 1).error,
        Some(GroupError::InvalidSessionTimeout)
    );
}

#[test]
fn commits_are_checked_against_membership_and_generation() {
    let mut e = engine();
    assert_eq!(committable(&mut e, "solo", "", None, -1), Ok(()));
    let (leader, _, gen) = stable_pair(&mut e);
    assert_eq!(committable(&mut e, "g", &leader, None, gen), Ok(()));
    assert_eq!(
        committable(&mut e, "g", &leader, None, gen + 1),
        Err(GroupError::IllegalGeneration)
    );
    assert_eq!(
        committable(&mut e, "g", "stranger", None, gen),
        Err(GroupError::UnknownMemberId)
    );
    assert_eq!(
        committable(&mut e, "g", "", None, -1),
        Err(GroupError::UnknownMemberId),
        "a simple commit to a group with live members is refused"
    );
}

#[test]
fn sync_from_an_old_generation_is_illegal() {
    let mut e = engine();
    let (leader, _, gen) = stable_pair(&mut e);
    let out = e.sync(4_000, sync_req(&leader, gen - 1, vec![]), 5);
    assert_eq!(
        sync_reply(&out, 5).error,
        Some(GroupError::IllegalGeneration)
    );
}

#[test]
fn restarted_static_follower_keeps_its_assignment_without_a_rebalance() {
    let mut e = engine();
    e.join(-DELAY, join_req("", Some("a")), 1);
    e.join(-DELAY, join_req("", Some("b")), 2);
    // the second member's arrival extended the initial delay once
    assert!(e.tick(0).is_empty());
    let out = e.tick(DELAY);
    let (ra, rb) = (join_reply(&out, 1), join_reply(&out, 2));
    let (leader, follower, follower_instance) = if ra.leader == ra.member_id {
        (ra.member_id, rb.member_id, "b")
    } else {
        (rb.member_id, ra.member_id, "a")
    };
    let leader_instance = if follower_instance == "a" { "b" } else { "a" };
    let mut fs = sync_req(&follower, 1, vec![]);
    fs.group_instance_id = Some(follower_instance.into());
    e.sync(DELAY, fs, 3);
    let mut ls = sync_req(
        &leader,
        1,
        vec![
            (follower.clone(), Bytes::from_static(b"F")),
            (leader.clone(), Bytes::from_static(b"L")),
        ],
    );
    ls.group_instance_id = Some(leader_instance.into());
    let out = e.sync(DELAY, ls, 4);
    assert_eq!(sync_reply(&out, 3).assignment, Bytes::from_static(b"F"));
    // The follower's process restarts: same instance id, no member id.
    let out = e.join(5_000, join_req("", Some(follower_instance)), 5);
    let again = join_reply(&out, 5);
    assert_eq!(again.error, None);
    assert_eq!(again.generation_id, 1, "no new generation");
    assert_ne!(again.member_id, follower);
    let mut fs = sync_req(&again.member_id, 1, vec![]);
    fs.group_instance_id = Some(follower_instance.into());
    let out = e.sync(5_001, fs, 6);
    assert_eq!(
        sync_reply(&out, 6).assignment,
        Bytes::from_static(b"F"),
        "same partitions as before"
    );
    assert_eq!(
        e.heartbeat(5_002, "g", &leader, Some(leader_instance), 1),
        Ok(()),
        "the leader was not disturbed"
    );
}

// ---- static members (KIP-345) ------------------------------------------------

/// A ConsumerProtocolSubscription v3, as librdkafka and the Java client
/// write it: topics, no user data, owned partitions, generation, no rack.
fn subscription(topics: &[&str], owned: &[i32], generation: i32) -> Bytes {
    let mut b = Vec::new();
    b.extend_from_slice(&3i16.to_be_bytes());
    b.extend_from_slice(&(topics.len() as i32).to_be_bytes());
    for t in topics {
        b.extend_from_slice(&(t.len() as i16).to_be_bytes());
        b.extend_from_slice(t.as_bytes());
    }
    b.extend_from_slice(&(-1i32).to_be_bytes());
    if owned.is_empty() {
        b.extend_from_slice(&0i32.to_be_bytes());
    } else {
        b.extend_from_slice(&1i32.to_be_bytes());
        b.extend_from_slice(&(topics[0].len() as i16).to_be_bytes());
        b.extend_from_slice(topics[0].as_bytes());
        b.extend_from_slice(&(owned.len() as i32).to_be_bytes());
        for p in owned {
            b.extend_from_slice(&p.to_be_bytes());
        }
    }
    b.extend_from_slice(&generation.to_be_bytes());
    b.extend_from_slice(&(-1i16).to_be_bytes());
    Bytes::from(b)
}

fn static_join(instance: &str, metadata: Bytes) -> JoinRequest {
    let mut req = join_req("", Some(instance));
    req.require_known_member_id = true;
    req.protocols = vec![("range".into(), metadata)];
    req
}

fn static_sync(member: &str, instance: &str, generation: i32) -> SyncRequest {
    let mut req = sync_req(member, generation, vec![]);
    req.group_instance_id = Some(instance.into());
    req
}

/// Three static members `a`, `b` and `c` subscribed to `t`, stable in
/// generation 1 with assignments "A", "B" and "C": the member id of each
/// instance, and the leader's instance.
struct StaticGroup {
    ids: HashMap<String, String>,
    leader: String,
}

impl StaticGroup {
    fn id(&self, instance: &str) -> String {
        self.ids[instance].clone()
    }

    fn follower(&self) -> String {
        ["a", "b", "c"]
            .iter()
            .find(|i| **i != self.leader)
            .map(|i| i.to_string())
            .unwrap_or_default()
    }
}

fn stable_static_group(e: &mut GroupEngine) -> StaticGroup {
    let meta = subscription(&["t"], &[], -1);
    for (i, inst) in ["a", "b", "c"].iter().enumerate() {
        assert!(e
            .join(-DELAY, static_join(inst, meta.clone()), i as u64 + 1)
            .is_empty());
    }
    // the second member's arrival extended the initial delay once
    assert!(e.tick(0).is_empty());
    let out = e.tick(DELAY);
    let mut ids = HashMap::new();
    let mut leader = String::new();
    for (i, inst) in ["a", "b", "c"].iter().enumerate() {
        let r = join_reply(&out, i as u64 + 1);
        assert_eq!(r.generation_id, 1);
        if r.leader == r.member_id {
            assert_eq!(r.members.len(), 3);
            leader = inst.to_string();
        }
        ids.insert(inst.to_string(), r.member_id);
    }
    let g = StaticGroup { ids, leader };
    let assignments: Vec<(String, Bytes)> = ["a", "b", "c"]
        .iter()
        .map(|i| (g.id(i), Bytes::from(i.to_uppercase())))
        .collect();
    let mut out = Vec::new();
    for (n, inst) in ["a", "b", "c"].iter().enumerate() {
        let mut req = static_sync(&g.id(inst), inst, 1);
        if *inst == g.leader {
            req.assignments = assignments.clone();
        }
        out.extend(e.sync(DELAY, req, 10 + n as u64));
    }
    for (n, inst) in ["a", "b", "c"].iter().enumerate() {
        assert_eq!(
            sync_reply(&out, 10 + n as u64).assignment,
            Bytes::from(inst.to_uppercase())
        );
    }
    assert_eq!(described(e, "g").map(|d| d.state), Some(GroupState::Stable));
    g
}

/// Every member but `except` still heartbeats in `generation` undisturbed.
fn others_undisturbed(
    e: &mut GroupEngine,
    g: &StaticGroup,
    except: &str,
    now: i64,
    generation: i32,
) {
    for inst in ["a", "b", "c"].iter().filter(|i| **i != except) {
        assert_eq!(
            e.heartbeat(now, "g", &g.id(inst), Some(inst), generation),
            Ok(()),
            "{inst} was not disturbed"
        );
    }
}

#[test]
fn restarted_static_leader_keeps_the_generation_and_is_told_not_to_assign() {
    // JoinGroup below v9: the answer names the old leader id, so the client
    // acts as a follower and takes its assignment at SyncGroup.
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let leader = g.leader.clone();
    let out = e.join(
        5_000,
        static_join(&leader, subscription(&["t"], &[], -1)),
        20,
    );
    let back = join_reply(&out, 20);
    assert_eq!(back.error, None);
    assert_eq!(back.generation_id, 1, "no new generation");
    assert_ne!(back.member_id, g.id(&leader));
    assert_eq!(back.leader, g.id(&leader), "the old id: not this member");
    assert!(back.members.is_empty());
    assert!(!back.skip_assignment);
    let out = e.sync(5_001, static_sync(&back.member_id, &leader, 1), 21);
    assert_eq!(
        sync_reply(&out, 21).assignment,
        Bytes::from(leader.to_uppercase())
    );
    others_undisturbed(&mut e, &g, &leader, 5_002, 1);

    // JoinGroup v9+ (KIP-814): told it leads, with the members, and to skip
    // the assignment.
    let mut req = static_join(&leader, subscription(&["t"], &[], -1));
    req.supports_skip_assignment = true;
    let out = e.join(6_000, req, 22);
    let again = join_reply(&out, 22);
    assert_eq!((again.error, again.generation_id), (None, 1));
    assert_eq!(again.leader, again.member_id);
    assert!(again.skip_assignment);
    assert_eq!(again.members.len(), 3);
    let out = e.sync(6_001, static_sync(&again.member_id, &leader, 1), 23);
    assert_eq!(
        sync_reply(&out, 23).assignment,
        Bytes::from(leader.to_uppercase())
    );
    others_undisturbed(&mut e, &g, &leader, 6_002, 1);
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::Stable)
    );
}

#[test]
fn restarted_static_follower_owning_nothing_yet_needs_no_rebalance() {
    // A restarted consumer's subscription names no owned partitions and no
    // generation where its previous incarnation's did: same topics, same ask.
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let mut req = join_req(&g.id(&f), Some(&f));
    req.protocols = vec![("range".into(), subscription(&["t"], &[0, 1], 1))];
    // a known member's rejoin with other bytes in Stable rebalances (Kafka's
    // rule for members that did not restart); take it to Stable again first
    let out = e.join(4_000, req, 20);
    assert!(out.is_empty(), "parked: a rebalance started");
    let mut out = Vec::new();
    for (n, inst) in ["a", "b", "c"].iter().filter(|i| **i != f).enumerate() {
        let mut req = join_req(&g.id(inst), Some(inst));
        req.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
        out.extend(e.join(4_001, req, 21 + n as u64));
    }
    assert_eq!(join_reply(&out, 20).generation_id, 2);
    let mut out = Vec::new();
    for (n, inst) in ["a", "b", "c"].iter().enumerate() {
        let mut req = static_sync(&g.id(inst), inst, 2);
        if *inst == g.leader {
            req.assignments = ["a", "b", "c"]
                .iter()
                .map(|i| (g.id(i), Bytes::from(i.to_uppercase())))
                .collect();
        }
        out.extend(e.sync(4_002, req, 30 + n as u64));
    }
    assert_eq!(out.len(), 3);
    // the process restarts
    let out = e.join(5_000, static_join(&f, subscription(&["t"], &[], -1)), 40);
    let back = join_reply(&out, 40);
    assert_eq!((back.error, back.generation_id), (None, 2));
    let out = e.sync(5_001, static_sync(&back.member_id, &f, 2), 41);
    assert_eq!(
        sync_reply(&out, 41).assignment,
        Bytes::from(f.to_uppercase())
    );
    others_undisturbed(&mut e, &g, &f, 5_002, 2);
}

#[test]
fn restarted_static_member_subscribing_to_other_topics_rebalances() {
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let out = e.join(
        5_000,
        static_join(&f, subscription(&["t", "u"], &[], -1)),
        20,
    );
    assert!(out.is_empty(), "parked until the others rejoin");
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::PreparingRebalance)
    );
    for inst in ["a", "b", "c"].iter().filter(|i| **i != f) {
        assert_eq!(
            e.heartbeat(5_001, "g", &g.id(inst), Some(inst), 1),
            Err(GroupError::RebalanceInProgress)
        );
    }
    let mut out = Vec::new();
    for (n, inst) in ["a", "b", "c"].iter().filter(|i| **i != f).enumerate() {
        let mut req = join_req(&g.id(inst), Some(inst));
        req.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
        out.extend(e.join(5_002, req, 21 + n as u64));
    }
    let back = join_reply(&out, 20);
    assert_eq!(back.generation_id, 2);
    let listed = out
        .iter()
        .filter_map(|r| match r {
            Reply::Join(_, resp) if !resp.members.is_empty() => Some(resp.members.clone()),
            _ => None,
        })
        .next()
        .unwrap_or_default();
    let mine = listed
        .iter()
        .find(|m| m.member_id == back.member_id)
        .map(|m| m.metadata.clone());
    assert_eq!(
        mine,
        Some(subscription(&["t", "u"], &[], -1)),
        "the leader sees the new topics"
    );
}

#[test]
fn restarted_static_member_during_the_sync_phase_rebalances() {
    // The leader may be computing an assignment that names the old id, so
    // even a follower's new incarnation starts a rebalance.
    let mut e = engine();
    let meta = subscription(&["t"], &[], -1);
    e.join(-DELAY, static_join("a", meta.clone()), 1);
    e.join(-DELAY, static_join("b", meta.clone()), 2);
    // the second member's arrival extended the initial delay once
    assert!(e.tick(0).is_empty());
    let out = e.tick(DELAY);
    let (ra, rb) = (join_reply(&out, 1), join_reply(&out, 2));
    let ((leader, leader_inst), (follower, follower_inst)) = if ra.leader == ra.member_id {
        ((ra.member_id, "a"), (rb.member_id, "b"))
    } else {
        ((rb.member_id, "b"), (ra.member_id, "a"))
    };
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::CompletingRebalance)
    );
    let out = e.join(DELAY + 1, static_join(follower_inst, meta.clone()), 3);
    assert!(out.is_empty(), "parked: a rebalance started");
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::PreparingRebalance)
    );
    let mut again = join_req(&leader, Some(leader_inst));
    again.protocols = vec![("range".into(), meta)];
    let out = e.join(DELAY + 2, again, 4);
    assert_eq!(join_reply(&out, 3).generation_id, 2);
    assert_eq!(join_reply(&out, 4).generation_id, 2);
    let out = e.sync(DELAY + 3, static_sync(&follower, follower_inst, 1), 5);
    assert_eq!(
        sync_reply(&out, 5).error,
        Some(GroupError::FencedInstanceId)
    );
}

#[test]
fn the_previous_incarnation_of_a_static_member_is_fenced() {
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let old = g.id(&f);
    let out = e.join(5_000, static_join(&f, subscription(&["t"], &[], -1)), 20);
    let new = join_reply(&out, 20).member_id;
    assert_eq!(
        e.heartbeat(5_001, "g", &old, Some(&f), 1),
        Err(GroupError::FencedInstanceId)
    );
    let out = e.sync(5_001, static_sync(&old, &f, 1), 21);
    assert_eq!(
        sync_reply(&out, 21).error,
        Some(GroupError::FencedInstanceId)
    );
    let mut rejoin = join_req(&old, Some(&f));
    rejoin.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
    let out = e.join(5_001, rejoin, 22);
    assert_eq!(
        join_reply(&out, 22).error,
        Some(GroupError::FencedInstanceId)
    );
    assert_eq!(
        committable(&mut e, "g", &old, Some(&f), 1),
        Err(GroupError::FencedInstanceId)
    );
    assert_eq!(
        e.leave(5_001, "g", &old, Some(&f)).0,
        Err(GroupError::FencedInstanceId)
    );
    // the new incarnation is the member now, and nothing moved
    assert_eq!(e.heartbeat(5_002, "g", &new, Some(&f), 1), Ok(()));
    others_undisturbed(&mut e, &g, &f, 5_002, 1);
    assert_eq!(described(&e, "g").map(|d| d.members.len()), Some(3));
}

#[test]
fn a_batched_leave_removes_static_members_by_instance_id_in_one_rebalance() {
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let other = ["a", "b", "c"]
        .iter()
        .find(|i| **i != f && **i != g.leader)
        .map(|i| i.to_string())
        .unwrap_or_default();
    let (results, out) = e.leave_batch(
        5_000,
        "g",
        &[
            (String::new(), Some(f.clone())),
            (g.id(&other), Some(other.clone())),
            (String::new(), Some("nobody".into())),
            ("stale-id".into(), Some(g.leader.clone())),
        ],
    );
    assert!(out.is_empty());
    assert_eq!(
        results,
        vec![
            Ok(()),
            Ok(()),
            Err(GroupError::UnknownMemberId),
            Err(GroupError::FencedInstanceId),
        ]
    );
    assert_eq!(
        e.heartbeat(5_001, "g", &g.id(&g.leader), Some(&g.leader), 1),
        Err(GroupError::RebalanceInProgress)
    );
    let mut req = join_req(&g.id(&g.leader), Some(&g.leader));
    req.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
    let out = e.join(5_002, req, 20);
    let resp = join_reply(&out, 20);
    assert_eq!(resp.generation_id, 2, "one rebalance for both leaves");
    assert_eq!(resp.members.len(), 1);
    // the instance ids are free again: joining with one is a new member
    assert_eq!(
        e.heartbeat(5_003, "g", &g.id(&f), Some(&f), 2),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_static_member_away_past_its_session_is_removed_with_a_rebalance() {
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let mut now = DELAY;
    // the others heartbeat; `f` has stopped (a closed static member sends no LeaveGroup)
    while now < DELAY + 9_000 {
        now += 1_000;
        others_undisturbed(&mut e, &g, &f, now, 1);
        assert!(e.tick(now).is_empty());
    }
    assert_eq!(
        described(&e, "g").map(|d| d.state),
        Some(GroupState::Stable)
    );
    now += 1_000;
    let _ = e.tick(now);
    let d = described(&e, "g").expect("group exists");
    assert_eq!(d.state, GroupState::PreparingRebalance);
    assert_eq!(d.members.len(), 2);
    assert_eq!(
        e.heartbeat(now, "g", &g.id(&f), Some(&f), 1),
        Err(GroupError::UnknownMemberId)
    );
}

#[test]
fn a_static_member_absent_during_a_rebalance_keeps_its_place_until_it_returns() {
    // A rebalance (a new dynamic member) while `f` is restarting: the new
    // generation keeps `f`, so the leader assigns to it, and its next
    // incarnation takes that assignment without another rebalance.
    let mut e = engine();
    let g = stable_static_group(&mut e);
    let f = g.follower();
    let mut dynamic = join_req("", None);
    dynamic.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
    assert!(e.join(4_000, dynamic, 20).is_empty());
    // `f` is still heartbeating when its process stops, without rejoining
    assert_eq!(
        e.heartbeat(15_000, "g", &g.id(&f), Some(&f), 1),
        Err(GroupError::RebalanceInProgress)
    );
    let mut out = Vec::new();
    for (n, inst) in ["a", "b", "c"].iter().filter(|i| **i != f).enumerate() {
        let mut req = join_req(&g.id(inst), Some(inst));
        req.protocols = vec![("range".into(), subscription(&["t"], &[], -1))];
        out.extend(e.join(4_001, req, 21 + n as u64));
    }
    assert!(out.is_empty(), "waits for `f` until the rebalance timeout");
    let out = e.tick(4_000 + 20_000);
    let leader_reply = out
        .iter()
        .filter_map(|r| match r {
            Reply::Join(_, resp) if resp.leader == resp.member_id => Some(resp.clone()),
            _ => None,
        })
        .next()
        .expect("a leader among the members that joined");
    assert_eq!(leader_reply.generation_id, 2);
    assert_ne!(leader_reply.member_id, g.id(&f));
    assert_eq!(leader_reply.members.len(), 4, "`f` keeps its place");
    let mut sync = static_sync(&leader_reply.member_id, "", 2);
    sync.group_instance_id = ["a", "b", "c"]
        .iter()
        .find(|i| g.id(i) == leader_reply.member_id)
        .map(|i| i.to_string());
    sync.assignments = vec![(g.id(&f), Bytes::from_static(b"F2"))];
    let out = e.sync(24_001, sync, 30);
    assert_eq!(sync_reply(&out, 30).error, None);
    let out = e.join(24_002, static_join(&f, subscription(&["t"], &[], -1)), 31);
    let back = join_reply(&out, 31);
    assert_eq!((back.error, back.generation_id), (None, 2));
    let out = e.sync(24_003, static_sync(&back.member_id, &f, 2), 32);
    assert_eq!(sync_reply(&out, 32).assignment, Bytes::from_static(b"F2"));
}

#[test]
fn consumer_subscriptions_compare_by_topics() {
    use super::super::state::subscription_changed;
    let p = |m: Bytes| vec![("range".to_string(), m)];
    let t = subscription(&["t", "u"], &[], -1);
    let same = subscription(&["u", "t"], &[3, 4], 7);
    assert!(!subscription_changed("consumer", &p(t.clone()), &p(same)));
    assert!(subscription_changed(
        "consumer",
        &p(t.clone()),
        &p(subscription(&["t"], &[], -1))
    ));
    // not a subscription, or not the consumer protocol: the bytes decide
    let junk = Bytes::from_static(&[0, 3, 0x7f, 0xff, 0xff, 0xff, 0, 1]);
    assert!(subscription_changed(
        "consumer",
        &p(t.clone()),
        &p(junk.clone())
    ));
    assert!(!subscription_changed(
        "consumer",
        &p(junk.clone()),
        &p(junk)
    ));
    assert!(subscription_changed(
        "connect",
        &p(t),
        &p(subscription(&["t", "u"], &[1], 2))
    ));
}

#[test]
fn a_member_arriving_during_the_initial_delay_extends_it_once_more() {
    let mut e = engine();
    assert!(e.join(0, join_req("", None), 1).is_empty());
    assert!(e.join(1_000, join_req("", None), 2).is_empty());
    assert!(e.tick(DELAY).is_empty(), "a new member arrived: wait again");
    assert_eq!(e.next_deadline(), Some(2 * DELAY));
    assert!(e.tick(2 * DELAY - 1).is_empty());
    let out = e.tick(2 * DELAY);
    assert_eq!(join_reply(&out, 1).generation_id, 1);
    assert_eq!(join_reply(&out, 2).generation_id, 1);
    assert_eq!(join_reply(&out, 1).leader, join_reply(&out, 2).leader);
}

#[test]
fn members_arriving_without_end_wait_no_longer_than_the_rebalance_timeout() {
    // join_req asks for a 20 s rebalance timeout
    let mut e = engine();
    assert!(e.join(0, join_req("", None), 1).is_empty());
    let mut reply = 2;
    let formed_at = loop {
        let deadline = e.next_deadline().expect("the join phase has an end");
        assert!(e.join(deadline - 1, join_req("", None), reply).is_empty());
        reply += 1;
        let now = deadline;
        let out = e.tick(now);
        if !out.is_empty() {
            assert_eq!(join_reply(&out, 1).generation_id, 1);
            break now;
        }
        assert!(now < 20_000, "still waiting at {now} ms");
    };
    assert_eq!(formed_at, 20_000);
    assert_eq!(
        described(&e, "g").map(|d| d.members.len()),
        Some(reply as usize - 1)
    );
}
