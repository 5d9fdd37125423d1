//! Connections are bounded: idle, slow-header and idle keep-alive connections are closed after
//! the idle timeout while other clients are served, and connections beyond the cap wait for
//! a free slot instead of taking file descriptors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Read one HTTP/1.1 response with a `Content-Length` body; returns its status code.
async fn read_response(s: &mut TcpStream) -> u16 {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed before the response");
        buf.extend_from_slice(&chunk[..n]);
        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
            continue;
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let length: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .map_or(0, |v| v.trim().parse().unwrap());
        if buf.len() >= end + 4 + length {
            return head[9..12].parse().unwrap();
        }
    }
}

/// Whether the server closes `s` before `deadline` (EOF or a reset).
async fn closed_by(s: &mut TcpStream, deadline: tokio::time::Instant) -> bool {
    let mut rest = Vec::new();
    match tokio::time::timeout_at(deadline, s.read_to_end(&mut rest)).await {
        Ok(Ok(_)) => true,
        Ok(Err(e)) => e.kind() == std::io::ErrorKind::ConnectionReset,
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_closed_after_the_idle_timeout_while_clients_are_served() {
    let n = node();
    let mut opts = options();
    opts.idle_timeout = Duration::from_secs(1);
    opts.max_connections = 1000;
    let srv = serve(&n, opts).await;
    let host = srv.addr.to_string();
    let mut idle = Vec::new();
    for i in 0..300 {
        let mut s = TcpStream::connect(srv.addr).await.unwrap();
        match i % 3 {
            // Opens and says nothing.
            0 => {}
            // Starts a request head and never finishes it.
            1 => s
                .write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\nX-Slow: ").as_bytes())
                .await
                .unwrap(),
            // One exchange, then keeps the connection open.
            _ => {
                let req =
                    format!("GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {host}\r\n\r\n");
                s.write_all(req.as_bytes()).await.unwrap();
                assert_eq!(read_response(&mut s).await, 200);
            }
        }
        idle.push(s);
    }
    // A client that talks is served meanwhile.
    let (status, v) = rpc(&srv.url(), "SendMessage", json!({"message": message("hi")})).await;
    assert_eq!(status, 200);
    assert_eq!(
        v["result"]["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    // Every idle connection is closed by the server.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    let closed = futures::future::join_all(idle.iter_mut().map(|s| closed_by(s, deadline))).await;
    let open: Vec<usize> = closed
        .iter()
        .enumerate()
        .filter(|(_, c)| !**c)
        .map(|(i, _)| i)
        .collect();
    assert!(open.is_empty(), "still open: {open:?}");
    // And the server still serves new ones.
    let (status, _) = rpc(&srv.url(), "ListTasks", json!({})).await;
    assert_eq!(status, 200);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_free_slot() {
    let n = node();
    let mut opts = options();
    opts.max_connections = 2;
    opts.idle_timeout = Duration::from_secs(120);
    let srv = serve(&n, opts).await;
    let mut first = TcpStream::connect(srv.addr).await.unwrap();
    let second = TcpStream::connect(srv.addr).await.unwrap();
    let url = srv.url();
    let mut third = tokio::spawn(async move {
        http()
            .get(format!("{url}/.well-known/agent-card.json"))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Both slots are held, so the third is not served (a server without a cap answers it
    // at once)...
    assert!(
        tokio::time::timeout(Duration::from_millis(500), &mut third)
            .await
            .is_err(),
        "served beyond the cap"
    );
    // ...until one of the two goes away.
    first.shutdown().await.unwrap();
    drop(first);
    let status = tokio::time::timeout(Duration::from_secs(20), third)
        .await
        .expect("served once a slot was free")
        .unwrap()
        .unwrap();
    assert_eq!(status, 200);
    drop(second);
    srv.stop().await.unwrap();
}
