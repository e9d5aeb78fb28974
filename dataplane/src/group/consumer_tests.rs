use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use uuid::Uuid;

use super::*;
use crate::group::consumer_state::DEFAULT_REBALANCE_TIMEOUT_MS;
use crate::group::engine::{GroupEngine, GroupError, GroupLimits, GroupState, JoinRequest};
use crate::group::types::HeldSlots;

const GROUP: &str = "g";
const SESSION: i64 = 45_000;

fn engine() -> GroupEngine {
    let mut e = GroupEngine::new(GroupLimits::default(), "test");
    e.hold(HeldSlots::all(4, 1));
    e
}

fn topic(n: u128) -> Uuid {
    Uuid::from_u128(n)
}

fn catalog(topics: &[(&str, u128, i32)]) -> Arc<TopicCatalog> {
    Arc::new(
        topics
            .iter()
            .map(|(name, id, n)| (name.to_string(), (topic(*id), *n)))
            .collect(),
    )
}

fn join(member: &str, names: &[&str], topics: &Arc<TopicCatalog>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        group_id: GROUP.into(),
        member_id: member.into(),
        member_epoch: 0,
        instance_id: None,
        rack_id: None,
        rebalance_timeout_ms: 30_000,
        subscribed_topic_names: Some(names.iter().map(|n| n.to_string()).collect()),
        subscribed_topic_regex: None,
        server_assignor: None,
        owned: Some(Vec::new()),
        client_id: "client".into(),
        client_host: "/127.0.0.1".into(),
        topics: topics.clone(),
    }
}

/// A plain heartbeat at `epoch`, reporting `owned`.
fn beat(
    member: &str,
    epoch: i32,
    owned: &Assignment,
    topics: &Arc<TopicCatalog>,
) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_epoch: epoch,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned: Some(
            owned
                .iter()
                .map(|(t, ps)| (*t, ps.iter().copied().collect()))
                .collect(),
        ),
        ..join(member, &[], topics)
    }
}

/// What librdkafka (2.12) sends when it was unsubscribed and left the
/// group from its steady state (its leave's answer sets its epoch back to 0
/// but not its state), then is subscribed again: the new subscription in an
/// incremental heartbeat at epoch 0. No rebalance timeout (-1), no owned
/// partitions (null, not an empty list), no instance id, rack or assignor,
/// an empty pattern beside the names.
fn librdkafka_resubscribe(
    member: &str,
    names: &[&str],
    topics: &Arc<TopicCatalog>,
) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_epoch: 0,
        rebalance_timeout_ms: -1,
        subscribed_topic_regex: Some(String::new()),
        owned: None,
        ..join(member, names, topics)
    }
}

/// librdkafka's leave: epoch -1 and nothing else.
fn librdkafka_leave(member: &str, topics: &Arc<TopicCatalog>) -> ConsumerHeartbeat {
    ConsumerHeartbeat {
        member_epoch: LEAVE_EPOCH,
        rebalance_timeout_ms: -1,
        subscribed_topic_names: None,
        owned: None,
        ..join(member, &[], topics)
    }
}

fn parts(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

/// Heartbeats every member until none of them changes any more; returns
/// each member's (epoch, owned partitions).
fn settle(
    e: &mut GroupEngine,
    members: &mut BTreeMap<String, (i32, Assignment)>,
    topics: &Arc<TopicCatalog>,
    now: i64,
) {
    for _ in 0..10 {
        let mut changed = false;
        let ids: Vec<String> = members.keys().cloned().collect();
        for id in ids {
            let (epoch, owned) = members[&id].clone();
            let a = e
                .consumer_heartbeat(now, beat(&id, epoch, &owned, topics))
                .expect("heartbeat");
            let next = (a.member_epoch, a.assignment.unwrap_or(owned.clone()));
            if next != (epoch, owned) {
                changed = true;
            }
            members.insert(id, next);
        }
        // no partition is ever owned twice
        let mut seen = BTreeSet::new();
        for (_, owned) in members.values() {
            for (t, ps) in owned {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "{t}/{p} owned twice: {members:?}");
                }
            }
        }
        if !changed {
            return;
        }
    }
    panic!("the group did not settle: {members:?}");
}

