//! Prints the value of each record of a topic on its own line (lossy
//! UTF-8), from all its partitions.
//!
//! ```text
//! cargo run -p sdk --example consume -- --bootstrap aero://localhost:9091 --topic events \
//!     --from earliest --count 10
//! # over QUIC, trusting the CA the agent wrote into its data folder
//! cargo run -p sdk --example consume -- --bootstrap aero+quic://localhost:9091 \
//!     --tls-ca data/native-tls/ca.pem --topic events
//! ```
//!
//! Exits after `--count` records; without it, runs until interrupted.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use sdk::{Client, ClientBuilder, ConsumerConfig, StartAt};

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
    /// Where every partition starts: earliest, latest or an offset
    #[arg(long, default_value = "earliest", value_parser = parse_from)]
    from: StartAt,
    /// Exit after this many records (default: run forever)
    #[arg(long)]
    count: Option<u64>,
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
    let mut consumer = client.consumer(ConsumerConfig::default())?;
    consumer
        .assign(&args.topic, None, args.from)
        .await
        .with_context(|| format!("assigning {}", args.topic))?;
    let mut seen = 0u64;
    let stdout = std::io::stdout();
    while args.count.is_none_or(|n| seen < n) {
        let Some(record) = consumer.next().await else {
            break;
        };
        let record = record?;
        let value = record.value.as_deref().unwrap_or_default();
        let mut out = stdout.lock();
        if writeln!(out, "{}", String::from_utf8_lossy(value)).is_err() {
            // The reader went away (e.g. `| head`): nothing more to do.
            return Ok(ExitCode::SUCCESS);
        }
        seen += 1;
    }
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
    fn from_takes_earliest_latest_or_an_offset() {
        assert_eq!(parse_from("earliest"), Ok(StartAt::Earliest));
        assert_eq!(parse_from("latest"), Ok(StartAt::Latest));
        assert_eq!(parse_from("42"), Ok(StartAt::Offset(42)));
        assert!(parse_from("-1").is_err());
        assert!(parse_from("soon").is_err());
    }
}
