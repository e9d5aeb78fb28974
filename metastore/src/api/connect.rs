//! The Connect engine's writes ([`crate::connect`]); its reads are
//! [`crate::MetaState::connect`] through [`Metastore::read`].

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::connect::{ConnectCommand, ConnectOutput};
use crate::error::MetaError;

impl Metastore {
    /// Applies a Connect change through Raft; resolves once it is applied
    /// on this replica too.
    pub async fn connect_command(
        &self,
        command: ConnectCommand,
    ) -> Result<ConnectOutput, MetaError> {
        match self.submit_one(Command::Connect { command }).await? {
            CommandOutput::Connect(out) => Ok(out),
            other => Err(unexpected(other)),
        }
    }

    /// An exactly-once source task's offsets, held in the ongoing
    /// transaction of `transactional_id` (its producer at `producer`) and
    /// made the connector's when that transaction commits (KIP-618).
    pub async fn connect_txn_offsets(
        &self,
        transactional_id: &str,
        producer: (i64, i16),
        connector: &str,
        offsets: Vec<(String, Option<String>)>,
    ) -> Result<(), MetaError> {
        let command = Command::TxnConnectOffsets {
            transactional_id: transactional_id.to_owned(),
            producer,
            connector: connector.to_owned(),
            offsets,
        };
        match self.submit_one(command).await? {
            CommandOutput::Transaction(_) => Ok(()),
            other => Err(unexpected(other)),
        }
    }
}