#[test]
fn a_member_joins_and_gets_every_partition() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 4)]);
    let a = e.consumer_heartbeat(0, join("", &["t"], &topics)).unwrap();
    assert!(!a.member_id.is_empty(), "v0: the coordinator picks the id");
    assert_eq!(a.member_epoch, 1);
    assert_eq!(a.heartbeat_interval_ms, 5_000);
    let owned = a.assignment.expect("a join gets its assignment");
    assert_eq!(owned[&topic(1)], BTreeSet::from([0, 1, 2, 3]));
    let d = e.consumer_describe(GROUP).unwrap().unwrap();
    assert_eq!(d.state, GroupState::Stable);
    assert_eq!((d.epoch, d.assignment_epoch), (1, 1));
    // an unchanged heartbeat carries no assignment
    let again = e
        .consumer_heartbeat(10, beat(&a.member_id, 1, &owned, &topics))
        .unwrap();
    assert_eq!(again.assignment, None);
    assert_eq!(again.member_epoch, 1);
}

#[test]
fn a_second_member_gets_partitions_only_after_the_first_revoked_them() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 4)]);
    let a = e
        .consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    let m1_owned = a.assignment.unwrap();
    // m2 joins: the target splits the partitions, but m1 still owns them
    let b = e
        .consumer_heartbeat(10, join("m2", &["t"], &topics))
        .unwrap();
    assert_eq!(b.member_epoch, 2);
    assert_eq!(
        parts(&b.assignment.clone().unwrap()),
        0,
        "nothing is free yet"
    );
    assert_eq!(
        e.consumer_describe(GROUP).unwrap().unwrap().state,
        GroupState::Reconciling
    );
    // m1 is told to give two up, at its old epoch
    let a2 = e
        .consumer_heartbeat(20, beat("m1", 1, &m1_owned, &topics))
        .unwrap();
    assert_eq!(a2.member_epoch, 1);
    let m1_keep = a2.assignment.unwrap();
    assert_eq!(parts(&m1_keep), 2);
    // until it says it let them go, m2 gets nothing
    let b2 = e
        .consumer_heartbeat(30, beat("m2", 2, &Assignment::new(), &topics))
        .unwrap();
    assert!(b2.assignment.is_none_or(|a| parts(&a) == 0));
    let a3 = e
        .consumer_heartbeat(40, beat("m1", 1, &m1_keep, &topics))
        .unwrap();
    assert_eq!(a3.member_epoch, 2);
    let b3 = e
        .consumer_heartbeat(50, beat("m2", 2, &Assignment::new(), &topics))
        .unwrap();
    let m2_owned = b3.assignment.unwrap();
    assert_eq!(parts(&m2_owned), 2);
    assert!(m2_owned[&topic(1)].is_disjoint(&m1_keep[&topic(1)]));
    assert_eq!(
        e.consumer_describe(GROUP).unwrap().unwrap().state,
        GroupState::Stable
    );
}

#[test]
fn members_settle_without_owning_a_partition_twice_through_joins_and_leaves() {
    let mut e = engine();
    let topics = catalog(&[("a", 1, 7), ("b", 2, 3)]);
    let mut members = BTreeMap::new();
    for (i, id) in ["m1", "m2", "m3"].iter().enumerate() {
        let j = e
            .consumer_heartbeat(i as i64, join(id, &["a", "b"], &topics))
            .unwrap();
        members.insert(id.to_string(), (j.member_epoch, j.assignment.unwrap()));
        settle(&mut e, &mut members, &topics, 100 + i as i64);
    }
    let loads: Vec<usize> = members.values().map(|(_, a)| parts(a)).collect();
    assert_eq!(loads.iter().sum::<usize>(), 10);
    assert!(
        loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1,
        "{loads:?}"
    );
    // m2 leaves: the others take its partitions
    let left = e
        .consumer_heartbeat(200, beat("m2", LEAVE_EPOCH, &Assignment::new(), &topics))
        .unwrap();
    assert_eq!(left.member_epoch, LEAVE_EPOCH);
    members.remove("m2");
    settle(&mut e, &mut members, &topics, 300);
    assert_eq!(members.values().map(|(_, a)| parts(a)).sum::<usize>(), 10);
}

