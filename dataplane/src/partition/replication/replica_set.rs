//! The leader's view of a partition's replicas: how far each follower has
//! fetched, which of them are in sync, where the high watermark may move,
//! and whether acks=all writes may be taken. A pure engine: events come in
//! with `now_ms`, decisions come out; the partition task owns one per
//! partition it leads and performs what it decides.
//!
//! The rules, as Kafka's (KIP-101, KIP-320, KIP-497) and in this order:
//!
//! 1. A follower's fetch at `fetch_offset` says it holds every offset below
//!    it: that is its log end (LEO) as the leader knows it. Only the
//!    assigned replicas may fetch.
//! 2. A follower is *caught up* at a fetch when it asks for the leader's
//!    log end, or at the previous fetch's time when it asks for at least
//!    the log end the leader had then (it read everything there was).
//! 3. The high watermark is the smallest LEO over the in-sync replicas,
//!    the leader counting with what it may expose itself (its log end, or
//!    what the last durability point covered with `write.caching=false`).
//!    While an ISR change is proposed but not yet committed, the larger of
//!    the two sets counts (a member being added must already hold the data
//!    before acks=all writes count it). A follower that has not fetched
//!    since this leader took over holds nothing as far as the leader knows,
//!    so the high watermark waits for it (or for it to leave the ISR).
//! 4. The ISR shrinks by the followers not caught up for longer than
//!    `replica.lag.time.max.ms`, and grows by a follower whose LEO reached
//!    both the high watermark and the offset where this leader's epoch
//!    began, and that is neither fenced (KIP-841: the metastore fenced its
//!    agent, whose lease ran out or which shut down; it would refuse the
//!    change) nor barred: a follower whose addition the
//!    metastore refused (it is fenced, say, having shut down) is barred
//!    until it fetches again, so a replica that stopped fetching is not
//!    proposed again and again, each time holding the high watermark
//!    (rule 3) until the refusal arrives. One change is in flight at a
//!    time; the metastore checks it
//!    against the leader epoch and partition epoch, so a deposed leader's
//!    proposal, or one made before a change the leader had not seen, is
//!    refused.
//! 6. A proposed change stays pending (and counted, rule 3) until its
//!    outcome is known: the metastore answered (applied, or refused), or
//!    the metadata shows a later partition epoch (then it applied, or can
//!    no longer apply). When an attempt's outcome is unknown (a timeout
//!    while the metastore changed leaders), the same change is proposed
//!    again at the same partition epoch after [`ISR_RETRY_MS`], so it
//!    applies at most once; a retry reaches the metastore leader after
//!    the attempt it repeats, so its answer settles both.
//! 5. acks=all writes are refused with NOT_ENOUGH_REPLICAS while the ISR is
//!    smaller than `min.insync.replicas`; one whose offsets the high
//!    watermark passed while the ISR had shrunk below it is answered
//!    NOT_ENOUGH_REPLICAS_AFTER_APPEND (the data is kept).

use std::collections::BTreeMap;

use metastore::AgentId;

/// What the leader knows of one follower.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FollowerState {
    /// Offsets below this are on the follower; `None` until it fetches
    /// from this leader.
    pub log_end: Option<i64>,
    /// When it was last caught up (`now_ms` of that fetch); starts at the
    /// leadership's start, so a silent follower has a full lag period.
    pub caught_up_ms: i64,
    last_fetch_ms: i64,
    /// The leader's log end at the follower's previous fetch.
    leader_end_at_last_fetch: i64,
    /// The metastore refused to add it to the ISR since its last fetch.
    barred: bool,
}

/// Why a follower's fetch is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchRefused {
    #[error("agent {0} is not a replica of this partition")]
    NotAReplica(AgentId),
}

/// Why an acks=all write is refused or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum NotEnoughReplicas {
    #[error("{in_sync} in-sync replicas, min.insync.replicas is {required}")]
    Before { in_sync: usize, required: usize },
    #[error(
        "appended, but only {in_sync} in-sync replicas hold it; min.insync.replicas is {required}"
    )]
    AfterAppend { in_sync: usize, required: usize },
}

/// The partition's replicas as the metastore has them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assignment {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub replicas: Vec<AgentId>,
    pub isr: Vec<AgentId>,
}

/// An ISR the leader asks the metastore to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsrChange {
    pub leader_epoch: i32,
    pub partition_epoch: i32,
    pub isr: Vec<AgentId>,
}

/// How long a leader waits before proposing again an ISR change whose
/// last attempt has an unknown outcome.
pub const ISR_RETRY_MS: i64 = 200;

/// An ISR change proposed to the metastore, outcome not known yet.
#[derive(Debug, Clone)]
struct Pending {
    isr: Vec<AgentId>,
    /// The partition epoch it was proposed at, the only one it applies at.
    partition_epoch: i32,
    /// `None` while an attempt awaits its answer; else when to try again
    /// (the last attempt's outcome is unknown).
    retry_at_ms: Option<i64>,
}

