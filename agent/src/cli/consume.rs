//! `aerostream consume`: reads a topic's records with Fetch from each
//! partition's leader and prints them, kcat-like. Without `--follow` it
//! stops at the log end it saw when it started; `--count` stops it earlier.
//! It joins no group and commits nothing.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::{anyhow, bail};
use bytes::Bytes;
use kafka_protocol::messages::{
    fetch_request::{FetchPartition, FetchTopic},
    list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic},
    FetchRequest, ListOffsetsRequest,
};
use kafka_protocol::records::Record;
use serde::Serialize;

use super::client::{broker, describe_error, is_retriable, topic_name, Client};
use super::output::Format;
use super::topic::topic_metadata;
use super::Common;

const FETCH_MAX_WAIT_MS: i32 = 500;
const PARTITION_MAX_BYTES: i32 = 1 << 20;
const FETCH_MAX_BYTES: i32 = 8 << 20;
/// Without `--follow`, how many rounds (200 ms apart) a partition may stay
/// without a reachable leader before the command gives up.
const STALE_ROUNDS: u32 = 150;

#[derive(clap::Args)]
pub struct ConsumeArgs {
    #[command(flatten)]
    common: Common,
    /// Topic to read.
    #[arg(long, short = 't')]
    topic: String,
    /// Read only this partition (default: all of them).
    #[arg(long, short = 'p')]
    partition: Option<i32>,
    /// Where to start: `earliest`, `latest` or an offset.
    #[arg(long, short = 'o', default_value = "earliest", value_parser = parse_start)]
    from: Start,
    /// Stop after this many records.
    #[arg(long, short = 'c')]
    count: Option<u64>,
    /// Keep waiting for new records instead of stopping at the log end.
    #[arg(long, short = 'f')]
    follow: bool,
    /// How to print each record: %t topic, %p partition, %o offset, %k key,
    /// %v value, %K key length, %S value length, %T timestamp (ms), %h
    /// headers, %% a percent sign; \n, \t and \\ as in C. A newline is added
    /// unless the format ends with one.
    #[arg(long, short = 'F', default_value = "%v")]
    format: String,
}

#[derive(Clone, Copy, Debug)]
enum Start {
    Earliest,
    Latest,
    Offset(i64),
}

fn parse_start(s: &str) -> Result<Start, String> {
    match s {
        "earliest" | "beginning" => Ok(Start::Earliest),
        "latest" | "end" => Ok(Start::Latest),
        _ => match s.parse::<i64>() {
            Ok(o) if o >= 0 => Ok(Start::Offset(o)),
            _ => Err(format!(
                "expected earliest, latest or an offset >= 0, got {s:?}"
            )),
        },
    }
}

/// One partition being read.
struct Position {
    leader: i32,
    next: i64,
    /// Without `--follow`: the log end seen at start, where reading stops.
    end: Option<i64>,
}

pub async fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let mut client = Client::connect_as(
        &args.common.bootstrap,
        args.common.tls.config()?,
        args.common.sasl.login()?,
    )
    .await?;
    let topic = args.topic.clone();
    let leaders = leaders_of(&mut client, &topic).await?;
    let chosen: Vec<i32> = match args.partition {
        Some(p) if leaders.contains_key(&p) => vec![p],
        Some(p) => bail!(
            "topic {topic} has no partition {p} (it has {})",
            leaders.len()
        ),
        None => leaders.keys().copied().collect(),
    };
    let starts = match args.from {
        Start::Offset(o) => chosen.iter().map(|p| (*p, o)).collect(),
        Start::Earliest => list_offsets(&mut client, &topic, &leaders, &chosen, -2).await?,
        Start::Latest => list_offsets(&mut client, &topic, &leaders, &chosen, -1).await?,
    };
    let ends = if args.follow {
        BTreeMap::new()
    } else {
        list_offsets(&mut client, &topic, &leaders, &chosen, -1).await?
    };
    let mut positions: BTreeMap<i32, Position> = chosen
        .iter()
        .map(|p| {
            (
                *p,
                Position {
                    leader: leaders.get(p).copied().unwrap_or(-1),
                    next: starts.get(p).copied().unwrap_or(0),
                    end: ends.get(p).copied(),
                },
            )
        })
        .collect();
    let printer = Printer::new(&args.format, args.common.output, &topic);
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut printed = 0u64;
    let mut stale_rounds = 0u32;
    loop {
        positions.retain(|_, pos| pos.end.is_none_or(|end| pos.next < end));
        if positions.is_empty() || args.count.is_some_and(|c| printed >= c) {
            break;
        }
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for (p, pos) in &positions {
            by_leader.entry(pos.leader).or_default().push(*p);
        }
        let mut stale = false;
        for (leader, parts) in by_leader {
            let fetched = if leader < 0 {
                parts.iter().map(|p| (*p, Fetched::Error(5))).collect()
            } else {
                fetch(&mut client, leader, &topic, &parts, &positions).await?
            };
            for (p, result) in fetched {
                let Some(pos) = positions.get_mut(&p) else {
                    continue;
                };
                match result {
                    Fetched::Records(records) => {
                        for r in records {
                            if r.offset < pos.next {
                                continue; // the batch began before our position
                            }
                            pos.next = r.offset + 1;
                            if r.control {
                                continue;
                            }
                            if pos.end.is_some_and(|end| r.offset >= end) {
                                break;
                            }
                            if args.count.is_some_and(|c| printed >= c) {
                                break;
                            }
                            if let Err(e) = printer.print(&mut out, p, &r) {
                                return closed_or(e);
                            }
                            printed += 1;
                        }
                    }
                    Fetched::Error(code) if is_retriable(code) => stale = true,
                    Fetched::Error(code) => {
                        bail!(describe_error(&format!("{topic}/{p}"), code, None))
                    }
                }
            }
        }
        if let Err(e) = out.flush() {
            return closed_or(e);
        }
        if stale {
            stale_rounds += 1;
            if stale_rounds > STALE_ROUNDS && !args.follow {
                bail!("{topic}: partitions stayed without a reachable leader; try again later");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            let fresh = leaders_of(&mut client, &topic).await?;
            for (p, pos) in positions.iter_mut() {
                pos.leader = fresh.get(p).copied().unwrap_or(-1);
            }
        } else {
            stale_rounds = 0;
        }
    }
    if let Err(e) = out.flush() {
        return closed_or(e);
    }
    Ok(())
}

