//! Agents and partition leadership: registration, heartbeats, fencing,
//! elections and ISR changes.
//!
//! A partition's lease is its leader agent's lease: one heartbeat keeps all
//! of an agent's partitions (as KRaft's broker session does). Deciding *when*
//! a lease ran out needs a clock and lives in [`crate::lease`]; this module
//! only checks that the decision is still valid when it is applied.

use std::collections::BTreeSet;

use uuid::Uuid;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{
    AgentId, AgentInfo, AgentRegistration, ElectionType, LeaderAndEpoch, MetaEvent, PartitionInfo,
};

/// Kafka clients carry broker ids as `i32`.
pub const MAX_AGENT_ID: AgentId = i32::MAX as AgentId;

impl MetaState {
    pub(crate) fn is_live(&self, agent: AgentId) -> bool {
        self.agents.get(&agent).is_some_and(|a| !a.fenced)
    }

    pub(super) fn register_agent(
        &mut self,
        now_ms: i64,
        reg: AgentRegistration,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if reg.id > MAX_AGENT_ID {
            return Err(MetaError::invalid_request(format!(
                "agent id {} does not fit a Kafka broker id",
                reg.id
            )));
        }
        let info = match self.agents.get_mut(&reg.id) {
            Some(a) => {
                a.addrs = reg.addrs;
                a.rack = reg.rack;
                a.registered_ms = now_ms;
                a.last_heartbeat_ms = now_ms;
                a.fenced = false;
                a.incarnation += 1;
                a.clone()
            }
            None => {
                let a = AgentInfo {
                    id: reg.id,
                    addrs: reg.addrs,
                    rack: reg.rack,
                    registered_ms: now_ms,
                    last_heartbeat_ms: now_ms,
                    fenced: false,
                    incarnation: 1,
                };
                self.agents.insert(reg.id, a.clone());
                a
            }
        };
        events.push(MetaEvent::AgentRegistered { agent_id: info.id });
        Ok(CommandOutput::Agent(info))
    }

    pub(super) fn heartbeat(
        &mut self,
        now_ms: i64,
        agent_id: AgentId,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        a.last_heartbeat_ms = a.last_heartbeat_ms.max(now_ms);
        if a.fenced {
            a.fenced = false;
            events.push(MetaEvent::AgentUnfenced { agent_id });
        }
        Ok(CommandOutput::Done)
    }

    pub(super) fn fence_agent(
        &mut self,
        agent_id: AgentId,
        observed_heartbeat_ms: i64,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let a = self
            .agents
            .get_mut(&agent_id)
            .ok_or(MetaError::UnknownAgent { agent_id })?;
        if a.last_heartbeat_ms != observed_heartbeat_ms {
            return Err(MetaError::StaleRequest {
                reason: format!("agent {agent_id} heartbeated after its lease was judged expired"),
            });
        }
        if !a.fenced {
            a.fenced = true;
            events.push(MetaEvent::AgentFenced { agent_id });
        }
        Ok(CommandOutput::Done)
    }

    fn partition_mut(
        &mut self,
        topic_id: Uuid,
        partition: i32,
    ) -> Result<(String, &mut PartitionInfo), MetaError> {
        let topic = self.topic_mut_by_id(topic_id)?;
        let name = topic.name.clone();
        let p = usize::try_from(partition)
            .ok()
            .and_then(|i| topic.partitions.get_mut(i));
        match p {
            Some(p) => Ok((name, p)),
            None => Err(MetaError::UnknownPartition {
                topic: name,
                partition,
            }),
        }
    }

    /// Validates an ISR against a partition's replicas; returns it unchanged.
    fn check_isr(&self, topic: &str, p: &PartitionInfo, isr: &[AgentId]) -> Result<(), MetaError> {
        let bad = |reason: String| {
            Err(MetaError::IneligibleReplica {
                topic: topic.to_owned(),
                partition: p.index,
                reason,
            })
        };
        if isr.is_empty() {
            return bad("the ISR may not be empty".to_owned());
        }
        let distinct: BTreeSet<_> = isr.iter().collect();
        if distinct.len() != isr.len() {
            return bad("the ISR lists an agent twice".to_owned());
        }
        if let Some(a) = isr.iter().find(|a| !p.replicas.contains(a)) {
            return bad(format!("agent {a} is not a replica"));
        }
        Ok(())
    }

