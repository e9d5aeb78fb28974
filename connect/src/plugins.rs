//! The connectors this engine runs, by class name: what
//! `/connector-plugins` lists, what a config is validated against, and how
//! a connector splits into task configs.

use serde::Serialize;

use crate::config::{self, Config, ConfigDef, Problem};
use crate::sink::{http, object_store, postgres as postgres_sink};
use crate::source::{datagen, http as http_source, postgres as postgres_source};

/// Source or sink.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Source,
    Sink,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Source => "source",
            Kind::Sink => "sink",
        }
    }
}

/// A built-in connector.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plugin {
    Datagen,
    ObjectStoreSink,
    HttpSink,
    HttpSource,
    PostgresSink,
    PostgresSource,
}

/// Every built-in connector.
pub const ALL: [Plugin; 6] = [
    Plugin::Datagen,
    Plugin::ObjectStoreSink,
    Plugin::HttpSink,
    Plugin::HttpSource,
    Plugin::PostgresSink,
    Plugin::PostgresSource,
];

/// The engine's version, shown as every plugin's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

impl Plugin {
    /// Its full class name.
    pub fn class(self) -> &'static str {
        match self {
            Plugin::Datagen => datagen::CLASS,
            Plugin::ObjectStoreSink => object_store::CLASS,
            Plugin::HttpSink => http::CLASS,
            Plugin::HttpSource => http_source::CLASS,
            Plugin::PostgresSink => postgres_sink::CLASS,
            Plugin::PostgresSource => postgres_source::CLASS,
        }
    }

    /// Its short name (Connect's alias: the class's simple name).
    pub fn alias(self) -> &'static str {
        match self {
            Plugin::Datagen => "DatagenSource",
            Plugin::ObjectStoreSink => "ObjectStoreSink",
            Plugin::HttpSink => "HttpSink",
            Plugin::HttpSource => "HttpSource",
            Plugin::PostgresSink => "PostgresSink",
            Plugin::PostgresSource => "PostgresSource",
        }
    }

    pub fn kind(self) -> Kind {
        match self {
            Plugin::Datagen | Plugin::HttpSource | Plugin::PostgresSource => Kind::Source,
            Plugin::ObjectStoreSink | Plugin::HttpSink | Plugin::PostgresSink => Kind::Sink,
        }
    }

    /// The plugin a `connector.class` (or a validate path) names: its full
    /// class name, its short name, or its short name without the
    /// `Connector` suffix Connect's aliases may carry.
    pub fn find(class: &str) -> Option<Plugin> {
        let class = class.trim();
        ALL.into_iter().find(|p| {
            class == p.class()
                || class == p.alias()
                || class.strip_suffix("Connector") == Some(p.alias())
        })
    }

    /// Every key it knows, the common ones first.
    pub fn definitions(self) -> Vec<ConfigDef> {
        let mut defs = config::common_definitions(self.kind() == Kind::Sink);
        defs.extend(match self {
            Plugin::Datagen => datagen::definitions(),
            Plugin::ObjectStoreSink => object_store::definitions(),
            Plugin::HttpSink => http::definitions(),
            Plugin::HttpSource => http_source::definitions(),
            Plugin::PostgresSink => postgres_sink::definitions(),
            Plugin::PostgresSource => postgres_source::definitions(),
        });
        defs
    }

    /// Every problem with `config`.
    pub fn validate(self, config: &Config) -> Vec<Problem> {
        let mut problems = config::validate_common(config, self.kind() == Kind::Sink);
        problems.extend(match self {
            Plugin::Datagen => datagen::validate(config),
            Plugin::ObjectStoreSink => object_store::validate(config),
            Plugin::HttpSink => http::validate(config),
            Plugin::HttpSource => http_source::validate(config),
            Plugin::PostgresSink => postgres_sink::validate(config),
            Plugin::PostgresSource => postgres_source::validate(config),
        });
        problems
    }

    /// The task configs of a valid `config`.
    pub fn task_configs(self, config: &Config) -> Result<Vec<Config>, Vec<Problem>> {
        let problems = self.validate(config);
        if !problems.is_empty() {
            return Err(problems);
        }
        let max = config::tasks_max(config).map_err(|p| vec![p])?;
        Ok(match self {
            Plugin::Datagen => datagen::task_configs(config, max),
            // the tables dealt over the tasks
            Plugin::PostgresSource => postgres_source::task_configs(config, max),
            // one URL is polled by one task
            Plugin::HttpSource => vec![config.clone()],
            // each task reads the partitions whose index modulo the task
            // count is its own (see the sink runner)
            Plugin::ObjectStoreSink | Plugin::HttpSink | Plugin::PostgresSink => (0..max)
                .map(|t| {
                    let mut c = config.clone();
                    c.insert("task.index".into(), t.to_string());
                    c.insert("task.count".into(), max.to_string());
                    c
                })
                .collect(),
        })
    }
}
