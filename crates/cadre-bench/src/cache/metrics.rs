//! What a provider's prompt cache would make of the requests a job sent: how much of the
//! previous request of a conversation the next one repeats byte for byte (prefix efficiency:
//! an append-only conversation scores 1.0, a system prompt rewritten at its end near 0), where the
//! Anthropic `cache_control` breakpoints sit, and the tokens a prefix-caching provider would
//! bill as cached, written to the cache, or uncached.
//!
//! Prefix efficiency is measured twice: on the raw bodies (what is on the wire, so the JSON
//! key order counts) and on the rendered prompt (tools, system prompt, then messages, in the
//! order providers lay out the prompt they cache, without the `cache_control` markers).
//!
//! Tokens are estimated as bytes / 4 (the usual rule of thumb for English and JSON).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Bytes per estimated token.
pub const BYTES_PER_TOKEN: usize = 4;
/// The shortest prefix either provider caches: 1024 tokens.
pub const MIN_CACHED_TOKENS: usize = 1024;
/// OpenAI caches in steps of 128 tokens above the minimum.
pub const OPENAI_CACHE_STEP: usize = 128;
/// The marker of an Anthropic cache breakpoint in a body.
const BREAKPOINT: &[u8] = b"\"cache_control\"";

/// Which caching rule to bill with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CacheRule {
    /// Automatic: the longest prefix any earlier request sent, in 128-token steps.
    Automatic,
    /// Explicit: only prefixes ending at a `cache_control` breakpoint are written and read.
    Breakpoints,
}

/// One request as sent.
#[derive(Debug, Clone)]
pub struct SentRequest {
    /// The conversation it belongs to (its first user message).
    pub conversation: String,
    /// Sent by the parent (not a sub-agent).
    pub parent: bool,
    /// The body bytes.
    pub body: Vec<u8>,
    /// The prompt as a provider lays it out (see [`rendered`]).
    pub rendered: Vec<u8>,
}

impl SentRequest {
    /// A request from its raw body.
    pub fn new(conversation: &str, parent: bool, body: &[u8]) -> Self {
        let parsed: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
        Self {
            conversation: conversation.to_string(),
            parent,
            body: body.to_vec(),
            rendered: rendered(&parsed),
        }
    }
}

fn strip_cache_control(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("cache_control");
            map.values_mut().for_each(strip_cache_control);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_cache_control),
        _ => {}
    }
}

/// The prompt of a body in the order providers lay it out: tools, system prompt (Anthropic's
/// top-level `system`), then the messages, one JSON value after another, without
/// `cache_control` markers.
pub fn rendered(body: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    for key in ["tools", "system"] {
        if let Some(v) = body.get(key) {
            let mut v = v.clone();
            strip_cache_control(&mut v);
            out.extend_from_slice(v.to_string().as_bytes());
        }
    }
    for m in body
        .get("messages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut m = m.clone();
        strip_cache_control(&mut m);
        out.extend_from_slice(m.to_string().as_bytes());
    }
    out
}

/// Estimated tokens, by how a prefix-caching provider bills them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Billing {
    /// Read from the cache.
    pub cached: u64,
    /// Written to the cache (Anthropic bills them at a premium).
    pub written: u64,
    /// Neither.
    pub uncached: u64,
}

/// The measurements of one job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CacheMetrics {
    /// Requests sent (parent and sub-agents).
    pub requests: usize,
    /// Requests of the parent.
    pub parent_requests: usize,
    /// Bytes of all request bodies.
    pub bytes_sent: u64,
    /// Lowest share of a parent request's bytes that its next request repeats as a prefix.
    pub parent_prefix_min: f64,
    /// Mean of that share over the parent's requests.
    pub parent_prefix_mean: f64,
    /// `parent_prefix_min` measured on the rendered prompt.
    pub parent_rendered_min: f64,
    /// `parent_prefix_mean` measured on the rendered prompt.
    pub parent_rendered_mean: f64,
    /// The same over every request that is followed in its conversation, weighted by bytes.
    pub prefix_weighted: f64,
    /// Mean share of a sub-agent's first request that the next sub-agent's first request
    /// repeats (a fan-out of one definition shares its system prompt and tools).
    pub fanout_prefix_mean: f64,
    /// Requests that carry at least one `cache_control` breakpoint.
    pub requests_with_breakpoints: usize,
    /// Most breakpoints in one request.
    pub max_breakpoints: usize,
    /// Estimated billing under `rule`.
    pub billing: Billing,
    /// The rule `billing` used.
    pub rule: Option<CacheRule>,
}

