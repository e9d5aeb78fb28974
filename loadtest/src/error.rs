//! The crate's error type: every failure a run can meet, worded for the
//! person reading the terminal.

use std::path::PathBuf;

/// Everything that can stop or spoil a load-test run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("cannot read workload file {path}: {source}")]
    WorkloadRead {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("workload {path} is not valid YAML for a workload: {reason}")]
    WorkloadParse { path: PathBuf, reason: String },
    #[error("workload setting `{field}` is invalid: {reason}")]
    InvalidWorkload { field: &'static str, reason: String },
    #[error("`{text}` is not a duration (use e.g. 500ms, 10s, 2m, 1h)")]
    InvalidDuration { text: String },
    #[error("the client rejected its configuration: {0}")]
    ClientConfig(String),
    #[error("--bootstrap does not suit the driver: {0}")]
    Bootstrap(String),
    #[error("mock broker: {0}")]
    MockBroker(String),
    #[error("native client: {0}")]
    Native(String),
    #[error("topic {topic} could not be prepared: {reason}")]
    Topic { topic: String, reason: String },
    #[error("sending to the broker failed: {0}")]
    Send(String),
    #[error("consuming from the broker failed: {0}")]
    Consume(String),
    #[error("cannot read {path}: {reason}")]
    Proc { path: String, reason: String },
    #[error("cannot write result file {path}: {source}")]
    ResultWrite {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("result file {path} cannot be read: {reason}")]
    ResultRead { path: PathBuf, reason: String },
    #[error("a load-generator thread panicked: {0}")]
    Thread(String),
}