/// A reader that went away (`| head`) ends the command quietly.
fn closed_or(e: std::io::Error) -> anyhow::Result<()> {
    if e.kind() == std::io::ErrorKind::BrokenPipe {
        Ok(())
    } else {
        Err(anyhow!("cannot write to stdout: {e}"))
    }
}

/// Each partition's leader, from Metadata (the topic must exist).
async fn leaders_of(client: &mut Client, topic: &str) -> anyhow::Result<BTreeMap<i32, i32>> {
    let meta = topic_metadata(client, topic, false).await?;
    Ok(meta
        .topics
        .iter()
        .filter(|t| super::client::named(t.name.as_ref(), topic))
        .flat_map(|t| t.partitions.iter())
        .map(|p| (p.partition_index, p.leader_id.0))
        .collect())
}

/// ListOffsets at `timestamp` (-2 earliest, -1 latest) for `partitions`.
async fn list_offsets(
    client: &mut Client,
    topic: &str,
    leaders: &BTreeMap<i32, i32>,
    partitions: &[i32],
    timestamp: i64,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for p in partitions {
        let leader = leaders.get(p).copied().unwrap_or(-1);
        if leader < 0 {
            bail!("{topic}/{p} has no leader right now");
        }
        by_leader.entry(leader).or_default().push(*p);
    }
    let mut out = BTreeMap::new();
    for (leader, parts) in by_leader {
        let req = ListOffsetsRequest::default()
            .with_replica_id(broker(-1))
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(topic_name(topic))
                .with_partitions(
                    parts
                        .iter()
                        .map(|p| {
                            ListOffsetsPartition::default()
                                .with_partition_index(*p)
                                .with_current_leader_epoch(-1)
                                .with_timestamp(timestamp)
                        })
                        .collect(),
                )]);
        let resp = client.call_node(leader, &req, 1, 7).await?;
        for t in &resp.topics {
            for p in &t.partitions {
                if p.error_code != 0 {
                    bail!(describe_error(
                        &format!("{topic}/{}", p.partition_index),
                        p.error_code,
                        None
                    ));
                }
                out.insert(p.partition_index, p.offset);
            }
        }
    }
    Ok(out)
}

enum Fetched {
    Records(Vec<Record>),
    Error(i16),
}

async fn fetch(
    client: &mut Client,
    leader: i32,
    topic: &str,
    parts: &[i32],
    positions: &BTreeMap<i32, Position>,
) -> anyhow::Result<Vec<(i32, Fetched)>> {
    let req = FetchRequest::default()
        .with_replica_id(broker(-1))
        .with_max_wait_ms(FETCH_MAX_WAIT_MS)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                parts
                    .iter()
                    .map(|p| {
                        FetchPartition::default()
                            .with_partition(*p)
                            .with_fetch_offset(positions.get(p).map_or(0, |pos| pos.next))
                            .with_partition_max_bytes(PARTITION_MAX_BYTES)
                    })
                    .collect(),
            )]);
    // v13+ names topics by id only
    let resp = client.call_node(leader, &req, 4, 12).await?;
    if resp.error_code != 0 {
        bail!(describe_error(topic, resp.error_code, None));
    }
    let mut out = Vec::new();
    for t in &resp.responses {
        for p in &t.partitions {
            if p.error_code != 0 {
                out.push((p.partition_index, Fetched::Error(p.error_code)));
                continue;
            }
            let records = match &p.records {
                Some(bytes) => kafka_client::decode_records(bytes.clone())?,
                None => Vec::new(),
            };
            out.push((p.partition_index, Fetched::Records(records)));
        }
    }
    Ok(out)
}

