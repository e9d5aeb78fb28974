//! Consumer group committed offsets.
//!
//! Group membership and rebalancing live in the gateway's coordinator; the
//! metastore keeps only what must survive it: the committed positions.

use std::sync::Arc;

use super::MetaState;
use crate::command::{CommandOutput, CommandResult};
use crate::error::MetaError;
use crate::types::{CommittedOffset, MetaEvent, OffsetCommit};

/// Kafka's default `offset.metadata.max.bytes`.
pub const MAX_OFFSET_METADATA_BYTES: usize = 4096;

impl MetaState {
    fn check_offset(&self, c: &OffsetCommit) -> Result<(), MetaError> {
        let topic = self
            .topic(&c.topic)
            .ok_or_else(|| MetaError::UnknownTopic {
                name: c.topic.clone(),
            })?;
        if topic.partition(c.partition).is_none() {
            return Err(MetaError::UnknownPartition {
                topic: c.topic.clone(),
                partition: c.partition,
            });
        }
        let len = c.metadata.as_ref().map_or(0, String::len);
        if len > MAX_OFFSET_METADATA_BYTES {
            return Err(MetaError::OffsetMetadataTooLarge {
                len,
                max: MAX_OFFSET_METADATA_BYTES,
            });
        }
        Ok(())
    }

    pub(super) fn commit_offsets(
        &mut self,
        now_ms: i64,
        group: String,
        offsets: Vec<OffsetCommit>,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if group.is_empty() {
            return Err(MetaError::InvalidGroupId {
                reason: "the group id is empty".to_owned(),
            });
        }
        let checks: Vec<Result<(), MetaError>> =
            offsets.iter().map(|c| self.check_offset(c)).collect();
        if checks.iter().any(Result::is_ok) {
            let entry = Arc::make_mut(self.groups.entry(group.clone()).or_default());
            for (c, check) in offsets.into_iter().zip(&checks) {
                if check.is_ok() {
                    let commit_time_ms = if c.commit_time_ms <= 0 {
                        now_ms
                    } else {
                        c.commit_time_ms
                    };
                    entry.entry(c.topic).or_default().insert(
                        c.partition,
                        CommittedOffset {
                            offset: c.offset,
                            leader_epoch: c.leader_epoch,
                            metadata: c.metadata,
                            commit_time_ms,
                        },
                    );
                }
            }
            events.push(MetaEvent::OffsetsCommitted { group });
        }
        Ok(CommandOutput::OffsetResults(checks))
    }

    pub(super) fn delete_group(
        &mut self,
        group: &str,
        events: &mut Vec<MetaEvent>,
    ) -> CommandResult {
        if self.groups.remove(group).is_none() {
            return Err(MetaError::GroupIdNotFound {
                group: group.to_owned(),
            });
        }
        events.push(MetaEvent::GroupDeleted {
            group: group.to_owned(),
        });
        Ok(CommandOutput::Done)
    }

    pub(super) fn delete_offsets(
        &mut self,
        group: &str,
        partitions: &[(String, i32)],
    ) -> CommandResult {
        let offsets = self
            .groups
            .get_mut(group)
            .map(Arc::make_mut)
            .ok_or_else(|| MetaError::GroupIdNotFound {
                group: group.to_owned(),
            })?;
        let mut removed = 0;
        for (topic, partition) in partitions {
            if let Some(parts) = offsets.get_mut(topic) {
                removed += usize::from(parts.remove(partition).is_some());
                if parts.is_empty() {
                    offsets.remove(topic);
                }
            }
        }
        if offsets.is_empty() {
            self.groups.remove(group);
        }
        Ok(CommandOutput::Count(removed))
    }
}

#[cfg(test)]
mod tests {
    use super::super::testkit::*;
    use super::*;
    use crate::command::Command;

    fn oc(topic: &str, partition: i32, offset: i64) -> OffsetCommit {
        OffsetCommit {
            topic: topic.into(),
            partition,
            offset,
            leader_epoch: 3,
            metadata: Some("m".into()),
            commit_time_ms: 0,
        }
    }

