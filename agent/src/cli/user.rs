//! `aerostream user set|delete|list`: SASL/SCRAM users through Kafka's
//! AlterUserScramCredentials and DescribeUserScramCredentials (KIP-554), as
//! `kafka-configs.sh --entity-type users --alter --add-config
//! SCRAM-SHA-512=[password=...]` manages them. The password never leaves
//! this process: the command sends a fresh salt and the salted password.

use std::num::NonZeroU32;

use anyhow::{anyhow, bail};
use kafka_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
use kafka_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
    DescribeUserScramCredentialsRequest,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{describe_error, Client};
use super::output::{print_json, print_text, Format, Table};
use super::Common;

#[derive(clap::Args)]
pub struct UserArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: UserCommand,
}

#[derive(clap::Subcommand)]
enum UserCommand {
    /// Create a user, or change its password, for one SCRAM mechanism.
    /// PLAIN logins check the SCRAM-SHA-512 credential first.
    Set {
        name: String,
        /// The password; read from AEROSTREAM_USER_PASSWORD when not given.
        #[arg(long, env = "AEROSTREAM_USER_PASSWORD", hide_env_values = true)]
        password: String,
        /// SCRAM-SHA-512 or SCRAM-SHA-256.
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
        /// PBKDF2 iterations (Kafka accepts 4096 to 16384).
        #[arg(long, default_value_t = 8192)]
        iterations: u32,
    },
    /// Delete a user's credential for one mechanism.
    Delete {
        name: String,
        #[arg(long, default_value = "SCRAM-SHA-512")]
        mechanism: String,
    },
    /// Every user with a SCRAM credential (or the named ones), with its
    /// mechanisms and iterations.
    List { names: Vec<String> },
}

/// Kafka's ScramMechanism codes: 1 SHA-256, 2 SHA-512.
fn mechanism(name: &str) -> anyhow::Result<(sdk::ScramMechanism, i8)> {
    match name.to_ascii_uppercase().as_str() {
        "SCRAM-SHA-256" => Ok((sdk::ScramMechanism::Sha256, 1)),
        "SCRAM-SHA-512" => Ok((sdk::ScramMechanism::Sha512, 2)),
        other => bail!("--mechanism {other} is not SCRAM-SHA-512 or SCRAM-SHA-256"),
    }
}

fn mechanism_name(code: i8) -> String {
    match code {
        1 => "SCRAM-SHA-256".into(),
        2 => "SCRAM-SHA-512".into(),
        other => format!("unknown ({other})"),
    }
}

#[derive(Serialize)]
struct UserRow {
    name: String,
    mechanism: String,
    iterations: i32,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

fn check(resp: &AlterUserScramCredentialsResponse, name: &str) -> anyhow::Result<()> {
    match resp.results.iter().find(|r| r.user.as_str() == name) {
        Some(r) if r.error_code != 0 => bail!(describe_error(
            &format!("user {name}"),
            r.error_code,
            r.error_message.as_ref()
        )),
        Some(_) => Ok(()),
        None => bail!("the broker did not answer for user {name}"),
    }
}

pub async fn run(args: UserArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let addr = client.bootstrap().to_owned();
    match args.command {
        UserCommand::Set {
            name,
            password,
            mechanism: m,
            iterations,
        } => {
            let (m, code) = mechanism(&m)?;
            let iterations = NonZeroU32::new(iterations)
                .ok_or_else(|| anyhow!("--iterations must be positive"))?;
            if password.is_empty() {
                bail!("the password must not be empty");
            }
            let mut salt = [0u8; 32];
            aws_lc_rs::rand::fill(&mut salt).map_err(|_| anyhow!("no randomness for a salt"))?;
            let salted = sdk::auth::salted_password(m, &password, &salt, iterations);
            let req = AlterUserScramCredentialsRequest::default().with_upsertions(vec![
                ScramCredentialUpsertion::default()
                    .with_name(s(&name))
                    .with_mechanism(code)
                    .with_iterations(i32::try_from(iterations.get()).unwrap_or(i32::MAX))
                    .with_salt(salt.to_vec().into())
                    .with_salted_password(salted.into()),
            ]);
            let resp = client.call(&addr, &req, 0, 0).await?;
            check(&resp, &name)?;
            print_text(&format!("user {name} set ({})\n", mechanism_name(code)));
        }
        UserCommand::Delete { name, mechanism: m } => {
            let (_, code) = mechanism(&m)?;
            let req = AlterUserScramCredentialsRequest::default().with_deletions(vec![
                ScramCredentialDeletion::default()
                    .with_name(s(&name))
                    .with_mechanism(code),
            ]);
            let resp = client.call(&addr, &req, 0, 0).await?;
            check(&resp, &name)?;
            print_text(&format!("user {name} deleted ({})\n", mechanism_name(code)));
        }
        UserCommand::List { names } => {
            let users = (!names.is_empty()).then(|| {
                names
                    .iter()
                    .map(|n| UserName::default().with_name(s(n)))
                    .collect()
            });
            let req = DescribeUserScramCredentialsRequest::default().with_users(users);
            let resp = client.call(&addr, &req, 0, 0).await?;
            if resp.error_code != 0 {
                bail!(describe_error(
                    "users",
                    resp.error_code,
                    resp.error_message.as_ref()
                ));
            }
            let mut rows = Vec::new();
            for r in resp.results {
                if r.error_code != 0 {
                    bail!(describe_error(
                        &format!("user {}", r.user.as_str()),
                        r.error_code,
                        r.error_message.as_ref()
                    ));
                }
                for c in r.credential_infos {
                    rows.push(UserRow {
                        name: r.user.to_string(),
                        mechanism: mechanism_name(c.mechanism),
                        iterations: c.iterations,
                    });
                }
            }
            if args.common.output == Format::Json {
                return print_json(&rows);
            }
            let mut table = Table::new(&["USER", "MECHANISM", "ITERATIONS"]);
            for r in rows {
                table.row(vec![r.name, r.mechanism, r.iterations.to_string()]);
            }
            print_text(&table.render());
        }
    }
    Ok(())
}
