//! Accepting connections. axum's `serve` never closes a connection by itself, so a client
//! that opens many and sends nothing holds a file descriptor each until the process has
//! none left. This accept loop runs hyper directly instead:
//!
//! - a connection must deliver a complete request head within `idle_timeout` of opening or
//!   of finishing its previous exchange, else it is closed: this is hyper's header-read
//!   timeout, which starts when a connection goes idle, so it closes idle keep-alive
//!   connections and slow-header clients alike (a request being answered is never cut);
//! - a connection that has not yet made an authenticated request gets only
//!   `unauthenticated_timeout` for the same, so sockets opened by someone without the token
//!   cannot sit on slots;
//! - at most [`connection_cap`] connections are open at once, at most
//!   `max_connections_per_peer` from one address, and when no slot is free an idle
//!   connection is shed to make room, unauthenticated ones first (see [`super::slots`]);
//!   when every slot of a peer is answering a request, its new connections wait apart for
//!   one (a bounded number of them), and when every slot is, later connections wait in the
//!   listen backlog, costing the process nothing, until one closes;
//! - on shutdown every connection finishes the exchange it is in and closes; dropping the
//!   loop aborts whatever is left.

use super::guard::authorized;
use super::slots::{Deadline, Parked, Refusal, RequestMark, Slot, Slots};
use axum::Router;
use axum::http::{Request, Response};
use hyper::body::{Body as HttpBody, Incoming};
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio::time::Instant;
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

/// How connections are bounded.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    /// Longest wait for a complete request head on an authenticated connection.
    pub(crate) idle_timeout: Duration,
    /// The same for a connection that has made no authenticated request yet.
    pub(crate) unauthenticated_timeout: Duration,
    /// Connections open at once (before the open-file bound).
    pub(crate) max_connections: usize,
    /// Connections open at once from one address.
    pub(crate) max_connections_per_peer: usize,
    /// The bearer token requests must carry to count as authenticated (`None`: every
    /// complete request does).
    pub(crate) token: Option<Arc<str>>,
}

/// A connection taken from the listener.
enum Accepted {
    /// It has a slot.
    Admitted(TcpStream, Slot),
    /// Its peer's slots are all busy: it waits for one apart from the accept loop.
    Parked(TcpStream, Parked),
}

/// Wait for room, then for a connection, and give it a slot. A connection from a peer whose
/// every slot is busy waits apart for one (or is closed when too many of that peer's wait);
/// one that finds every slot of the table busy is held here until one frees.
async fn accept(listener: &TcpListener, slots: &Arc<Slots>) -> Accepted {
    loop {
        slots.room().await;
        let (stream, addr) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                tracing::warn!(error = %e, "cannot accept a connection; retrying shortly");
                tokio::time::sleep(ACCEPT_BACKOFF).await;
                continue;
            }
        };
        loop {
            match slots.admit(addr.ip()) {
                Ok(slot) => return Accepted::Admitted(stream, slot),
                Err(Refusal::PeerFull) => match slots.park(addr.ip()) {
                    Some(parked) => return Accepted::Parked(stream, parked),
                    None => {
                        tracing::debug!(peer = %addr.ip(), "refused: every slot of this peer is busy and as many of its connections wait");
                        break;
                    }
                },
                // Every slot became busy since `room` said otherwise: hold this one
                // connection (and accept no other) until a slot frees.
                Err(Refusal::Full) => slots.room().await,
            }
        }
    }
}

