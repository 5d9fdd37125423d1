//! [`RemoteClient`]: runs sub-agents whose definition has a `url`, over A2A or the task
//! protocol. With `protocol: auto` it reads the agent card once per url and uses A2A when the
//! card offers a JSON-RPC endpoint, the task protocol otherwise.
//!
//! Header values of the definition may reference environment variables as `${VAR}`; they are
//! expanded for each request, marked sensitive and never logged. A url fragment names the
//! remote agent to run (`http://host:8080#reviewer`); without one the remote's default runs.
//!
//! ```no_run
//! # fn demo() -> Result<(), cadre_remote::client::ClientError> {
//! use cadre_remote::RemoteClient;
//! use cadre_subagents::Harness;
//! use std::sync::Arc;
//! let client = Arc::new(RemoteClient::new()?);
//! let harness = Harness::builder()
//!     .runtime_config(move |rc| rc.remote = Some(client))
//!     .build();
//! # Ok(()) }
//! ```

mod a2a;
mod adopt;
mod call;
mod progress;
mod tasks;

pub use adopt::adopt_remote_tasks;

use crate::a2a::Version;
use crate::a2a::card::{CARD_PATH, CardInfo, discover};
use async_trait::async_trait;
use cadre_subagents::{RemoteExecutor, RemoteOutcome, RemoteProtocol, RemoteRequest};
use cadre_types::EventSink;
use call::Call;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Timeouts and retry budgets of the client.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    /// Connecting to a remote (default 10 s).
    pub connect_timeout: Duration,
    /// One request that does not wait for a task (default 60 s).
    pub request_timeout: Duration,
    /// The answer to an A2A send that asked not to wait (default 10 min: a remote that
    /// ignores `returnImmediately` answers only when its task is done).
    pub send_timeout: Duration,
    /// Seconds of each task-protocol `/wait` (default 30).
    pub wait_secs: u64,
    /// The best-effort cancel sent to the remote when a task is cancelled (default 3 s).
    pub cancel_timeout: Duration,
    /// How long a busy remote (429) is retried before the task fails (default 30 s).
    pub busy_retry: Duration,
}

impl Default for ClientSettings {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(600),
            wait_secs: 30,
            cancel_timeout: Duration::from_secs(3),
            busy_retry: Duration::from_secs(30),
        }
    }
}

/// Why the client could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The HTTP client could not be initialised.
    #[error("cannot build the HTTP client: {0}")]
    Http(#[from] reqwest::Error),
}

/// What a url speaks, once known.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Discovered {
    A2a(CardInfo),
    Tasks,
}

/// The remote executor: one shared HTTP client and a per-url protocol cache.
pub struct RemoteClient {
    http: reqwest::Client,
    settings: ClientSettings,
    discovered: Mutex<HashMap<String, Discovered>>,
}

impl std::fmt::Debug for RemoteClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RemoteClient")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl RemoteClient {
    /// A client with default settings.
    pub fn new() -> Result<Self, ClientError> {
        Self::with_settings(ClientSettings::default())
    }

    /// A client with these settings.
    pub fn with_settings(settings: ClientSettings) -> Result<Self, ClientError> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .user_agent(concat!("cadre/", env!("CARGO_PKG_VERSION")))
            .redirect(cadre_llm::redirects::same_origin_redirects())
            .build()?;
        Ok(Self {
            http,
            settings,
            discovered: Mutex::new(HashMap::new()),
        })
    }

    fn cached(&self, base: &str) -> Option<Discovered> {
        self.discovered.lock().ok()?.get(base).cloned()
    }

    fn remember(&self, base: &str, d: Discovered) {
        if let Ok(mut g) = self.discovered.lock() {
            g.insert(base.to_string(), d);
        }
    }

    /// Fetch and read the agent card. `Ok(None)` when the url answers without a usable card;
    /// the flag says whether that answer is worth remembering (not for a server error).
    /// `Err` when the remote cannot be reached or refuses the credentials.
    async fn fetch_card(&self, call: &Call<'_>) -> Result<(Option<CardInfo>, bool), String> {
        let url = format!("{}{CARD_PATH}", call.base);
        let resp = self
            .http
            .get(&url)
            .headers(call.headers.clone())
            .timeout(self.settings.request_timeout)
            .send()
            .await
            .map_err(|e| call.send_failure(&e))?;
        let status = resp.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(call.http_failure(status, ""));
        }
        if !status.is_success() {
            tracing::debug!(url = %call.base, %status, "no agent card");
            return Ok((None, !status.is_server_error()));
        }
        let Ok(card) = resp.json::<serde_json::Value>().await else {
            return Ok((None, true));
        };
        Ok((discover(&card, &call.base), true))
    }

    /// Which protocol to speak with this remote.
    async fn protocol(&self, call: &Call<'_>) -> Result<Discovered, String> {
        match call.request.spec.protocol {
            RemoteProtocol::Tasks => Ok(Discovered::Tasks),
            RemoteProtocol::A2a => {
                if let Some(d @ Discovered::A2a(_)) = self.cached(&call.base) {
                    return Ok(d);
                }
                // A card that cannot be read leaves the defaults: the base url, v1.0, polling.
                let (card, _) = self.fetch_card(call).await?;
                let info = card.unwrap_or(CardInfo {
                    endpoint: format!("{}/", call.base),
                    version: Version::V1,
                    streaming: false,
                });
                let d = Discovered::A2a(info);
                self.remember(&call.base, d.clone());
                Ok(d)
            }
            RemoteProtocol::Auto => {
                if let Some(d) = self.cached(&call.base) {
                    return Ok(d);
                }
                let (card, lasting) = self.fetch_card(call).await?;
                let d = match card {
                    Some(info) => Discovered::A2a(info),
                    None => Discovered::Tasks,
                };
                tracing::debug!(url = %call.base, protocol = ?d, "remote protocol discovered");
                if lasting {
                    self.remember(&call.base, d.clone());
                }
                Ok(d)
            }
        }
    }
}

#[async_trait]
impl RemoteExecutor for RemoteClient {
    async fn run(
        &self,
        request: RemoteRequest,
        events: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RemoteOutcome {
        let call = match Call::new(self, &request, events, cancel) {
            Ok(c) => c,
            Err(e) => return call::failed(e.to_string(), None, None),
        };
        tracing::debug!(agent = %request.agent, url = %call.base, task = %request.task_id, "remote run");
        let protocol = tokio::select! {
            p = self.protocol(&call) => p,
            _ = call.cancel.cancelled() => return call::cancelled(None, request.context_id.clone()),
        };
        match protocol {
            Ok(Discovered::A2a(card)) => a2a::run(&call, &card).await,
            Ok(Discovered::Tasks) => tasks::run(&call).await,
            Err(e) => call::failed(e, None, request.context_id.clone()),
        }
    }
}
