//! `ObjectStoreSink`: records to S3, GCS or Azure as Parquet or JSON-lines
//! files.

use crate::config::{Config, ConfigDef, Problem};

pub const CLASS: &str = "io.aerostream.connect.storage.ObjectStoreSink";

pub fn definitions() -> Vec<ConfigDef> {
    vec![ConfigDef::new(
        "store.url",
        "STRING",
        None,
        "HIGH",
        "Where files go.",
    )]
}

pub fn validate(config: &Config) -> Vec<Problem> {
    if config.contains_key("store.url") {
        Vec::new()
    } else {
        vec![(
            "store.url".into(),
            "Missing required configuration \"store.url\"".into(),
        )]
    }
}
