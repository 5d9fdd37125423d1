//! OpenTelemetry export of cadre's GenAI spans (`cadre_tools::otel` names them): set up for
//! `cadre run` and `cadre serve` when `[telemetry]`, an `OTEL_*` variable or `--trace-file`
//! asks for it, flushed at exit. Off, nothing is installed: the spans stay disabled by the
//! log filter.

mod file;
mod queue;
pub mod settings;

use crate::cli::{Cli, Command};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider, SpanExporter as _};
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;

/// How long the exit waits for the last spans to reach the collector: a collector that is
/// down or never answers costs a run at most this.
const EXIT_FLUSH: Duration = Duration::from_secs(2);
/// How often the metrics are read and exported (and once more at exit).
const METRICS_EVERY: Duration = Duration::from_secs(60);

static PROVIDER: OnceLock<SdkTracerProvider> = OnceLock::new();
static METERS: OnceLock<SdkMeterProvider> = OnceLock::new();

/// The layer that exports the spans, boxed for the log subscriber.
pub type OtelLayer = Box<dyn Layer<tracing_subscriber::Registry> + Send + Sync>;

/// The telemetry layer the command of `cli` asks for, if any. Errors are settings that
/// cannot work (a bad endpoint or header, an unwritable trace file).
pub fn start(cli: &Cli) -> Result<Option<OtelLayer>, String> {
    let trace_file = match &cli.command {
        Some(Command::Run(args)) => args.trace_file.as_deref(),
        Some(Command::Serve(_)) => None,
        _ => return Ok(None),
    };
    // A configuration that does not load is reported by the command itself.
    let cfg = crate::setup::workspace_root(cli)
        .ok()
        .and_then(|ws| crate::config::load(&ws, cli.config.as_deref()).ok())
        .map(|c| c.telemetry)
        .unwrap_or_default();
    let settings = settings::resolve(&cfg, |k| std::env::var(k).ok())?;
    build(&settings, trace_file)
}

fn build(s: &settings::Settings, trace_file: Option<&Path>) -> Result<Option<OtelLayer>, String> {
    if s.otlp.is_none() && trace_file.is_none() {
        return Ok(None);
    }
    let resource = Resource::builder()
        .with_service_name(s.service_name.clone())
        .build();
    let sampler = Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(s.sample_ratio)));
    let mut provider = SdkTracerProvider::builder()
        .with_sampler(sampler)
        .with_resource(resource.clone());
    if let Some(otlp) = &s.otlp {
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
            .with_endpoint(otlp.traces_url.clone())
            .with_timeout(otlp.timeout)
            .with_headers(otlp.headers.clone().into_iter().collect())
            .build()
            .map_err(|e| format!("telemetry: cannot export to {}: {e}", otlp.traces_url))?;
        exporter.set_resource(&resource);
        let queue = queue::BoundedQueue::new(
            exporter,
            queue::QUEUE_CAPACITY,
            format!("the collector at {}", otlp.traces_url),
        )
        .map_err(|e| format!("telemetry: cannot start the exporter: {e}"))?;
        provider = provider.with_span_processor(queue);
    }
    if let Some(path) = trace_file {
        let mut exporter = file::FileExporter::create(path)
            .map_err(|e| format!("cannot write the trace file {}: {e}", path.display()))?;
        exporter.set_resource(&resource);
        let queue = queue::BoundedQueue::new(
            exporter,
            queue::QUEUE_CAPACITY,
            format!("the trace file {}", path.display()),
        )
        .map_err(|e| format!("telemetry: cannot start the trace file writer: {e}"))?;
        provider = provider.with_span_processor(queue);
    }
    let provider = provider.build();
    if let Some(url) = s
        .otlp
        .as_ref()
        .and_then(|o| o.metrics_url.as_ref().map(|u| (o, u)))
    {
        start_metrics(url.0, url.1, &resource)?;
    }
    cadre_tools::otel::set_capture_content(s.capture_content);
    if let Ok(tp) = std::env::var("TRACEPARENT") {
        let state = std::env::var("TRACESTATE").ok();
        cadre_tools::otel::inherit_trace(&tp, state.as_deref());
    }
    let tracer = provider.tracer("cadre");
    let _ = PROVIDER.set(provider);
    // The GenAI spans and events, and warnings (a model call's retries) as events of the
    // span they happen in; nothing else reaches the exporter.
    let filter = Targets::new()
        .with_target(cadre_tools::otel::TARGET, tracing::Level::INFO)
        .with_target("cadre::telemetry", tracing::level_filters::LevelFilter::OFF)
        .with_default(tracing::Level::WARN);
    let layer = tracing_opentelemetry::layer()
        .with_tracer(tracer)
        .with_location(false)
        .with_threads(false)
        .with_tracked_inactivity(false)
        .with_filter(filter);
    Ok(Some(Box::new(layer)))
}

/// Export the GenAI metrics to `url` (read every minute and at exit, off the hot path: a
/// reader thread exports, a collector that is down loses that minute's figures).
fn start_metrics(otlp: &settings::Otlp, url: &str, resource: &Resource) -> Result<(), String> {
    let exporter = opentelemetry_otlp::MetricExporter::builder()
        .with_http()
        .with_protocol(opentelemetry_otlp::Protocol::HttpBinary)
        .with_endpoint(url.to_string())
        .with_timeout(otlp.timeout)
        .with_headers(otlp.headers.clone().into_iter().collect())
        .build()
        .map_err(|e| format!("telemetry: cannot export metrics to {url}: {e}"))?;
    let reader = PeriodicReader::builder(exporter)
        .with_interval(METRICS_EVERY)
        .build();
    let meters = SdkMeterProvider::builder()
        .with_reader(reader)
        .with_resource(resource.clone())
        .build();
    opentelemetry::global::set_meter_provider(meters.clone());
    let _ = METERS.set(meters);
    cadre_tools::otel::metrics::enable();
    Ok(())
}

/// Send what is left and stop the export, waiting at most [`EXIT_FLUSH`]; called at every
/// exit (normal, by exit code, or at a second signal). A no-op when telemetry is off.
pub fn shutdown() {
    if let Some(p) = PROVIDER.get() {
        let _ = p.shutdown_with_timeout(EXIT_FLUSH);
    }
    if let Some(m) = METERS.get() {
        let _ = m.shutdown_with_timeout(EXIT_FLUSH);
    }
}