    fn set_leadership(
        topic_id: Uuid,
        topic: &str,
        p: &mut PartitionInfo,
        leader: Option<AgentId>,
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> LeaderAndEpoch {
        let leader_changed = p.leader != leader;
        let isr_changed = p.isr != isr;
        if leader_changed {
            p.leader = leader;
            p.leader_epoch += 1;
            events.push(MetaEvent::LeaderChanged {
                topic_id,
                topic: topic.to_owned(),
                partition: p.index,
                leader,
                leader_epoch: p.leader_epoch,
            });
        }
        if isr_changed {
            p.isr = isr;
            events.push(MetaEvent::IsrChanged {
                topic_id,
                topic: topic.to_owned(),
                partition: p.index,
                isr: p.isr.clone(),
            });
        }
        if leader_changed || isr_changed {
            p.partition_epoch += 1;
        }
        LeaderAndEpoch {
            leader: p.leader,
            leader_epoch: p.leader_epoch,
        }
    }

    pub(super) fn elect_leader(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        election: ElectionType,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let live: BTreeSet<AgentId> = self.live_agents().into_iter().collect();
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let not_needed = || {
            Err(MetaError::ElectionNotNeeded {
                topic: topic.clone(),
                partition,
            })
        };
        let unavailable = |reason: String| {
            Err(MetaError::EligibleLeadersNotAvailable {
                topic: topic.clone(),
                partition,
                reason,
            })
        };
        let (leader, isr) = match election {
            ElectionType::Preferred => {
                let preferred = p.replicas[0];
                if p.leader == Some(preferred) {
                    return not_needed();
                }
                if !live.contains(&preferred) || !p.isr.contains(&preferred) {
                    return unavailable(format!(
                        "preferred replica {preferred} is not alive and in sync"
                    ));
                }
                (preferred, p.isr.clone())
            }
            ElectionType::Unclean => {
                if p.leader.is_some_and(|l| live.contains(&l)) {
                    return not_needed();
                }
                let in_sync = p
                    .replicas
                    .iter()
                    .copied()
                    .find(|a| live.contains(a) && p.isr.contains(a));
                match in_sync {
                    Some(a) => (a, p.isr.clone()),
                    None => match p.replicas.iter().copied().find(|a| live.contains(a)) {
                        Some(a) => (a, vec![a]),
                        None => return unavailable("no replica is alive".to_owned()),
                    },
                }
            }
        };
        let out = Self::set_leadership(topic_id, &topic, p, Some(leader), isr, events);
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn reassign_leadership(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        expected_partition_epoch: i32,
        leader: Option<AgentId>,
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let leader_live = leader.is_none_or(|l| self.is_live(l));
        let snapshot = {
            let (topic, p) = self.partition_mut(topic_id, partition)?;
            (topic, p.clone())
        };
        let (topic, current) = snapshot;
        if current.partition_epoch != expected_partition_epoch {
            return Err(MetaError::StaleRequest {
                reason: format!(
                    "{topic}-{partition} moved to partition epoch {} since epoch {expected_partition_epoch} was observed",
                    current.partition_epoch
                ),
            });
        }
        self.check_isr(&topic, &current, &isr)?;
        if let Some(l) = leader {
            if !isr.contains(&l) || !leader_live {
                return Err(MetaError::IneligibleReplica {
                    topic,
                    partition,
                    reason: format!("new leader {l} must be alive and in the ISR"),
                });
            }
        }
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let out = Self::set_leadership(topic_id, &topic, p, leader, isr, events);
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn alter_isr(
        &mut self,
        topic_id: Uuid,
        partition: i32,
        leader: AgentId,
        leader_epoch: i32,
        isr: Vec<AgentId>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        let live: BTreeSet<AgentId> = self.live_agents().into_iter().collect();
        let (topic, current) = {
            let (topic, p) = self.partition_mut(topic_id, partition)?;
            (topic, p.clone())
        };
        if current.leader != Some(leader) {
            return Err(MetaError::NotPartitionLeader {
                topic,
                partition,
                agent_id: leader,
            });
        }
        if leader_epoch != current.leader_epoch {
            return Err(MetaError::FencedLeaderEpoch {
                topic,
                partition,
                given: leader_epoch,
                current: current.leader_epoch,
            });
        }
        self.check_isr(&topic, &current, &isr)?;
        if !isr.contains(&leader) {
            return Err(MetaError::IneligibleReplica {
                topic,
                partition,
                reason: "the leader must stay in the ISR".into(),
            });
        }
        if let Some(a) = isr
            .iter()
            .find(|a| !current.isr.contains(a) && !live.contains(a))
        {
            return Err(MetaError::IneligibleReplica {
                topic,
                partition,
                reason: format!("agent {a} holds no lease and cannot join the ISR"),
            });
        }
        let (topic, p) = self.partition_mut(topic_id, partition)?;
        let out = Self::set_leadership(topic_id, &topic, p, Some(leader), isr, events);
        Ok(CommandOutput::Leader(out))
    }

    pub(super) fn checkpoint_high_watermarks(
        &mut self,
        entries: &[(Uuid, i32, i64)],
    ) -> CommandOutput {
        let mut changed = 0;
        for &(topic_id, partition, hw) in entries {
            if let Ok((_, p)) = self.partition_mut(topic_id, partition) {
                if hw > p.high_watermark {
                    p.high_watermark = hw;
                    changed += 1;
                }
            }
        }
        CommandOutput::Count(changed)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::command::Command;
    use crate::types::AgentAddrs;

    fn fence(s: &mut MetaState, id: AgentId) {
        let hb = s.agent(id).unwrap().last_heartbeat_ms;
        apply(
            s,
            Command::FenceAgent {
                agent_id: id,
                observed_heartbeat_ms: hb,
            },
        )
        .unwrap();
    }

    #[test]
    fn registering_again_updates_addresses_and_bumps_incarnation() {
        let mut s = with_agents(1);
        assert_eq!(s.agent(1).unwrap().incarnation, 1);
        let reg = AgentRegistration {
            id: 1,
            addrs: AgentAddrs {
                kafka: Some("10.0.0.1:9092".into()),
                ..Default::default()
            },
            rack: Some("az-1".into()),
        };
        let (r, ev) = apply_at(
            &mut s,
            T0 + 10,
            Command::RegisterAgent { registration: reg },
        );
        let CommandOutput::Agent(a) = r.unwrap() else {
            panic!()
        };
        assert_eq!(
            (a.incarnation, a.rack.as_deref(), a.last_heartbeat_ms),
            (2, Some("az-1"), T0 + 10)
        );
        assert_eq!(a.addrs.kafka.as_deref(), Some("10.0.0.1:9092"));
        assert_eq!(ev, vec![MetaEvent::AgentRegistered { agent_id: 1 }]);
        let big = AgentRegistration {
            id: MAX_AGENT_ID + 1,
            ..Default::default()
        };
        assert!(matches!(
            apply(&mut s, Command::RegisterAgent { registration: big }),
            Err(MetaError::InvalidRequest { .. })
        ));
    }

    #[test]
    fn heartbeat_renews_and_unfences() {
        let mut s = with_agents(1);
        assert!(matches!(
            apply(&mut s, Command::Heartbeat { agent_id: 7 }),
            Err(MetaError::UnknownAgent { agent_id: 7 })
        ));
        fence(&mut s, 1);
        assert!(s.agent(1).unwrap().fenced);
        let (r, ev) = apply_at(&mut s, T0 + 50, Command::Heartbeat { agent_id: 1 });
        r.unwrap();
        assert_eq!(ev, vec![MetaEvent::AgentUnfenced { agent_id: 1 }]);
        let a = s.agent(1).unwrap();
        assert!(!a.fenced);
        assert_eq!(a.last_heartbeat_ms, T0 + 50);
    }

    #[test]
    fn fencing_is_refused_when_a_heartbeat_raced_it() {
        let mut s = with_agents(1);
        let stale = s.agent(1).unwrap().last_heartbeat_ms;
        let (r, _) = apply_at(&mut s, T0 + 100, Command::Heartbeat { agent_id: 1 });
        r.unwrap();
        let err = apply(
            &mut s,
            Command::FenceAgent {
                agent_id: 1,
                observed_heartbeat_ms: stale,
            },
        )
        .unwrap_err();
        assert!(matches!(err, MetaError::StaleRequest { .. }));
        assert!(!s.agent(1).unwrap().fenced);
    }

    #[test]
    fn preferred_election_moves_leadership_back_and_bumps_epoch() {
        let mut s = with_agents(2);
        let t = create(&mut s, "t", 1, 2);
        let preferred = t.partitions[0].replicas[0];
        let other = t.partitions[0].replicas[1];
        // move leadership away first
        let epoch = s.topic("t").unwrap().partitions[0].partition_epoch;
        apply(
            &mut s,
            Command::ReassignLeadership {
                topic_id: t.id,
                partition: 0,
                expected_partition_epoch: epoch,
                leader: Some(other),
                isr: vec![preferred, other],
            },
        )
        .unwrap();
        let (r, ev) = apply_at(
            &mut s,
            T0,
            Command::ElectLeader {
                topic_id: t.id,
                partition: 0,
                election: ElectionType::Preferred,
            },
        );
        assert_eq!(
            r.unwrap(),
            CommandOutput::Leader(LeaderAndEpoch {
                leader: Some(preferred),
                leader_epoch: 2
            })
        );
        assert!(
            matches!(ev[0], MetaEvent::LeaderChanged { leader: Some(l), leader_epoch: 2, .. } if l == preferred)
        );
        let again = apply(
            &mut s,
            Command::ElectLeader {
                topic_id: t.id,
                partition: 0,
                election: ElectionType::Preferred,
            },
        );
        assert!(matches!(again, Err(MetaError::ElectionNotNeeded { .. })));
    }

    #[test]
    fn unclean_election_prefers_in_sync_then_any_live_replica() {
        let mut s = with_agents(3);
        let t = create(&mut s, "t", 1, 3);
        let r = t.partitions[0].replicas.clone();
        let elect = |s: &mut MetaState| {
            apply(
                s,
                Command::ElectLeader {
                    topic_id: t.id,
                    partition: 0,
                    election: ElectionType::Unclean,
                },
            )
        };
        assert!(
            matches!(elect(&mut s), Err(MetaError::ElectionNotNeeded { .. })),
            "a live leader needs no election"
        );
        // shrink ISR to the leader, then fence it: the live out-of-sync replicas are the only choice
        apply(
            &mut s,
            Command::AlterIsr {
                topic_id: t.id,
                partition: 0,
                leader: r[0],
                leader_epoch: 0,
                isr: vec![r[0]],
            },
        )
        .unwrap();
        fence(&mut s, r[0]);
        let out = elect(&mut s).unwrap();
        assert_eq!(
            out,
            CommandOutput::Leader(LeaderAndEpoch {
                leader: Some(r[1]),
                leader_epoch: 1
            })
        );
        assert_eq!(s.topic("t").unwrap().partitions[0].isr, vec![r[1]]);
        fence(&mut s, r[1]);
        fence(&mut s, r[2]);
        assert!(matches!(
            elect(&mut s),
            Err(MetaError::EligibleLeadersNotAvailable { .. })
        ));
        let bad = apply(
            &mut s,
            Command::ElectLeader {
                topic_id: t.id,
                partition: 3,
                election: ElectionType::Unclean,
            },
        );
        assert!(matches!(
            bad,
            Err(MetaError::UnknownPartition { partition: 3, .. })
        ));
        let bad = apply(
            &mut s,
            Command::ElectLeader {
                topic_id: Uuid::nil(),
                partition: 0,
                election: ElectionType::Unclean,
            },
        );
        assert!(matches!(bad, Err(MetaError::UnknownTopicId { .. })));
    }

    #[test]
    fn reassignment_is_fenced_by_partition_epoch_and_checks_the_new_leader() {
        let mut s = with_agents(3);
        let t = create(&mut s, "t", 1, 3);
        let r = t.partitions[0].replicas.clone();
        let cmd =
            |epoch: i32, leader: Option<AgentId>, isr: Vec<AgentId>| Command::ReassignLeadership {
                topic_id: t.id,
                partition: 0,
                expected_partition_epoch: epoch,
                leader,
                isr,
            };
        assert!(matches!(
            apply(&mut s, cmd(5, Some(r[1]), r.clone())),
            Err(MetaError::StaleRequest { .. })
        ));
        fence(&mut s, r[1]);
        assert!(matches!(
            apply(&mut s, cmd(0, Some(r[1]), r.clone())),
            Err(MetaError::IneligibleReplica { .. })
        ));
        assert!(matches!(
            apply(&mut s, cmd(0, Some(r[2]), vec![r[0]])),
            Err(MetaError::IneligibleReplica { .. })
        ));
        assert!(matches!(
            apply(&mut s, cmd(0, Some(r[2]), vec![r[2], 99])),
            Err(MetaError::IneligibleReplica { .. })
        ));
        assert!(matches!(
            apply(&mut s, cmd(0, Some(r[2]), vec![])),
            Err(MetaError::IneligibleReplica { .. })
        ));
        let (res, ev) = apply_at(&mut s, T0, cmd(0, Some(r[2]), vec![r[2], r[0]]));
        assert_eq!(
            res.unwrap(),
            CommandOutput::Leader(LeaderAndEpoch {
                leader: Some(r[2]),
                leader_epoch: 1
            })
        );
        assert_eq!(ev.len(), 2, "leader and ISR both changed: {ev:?}");
        let p = &s.topic("t").unwrap().partitions[0];
        assert_eq!((p.partition_epoch, p.isr.clone()), (1, vec![r[2], r[0]]));
        // no live ISR member: the partition goes offline, the epoch still moves
        let (res, _) = apply_at(&mut s, T0, cmd(1, None, vec![r[2]]));
        assert_eq!(
            res.unwrap(),
            CommandOutput::Leader(LeaderAndEpoch {
                leader: None,
                leader_epoch: 2
            })
        );
    }

    #[test]
    fn alter_isr_only_from_the_current_leader_at_its_epoch() {
        let mut s = with_agents(3);
        let t = create(&mut s, "t", 1, 3);
        let r = t.partitions[0].replicas.clone();
        let alter = |s: &mut MetaState, leader, epoch, isr: Vec<AgentId>| {
            apply(
                s,
                Command::AlterIsr {
                    topic_id: t.id,
                    partition: 0,
                    leader,
                    leader_epoch: epoch,
                    isr,
                },
            )
        };
        assert!(matches!(
            alter(&mut s, r[1], 0, vec![r[1]]),
            Err(MetaError::NotPartitionLeader { .. })
        ));
        assert!(matches!(
            alter(&mut s, r[0], -1, vec![r[0]]),
            Err(MetaError::FencedLeaderEpoch {
                given: -1,
                current: 0,
                ..
            })
        ));
        assert!(matches!(
            alter(&mut s, r[0], 0, vec![r[1]]),
            Err(MetaError::IneligibleReplica { .. })
        ));
        alter(&mut s, r[0], 0, vec![r[0]]).unwrap();
        assert_eq!(s.topic("t").unwrap().partitions[0].isr, vec![r[0]]);
        fence(&mut s, r[2]);
        assert!(
            matches!(
                alter(&mut s, r[0], 0, vec![r[0], r[2]]),
                Err(MetaError::IneligibleReplica { .. })
            ),
            "fenced agents cannot rejoin"
        );
        alter(&mut s, r[0], 0, vec![r[0], r[1]]).unwrap();
        let p = &s.topic("t").unwrap().partitions[0];
        assert_eq!(
            (p.leader_epoch, p.partition_epoch),
            (0, 2),
            "ISR changes do not bump the leader epoch"
        );
    }

    #[test]
    fn high_watermark_checkpoints_only_move_forward() {
        let mut s = with_agents(1);
        let t = create(&mut s, "t", 2, 1);
        let out = apply(
            &mut s,
            Command::CheckpointHighWatermarks {
                entries: vec![(t.id, 0, 10), (t.id, 1, 5), (Uuid::nil(), 0, 3)],
            },
        );
        assert_eq!(out.unwrap(), CommandOutput::Count(2));
        let out = apply(
            &mut s,
            Command::CheckpointHighWatermarks {
                entries: vec![(t.id, 0, 7), (t.id, 5, 1)],
            },
        );
        assert_eq!(out.unwrap(), CommandOutput::Count(0));
        assert_eq!(s.topic("t").unwrap().partitions[0].high_watermark, 10);
    }
}
