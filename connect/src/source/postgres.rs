//! `PostgresSource`: rows of PostgreSQL tables (or of one query) into
//! topics, with the key names and modes of Confluent's JDBC source.
//!
//! Each table of `table.whitelist` goes to the topic `topic.prefix` +
//! the table's name as listed (with `query`, the topic is the prefix
//! alone). Each row becomes a record whose value is a JSON object, column
//! to value, as PostgreSQL's `to_jsonb` writes it: numbers (integers,
//! `numeric`, floats) are JSON numbers, booleans booleans, `json`/`jsonb`
//! nested JSON, timestamps ISO-8601 strings (`timestamptz` in UTC, as
//! `2026-01-02T03:04:05.123+00:00`; `timestamp` without a zone), dates
//! `YYYY-MM-DD`, `bytea` base64, everything else its text (plain JSON,
//! without JsonConverter's schema envelope); the key is null (as
//! Confluent's source leaves it). Sessions run in UTC, so a `timestamp`
//! column without a zone is taken as UTC.
//!
//! `mode` says which rows a poll reads:
//! - `bulk`: the whole table, every `poll.interval.ms` (no offset);
//! - `incrementing`: rows whose `incrementing.column.name` is above the
//!   last one read (`WHERE col > $last ORDER BY col LIMIT batch.max.rows`):
//!   new rows, not updates; the column must only grow (a sequence);
//! - `timestamp`: rows whose `timestamp.column.name` is after the last one
//!   read and more than `timestamp.delay.interval.ms` before PostgreSQL's
//!   clock (so rows of transactions still open at that time are not passed
//!   by): new and updated rows; rows sharing the last timestamp of a full
//!   batch are read together, so none is skipped;
//! - `timestamp+incrementing`: both, as Confluent's: `ts > last OR (ts =
//!   last AND inc > last_inc)`, ordered by both.
//!
//! Rows whose column is NULL are not read in those modes. Each table is a
//! source partition (`{"table": name}`, or `{"query": text}`) whose
//! offset (`{"incrementing": n}`, `{"timestamp_us": n}` microseconds since
//! the epoch, or both) is committed once its records are acknowledged, so
//! a task restarted anywhere goes on from there: no row is skipped, and
//! only rows acknowledged after the last commit are written again. A table
//! is polled again at once while it returns full batches. The tables are
//! split over at most `tasks.max` tasks. PostgreSQL unreachable is logged
//! and tried again at the next poll; a query PostgreSQL refuses (a missing
//! table or column) fails the task with its reason.

use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use serde_json::{json, Value};
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::Client;

use crate::config::{Config, ConfigDef, Problem};
use crate::postgres::{
    connection_definitions, failure, quote_ident, Connection, Failure, TableName,
};
use crate::sink::postgres::list;
use crate::source::{Polled, Produced};

pub const CLASS: &str = "io.aerostream.connect.postgres.PostgresSource";

/// Where a timestamp offset starts: 0001-01-01 (rows before the common
/// era are not read).
const FIRST_TIMESTAMP_US: i64 = -62_135_596_800_000_000;

