//! `cadre run --trace-file F`: spans written as OTLP JSON lines, one
//! `ExportTraceServiceRequest` per line in the protobuf JSON mapping, for offline use
//! without a collector (an OTel collector's `otlpjsonfile` receiver reads them).

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;

/// Writes each batch of spans as one JSON line.
#[derive(Debug)]
pub struct FileExporter {
    file: Mutex<std::io::BufWriter<std::fs::File>>,
    resource: ResourceAttributesWithSchema,
}

impl FileExporter {
    /// Create (or truncate) `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        let file = std::fs::File::create(path)?;
        Ok(Self {
            file: Mutex::new(std::io::BufWriter::new(file)),
            resource: ResourceAttributesWithSchema::default(),
        })
    }
}

impl SpanExporter for FileExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        let request = ExportTraceServiceRequest {
            resource_spans: group_spans_by_resource_and_scope(batch, &self.resource),
        };
        let line = serde_json::to_string(&request)
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))?;
        let mut file = self
            .file
            .lock()
            .map_err(|_| OTelSdkError::InternalFailure("trace file lock poisoned".into()))?;
        writeln!(file, "{line}")
            .and_then(|()| file.flush())
            .map_err(|e| OTelSdkError::InternalFailure(e.to_string()))
    }

    fn set_resource(&mut self, resource: &Resource) {
        self.resource = resource.into();
    }
}
