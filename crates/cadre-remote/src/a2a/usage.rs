//! Usage in A2A task metadata: camelCase keys, as the rest of the protocol's JSON
//! (`{"inputTokens", "outputTokens", "cachedInputTokens", "cacheWriteTokens", "costUsd"}`,
//! `costUsd` null when a price was unknown). Reading also accepts the snake_case shape that
//! earlier cadre servers sent.

use cadre_types::Usage;
use serde_json::{Value, json};

/// `usage` as task metadata.
pub fn usage_json(usage: &Usage) -> Value {
    json!({
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedInputTokens": usage.cached_input_tokens,
        "cacheWriteTokens": usage.cache_write_tokens,
        "costUsd": usage.cost_usd(),
    })
}

/// Usage from task metadata; `None` when there is none. A missing or null `costUsd` is an
/// unknown cost.
pub fn parse_usage(v: &Value) -> Option<Usage> {
    if v.get("inputTokens").is_none() {
        return serde_json::from_value(v.clone()).ok();
    }
    let n = |k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let usage = Usage {
        input_tokens: n("inputTokens"),
        output_tokens: n("outputTokens"),
        cached_input_tokens: n("cachedInputTokens"),
        cache_write_tokens: n("cacheWriteTokens"),
        ..Usage::default()
    };
    Some(usage.priced(v.get("costUsd").and_then(Value::as_f64)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_round_trips_in_camel_case_and_old_servers_are_read() {
        let u = Usage {
            input_tokens: 100,
            output_tokens: 20,
            cached_input_tokens: 60,
            cache_write_tokens: 30,
            ..Usage::default()
        }
        .priced(Some(0.0125));
        let v = usage_json(&u);
        assert_eq!(
            v,
            json!({"inputTokens": 100, "outputTokens": 20, "cachedInputTokens": 60,
                   "cacheWriteTokens": 30, "costUsd": 0.0125})
        );
        assert_eq!(parse_usage(&v), Some(u));
        let unknown = usage_json(&Usage::default().priced(None));
        assert_eq!(unknown["costUsd"], Value::Null);
        assert_eq!(parse_usage(&unknown).unwrap().cost_usd(), None);
        let old = parse_usage(&json!({"input_tokens": 5, "output_tokens": 1})).unwrap();
        assert_eq!((old.input_tokens, old.cost_usd()), (5, None));
        assert_eq!(parse_usage(&json!("nonsense")), None);
    }
}