/// The leader's replica bookkeeping for one partition.
#[derive(Debug, Clone)]
pub struct ReplicaSet {
    me: AgentId,
    assignment: Assignment,
    followers: BTreeMap<AgentId, FollowerState>,
    /// Proposed to the metastore and not yet known to be applied or refused.
    pending: Option<Pending>,
    /// The leader's log end when its epoch began.
    epoch_start_offset: i64,
    min_insync: usize,
    lag_max_ms: i64,
    /// Fenced replicas, which may not join (rule 4).
    ineligible: Vec<AgentId>,
}

impl ReplicaSet {
    /// Leadership begins at `now_ms` with the local log ending at `log_end`.
    pub fn new(
        me: AgentId,
        assignment: Assignment,
        log_end: i64,
        min_insync: usize,
        lag_max_ms: i64,
        now_ms: i64,
    ) -> ReplicaSet {
        let followers = assignment
            .replicas
            .iter()
            .filter(|&&r| r != me)
            .map(|&r| {
                (
                    r,
                    FollowerState {
                        log_end: None,
                        caught_up_ms: now_ms,
                        last_fetch_ms: now_ms,
                        leader_end_at_last_fetch: log_end,
                        barred: false,
                    },
                )
            })
            .collect();
        ReplicaSet {
            me,
            assignment,
            followers,
            pending: None,
            epoch_start_offset: log_end,
            min_insync: min_insync.max(1),
            lag_max_ms,
            ineligible: Vec::new(),
        }
    }

    /// The replicas whose agents the metastore fenced (rule 4).
    pub fn set_ineligible(&mut self, fenced: Vec<AgentId>) {
        self.ineligible = fenced;
    }

    pub fn assignment(&self) -> &Assignment {
        &self.assignment
    }

    pub fn leader_epoch(&self) -> i32 {
        self.assignment.leader_epoch
    }

    /// The log end this node took over with at this leader epoch.
    pub fn epoch_start_offset(&self) -> i64 {
        self.epoch_start_offset
    }

    pub fn follower(&self, id: AgentId) -> Option<&FollowerState> {
        self.followers.get(&id)
    }

    pub fn set_min_insync(&mut self, min_insync: usize) {
        self.min_insync = min_insync.max(1);
    }

    pub fn set_lag_max_ms(&mut self, lag_max_ms: i64) {
        self.lag_max_ms = lag_max_ms;
    }

    /// Rule 1 and 2: a follower fetched at `fetch_offset` while the leader's
    /// log ended at `leader_end`.
    pub fn on_fetch(
        &mut self,
        follower: AgentId,
        fetch_offset: i64,
        leader_end: i64,
        now_ms: i64,
    ) -> Result<(), FetchRefused> {
        let f = self
            .followers
            .get_mut(&follower)
            .ok_or(FetchRefused::NotAReplica(follower))?;
        if fetch_offset >= leader_end {
            f.caught_up_ms = now_ms;
        } else if fetch_offset >= f.leader_end_at_last_fetch {
            f.caught_up_ms = f.caught_up_ms.max(f.last_fetch_ms);
        }
        f.log_end = Some(fetch_offset);
        f.last_fetch_ms = now_ms;
        f.barred = false;
        f.leader_end_at_last_fetch = leader_end;
        Ok(())
    }

    /// The members whose log ends bound the high watermark (rule 3).
    fn counted_isr(&self) -> Vec<AgentId> {
        let mut set = self.assignment.isr.clone();
        if let Some(p) = &self.pending {
            for r in &p.isr {
                if !set.contains(r) {
                    set.push(*r);
                }
            }
        }
        set
    }

    /// Rule 3: the high watermark allowed when the leader itself exposes
    /// up to `leader_visible_end`.
    pub fn high_watermark(&self, leader_visible_end: i64) -> i64 {
        self.counted_isr()
            .iter()
            .map(|r| {
                if *r == self.me {
                    leader_visible_end
                } else {
                    self.followers
                        .get(r)
                        .and_then(|f| f.log_end)
                        .unwrap_or(i64::MIN)
                }
            })
            .min()
            .unwrap_or(leader_visible_end)
            .min(leader_visible_end)
    }

