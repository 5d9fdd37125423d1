//! `[telemetry]` in config.toml and the standard `OTEL_*` variables, resolved into what the
//! exporter is built from. The environment wins over the file, as `CADRE_MODEL` does.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// Where the default OTLP/HTTP collector listens.
const DEFAULT_ENDPOINT: &str = "http://localhost:4318";
/// The path of the traces signal under an OTLP base endpoint.
const TRACES_PATH: &str = "/v1/traces";
/// The path of the metrics signal under an OTLP base endpoint.
const METRICS_PATH: &str = "/v1/metrics";
/// How long one export may take before it counts as failed.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(5);

/// `[telemetry]` (documented in `docs/observability.md`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TelemetryConfig {
    /// `none` (the default) or `otlp`.
    pub exporter: Option<ExporterKind>,
    /// The OTLP base endpoint (`http://host:4318`; `/v1/traces` is appended unless given).
    pub endpoint: Option<String>,
    /// `http/protobuf` (the default) or `grpc`.
    pub protocol: Option<String>,
    /// Headers sent with every export (an API key of a hosted backend).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// The `service.name` of the spans (default `cadre`).
    pub service_name: Option<String>,
    /// The share of traces recorded, from 0 to 1 (default 1).
    pub sample_ratio: Option<f64>,
    /// Record message contents, tool arguments and results on the spans.
    #[serde(default)]
    pub capture_content: bool,
    /// Milliseconds one export may take (default 5000).
    pub timeout_ms: Option<u64>,
}

/// Which exporter `[telemetry] exporter` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExporterKind {
    /// No export.
    None,
    /// OTLP to a collector.
    Otlp,
}

/// Resolved OTLP settings.
#[derive(Debug, Clone, PartialEq)]
pub struct Otlp {
    /// The full URL of the traces endpoint.
    pub traces_url: String,
    /// The full URL of the metrics endpoint; `None`: no metrics (`OTEL_METRICS_EXPORTER=none`,
    /// or only a traces URL was given, which says nothing of where metrics go).
    pub metrics_url: Option<String>,
    /// Headers of every export.
    pub headers: BTreeMap<String, String>,
    /// How long one export may take.
    pub timeout: Duration,
}

/// What telemetry this process sets up.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// OTLP export, when on.
    pub otlp: Option<Otlp>,
    /// `service.name`.
    pub service_name: String,
    /// Share of traces recorded.
    pub sample_ratio: f64,
    /// Record contents.
    pub capture_content: bool,
}

