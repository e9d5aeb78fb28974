//! Produces each line of stdin as one record (acks all, idempotent).
//!
//! ```text
//! cargo run -p sdk --example produce -- --bootstrap aero://localhost:9091 --topic events
//! printf 'user-1:hello\nuser-2:bye\n' | cargo run -p sdk --example produce -- \
//!     --bootstrap aero://localhost:9091 --topic events --key-sep :
//! # over QUIC, trusting the CA the agent wrote into its data folder
//! cargo run -p sdk --example produce -- --bootstrap aero+quic://localhost:9091 \
//!     --tls-ca data/native-tls/ca.pem --topic events
//! # all of stdin in one transaction, committed at its end (or aborted)
//! cargo run -p sdk --example produce -- --bootstrap aero://localhost:9091 \
//!     --topic events --transactional-id loader-1 [--abort]
//! ```
//!
//! Prints nothing but errors, on stderr; exits with status 1 if any record
//! failed. At the end of stdin it flushes and waits for every answer.

use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use sdk::{Client, ClientBuilder, Delivery, Error, ProducerConfig, Record};
use tokio::io::{AsyncBufReadExt, BufReader};

/// Sends records still unanswered at most; past it, reading stdin waits.
const MAX_PENDING: usize = 10_000;

#[derive(Parser, Debug)]
#[command(about = "Produce each line of stdin as a record")]
struct Args {
    /// Bootstrap URL, e.g. aero://localhost:9091 (or a list: aero://h1:9091,h2:9091);
    /// aero+quic://localhost:9091 for QUIC
    #[arg(long)]
    bootstrap: String,
    /// For aero+quic://: the CA certificate (PEM) that signed the servers'
    /// certificates, e.g. the agent's DATA_DIR/native-tls/ca.pem
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// For aero+quic://: accept any server certificate (trying things out only)
    #[arg(long)]
    insecure: bool,
    /// Topic to produce to
    #[arg(long)]
    topic: String,
    /// Split each line at the first occurrence of this separator into key and value
    #[arg(long)]
    key_sep: Option<String>,
    /// Send all of stdin in one transaction of this transactional id,
    /// committed at the end of stdin (fences earlier producers of the id)
    #[arg(long, value_name = "ID")]
    transactional_id: Option<String>,
    /// With --transactional-id: abort the transaction instead of committing it
    #[arg(long, requires = "transactional_id")]
    abort: bool,
}

/// The record for one line (without its end of line).
fn record(line: &[u8], key_sep: Option<&[u8]>) -> Record {
    let split = key_sep.filter(|sep| !sep.is_empty()).and_then(|sep| {
        line.windows(sep.len())
            .position(|w| w == sep)
            .map(|at| (&line[..at], &line[at + sep.len()..]))
    });
    match split {
        Some((key, value)) => Record::new(value.to_vec()).with_key(key.to_vec()),
        None => Record::new(line.to_vec()),
    }
}

fn report(result: Result<Delivery, Error>, failed: &mut bool) {
    if let Err(e) = result {
        eprintln!("produce failed: {e}");
        *failed = true;
    }
}

/// The client's settings from the command line.
fn client_builder(url: &str, tls_ca: Option<&std::path::Path>, insecure: bool) -> ClientBuilder {
    let mut builder = Client::builder(url);
    if let Some(ca) = tls_ca {
        builder = builder.tls_ca_file(ca);
    }
    if insecure {
        builder = builder.danger_accept_invalid_certs();
    }
    builder
}

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let client = client_builder(&args.bootstrap, args.tls_ca.as_deref(), args.insecure)
        .connect()
        .await
        .with_context(|| format!("connecting to {}", args.bootstrap))?;
    let config = match &args.transactional_id {
        Some(id) => ProducerConfig::default().transactional_id(id.clone()),
        None => ProducerConfig::default(),
    };
    let producer = client.producer(config)?;
    if args.transactional_id.is_some() {
        producer.init_transactions().await?;
        producer.begin_transaction()?;
    }
    let key_sep = args.key_sep.as_deref().map(str::as_bytes);

    let mut failed = false;
    let mut pending = FuturesUnordered::new();
    let mut lines = BufReader::new(tokio::io::stdin()).split(b'\n');
    while let Some(mut line) = lines.next_segment().await.context("reading stdin")? {
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        pending.push(producer.send(&args.topic, record(&line, key_sep)));
        // Take the answers already in, without waiting for the others.
        while let Some(Some(result)) = pending.next().now_or_never() {
            report(result, &mut failed);
        }
        if pending.len() >= MAX_PENDING {
            if let Some(result) = pending.next().await {
                report(result, &mut failed);
            }
        }
    }
    producer.flush().await?;
    while let Some(result) = pending.next().await {
        report(result, &mut failed);
    }
    if args.transactional_id.is_some() {
        if failed || args.abort {
            producer.abort_transaction().await?;
        } else {
            producer.commit_transaction().await?;
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_trust_flags_parse() {
        let args = Args::try_parse_from([
            "produce",
            "--bootstrap",
            "aero+quic://h:9091",
            "--topic",
            "t",
            "--tls-ca",
            "/d/native-tls/ca.pem",
            "--insecure",
        ])
        .expect("valid");
        assert_eq!(
            args.tls_ca.as_deref(),
            Some(std::path::Path::new("/d/native-tls/ca.pem"))
        );
        assert!(args.insecure);
        let args = Args::try_parse_from(["produce", "--bootstrap", "aero://h", "--topic", "t"])
            .expect("valid");
        assert_eq!((args.tls_ca, args.insecure), (None, false));
    }

    #[test]
    fn abort_needs_a_transactional_id() {
        let base = ["produce", "--bootstrap", "aero://h", "--topic", "t"];
        assert!(Args::try_parse_from(base.iter().chain(&["--abort"])).is_err());
        let args =
            Args::try_parse_from(base.iter().chain(&["--transactional-id", "app", "--abort"]))
                .expect("valid");
        assert_eq!(args.transactional_id.as_deref(), Some("app"));
        assert!(args.abort);
    }

    #[test]
    fn a_line_splits_at_the_first_separator_only() {
        let r = record(b"k:v:w", Some(b":"));
        assert_eq!(r.key.as_deref(), Some(&b"k"[..]));
        assert_eq!(r.value.as_deref(), Some(&b"v:w"[..]));
        let r = record(b"no separator", Some(b":"));
        assert_eq!(
            (r.key, r.value.as_deref()),
            (None, Some(&b"no separator"[..]))
        );
        assert_eq!(record(b"a:b", None).key, None);
    }
}
