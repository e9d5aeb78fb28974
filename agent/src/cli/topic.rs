//! `aerostream topic list|create|describe|delete|alter-config`.

use std::collections::BTreeMap;

use anyhow::bail;
use kafka_protocol::messages::{
    create_topics_request::{CreatableTopic, CreatableTopicConfig},
    describe_configs_request::DescribeConfigsResource,
    incremental_alter_configs_request::{AlterConfigsResource, AlterableConfig},
    CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataResponse,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{describe_error, topic_name, Client};
use super::output::{ids, print_json, print_text, Format, Table};
use super::{key_value, Common};

/// Kafka's resource type of a topic in config requests.
const TOPIC_RESOURCE: i8 = 2;
/// How long the broker may take to create or delete topics.
const ADMIN_TIMEOUT_MS: i32 = 30_000;

#[derive(clap::Args)]
pub struct TopicArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TopicCommand,
}

#[derive(clap::Subcommand)]
enum TopicCommand {
    /// List the topics with their partition count and replication factor.
    List,
    /// Create a topic.
    Create {
        name: String,
        /// Number of partitions (default: the broker's `num.partitions`).
        #[arg(long)]
        partitions: Option<i32>,
        /// Replicas per partition (default: the broker's default).
        #[arg(long)]
        replication_factor: Option<i16>,
        /// A topic config, `KEY=VALUE` (repeatable), e.g. `retention.ms=86400000`.
        #[arg(long = "config", value_parser = key_value)]
        configs: Vec<(String, String)>,
    },
    /// Show a topic's partitions (leader, replicas, ISR) and configs.
    Describe {
        name: String,
        /// An agent's REST address (host:port of its `--http-addr`): adds
        /// each compacted partition's cleaner figures (dirty ratio, what
        /// compaction removed), which the Kafka protocol cannot carry.
        #[arg(long)]
        http: Option<String>,
    },
    /// Delete topics.
    Delete {
        #[arg(required = true)]
        names: Vec<String>,
    },
    /// Change a topic's configs (IncrementalAlterConfigs).
    AlterConfig {
        name: String,
        /// Set a config, `KEY=VALUE` (repeatable).
        #[arg(long = "set", value_parser = key_value)]
        set: Vec<(String, String)>,
        /// Remove a config, going back to the default (repeatable).
        #[arg(long = "delete")]
        delete: Vec<String>,
    },
}

pub async fn run(args: TopicArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let out = args.common.output;
    match args.command {
        TopicCommand::List => list(&mut client, out).await,
        TopicCommand::Create {
            name,
            partitions,
            replication_factor,
            configs,
        } => {
            create(
                &mut client,
                out,
                &name,
                partitions,
                replication_factor,
                &configs,
            )
            .await
        }
        TopicCommand::Describe { name, http } => {
            describe(&mut client, out, &name, http.as_deref()).await
        }
        TopicCommand::Delete { names } => delete(&mut client, out, &names).await,
        TopicCommand::AlterConfig { name, set, delete } => {
            alter_config(&mut client, out, &name, &set, &delete).await
        }
    }
}

#[derive(Serialize)]
struct TopicSummary {
    name: String,
    partitions: usize,
    replication_factor: usize,
    internal: bool,
}

