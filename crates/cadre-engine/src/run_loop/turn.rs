//! The phases of a turn up to its reply: the checks before it, the extensions' messages and
//! automatic compaction, the model call, and keeping the reply.

use super::setup::RunLoop;
use super::{LoopState, Step, inject, persist_failed, recorded};
use crate::compaction::CompactionError;
use crate::session::Session;
use crate::stream::{FailedReply, Gate, Reply, call_model, charge_call};
use cadre_llm::ModelRequest;
use cadre_types::{EndState, Event, LimitKind, Message, ToolCall};

impl RunLoop<'_> {
    /// Whether another turn may begin: the run is not stopped, no hook halted it, and it
    /// has turns left.
    pub(super) fn before_turn(&self, state: &LoopState) -> Step {
        if let Some(end) = self.stop.state(&self.cancel) {
            return Err(end);
        }
        if let Some(end) = crate::hook_points::halted(self.cfg, &self.run, &self.emitter) {
            return Err(end);
        }
        if state.turns >= self.cfg.limits.max_turns {
            return Err(EndState::LimitReached {
                limit: LimitKind::MaxTurns,
            });
        }
        Ok(())
    }

    /// Append the extensions' messages, then compact the conversation when it is over the
    /// limit (and append again what the summary took). Returns which extensions gave
    /// messages, to be told once they are recorded.
    pub(super) async fn inject_and_compact(
        &self,
        session: &mut Session,
        state: &mut LoopState,
    ) -> Step<Vec<usize>> {
        let mut gave = inject(self.cfg, &self.run, session)
            .await
            .map_err(persist_failed)?;
        let Some(limit) = self.context_limit else {
            return Ok(gave);
        };
        let estimate = state.meter.estimate(self.fixed_bytes, session.messages());
        if estimate > limit && state.retry_above.is_none_or(|above| estimate > above) {
            match self
                .compaction()
                .run(session, &self.stop, self.observer)
                .await
            {
                Ok(_) => {
                    state.retry_above = None;
                    state.meter.reset();
                    // Live state whose last copy was summarised is appended again.
                    let more = inject(self.cfg, &self.run, session)
                        .await
                        .map_err(persist_failed)?;
                    gave.extend(more);
                }
                Err(CompactionError::Cancelled | CompactionError::LimitReached(_)) => {
                    return Err(self.stopped());
                }
                Err(CompactionError::Session(e)) => return Err(persist_failed(e)),
                Err(e) => {
                    // Each attempt is a paid summary call: the next one waits until the
                    // conversation has grown by a quarter of the limit.
                    let above = estimate + limit / 4;
                    state.retry_above = Some(above);
                    self.emitter.emit(Event::Notice {
                        message: format!(
                            "the conversation (about {estimate} tokens) was not compacted: \
                             {e}; it goes on uncompacted, and compaction is tried again \
                             above {above} tokens"
                        ),
                    });
                }
            }
        }
        Ok(gave)
    }

    /// The turn's model call, at a turn boundary: the reply and the turn's span, or `None`
    /// when the provider found the request too long and the conversation was compacted
    /// for the same turn to be tried again.
    pub(super) async fn call(
        &self,
        session: &mut Session,
        state: &mut LoopState,
        mut gave: Vec<usize>,
    ) -> Step<Option<(Reply, tracing::Span)>> {
        let cfg = self.cfg;
        // The request about to be sent is the conversation as it stands now: a turn
        // boundary, where the transcript is written.
        session.flush().map_err(persist_failed)?;
        self.boundary(session).await;
        recorded(cfg, &self.run, &mut gave).await;
        let gate = Gate {
            observer: self.observer,
            run: &self.run,
        };
        if !gate.may_call(&self.stop).await {
            return Err(self.stopped());
        }
        state.turns += 1;
        self.emitter.emit(Event::TurnStarted { turn: state.turns });
        let request = ModelRequest {
            model: cfg.model.model.clone(),
            system: self.system.clone(),
            messages: session.messages().to_vec(),
            tools: self.tools.clone(),
            max_output_tokens: cfg.max_output_tokens,
            max_reply_bytes: Some(cfg.max_reply_bytes),
            temperature: cfg.temperature,
            metadata: self.metadata.clone(),
            // Set by the call (it answers the provider's questions between attempts).
            retry_gate: cadre_llm::RetryGate::default(),
        };
        // run > turn > model_call / tool_call: the turn span is the explicit parent of both.
        let turn_span = tracing::info_span!("turn", turn = state.turns);
        let model_span = {
            let _in_turn = turn_span.enter();
            cadre_tools::otel::chat(&cfg.model.spec, cfg.model.provider.server_address())
        };
        match call_model(cfg, request, &self.emitter, &self.stop, gate, model_span).await {
            None => Err(self.stopped()),
            Some(Ok(reply)) => Ok(Some((reply, turn_span))),
            Some(Err(failed)) => self
                .failed_reply(session, state, failed)
                .await
                .map(|()| None),
        }
    }

    /// A model call that failed: the run ends, unless the provider found the request too
    /// long for the first time this turn and compaction is automatic (`Ok`: the
    /// conversation is compacted, the same turn is tried again).
    async fn failed_reply(
        &self,
        session: &mut Session,
        state: &mut LoopState,
        failed: FailedReply,
    ) -> Step {
        match failed {
            FailedReply {
                error: error @ cadre_llm::ProviderError::ContextTooLong { .. },
                ..
            } if self.automatic && !state.overflow_retried => {
                // The provider counts differently than the estimate: compact once and
                // retry the same turn.
                state.overflow_retried = true;
                match self
                    .compaction()
                    .run(session, &self.stop, self.observer)
                    .await
                {
                    Ok(_) => {
                        state.meter.reset();
                        state.turns -= 1;
                        Ok(())
                    }
                    Err(CompactionError::Cancelled | CompactionError::LimitReached(_)) => {
                        Err(self.stopped())
                    }
                    Err(e) => Err(EndState::Failed {
                        error: format!("{error}; compacting the conversation failed: {e}"),
                    }),
                }
            }
            FailedReply {
                error: cadre_llm::ProviderError::ReplyTooLong { .. },
                partial_text,
            } => {
                state.text.add(&partial_text);
                Err(EndState::LimitReached {
                    limit: LimitKind::ReplyTooLong,
                })
            }
            failed => {
                state.text.add(&failed.partial_text);
                Err(EndState::Failed {
                    error: failed.error.to_string(),
                })
            }
        }
    }

    /// Charge the reply and keep it in the conversation, on disk and at a turn boundary.
    /// Returns its tool calls (ids made unique in the conversation).
    pub(super) async fn keep_reply(
        &self,
        session: &mut Session,
        state: &mut LoopState,
        reply: Reply,
    ) -> Step<Vec<ToolCall>> {
        charge_call(
            &self.cfg.model,
            &self.stop.budget,
            &self.emitter,
            reply.usage,
        );
        state.text.add(&reply.text);
        let mut calls = reply.calls;
        crate::call_ids::make_unique(&mut calls, session.messages());
        let assistant = Message::Assistant {
            content: reply.text,
            thinking: (!reply.thinking.is_empty()).then_some(reply.thinking),
            thinking_signature: reply.signature,
            tool_calls: calls.clone(),
        };
        // The reply is on disk before anything follows it: before its calls start (a
        // resumed run then knows what it asked for) and before a finished run waits for
        // background work (its answer survives a crash meanwhile).
        session
            .push(assistant)
            .and_then(|()| session.flush())
            .map_err(persist_failed)?;
        // A copy kept elsewhere holds the reply before anything follows it too: its calls
        // start, the run ends or the next request goes out only once it is kept, so a run
        // continued from that copy never asks for this turn again.
        self.boundary(session).await;
        state.meter.record(&reply.usage, session.messages().len());
        state.overflow_retried = false;
        Ok(calls)
    }
}
