//! What the PostgreSQL sink and source share: the connection keys
//! (`connection.url`, `connection.user`, `connection.password`, as
//! Confluent's JDBC connectors name them), connecting, quoting
//! identifiers, and telling an outage from a refusal.
//!
//! `connection.url` is a PostgreSQL URL (`postgresql://user:pass@host:port/db`,
//! libpq's form, with its query parameters) or a JDBC one
//! (`jdbc:postgresql://host:port/db?user=..&password=..`);
//! `connection.user` and `connection.password` override what the URL
//! says. Connections are plain TCP (or a Unix socket given as `host`): TLS
//! to PostgreSQL is not supported yet, so `sslmode=require` is refused.

use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode};
use tokio_postgres::{Client, NoTls};

use crate::config::{Config, ConfigDef, Problem};

/// The connection keys, in the `Connection` group.
pub fn connection_definitions() -> Vec<ConfigDef> {
    vec![
        ConfigDef::new(
            "connection.url",
            "STRING",
            None,
            "HIGH",
            "postgresql://user:pass@host:port/db or jdbc:postgresql://host:port/db (no TLS).",
        )
        .in_group("Connection"),
        ConfigDef::new(
            "connection.user",
            "STRING",
            Some(""),
            "HIGH",
            "The user (overrides the URL's).",
        )
        .in_group("Connection"),
        ConfigDef::new(
            "connection.password",
            "PASSWORD",
            Some(""),
            "HIGH",
            "The password (overrides the URL's).",
        )
        .in_group("Connection"),
    ]
}

/// Where and as whom to connect.
#[derive(Clone)]
pub struct Connection {
    config: tokio_postgres::Config,
    /// `host:port/db` for messages (never the password).
    shown: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.shown)
    }
}

/// Parses `connection.url` (PostgreSQL or JDBC form) into a config.
pub fn parse_url(url: &str) -> Result<tokio_postgres::Config, String> {
    let url = url.trim();
    let plain = match url.strip_prefix("jdbc:") {
        Some(rest) if rest.starts_with("postgresql://") => rest,
        Some(_) => {
            return Err(
                "a JDBC URL must be jdbc:postgresql://host:port/db (with a host)".to_owned(),
            )
        }
        None if url.starts_with("postgresql://") || url.starts_with("postgres://") => url,
        None => {
            return Err(
                "use postgresql://user:pass@host:port/db or jdbc:postgresql://host:port/db"
                    .to_owned(),
            )
        }
    };
    // the error of tokio-postgres never repeats the URL (and its password)
    tokio_postgres::Config::from_str(plain).map_err(|e| format!("not a PostgreSQL URL: {e}"))
}

impl Connection {
    /// The connection a config names; every problem is added to
    /// `problems`.
    pub fn parse(config: &Config, problems: &mut Vec<Problem>) -> Option<Connection> {
        let url = crate::config::required(config, "connection.url", problems);
        if url.is_empty() {
            return None;
        }
        let mut pg = match parse_url(&url) {
            Ok(c) => c,
            Err(e) => {
                problems.push((
                    "connection.url".into(),
                    format!("Invalid value for configuration connection.url: {e}"),
                ));
                return None;
            }
        };
        if let Some(user) = config.get("connection.user").map(|u| u.trim()) {
            if !user.is_empty() {
                pg.user(user);
            }
        }
        if let Some(password) = config.get("connection.password") {
            if !password.is_empty() {
                pg.password(password);
            }
        }
        let mut ok = true;
        if pg.get_user().is_none_or(str::is_empty) {
            problems.push((
                "connection.user".into(),
                "No user: set connection.user or give one in connection.url".into(),
            ));
            ok = false;
        }
        if pg.get_hosts().is_empty() {
            problems.push((
                "connection.url".into(),
                "Invalid value for configuration connection.url: no host".into(),
            ));
            ok = false;
        }
        if pg.get_ssl_mode() == SslMode::Require {
            problems.push((
                "connection.url".into(),
                "sslmode=require: TLS to PostgreSQL is not supported yet".into(),
            ));
            ok = false;
        }
        if !ok {
            return None;
        }
        if pg.get_connect_timeout().is_none() {
            pg.connect_timeout(Duration::from_secs(10));
        }
        let host = match pg.get_hosts().first() {
            Some(Host::Tcp(h)) => h.clone(),
            #[cfg(unix)]
            Some(Host::Unix(p)) => p.display().to_string(),
            None => String::new(),
        };
        let port = pg.get_ports().first().copied().unwrap_or(5432);
        let shown = format!(
            "{host}:{port}/{}",
            pg.get_dbname().or(pg.get_user()).unwrap_or_default()
        );
        Some(Connection { config: pg, shown })
    }