pub fn definitions() -> Vec<ConfigDef> {
    let mut defs = connection_definitions();
    let g = "Mode";
    defs.extend([
        ConfigDef::new(
            "table.whitelist",
            "LIST",
            Some(""),
            "HIGH",
            "The tables read (schema.table or table), comma-separated; or set query.",
        )
        .in_group(g),
        ConfigDef::new(
            "query",
            "STRING",
            Some(""),
            "MEDIUM",
            "A query read instead of tables (its rows go to topic.prefix).",
        )
        .in_group(g),
        ConfigDef::new(
            "mode",
            "STRING",
            None,
            "HIGH",
            "bulk, incrementing, timestamp or timestamp+incrementing.",
        )
        .in_group(g),
        ConfigDef::new(
            "incrementing.column.name",
            "STRING",
            Some(""),
            "MEDIUM",
            "The strictly growing column of the incrementing modes.",
        )
        .in_group(g),
        ConfigDef::new(
            "timestamp.column.name",
            "STRING",
            Some(""),
            "MEDIUM",
            "The timestamp column of the timestamp modes.",
        )
        .in_group(g),
        ConfigDef::new(
            "topic.prefix",
            "STRING",
            None,
            "HIGH",
            "The topic is this prefix and the table's name (the prefix alone with query).",
        )
        .in_group(g),
        ConfigDef::new(
            "poll.interval.ms",
            "INT",
            Some("5000"),
            "HIGH",
            "How often each table is read for new rows.",
        )
        .in_group(g),
        ConfigDef::new(
            "batch.max.rows",
            "INT",
            Some("100"),
            "LOW",
            "The most rows one poll reads from a table.",
        )
        .in_group(g),
        ConfigDef::new(
            "timestamp.delay.interval.ms",
            "LONG",
            Some("0"),
            "HIGH",
            "How long after its timestamp a row is read (for transactions still open).",
        )
        .in_group(g),
    ]);
    defs
}

/// Which rows a poll reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Bulk,
    Incrementing,
    Timestamp,
    TimestampIncrementing,
}

impl Mode {
    fn incrementing(self) -> bool {
        matches!(self, Mode::Incrementing | Mode::TimestampIncrementing)
    }

    fn timestamp(self) -> bool {
        matches!(self, Mode::Timestamp | Mode::TimestampIncrementing)
    }
}

/// The source's settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub connection: Connection,
    /// The tables as listed (empty with `query`).
    pub tables: Vec<String>,
    pub query: Option<String>,
    pub mode: Mode,
    pub incrementing_column: String,
    pub timestamp_column: String,
    pub topic_prefix: String,
    pub poll_interval: Duration,
    pub batch_max_rows: u32,
    pub delay: Duration,
}

fn number(
    config: &Config,
    key: &str,
    default: u64,
    range: std::ops::RangeInclusive<u64>,
    problems: &mut Vec<Problem>,
) -> u64 {
    match config.get(key).map(|v| (v, v.trim().parse::<u64>())) {
        None => default,
        Some((_, Ok(n))) if range.contains(&n) => n,
        Some((v, _)) => {
            problems.push((
                key.to_owned(),
                format!(
                    "Invalid value {v} for configuration {key}: {} to {}",
                    range.start(),
                    range.end()
                ),
            ));
            default
        }
    }
}

