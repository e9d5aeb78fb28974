//! Prints the value of each record of a topic on its own line (lossy
//! UTF-8), from all its partitions.
//!
//! ```text
//! cargo run -p sdk --example consume -- --bootstrap aero://localhost:9091 --topic events \
//!     --from earliest --count 10
//! ```
//!
//! Exits after `--count` records; without it, runs until interrupted.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use futures::StreamExt;
use sdk::{Client, ConsumerConfig, StartAt};

#[derive(Parser, Debug)]
#[command(about = "Print the values of a topic's records")]
struct Args {
    /// Bootstrap URL, e.g. aero://localhost:9091
    #[arg(long)]
    bootstrap: String,
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

#[tokio::main]
async fn main() -> anyhow::Result<ExitCode> {
    let args = Args::parse();
    let client = Client::connect(&args.bootstrap)
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
    fn from_takes_earliest_latest_or_an_offset() {
        assert_eq!(parse_from("earliest"), Ok(StartAt::Earliest));
        assert_eq!(parse_from("latest"), Ok(StartAt::Latest));
        assert_eq!(parse_from("42"), Ok(StartAt::Offset(42)));
        assert!(parse_from("-1").is_err());
        assert!(parse_from("soon").is_err());
    }
}
