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
}
