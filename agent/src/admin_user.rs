//! `--admin-user NAME:PASSWORD`: at every start, the user's SCRAM-SHA-256
//! and SCRAM-SHA-512 credentials are made to be that password.
//!
//! A credential that already matches is left as it is (the flag is safe to
//! keep in a unit file, and a restart writes nothing). One that does not
//! match is replaced, with a warning: with authentication off anyone may
//! set credentials (AlterUserScramCredentials is authorized only once ACLs
//! apply), so a credential found for the superuser may be someone else's
//! and must not outlive the operator's own password.

use anyhow::Context;
use metastore::{Metastore, ScramMechanism, Security};

/// What [`ensure`] did for one mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Created,
    Kept,
    Replaced,
}

/// Gives `user` SCRAM-SHA-256 and SCRAM-SHA-512 credentials for
/// `password`, replacing any that do not match it.
pub async fn ensure(
    meta: &Metastore,
    user: &str,
    password: &str,
) -> anyhow::Result<Vec<(ScramMechanism, Outcome)>> {
    let mut done = Vec::new();
    for m in ScramMechanism::ALL {
        let outcome = match meta.scram_credential(user, m) {
            Some(c) if security::scram::password_matches(m, &c, password) => {
                done.push((m, Outcome::Kept));
                continue;
            }
            Some(_) => Outcome::Replaced,
            None => Outcome::Created,
        };
        let c = security::scram::credential(m, password, security::scram::DEFAULT_ITERATIONS)
            .map_err(|e| anyhow::anyhow!(e))?;
        meta.upsert_scram_credential(user, m, c)
            .await
            .with_context(|| format!("setting the admin user {user}'s credential"))?;
        match outcome {
            Outcome::Replaced => tracing::warn!(
                user,
                mechanism = m.name(),
                "replaced the admin user's credential: it did not match --admin-user's password"
            ),
            _ => tracing::info!(
                user,
                mechanism = m.name(),
                "created the admin user's credential"
            ),
        }
        done.push((m, outcome));
    }
    Ok(done)
}

#[cfg(test)]
#[path = "admin_user_tests.rs"]
mod tests;