/// Length of the common prefix of `a` and `b`.
pub fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// Byte offsets of the `cache_control` markers of a body: where the content a breakpoint
/// caches ends (before the marker and the comma that introduces it).
pub fn breakpoints(body: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(pos) = body[at..]
        .windows(BREAKPOINT.len())
        .position(|w| w == BREAKPOINT)
    {
        let start = at + pos;
        out.push(if start > 0 && body[start - 1] == b',' {
            start - 1
        } else {
            start
        });
        at = start + BREAKPOINT.len();
    }
    out
}

fn tokens(bytes: usize) -> u64 {
    (bytes / BYTES_PER_TOKEN) as u64
}

/// Cached bytes of request `i` under the automatic rule.
fn automatic_cached(requests: &[SentRequest], i: usize) -> usize {
    let longest = requests[..i]
        .iter()
        .map(|r| common_prefix(&r.body, &requests[i].body))
        .max()
        .unwrap_or(0);
    let t = longest / BYTES_PER_TOKEN;
    if t < MIN_CACHED_TOKENS {
        return 0;
    }
    let t = MIN_CACHED_TOKENS + (t - MIN_CACHED_TOKENS) / OPENAI_CACHE_STEP * OPENAI_CACHE_STEP;
    t * BYTES_PER_TOKEN
}

/// (cached, written) bytes of request `i` under the breakpoint rule.
fn breakpoint_billing(requests: &[SentRequest], marks: &[Vec<usize>], i: usize) -> (usize, usize) {
    let min = MIN_CACHED_TOKENS * BYTES_PER_TOKEN;
    let Some(&last) = marks[i].last() else {
        return (0, 0);
    };
    let mut cached = 0;
    for (j, earlier) in requests[..i].iter().enumerate() {
        let shared = common_prefix(&earlier.body, &requests[i].body);
        for &b in &marks[j] {
            if b <= shared && b <= last && b >= min {
                cached = cached.max(b);
            }
        }
    }
    let written = if last >= min && last > cached {
        last - cached
    } else {
        0
    };
    (cached, written)
}