/// Serve `app` on `listener` until `stop` fires, then let the open connections finish their
/// current exchange. Returns when the last one has closed.
pub(crate) async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    stop: CancellationToken,
) -> io::Result<()> {
    let cap = connection_cap(limits.max_connections);
    tracing::debug!(
        cap,
        per_peer = limits.max_connections_per_peer,
        idle_secs = limits.idle_timeout.as_secs_f64(),
        unauthenticated_secs = limits.unauthenticated_timeout.as_secs_f64(),
        "accepting connections"
    );
    let slots = Slots::new(cap, limits.max_connections_per_peer);
    let mut http = http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.idle_timeout);
    let mut open = JoinSet::new();
    // Connections waiting for a slot of their peer; dropped (closed) on shutdown.
    let mut parked: JoinSet<(TcpStream, Slot)> = JoinSet::new();
    // One accept in flight for the whole loop, not one per turn of it: `accept` may hold an
    // accepted connection while it waits for a busy slot to free, and a connection ending
    // (which wakes the loop) must not drop that future and with it the waiting connection.
    let mut next = Box::pin(accept(&listener, &slots));
    loop {
        // Not `biased`: a run of ending connections must not keep the accept from its turn.
        let (stream, slot) = tokio::select! {
            _ = stop.cancelled() => break,
            Some(_) = open.join_next(), if !open.is_empty() => continue,
            Some(waited) = parked.join_next(), if !parked.is_empty() => match waited {
                Ok(admitted) => admitted,
                Err(_) => continue,
            },
            accepted = next.as_mut() => {
                next.set(accept(&listener, &slots));
                match accepted {
                    Accepted::Admitted(stream, slot) => (stream, slot),
                    Accepted::Parked(stream, wait) => {
                        parked.spawn(async move { (stream, wait.admitted().await) });
                        continue;
                    }
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let slot = Arc::new(slot);
        let service = Marked {
            inner: TowerToHyperService::new(app.clone()),
            slot: slot.clone(),
            token: limits.token.clone(),
        };
        let io = Watched {
            stream,
            slot: slot.clone(),
        };
        let conn = http.serve_connection(TokioIo::new(io), service);
        open.spawn(run_connection(
            conn,
            stop.clone(),
            slot,
            limits.unauthenticated_timeout,
        ));
    }
    drop(parked);
    // Closing the listener refuses what is still in the backlog.
    drop(next);
    drop(listener);
    while open.join_next().await.is_some() {}
    Ok(())
}

/// The router as hyper calls it, marking the connection busy from the moment a request
/// head is read until its response body has been sent, and authenticated once a request
/// carries the token.
struct Marked {
    inner: TowerToHyperService<Router>,
    slot: Arc<Slot>,
    token: Option<Arc<str>>,
}

type BoxedFuture = Pin<Box<dyn Future<Output = Result<Response<MarkedBody>, Infallible>> + Send>>;

impl hyper::service::Service<Request<Incoming>> for Marked {
    type Response = Response<MarkedBody>;
    type Error = Infallible;
    type Future = BoxedFuture;

    fn call(&self, req: Request<Incoming>) -> Self::Future {
        let authenticated = self
            .token
            .as_deref()
            .is_none_or(|t| authorized(req.headers(), t));
        let mark = self.slot.begin_request(authenticated);
        let answer = self.inner.call(req);
        let slot = self.slot.clone();
        Box::pin(async move {
            let mut response = answer.await?;
            if slot.peer_waiting() {
                response.headers_mut().insert(
                    hyper::header::CONNECTION,
                    hyper::header::HeaderValue::from_static("close"),
                );
            }
            Ok(response.map(|body| MarkedBody { body, _mark: mark }))
        })
    }
}

/// A response body that keeps its connection marked busy until it is sent (or dropped).
struct MarkedBody {
    body: axum::body::Body,
    _mark: RequestMark,
}

impl HttpBody for MarkedBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// A connection's socket, telling its slot whether reads find bytes: a connection is shed
/// only once a read found nothing, so one whose request is already in the socket (a burst
/// of connections from one client, say) is read and answered, not closed unread.
struct Watched {
    stream: TcpStream,
    slot: Arc<Slot>,
}

impl tokio::io::AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        let polled = Pin::new(&mut self.stream).poll_read(cx, buf);
        match &polled {
            std::task::Poll::Pending => self.slot.read_drained(true),
            std::task::Poll::Ready(Ok(())) => self.slot.read_drained(false),
            std::task::Poll::Ready(Err(_)) => {}
        }
        polled
    }
}

impl tokio::io::AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> std::task::Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// Drive one connection; on `stop`, let it finish the exchange it is in. When it is shed it
/// closes at once, or after the exchange it is in; when it has made no authenticated request
/// and stays idle for `unauthenticated_timeout`, it closes. The slot is freed once the
/// socket is closed.
async fn run_connection<S>(
    conn: http1::Connection<TokioIo<Watched>, S>,
    stop: CancellationToken,
    slot: Arc<Slot>,
    unauthenticated_timeout: Duration,
) where
    S: hyper::service::HttpService<hyper::body::Incoming>,
    S::ResBody: 'static,
    <S::ResBody as hyper::body::Body>::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let mut conn = std::pin::pin!(conn);
    let state = slot.state().clone();
    let check = tokio::time::sleep(unauthenticated_timeout);
    let mut check = std::pin::pin!(check);
    let mut watching = true;
    let mut shed = false;
    let ended = loop {
        tokio::select! {
            r = conn.as_mut() => break r,
            _ = stop.cancelled() => {
                conn.as_mut().graceful_shutdown();
                break conn.await;
            }
            _ = state.shed.cancelled(), if !shed => {
                if !state.busy() {
                    tracing::debug!("connection shed");
                    return;
                }
                // Chosen while idle, then a request arrived: answer it, then close.
                shed = true;
                conn.as_mut().graceful_shutdown();
            }
            _ = &mut check, if watching => match slot.deadline(unauthenticated_timeout) {
                Deadline::None => watching = false,
                Deadline::Busy => check
                    .as_mut()
                    .reset(Instant::now() + unauthenticated_timeout),
                Deadline::At(at) if at <= Instant::now() => {
                    tracing::debug!("closed: no authenticated request in time");
                    return;
                }
                Deadline::At(at) => check.as_mut().reset(at),
            },
        }
    };
    if let Err(e) = ended {
        // Timeouts and clients that went away end up here; nothing to act on.
        tracing::debug!(error = %e, "connection closed");
    }
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
