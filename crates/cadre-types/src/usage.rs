//! Token usage and its cost, added up per model call, per run and across sub-agents.
//!
//! Cost is carried beside the tokens because it cannot be computed from summed tokens: the
//! calls of a job may use models with different prices. Each priced call adds its dollars;
//! a call whose price is unknown makes the whole sum "cost unknown" (never 0).

use serde::{Deserialize, Serialize};
use std::ops::AddAssign;

/// Nano-dollars per dollar: costs are kept as integers so that sums are exact.
const NANOS_PER_USD: f64 = 1e9;

/// Tokens spent by model calls, and what they cost.
///
/// Serialized as `{input_tokens, output_tokens, cached_input_tokens, cache_write_tokens,
/// cost_usd}`; `cost_usd` is `null` when some call's price is unknown (and read back as
/// unknown when missing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "UsageRecord", into = "UsageRecord")]
pub struct Usage {
    /// Prompt tokens, including those read from and written to the provider's cache.
    pub input_tokens: u64,
    /// Completion tokens (including reasoning).
    pub output_tokens: u64,
    /// Prompt tokens read from the provider's cache.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache (Anthropic bills them at a premium).
    pub cache_write_tokens: u64,
    /// Cost of the priced calls, in nano-dollars.
    pub cost_nano_usd: u64,
    /// Calls whose price is unknown; while there is any, the total cost is unknown.
    pub unpriced_calls: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Prompt tokens billed at the full input price (neither read from nor written to the
    /// cache).
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_sub(self.cached_input_tokens + self.cache_write_tokens)
    }

    /// This usage (one model call) with its cost: `Some(dollars)`, or `None` when the
    /// model's price is unknown.
    pub fn priced(mut self, cost_usd: Option<f64>) -> Self {
        match cost_usd {
            Some(usd) => {
                self.cost_nano_usd = usd_to_nanos(usd);
                self.unpriced_calls = 0;
            }
            None => {
                self.cost_nano_usd = 0;
                self.unpriced_calls = 1;
            }
        }
        self
    }

    /// The cost in dollars, or `None` when some call's price is unknown.
    pub fn cost_usd(&self) -> Option<f64> {
        (self.unpriced_calls == 0).then(|| self.cost_nano_usd as f64 / NANOS_PER_USD)
    }

    /// The dollars of the calls whose price is known (a lower bound when some is not).
    pub fn priced_cost_usd(&self) -> f64 {
        self.cost_nano_usd as f64 / NANOS_PER_USD
    }

    /// The cost as people read it: `$0.0123`, or `cost unknown`.
    pub fn cost_text(&self) -> String {
        match self.cost_usd() {
            Some(usd) => format_usd(usd),
            None => "cost unknown".to_string(),
        }
    }

    /// The cost so far of a task or run that has not ended: `—` while no model call of it
    /// is counted (the price of its model is not known yet, and `$0.0000` would read as
    /// free), else as [`Usage::cost_text`].
    pub fn running_cost_text(&self) -> String {
        if *self == Usage::default() {
            "—".to_string()
        } else {
            self.cost_text()
        }
    }

    /// The cost of a task as people read it: [`Usage::running_cost_text`] until it ended.
    pub fn task_cost_text(&self, ended: bool) -> String {
        if ended {
            self.cost_text()
        } else {
            self.running_cost_text()
        }
    }

    /// The tokens: `1300 (in 1000, cached 800, written 100, out 300)`; the cache parts only
    /// when there are any.
    pub fn tokens_text(&self) -> String {
        let mut s = format!("{} (in {}", self.total(), self.input_tokens);
        if self.cached_input_tokens > 0 {
            s.push_str(&format!(", cached {}", self.cached_input_tokens));
        }
        if self.cache_write_tokens > 0 {
            s.push_str(&format!(", written {}", self.cache_write_tokens));
        }
        s.push_str(&format!(", out {})", self.output_tokens));
        s
    }

    /// Tokens and cost on one line: `1300 tokens (in 1000, cached 800, written 100, out 300)
    /// · $0.0021`.
    pub fn summary(&self) -> String {
        let tokens = self.tokens_text();
        let (total, parts) = tokens.split_once(' ').unwrap_or((&tokens, ""));
        format!("{total} tokens {parts} · {}", self.cost_text())
    }
}

