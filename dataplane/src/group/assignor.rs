//! The server-side assignors of consumer groups (KIP-848): `uniform` (the
//! default) and `range`. Pure functions from the members' subscriptions and
//! the topics' partition counts to a target assignment.
//!
//! - `uniform` spreads every subscribed partition over the members
//!   subscribed to its topic so that member loads differ by at most one
//!   where subscriptions allow it, and is sticky: a partition stays with
//!   the member the previous target gave it unless that member lost its
//!   subscription or holds more than its share.
//! - `range` assigns each topic on its own: its partitions in contiguous
//!   ranges over its subscribers sorted by member id, the first ones one
//!   partition more when they do not divide evenly (members subscribed to
//!   the same topics with the same partition counts get the same partition
//!   numbers: co-partitioning, as Kafka's range assignor).

use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

/// Partitions by topic id.
pub type Assignment = BTreeMap<Uuid, BTreeSet<i32>>;

/// The assignors a consumer group may name in `ServerAssignor`.
pub const ASSIGNORS: [&str; 2] = ["uniform", "range"];
/// The assignor used when no member names one.
pub const DEFAULT_ASSIGNOR: &str = "uniform";

/// One member as an assignor sees it.
#[derive(Debug, Clone)]
pub struct AssignMember {
    pub member_id: String,
    /// Topic ids the member subscribes to (only existing topics).
    pub topics: BTreeSet<Uuid>,
    /// Its assignment in the previous target (for stickiness).
    pub previous: Assignment,
}

/// Computes a target assignment with the named assignor (`uniform` for
/// any other name).
pub fn assign(
    assignor: &str,
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    match assignor {
        "range" => range(members, partitions),
        _ => uniform(members, partitions),
    }
}

fn count(a: &Assignment) -> usize {
    a.values().map(BTreeSet::len).sum()
}

fn uniform(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect();
    if members.is_empty() {
        return out;
    }
    // every partition somebody subscribes to
    let mut wanted: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for m in members {
        for t in &m.topics {
            if let Some(&n) = partitions.get(t) {
                wanted.extend((0..n.max(0)).map(|p| (*t, p)));
            }
        }
    }
    let subscribers = |t: &Uuid| members.iter().filter(|m| m.topics.contains(t)).count();
    // a member's share: its fair part of each topic it subscribes to
    let share = |m: &AssignMember| -> usize {
        let total: f64 = m
            .topics
            .iter()
            .filter_map(|t| partitions.get(t).map(|&n| (t, n)))
            .map(|(t, n)| f64::from(n.max(0)) / subscribers(t).max(1) as f64)
            .sum();
        total.ceil() as usize
    };
    let shares: BTreeMap<&str, usize> = members
        .iter()
        .map(|m| (m.member_id.as_str(), share(m)))
        .collect();
    // 1. keep what the previous target gave, within the share
    let mut taken: BTreeSet<(Uuid, i32)> = BTreeSet::new();
    for m in members {
        let Some(mine) = out.get_mut(&m.member_id) else {
            continue;
        };
        let cap = shares.get(m.member_id.as_str()).copied().unwrap_or(0);
        for (t, ps) in &m.previous {
            if !m.topics.contains(t) {
                continue;
            }
            for &p in ps {
                if count(mine) >= cap {
                    break;
                }
                if wanted.contains(&(*t, p)) && taken.insert((*t, p)) {
                    mine.entry(*t).or_default().insert(p);
                }
            }
        }
    }
    // 2. the rest, each to the least loaded member subscribed to its topic
    for &(t, p) in wanted.iter().filter(|tp| !taken.contains(tp)) {
        let pick = members
            .iter()
            .filter(|m| m.topics.contains(&t))
            .min_by_key(|m| (out.get(&m.member_id).map_or(0, count), m.member_id.clone()));
        if let Some(m) = pick {
            if let Some(mine) = out.get_mut(&m.member_id) {
                mine.entry(t).or_default().insert(p);
            }
        }
    }
    // 3. even out: move from a member with two more than another that can
    //    take one of its partitions (bounded: each move lowers the spread)
    for _ in 0..wanted.len() {
        let loads: Vec<(String, usize)> =
            out.iter().map(|(id, a)| (id.clone(), count(a))).collect();
        let mut moved = false;
        'search: for (heavy, hl) in loads.iter().rev() {
            for (light, ll) in &loads {
                if hl <= &(ll + 1) {
                    continue;
                }
                let Some(light_member) = members.iter().find(|m| &m.member_id == light) else {
                    continue;
                };
                let candidate = out.get(heavy).and_then(|a| {
                    a.iter()
                        .filter(|(t, _)| light_member.topics.contains(t))
                        .find_map(|(t, ps)| ps.iter().next_back().map(|p| (*t, *p)))
                });
                if let Some((t, p)) = candidate {
                    if let Some(h) = out.get_mut(heavy) {
                        if let Some(ps) = h.get_mut(&t) {
                            ps.remove(&p);
                            if ps.is_empty() {
                                h.remove(&t);
                            }
                        }
                    }
                    if let Some(l) = out.get_mut(light) {
                        l.entry(t).or_default().insert(p);
                    }
                    moved = true;
                    break 'search;
                }
            }
        }
        if !moved {
            break;
        }
    }
    out
}

