//! What the engine records on its telemetry spans (named in `cadre_tools::otel`): how a
//! run ended, and token counts in the spans' terms.

use crate::agent::RunOutcome;
use cadre_types::EndState;

/// The end of a run on its agent span.
pub(crate) fn record_end(span: &tracing::Span, outcome: &RunOutcome) {
    let (end_state, error) = match &outcome.state {
        EndState::Completed => ("completed", None),
        EndState::Failed { .. } => ("failed", Some("failed")),
        EndState::Cancelled => ("cancelled", Some("cancelled")),
        EndState::LimitReached { .. } => ("limit_reached", Some("limit_reached")),
    };
    let u = &outcome.usage;
    cadre_tools::otel::record_agent_end(
        span,
        &cadre_tools::otel::AgentEnd {
            end_state,
            complete: matches!(outcome.state, EndState::Completed),
            error,
            turns: outcome.turns,
            tokens: tokens_of(u),
            cost_usd: (u.unpriced_calls == 0).then(|| u.cost_nano_usd as f64 / 1e9),
        },
    );
}

/// A usage's token counts as the telemetry spans carry them.
pub(crate) fn tokens_of(u: &cadre_types::Usage) -> cadre_tools::otel::Tokens {
    cadre_tools::otel::Tokens {
        input: u.input_tokens,
        output: u.output_tokens,
        cache_read: u.cached_input_tokens,
        cache_creation: u.cache_write_tokens,
    }
}