async fn list(client: &mut Client, out: Format) -> anyhow::Result<()> {
    let meta = client.metadata(None, false).await?;
    let mut topics: Vec<TopicSummary> = meta
        .topics
        .iter()
        .filter_map(|t| {
            let name = t.name.as_ref()?.to_string();
            Some(TopicSummary {
                name,
                partitions: t.partitions.len(),
                replication_factor: t
                    .partitions
                    .iter()
                    .map(|p| p.replica_nodes.len())
                    .max()
                    .unwrap_or(0),
                internal: t.is_internal,
            })
        })
        .collect();
    topics.sort_by(|a, b| a.name.cmp(&b.name));
    if out == Format::Json {
        return print_json(&topics);
    }
    let mut table = Table::new(&["TOPIC", "PARTITIONS", "REPLICATION"]);
    for t in &topics {
        table.row(vec![
            t.name.clone(),
            t.partitions.to_string(),
            t.replication_factor.to_string(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Serialize)]
struct Created {
    name: String,
    topic_id: Option<String>,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
}

async fn create(
    client: &mut Client,
    out: Format,
    name: &str,
    partitions: Option<i32>,
    replication_factor: Option<i16>,
    configs: &[(String, String)],
) -> anyhow::Result<()> {
    let addr = client.bootstrap().to_owned();
    let version = client.version::<CreateTopicsRequest>(&addr, 2, 7).await?;
    if version < 4 && (partitions.is_none() || replication_factor.is_none()) {
        bail!("this broker needs --partitions and --replication-factor (CreateTopics v{version})");
    }
    let topic = CreatableTopic::default()
        .with_name(topic_name(name))
        .with_num_partitions(partitions.unwrap_or(-1))
        .with_replication_factor(replication_factor.unwrap_or(-1))
        .with_configs(
            configs
                .iter()
                .map(|(k, v)| {
                    CreatableTopicConfig::default()
                        .with_name(StrBytes::from_string(k.clone()))
                        .with_value(Some(StrBytes::from_string(v.clone())))
                })
                .collect(),
        );
    let req = CreateTopicsRequest::default()
        .with_topics(vec![topic])
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let resp = client.call_at(&addr, &req, version).await?;
    let Some(result) = resp.topics.first() else {
        bail!("the broker did not answer for topic {name}");
    };
    if result.error_code != 0 {
        bail!(describe_error(
            name,
            result.error_code,
            result.error_message.as_ref()
        ));
    }
    // v5+ answers with what the broker chose
    let (partitions, replication_factor, topic_id) = if version >= 5 {
        (
            Some(result.num_partitions),
            Some(result.replication_factor),
            (version >= 7).then(|| result.topic_id.to_string()),
        )
    } else {
        (partitions, replication_factor, None)
    };
    let created = Created {
        name: name.to_owned(),
        topic_id,
        partitions,
        replication_factor,
    };
    if out == Format::Json {
        return print_json(&created);
    }
    let shape = match (created.partitions, created.replication_factor) {
        (Some(p), Some(r)) => format!(" ({p} partitions, replication factor {r})"),
        _ => String::new(),
    };
    print_text(&format!("created topic {name}{shape}\n"));
    Ok(())
}

#[derive(Serialize)]
struct PartitionInfo {
    partition: i32,
    leader: i32,
    leader_epoch: i32,
    replicas: Vec<i32>,
    isr: Vec<i32>,
    offline_replicas: Vec<i32>,
    error: Option<String>,
}

#[derive(Serialize)]
struct ConfigEntry {
    name: String,
    value: Option<String>,
    source: &'static str,
    read_only: bool,
    sensitive: bool,
}

#[derive(Serialize)]
struct TopicDescription {
    name: String,
    topic_id: String,
    internal: bool,
    partitions: Vec<PartitionInfo>,
    configs: Vec<ConfigEntry>,
    /// With `--http`: the cleaner figures of compacted partitions.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    cleaner: BTreeMap<i32, super::cleaner::Cleaner>,
}

/// Metadata of one existing topic, or a clear error when it does not exist.
pub(super) async fn topic_metadata(
    client: &mut Client,
    name: &str,
    auto_create: bool,
) -> anyhow::Result<MetadataResponse> {
    let meta = client
        .metadata(Some(&[name.to_owned()]), auto_create)
        .await?;
    match meta
        .topics
        .iter()
        .find(|t| super::client::named(t.name.as_ref(), name))
    {
        None => bail!("unknown topic: {name}"),
        Some(t) if t.error_code == 3 => bail!("unknown topic: {name}"),
        Some(t) if t.error_code != 0 => bail!(describe_error(name, t.error_code, None)),
        Some(_) => Ok(meta),
    }
}

async fn describe(
    client: &mut Client,
    out: Format,
    name: &str,
    http: Option<&str>,
) -> anyhow::Result<()> {
    let meta = topic_metadata(client, name, false).await?;
    let Some(topic) = meta
        .topics
        .iter()
        .find(|t| super::client::named(t.name.as_ref(), name))
    else {
        bail!("unknown topic: {name}");
    };
    let mut partitions: Vec<PartitionInfo> = topic
        .partitions
        .iter()
        .map(|p| PartitionInfo {
            partition: p.partition_index,
            leader: p.leader_id.0,
            leader_epoch: p.leader_epoch,
            replicas: p.replica_nodes.iter().map(|b| b.0).collect(),
            isr: p.isr_nodes.iter().map(|b| b.0).collect(),
            offline_replicas: p.offline_replicas.iter().map(|b| b.0).collect(),
            error: (p.error_code != 0).then(|| super::client::error_name(p.error_code)),
        })
        .collect();
    partitions.sort_by_key(|p| p.partition);
    let configs = describe_configs(client, name).await?;
    let desc = TopicDescription {
        name: name.to_owned(),
        topic_id: topic.topic_id.to_string(),
        internal: topic.is_internal,
        partitions,
        configs,
        cleaner: match http {
            Some(h) => super::cleaner::figures(h, name).await?,
            None => BTreeMap::new(),
        },
    };
    if out == Format::Json {
        return print_json(&desc);
    }
    let rf = desc
        .partitions
        .iter()
        .map(|p| p.replicas.len())
        .max()
        .unwrap_or(0);
    let mut text = format!(
        "Topic: {}  Id: {}  Partitions: {}  Replication: {}\n\n",
        desc.name,
        desc.topic_id,
        desc.partitions.len(),
        rf
    );
    let mut table = Table::new(&["PARTITION", "LEADER", "EPOCH", "REPLICAS", "ISR", "ERROR"]);
    for p in &desc.partitions {
        table.row(vec![
            p.partition.to_string(),
            p.leader.to_string(),
            p.leader_epoch.to_string(),
            ids(&p.replicas),
            ids(&p.isr),
            p.error.clone().unwrap_or_default(),
        ]);
    }
    text.push_str(&table.render());
    text.push('\n');
    if !desc.cleaner.is_empty() {
        let mut table = Table::new(&[
            "PARTITION",
            "DIRTY RATIO",
            "DIRTY BYTES",
            "COMPACTED BELOW",
            "RUNS",
            "BYTES REMOVED",
            "RECORDS REMOVED",
        ]);
        for (p, c) in &desc.cleaner {
            table.row(vec![
                p.to_string(),
                format!("{:.2}", c.dirty_ratio),
                c.dirty_bytes.to_string(),
                c.compacted_below.to_string(),
                c.runs.to_string(),
                c.bytes_removed.to_string(),
                c.records_removed.to_string(),
            ]);
        }
        text.push_str(&table.render());
        text.push('\n');
    }
    let mut table = Table::new(&["CONFIG", "VALUE", "SOURCE"]);
    for c in &desc.configs {
        let value = match (&c.value, c.sensitive) {
            (_, true) => "(sensitive)".to_owned(),
            (Some(v), false) => v.clone(),
            (None, false) => "(none)".to_owned(),
        };
        table.row(vec![c.name.clone(), value, c.source.to_owned()]);
    }
    text.push_str(&table.render());
    print_text(&text);
    Ok(())
}

/// Kafka's name of a config source number.
fn config_source(source: i8) -> &'static str {
    match source {
        1 => "dynamic-topic",
        2 => "dynamic-broker",
        3 => "dynamic-default-broker",
        4 => "static-broker",
        5 => "default",
        6 => "dynamic-broker-logger",
        7 => "client-metrics",
        8 => "group",
        _ => "unknown",
    }
}

async fn describe_configs(client: &mut Client, name: &str) -> anyhow::Result<Vec<ConfigEntry>> {
    let addr = client.bootstrap().to_owned();
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configuration_keys(None)]);
    let resp = client.call(&addr, &req, 1, 4).await?;
    let Some(result) = resp.results.first() else {
        bail!("the broker did not describe the configs of {name}");
    };
    if result.error_code != 0 {
        bail!(describe_error(
            name,
            result.error_code,
            result.error_message.as_ref()
        ));
    }
    let mut configs: Vec<ConfigEntry> = result
        .configs
        .iter()
        .map(|c| ConfigEntry {
            name: c.name.to_string(),
            value: c.value.as_ref().map(|v| v.to_string()),
            source: config_source(c.config_source),
            read_only: c.read_only,
            sensitive: c.is_sensitive,
        })
        .collect();
    configs.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(configs)
}