fn range(
    members: &[AssignMember],
    partitions: &BTreeMap<Uuid, i32>,
) -> BTreeMap<String, Assignment> {
    let mut out: BTreeMap<String, Assignment> = members
        .iter()
        .map(|m| (m.member_id.clone(), Assignment::new()))
        .collect();
    for (t, &n) in partitions {
        let mut subs: Vec<&str> = members
            .iter()
            .filter(|m| m.topics.contains(t))
            .map(|m| m.member_id.as_str())
            .collect();
        if subs.is_empty() || n <= 0 {
            continue;
        }
        subs.sort_unstable();
        let k = subs.len() as i32;
        let (each, extra) = (n / k, n % k);
        let mut next = 0;
        for (i, id) in subs.iter().enumerate() {
            let len = each + i32::from((i as i32) < extra);
            if len > 0 {
                if let Some(a) = out.get_mut(*id) {
                    a.entry(*t).or_default().extend(next..next + len);
                }
            }
            next += len;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, topics: &[Uuid], previous: Assignment) -> AssignMember {
        AssignMember {
            member_id: id.into(),
            topics: topics.iter().copied().collect(),
            previous,
        }
    }

    fn every_partition_once(out: &BTreeMap<String, Assignment>, partitions: &BTreeMap<Uuid, i32>) {
        let mut seen = BTreeSet::new();
        for a in out.values() {
            for (t, ps) in a {
                for p in ps {
                    assert!(seen.insert((*t, *p)), "{t}/{p} assigned twice: {out:?}");
                }
            }
        }
        let all: usize = partitions.values().map(|n| *n as usize).sum();
        assert_eq!(seen.len(), all, "{out:?}");
    }

    #[test]
    fn uniform_balances_to_within_one_and_keeps_partitions_where_they_were() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let partitions = BTreeMap::from([(a, 5), (b, 4)]);
        let first = assign(
            "uniform",
            &[
                member("m1", &[a, b], Assignment::new()),
                member("m2", &[a, b], Assignment::new()),
            ],
            &partitions,
        );
        every_partition_once(&first, &partitions);
        let loads: Vec<usize> = first.values().map(count).collect();
        assert!(
            loads.iter().max().unwrap() - loads.iter().min().unwrap() <= 1,
            "{first:?}"
        );
        // a third member joins: the first two keep what they can
        let second = assign(
            "uniform",
            &[
                member("m1", &[a, b], first["m1"].clone()),
                member("m2", &[a, b], first["m2"].clone()),
                member("m3", &[a, b], Assignment::new()),
            ],
            &partitions,
        );
        every_partition_once(&second, &partitions);
        for m in ["m1", "m2"] {
            for (t, ps) in &second[m] {
                assert!(
                    ps.is_subset(&first[m][t]),
                    "{m} got partitions it did not have: {second:?}"
                );
            }
        }
        assert_eq!(count(&second["m3"]), 3);
    }

    #[test]
    fn uniform_gives_a_topic_only_to_its_subscribers() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let partitions = BTreeMap::from([(a, 4), (b, 2)]);
        let out = assign(
            "uniform",
            &[
                member("m1", &[a], Assignment::new()),
                member("m2", &[a, b], Assignment::new()),
            ],
            &partitions,
        );
        every_partition_once(&out, &partitions);
        assert!(!out["m1"].contains_key(&b));
        assert_eq!(count(&out["m1"]), 3, "{out:?}");
    }

    #[test]
    fn range_gives_contiguous_ranges_and_co_partitions() {
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        let partitions = BTreeMap::from([(a, 5), (b, 5)]);
        let out = assign(
            "range",
            &[
                member("m2", &[a, b], Assignment::new()),
                member("m1", &[a, b], Assignment::new()),
            ],
            &partitions,
        );
        every_partition_once(&out, &partitions);
        assert_eq!(out["m1"][&a], BTreeSet::from([0, 1, 2]));
        assert_eq!(out["m2"][&a], BTreeSet::from([3, 4]));
        assert_eq!(out["m1"][&a], out["m1"][&b]);
    }
}
