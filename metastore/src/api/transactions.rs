//! [`Transactions`]: the transaction coordinator's records.

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::coordinators::SlotFence;
use crate::error::MetaError;
use crate::transactions::{TxnPartition, TxnRecord};
use crate::types::OffsetCommit;

/// Transactional ids and their transactions (see [`crate::transactions`]).
/// `producer` is the (producer id, epoch) a request comes from; a
/// coordinator's writes name the fence of the id's coordinator slot (a
/// TxnOffsetCommit that of the group's), `None` writes unfenced (tools and
/// tests). Writes resolve once applied on this replica too.
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait Transactions {
    async fn init_transaction(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        coordinator: Option<SlotFence>,
    ) -> Result<TxnRecord, MetaError>;

    /// `implicit`: added by the partition's leader for a client on
    /// transaction version 2 (see [`crate::transactions`]).
    async fn add_txn_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: Vec<TxnPartition>,
        coordinator: Option<SlotFence>,
        implicit: bool,
    ) -> Result<TxnRecord, MetaError>;

    async fn add_txn_group(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
        coordinator: Option<SlotFence>,
    ) -> Result<TxnRecord, MetaError>;

    /// One result per offset, in order. `implicit` (TxnOffsetCommit v5)
    /// adds the group to the transaction first.
    async fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: Vec<OffsetCommit>,
        coordinator: Option<SlotFence>,
        implicit: bool,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError>;

    /// `bump_epoch` (EndTxn v5): the outcome bumps the producer's epoch.
    async fn end_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        coordinator: Option<SlotFence>,
        bump_epoch: bool,
    ) -> Result<TxnRecord, MetaError>;

    async fn expire_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
    ) -> Result<TxnRecord, MetaError>;

    async fn complete_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<TxnRecord, MetaError>;

    /// A transactional id's record, from the local replica.
    fn transaction(&self, transactional_id: &str) -> Option<TxnRecord>;

    /// Every transactional id's record, from the local replica.
    fn transactions(&self) -> Vec<TxnRecord>;

    /// The partitions (topic, partition) that `group` has offsets for in a
    /// transaction not yet complete (ongoing, or its markers still being
    /// written), from the local replica: what a stable OffsetFetch
    /// (KIP-447) answers UNSTABLE_OFFSET_COMMIT for.
    fn pending_txn_offsets(&self, group: &str) -> Vec<(String, i32)>;
}

impl Metastore {
    async fn txn_command(&self, command: Command) -> Result<TxnRecord, MetaError> {
        match self.submit_one(command).await? {
            CommandOutput::Transaction(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }
}

impl Transactions for Metastore {
    async fn init_transaction(
        &self,
        transactional_id: &str,
        timeout_ms: i32,
        expected: Option<(i64, i16)>,
        coordinator: Option<SlotFence>,
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::InitTransaction {
            transactional_id: transactional_id.to_owned(),
            timeout_ms,
            expected,
            coordinator,
        })
        .await
    }

    async fn add_txn_partitions(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        partitions: Vec<TxnPartition>,
        coordinator: Option<SlotFence>,
        implicit: bool,
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::AddTxnPartitions {
            transactional_id: transactional_id.to_owned(),
            producer,
            partitions,
            coordinator,
            implicit,
        })
        .await
    }

    async fn add_txn_group(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
        coordinator: Option<SlotFence>,
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::AddTxnGroup {
            transactional_id: transactional_id.to_owned(),
            producer,
            group: group.to_owned(),
            coordinator,
        })
        .await
    }

    async fn txn_offset_commit(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        group: &str,
        offsets: Vec<OffsetCommit>,
        coordinator: Option<SlotFence>,
        implicit: bool,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError> {
        let command = Command::TxnOffsetCommit {
            transactional_id: transactional_id.to_owned(),
            producer,
            group: group.to_owned(),
            offsets,
            coordinator,
            implicit,
        };
        match self.submit_one(command).await? {
            CommandOutput::OffsetResults(r) => Ok(r),
            other => Err(unexpected(other)),
        }
    }

    async fn end_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
        coordinator: Option<SlotFence>,
        bump_epoch: bool,
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::EndTransaction {
            transactional_id: transactional_id.to_owned(),
            producer,
            commit,
            coordinator,
            bump_epoch,
        })
        .await
    }

    async fn expire_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::ExpireTransaction {
            transactional_id: transactional_id.to_owned(),
            producer,
        })
        .await
    }

    async fn complete_transaction(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        commit: bool,
    ) -> Result<TxnRecord, MetaError> {
        self.txn_command(Command::CompleteTransaction {
            transactional_id: transactional_id.to_owned(),
            producer,
            commit,
        })
        .await
    }

    fn transaction(&self, transactional_id: &str) -> Option<TxnRecord> {
        self.read(|s| s.transaction(transactional_id).cloned())
    }

    fn transactions(&self) -> Vec<TxnRecord> {
        self.read(|s| s.transactions().cloned().collect())
    }

    fn pending_txn_offsets(&self, group: &str) -> Vec<(String, i32)> {
        self.read(|s| {
            s.transactions()
                .filter(|t| t.state.is_open())
                .filter_map(|t| t.pending_offsets.get(group))
                .flatten()
                .map(|c| (c.topic.clone(), c.partition))
                .collect()
        })
    }
}

impl Metastore {
    /// Sets a transactional id's producer epoch on this replica only, as if
    /// that many transactions had ended: tests of an exhausted epoch, which
    /// takes 32 766 transactions to reach otherwise. The other replicas and
    /// the log know nothing of it (single-replica tests only).
    #[cfg(any(test, feature = "testing"))]
    pub fn set_producer_epoch_locally(&self, transactional_id: &str, epoch: i16) -> bool {
        self.node
            .applied
            .write()
            .state
            .set_producer_epoch(transactional_id, epoch)
    }
}
