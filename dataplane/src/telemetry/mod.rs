//! What the broker measures about itself, cheaply enough for the hot path:
//! latency histograms ([`LatencyHistogram`]), per-partition traffic
//! counters and the bounded series built from them ([`series`]), the
//! Prometheus text format ([`prometheus`]), and the
//! decision which requests get a trace span ([`sampling`]).
//!
//! Everything here is read by the Prometheus rendering on `/metrics`; the
//! binary's OpenTelemetry export reads that same text
//! ([`prometheus::parse`]), so both exports show the same figures.
//! Spans are plain `tracing` spans at target [`SPAN_TARGET`], created only
//! for sampled requests: with no exporter configured nothing is created.

pub mod histogram;
pub mod prometheus;
pub mod sampling;
pub mod series;
pub mod stats;

pub use histogram::{HistogramSnapshot, LatencyHistogram, BOUNDS_MICROS};
pub use sampling::{sampled, set_sample_ratio, SPAN_TARGET};
pub use series::Series;
pub use stats::PartitionStats;