/// Measure the requests of one job, in the order they were sent.
pub fn measure(requests: &[SentRequest], rule: CacheRule) -> CacheMetrics {
    let marks: Vec<Vec<usize>> = requests.iter().map(|r| breakpoints(&r.body)).collect();
    let mut m = CacheMetrics {
        requests: requests.len(),
        parent_requests: requests.iter().filter(|r| r.parent).count(),
        bytes_sent: requests.iter().map(|r| r.body.len() as u64).sum(),
        requests_with_breakpoints: marks.iter().filter(|b| !b.is_empty()).count(),
        max_breakpoints: marks.iter().map(Vec::len).max().unwrap_or(0),
        rule: Some(rule),
        ..CacheMetrics::default()
    };
    let (mut shared_sum, mut len_sum) = (0usize, 0usize);
    let mut parent_shares = Vec::new();
    let mut rendered_shares = Vec::new();
    let mut fanout_shares = Vec::new();
    let mut last_child_first: Option<usize> = None;
    for (i, r) in requests.iter().enumerate() {
        let previous = requests[..i]
            .iter()
            .rposition(|p| p.conversation == r.conversation);
        match previous {
            Some(p) => {
                let before = &requests[p];
                let shared = common_prefix(&before.body, &r.body);
                shared_sum += shared;
                len_sum += before.body.len();
                if r.parent {
                    parent_shares.push(shared as f64 / before.body.len().max(1) as f64);
                    let shared = common_prefix(&before.rendered, &r.rendered);
                    rendered_shares.push(shared as f64 / before.rendered.len().max(1) as f64);
                }
            }
            None if !r.parent => {
                if let Some(p) = last_child_first {
                    let shared = common_prefix(&requests[p].body, &r.body);
                    fanout_shares.push(shared as f64 / requests[p].body.len().max(1) as f64);
                }
                last_child_first = Some(i);
            }
            None => {}
        }
        let (cached, written) = match rule {
            CacheRule::Automatic => (automatic_cached(requests, i), 0),
            CacheRule::Breakpoints => breakpoint_billing(requests, &marks, i),
        };
        m.billing.cached += tokens(cached);
        m.billing.written += tokens(written);
        m.billing.uncached += tokens(r.body.len().saturating_sub(cached + written));
    }
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let min = |v: &[f64]| v.iter().copied().reduce(f64::min).unwrap_or(0.0);
    m.parent_prefix_min = min(&parent_shares);
    m.parent_prefix_mean = mean(&parent_shares);
    m.parent_rendered_min = min(&rendered_shares);
    m.parent_rendered_mean = mean(&rendered_shares);
    m.fanout_prefix_mean = mean(&fanout_shares);
    m.prefix_weighted = if len_sum == 0 {
        0.0
    } else {
        shared_sum as f64 / len_sum as f64
    };
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(conversation: &str, parent: bool, body: &str) -> SentRequest {
        SentRequest::new(conversation, parent, body.as_bytes())
    }

    #[test]
    fn the_rendered_prompt_puts_tools_and_system_first_without_markers() {
        let body = serde_json::json!({
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi",
                                                       "cache_control": {"type": "ephemeral"}}]}],
            "model": "m",
            "system": [{"type": "text", "text": "sys", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "t"}],
        });
        assert_eq!(
            String::from_utf8(rendered(&body)).unwrap(),
            r#"[{"name":"t"}][{"text":"sys","type":"text"}]{"content":[{"text":"hi","type":"text"}],"role":"user"}"#
        );
    }

    #[test]
    fn an_append_only_conversation_repeats_its_whole_previous_request() {
        let a = "x".repeat(100);
        let reqs = [
            req("p", true, &a),
            req("p", true, &format!("{a}yy")),
            req("c1", false, &format!("{a}c1")),
            req("p", true, &format!("{a}yyzz")),
            req("c2", false, &format!("{a}c2")),
        ];
        let m = measure(&reqs, CacheRule::Automatic);
        assert_eq!(m.parent_requests, 3);
        assert_eq!(m.parent_prefix_min, 1.0, "{m:?}");
        assert!((m.fanout_prefix_mean - 101.0 / 102.0).abs() < 1e-9, "{m:?}");
        assert_eq!(m.bytes_sent, 100 + 102 + 102 + 104 + 102);
    }

    #[test]
    fn a_changed_system_prompt_breaks_the_prefix() {
        let reqs = [
            req("p", true, "SYSTEM-A|tools|m1"),
            req("p", true, "SYSTEM-B|tools|m1|m2"),
        ];
        let m = measure(&reqs, CacheRule::Automatic);
        assert!((m.parent_prefix_min - 7.0 / 17.0).abs() < 1e-9, "{m:?}");
    }

    #[test]
    fn automatic_caching_needs_1024_tokens_and_counts_in_steps() {
        let long = "a".repeat(4 * 1200);
        let reqs = [req("p", true, &long), req("p", true, &format!("{long}b"))];
        let m = measure(&reqs, CacheRule::Automatic);
        // 1200 shared tokens: 1024 + 128 cached, the rest uncached.
        assert_eq!(m.billing.cached, 1152);
        assert_eq!(m.billing.cached + m.billing.uncached, 1200 + 1200);
        let short = [req("p", true, "abc"), req("p", true, "abcd")];
        assert_eq!(measure(&short, CacheRule::Automatic).billing.cached, 0);
    }

    #[test]
    fn breakpoints_are_found_and_only_cache_up_to_themselves() {
        let body = r#"{"a":1,"cache_control":{},"b":{"cache_control":{}}}"#;
        assert_eq!(breakpoints(body.as_bytes()), vec![6, 31]);
        let head = "h".repeat(4 * 2000);
        let first = format!("{head}\"cache_control\"tail");
        let second = format!("{head}\"cache_control\"tail-and-more\"cache_control\"");
        let reqs = [req("p", true, &first), req("p", true, &second)];
        let m = measure(&reqs, CacheRule::Breakpoints);
        assert_eq!(m.requests_with_breakpoints, 2);
        assert_eq!(m.max_breakpoints, 2);
        // The first request writes its 2000 tokens; the second reads them and writes the rest
        // up to its last breakpoint.
        assert_eq!(m.billing.cached, 2000);
        let none = [req("p", true, &head), req("p", true, &format!("{head}x"))];
        let m = measure(&none, CacheRule::Breakpoints);
        assert_eq!(m.billing.cached + m.billing.written, 0);
        assert_eq!(m.requests_with_breakpoints, 0);
    }
}
