//! The stream processor's partition leases ([`crate::processors`]).

use super::{unexpected, Metastore};
use crate::command::{Command, CommandOutput};
use crate::error::MetaError;
use crate::processors::{ProcessorCommand, ProcessorOutput};

impl Metastore {
    /// Applies a processor worker's heartbeat or leave through Raft.
    pub async fn processor_command(
        &self,
        command: ProcessorCommand,
    ) -> Result<ProcessorOutput, MetaError> {
        match self.submit_one(Command::Processor { command }).await? {
            CommandOutput::Processor(out) => Ok(out),
            other => Err(unexpected(other)),
        }
    }
}
