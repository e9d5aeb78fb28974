//! `PostgresSink`: records into PostgreSQL tables, inserted or upserted by
//! key, with Confluent's JDBC sink's key names.
//!
//! Each record's value is a JSON object (plain, or Connect's JsonConverter
//! envelope `{"schema": .., "payload": {..}}`, whose payload is used); its
//! fields are the row's columns. The table is `table.name.format` with
//! `${topic}` replaced by the record's topic (a dot in the format, not in
//! the topic, separates a schema from the table). The primary key comes
//! from `pk.mode`: `record_key` takes the fields of a JSON-object key (only
//! those in `pk.fields` when set), or a primitive key as the one column
//! `pk.fields` names (`id` by default); `record_value` takes the
//! `pk.fields` of the value; `none` has no key (insert only).
//!
//! `insert.mode=upsert` writes `INSERT .. ON CONFLICT (pk) DO UPDATE`;
//! `auto.create` creates a missing table from the records (JSON integers
//! as `bigint`, other numbers `double precision`, booleans `boolean`,
//! strings and nulls `text`, objects and arrays `jsonb`; the primary key
//! from the pk fields); `auto.evolve` adds the columns a table lacks
//! (nullable, typed the same way). With `delete.enabled` (which needs
//! `pk.mode=record_key`) a tombstone deletes the row of its key; without
//! it tombstones are skipped.
//!
//! Names are always quoted identifiers and values always bound as one JSON
//! parameter that PostgreSQL spreads over the table's columns
//! (`json_populate_recordset`), so neither a topic nor a field name nor a
//! value can change a statement, and PostgreSQL converts each value to its
//! column's type. Each flush writes the buffered records in transactions
//! of up to `batch.size` records; the runner commits their Kafka offsets
//! only after the COMMIT, so a crash writes the last batch again: with
//! `upsert` that replay changes nothing (at-least-once delivery,
//! effectively once in the table), with `insert` it may fail on (or add)
//! duplicates.
//!
//! A record that cannot be a row (a value that is not a JSON object, a
//! missing key field) is that record's error (`errors.tolerance`, the
//! dead-letter topic). When PostgreSQL refuses a batch (a type mismatch,
//! a missing column without `auto.evolve`), its records are written again
//! one per transaction, and each one refused is that record's error.
//! PostgreSQL unreachable or shutting down is retried `max.retries` times,
//! `retry.backoff.ms` apart (doubling, at most 30 s), then fails the task;
//! a task asked to stop meanwhile stops (its batch unwritten, its offsets
//! uncommitted).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use tokio::sync::watch;
use tokio_postgres::Client;

use crate::config::{converter_kind, Config, ConfigDef, Problem};
use crate::postgres::{
    connection_definitions, failure, quote_ident, Connection, Failure, TableName,
};
use crate::record::SinkRecord;
use crate::sink::http::BatchError;

pub const CLASS: &str = "io.aerostream.connect.postgres.PostgresSink";

/// The pk column of a primitive key when `pk.fields` names none.
pub const DEFAULT_KEY_COLUMN: &str = "id";