    /// `host:port/db`, for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    /// Connects (the connection is driven by a task of its own until the
    /// client is dropped); every session works in UTC.
    pub async fn connect(&self) -> Result<Client, String> {
        let (client, connection) = self.config.connect(NoTls).await.map_err(|e| {
            format!(
                "connecting to PostgreSQL at {} failed: {}",
                self.shown,
                describe(&e)
            )
        })?;
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                tracing::debug!(error = %e, "connect: PostgreSQL connection closed");
            }
        });
        client
            .batch_execute("SET TIME ZONE 'UTC'")
            .await
            .map_err(|e| format!("setting up the PostgreSQL session failed: {}", describe(&e)))?;
        Ok(client)
    }
}

/// An identifier quoted for PostgreSQL: in double quotes, each inner
/// double quote doubled, so any name (a hostile one too) stays one
/// identifier. PostgreSQL cannot hold a NUL in a name: that is refused.
pub fn quote_ident(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("an empty name cannot be a PostgreSQL identifier".to_owned());
    }
    if name.contains('\0') {
        return Err(format!("{name:?} holds a NUL character"));
    }
    Ok(format!("\"{}\"", name.replace('"', "\"\"")))
}

/// A table, optionally in a schema.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TableName {
    pub schema: Option<String>,
    pub table: String,
}

impl TableName {
    /// `schema.table` or `table`; a name with more dots keeps them in the
    /// table part after the first.
    pub fn parse(name: &str) -> TableName {
        match name.split_once('.') {
            Some((schema, table)) if !schema.is_empty() && !table.is_empty() => TableName {
                schema: Some(schema.to_owned()),
                table: table.to_owned(),
            },
            _ => TableName {
                schema: None,
                table: name.to_owned(),
            },
        }
    }

    /// The quoted name, for statements.
    pub fn quoted(&self) -> Result<String, String> {
        Ok(match &self.schema {
            Some(s) => format!("{}.{}", quote_ident(s)?, quote_ident(&self.table)?),
            None => quote_ident(&self.table)?,
        })
    }
}

impl std::fmt::Display for TableName {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.schema {
            Some(s) => write!(f, "{s}.{}", self.table),
            None => f.write_str(&self.table),
        }
    }
}

/// Whether an error is PostgreSQL being unreachable or busy (worth
/// trying again) rather than a statement it refuses.
pub fn is_transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        // no SQLSTATE: the connection failed or closed
        None => true,
        Some(code) => {
            let c = code.code();
            // connection exceptions, insufficient resources, operator
            // intervention (shutdown), serialization failures, deadlocks
            c.starts_with("08")
                || c.starts_with("53")
                || c.starts_with("57P")
                || c == "40001"
                || c == "40P01"
        }
    }
}

/// Why a statement did not go through.
pub(crate) enum Failure {
    /// PostgreSQL unreachable (or busy): try again.
    Transient(String),
    /// PostgreSQL refused it: trying again will not help.
    Refused(String),
}

/// `what` failed with `e`, classified.
pub(crate) fn failure(what: &str, e: &tokio_postgres::Error) -> Failure {
    let text = format!("{what}: {}", describe(e));
    if is_transient(e) {
        Failure::Transient(text)
    } else {
        Failure::Refused(text)
    }
}

/// The error as PostgreSQL says it (its message, detail and SQLSTATE),
/// or the client's reason when the connection failed.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(detail) = db.detail() {
                s.push_str(": ");
                s.push_str(detail);
            }
            s
        }
        None => {
            let mut s = e.to_string();
            let mut source = std::error::Error::source(e);
            while let Some(inner) = source {
                s.push_str(": ");
                s.push_str(&inner.to_string());
                source = inner.source();
            }
            s
        }
    }
}

#[cfg(test)]
#[path = "postgres_tests.rs"]
mod tests;
