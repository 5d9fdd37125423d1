//! The floor: a minimal raw HTTP client (reqwest, one shared client, like the provider's)
//! doing exactly the requests the scenario needs, in the same dependency order, reading
//! every response to the end. Bodies are prepared before the clock starts.

use crate::bodies::FloorBodies;
use crate::cli::Variant;
use anyhow::{Context, Result, bail};
use bytes::Bytes;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// A client built like the provider's (its own connection pool).
pub fn client() -> Result<reqwest::Client> {
    reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(15))
        .user_agent("cadre-bench-floor")
        .redirect(cadre_llm::redirects::same_origin_redirects())
        .build()
        .context("building the floor HTTP client")
}

/// The mock server's request body limit (axum's default).
const BODY_LIMIT: usize = 2 * 1024 * 1024;

/// [`post_once`], tried a second time after a transport error (like the provider's one
/// quick retry in the scenario).
async fn post(client: &reqwest::Client, url: &str, body: Bytes) -> Result<bool> {
    match post_once(client, url, body.clone()).await {
        Err(e) if e.downcast_ref::<reqwest::Error>().is_some() => {
            post_once(client, url, body).await
        }
        other => other,
    }
}

/// Whether the server accepted a request (false: 413, its request body limit).
async fn post_once(client: &reqwest::Client, url: &str, body: Bytes) -> Result<bool> {
    let big = body.len() > BODY_LIMIT;
    let sent = client
        .post(url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let resp = match sent {
        // The server refuses bodies over its limit and may close before reading them whole.
        Err(_) if big => return Ok(false),
        other => other.context("floor request")?,
    };
    let status = resp.status();
    let bytes = resp.bytes().await.context("reading a floor response")?;
    if status == reqwest::StatusCode::PAYLOAD_TOO_LARGE {
        return Ok(false);
    }
    if !status.is_success() || bytes.is_empty() {
        bail!(
            "floor request answered {status}: {}",
            String::from_utf8_lossy(&bytes)
        );
    }
    Ok(true)
}

async fn chain(
    client: reqwest::Client,
    url: Arc<str>,
    bodies: Arc<FloorBodies>,
    slots: Arc<Semaphore>,
    i: usize,
) -> Result<()> {
    let _slot = slots.acquire_owned().await?;
    for second in [false, true] {
        if !post(&client, &url, bodies.child(i, second)).await? {
            bail!("a child request was refused as too large");
        }
    }
    Ok(())
}

/// One floor run: parent request → N parallel chains of two child requests (the background
/// variants send the parent's second request alongside; at most `max_concurrent` chains at once) → the parent's last request.
/// Returns the wall time and how many parent requests the server refused as too large.
pub async fn run_once(
    client: &reqwest::Client,
    variant: Variant,
    n: usize,
    max_concurrent: usize,
    url: &str,
    bodies: Arc<FloorBodies>,
) -> Result<(Duration, usize)> {
    let slots = Arc::new(Semaphore::new(max_concurrent.max(1)));
    let url: Arc<str> = Arc::from(url);
    let started = Instant::now();
    let first = bodies.parent.first().cloned().unwrap_or_default();
    let mut refused = usize::from(!post(client, &url, first).await?);
    let chains: Vec<_> = (0..n)
        .map(|i| {
            tokio::spawn(chain(
                client.clone(),
                url.clone(),
                bodies.clone(),
                slots.clone(),
                i,
            ))
        })
        .collect();
    if variant.is_background()
        && let Some(second) = bodies.parent.get(1)
    {
        refused += usize::from(!post(client, &url, second.clone()).await?);
    }
    for c in chains {
        c.await.context("floor chain panicked")??;
    }
    let last = bodies.parent.last().cloned().unwrap_or_default();
    refused += usize::from(!post(client, &url, last).await?);
    Ok((started.elapsed(), refused))
}

/// Requests one floor run sends.
pub fn requests(variant: Variant, n: usize) -> usize {
    2 * n + if variant.is_background() { 3 } else { 2 }
}
