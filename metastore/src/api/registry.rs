//! The schema registry's writes ([`crate::registry`]); its reads are
//! [`crate::MetaState::registry`] through [`Metastore::read`].

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::error::MetaError;
use crate::registry::{RegistryCommand, RegistryOutput};

impl Metastore {
    /// Applies a registry change through Raft; resolves once it is applied
    /// on this replica too.
    pub async fn registry_command(
        &self,
        command: RegistryCommand,
    ) -> Result<RegistryOutput, MetaError> {
        match self.submit_one(Command::Registry { command }).await? {
            CommandOutput::Registry(out) => Ok(out),
            other => Err(unexpected(other)),
        }
    }
}
