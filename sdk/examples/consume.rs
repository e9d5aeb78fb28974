//! Prints the value of each record of a topic on its own line (lossy
//! UTF-8), from all its partitions, or, with `--group`, from the
//! partitions the group assigns this member.
//!
//! ```text
//! cargo run -p sdk --example consume -- --bootstrap aero://localhost:9091 --topic events \
//!     --from earliest --count 10
//! cargo run -p sdk --example consume -- --bootstrap aero://localhost:9091 --topic events \
//!     --group billing
//! # over QUIC, trusting the CA the agent wrote into its data folder
//! cargo run -p sdk --example consume -- --bootstrap aero+quic://localhost:9091 \
//!     --tls-ca data/native-tls/ca.pem --topic events
//! # only committed transactions' records
//! cargo run -p sdk --example consume -- --bootstrap aero://localhost:9091 --topic events \
//!     --isolation read-committed
//! ```
//!
//! Exits after `--count` records; without it, runs until interrupted
//! (Ctrl-C or SIGTERM). With `--group` it joins the consumer group and
//! reads the partitions the group gives it, each from the group's
//! committed offset (from `--from`, earliest or latest, where the group
//! committed none); when it ends, by count or by signal, it commits the
//! positions it reached and leaves the group, whose other members then
//! take its partitions over.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use sdk::{
    Client, ClientBuilder, ConsumerConfig, GroupOptions, Isolation, Membership, OffsetReset,
    StartAt,
};

#[derive(Parser, Debug)]
#[command(about = "Print the values of a topic's records")]
struct Args {
    /// Bootstrap URL, e.g. aero://localhost:9091, or aero+quic://localhost:9091 for QUIC
    #[arg(long)]
    bootstrap: String,
    /// For aero+quic://: the CA certificate (PEM) that signed the servers'
    /// certificates, e.g. the agent's DATA_DIR/native-tls/ca.pem
    #[arg(long, value_name = "FILE")]
    tls_ca: Option<std::path::PathBuf>,
    /// For aero+quic://: accept any server certificate (trying things out only)
    #[arg(long)]
    insecure: bool,
    /// Topic to read
    #[arg(long)]
    topic: String,
    /// Where every partition starts: earliest, latest or an offset. With
    /// --group, where a partition the group committed no offset for starts
    /// (earliest or latest).
    #[arg(long, default_value = "earliest", value_parser = parse_from)]
    from: StartAt,
    /// Exit after this many records (default: run until interrupted)
    #[arg(long)]
    count: Option<u64>,
    /// Join this consumer group and read the partitions it assigns
    #[arg(long)]
    group: Option<String>,
    /// read-uncommitted (every record) or read-committed (only committed
    /// transactions' records, and nothing past an open transaction)
    #[arg(long, default_value = "read-uncommitted", value_parser = parse_isolation)]
    isolation: Isolation,
}

fn parse_isolation(s: &str) -> Result<Isolation, String> {
    match s {
        "read-uncommitted" | "read_uncommitted" => Ok(Isolation::ReadUncommitted),
        "read-committed" | "read_committed" => Ok(Isolation::ReadCommitted),
        _ => Err(format!("{s:?} is not read-committed or read-uncommitted")),
    }
}

fn parse_from(s: &str) -> Result<StartAt, String> {
    match s {
        "earliest" => Ok(StartAt::Earliest),
        "latest" => Ok(StartAt::Latest),
        offset => match offset.parse::<i64>() {
            Ok(o) if o >= 0 => Ok(StartAt::Offset(o)),
            _ => Err(format!("{s:?} is not earliest, latest or an offset")),
        },
    }
}

/// The consumer settings for the arguments.
fn config(args: &Args) -> anyhow::Result<ConsumerConfig> {
    let Some(group) = &args.group else {
        return Ok(ConsumerConfig::default().isolation_level(args.isolation));
    };
    let offset_reset = match args.from {
        StartAt::Earliest => OffsetReset::Earliest,
        StartAt::Latest => OffsetReset::Latest,
        other => anyhow::bail!("--from {other:?} does not go with --group: use earliest or latest"),
    };
    Ok(ConsumerConfig {
        group: Some(group.clone()),
        membership: Membership::Group(GroupOptions::default()),
        offset_reset,
        isolation: args.isolation,
        ..ConsumerConfig::default()
    })
}

/// Resolves on Ctrl-C or, on Unix, SIGTERM.
async fn interrupted() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
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
    let mut consumer = client.consumer(config(&args)?)?;
    if args.group.is_some() {
        consumer
            .subscribe(&[&args.topic])
            .with_context(|| format!("subscribing to {}", args.topic))?;
    } else {
        consumer
            .assign(&args.topic, None, args.from)
            .await
            .with_context(|| format!("assigning {}", args.topic))?;
    }
    let mut seen = 0u64;
    let stdout = std::io::stdout();
    let mut stop = std::pin::pin!(interrupted());
    while args.count.is_none_or(|n| seen < n) {
        let record = tokio::select! {
            record = consumer.next() => record,
            () = &mut stop => break,
        };
        let Some(record) = record else {
            break;
        };
        let record = record?;
        let value = record.value.as_deref().unwrap_or_default();
        let mut out = stdout.lock();
        if writeln!(out, "{}", String::from_utf8_lossy(value)).is_err() {
            // The reader went away (e.g. `| head`): nothing more to do.
            break;
        }
        seen += 1;
    }
    // in a group: commit where this member got to, and leave
    consumer
        .close()
        .await
        .context("committing the positions reached")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quic_trust_flags_parse() {
        let args = Args::try_parse_from([
            "consume",
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
        let args = Args::try_parse_from(["consume", "--bootstrap", "aero://h", "--topic", "t"])
            .expect("valid");
        assert_eq!((args.tls_ca, args.insecure), (None, false));
    }

    #[test]
    fn isolation_is_read_uncommitted_unless_asked() {
        let argv = ["consume", "--bootstrap", "aero://h:1", "--topic", "t"];
        let plain = config(&Args::parse_from(argv)).expect("valid");
        assert_eq!(plain.isolation, Isolation::ReadUncommitted);
        let committed = Args::parse_from(argv.iter().chain(&["--isolation", "read-committed"]));
        assert_eq!(
            config(&committed).expect("valid").isolation,
            Isolation::ReadCommitted
        );
        assert!(parse_isolation("serializable").is_err());
    }

    #[test]
    fn from_takes_earliest_latest_or_an_offset() {
        assert_eq!(parse_from("earliest"), Ok(StartAt::Earliest));
        assert_eq!(parse_from("latest"), Ok(StartAt::Latest));
        assert_eq!(parse_from("42"), Ok(StartAt::Offset(42)));
        assert!(parse_from("-1").is_err());
        assert!(parse_from("soon").is_err());
    }

    #[test]
    fn a_group_member_starts_where_the_group_committed_or_at_the_reset() {
        let args = |extra: &[&str]| {
            let mut argv = vec!["consume", "--bootstrap", "aero://h:1", "--topic", "t"];
            argv.extend_from_slice(extra);
            Args::parse_from(argv)
        };
        assert_eq!(config(&args(&[])).unwrap().membership, Membership::Manual);
        let member = config(&args(&["--group", "g", "--from", "latest"])).unwrap();
        assert_eq!(member.group.as_deref(), Some("g"));
        assert!(matches!(member.membership, Membership::Group(_)));
        assert_eq!(member.offset_reset, OffsetReset::Latest);
        assert!(config(&args(&["--group", "g", "--from", "5"])).is_err());
    }
}