#[test]
fn a_wrong_epoch_is_fenced_and_a_lost_answer_is_forgiven() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 2)]);
    let a = e
        .consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    let owned = a.assignment.unwrap();
    let ahead = e.consumer_heartbeat(10, beat("m1", 5, &owned, &topics));
    assert_eq!(ahead.unwrap_err().error, GroupError::FencedMemberEpoch);
    // the join's answer (epoch 1) was lost: the same join again is fine
    let retry = e
        .consumer_heartbeat(20, join("m1", &["t"], &topics))
        .unwrap();
    assert_eq!(retry.member_epoch, 1);
    // an unknown member is told so, and rejoins
    let stranger = e.consumer_heartbeat(30, beat("nobody", 3, &owned, &topics));
    assert_eq!(stranger.unwrap_err().error, GroupError::UnknownMemberId);
}

#[test]
fn a_silent_member_is_removed_after_its_session_and_its_partitions_move() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 2)]);
    e.consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    let b = e
        .consumer_heartbeat(0, join("m2", &["t"], &topics))
        .unwrap();
    assert_eq!(e.next_deadline(), Some(SESSION));
    // m2 keeps heartbeating, m1 goes quiet
    let now = SESSION - 1;
    e.consumer_heartbeat(now, beat("m2", b.member_epoch, &Assignment::new(), &topics))
        .unwrap();
    e.tick(SESSION);
    let d = e.consumer_describe(GROUP).unwrap().unwrap();
    assert_eq!(d.members.len(), 1);
    let b2 = e
        .consumer_heartbeat(
            SESSION + 1,
            beat("m2", b.member_epoch, &Assignment::new(), &topics),
        )
        .unwrap();
    assert_eq!(parts(&b2.assignment.unwrap()), 2);
}

#[test]
fn a_static_member_keeps_its_partitions_while_away_and_its_successor_takes_them() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 4)]);
    let mut first = join("m1", &["t"], &topics);
    first.instance_id = Some("instance-a".into());
    let a = e.consumer_heartbeat(0, first.clone()).unwrap();
    let owned = a.assignment.unwrap();
    // a second live member with the same instance id is refused
    let mut twin = first.clone();
    twin.member_id = "m9".into();
    assert_eq!(
        e.consumer_heartbeat(5, twin.clone()).unwrap_err().error,
        GroupError::UnreleasedInstanceId
    );
    // it leaves for a while (epoch -2) and a successor comes back
    let mut away = beat("m1", STATIC_LEAVE_EPOCH, &owned, &topics);
    away.instance_id = Some("instance-a".into());
    assert_eq!(
        e.consumer_heartbeat(10, away).unwrap().member_epoch,
        STATIC_LEAVE_EPOCH
    );
    let back = e.consumer_heartbeat(20, twin).unwrap();
    assert_eq!(back.member_id, "m9");
    assert_eq!(
        back.assignment.unwrap(),
        owned,
        "the successor gets the same partitions"
    );
    // the old member id is fenced
    let mut old = beat("m1", 1, &owned, &topics);
    old.instance_id = Some("instance-a".into());
    assert_eq!(
        e.consumer_heartbeat(30, old).unwrap_err().error,
        GroupError::FencedInstanceId
    );
}

