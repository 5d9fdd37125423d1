//! Connections are bounded: idle, slow-header and idle keep-alive connections are closed after
//! the idle timeout while other clients are served; connections without an authenticated
//! request get a shorter one; when slots run out idle connections are shed (unauthenticated
//! first), a peer's busy connections are capped, and connections beyond the cap wait for a
//! busy slot to free instead of taking file descriptors. An authenticated client is served
//! at once while hundreds of hostile connections churn.
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

/// Open a connection whose request head is complete but whose body never comes, so the
/// server is busy reading it (for up to `request_timeout`). Returns once the server has
/// started reading the body (its `100 Continue` arrived), so the connection is known busy.
async fn busy_connection(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /tasks HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n"
    );
    s.write_all(head.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut chunk = [0u8; 256];
    while !String::from_utf8_lossy(&got).contains("100 Continue") {
        let n = s.read(&mut chunk).await.unwrap();
        assert!(
            n > 0,
            "closed before 100 Continue: {}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&chunk[..n]);
    }
    s.write_all(b"{").await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_beyond_the_cap_wait_for_a_busy_slot_to_free() {
    let n = node();
    let mut opts = options();
    opts.max_connections = 2;
    opts.idle_timeout = Duration::from_secs(120);
    let srv = serve(&n, opts).await;
    let first = busy_connection(srv.addr).await;
    let second = busy_connection(srv.addr).await;
    let url = srv.url();
    let mut third = tokio::spawn(async move {
        http()
            .get(format!("{url}/.well-known/agent-card.json"))
            .send()
            .await
            .map(|r| r.status().as_u16())
    });
    // Both slots are answering requests, so the third is not served (a server without a
    // cap answers it at once)...
    let early = tokio::time::timeout(Duration::from_millis(500), &mut third).await;
    assert!(early.is_err(), "served beyond the cap: {early:?}");
    // ...until one of the two goes away.
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_are_shed_to_make_room_unauthenticated_first() {
    let n = node();
    let mut opts = options();
    opts.token = Some("s3cret".into());
    opts.max_connections = 2;
    opts.idle_timeout = Duration::from_secs(120);
    opts.unauthenticated_timeout = Duration::from_secs(120);
    let srv = serve(&n, opts).await;
    // An authenticated keep-alive connection, then an idle one that never said anything.
    let client = http();
    let (status, _) = rpc_with(&client, &srv.url(), Some("s3cret"), "ListTasks", json!({})).await;
    assert_eq!(status, 200);
    let mut silent = TcpStream::connect(srv.addr).await.unwrap();
    // Both slots are held, yet a new client is served at once: the silent one makes room.
    let started = std::time::Instant::now();
    let (status, _) = rpc_with(&http(), &srv.url(), Some("s3cret"), "ListTasks", json!({})).await;
    assert_eq!(status, 200);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    assert!(
        closed_by(&mut silent, deadline).await,
        "the silent connection was kept"
    );
    // The authenticated connection is still the pool's and still answers.
    let (status, _) = rpc_with(&client, &srv.url(), Some("s3cret"), "ListTasks", json!({})).await;
    assert_eq!(status, 200);
    srv.stop().await.unwrap();
}

/// Connect and send a complete GET of the agent card.
async fn card_request(addr: std::net::SocketAddr) -> TcpStream {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_peer_whose_slots_are_all_busy_waits_for_one_and_only_so_many_wait() {
    let n = node();
    let mut opts = options();
    opts.max_connections = 10;
    opts.max_connections_per_peer = 2;
    opts.idle_timeout = Duration::from_secs(120);
    let srv = serve(&n, opts).await;
    let first = busy_connection(srv.addr).await;
    let second = busy_connection(srv.addr).await;
    // Two more may wait for the peer's two slots (a peer waits for as many as it may
    // hold); the fifth is closed at once.
    let mut third = card_request(srv.addr).await;
    let mut fourth = card_request(srv.addr).await;
    let mut fifth = card_request(srv.addr).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    assert!(
        closed_by(&mut fifth, deadline).await,
        "a fifth connection was kept"
    );
    // Another peer (127.0.0.2 is loopback too on Linux) is served meanwhile: the waiting
    // connections wait apart from the accept loop.
    let other = tokio::net::TcpSocket::new_v4().unwrap();
    other.bind("127.0.0.2:0".parse().unwrap()).unwrap();
    let mut other = other.connect(srv.addr).await.unwrap();
    let req = format!(
        "GET /.well-known/agent-card.json HTTP/1.1\r\nHost: {}\r\n\r\n",
        srv.addr
    );
    other.write_all(req.as_bytes()).await.unwrap();
    assert_eq!(read_response(&mut other).await, 200);
    // Once the busy connections go away, both waiting ones are served.
    drop(first);
    drop(second);
    assert_eq!(read_response(&mut third).await, 200);
    assert_eq!(read_response(&mut fourth).await, 200);
    srv.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unauthenticated_connections_get_the_short_timeout_authenticated_ones_the_idle_one() {
    let n = node();
    let mut opts = options();
    opts.token = Some("s3cret".into());
    opts.idle_timeout = Duration::from_secs(120);
    opts.unauthenticated_timeout = Duration::from_millis(300);
    let srv = serve(&n, opts).await;
    let host = srv.addr.to_string();
    let mut silent = TcpStream::connect(srv.addr).await.unwrap();
    // A request without the token is answered (401) but does not buy time.
    let mut refused = TcpStream::connect(srv.addr).await.unwrap();
    refused
        .write_all(format!("GET /tasks/x HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    assert_eq!(read_response(&mut refused).await, 401);
    let mut authed = TcpStream::connect(srv.addr).await.unwrap();
    authed
        .write_all(
            format!(
                "GET /tasks/x HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer s3cret\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    assert_eq!(read_response(&mut authed).await, 404);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    assert!(
        closed_by(&mut silent, deadline).await,
        "silent connection kept"
    );
    assert!(
        closed_by(&mut refused, deadline).await,
        "unauthenticated connection kept"
    );
    // Both closed well within the idle timeout; the authenticated one is still open.
    assert!(
        !closed_by(
            &mut authed,
            tokio::time::Instant::now() + Duration::from_millis(500)
        )
        .await,
        "the authenticated connection was closed"
    );
    srv.stop().await.unwrap();
}

/// Keep `count` hostile connections open against `addr` from another thread (as another
/// process would), reopening each as soon as the server closes it: a third send nothing,
/// a third start a request head and never finish it, a third make an unauthenticated
/// request and stay. Returns how many connections were opened so far, and a stop switch.
fn churn(
    addr: std::net::SocketAddr,
    count: usize,
) -> (
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
    tokio_util::sync::CancellationToken,
    std::thread::JoinHandle<()>,
) {
    let opened = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let stop = tokio_util::sync::CancellationToken::new();
    let (o, st) = (opened.clone(), stop.clone());
    let thread = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut set = tokio::task::JoinSet::new();
            for i in 0..count {
                set.spawn(cadre_testkit::hostile_connection(
                    addr,
                    i,
                    o.clone(),
                    st.clone(),
                ));
            }
            while set.join_next().await.is_some() {}
        });
    });
    (opened, stop, thread)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authenticated_client_is_served_at_once_while_600_idle_connections_churn() {
    use std::sync::atomic::Ordering;
    let n = node();
    let mut opts = options();
    opts.token = Some("s3cret".into());
    // The defaults: 512 slots, 256 per peer, 3 s for unauthenticated connections, 15 s idle.
    let srv = serve(&n, opts).await;
    let (opened, stop, hostile) = churn(srv.addr, 600);
    // Every slot of the loopback peer is taken and the churn is on (connections closed to
    // make room are being reopened).
    let settled = eventually(60, || opened.load(Ordering::Relaxed) >= 1200).await;
    assert!(
        settled,
        "the churn never got going: {} opened",
        opened.load(Ordering::Relaxed)
    );
    let url = srv.url();
    let mut worst = Duration::ZERO;
    let kept = http();
    for round in 0..10 {
        // Half on a fresh connection (a client's first request), half on a kept one.
        let fresh;
        let client = if round % 2 == 0 {
            fresh = reqwest::Client::builder()
                .pool_max_idle_per_host(0)
                .timeout(Duration::from_secs(60))
                .build()
                .unwrap();
            &fresh
        } else {
            &kept
        };
        let before = opened.load(Ordering::Relaxed);
        let started = std::time::Instant::now();
        let (status, v) = rpc_with(client, &url, Some("s3cret"), "ListTasks", json!({})).await;
        let took = started.elapsed();
        assert_eq!(status, 200, "{v}");
        worst = worst.max(took);
        // The hostile client kept churning meanwhile.
        assert!(
            eventually(10, || opened.load(Ordering::Relaxed) > before + 50).await,
            "the churn stopped"
        );
    }
    stop.cancel();
    hostile.join().unwrap();
    // The target is 100 ms; on a shared test machine only what matters is asserted: no
    // authenticated request waited for a slot to be given up by the 3 s unauthenticated
    // timeout (or the 15 s idle one). The figure itself is printed for the record.
    eprintln!("slowest authenticated request while 600 connections churned: {worst:?}");
    assert!(
        worst < Duration::from_secs(2),
        "slowest authenticated request: {worst:?}"
    );
    srv.stop().await.unwrap();
}
