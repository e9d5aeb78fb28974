//! OpenTelemetry export (OTLP over HTTP, protobuf) when `--otlp-endpoint`
//! is set; nothing at all otherwise.
//!
//! - Traces: the `tracing` spans the gateway and storage make at target
//!   [`dataplane::telemetry::SPAN_TARGET`] (produce, fetch, replicate,
//!   cold_read, upload) go through `tracing-opentelemetry` to a batch
//!   processor. The gateway decides which requests get a span
//!   ([`dataplane::telemetry::set_sample_ratio`]), so the SDK keeps every span
//!   it is given.
//! - Metrics: one observable instrument per family of the `/metrics` text,
//!   whose callback reads that text (rendered at most once per export), so
//!   both exports show the same figures from the same atomics.
//!
//! The exporters, their HTTP client and the periodic reader run on threads
//! of the SDK's own, never on a shard: the shards only bump atomics and, for
//! sampled requests, make a span.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use dataplane::telemetry::prometheus::{parse, Family};
use dataplane::telemetry::SPAN_TARGET;
use gateway::MetricsText;
use opentelemetry::metrics::{AsyncInstrument, MeterProvider as _};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry::KeyValue;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::Layer;

use crate::config::Settings;

/// The running exporters; [`Otel::shutdown`] sends what is still buffered.
pub struct Otel {
    tracer: SdkTracerProvider,
    meter: SdkMeterProvider,
}

/// The layer that turns the broker's spans into OpenTelemetry spans.
type SpanLayer = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

/// Installs the process's `tracing` subscriber: log lines filtered by
/// `--log`, plus, when an OTLP endpoint is configured, the span exporter
/// (whose running exporters are returned). Call once, outside any async
/// runtime: the exporters' blocking HTTP client is built here.
pub fn init_logging(s: &Settings) -> anyhow::Result<Option<Otel>> {
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let (otel, span_layer) = start(s)?.unzip();
    let filter = tracing_subscriber::EnvFilter::try_new(&s.log).unwrap_or_else(|_| "info".into());
    tracing_subscriber::registry()
        .with(span_layer)
        .with(
            tracing_subscriber::fmt::layer()
                .with_target(false)
                .with_filter(filter),
        )
        .init();
    Ok(otel)
}

/// Starts the exporters when an endpoint is configured.
fn start(s: &Settings) -> anyhow::Result<Option<(Otel, SpanLayer)>> {
    let Some(endpoint) = &s.otlp_endpoint else {
        return Ok(None);
    };
    let base = endpoint.trim_end_matches('/');
    let resource = Resource::builder()
        .with_service_name("aerostream")
        .with_attribute(KeyValue::new("service.instance.id", i64::from(s.node_id)))
        .build();
    let spans = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/traces"))
        .build()
        .context("cannot build the OTLP span exporter")?;
    let tracer = SdkTracerProvider::builder()
        .with_batch_exporter(spans)
        .with_resource(resource.clone())
        .build();
    let metrics = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{base}/v1/metrics"))
        .build()
        .context("cannot build the OTLP metric exporter")?;
    let reader = PeriodicReader::builder(metrics)
        .with_interval(Duration::from_millis(s.otlp_export_interval_ms))
        .build();
    let meter = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource)
        .build();
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer.tracer("aerostream"))
        .with_filter(filter_fn(|m| m.target() == SPAN_TARGET))
        .boxed();
    dataplane::telemetry::set_sample_ratio(s.otlp_sample_ratio);
    Ok(Some((Otel { tracer, meter }, layer)))
}

/// The `/metrics` text parsed, shared by every instrument's callback of one
/// export so it is rendered once per export, not once per family.
struct Snapshot {
    text: MetricsText,
    last: Mutex<Option<(Instant, Arc<Vec<Family>>)>>,
}

impl Snapshot {
    fn families(&self) -> Arc<Vec<Family>> {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((at, f)) = last.as_ref() {
            if at.elapsed() < Duration::from_millis(50) {
                return f.clone();
            }
        }
        let f = Arc::new(parse(&self.text.render()));
        *last = Some((Instant::now(), f.clone()));
        f
    }

    fn observe(&self, family: &str, sample: &str, into: &dyn AsyncInstrument<f64>) {
        let families = self.families();
        let Some(f) = families.iter().find(|f| f.name == family) else {
            return;
        };
        for s in f.samples.iter().filter(|s| s.name == sample) {
            let attrs: Vec<KeyValue> = s
                .labels
                .iter()
                .map(|(k, v)| KeyValue::new(k.clone(), v.clone()))
                .collect();
            into.observe(s.value, &attrs);
        }
    }
}

impl Otel {
    /// Registers one observable instrument per family `/metrics` shows now
    /// (counters as counters, gauges as gauges; a histogram as counters of
    /// its `_bucket` samples, labelled `le`, and of its `_sum` and `_count`).
    pub fn observe_metrics(&self, text: MetricsText) {
        let meter = self.meter.meter("aerostream");
        let snapshot = Arc::new(Snapshot {
            last: Mutex::new(None),
            text,
        });
        for f in snapshot.families().iter() {
            let samples: Vec<String> = match f.kind.as_str() {
                "histogram" => ["_bucket", "_sum", "_count"]
                    .iter()
                    .map(|suffix| format!("{}{suffix}", f.name))
                    .collect(),
                _ => vec![f.name.clone()],
            };
            for sample in samples {
                let snap = snapshot.clone();
                let family = f.name.clone();
                let name = sample.clone();
                let callback = move |o: &dyn AsyncInstrument<f64>| snap.observe(&family, &name, o);
                if f.kind == "gauge" || f.kind == "untyped" {
                    meter
                        .f64_observable_gauge(sample)
                        .with_description(f.help.clone())
                        .with_callback(callback)
                        .build();
                } else {
                    meter
                        .f64_observable_counter(sample)
                        .with_description(f.help.clone())
                        .with_callback(callback)
                        .build();
                }
            }
        }
    }

    /// Exports what is buffered and stops the exporters' threads. Call
    /// outside any async runtime.
    pub fn shutdown(self) {
        if let Err(e) = self.tracer.shutdown() {
            tracing::warn!(error = %e, "OTLP span export did not shut down cleanly");
        }
        if let Err(e) = self.meter.shutdown() {
            tracing::warn!(error = %e, "OTLP metric export did not shut down cleanly");
        }
    }
}
