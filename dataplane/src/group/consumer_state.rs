//! The state of one KIP-848 consumer group and its members, and how a
//! member is reconciled towards its target assignment (see `consumer` for
//! the protocol around it).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use uuid::Uuid;

use super::assignor::{self, AssignMember, Assignment, DEFAULT_ASSIGNOR};
use super::types::GroupState;

/// The topics a heartbeat is judged against: name → (id, partitions).
pub type TopicCatalog = BTreeMap<String, (Uuid, i32)>;

/// Kafka matches a subscription pattern against the whole topic name.
pub(super) fn anchored(pattern: &str) -> String {
    format!("^(?:{pattern})$")
}

/// Where a member stands in its reconciliation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    UnrevokedPartitions,
    UnreleasedPartitions,
}

/// The rebalance timeout of a member that joined without one: the
/// clients' default `max.poll.interval.ms`, which Kafka's clients and
/// librdkafka send as their rebalance timeout.
pub(super) const DEFAULT_REBALANCE_TIMEOUT_MS: i32 = 300_000;

#[derive(Debug, Clone)]
pub(super) struct ConsumerMember {
    pub(super) epoch: i32,
    pub(super) previous_epoch: i32,
    pub(super) state: MemberState,
    pub(super) instance_id: Option<String>,
    pub(super) rack_id: Option<String>,
    pub(super) client_id: String,
    pub(super) client_host: String,
    pub(super) rebalance_timeout_ms: i32,
    pub(super) names: Vec<String>,
    pub(super) regex: Option<String>,
    pub(super) assignor: Option<String>,
    pub(super) assigned: Assignment,
    pub(super) revoking: Assignment,
    pub(super) session_deadline: i64,
    pub(super) revoke_deadline: Option<i64>,
}

impl ConsumerMember {
    pub(super) fn new(now_ms: i64) -> Self {
        ConsumerMember {
            epoch: 0,
            previous_epoch: 0,
            state: MemberState::Stable,
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: DEFAULT_REBALANCE_TIMEOUT_MS,
            names: Vec::new(),
            regex: None,
            assignor: None,
            assigned: Assignment::new(),
            revoking: Assignment::new(),
            session_deadline: now_ms,
            revoke_deadline: None,
        }
    }

    /// The topics this member subscribes to among `topics`: its names, and
    /// what its pattern matched when the group last resolved it.
    pub(super) fn subscribed<'a>(
        &self,
        topics: &'a TopicCatalog,
        resolved: &HashMap<String, BTreeSet<String>>,
    ) -> Vec<(&'a String, Uuid, i32)> {
        let matched = self.regex.as_ref().and_then(|r| resolved.get(r));
        topics
            .iter()
            .filter(|(name, _)| {
                self.names.iter().any(|n| n == *name) || matched.is_some_and(|m| m.contains(*name))
            })
            .map(|(name, (id, n))| (name, *id, *n))
            .collect()
    }
}

/// One consumer group.
#[derive(Debug, Default)]
pub(super) struct ConsumerGroup {
    pub(super) epoch: i32,
    pub(super) assignment_epoch: i32,
    pub(super) members: BTreeMap<String, ConsumerMember>,
    pub(super) static_members: HashMap<String, String>,
    pub(super) target: BTreeMap<String, Assignment>,
    /// The subscribed topics as last resolved: name → (id, partitions).
    pub(super) metadata: BTreeMap<String, (Uuid, i32)>,
    /// Who owns each partition now (assigned or still revoking).
    pub(super) owners: HashMap<(Uuid, i32), String>,
    pub(super) assignor: String,
    /// The topics each subscription pattern matched when last resolved.
    /// A pattern is resolved from the heartbeat after the one that brought
    /// it on, and again on every heartbeat, as Kafka resolves patterns off
    /// the heartbeat path: a member subscribing to names and a pattern gets
    /// the named topics first, the matched ones a heartbeat later.
    pub(super) resolved: HashMap<String, BTreeSet<String>>,
}

impl ConsumerGroup {
    /// Kafka's state name of the group.
    pub(super) fn state(&self) -> GroupState {
        if self.members.is_empty() {
            GroupState::Empty
        } else if self.epoch > self.assignment_epoch {
            GroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.epoch != self.assignment_epoch || m.state != MemberState::Stable)
        {
            GroupState::Reconciling
        } else {
            GroupState::Stable
        }
    }

    pub(super) fn own(&mut self, member_id: &str, m: &ConsumerMember) {
        self.owners.retain(|_, owner| owner != member_id);
        for a in [&m.assigned, &m.revoking] {
            for (t, ps) in a {
                for p in ps {
                    self.owners.insert((*t, *p), member_id.to_string());
                }
            }
        }
    }