#[derive(Serialize)]
struct Deleted {
    name: String,
    error: Option<String>,
}

async fn delete(client: &mut Client, out: Format, names: &[String]) -> anyhow::Result<()> {
    let addr = client.bootstrap().to_owned();
    // v6 names topics differently; v1-5 are enough for deleting by name
    let req = DeleteTopicsRequest::default()
        .with_topic_names(names.iter().map(|n| topic_name(n)).collect())
        .with_timeout_ms(ADMIN_TIMEOUT_MS);
    let resp = client.call(&addr, &req, 1, 5).await?;
    let mut results = Vec::new();
    for name in names {
        let answer = resp
            .responses
            .iter()
            .find(|r| super::client::named(r.name.as_ref(), name));
        let error = match answer {
            None => Some(format!("the broker did not answer for topic {name}")),
            Some(r) if r.error_code != 0 => {
                Some(describe_error(name, r.error_code, r.error_message.as_ref()))
            }
            Some(_) => None,
        };
        results.push(Deleted {
            name: name.clone(),
            error,
        });
    }
    if out == Format::Json {
        print_json(&results)?;
    } else {
        for r in results.iter().filter(|r| r.error.is_none()) {
            print_text(&format!("deleted topic {}\n", r.name));
        }
    }
    let failed: Vec<&str> = results.iter().filter_map(|r| r.error.as_deref()).collect();
    if !failed.is_empty() {
        bail!(failed.join("; "));
    }
    Ok(())
}

