//! `aerostream quota set|remove|list`: client quotas through Kafka's
//! AlterClientQuotas and DescribeClientQuotas (KIP-546), as
//! `kafka-configs.sh --entity-type users|clients` manages them.

use anyhow::bail;
use kafka_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use kafka_protocol::messages::describe_client_quotas_request::ComponentData;
use kafka_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{describe_error, Client};
use super::output::{print_json, print_text, Format, Table};
use super::{key_value, Common};

#[derive(clap::Args)]
pub struct QuotaArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: QuotaCommand,
}

/// Whom a quota is for: a user, a client id, or both; `--default-user`
/// and `--default-client-id` stand for everyone without an entry of their
/// own.
#[derive(clap::Args, Clone)]
struct Entity {
    /// The SASL user (or certificate principal's name) the quota is for.
    #[arg(long, conflicts_with = "default_user")]
    user: Option<String>,
    /// The default for users without a quota of their own.
    #[arg(long)]
    default_user: bool,
    /// The client id the quota is for.
    #[arg(long, conflicts_with = "default_client_id")]
    client_id: Option<String>,
    /// The default for client ids without a quota of their own.
    #[arg(long)]
    default_client_id: bool,
}

impl Entity {
    fn parts(&self) -> Vec<(&'static str, Option<String>, bool)> {
        let mut out = Vec::new();
        if self.user.is_some() || self.default_user {
            out.push(("user", self.user.clone(), self.default_user));
        }
        if self.client_id.is_some() || self.default_client_id {
            out.push(("client-id", self.client_id.clone(), self.default_client_id));
        }
        out
    }
}

#[derive(clap::Subcommand)]
enum QuotaCommand {
    /// Set quotas: `--set producer_byte_rate=1048576 --set consumer_byte_rate=2097152
    /// --set request_percentage=25`
    /// (bytes per second per agent).
    Set {
        #[command(flatten)]
        entity: Entity,
        #[arg(long = "set", value_parser = key_value, required = true)]
        values: Vec<(String, String)>,
    },
    /// Remove quotas by key: `--key producer_byte_rate`.
    Remove {
        #[command(flatten)]
        entity: Entity,
        #[arg(long = "key", required = true)]
        keys: Vec<String>,
    },
    /// Every configured quota (or those of one user or client id).
    List {
        #[command(flatten)]
        entity: Entity,
    },
}

#[derive(Serialize)]
struct QuotaRow {
    user: Option<String>,
    client_id: Option<String>,
    key: String,
    value: f64,
}

fn s(v: &str) -> StrBytes {
    StrBytes::from_string(v.to_owned())
}

async fn alter(client: &mut Client, entity: &Entity, ops: Vec<OpData>) -> anyhow::Result<()> {
    let parts = entity.parts();
    if parts.is_empty() {
        bail!("name a --user, --client-id, --default-user or --default-client-id");
    }
    let req = AlterClientQuotasRequest::default().with_entries(vec![EntryData::default()
        .with_entity(
            parts
                .iter()
                .map(|(t, name, _)| {
                    EntityData::default()
                        .with_entity_type(s(t))
                        .with_entity_name(name.as_deref().map(s))
                })
                .collect(),
        )
        .with_ops(ops)]);
    let addr = client.bootstrap().to_owned();
    let resp = client.call(&addr, &req, 0, 1).await?;
    match resp.entries.first() {
        Some(e) if e.error_code != 0 => bail!(describe_error(
            "quota",
            e.error_code,
            e.error_message.as_ref()
        )),
        Some(_) => Ok(()),
        None => bail!("the broker did not answer for the quota"),
    }
}

pub async fn run(args: QuotaArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    match args.command {
        QuotaCommand::Set { entity, values } => {
            let mut ops = Vec::new();
            for (k, v) in values {
                let value: f64 = v
                    .parse()
                    .map_err(|_| anyhow::anyhow!("{k}={v}: the value is a number"))?;
                ops.push(OpData::default().with_key(s(&k)).with_value(value));
            }
            alter(&mut client, &entity, ops).await?;
            print_text("quota set\n");
        }
        QuotaCommand::Remove { entity, keys } => {
            let ops = keys
                .iter()
                .map(|k| OpData::default().with_key(s(k)).with_remove(true))
                .collect();
            alter(&mut client, &entity, ops).await?;
            print_text("quota removed\n");
        }
        QuotaCommand::List { entity } => {
            let components = entity
                .parts()
                .into_iter()
                .map(|(t, name, default)| {
                    ComponentData::default()
                        .with_entity_type(s(t))
                        .with_match_type(if default { 1 } else { 0 })
                        .with_match(name.as_deref().map(s))
                })
                .collect();
            let req = DescribeClientQuotasRequest::default().with_components(components);
            let addr = client.bootstrap().to_owned();
            let resp = client.call(&addr, &req, 0, 1).await?;
            if resp.error_code != 0 {
                bail!(describe_error(
                    "quotas",
                    resp.error_code,
                    resp.error_message.as_ref()
                ));
            }
            let mut rows = Vec::new();
            for e in resp.entries.unwrap_or_default() {
                let side = |t: &str| {
                    e.entity
                        .iter()
                        .find(|x| x.entity_type.as_str() == t)
                        .map(|x| {
                            x.entity_name
                                .as_ref()
                                .map_or_else(|| "<default>".to_owned(), |n| n.to_string())
                        })
                };
                for v in &e.values {
                    rows.push(QuotaRow {
                        user: side("user"),
                        client_id: side("client-id"),
                        key: v.key.to_string(),
                        value: v.value,
                    });
                }
            }
            if args.common.output == Format::Json {
                return print_json(&rows);
            }
            let mut table = Table::new(&["USER", "CLIENT-ID", "QUOTA", "VALUE"]);
            for r in rows {
                table.row(vec![
                    r.user.unwrap_or_else(|| "-".into()),
                    r.client_id.unwrap_or_else(|| "-".into()),
                    r.key,
                    r.value.to_string(),
                ]);
            }
            print_text(&table.render());
        }
    }
    Ok(())
}