    /// Removes a member: its partitions are free, the group epoch moves on.
    pub(super) fn remove(&mut self, member_id: &str) {
        if let Some(m) = self.members.remove(member_id) {
            if let Some(inst) = m.instance_id {
                if self
                    .static_members
                    .get(&inst)
                    .is_some_and(|id| id == member_id)
                {
                    self.static_members.remove(&inst);
                }
            }
        }
        self.owners.retain(|_, owner| owner != member_id);
        self.target.remove(member_id);
        self.epoch += 1;
    }

    /// The subscribed topics of the members (with `extra` in place of its
    /// own entry) among `topics`.
    pub(super) fn resolve(&self, topics: &TopicCatalog) -> BTreeMap<String, (Uuid, i32)> {
        let mut out = BTreeMap::new();
        for m in self.members.values() {
            for (name, id, n) in m.subscribed(topics, &self.resolved) {
                out.insert(name.clone(), (id, n));
            }
        }
        out
    }

    /// Matches the members' patterns against `topics` again (patterns no
    /// member uses any more are forgotten).
    pub(super) fn resolve_patterns(&mut self, topics: &TopicCatalog) {
        let patterns: BTreeSet<&String> = self
            .members
            .values()
            .filter_map(|m| m.regex.as_ref())
            .collect();
        let mut resolved = HashMap::new();
        for p in patterns {
            let Ok(re) = regex::Regex::new(&anchored(p)) else {
                continue;
            };
            let matched = topics.keys().filter(|t| re.is_match(t)).cloned().collect();
            resolved.insert(p.clone(), matched);
        }
        self.resolved = resolved;
    }

    pub(super) fn compute_target(&mut self, topics: &TopicCatalog) {
        let members: Vec<AssignMember> = self
            .members
            .iter()
            .map(|(id, m)| AssignMember {
                member_id: id.clone(),
                topics: m
                    .subscribed(topics, &self.resolved)
                    .into_iter()
                    .map(|(_, id, _)| id)
                    .collect(),
                previous: self.target.get(id).cloned().unwrap_or_default(),
            })
            .collect();
        let partitions: BTreeMap<Uuid, i32> = self.metadata.values().copied().collect();
        self.assignor = self
            .members
            .values()
            .find_map(|m| m.assignor.clone())
            .unwrap_or_else(|| DEFAULT_ASSIGNOR.to_string());
        self.target = assignor::assign(&self.assignor, &members, &partitions);
        self.assignment_epoch = self.epoch;
    }

    /// Moves `m` towards its target (Kafka's `CurrentAssignmentBuilder`).
    pub(super) fn reconcile(
        &self,
        member_id: &str,
        m: &mut ConsumerMember,
        owned: Option<&Assignment>,
        now_ms: i64,
    ) {
        let target_epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let owns_any = |of: &Assignment| match owned {
            None => true,
            Some(o) => of
                .iter()
                .any(|(t, ps)| o.get(t).is_some_and(|os| !os.is_disjoint(ps))),
        };
        let from_epoch = match m.state {
            MemberState::Stable if m.epoch == target_epoch => return,
            MemberState::Stable => m.epoch,
            MemberState::UnrevokedPartitions => {
                if owns_any(&m.revoking) {
                    return;
                }
                m.epoch + 1
            }
            MemberState::UnreleasedPartitions => m.epoch,
        };
        let mut assigned = Assignment::new();
        let mut revoking = Assignment::new();
        let mut pending = Assignment::new();
        let mut unreleased = false;
        let topics: BTreeSet<Uuid> = target.keys().chain(m.assigned.keys()).copied().collect();
        for t in topics {
            let want = target.get(&t).cloned().unwrap_or_default();
            let have = m.assigned.get(&t).cloned().unwrap_or_default();
            let keep: BTreeSet<i32> = have.intersection(&want).copied().collect();
            let give_up: BTreeSet<i32> = have.difference(&keep).copied().collect();
            let mut take: BTreeSet<i32> = want.difference(&keep).copied().collect();
            let before = take.len();
            take.retain(|p| {
                self.owners
                    .get(&(t, *p))
                    .is_none_or(|owner| owner == member_id)
            });
            unreleased |= take.len() != before;
            if !keep.is_empty() {
                assigned.insert(t, keep);
            }
            if !give_up.is_empty() {
                revoking.insert(t, give_up);
            }
            if !take.is_empty() {
                pending.insert(t, take);
            }
        }
        m.previous_epoch = m.epoch;
        if !revoking.is_empty() && owns_any(&revoking) {
            m.state = MemberState::UnrevokedPartitions;
            m.epoch = from_epoch;
            m.assigned = assigned;
            m.revoking = revoking;
            // (again for every new revocation, as Kafka reschedules it)
            m.revoke_deadline = Some(now_ms + i64::from(m.rebalance_timeout_ms.max(0)));
            return;
        }
        for (t, ps) in pending {
            assigned.entry(t).or_default().extend(ps);
        }
        m.state = if unreleased {
            MemberState::UnreleasedPartitions
        } else {
            MemberState::Stable
        };
        m.epoch = target_epoch;
        m.assigned = assigned;
        m.revoking = Assignment::new();
        m.revoke_deadline = None;
    }
}
