//! `web_fetch` against a real local web server: HTML as Markdown without script contents,
//! JSON passed through, binary types refused, bodies capped, and loopback addresses refused
//! by default wherever they come from (the URL, a redirect, a name that resolves to one).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use cadre_testkit::{WebPage, WebServer};
use cadre_tools::builtin::{WebFetchConfig, WebFetchTool};
use cadre_tools::{PermissionSubject, Tool, ToolOutput, Workspace};
use serde_json::json;

/// A host name the tests pretend is public: pinned to the local server, so only what the
/// server sends (a redirect) can lead to a refused address.
const PUBLIC: &str = "public.example";

async fn call(tool: &WebFetchTool, url: &str) -> ToolOutput {
    let dir = tempfile::tempdir().unwrap();
    let ctx = common::ctx(Workspace::new(dir.path()).unwrap());
    tool.call(json!({"url": url, "prompt": "the title"}), &ctx)
        .await
        .unwrap()
}

/// The default policy, with [`PUBLIC`] pinned to `server`.
fn guarded(server: &WebServer) -> WebFetchTool {
    WebFetchTool::new(WebFetchConfig {
        pinned_hosts: vec![(PUBLIC.into(), server.addr())],
        ..WebFetchConfig::default()
    })
}

fn public_url(server: &WebServer, path: &str) -> String {
    format!("http://{PUBLIC}:{}{path}", server.addr().port())
}

fn local_allowed() -> WebFetchTool {
    WebFetchTool::new(WebFetchConfig {
        allow_private: true,
        ..WebFetchConfig::default()
    })
}

#[tokio::test]
async fn html_comes_back_as_markdown_without_script_contents() {
    let server = WebServer::start().await.unwrap();
    server.page(
        "/page",
        WebPage::html(
            "<!doctype html><html><head><title>T</title><script>var secret = 'tok';</script>\
             <style>.x{color:red}</style></head><body><h1>Release notes</h1>\
             <p>Version <b>2.0</b> is out, see <a href=\"/docs\">the docs</a>.</p>\
             <script>document.write('injected')</script></body></html>",
        ),
    );
    let out = call(&guarded(&server), &public_url(&server, "/page")).await;
    assert!(!out.is_error, "{}", out.content);
    let text = &out.content;
    assert!(text.contains("# Release notes"), "{text}");
    assert!(text.contains("**2.0**"), "{text}");
    assert!(text.contains("[the docs](/docs)"), "{text}");
    assert!(
        text.contains("Content-Type: text/html (converted to Markdown)"),
        "{text}"
    );
    assert!(text.contains("Looking for: the title"), "{text}");
    for hidden in ["secret", "tok", "injected", "color:red", "<p>", "<h1>"] {
        assert!(!text.contains(hidden), "{hidden:?} leaked: {text}");
    }
    assert!(
        server.requests()[0]
            .header("user-agent")
            .unwrap()
            .starts_with("cadre/")
    );
}