#[test]
fn a_pattern_subscription_follows_the_topics_that_appear() {
    let mut e = engine();
    let topics = catalog(&[("orders-eu", 1, 1), ("payments", 2, 1)]);
    let mut j = join("m1", &[], &topics);
    j.subscribed_topic_names = None;
    j.subscribed_topic_regex = Some("orders-.*".into());
    let a = e.consumer_heartbeat(0, j).unwrap();
    // the pattern is resolved from the next heartbeat on
    assert_eq!(a.assignment, Some(Assignment::new()));
    let a = e
        .consumer_heartbeat(5, beat("m1", a.member_epoch, &Assignment::new(), &topics))
        .unwrap();
    let owned = a.assignment.unwrap();
    assert_eq!(owned.keys().copied().collect::<Vec<_>>(), vec![topic(1)]);
    // a new matching topic moves the group epoch and is assigned
    let more = catalog(&[("orders-eu", 1, 1), ("orders-us", 3, 2), ("payments", 2, 1)]);
    let a2 = e
        .consumer_heartbeat(10, beat("m1", a.member_epoch, &owned, &more))
        .unwrap();
    assert_eq!(a2.member_epoch, a.member_epoch + 1);
    let owned2 = a2.assignment.unwrap();
    assert_eq!(
        owned2.keys().copied().collect::<Vec<_>>(),
        vec![topic(1), topic(3)]
    );
    // a bad pattern is refused
    let mut bad = join("m2", &[], &topics);
    bad.subscribed_topic_names = None;
    bad.subscribed_topic_regex = Some("orders-(".into());
    assert_eq!(
        e.consumer_heartbeat(20, bad).unwrap_err().error,
        GroupError::InvalidRegularExpression
    );
}

#[test]
fn requests_missing_what_they_must_carry_are_refused() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 1)]);
    let mut owns = join("m1", &["t"], &topics);
    owns.owned = Some(vec![(topic(1), vec![0])]);
    // partitions claimed at epoch 0, in an incremental heartbeat's shape
    let mut owns_incrementally = librdkafka_resubscribe("m1", &["t"], &topics);
    owns_incrementally.owned = Some(vec![(topic(1), vec![0])]);
    let mut no_subscription = join("m1", &[], &topics);
    no_subscription.subscribed_topic_names = None;
    // epoch 0 with nothing to join with: no names, no pattern
    let mut nothing_to_join_with = librdkafka_resubscribe("m1", &[], &topics);
    nothing_to_join_with.subscribed_topic_names = None;
    nothing_to_join_with.subscribed_topic_regex = None;
    let mut bad_epoch = join("m1", &["t"], &topics);
    bad_epoch.member_epoch = -7;
    let no_member_id = beat("", 3, &Assignment::new(), &topics);
    let mut empty_rack = join("m1", &["t"], &topics);
    empty_rack.rack_id = Some(String::new());
    let mut assignor = join("m1", &["t"], &topics);
    assignor.server_assignor = Some("sticky".into());
    for (req, error) in [
        (owns, GroupError::InvalidRequest),
        (owns_incrementally, GroupError::InvalidRequest),
        (no_subscription, GroupError::InvalidRequest),
        (nothing_to_join_with, GroupError::InvalidRequest),
        (bad_epoch, GroupError::InvalidRequest),
        (no_member_id, GroupError::InvalidRequest),
        (empty_rack, GroupError::InvalidRequest),
        (assignor, GroupError::UnsupportedAssignor),
    ] {
        let shape = req.shape();
        let refused = e.consumer_heartbeat(0, req).expect_err(&shape);
        assert_eq!(refused.error, error, "{shape}");
    }
    assert!(
        e.consumer_describe(GROUP)
            .unwrap()
            .is_none_or(|d| d.members.is_empty()),
        "a refused heartbeat joins no one"
    );
    let mut range = join("m1", &["t"], &topics);
    range.server_assignor = Some("range".into());
    e.consumer_heartbeat(0, range).unwrap();
    assert_eq!(
        e.consumer_describe(GROUP).unwrap().unwrap().assignor,
        "range"
    );
}

#[test]
fn offset_commits_must_carry_the_members_epoch() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 1)]);
    let a = e
        .consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    assert!(e.validate_commit(GROUP, "m1", None, a.member_epoch).is_ok());
    assert_eq!(
        e.validate_commit(GROUP, "m1", None, a.member_epoch - 1),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        e.validate_commit(GROUP, "nobody", None, 1),
        Err(GroupError::UnknownMemberId)
    );
    // from outside the group only while it has no member
    assert!(e.validate_commit(GROUP, "", None, -1).is_err());
}