const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub fn definitions() -> Vec<ConfigDef> {
    let mut defs = connection_definitions();
    let g = "Writes";
    defs.extend([
        ConfigDef::new(
            "table.name.format",
            "STRING",
            Some("${topic}"),
            "MEDIUM",
            "The table of a record: ${topic} is its topic; a dot in the format separates a schema.",
        )
        .in_group(g),
        ConfigDef::new(
            "insert.mode",
            "STRING",
            Some("insert"),
            "HIGH",
            "insert, or upsert (INSERT .. ON CONFLICT (pk) DO UPDATE: a replay changes nothing).",
        )
        .in_group(g),
        ConfigDef::new(
            "pk.mode",
            "STRING",
            Some("none"),
            "HIGH",
            "Where the primary key is: none, record_key or record_value.",
        )
        .in_group(g),
        ConfigDef::new(
            "pk.fields",
            "LIST",
            Some(""),
            "MEDIUM",
            "The pk fields (record_value: required; record_key: of an object key, or the column of a primitive key, id by default).",
        )
        .in_group(g),
        ConfigDef::new(
            "auto.create",
            "BOOLEAN",
            Some("false"),
            "MEDIUM",
            "Create a missing table from the records.",
        )
        .in_group(g),
        ConfigDef::new(
            "auto.evolve",
            "BOOLEAN",
            Some("false"),
            "MEDIUM",
            "Add the (nullable) columns a table lacks.",
        )
        .in_group(g),
        ConfigDef::new(
            "delete.enabled",
            "BOOLEAN",
            Some("false"),
            "MEDIUM",
            "A tombstone deletes the row of its key (needs pk.mode=record_key).",
        )
        .in_group(g),
        ConfigDef::new(
            "batch.size",
            "INT",
            Some("3000"),
            "MEDIUM",
            "The most records one transaction writes.",
        )
        .in_group(g),
        ConfigDef::new(
            "max.retries",
            "INT",
            Some("10"),
            "MEDIUM",
            "How many times a batch is tried again while PostgreSQL is unreachable.",
        )
        .in_group(g),
        ConfigDef::new(
            "retry.backoff.ms",
            "LONG",
            Some("3000"),
            "LOW",
            "The first pause before a retry (doubling, at most 30 s).",
        )
        .in_group(g),
    ]);
    defs
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InsertMode {
    Insert,
    Upsert,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PkMode {
    None,
    RecordKey,
    RecordValue,
}

/// The sink's settings.
#[derive(Debug, Clone)]
pub struct PostgresSinkConfig {
    pub connection: Connection,
    pub table_format: String,
    pub insert_mode: InsertMode,
    pub pk_mode: PkMode,
    pub pk_fields: Vec<String>,
    pub auto_create: bool,
    pub auto_evolve: bool,
    pub delete_enabled: bool,
    pub batch_size: usize,
    pub max_retries: u32,
    pub backoff: Duration,
    /// The key is text as it is (StringConverter, ByteArrayConverter)
    /// rather than JSON.
    pub key_is_text: bool,
    /// `errors.tolerance=all`: refused records are skipped by the runner.
    pub tolerate: bool,
}

fn boolean(config: &Config, key: &str, problems: &mut Vec<Problem>) -> bool {
    match config.get(key).map(|v| v.trim().to_ascii_lowercase()) {
        None => false,
        Some(v) if v == "true" => true,
        Some(v) if v == "false" => false,
        Some(v) => {
            problems.push((
                key.to_owned(),
                format!("Invalid value {v} for configuration {key}: true or false"),
            ));
            false
        }
    }
}

/// A comma-separated list, trimmed, without empties.
pub(crate) fn list(config: &Config, key: &str) -> Vec<String> {
    config
        .get(key)
        .map(|v| {
            v.split(',')
                .map(str::trim)
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl PostgresSinkConfig {
    pub fn parse(config: &Config) -> Result<PostgresSinkConfig, Vec<Problem>> {
        let mut problems = Vec::new();
        let connection = Connection::parse(config, &mut problems);
        let table_format = config
            .get("table.name.format")
            .map(|f| f.trim().to_owned())
            .unwrap_or_else(|| "${topic}".to_owned());
        if table_format.is_empty() || table_format.contains('\0') {
            problems.push((
                "table.name.format".into(),
                "Invalid value for configuration table.name.format: a table name (${topic} is the topic)"
                    .into(),
            ));
        }
        let insert_mode = match config.get("insert.mode").map(|v| v.trim()) {
            None | Some("insert") => InsertMode::Insert,
            Some("upsert") => InsertMode::Upsert,
            Some(v) => {
                problems.push((
                    "insert.mode".into(),
                    format!("Invalid value {v} for configuration insert.mode: insert or upsert"),
                ));
                InsertMode::Insert
            }
        };
        let pk_mode = match config.get("pk.mode").map(|v| v.trim()) {
            None | Some("none") => PkMode::None,
            Some("record_key") => PkMode::RecordKey,
            Some("record_value") => PkMode::RecordValue,
            Some(v) => {
                problems.push((
                    "pk.mode".into(),
                    format!(
                        "Invalid value {v} for configuration pk.mode: none, record_key or record_value"
                    ),
                ));
                PkMode::None
            }
        };
        let pk_fields = list(config, "pk.fields");
        if pk_fields.iter().any(|f| f.contains('\0')) {
            problems.push((
                "pk.fields".into(),
                "A field name holds a NUL character".into(),
            ));
        }
        if insert_mode == InsertMode::Upsert && pk_mode == PkMode::None {
            problems.push((
                "insert.mode".into(),
                "insert.mode=upsert needs a primary key: set pk.mode to record_key or record_value"
                    .into(),
            ));
        }
        if pk_mode == PkMode::RecordValue && pk_fields.is_empty() {
            problems.push((
                "pk.fields".into(),
                "pk.mode=record_value needs the value's key fields in pk.fields".into(),
            ));
        }
        let auto_create = boolean(config, "auto.create", &mut problems);
        let auto_evolve = boolean(config, "auto.evolve", &mut problems);
        let delete_enabled = boolean(config, "delete.enabled", &mut problems);
        if delete_enabled && pk_mode != PkMode::RecordKey {
            problems.push((
                "delete.enabled".into(),
                "delete.enabled=true needs pk.mode=record_key (a tombstone has only its key)"
                    .into(),
            ));
        }
        let batch_size = crate::config::number(
            config,
            "batch.size",
            3000usize,
            |n| (1..=100_000).contains(n),
            "1 to 100000",
            &mut problems,
        );
        let max_retries = crate::config::number(
            config,
            "max.retries",
            10u32,
            |_| true,
            "at least 0",
            &mut problems,
        );
        let backoff = crate::config::number(
            config,
            "retry.backoff.ms",
            3000u64,
            |_| true,
            "at least 0",
            &mut problems,
        );
        let key_is_text = matches!(
            config.get("key.converter").and_then(|v| converter_kind(v)),
            Some("string" | "bytes")
        );
        match connection {
            Some(connection) if problems.is_empty() => Ok(PostgresSinkConfig {
                connection,
                table_format,
                insert_mode,
                pk_mode,
                pk_fields,
                auto_create,
                auto_evolve,
                delete_enabled,
                batch_size,
                max_retries,
                backoff: Duration::from_millis(backoff),
                key_is_text,
                tolerate: config
                    .get("errors.tolerance")
                    .is_some_and(|v| v.trim() == "all"),
            }),
            _ => Err(problems),
        }
    }

    /// The table a topic's records go to.
    pub fn table_for(&self, topic: &str) -> TableName {
        let fill = |part: &str| part.replace("${topic}", topic);
        match self.table_format.split_once('.') {
            Some((schema, table)) if !schema.is_empty() && !table.is_empty() => TableName {
                schema: Some(fill(schema)),
                table: fill(table),
            },
            _ => TableName {
                schema: None,
                table: fill(&self.table_format),
            },
        }
    }
}

pub fn validate(config: &Config) -> Vec<Problem> {
    PostgresSinkConfig::parse(config).err().unwrap_or_default()
}

/// What a record does to its table.
#[derive(Debug, Clone, PartialEq)]
pub enum Op {
    /// Insert or upsert these columns.
    Write(Map<String, Value>),
    /// Delete the row of these pk columns.
    Delete(Map<String, Value>),
    /// Nothing (a tombstone without delete.enabled); its offset moves on.
    Skip,
}

/// A record made ready for its table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub table: TableName,
    pub op: Op,
    /// The pk columns, in order.
    pub pk: Vec<String>,
    pub record: SinkRecord,
}

/// Connect's JsonConverter envelope `{"schema": .., "payload": ..}` gives
/// its payload; any other value is itself.
pub fn unwrap_envelope(v: Value) -> Value {
    match v {
        Value::Object(mut m)
            if m.len() == 2 && m.contains_key("schema") && m.contains_key("payload") =>
        {
            m.remove("payload").unwrap_or(Value::Null)
        }
        other => other,
    }
}

/// The PostgreSQL type a JSON value gets in a created table or an added
/// column.
pub fn infer_type(v: &Value) -> &'static str {
    match v {
        Value::Number(n) if n.is_i64() => "bigint",
        // beyond bigint: numeric keeps it exact
        Value::Number(n) if n.is_u64() => "numeric",
        Value::Number(_) => "double precision",
        Value::Bool(_) => "boolean",
        Value::String(_) | Value::Null => "text",
        Value::Object(_) | Value::Array(_) => "jsonb",
    }
}

impl PostgresSinkConfig {
    fn key_value(&self, key: &[u8]) -> Value {
        if self.key_is_text {
            return Value::String(String::from_utf8_lossy(key).into_owned());
        }
        match serde_json::from_slice::<Value>(key) {
            Ok(v) => unwrap_envelope(v),
            // not JSON: the text as it is
            Err(_) => Value::String(String::from_utf8_lossy(key).into_owned()),
        }
    }

    /// The pk columns and values of a record's key.
    fn key_columns(&self, record: &SinkRecord) -> Result<Map<String, Value>, String> {
        let key = record
            .key
            .as_deref()
            .ok_or("the record has no key (pk.mode=record_key)")?;
        let mut pk = Map::new();
        match self.key_value(key) {
            Value::Null => return Err("the record's key is null (pk.mode=record_key)".into()),
            Value::Object(fields) => {
                if self.pk_fields.is_empty() {
                    pk = fields;
                } else {
                    for f in &self.pk_fields {
                        match fields.get(f) {
                            Some(v) => {
                                pk.insert(f.clone(), v.clone());
                            }
                            None => return Err(format!("the record's key has no field {f:?}")),
                        }
                    }
                }
            }
            primitive => {
                let column = match self.pk_fields.as_slice() {
                    [] => DEFAULT_KEY_COLUMN.to_owned(),
                    [one] => one.clone(),
                    _ => {
                        return Err(
                            "the record's key is not an object, and pk.fields names more than one field"
                                .into(),
                        )
                    }
                };
                pk.insert(column, primitive);
            }
        }
        if pk.is_empty() {
            return Err("the record's key has no fields".into());
        }
        if let Some((f, _)) = pk.iter().find(|(_, v)| v.is_null()) {
            return Err(format!("the record's key field {f:?} is null"));
        }
        Ok(pk)
    }

    /// What a record does to its table; the reason when it cannot be a
    /// row.
    pub fn to_row(&self, record: &SinkRecord) -> Result<Row, String> {
        let table = self.table_for(&record.topic);
        let Some(value) = record.value.as_deref() else {
            if self.delete_enabled {
                let pk = self.key_columns(record)?;
                return Ok(Row {
                    table,
                    pk: pk.keys().cloned().collect(),
                    op: Op::Delete(pk),
                    record: record.clone(),
                });
            }
            return Ok(Row {
                table,
                op: Op::Skip,
                pk: Vec::new(),
                record: record.clone(),
            });
        };
        let mut fields = match serde_json::from_slice::<Value>(value).map(unwrap_envelope) {
            Ok(Value::Object(fields)) => fields,
            Ok(other) => {
                let kind = match other {
                    Value::Null => "null",
                    Value::Array(_) => "an array",
                    Value::String(_) => "a string",
                    Value::Number(_) => "a number",
                    _ => "a boolean",
                };
                return Err(format!("the record's value is {kind}, not a JSON object"));
            }
            Err(e) => return Err(format!("the record's value is not JSON: {e}")),
        };
        let pk = match self.pk_mode {
            PkMode::None => Vec::new(),
            PkMode::RecordKey => {
                let key = self.key_columns(record)?;
                let names = key.keys().cloned().collect();
                // the key's fields win over the value's of the same name
                fields.extend(key);
                names
            }
            PkMode::RecordValue => {
                for f in &self.pk_fields {
                    match fields.get(f) {
                        None => return Err(format!("the record's value has no pk field {f:?}")),
                        Some(Value::Null) => {
                            return Err(format!("the record's pk field {f:?} is null"))
                        }
                        Some(_) => {}
                    }
                }
                self.pk_fields.clone()
            }
        };
        if fields.is_empty() {
            return Err("the record's value has no fields".into());
        }
        Ok(Row {
            table,
            op: Op::Write(fields),
            pk,
            record: record.clone(),
        })
    }
}

fn column_list(columns: &[String]) -> Result<String, String> {
    Ok(columns
        .iter()
        .map(|c| quote_ident(c))
        .collect::<Result<Vec<_>, _>>()?
        .join(", "))
}

/// The statement writing rows given as one JSON array parameter (`$1`).
pub fn write_sql(
    table: &TableName,
    columns: &[String],
    pk: &[String],
    mode: InsertMode,
) -> Result<String, String> {
    let t = table.quoted()?;
    let cols = column_list(columns)?;
    let mut sql = format!(
        "INSERT INTO {t} ({cols}) SELECT {cols} FROM json_populate_recordset(NULL::{t}, $1::json)"
    );
    if mode == InsertMode::Upsert {
        let updates = columns
            .iter()
            .filter(|c| !pk.contains(c))
            .map(|c| quote_ident(c).map(|q| format!("{q} = EXCLUDED.{q}")))
            .collect::<Result<Vec<_>, _>>()?;
        sql.push_str(&format!(" ON CONFLICT ({})", column_list(pk)?));
        if updates.is_empty() {
            sql.push_str(" DO NOTHING");
        } else {
            sql.push_str(&format!(" DO UPDATE SET {}", updates.join(", ")));
        }
    }
    Ok(sql)
}

/// The statement deleting the rows whose pk columns are given as one JSON
/// array parameter (`$1`).
pub fn delete_sql(table: &TableName, pk: &[String]) -> Result<String, String> {
    let t = table.quoted()?;
    let cond = pk
        .iter()
        .map(|c| quote_ident(c).map(|q| format!("d.{q} = k.{q}")))
        .collect::<Result<Vec<_>, _>>()?
        .join(" AND ");
    Ok(format!(
        "DELETE FROM {t} AS d USING json_populate_recordset(NULL::{t}, $1::json) AS k WHERE {cond}"
    ))
}

/// The statement creating a table with these columns (pk columns NOT
/// NULL and the primary key).
pub fn create_sql(
    table: &TableName,
    columns: &[(String, &'static str)],
    pk: &[String],
) -> Result<String, String> {
    let mut parts = Vec::with_capacity(columns.len() + 1);
    for (name, kind) in columns {
        let not_null = if pk.contains(name) { " NOT NULL" } else { "" };
        parts.push(format!("{} {kind}{not_null}", quote_ident(name)?));
    }
    if !pk.is_empty() {
        parts.push(format!("PRIMARY KEY ({})", column_list(pk)?));
    }
    Ok(format!(
        "CREATE TABLE IF NOT EXISTS {} ({})",
        table.quoted()?,
        parts.join(", ")
    ))
}

/// The statement adding a nullable column.
pub fn add_column_sql(table: &TableName, column: &str, kind: &str) -> Result<String, String> {
    Ok(format!(
        "ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} {kind}",
        table.quoted()?,
        quote_ident(column)?
    ))
}

/// One statement of a batch: rows of one table with the same columns and
/// operation, in record order.
#[derive(Debug, Clone, PartialEq)]
pub struct Statement {
    pub table: TableName,
    pub delete: bool,
    pub columns: Vec<String>,
    pub pk: Vec<String>,
    pub rows: Vec<Value>,
}

/// Groups a batch's rows into statements that keep their order: a run of
/// rows with the same table, operation, columns and pk is one statement,
/// except that a pk seen twice starts a new one (an upsert statement may
/// not touch a row twice).
pub fn statements(rows: &[Row]) -> Vec<Statement> {
    let mut out: Vec<Statement> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for row in rows {
        let (delete, fields) = match &row.op {
            Op::Write(f) => (false, f),
            Op::Delete(f) => (true, f),
            Op::Skip => continue,
        };
        let columns: Vec<String> = fields.keys().cloned().collect();
        let key = serde_json::to_string(&row.pk.iter().map(|c| fields.get(c)).collect::<Vec<_>>())
            .unwrap_or_default();
        let same = out.last().is_some_and(|s| {
            s.table == row.table
                && s.delete == delete
                && s.columns == columns
                && s.pk == row.pk
                && (row.pk.is_empty() || !seen.contains(&key))
        });
        if !same {
            seen.clear();
            out.push(Statement {
                table: row.table.clone(),
                delete,
                columns,
                pk: row.pk.clone(),
                rows: Vec::new(),
            });
        }
        seen.insert(key);
        if let Some(s) = out.last_mut() {
            s.rows.push(Value::Object(fields.clone()));
        }
    }
    out
}

/// The sink of one task: buffered rows and the connection.
pub struct PostgresSink {
    config: PostgresSinkConfig,
    client: Option<Client>,
    buffer: Vec<Row>,
    /// How many rows at the front of the buffer are written one per
    /// transaction (a batch of them was refused).
    isolate: usize,
    /// The task's stop signal: retries end when it is set.
    stop: Option<watch::Receiver<bool>>,
    /// The columns of each table met so far.
    columns: HashMap<TableName, BTreeSet<String>>,
    pub transactions: u64,
    pub records_written: u64,
    pub bytes_written: u64,
}

impl PostgresSink {
    pub fn new(config: PostgresSinkConfig) -> PostgresSink {
        PostgresSink {
            config,
            client: None,
            buffer: Vec::new(),
            isolate: 0,
            stop: None,
            columns: HashMap::new(),
            transactions: 0,
            records_written: 0,
            bytes_written: 0,
        }
    }

    /// Ends retries (keeping their batch unwritten) when `stop` is set,
    /// so a task asked to stop does not wait out an outage.
    pub fn stop_on(&mut self, stop: watch::Receiver<bool>) {
        self.stop = Some(stop);
    }

    /// Buffers a record; the reason when it cannot be a row.
    pub fn put(&mut self, record: SinkRecord) -> Result<(), String> {
        let row = self.config.to_row(&record)?;
        self.buffer.push(row);
        Ok(())
    }

    /// Writes every buffered record, `batch.size` per transaction: the
    /// offsets to commit, and the records PostgreSQL refused, each with
    /// its reason (a refused batch is written again one record per
    /// transaction, so the others go in). Without `errors.tolerance=all`
    /// the first refused record ends the flush (the caller fails the
    /// task), with it every refused one is gathered (the caller skips
    /// them); they are no longer buffered. `Err` when PostgreSQL stayed
    /// unreachable.
    pub async fn flush_due(
        &mut self,
        _now: Instant,
    ) -> Result<(Vec<(String, i32, i64)>, Option<BatchError>), String> {
        let mut done: BTreeMap<(String, i32), i64> = BTreeMap::new();
        let mut failed: Option<BatchError> = None;
        // with errors.tolerance=all every refused record is gathered (the
        // runner skips them all); otherwise the first one ends the flush
        while !self.buffer.is_empty() && (failed.is_none() || self.config.tolerate) {
            // the records of a refused batch are written one per
            // transaction, to find the ones refused
            let n = if self.isolate > 0 {
                1
            } else {
                self.buffer.len().min(self.config.batch_size)
            };
            self.isolate = self.isolate.saturating_sub(1);
            let batch: Vec<Row> = self.buffer.drain(..n).collect();
            let Some(outcome) = self.write_with_retries(&batch).await? else {
                // the task is stopping: the batch stays unwritten (its
                // offsets uncommitted)
                self.buffer.splice(0..0, batch);
                break;
            };
            match outcome {
                Ok(bytes) => {
                    self.transactions += 1;
                    self.records_written += batch.len() as u64;
                    self.bytes_written += bytes;
                    for r in &batch {
                        let next = done
                            .entry((r.record.topic.clone(), r.record.partition))
                            .or_insert(r.record.offset + 1);
                        *next = (*next).max(r.record.offset + 1);
                    }
                }
                Err(_) if batch.len() > 1 => {
                    self.isolate = batch.len();
                    self.buffer.splice(0..0, batch);
                }
                Err(message) => {
                    let f = failed.get_or_insert_with(|| BatchError {
                        message: String::new(),
                        records: Vec::new(),
                        reasons: Vec::new(),
                    });
                    for r in batch {
                        let r = r.record;
                        f.reasons.push(format!(
                            "{}-{} offset {}: {message}",
                            r.topic, r.partition, r.offset
                        ));
                        f.records.push(r);
                    }
                }
            }
        }
        if let Some(f) = &mut failed {
            f.message = match f.reasons.as_slice() {
                [one] => one.clone(),
                [first, rest @ ..] => format!("{first} (and {} more records refused)", rest.len()),
                [] => String::new(),
            };
        }
        Ok((
            done.into_iter().map(|((t, p), o)| (t, p, o)).collect(),
            failed,
        ))
    }

    /// One batch, tried again while PostgreSQL is unreachable: `Ok(Ok)`
    /// with the bytes sent, `Ok(Err)` when it is refused, `Ok(None)` when
    /// the task is asked to stop meanwhile, `Err` when retries ran out.
    async fn write_with_retries(
        &mut self,
        batch: &[Row],
    ) -> Result<Option<Result<u64, String>>, String> {
        let mut backoff = self.config.backoff;
        let mut attempt = 0u32;
        loop {
            let outcome = self.write(batch).await;
            let reason = match outcome {
                Ok(bytes) => return Ok(Some(Ok(bytes))),
                Err(Failure::Refused(reason)) => {
                    // what is known of the tables may be what was refused
                    self.columns.clear();
                    return Ok(Some(Err(reason)));
                }
                Err(Failure::Transient(reason)) => reason,
            };
            self.client = None;
            self.columns.clear();
            if attempt >= self.config.max_retries {
                return Err(format!(
                    "PostgreSQL at {} stayed unreachable ({attempt} retries): {reason}",
                    self.config.connection.shown()
                ));
            }
            attempt += 1;
            tracing::warn!(attempt, error = %reason, "connect: PostgreSQL sink retrying");
            let stopping = match self.stop.as_mut() {
                Some(stop) if *stop.borrow() => true,
                Some(stop) => tokio::select! {
                    _ = tokio::time::sleep(backoff) => *stop.borrow(),
                    _ = stop.changed() => true,
                },
                None => {
                    tokio::time::sleep(backoff).await;
                    false
                }
            };
            if stopping {
                return Ok(None);
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    async fn write(&mut self, batch: &[Row]) -> Result<u64, Failure> {
        if self.client.is_none() {
            self.client = Some(
                self.config
                    .connection
                    .connect()
                    .await
                    .map_err(Failure::Transient)?,
            );
        }
        let statements = statements(batch);
        self.prepare_tables(&statements).await?;
        let Some(client) = self.client.as_mut() else {
            return Err(Failure::Transient("not connected".into()));
        };
        let tx = client
            .transaction()
            .await
            .map_err(|e| failure("starting a transaction failed", &e))?;
        let mut bytes = 0u64;
        for s in &statements {
            let exists = self.columns.get(&s.table).is_some_and(|c| !c.is_empty());
            let sql = if s.delete {
                if !exists {
                    // nothing to delete from a table that is not there
                    continue;
                }
                delete_sql(&s.table, &s.pk)
            } else {
                write_sql(&s.table, &s.columns, &s.pk, self.config.insert_mode)
            }
            .map_err(Failure::Refused)?;
            let rows = Value::Array(s.rows.clone());
            bytes += rows.to_string().len() as u64;
            tx.execute(sql.as_str(), &[&rows])
                .await
                .map_err(|e| failure(&format!("writing to {} failed", s.table), &e))?;
        }
        tx.commit()
            .await
            .map_err(|e| failure("committing the transaction failed", &e))?;
        Ok(bytes)
    }

    /// Reads the columns of the batch's tables; creates the missing ones
    /// and adds missing columns as the config allows.
    async fn prepare_tables(&mut self, statements: &[Statement]) -> Result<(), Failure> {
        let Some(client) = self.client.as_ref() else {
            return Err(Failure::Transient("not connected".into()));
        };
        let mut wanted: BTreeMap<&TableName, Vec<&Statement>> = BTreeMap::new();
        for s in statements {
            wanted.entry(&s.table).or_default().push(s);
        }
        for (table, stmts) in wanted {
            let mut known = match self.columns.get(table) {
                Some(c) => c.clone(),
                None => table_columns(client, table).await?,
            };
            // the type of each column written: its first non-null value's
            let mut types: Vec<(String, &'static str)> = Vec::new();
            let mut pk: Vec<String> = Vec::new();
            for s in stmts.iter().filter(|s| !s.delete) {
                if pk.is_empty() {
                    pk = s.pk.clone();
                }
                for row in &s.rows {
                    let Value::Object(fields) = row else { continue };
                    for (name, v) in fields {
                        match types.iter_mut().find(|(n, _)| n == name) {
                            Some(t) if t.1 == "text" && !v.is_null() && !v.is_string() => {
                                t.1 = infer_type(v)
                            }
                            Some(_) => {}
                            None => types.push((name.clone(), infer_type(v))),
                        }
                    }
                }
            }
            if types.is_empty() {
                self.columns.insert(table.clone(), known);
                continue;
            }
            if known.is_empty() {
                if !self.config.auto_create {
                    return Err(Failure::Refused(format!(
                        "table {table} does not exist (set auto.create=true to create it)"
                    )));
                }
                let sql = create_sql(table, &types, &pk).map_err(Failure::Refused)?;
                client
                    .batch_execute(&sql)
                    .await
                    .map_err(|e| failure(&format!("creating table {table} failed"), &e))?;
                tracing::info!(%table, "connect: PostgreSQL sink created a table");
                known = table_columns(client, table).await?;
            }
            let missing: Vec<&(String, &str)> =
                types.iter().filter(|(n, _)| !known.contains(n)).collect();
            if !missing.is_empty() {
                let names: Vec<&str> = missing.iter().map(|(n, _)| n.as_str()).collect();
                if !self.config.auto_evolve {
                    return Err(Failure::Refused(format!(
                        "table {table} has no column {} (set auto.evolve=true to add missing columns)",
                        names.join(", ")
                    )));
                }
                for (name, kind) in missing {
                    let sql = add_column_sql(table, name, kind).map_err(Failure::Refused)?;
                    client.batch_execute(&sql).await.map_err(|e| {
                        failure(&format!("adding column {name} to {table} failed"), &e)
                    })?;
                }
                tracing::info!(%table, columns = ?names, "connect: PostgreSQL sink added columns");
                known = table_columns(client, table).await?;
            }
            self.columns.insert(table.clone(), known);
        }
        Ok(())
    }
}

/// The columns of a table (none when it does not exist).
async fn table_columns(client: &Client, table: &TableName) -> Result<BTreeSet<String>, Failure> {
    let rows = client
        .query(
            "SELECT column_name::text FROM information_schema.columns \
             WHERE table_schema::text = COALESCE($1::text, current_schema()::text) \
             AND table_name::text = $2::text",
            &[&table.schema, &table.table],
        )
        .await
        .map_err(|e| failure(&format!("reading the columns of {table} failed"), &e))?;
    rows.iter()
        .map(|r| {
            r.try_get::<_, String>(0)
                .map_err(|e| failure("reading a column name failed", &e))
        })
        .collect()
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