#[tokio::test]
async fn json_and_text_pass_through_and_binary_types_are_refused() {
    let server = WebServer::start().await.unwrap();
    server.page("/data", WebPage::json(&json!({"answer": 42})));
    server.page(
        "/image",
        WebPage::new("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
    );
    server.page("/blob", WebPage::untyped(b"\0\x01\x02binary".to_vec()));
    server.page("/missing", WebPage::html("<p>gone</p>").status(404));
    let tool = guarded(&server);

    let out = call(&tool, &public_url(&server, "/data")).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.ends_with(r#"{"answer":42}"#), "{}", out.content);

    for path in ["/image", "/blob"] {
        let out = call(&tool, &public_url(&server, path)).await;
        assert!(out.is_error, "{path}: {}", out.content);
        assert!(out.content.contains("not text"), "{path}: {}", out.content);
        assert!(!out.content.contains("PNG"), "{}", out.content);
    }

    let out = call(&tool, &public_url(&server, "/missing")).await;
    assert!(out.is_error);
    assert!(out.content.starts_with("HTTP 404"), "{}", out.content);
    assert!(out.content.contains("gone"), "{}", out.content);

    let out = call(&tool, "file:///etc/passwd").await;
    assert!(out.is_error);
    assert!(
        out.content.contains("only http and https"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn a_large_body_is_capped_at_the_download_limit() {
    let server = WebServer::start().await.unwrap();
    let ten_mib = "a".repeat(10 * 1024 * 1024);
    server.page("/big", WebPage::new("text/plain", ten_mib));
    let out = call(&guarded(&server), &public_url(&server, "/big")).await;
    assert!(!out.is_error, "{}", &out.content[..200]);
    let body_start = out.content.find("\n\n").unwrap() + 2;
    assert_eq!(out.content.len() - body_start, 5 * 1024 * 1024);
    assert!(
        out.content
            .contains("Truncated: the body is larger than 5242880 bytes"),
        "{}",
        &out.content[..body_start]
    );
}

#[tokio::test]
async fn loopback_is_refused_by_default_in_the_url_after_a_redirect_and_after_dns() {
    let server = WebServer::start().await.unwrap();
    server.page(
        "/secret",
        WebPage::new("text/plain", "internal admin token"),
    );
    let port = server.addr().port();
    server.page(
        "/to-ip",
        WebPage::redirect(&format!("http://127.0.0.1:{port}/secret")),
    );
    server.page(
        "/to-name",
        WebPage::redirect(&format!("http://localhost:{port}/secret")),
    );
    server.page(
        "/to-mapped",
        WebPage::redirect(&format!("http://[::ffff:127.0.0.1]:{port}/secret")),
    );
    let tool = guarded(&server);

    for url in [
        server.url("/secret"),
        format!("http://localhost:{port}/secret"),
        format!("http://2130706433:{port}/secret"),
        public_url(&server, "/to-ip"),
        public_url(&server, "/to-name"),
        public_url(&server, "/to-mapped"),
    ] {
        let out = call(&tool, &url).await;
        assert!(out.is_error, "{url}: {}", out.content);
        assert!(
            out.content.contains("a loopback address")
                && out.content.contains("web_fetch_allow_private"),
            "{url}: {}",
            out.content
        );
        assert!(!out.content.contains("admin token"), "{url}");
    }
    // Only the pinned first hops reached the server; no refused address was requested.
    let paths: Vec<String> = server
        .requests()
        .into_iter()
        .map(|r| r.path_and_query)
        .collect();
    assert_eq!(paths, ["/to-ip", "/to-name", "/to-mapped"]);

    // With private addresses allowed, the same redirect is followed.
    let out = call(&local_allowed(), &server.url("/to-name")).await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.ends_with("internal admin token"),
        "{}",
        out.content
    );
}

#[tokio::test]
async fn redirects_are_limited() {
    let server = WebServer::start().await.unwrap();
    for i in 0..7 {
        server.page(
            &format!("/r{i}"),
            WebPage::redirect(&format!("/r{}", i + 1)),
        );
    }
    server.page("/r7", WebPage::new("text/plain", "end"));
    let tool = local_allowed();
    let out = call(&tool, &server.url("/r2")).await;
    assert!(
        !out.is_error,
        "five redirects are followed: {}",
        out.content
    );
    assert!(out.content.contains(&format!("URL: {}", server.url("/r7"))));
    let out = call(&tool, &server.url("/r0")).await;
    assert!(out.is_error);
    assert!(
        out.content.contains("more than 5 redirects"),
        "{}",
        out.content
    );
}

#[test]
fn it_reads_for_approvals_but_is_marked_as_network() {
    let tool = WebFetchTool::default();
    assert!(tool.is_read_only());
    assert!(tool.uses_network());
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::new(dir.path()).unwrap();
    assert_eq!(
        tool.permission_subject(&json!({"url": "HTTPS://Docs.RS/a b"}), &ws)
            .unwrap(),
        PermissionSubject::Text("https://docs.rs/a%20b".into())
    );
    assert!(
        tool.permission_subject(&json!({"url": "not a url"}), &ws)
            .is_err()
    );
}