impl Settings {
    pub fn parse(config: &Config) -> Result<Settings, Vec<Problem>> {
        let mut problems = Vec::new();
        let connection = Connection::parse(config, &mut problems);
        // a task reads the tables it was given
        let tables = match config.get("task.tables") {
            Some(_) => list(config, "task.tables"),
            None => list(config, "table.whitelist"),
        };
        // the query is read as a subquery: a closing semicolon would end it
        let query = config
            .get("query")
            .map(|q| q.trim().trim_end_matches(';').trim_end().to_owned())
            .filter(|q| !q.is_empty());
        match (&query, tables.is_empty()) {
            (None, true) => problems.push((
                "table.whitelist".into(),
                "Set the tables to read in table.whitelist, or a query".into(),
            )),
            (Some(_), false) => problems.push((
                "query".into(),
                "Set table.whitelist or query, not both".into(),
            )),
            _ => {}
        }
        for t in &tables {
            if t.contains('\0') || t.starts_with('.') || t.ends_with('.') {
                problems.push((
                    "table.whitelist".into(),
                    format!("Invalid table name {t:?} in table.whitelist"),
                ));
            }
        }
        let mode = match config.get("mode").map(|m| m.trim()) {
            Some("bulk") => Mode::Bulk,
            Some("incrementing") => Mode::Incrementing,
            Some("timestamp") => Mode::Timestamp,
            Some("timestamp+incrementing") => Mode::TimestampIncrementing,
            other => {
                problems.push((
                    "mode".into(),
                    match other {
                        None | Some("") => {
                            "Missing required configuration \"mode\" which has no default value."
                                .to_owned()
                        }
                        Some(m) => format!(
                            "Invalid value {m} for configuration mode: bulk, incrementing, \
                             timestamp or timestamp+incrementing"
                        ),
                    },
                ));
                Mode::Bulk
            }
        };
        let column = |key: &str, needed: bool, problems: &mut Vec<Problem>| {
            let name = config
                .get(key)
                .map(|c| c.trim().to_owned())
                .unwrap_or_default();
            if needed && name.is_empty() {
                problems.push((
                    key.to_owned(),
                    format!("mode={} needs the column in {key}", mode_name(mode)),
                ));
            }
            if name.contains('\0') || name.contains(',') {
                problems.push((
                    key.to_owned(),
                    format!("Invalid value {name:?} for configuration {key}: one column name"),
                ));
            }
            name
        };
        let incrementing_column = column(
            "incrementing.column.name",
            mode.incrementing(),
            &mut problems,
        );
        let timestamp_column = column("timestamp.column.name", mode.timestamp(), &mut problems);
        let topic_prefix = crate::config::required(config, "topic.prefix", &mut problems);
        let poll = number(
            config,
            "poll.interval.ms",
            5000,
            10..=86_400_000,
            &mut problems,
        );
        let batch = number(config, "batch.max.rows", 100, 1..=100_000, &mut problems);
        let delay = number(
            config,
            "timestamp.delay.interval.ms",
            0,
            0..=86_400_000,
            &mut problems,
        );
        match connection {
            Some(connection) if problems.is_empty() => Ok(Settings {
                connection,
                tables,
                query,
                mode,
                incrementing_column,
                timestamp_column,
                topic_prefix,
                poll_interval: Duration::from_millis(poll),
                batch_max_rows: u32::try_from(batch).unwrap_or(100),
                delay: Duration::from_millis(delay),
            }),
            _ => Err(problems),
        }
    }
}

fn mode_name(mode: Mode) -> &'static str {
    match mode {
        Mode::Bulk => "bulk",
        Mode::Incrementing => "incrementing",
        Mode::Timestamp => "timestamp",
        Mode::TimestampIncrementing => "timestamp+incrementing",
    }
}

pub fn validate(config: &Config) -> Vec<Problem> {
    Settings::parse(config).err().unwrap_or_default()
}

/// The connector's split: the tables dealt round-robin over at most
/// `tasks_max` tasks (a query is one task).
pub fn task_configs(config: &Config, tasks_max: usize) -> Vec<Config> {
    let tables = list(config, "table.whitelist");
    let has_query = config.get("query").is_some_and(|q| !q.trim().is_empty());
    if has_query || tables.is_empty() {
        return vec![config.clone()];
    }
    let n = tasks_max.clamp(1, tables.len());
    (0..n)
        .map(|t| {
            let mine: Vec<&str> = tables
                .iter()
                .enumerate()
                .filter(|(i, _)| i % n == t)
                .map(|(_, name)| name.as_str())
                .collect();
            let mut c = config.clone();
            c.insert("task.tables".into(), mine.join(","));
            c
        })
        .collect()
}

/// Where a table's reading is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offset {
    pub incrementing: Option<i64>,
    pub timestamp_us: Option<i64>,
}

impl Offset {
    pub fn encode(&self) -> String {
        let mut m = serde_json::Map::new();
        if let Some(i) = self.incrementing {
            m.insert("incrementing".into(), json!(i));
        }
        if let Some(t) = self.timestamp_us {
            m.insert("timestamp_us".into(), json!(t));
        }
        Value::Object(m).to_string()
    }