/// Dollars as nano-dollars, the unit costs are summed in (negative and non-finite: 0).
pub fn usd_to_nanos(usd: f64) -> u64 {
    if usd.is_finite() && usd > 0.0 {
        (usd * NANOS_PER_USD).round() as u64
    } else {
        0
    }
}

/// Dollars with four decimals below $100 (costs of single tasks are often cents), two above.
pub fn format_usd(usd: f64) -> String {
    if usd < 100.0 {
        format!("${usd:.4}")
    } else {
        format!("${usd:.2}")
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, rhs: Self) {
        self.input_tokens += rhs.input_tokens;
        self.output_tokens += rhs.output_tokens;
        self.cached_input_tokens += rhs.cached_input_tokens;
        self.cache_write_tokens += rhs.cache_write_tokens;
        self.cost_nano_usd += rhs.cost_nano_usd;
        self.unpriced_calls += rhs.unpriced_calls;
    }
}

/// The serialized form of [`Usage`].
#[derive(Serialize, Deserialize)]
struct UsageRecord {
    input_tokens: u64,
    output_tokens: u64,
    #[serde(default)]
    cached_input_tokens: u64,
    #[serde(default)]
    cache_write_tokens: u64,
    #[serde(default)]
    cost_usd: Option<f64>,
}

impl From<UsageRecord> for Usage {
    fn from(r: UsageRecord) -> Self {
        Usage {
            input_tokens: r.input_tokens,
            output_tokens: r.output_tokens,
            cached_input_tokens: r.cached_input_tokens,
            cache_write_tokens: r.cache_write_tokens,
            ..Usage::default()
        }
        .priced(r.cost_usd)
    }
}

impl From<Usage> for UsageRecord {
    fn from(u: Usage) -> Self {
        UsageRecord {
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cached_input_tokens: u.cached_input_tokens,
            cache_write_tokens: u.cache_write_tokens,
            cost_usd: u.cost_usd(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(input: u64, cached: u64, written: u64, output: u64, usd: Option<f64>) -> Usage {
        Usage {
            input_tokens: input,
            output_tokens: output,
            cached_input_tokens: cached,
            cache_write_tokens: written,
            ..Usage::default()
        }
        .priced(usd)
    }

    #[test]
    fn a_running_cost_is_a_dash_until_a_call_is_counted_and_never_zero_when_unpriced() {
        assert_eq!(Usage::default().running_cost_text(), "—");
        assert_eq!(Usage::default().task_cost_text(true), "$0.0000");
        assert_eq!(
            call(10, 0, 0, 1, None).task_cost_text(false),
            "cost unknown"
        );
        assert_eq!(
            call(1000, 0, 0, 0, Some(0.5)).task_cost_text(false),
            "$0.5000"
        );
    }

    #[test]
    fn costs_add_up_exactly_and_one_unknown_price_makes_the_total_unknown() {
        let mut total = Usage::default();
        assert_eq!(total.cost_usd(), Some(0.0), "no calls cost nothing");
        for _ in 0..10 {
            total += call(1000, 800, 100, 50, Some(0.1));
        }
        assert_eq!(total.cost_nano_usd, 1_000_000_000);
        assert_eq!(total.cost_text(), "$1.0000");
        assert_eq!(total.uncached_input_tokens(), 1000);
        total += call(10, 0, 0, 1, None);
        assert_eq!(total.cost_usd(), None);
        assert_eq!(total.cost_text(), "cost unknown");
        assert!((total.priced_cost_usd() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn serialized_with_dollars_or_null() {
        let u = call(1200, 800, 100, 200, Some(0.0021));
        let json = serde_json::to_value(u).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"input_tokens": 1200, "output_tokens": 200,
                               "cached_input_tokens": 800, "cache_write_tokens": 100,
                               "cost_usd": 0.0021})
        );
        assert_eq!(serde_json::from_value::<Usage>(json).unwrap(), u);
        let unknown = call(1, 0, 0, 1, None);
        let json = serde_json::to_value(unknown).unwrap();
        assert_eq!(json["cost_usd"], serde_json::Value::Null);
        // Records written before costs existed read back as unknown, not as $0.
        let old: Usage =
            serde_json::from_str(r#"{"input_tokens": 5, "output_tokens": 2}"#).unwrap();
        assert_eq!(old.cost_usd(), None);
        assert_eq!(
            u.summary(),
            "1400 tokens (in 1200, cached 800, written 100, out 200) · $0.0021"
        );
        assert_eq!(unknown.summary(), "2 tokens (in 1, out 1) · cost unknown");
    }
}