#[test]
fn offset_fetches_of_a_member_must_carry_its_epoch() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 1)]);
    let a = e
        .consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    assert_eq!(
        e.consumer_fetch_check(GROUP, Some("m1"), a.member_epoch),
        Ok(())
    );
    assert_eq!(
        e.consumer_fetch_check(GROUP, Some("m1"), a.member_epoch - 1),
        Err(GroupError::StaleMemberEpoch)
    );
    assert_eq!(
        e.consumer_fetch_check(GROUP, Some("gone"), a.member_epoch),
        Err(GroupError::UnknownMemberId)
    );
    // the admin client and older clients name no member: always answered
    assert_eq!(e.consumer_fetch_check(GROUP, None, -1), Ok(()));
    assert_eq!(e.consumer_fetch_check(GROUP, Some(""), -1), Ok(()));
    // a group of the classic protocol (or none at all) is not checked
    assert_eq!(e.consumer_fetch_check("other", Some("m1"), 3), Ok(()));
}

#[test]
fn the_two_protocols_share_a_group_id_only_one_at_a_time() {
    let mut e = engine();
    let topics = catalog(&[("t", 1, 1)]);
    e.consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    let classic = JoinRequest {
        group_id: GROUP.into(),
        member_id: String::new(),
        group_instance_id: None,
        client_id: "c".into(),
        client_host: "h".into(),
        session_timeout_ms: 10_000,
        rebalance_timeout_ms: 10_000,
        protocol_type: "consumer".into(),
        protocols: vec![("range".into(), Default::default())],
        require_known_member_id: false,
        supports_skip_assignment: false,
    };
    let out = e.join(0, classic.clone(), 1);
    assert!(
        matches!(&out[..], [crate::group::engine::Reply::Join(1, r)] if r.error == Some(GroupError::InconsistentGroupProtocol)),
        "{out:?}"
    );
    // once the consumer group is empty, a classic member may take the id
    e.consumer_heartbeat(10, beat("m1", LEAVE_EPOCH, &Assignment::new(), &topics))
        .unwrap();
    let out = e.join(20, classic, 2);
    assert!(
        !matches!(&out[..], [crate::group::engine::Reply::Join(2, r)] if r.error.is_some()),
        "{out:?}"
    );
    // and now a consumer-protocol member is refused
    assert_eq!(
        e.consumer_heartbeat(30, join("m2", &["t"], &topics))
            .unwrap_err()
            .error,
        GroupError::GroupIdNotFound
    );
    let listed = e.list();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].3, "classic");
}

#[test]
fn a_member_may_join_with_an_empty_subscription_and_subscribe_later() {
    // librdkafka rejoins with the subscription it has at that moment, which
    // can be empty while an application swaps its topic list
    let mut e = engine();
    let topics = catalog(&[("t", 1, 2)]);
    let a = e.consumer_heartbeat(0, join("m1", &[], &topics)).unwrap();
    assert_eq!(a.assignment, Some(Assignment::new()));
    let mut later = beat("m1", a.member_epoch, &Assignment::new(), &topics);
    later.subscribed_topic_names = Some(vec!["t".into()]);
    let a = e.consumer_heartbeat(5, later).unwrap();
    let owned = a.assignment.unwrap();
    assert_eq!(owned.get(&topic(1)).map(|p| p.len()), Some(2));
}

