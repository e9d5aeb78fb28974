//! [`Security`]: SCRAM users, ACLs and client quotas.

use super::{unexpected, Metastore};
use crate::acl::{AclBinding, AclFilter};
use crate::command::{Command, CommandOutput};
use crate::error::MetaError;
use crate::quota::{QuotaEntity, QuotaOps, QuotaTable};
use crate::types::{ScramCredential, ScramMechanism};

/// Who may connect and what they may do: SCRAM users' credentials, ACL
/// bindings and client quotas, as Kafka's AlterUserScramCredentials,
/// CreateAcls/DeleteAcls and AlterClientQuotas change them.
///
/// Writes go through Raft (forwarded to the leader, wherever it is) and
/// resolve once committed and applied on this replica too. Reads come from
/// the local replica, possibly stale by [`Metastore::staleness`].
#[expect(
    async_fn_in_trait,
    reason = "implemented by Metastore only; callers hold the concrete type, whose futures are Send"
)]
pub trait Security {
    /// Sets `user`'s credential for `mechanism` (Kafka's
    /// AlterUserScramCredentials upsertion).
    async fn upsert_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<(), MetaError>;

    /// Removes `user`'s credential for `mechanism`; whether there was one.
    async fn delete_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Result<bool, MetaError>;

    /// `user`'s credential for `mechanism`, as this replica knows it.
    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;

    /// Every SCRAM user with its mechanisms and iteration counts.
    fn scram_users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)>;

    /// Adds ACL bindings (CreateAcls), one result per binding in order; a
    /// binding that exists already succeeds without a second copy.
    async fn create_acls(
        &self,
        bindings: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError>;

    /// Removes the bindings each filter selects (DeleteAcls): per filter,
    /// in order, the bindings it removed.
    async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Result<Vec<AclBinding>, MetaError>>, MetaError>;

    /// The bindings `filter` selects, as this replica knows them.
    fn acls(&self, filter: &AclFilter) -> Vec<AclBinding>;

    /// Applies AlterClientQuotas entries, one result per entity in order.
    async fn alter_client_quotas(
        &self,
        entries: Vec<(QuotaEntity, QuotaOps)>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError>;

    /// Every configured quota, as this replica knows them.
    fn client_quotas(&self) -> QuotaTable;
}

impl Security for Metastore {
    async fn upsert_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
        credential: ScramCredential,
    ) -> Result<(), MetaError> {
        self.unit_command(Command::UpsertScramCredential {
            user: user.to_owned(),
            mechanism,
            credential,
        })
        .await
    }

    async fn delete_scram_credential(
        &self,
        user: &str,
        mechanism: ScramMechanism,
    ) -> Result<bool, MetaError> {
        match self
            .submit_one(Command::DeleteScramCredential {
                user: user.to_owned(),
                mechanism,
            })
            .await?
        {
            CommandOutput::Count(n) => Ok(n > 0),
            other => Err(unexpected(other)),
        }
    }

    fn scram_credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
        self.read(|s| s.scram_credential(user, mechanism).cloned())
    }

    fn scram_users(&self) -> Vec<(String, Vec<(ScramMechanism, u32)>)> {
        self.read(|s| s.scram_users().map(|(u, m)| (u.clone(), m)).collect())
    }

    async fn create_acls(
        &self,
        bindings: Vec<AclBinding>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError> {
        let commands = bindings
            .into_iter()
            .map(|binding| Command::CreateAcl { binding })
            .collect();
        let results = self.submit(commands).await?;
        Ok(results.into_iter().map(|r| r.map(|_| ())).collect())
    }

    async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Result<Vec<AclBinding>, MetaError>>, MetaError> {
        let commands = filters
            .into_iter()
            .map(|filter| Command::DeleteAcls { filter })
            .collect();
        let results = self.submit(commands).await?;
        Ok(results
            .into_iter()
            .map(|r| match r? {
                CommandOutput::Acls(gone) => Ok(gone),
                other => Err(unexpected(other)),
            })
            .collect())
    }

    fn acls(&self, filter: &AclFilter) -> Vec<AclBinding> {
        self.read(|s| s.acls().filter(|b| filter.matches(b)).cloned().collect())
    }

    async fn alter_client_quotas(
        &self,
        entries: Vec<(QuotaEntity, QuotaOps)>,
    ) -> Result<Vec<Result<(), MetaError>>, MetaError> {
        let commands = entries
            .into_iter()
            .map(|(entity, ops)| Command::AlterClientQuota { entity, ops })
            .collect();
        let results = self.submit(commands).await?;
        Ok(results.into_iter().map(|r| r.map(|_| ())).collect())
    }

    fn client_quotas(&self) -> QuotaTable {
        self.read(|s| s.client_quotas().clone())
    }
}
