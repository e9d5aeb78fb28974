//! `aerostream transaction list|describe|abort`: transactions as Kafka's
//! `kafka-transactions.sh` shows them (ListTransactions on every broker,
//! DescribeTransactions on the transactional id's coordinator). `abort`
//! ends a transactional id's open transaction for good, as Kafka's
//! `force-terminate` does: an InitProducerId for the id aborts whatever
//! transaction is open and fences its producer, which must initialise
//! again before it writes.

use std::collections::BTreeMap;

use anyhow::bail;
use kafka_protocol::messages::{
    DescribeTransactionsRequest, InitProducerIdRequest, ListTransactionsRequest, ProducerId,
    TransactionalId,
};
use kafka_protocol::protocol::StrBytes;
use serde::Serialize;

use super::client::{describe_error, error_name, Client};
use super::output::{print_json, Format, Table};
use super::Common;

#[derive(clap::Args)]
pub struct TransactionArgs {
    #[command(flatten)]
    common: Common,
    #[command(subcommand)]
    command: TransactionCommand,
}

#[derive(clap::Subcommand)]
enum TransactionCommand {
    /// List every transactional id with its producer and state.
    List,
    /// Show a transactional id's producer, state, timeout, start time and
    /// the partitions of its open transaction.
    Describe { transactional_id: String },
    /// Abort a transactional id's open transaction and fence its producer.
    Abort { transactional_id: String },
}

pub async fn run(args: TransactionArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let out = args.common.output;
    match args.command {
        TransactionCommand::List => list(&mut client, out).await,
        TransactionCommand::Describe { transactional_id } => {
            describe(&mut client, out, &transactional_id).await
        }
        TransactionCommand::Abort { transactional_id } => {
            abort(&mut client, out, &transactional_id).await
        }
    }
}

#[derive(Serialize)]
struct Listed {
    transactional_id: String,
    producer_id: i64,
    state: String,
    coordinator: i32,
}

async fn list(client: &mut Client, out: Format) -> anyhow::Result<()> {
    let meta = client.metadata(Some(&[]), false).await?;
    let mut nodes: Vec<i32> = meta.brokers.iter().map(|b| b.node_id.0).collect();
    nodes.sort_unstable();
    // Kafka brokers list only the ids they coordinate; an AeroStream agent
    // lists all of them: keep each id once
    let mut found: BTreeMap<String, Listed> = BTreeMap::new();
    let mut answered = 0;
    for &node in &nodes {
        match client
            .call_node(node, &ListTransactionsRequest::default(), 0, 1)
            .await
        {
            Ok(r) if r.error_code == 0 => {
                answered += 1;
                for t in r.transaction_states {
                    found
                        .entry(t.transactional_id.to_string())
                        .or_insert(Listed {
                            transactional_id: t.transactional_id.to_string(),
                            producer_id: t.producer_id.0,
                            state: t.transaction_state.to_string(),
                            coordinator: node,
                        });
                }
            }
            Ok(r) => eprintln!(
                "warning: broker {node} cannot list its transactions: {}",
                error_name(r.error_code)
            ),
            Err(e) => eprintln!("warning: broker {node} did not answer: {e:#}"),
        }
    }
    if answered == 0 {
        bail!("no broker listed its transactions");
    }
    let listed: Vec<Listed> = found.into_values().collect();
    if out == Format::Json {
        return print_json(&listed);
    }
    let mut table = Table::new(&["TRANSACTIONAL ID", "PRODUCER ID", "STATE"]);
    for t in &listed {
        table.row(vec![
            t.transactional_id.clone(),
            t.producer_id.to_string(),
            t.state.clone(),
        ]);
    }
    table.print();
    Ok(())
}

#[derive(Serialize)]
struct Described {
    transactional_id: String,
    coordinator: i32,
    producer_id: i64,
    producer_epoch: i16,
    state: String,
    timeout_ms: i32,
    /// Wall clock (ms since the epoch) the open transaction began; `None`
    /// when none is open.
    start_time_ms: Option<i64>,
    partitions: Vec<String>,
}

async fn describe(client: &mut Client, out: Format, id: &str) -> anyhow::Result<()> {
    let coordinator = client.find_coordinator(id, 1).await?;
    let req = DescribeTransactionsRequest::default()
        .with_transactional_ids(vec![TransactionalId(StrBytes::from_string(id.to_owned()))]);
    let resp = client.call_node(coordinator, &req, 0, 0).await?;
    let Some(t) = resp.transaction_states.first() else {
        bail!("the coordinator did not describe transactional id {id}");
    };
    if t.error_code != 0 {
        bail!(describe_error(id, t.error_code, None));
    }
    let d = Described {
        transactional_id: id.to_owned(),
        coordinator,
        producer_id: t.producer_id.0,
        producer_epoch: t.producer_epoch,
        state: t.transaction_state.to_string(),
        timeout_ms: t.transaction_timeout_ms,
        start_time_ms: (t.transaction_start_time_ms >= 0).then_some(t.transaction_start_time_ms),
        partitions: t
            .topics
            .iter()
            .flat_map(|topic| {
                topic
                    .partitions
                    .iter()
                    .map(move |p| format!("{}-{p}", topic.topic.as_str()))
            })
            .collect(),
    };
    if out == Format::Json {
        return print_json(&d);
    }
    let mut table = Table::new(&["FIELD", "VALUE"]);
    table.row(vec!["transactional id".into(), d.transactional_id.clone()]);
    table.row(vec!["coordinator".into(), d.coordinator.to_string()]);
    table.row(vec!["producer id".into(), d.producer_id.to_string()]);
    table.row(vec!["producer epoch".into(), d.producer_epoch.to_string()]);
    table.row(vec!["state".into(), d.state.clone()]);
    table.row(vec!["timeout ms".into(), d.timeout_ms.to_string()]);
    table.row(vec![
        "started ms".into(),
        d.start_time_ms
            .map_or_else(|| "-".into(), |t| t.to_string()),
    ]);
    table.row(vec!["partitions".into(), d.partitions.join(", ")]);
    table.print();
    Ok(())
}

#[derive(Serialize)]
struct Aborted {
    transactional_id: String,
    producer_id: i64,
    /// The epoch now current: the aborted transaction's producer is fenced.
    producer_epoch: i16,
}

async fn abort(client: &mut Client, out: Format, id: &str) -> anyhow::Result<()> {
    let coordinator = client.find_coordinator(id, 1).await?;
    // the timeout the id had is not known here: a minute, Kafka's default
    let req = InitProducerIdRequest::default()
        .with_transactional_id(Some(TransactionalId(StrBytes::from_string(id.to_owned()))))
        .with_transaction_timeout_ms(60_000)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1);
    let mut attempt = 0;
    let resp = loop {
        let resp = client.call_node(coordinator, &req, 0, 4).await?;
        // the open transaction's markers are being written: ask again
        if resp.error_code != 0 && super::client::is_retriable(resp.error_code) && attempt < 20 {
            attempt += 1;
            tokio::time::sleep(std::time::Duration::from_millis(500)).await;
            continue;
        }
        break resp;
    };
    if resp.error_code != 0 {
        bail!(describe_error(id, resp.error_code, None));
    }
    let a = Aborted {
        transactional_id: id.to_owned(),
        producer_id: resp.producer_id.0,
        producer_epoch: resp.producer_epoch,
    };
    if out == Format::Json {
        return print_json(&a);
    }
    println!(
        "aborted the open transaction of {id} (if any); its producer is fenced (producer id {}, epoch now {})",
        a.producer_id, a.producer_epoch
    );
    Ok(())
}
