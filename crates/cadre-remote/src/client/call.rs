//! One remote run's context: the base url and agent hint split from the definition's url, the
//! expanded headers, the event channel back to the runtime, and the wording of failures.

use super::{ClientSettings, RemoteClient};
use cadre_subagents::{RemoteOutcome, RemoteRequest};
use cadre_types::{EndState, Event, EventEnvelope, EventSink, Usage};
use reqwest::StatusCode;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio_util::sync::CancellationToken;

/// Why a remote agent's headers cannot be sent.
#[derive(Debug, thiserror::Error)]
pub(crate) enum HeaderError {
    /// A `${VAR}` in a header's value could not be expanded.
    #[error("agent {agent}: header {name}: {reason}")]
    Expand {
        agent: String,
        name: String,
        reason: String,
    },
    /// A header's name is not a valid HTTP header name.
    #[error("agent {agent}: `{name}` is not a valid header name")]
    Name { agent: String, name: String },
    /// A header's value (once expanded) is not valid in HTTP.
    #[error("agent {agent}: header {name} has a value that is not valid in HTTP")]
    Value { agent: String, name: String },
}

pub(crate) struct Call<'a> {
    pub http: &'a reqwest::Client,
    pub settings: &'a ClientSettings,
    pub request: &'a RemoteRequest,
    /// The url without fragment or trailing slash.
    pub base: String,
    /// The remote agent named by the url fragment.
    pub agent_hint: Option<String>,
    /// The definition's headers, expanded; values are marked sensitive.
    pub headers: HeaderMap,
    pub events: Arc<dyn EventSink>,
    pub cancel: CancellationToken,
    /// Whether the remote task id was passed to the request's callback.
    reported: AtomicBool,
}

impl<'a> Call<'a> {
    pub(crate) fn new(
        client: &'a RemoteClient,
        request: &'a RemoteRequest,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> Result<Self, HeaderError> {
        let (url, fragment) = match request.spec.url.split_once('#') {
            Some((u, f)) => (u, Some(f.trim()).filter(|f| !f.is_empty())),
            None => (request.spec.url.as_str(), None),
        };
        let mut headers = HeaderMap::new();
        for (name, raw) in &request.spec.headers {
            let (agent, named) = (request.agent.clone(), name.clone());
            let value = cadre_types::env_ref::expand_env(raw).map_err(|e| HeaderError::Expand {
                agent: agent.clone(),
                name: named.clone(),
                reason: e.to_string(),
            })?;
            let name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderError::Name {
                agent: agent.clone(),
                name: named.clone(),
            })?;
            let mut value = HeaderValue::from_str(&value)
                .map_err(|_| HeaderError::Value { agent, name: named })?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        // The remote agent's spans continue this one (its `invoke_agent` CLIENT span).
        for (name, value) in cadre_tools::otel::current_trace_fields() {
            if let Ok(value) = HeaderValue::from_str(&value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        Ok(Self {
            http: &client.http,
            settings: &client.settings,
            request,
            base: url.trim_end_matches('/').to_string(),
            agent_hint: fragment.map(str::to_string),
            headers,
            events,
            cancel,
            reported: AtomicBool::new(false),
        })
    }

    /// Tell the request's callback the remote task id, the first time it is known.
    pub(crate) fn report_remote_id(&self, remote_task_id: &str) {
        if let Some(cb) = &self.request.on_remote_id
            && !self.reported.swap(true, Ordering::SeqCst)
        {
            cb.call(remote_task_id);
        }
    }

    fn emit(&self, event: Event) {
        self.events.emit(EventEnvelope {
            session_id: self.request.session_id.clone(),
            agent: self.request.agent.clone(),
            task_id: Some(self.request.task_id.clone()),
            event,
        });
    }

    /// Streamed answer text.
    pub(crate) fn delta(&self, text: &str) {
        if !text.is_empty() {
            self.emit(Event::TextDelta {
                text: text.to_string(),
            });
        }
    }

    /// A status message of the remote.
    pub(crate) fn notice(&self, message: &str) {
        if !message.is_empty() {
            self.emit(Event::Notice {
                message: message.to_string(),
            });
        }
    }

    /// A request that could not be sent or answered.
    pub(crate) fn send_failure(&self, e: &reqwest::Error) -> String {
        if e.is_timeout() {
            return format!("remote agent at {} did not answer in time", self.base);
        }
        // The innermost cause says what happened ("Connection refused", ...).
        let mut cause: &dyn std::error::Error = e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        format!("cannot reach remote agent at {}: {cause}", self.base)
    }

    /// An HTTP error answer.
    pub(crate) fn http_failure(&self, status: StatusCode, body: &str) -> String {
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN {
            return format!(
                "remote agent at {} refused the credentials (HTTP {}); check the `headers` of agent {}",
                self.base,
                status.as_u16(),
                self.request.agent
            );
        }
        let detail = serde_json::from_str::<serde_json::Value>(body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string))
            .unwrap_or_else(|| body.chars().take(200).collect());
        format!(
            "remote agent at {} answered HTTP {}: {}",
            self.base,
            status.as_u16(),
            detail.trim()
        )
    }
}

/// A failed outcome.
pub(crate) fn failed(
    error: String,
    remote_task_id: Option<String>,
    context_id: Option<String>,
) -> RemoteOutcome {
    RemoteOutcome {
        state: EndState::Failed { error },
        output: String::new(),
        usage: Usage::default(),
        remote_task_id,
        context_id,
    }
}

/// A cancelled outcome.
pub(crate) fn cancelled(
    remote_task_id: Option<String>,
    context_id: Option<String>,
) -> RemoteOutcome {
    RemoteOutcome {
        state: EndState::Cancelled,
        output: String::new(),
        usage: Usage::default(),
        remote_task_id,
        context_id,
    }
}