    pub fn decode(offset: &str) -> Result<Offset, String> {
        let v: Value = serde_json::from_str(offset)
            .map_err(|e| format!("the committed offset {offset} is not JSON: {e}"))?;
        let field = |name: &str| match v.get(name) {
            None | Some(Value::Null) => Ok(None),
            Some(n) => n.as_i64().map(Some).ok_or_else(|| {
                format!("the committed offset {offset} has a {name} that is not an integer")
            }),
        };
        Ok(Offset {
            incrementing: field("incrementing")?,
            timestamp_us: field("timestamp_us")?,
        })
    }
}

/// The statements reading a table in a mode. Their parameters: the last
/// incrementing value (incrementing); the last timestamp in µs and the
/// delay in ms (timestamp); the last timestamp, the last incrementing
/// value and the delay (timestamp+incrementing).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Queries {
    /// The next rows.
    pub next: String,
    /// Timestamp mode: every row of one timestamp (its only parameter),
    /// read when a full batch ended on it.
    pub at_timestamp: Option<String>,
}

/// The SQL reading `from` (a quoted table, or a query in parentheses) in
/// `mode`.
pub fn queries(
    from: &str,
    mode: Mode,
    incrementing: &str,
    timestamp: &str,
    limit: u32,
) -> Result<Queries, String> {
    let row = format!("to_jsonb(t)::text AS __row FROM {from} AS t");
    let since = "('epoch'::timestamptz + $1::bigint * interval '1 microsecond')";
    Ok(match mode {
        Mode::Bulk => Queries {
            next: format!("SELECT {row}"),
            at_timestamp: None,
        },
        Mode::Incrementing => {
            let inc = quote_ident(incrementing)?;
            Queries {
                next: format!(
                    "SELECT t.{inc}::bigint AS __inc, {row} WHERE t.{inc} > $1::bigint \
                     ORDER BY t.{inc} LIMIT {limit}"
                ),
                at_timestamp: None,
            }
        }
        Mode::Timestamp => {
            let ts = quote_ident(timestamp)?;
            let ts_us = format!("(extract(epoch FROM t.{ts}) * 1000000)::bigint AS __ts_us");
            Queries {
                next: format!(
                    "SELECT {ts_us}, {row} WHERE t.{ts} > {since} AND \
                     t.{ts} < now() - $2::bigint * interval '1 millisecond' \
                     ORDER BY t.{ts} LIMIT {limit}"
                ),
                at_timestamp: Some(format!("SELECT {ts_us}, {row} WHERE t.{ts} = {since}")),
            }
        }
        Mode::TimestampIncrementing => {
            let ts = quote_ident(timestamp)?;
            let inc = quote_ident(incrementing)?;
            Queries {
                next: format!(
                    "SELECT (extract(epoch FROM t.{ts}) * 1000000)::bigint AS __ts_us, \
                     t.{inc}::bigint AS __inc, {row} WHERE \
                     t.{ts} < now() - $3::bigint * interval '1 millisecond' AND \
                     (t.{ts} > {since} OR (t.{ts} = {since} AND t.{inc} > $2::bigint)) \
                     ORDER BY t.{ts}, t.{inc} LIMIT {limit}"
                ),
                at_timestamp: None,
            }
        }
    })
}

