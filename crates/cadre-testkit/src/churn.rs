//! Hostile connections against a server's connection slots, for its tests and for
//! `cadre-bench serve-churn`: one connection that the server must shed, reopened as soon as
//! it is closed, until stopped.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;

/// Keep one hostile connection to `addr` open until `stop`, reopening it each time the
/// server closes it and counting each opening in `opened`. By `kind % 3` it sends nothing,
/// starts a request head and never finishes it, or makes an unauthenticated request and
/// stays.
pub async fn hostile_connection(
    addr: SocketAddr,
    kind: usize,
    opened: Arc<AtomicUsize>,
    stop: CancellationToken,
) {
    while !stop.is_cancelled() {
        let Ok(mut s) = TcpStream::connect(addr).await else {
            tokio::task::yield_now().await;
            continue;
        };
        opened.fetch_add(1, Ordering::Relaxed);
        let head = match kind % 3 {
            0 => String::new(),
            1 => format!("GET /tasks/x HTTP/1.1\r\nHost: {addr}\r\nX-Slow: "),
            _ => format!("GET /tasks/x HTTP/1.1\r\nHost: {addr}\r\n\r\n"),
        };
        if s.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        // Read (and discard) until the server closes it.
        let mut buf = [0u8; 1024];
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                r = s.read(&mut buf) => match r {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                },
            }
        }
    }
}