/// One piece of a `--format`.
enum Piece {
    Text(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Key,
    Value,
    KeyLen,
    ValueLen,
    Timestamp,
    Headers,
}

/// Prints records as `--format` or `--output json` says.
struct Printer {
    pieces: Vec<Piece>,
    json: bool,
    topic: String,
}

#[derive(Serialize)]
struct JsonRecord<'a> {
    topic: &'a str,
    partition: i32,
    offset: i64,
    timestamp: i64,
    key: Option<String>,
    value: Option<String>,
    headers: BTreeMap<String, Option<String>>,
}

impl Printer {
    fn new(format: &str, output: Format, topic: &str) -> Printer {
        Printer {
            pieces: parse_format(format),
            json: output == Format::Json,
            topic: topic.to_owned(),
        }
    }

    fn print(&self, out: &mut impl Write, partition: i32, r: &Record) -> std::io::Result<()> {
        let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        if self.json {
            let rec = JsonRecord {
                topic: &self.topic,
                partition,
                offset: r.offset,
                timestamp: r.timestamp,
                key: text(&r.key),
                value: text(&r.value),
                headers: r
                    .headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), text(v)))
                    .collect(),
            };
            serde_json::to_writer(&mut *out, &rec)?;
            return out.write_all(b"\n");
        }
        let len = |b: &Option<Bytes>| b.as_ref().map_or(-1, |b| b.len() as i64);
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.write_all(t)?,
                Piece::Topic => out.write_all(self.topic.as_bytes())?,
                Piece::Partition => write!(out, "{partition}")?,
                Piece::Offset => write!(out, "{}", r.offset)?,
                Piece::Key => out.write_all(r.key.as_deref().unwrap_or_default())?,
                Piece::Value => out.write_all(r.value.as_deref().unwrap_or_default())?,
                Piece::KeyLen => write!(out, "{}", len(&r.key))?,
                Piece::ValueLen => write!(out, "{}", len(&r.value))?,
                Piece::Timestamp => write!(out, "{}", r.timestamp)?,
                Piece::Headers => {
                    for (i, (k, v)) in r.headers.iter().enumerate() {
                        if i > 0 {
                            out.write_all(b",")?;
                        }
                        out.write_all(k.as_bytes())?;
                        out.write_all(b"=")?;
                        out.write_all(v.as_deref().unwrap_or_default())?;
                    }
                }
            }
        }
        Ok(())
    }
}

fn parse_format(format: &str) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut text = Vec::new();
    let mut chars = format.chars().peekable();
    let push = |pieces: &mut Vec<Piece>, text: &mut Vec<u8>, piece: Piece| {
        if !text.is_empty() {
            pieces.push(Piece::Text(std::mem::take(text)));
        }
        pieces.push(piece);
    };
    while let Some(c) = chars.next() {
        match (c, chars.peek().copied()) {
            ('%', Some(n)) => {
                let piece = match n {
                    't' => Some(Piece::Topic),
                    'p' => Some(Piece::Partition),
                    'o' => Some(Piece::Offset),
                    'k' => Some(Piece::Key),
                    'v' => Some(Piece::Value),
                    'K' => Some(Piece::KeyLen),
                    'S' => Some(Piece::ValueLen),
                    'T' => Some(Piece::Timestamp),
                    'h' => Some(Piece::Headers),
                    _ => None,
                };
                match piece {
                    Some(p) => {
                        chars.next();
                        push(&mut pieces, &mut text, p);
                    }
                    None if n == '%' => {
                        chars.next();
                        text.push(b'%');
                    }
                    None => text.push(b'%'),
                }
            }
            ('\\', Some(n @ ('n' | 't' | '\\'))) => {
                chars.next();
                text.push(match n {
                    'n' => b'\n',
                    't' => b'\t',
                    _ => b'\\',
                });
            }
            _ => {
                let mut buf = [0u8; 4];
                text.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            }
        }
    }
    if !text.ends_with(b"\n") {
        text.push(b'\n');
    }
    pieces.push(Piece::Text(text));
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::records::TimestampType;

    fn record(key: Option<&'static [u8]>, value: &'static [u8]) -> Record {
        Record {
            transactional: false,
            control: false,
            delete_horizon: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset: 7,
            sequence: -1,
            timestamp: 1_700_000_000_000,
            key: key.map(Bytes::from_static),
            value: Some(Bytes::from_static(value)),
            headers: IndexMap::new(),
        }
    }

    fn printed(format: &str, r: &Record) -> String {
        let p = Printer::new(format, Format::Table, "greetings");
        let mut out = Vec::new();
        p.print(&mut out, 2, r).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn the_default_format_prints_each_value_on_its_own_line() {
        assert_eq!(printed("%v", &record(None, b"hello")), "hello\n");
    }

    #[test]
    fn format_tokens_and_escapes_follow_kcat() {
        let r = record(Some(b"k1"), b"v1");
        assert_eq!(
            printed("%t/%p@%o %k=%v %K %S 100%%\\t%T\\n", &r),
            "greetings/2@7 k1=v1 2 2 100%\t1700000000000\n"
        );
        assert_eq!(printed("%k|%v", &record(None, b"x")), "|x\n");
    }
}