/// `bytea` as `to_jsonb` writes it (`"\\x0a1b"`) made base64.
pub fn hex_to_base64(text: &str) -> Option<String> {
    let hex = text.strip_prefix("\\x")?;
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// One table (or the query) a task reads.
#[derive(Debug)]
struct Table {
    /// As listed (the topic's suffix), or the query.
    name: String,
    topic: String,
    partition: String,
    queries: Queries,
    offset: Offset,
    next_due: Instant,
    /// Its `bytea` columns (None until the table was described).
    bytea: Option<Vec<String>>,
    from: String,
}

/// One task's reader.
pub struct PostgresSource {
    settings: Settings,
    tables: Vec<Table>,
    client: Option<Client>,
}

impl PostgresSource {
    pub fn new(config: &Config) -> Result<PostgresSource, Vec<Problem>> {
        let settings = Settings::parse(config)?;
        let mut tables = Vec::new();
        let mut problems = Vec::new();
        let sources: Vec<(String, String, String, String)> = match &settings.query {
            Some(q) => vec![(
                q.clone(),
                settings.topic_prefix.clone(),
                json!({ "query": q }).to_string(),
                format!("({q})"),
            )],
            None => settings
                .tables
                .iter()
                .filter_map(|t| match TableName::parse(t).quoted() {
                    Ok(from) => Some((
                        t.clone(),
                        format!("{}{t}", settings.topic_prefix),
                        json!({ "table": t }).to_string(),
                        from,
                    )),
                    Err(e) => {
                        problems.push(("table.whitelist".to_owned(), e));
                        None
                    }
                })
                .collect(),
        };
        for (name, topic, partition, from) in sources {
            match queries(
                &from,
                settings.mode,
                &settings.incrementing_column,
                &settings.timestamp_column,
                settings.batch_max_rows,
            ) {
                Ok(queries) => tables.push(Table {
                    name,
                    topic,
                    partition,
                    queries,
                    offset: Offset::default(),
                    next_due: Instant::now(),
                    bytea: None,
                    from,
                }),
                Err(e) => problems.push(("mode".to_owned(), e)),
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        Ok(PostgresSource {
            settings,
            tables,
            client: None,
        })
    }

    /// The source partitions: one per table.
    pub fn partitions(&self) -> Vec<String> {
        self.tables.iter().map(|t| t.partition.clone()).collect()
    }

    /// Goes on from a table's committed offset.
    pub fn resume(&mut self, partition: &str, offset: &str) -> Result<(), String> {
        let offset = Offset::decode(offset)?;
        if let Some(t) = self.tables.iter_mut().find(|t| t.partition == partition) {
            t.offset = offset;
        }
        Ok(())
    }

    /// How long until a table is due.
    pub fn pause(&self) -> Duration {
        let now = Instant::now();
        self.tables
            .iter()
            .map(|t| t.next_due.saturating_duration_since(now))
            .min()
            .unwrap_or(self.settings.poll_interval)
    }

    /// Reads the table that is due first (nothing when none is).
    pub async fn poll(&mut self) -> Result<Polled, String> {
        let now = Instant::now();
        let Some(i) = (0..self.tables.len())
            .filter(|&i| self.tables[i].next_due <= now)
            .min_by_key(|&i| self.tables[i].next_due)
        else {
            return Ok(Polled::default());
        };
        let interval = self.settings.poll_interval;
        match self.read(i).await {
            Ok((polled, full)) => {
                self.tables[i].next_due = if full { now } else { now + interval };
                Ok(polled)
            }
            Err(Failure::Transient(reason)) => {
                tracing::warn!(table = %self.tables[i].name, %reason, "connect: PostgreSQL source trying again at the next poll");
                self.client = None;
                self.tables[i].next_due = now + interval;
                Ok(Polled::default())
            }
            Err(Failure::Refused(reason)) => Err(reason),
        }
    }

    /// Reads table `i` once: its records (its offset moved on) and whether
    /// the batch was full (more rows may wait).
    async fn read(&mut self, i: usize) -> Result<(Polled, bool), Failure> {
        if self.client.is_none() {
            self.client = Some(
                self.settings
                    .connection
                    .connect()
                    .await
                    .map_err(Failure::Transient)?,
            );
        }
        let Some(client) = self.client.as_ref() else {
            return Err(Failure::Transient("not connected".into()));
        };
        let mode = self.settings.mode;
        let delay = i64::try_from(self.settings.delay.as_millis()).unwrap_or(i64::MAX);
        let limit = usize::try_from(self.settings.batch_max_rows).unwrap_or(usize::MAX);
        let t = &mut self.tables[i];
        if t.bytea.is_none() {
            t.bytea = Some(bytea_columns(client, &t.from, &t.name).await?);
        }
        let ts = t.offset.timestamp_us.unwrap_or(FIRST_TIMESTAMP_US);
        let inc = t.offset.incrementing.unwrap_or(i64::MIN);
        let what = format!("reading {} failed", t.name);
        let params: Vec<&(dyn ToSql + Sync)> = match mode {
            Mode::Bulk => vec![],
            Mode::Incrementing => vec![&inc],
            Mode::Timestamp => vec![&ts, &delay],
            Mode::TimestampIncrementing => vec![&ts, &inc, &delay],
        };
        let mut rows = run(client, &t.queries.next, &params, mode, &what).await?;
        let full = mode != Mode::Bulk && rows.len() >= limit;
        if let (true, Some(at), Some(last)) = (
            full,
            &t.queries.at_timestamp,
            rows.last().and_then(|r| r.ts_us),
        ) {
            // a full batch may end inside a timestamp: its rows are read
            // whole, or the next `ts > last` would skip the rest
            rows.retain(|r| r.ts_us != Some(last));
            rows.extend(run(client, at, &[&last], mode, &what).await?);
        }
        let mut records = Vec::with_capacity(rows.len());
        let bytea = t.bytea.as_deref().unwrap_or_default();
        for r in &rows {
            records.push(Produced {
                topic: t.topic.clone(),
                key: None,
                value: Bytes::from(with_base64(&r.json, bytea)),
            });
        }
        let mut offsets = Vec::new();
        if let Some(last) = rows.last() {
            if mode.incrementing() {
                t.offset.incrementing = last.inc;
            }
            if mode.timestamp() {
                t.offset.timestamp_us = last.ts_us;
            }
            if mode != Mode::Bulk {
                offsets.push((t.partition.clone(), t.offset.encode()));
            }
        }
        Ok((Polled { records, offsets }, full))
    }
}

/// A row read: its JSON and its offset columns.
struct Read {
    json: String,
    inc: Option<i64>,
    ts_us: Option<i64>,
}

async fn run(
    client: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
    mode: Mode,
    what: &str,
) -> Result<Vec<Read>, Failure> {
    let rows = client
        .query(sql, params)
        .await
        .map_err(|e| failure(what, &e))?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let json: String = row.try_get("__row").map_err(|e| failure(what, &e))?;
        let inc = if mode.incrementing() {
            row.try_get::<_, Option<i64>>("__inc")
                .map_err(|e| failure(what, &e))?
        } else {
            None
        };
        let ts_us = if mode.timestamp() {
            row.try_get::<_, Option<i64>>("__ts_us")
                .map_err(|e| failure(what, &e))?
        } else {
            None
        };
        out.push(Read { json, inc, ts_us });
    }
    Ok(out)
}

/// The `bytea` columns of what a table (or query) answers.
async fn bytea_columns(client: &Client, from: &str, name: &str) -> Result<Vec<String>, Failure> {
    let statement = client
        .prepare(&format!("SELECT * FROM {from} AS t LIMIT 0"))
        .await
        .map_err(|e| failure(&format!("reading {name} failed"), &e))?;
    Ok(statement
        .columns()
        .iter()
        .filter(|c| *c.type_() == Type::BYTEA)
        .map(|c| c.name().to_owned())
        .collect())
}

/// A row's JSON with its `bytea` columns made base64.
fn with_base64(json: &str, bytea: &[String]) -> String {
    if bytea.is_empty() {
        return json.to_owned();
    }
    let Ok(Value::Object(mut row)) = serde_json::from_str::<Value>(json) else {
        return json.to_owned();
    };
    for c in bytea {
        if let Some(Value::String(hex)) = row.get(c) {
            if let Some(b64) = hex_to_base64(hex) {
                row.insert(c.clone(), Value::String(b64));
            }
        }
    }
    Value::Object(row).to_string()
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