    #[test]
    fn commits_are_stored_per_partition_with_per_entry_errors() {
        let mut s = with_agents(1);
        create(&mut s, "t", 2, 1);
        let mut too_big = oc("t", 1, 9);
        too_big.metadata = Some("x".repeat(MAX_OFFSET_METADATA_BYTES + 1));
        let offsets = vec![oc("t", 0, 5), oc("nope", 0, 1), oc("t", 7, 1), too_big];
        let (r, ev) = apply_at(
            &mut s,
            T0,
            Command::CommitOffsets {
                group: "g".into(),
                offsets,
            },
        );
        let CommandOutput::OffsetResults(results) = r.unwrap() else {
            panic!()
        };
        assert!(results[0].is_ok());
        assert!(matches!(results[1], Err(MetaError::UnknownTopic { .. })));
        assert!(matches!(
            results[2],
            Err(MetaError::UnknownPartition { partition: 7, .. })
        ));
        assert!(matches!(
            results[3],
            Err(MetaError::OffsetMetadataTooLarge { .. })
        ));
        assert_eq!(ev, vec![MetaEvent::OffsetsCommitted { group: "g".into() }]);
        let stored = s.group("g").unwrap().get("t").unwrap();
        assert_eq!(stored.len(), 1);
        assert_eq!(
            stored.get(&0),
            Some(&CommittedOffset {
                offset: 5,
                leader_epoch: 3,
                metadata: Some("m".into()),
                commit_time_ms: T0
            })
        );
        // a later commit overwrites
        apply(
            &mut s,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![oc("t", 0, 8)],
            },
        )
        .unwrap();
        assert_eq!(s.group("g").unwrap()["t"][&0].offset, 8);
    }

    #[test]
    fn a_commit_where_everything_fails_creates_no_group() {
        let mut s = with_agents(1);
        let (r, ev) = apply_at(
            &mut s,
            T0,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![oc("nope", 0, 1)],
            },
        );
        assert!(r.is_ok());
        assert!(ev.is_empty());
        assert!(s.group("g").is_none());
        let err = apply(
            &mut s,
            Command::CommitOffsets {
                group: String::new(),
                offsets: vec![],
            },
        )
        .unwrap_err();
        assert!(matches!(err, MetaError::InvalidGroupId { .. }));
    }

    #[test]
    fn groups_and_single_offsets_can_be_deleted() {
        let mut s = with_agents(1);
        create(&mut s, "t", 2, 1);
        apply(
            &mut s,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![oc("t", 0, 1), oc("t", 1, 2)],
            },
        )
        .unwrap();
        let r = apply(
            &mut s,
            Command::DeleteOffsets {
                group: "g".into(),
                partitions: vec![("t".into(), 0), ("x".into(), 0)],
            },
        );
        assert_eq!(r.unwrap(), CommandOutput::Count(1));
        assert_eq!(s.group("g").unwrap()["t"].len(), 1);
        apply(
            &mut s,
            Command::DeleteOffsets {
                group: "g".into(),
                partitions: vec![("t".into(), 1)],
            },
        )
        .unwrap();
        assert!(s.group("g").is_none(), "no offsets left, no group");
        apply(
            &mut s,
            Command::CommitOffsets {
                group: "g".into(),
                offsets: vec![oc("t", 0, 1)],
            },
        )
        .unwrap();
        let (r, ev) = apply_at(&mut s, T0, Command::DeleteGroup { group: "g".into() });
        r.unwrap();
        assert_eq!(ev, vec![MetaEvent::GroupDeleted { group: "g".into() }]);
        assert!(matches!(
            apply(&mut s, Command::DeleteGroup { group: "g".into() }),
            Err(MetaError::GroupIdNotFound { .. })
        ));
        assert!(matches!(
            apply(
                &mut s,
                Command::DeleteOffsets {
                    group: "g".into(),
                    partitions: vec![]
                }
            ),
            Err(MetaError::GroupIdNotFound { .. })
        ));
    }
}
