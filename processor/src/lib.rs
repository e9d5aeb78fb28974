//! AeroStream's stream processor: `aerostream process --pipeline FILE`.
//!
//! A [`pipeline::Pipeline`] (a YAML file) names a source topic, a window and
//! aggregates, and a sink. The processor reads every partition of the topic
//! over the Kafka protocol ([`source`]), decodes each fetched batch of
//! values (JSON, Avro with schemas from a registry, fixed binary layouts)
//! into Arrow arrays ([`decode`]), keeps the records its filters
//! hold for ([`filter`]), aggregates them per key in tumbling, sliding or
//! session event-time windows closed by a watermark ([`window`]), and
//! writes each closed window once to Parquet files in object storage,
//! committed together with its state and input offsets by an incremental
//! checkpoint ([`checkpoint`], [`delta`]) uploaded while reading goes on
//! ([`upload`]) and kept on local disk too ([`state`]), so a restarted
//! processor resumes exactly where the last checkpoint left it ([`run()`]).
//! See `docs/processor.md`.

mod acc;
pub mod checkpoint;
pub mod decode;
pub mod delta;
pub mod distribute;
pub mod filter;
pub mod live;
pub mod login;
pub mod metrics;
pub mod native_source;
pub mod pipeline;
pub mod run;
pub mod sink;
pub mod sketch;
pub mod source;
mod start;
pub mod state;
pub mod stats;
#[cfg(test)]
mod testing;
pub mod topic_sink;
pub mod upload;
pub mod window;

pub use pipeline::{Pipeline, PipelineError};
pub use run::Options;
pub use start::{run, run_until_signalled};