/// Resolve `cfg` with the environment `env` (a lookup, so tests need not set variables).
pub fn resolve(
    cfg: &TelemetryConfig,
    env: impl Fn(&str) -> Option<String>,
) -> Result<Settings, String> {
    let var = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let signal_url = var("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
    let base_url = var("OTEL_EXPORTER_OTLP_ENDPOINT");
    let kind = match var("OTEL_TRACES_EXPORTER").as_deref().map(str::trim) {
        Some("otlp") => ExporterKind::Otlp,
        Some("none") => ExporterKind::None,
        Some(other) => {
            return Err(format!(
                "OTEL_TRACES_EXPORTER={other}: cadre knows otlp and none"
            ));
        }
        None => match cfg.exporter {
            Some(k) => k,
            // An endpoint in the environment is asking for export.
            None if signal_url.is_some() || base_url.is_some() => ExporterKind::Otlp,
            None => ExporterKind::None,
        },
    };
    let protocol = var("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| var("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .or_else(|| cfg.protocol.clone())
        .unwrap_or_else(|| "http/protobuf".into());
    let sample_ratio = cfg.sample_ratio.unwrap_or(1.0);
    if !(0.0..=1.0).contains(&sample_ratio) {
        return Err(format!(
            "[telemetry] sample_ratio must be between 0 and 1, not {sample_ratio}"
        ));
    }
    let otlp = match kind {
        ExporterKind::None => None,
        ExporterKind::Otlp => {
            if protocol.trim() != "http/protobuf" {
                return Err(format!(
                    "telemetry protocol {protocol:?}: this build of cadre exports OTLP over \
                     http/protobuf only (point it at the collector's HTTP port, 4318)"
                ));
            }
            let base = base_url.or_else(|| cfg.endpoint.clone());
            let metrics_url = metrics_url_of(
                var("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"),
                var("OTEL_METRICS_EXPORTER").as_deref(),
                base.as_deref(),
                signal_url.as_deref(),
            );
            let traces_url = match signal_url {
                Some(url) => url,
                None => traces_url_of(base.as_deref().unwrap_or(DEFAULT_ENDPOINT)),
            };
            if !traces_url.starts_with("http://") && !traces_url.starts_with("https://") {
                return Err(format!(
                    "telemetry endpoint {traces_url:?} is not an http(s) URL"
                ));
            }
            let mut headers = cfg.headers.clone();
            for h in [
                var("OTEL_EXPORTER_OTLP_HEADERS"),
                var("OTEL_EXPORTER_OTLP_TRACES_HEADERS"),
            ]
            .into_iter()
            .flatten()
            {
                headers.extend(parse_headers(&h)?);
            }
            let timeout = var("OTEL_EXPORTER_OTLP_TIMEOUT")
                .and_then(|v| v.trim().parse().ok())
                .or(cfg.timeout_ms)
                .map_or(DEFAULT_TIMEOUT, Duration::from_millis);
            if let Some(url) = &metrics_url
                && !url.starts_with("http://")
                && !url.starts_with("https://")
            {
                return Err(format!("telemetry endpoint {url:?} is not an http(s) URL"));
            }
            Some(Otlp {
                traces_url,
                metrics_url,
                headers,
                timeout,
            })
        }
    };
    Ok(Settings {
        otlp,
        service_name: var("OTEL_SERVICE_NAME")
            .or_else(|| cfg.service_name.clone())
            .unwrap_or_else(|| "cadre".into()),
        sample_ratio,
        capture_content: cfg.capture_content,
    })
}

/// The traces URL under a base endpoint (kept when it names the traces path already).
fn traces_url_of(base: &str) -> String {
    let base = base.trim().trim_end_matches('/');
    if base.ends_with(TRACES_PATH) {
        base.to_string()
    } else {
        format!("{base}{TRACES_PATH}")
    }
}

/// Where metrics go: their own URL, else under the base endpoint (the default one when no
/// URL was given at all); none when turned off or when only a traces URL was given.
fn metrics_url_of(
    own: Option<String>,
    exporter: Option<&str>,
    base: Option<&str>,
    traces_only: Option<&str>,
) -> Option<String> {
    if exporter.map(str::trim) == Some("none") {
        return None;
    }
    if own.is_some() {
        return own;
    }
    let base = match (base, traces_only) {
        (Some(b), _) => b,
        (None, Some(_)) => return None,
        (None, None) => DEFAULT_ENDPOINT,
    };
    let base = base.trim().trim_end_matches('/');
    Some(format!(
        "{}{METRICS_PATH}",
        base.trim_end_matches(TRACES_PATH)
    ))
}

/// `key=value,key2=value2` as `OTEL_EXPORTER_OTLP_HEADERS` spells them.
fn parse_headers(s: &str) -> Result<BTreeMap<String, String>, String> {
    let mut out = BTreeMap::new();
    for pair in s.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err("OTEL_EXPORTER_OTLP_HEADERS: each header is key=value".into());
        };
        let k = k.trim();
        let valid = |c: char| c.is_ascii_alphanumeric() || "-_.".contains(c);
        if k.is_empty() || !k.chars().all(valid) {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_HEADERS: {k:?} is not a header name"
            ));
        }
        if v.chars().any(char::is_control) {
            return Err(format!(
                "OTEL_EXPORTER_OTLP_HEADERS: the value of {k} has a control character"
            ));
        }
        out.insert(k.to_string(), v.trim().to_string());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn off_unless_asked_for() {
        let s = resolve(&TelemetryConfig::default(), env(&[])).unwrap();
        assert_eq!(s.otlp, None);
        assert_eq!(s.service_name, "cadre");
        assert!(!s.capture_content);
    }

    #[test]
    fn the_environment_wins_over_the_file() {
        let cfg: TelemetryConfig = toml::from_str(
            "exporter = \"otlp\"\nendpoint = \"http://collector:4318/\"\nservice_name = \"a\"\n\
             headers = { x-key = \"1\" }\n",
        )
        .unwrap();
        let s = resolve(&cfg, env(&[])).unwrap();
        let otlp = s.otlp.unwrap();
        assert_eq!(otlp.traces_url, "http://collector:4318/v1/traces");
        assert_eq!(otlp.headers["x-key"], "1");
        let s = resolve(
            &cfg,
            env(&[
                ("OTEL_SERVICE_NAME", "b"),
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://other:4318"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "x-key=2, y=3"),
            ]),
        )
        .unwrap();
        assert_eq!(s.service_name, "b");
        let otlp = s.otlp.unwrap();
        assert_eq!(otlp.traces_url, "http://other:4318/v1/traces");
        assert_eq!(otlp.headers["x-key"], "2");
        assert_eq!(otlp.headers["y"], "3");
        let off = resolve(&cfg, env(&[("OTEL_TRACES_EXPORTER", "none")])).unwrap();
        assert_eq!(off.otlp, None);
        // An endpoint alone in the environment turns export on.
        let on = resolve(
            &TelemetryConfig::default(),
            env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1/x")]),
        )
        .unwrap();
        assert_eq!(on.otlp.unwrap().traces_url, "http://h:1/x");
    }

    #[test]
    fn metrics_go_under_the_base_endpoint_or_their_own_url() {
        let cfg: TelemetryConfig =
            toml::from_str("exporter = \"otlp\"\nendpoint = \"http://c:4318/\"\n").unwrap();
        let metrics =
            |pairs: &[(&str, &str)]| resolve(&cfg, env(pairs)).unwrap().otlp.unwrap().metrics_url;
        assert_eq!(metrics(&[]).as_deref(), Some("http://c:4318/v1/metrics"));
        assert_eq!(
            metrics(&[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "http://m:1/x")]).as_deref(),
            Some("http://m:1/x")
        );
        assert_eq!(metrics(&[("OTEL_METRICS_EXPORTER", "none")]), None);
        // A traces URL alone says nothing of where metrics go.
        let traces_only = resolve(
            &TelemetryConfig::default(),
            env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://h:1/v1/traces")]),
        )
        .unwrap();
        assert_eq!(traces_only.otlp.unwrap().metrics_url, None);
        let bad = resolve(
            &cfg,
            env(&[("OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "file:///x")]),
        );
        assert!(bad.is_err());
    }

    #[test]
    fn hostile_settings_are_refused() {
        let otlp = TelemetryConfig {
            exporter: Some(ExporterKind::Otlp),
            ..Default::default()
        };
        for bad in [
            ("OTEL_EXPORTER_OTLP_HEADERS", "novalue"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "bad key=1"),
            ("OTEL_EXPORTER_OTLP_HEADERS", "k=a\r\nInjected: 1"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "file:///etc/passwd"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_TRACES_EXPORTER", "jaeger"),
        ] {
            assert!(resolve(&otlp, env(&[bad])).is_err(), "{bad:?} accepted");
        }
        let ratio = TelemetryConfig {
            sample_ratio: Some(1.5),
            ..Default::default()
        };
        assert!(resolve(&ratio, env(&[])).is_err());
        assert!(toml::from_str::<TelemetryConfig>("exporter = \"zipkin\"").is_err());
        assert!(toml::from_str::<TelemetryConfig>("endpont = \"x\"").is_err());
    }
}