    /// Rule 4: the ISR to propose now, if any (and marks it pending); or,
    /// rule 6, the pending change again once its retry is due.
    pub fn propose_isr_change(&mut self, hw: i64, now_ms: i64) -> Option<IsrChange> {
        if let Some(p) = &mut self.pending {
            if p.retry_at_ms.is_some_and(|at| now_ms >= at) {
                p.retry_at_ms = None;
                return Some(IsrChange {
                    leader_epoch: self.assignment.leader_epoch,
                    partition_epoch: p.partition_epoch,
                    isr: p.isr.clone(),
                });
            }
            return None;
        }
        let isr = &self.assignment.isr;
        let lagging = |r: &AgentId| {
            *r != self.me
                && self
                    .followers
                    .get(r)
                    .is_none_or(|f| now_ms - f.caught_up_ms > self.lag_max_ms)
        };
        // a replica joins only while it is fetching: one that stopped keeps
        // the log end it last reported, and with no new writes that end
        // stays at the high watermark, so without this it would flap in and
        // out of the ISR and let acks=all writes in that it never confirms
        let joining = |r: &AgentId| {
            !isr.contains(r)
                && !self.ineligible.contains(r)
                && self.followers.get(r).is_some_and(|f| {
                    !f.barred
                        && now_ms - f.caught_up_ms <= self.lag_max_ms
                        && f.log_end
                            .is_some_and(|e| e >= hw && e >= self.epoch_start_offset)
                })
        };
        let mut next: Vec<AgentId> = isr.iter().copied().filter(|r| !lagging(r)).collect();
        if !next.contains(&self.me) {
            next.insert(0, self.me);
        }
        // grow or shrink, one at a time; shrinking first keeps acks=all moving
        if next.len() == isr.len() {
            let add: Vec<AgentId> = self
                .assignment
                .replicas
                .iter()
                .copied()
                .filter(joining)
                .collect();
            if add.is_empty() {
                return None;
            }
            next.extend(add);
        }
        if &next == isr {
            return None;
        }
        self.pending = Some(Pending {
            isr: next.clone(),
            partition_epoch: self.assignment.partition_epoch,
            retry_at_ms: None,
        });
        Some(IsrChange {
            leader_epoch: self.assignment.leader_epoch,
            partition_epoch: self.assignment.partition_epoch,
            isr: next,
        })
    }

    /// The pending change `change` is, if it is the one pending.
    fn pending_for(&mut self, change: &IsrChange) -> Option<&mut Pending> {
        if change.leader_epoch != self.assignment.leader_epoch {
            return None;
        }
        self.pending
            .as_mut()
            .filter(|p| p.partition_epoch == change.partition_epoch && p.isr == change.isr)
    }

    /// The metastore refused `change` or certainly never applied it: it is
    /// no longer pending, and another change may be proposed.
    pub fn isr_change_failed(&mut self, change: &IsrChange) {
        if self.pending_for(change).is_some() {
            self.pending = None;
            // rule 4: those it would have added wait for their next fetch
            for r in &change.isr {
                if !self.assignment.isr.contains(r) {
                    if let Some(f) = self.followers.get_mut(r) {
                        f.barred = true;
                    }
                }
            }
        }
    }

    /// The outcome of proposing `change` is unknown (rule 6): it may apply
    /// yet, so it stays pending and counted, and is proposed again at
    /// `now_ms + ISR_RETRY_MS`.
    pub fn isr_change_unknown(&mut self, change: &IsrChange, now_ms: i64) {
        if let Some(p) = self.pending_for(change) {
            p.retry_at_ms = Some(now_ms.saturating_add(ISR_RETRY_MS));
        }
    }

    /// The metastore's current view of the partition. Returns false when
    /// this node no longer leads at this epoch (the caller stops leading).
    pub fn on_assignment(&mut self, a: Assignment) -> bool {
        if a.leader_epoch != self.assignment.leader_epoch {
            return false;
        }
        // a later partition epoch settles the pending change: it applied,
        // or the metastore refuses it from now on
        if self
            .pending
            .as_ref()
            .is_some_and(|p| a.partition_epoch != p.partition_epoch)
        {
            self.pending = None;
        }
        for r in &a.replicas {
            if *r != self.me && !self.followers.contains_key(r) {
                self.followers.insert(
                    *r,
                    FollowerState {
                        log_end: None,
                        caught_up_ms: i64::MIN / 2,
                        last_fetch_ms: i64::MIN / 2,
                        leader_end_at_last_fetch: i64::MAX,
                        barred: false,
                    },
                );
            }
        }
        self.followers.retain(|r, _| a.replicas.contains(r));
        self.assignment = a;
        true
    }

    /// Rule 5, before appending an acks=all write.
    pub fn check_acks_all(&self) -> Result<(), NotEnoughReplicas> {
        let in_sync = self.assignment.isr.len();
        if in_sync < self.min_insync {
            return Err(NotEnoughReplicas::Before {
                in_sync,
                required: self.min_insync,
            });
        }
        Ok(())
    }

    /// Rule 5, when the high watermark passes an acks=all write.
    pub fn check_acks_all_after_append(&self) -> Result<(), NotEnoughReplicas> {
        let in_sync = self.assignment.isr.len();
        if in_sync < self.min_insync {
            return Err(NotEnoughReplicas::AfterAppend {
                in_sync,
                required: self.min_insync,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
#[path = "replica_set_tests.rs"]
mod tests;