async fn alter_config(
    client: &mut Client,
    out: Format,
    name: &str,
    set: &[(String, String)],
    delete: &[String],
) -> anyhow::Result<()> {
    if set.is_empty() && delete.is_empty() {
        bail!("nothing to change: give --set KEY=VALUE or --delete KEY");
    }
    // an unknown topic must fail clearly rather than as a config error
    topic_metadata(client, name, false).await?;
    let addr = client.bootstrap().to_owned();
    let mut configs: Vec<AlterableConfig> = set
        .iter()
        .map(|(k, v)| {
            AlterableConfig::default()
                .with_name(StrBytes::from_string(k.clone()))
                .with_config_operation(0)
                .with_value(Some(StrBytes::from_string(v.clone())))
        })
        .collect();
    configs.extend(delete.iter().map(|k| {
        AlterableConfig::default()
            .with_name(StrBytes::from_string(k.clone()))
            .with_config_operation(1)
            .with_value(None)
    }));
    let req = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(TOPIC_RESOURCE)
            .with_resource_name(StrBytes::from_string(name.to_owned()))
            .with_configs(configs),
    ]);
    let resp = client.call(&addr, &req, 0, 1).await?;
    let Some(r) = resp.responses.first() else {
        bail!("the broker did not answer for topic {name}");
    };
    if r.error_code != 0 {
        bail!(describe_error(name, r.error_code, r.error_message.as_ref()));
    }
    if out == Format::Json {
        #[derive(Serialize)]
        struct Altered<'a> {
            name: &'a str,
            set: std::collections::BTreeMap<&'a str, &'a str>,
            deleted: &'a [String],
        }
        return print_json(&Altered {
            name,
            set: set.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
            deleted: delete,
        });
    }
    print_text(&format!("updated the configs of topic {name}\n"));
    Ok(())
}