#[test]
fn librdkafka_resubscribing_after_leaving_from_its_steady_state_rejoins() {
    // librdkafka's 0045_subscribe_many_updates with the consumer protocol:
    // unsubscribe() while the application's rebalance callback was due
    // left the group from the steady state; the next subscribe() sent its
    // topics at epoch 0 in an incremental heartbeat, which was refused as
    // malformed (INVALID_REQUEST, fatal to the client)
    let mut e = engine();
    let topics = catalog(&[("a", 1, 4), ("b", 2, 4)]);
    let j = e
        .consumer_heartbeat(0, join("m1", &["a"], &topics))
        .unwrap();
    assert_eq!(parts(j.assignment.as_ref().unwrap()), 4);
    let left = e
        .consumer_heartbeat(10, librdkafka_leave("m1", &topics))
        .unwrap();
    assert_eq!(left.member_epoch, LEAVE_EPOCH);
    let rejoin = librdkafka_resubscribe("m1", &["b"], &topics);
    let shape = rejoin.shape();
    assert_eq!(
        shape,
        "epoch=0 member_id=\"m1\" instance_id=null rack_id=null rebalance_timeout_ms=-1 \
         topic_names=[1] topic_regex=\"\" assignor=null owned=null"
    );
    let a = e.consumer_heartbeat(20, rejoin).expect(&shape);
    assert_eq!(a.member_id, "m1");
    assert!(a.member_epoch > j.member_epoch, "{a:?}");
    // a join is answered with the whole assignment: the new topic only
    let owned = a.assignment.expect("a join gets its assignment");
    assert_eq!(owned.keys().copied().collect::<Vec<_>>(), vec![topic(2)]);
    assert_eq!(parts(&owned), 4);
    // and it heartbeats on as any member
    let next = e
        .consumer_heartbeat(30, beat("m1", a.member_epoch, &owned, &topics))
        .unwrap();
    assert_eq!((next.member_epoch, next.assignment), (a.member_epoch, None));
    let d = e.consumer_describe(GROUP).unwrap().unwrap();
    assert_eq!(d.members.len(), 1);
    assert_eq!(d.members[0].subscribed_topic_names, vec!["b".to_owned()]);
    assert_eq!(d.members[0].subscribed_topic_regex, None);
}

#[test]
fn a_member_still_in_the_group_may_rejoin_in_librdkafkas_incremental_shape() {
    // the same heartbeat from a member the group still has (its leave was
    // lost): a join at epoch 0 that owns nothing, as after a lost answer
    let mut e = engine();
    let topics = catalog(&[("t", 1, 2)]);
    let j = e
        .consumer_heartbeat(0, join("m1", &["t"], &topics))
        .unwrap();
    let a = e
        .consumer_heartbeat(10, librdkafka_resubscribe("m1", &["t"], &topics))
        .unwrap();
    assert_eq!(a.member_epoch, j.member_epoch);
    assert_eq!(a.assignment, j.assignment);
}

#[test]
fn a_member_joining_without_a_rebalance_timeout_gets_the_clients_default() {
    // sessions longer than the default rebalance timeout, so that the
    // revocation's deadline is the engine's next one
    let mut e = GroupEngine::new(
        GroupLimits {
            consumer_session_timeout_ms: 1_000_000,
            ..GroupLimits::default()
        },
        "test",
    );
    e.hold(HeldSlots::all(4, 1));
    let topics = catalog(&[("t", 1, 4)]);
    let a = e
        .consumer_heartbeat(0, librdkafka_resubscribe("m1", &["t"], &topics))
        .unwrap();
    let owned = a.assignment.unwrap();
    assert_eq!(parts(&owned), 4);
    // m2 joins: m1 is asked to give up two partitions
    e.consumer_heartbeat(10, join("m2", &["t"], &topics))
        .unwrap();
    let r = e
        .consumer_heartbeat(20, beat("m1", a.member_epoch, &owned, &topics))
        .unwrap();
    assert_eq!(parts(&r.assignment.unwrap()), 2);
    // it has the clients' default rebalance timeout to do so (with none at
    // all it would be removed at the next tick)
    let deadline = 20 + i64::from(DEFAULT_REBALANCE_TIMEOUT_MS);
    assert_eq!(e.next_deadline(), Some(deadline));
    e.tick(deadline - 1);
    assert_eq!(
        e.consumer_describe(GROUP).unwrap().unwrap().members.len(),
        2
    );
    e.tick(deadline);
    assert_eq!(
        e.consumer_describe(GROUP).unwrap().unwrap().members.len(),
        1
    );
}
