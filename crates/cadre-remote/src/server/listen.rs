//! Accepting connections. axum's `serve` never closes a connection by itself, so a client
//! that opens many and sends nothing holds a file descriptor each until the process has
//! none left. This accept loop runs hyper directly instead:
//!
//! - a connection must deliver a complete request head within `idle_timeout` of opening or
//!   of finishing its previous exchange, else it is closed: this is hyper's header-read
//!   timeout, which starts when a connection goes idle, so it closes idle keep-alive
//!   connections and slow-header clients alike (a request being answered is never cut);
//! - at most [`connection_cap`] connections are open at once; later ones wait in the
//!   listen backlog, costing the process nothing, until one closes;
//! - on shutdown every connection finishes the exchange it is in and closes; dropping the
//!   loop aborts whatever is left.

use axum::Router;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::io;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long to wait before accepting again after an error such as "too many open files".
const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);

/// The soft limit on open files, if the platform says.
fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        use nix::sys::resource::{Resource, getrlimit};
        getrlimit(Resource::RLIMIT_NOFILE)
            .ok()
            .map(|(soft, _)| soft)
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// The most connections open at once: `configured`, but never more than half the open-file
/// limit, so that connections cannot starve the files, sockets and pipes the agents need.
pub(crate) fn connection_cap(configured: usize) -> usize {
    cap_for(configured, open_file_limit())
}

fn cap_for(configured: usize, file_limit: Option<u64>) -> usize {
    let half = file_limit.map_or(usize::MAX, |l| usize::try_from(l / 2).unwrap_or(usize::MAX));
    configured.min(half).max(1)
}

/// Wait for a free slot, then for a connection.
async fn accept(
    listener: &TcpListener,
    slots: &Arc<Semaphore>,
) -> (TcpStream, OwnedSemaphorePermit) {
    loop {
        // The semaphore is never closed; should it be, take no more connections.
        let Ok(permit) = slots.clone().acquire_owned().await else {
            return std::future::pending().await;
        };
        match listener.accept().await {
            Ok((stream, _)) => return (stream, permit),
            Err(e) => {
                drop(permit);
                tracing::warn!(error = %e, "cannot accept a connection; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

/// Serve `app` on `listener` until `stop` fires, then let the open connections finish their
/// current exchange. Returns when the last one has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    idle_timeout: Duration,
    max_connections: usize,
    stop: CancellationToken,
) -> io::Result<()> {
    let cap = connection_cap(max_connections);
    tracing::debug!(
        cap,
        idle_secs = idle_timeout.as_secs_f64(),
        "accepting connections"
    );
    let slots = Arc::new(Semaphore::new(cap));
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(idle_timeout);
    let mut open = JoinSet::new();
    loop {
        tokio::select! {
            biased;
            _ = stop.cancelled() => break,
            Some(_) = open.join_next(), if !open.is_empty() => {}
            (stream, permit) = accept(&listener, &slots) => {
                let _ = stream.set_nodelay(true);
                let conn = http.serve_connection(
                    TokioIo::new(stream),
                    TowerToHyperService::new(app.clone()),
                );
                open.spawn(run_connection(conn, stop.clone(), permit));
            }
        }
    }
    drop(listener);
    while open.join_next().await.is_some() {}
    Ok(())
}

/// Drive one connection; on `stop`, let it finish the exchange it is in. The slot is freed
/// once the socket is closed.
async fn run_connection<S>(
    conn: http1::Connection<TokioIo<TcpStream>, S>,
    stop: CancellationToken,
    permit: OwnedSemaphorePermit,
) where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conn = std::pin::pin!(conn);
    let ended = tokio::select! {
        r = conn.as_mut() => r,
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = ended {
        // Timeouts and clients that went away end up here; nothing to act on.
        tracing::debug!(error = %e, "connection closed");
    }
    drop(permit);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cap_leaves_half_the_open_files_to_the_agents() {
        assert_eq!(cap_for(512, Some(256)), 128);
        assert_eq!(cap_for(512, Some(20_000)), 512);
        assert_eq!(cap_for(512, None), 512);
        assert_eq!(cap_for(512, Some(u64::MAX)), 512);
        assert_eq!(cap_for(0, Some(256)), 1);
        assert_eq!(cap_for(512, Some(1)), 1);
    }
}
