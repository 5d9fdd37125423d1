//! The scripted provider: replays model turns from a TOML or JSON file. It is the offline
//! model for demos and tests, a real [`Provider`] behind the same trait as the HTTP ones.
//!
//! A script is a list of turn sequences, each optionally matched on the asking agent and
//! on the session's first user message. The turn to play is chosen statelessly: it is the
//! number of assistant messages already in the conversation, so concurrent sessions (a
//! parent and many children) each walk their own sequence, and a resumed session carries on
//! where it stopped. The format is documented in `docs/scripted-model.md`.

use crate::{ModelRequest, ModelStream, Provider, ProviderError, StreamEvent};
use cadre_types::{Message, ToolCall, Usage};
use futures::StreamExt;
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

/// One scripted tool call.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// Tool name.
    pub name: String,
    /// Arguments as a JSON/TOML value.
    #[serde(default)]
    pub args: Option<serde_json::Value>,
    /// Arguments as raw text, sent verbatim (to exercise malformed JSON).
    #[serde(default)]
    pub args_raw: Option<String>,
    /// Call id; generated when absent.
    #[serde(default)]
    pub id: Option<String>,
}

/// One scripted model reply.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedTurn {
    /// Visible text. `{{tool_results}}` expands to the tool results since the last
    /// assistant message, `{{user}}` to the latest user message.
    #[serde(default)]
    pub text: String,
    /// Thinking text.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Tool calls.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// Delay before the reply starts, in milliseconds.
    #[serde(default)]
    pub delay_ms: u64,
    /// Fail this call with this message instead of replying (after streaming `text`, if
    /// any: a reply that breaks off part-way).
    #[serde(default)]
    pub error: Option<String>,
    /// Reported usage; estimated from text length when absent.
    #[serde(default)]
    pub usage: Option<Usage>,
}

/// A sequence of turns and the requests it answers.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    /// Agent name to match (`main` is the top-level agent); any agent when absent.
    #[serde(default)]
    pub agent: Option<String>,
    /// Substring the session's first user message must contain; any when absent.
    #[serde(default)]
    pub prompt_contains: Option<String>,
    /// The turns, played in order.
    #[serde(default)]
    pub turns: Vec<ScriptedTurn>,
}

/// A whole script file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptFile {
    /// Turns for any request that no entry of `scripts` matches.
    #[serde(default)]
    pub turns: Vec<ScriptedTurn>,
    /// Matched scripts, tried in order.
    #[serde(default)]
    pub scripts: Vec<Script>,
}

/// Replays a [`ScriptFile`].
#[derive(Debug, Clone)]
pub struct ScriptedProvider {
    file: ScriptFile,
    source: String,
}

/// The largest script file read.
pub const MAX_SCRIPT_BYTES: u64 = 16 << 20;

/// The text of a script file: a regular file (a FIFO or device would block or never end)
/// of at most [`MAX_SCRIPT_BYTES`].
fn read_script(path: &Path) -> std::io::Result<String> {
    use std::io::{Error, ErrorKind, Read};
    if !std::fs::metadata(path)?.is_file() {
        return Err(Error::new(ErrorKind::InvalidInput, "not a regular file"));
    }
    let mut text = String::new();
    std::fs::File::open(path)?
        .take(MAX_SCRIPT_BYTES + 1)
        .read_to_string(&mut text)?;
    if text.len() as u64 > MAX_SCRIPT_BYTES {
        return Err(Error::new(
            ErrorKind::InvalidData,
            format!("larger than {MAX_SCRIPT_BYTES} bytes"),
        ));
    }
    Ok(text)
}

impl ScriptedProvider {
    /// A provider over an in-memory script.
    pub fn new(file: ScriptFile) -> Self {
        Self {
            file,
            source: "<inline>".into(),
        }
    }

    /// Read a script from a `.toml` or `.json` file (a regular file of at most
    /// [`MAX_SCRIPT_BYTES`]).
    pub fn from_file(path: &Path) -> Result<Self, ProviderError> {
        let text = read_script(path).map_err(|e| {
            ProviderError::Script(format!("cannot read script {}: {e}", path.display()))
        })?;
        let is_json = path.extension().is_some_and(|e| e == "json");
        let file = if is_json {
            serde_json::from_str(&text)
                .map_err(|e| ProviderError::Script(format!("{}: {e}", path.display())))?
        } else {
            toml::from_str(&text)
                .map_err(|e| ProviderError::Script(format!("{}: {e}", path.display())))?
        };
        Ok(Self {
            file,
            source: path.display().to_string(),
        })
    }

    fn select(&self, request: &ModelRequest) -> Option<&[ScriptedTurn]> {
        let first_user = request.messages.iter().find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        });
        self.file
            .scripts
            .iter()
            .find(|s| {
                s.agent
                    .as_deref()
                    .is_none_or(|a| a == request.metadata.agent)
                    && s.prompt_contains
                        .as_deref()
                        .is_none_or(|p| first_user.is_some_and(|u| u.contains(p)))
            })
            .map(|s| s.turns.as_slice())
            .or(if self.file.turns.is_empty() {
                None
            } else {
                Some(self.file.turns.as_slice())
            })
    }

    fn reply(&self, request: &ModelRequest) -> Result<(ScriptedTurn, u64), ProviderError> {
        let turns = self.select(request).ok_or_else(|| {
            ProviderError::Script(format!(
                "{}: no script matches agent {:?}",
                self.source, request.metadata.agent
            ))
        })?;
        let index = request
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Assistant { .. }))
            .count();
        let turn = turns.get(index).cloned().ok_or_else(|| {
            ProviderError::Script(format!(
                "{}: script for agent {:?} has {} turns; turn {} was requested",
                self.source,
                request.metadata.agent,
                turns.len(),
                index + 1
            ))
        })?;
        Ok((turn, index as u64))
    }
}

fn expand(text: &str, request: &ModelRequest) -> String {
    if !text.contains("{{") {
        return text.to_string();
    }
    let last_assistant = request
        .messages
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }));
    let results: Vec<&str> = request
        .messages
        .iter()
        .skip(last_assistant.map_or(0, |i| i + 1))
        .filter_map(|m| match m {
            Message::Tool { content, .. } => Some(content.as_str()),
            _ => None,
        })
        .collect();
    let user = request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(content.as_str()),
            _ => None,
        })
        .unwrap_or("");
    text.replace("{{tool_results}}", &results.join("\n"))
        .replace("{{user}}", user)
}

/// Split text into small pieces on char boundaries, as a streaming model would send it.
fn chunks(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for ch in text.chars() {
        cur.push(ch);
        if cur.len() >= 24 && (ch == ' ' || ch == '\n') {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn estimate_tokens(chars: usize) -> u64 {
    (chars as u64).div_ceil(4)
}

impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "scripted"
    }

    fn stream(&self, request: ModelRequest) -> ModelStream {
        let prepared = self.reply(&request).map(|(turn, index)| {
            let text = expand(&turn.text, &request);
            let input_chars = request.system.len()
                + request
                    .messages
                    .iter()
                    .map(|m| m.text().len())
                    .sum::<usize>();
            (turn, index, text, input_chars)
        });
        let fut = async move {
            let (turn, index, text, input_chars) = match prepared {
                Ok(p) => p,
                Err(e) => return vec![Err(e)],
            };
            if turn.delay_ms > 0 {
                tokio::time::sleep(Duration::from_millis(turn.delay_ms)).await;
            }
            if let Some(err) = turn.error {
                return chunks(&text)
                    .into_iter()
                    .map(|c| Ok(StreamEvent::TextDelta(c)))
                    .chain([Err(ProviderError::Script(err))])
                    .collect();
            }
            let mut events = Vec::new();
            let mut out_chars = text.len();
            if let Some(th) = &turn.thinking {
                out_chars += th.len();
                events.push(Ok(StreamEvent::ThinkingDelta(th.clone())));
            }
            events.extend(
                chunks(&text)
                    .into_iter()
                    .map(|c| Ok(StreamEvent::TextDelta(c))),
            );
            for (i, call) in turn.tool_calls.into_iter().enumerate() {
                let arguments = match (call.args_raw, call.args) {
                    (Some(raw), _) => raw,
                    (None, Some(v)) => v.to_string(),
                    (None, None) => "{}".to_string(),
                };
                out_chars += arguments.len();
                events.push(Ok(StreamEvent::ToolCall(ToolCall {
                    id: call
                        .id
                        .unwrap_or_else(|| format!("call_{}_{index}_{i}", short_id())),
                    name: call.name,
                    arguments,
                })));
            }
            let usage = turn.usage.unwrap_or(Usage {
                input_tokens: estimate_tokens(input_chars),
                output_tokens: estimate_tokens(out_chars),
                ..Usage::default()
            });
            events.push(Ok(StreamEvent::Usage(usage)));
            events.push(Ok(StreamEvent::Done {
                stop_reason: Some("stop".into()),
            }));
            events
        };
        futures::stream::once(fut)
            .flat_map(futures::stream::iter)
            .boxed()
    }
}

fn short_id() -> String {
    format!("{:08x}", fastrand::u32(..))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RequestMetadata, collect};

    #[test]
    fn a_script_that_is_not_a_small_regular_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let err = |p: &Path| match ScriptedProvider::from_file(p) {
            Err(ProviderError::Script(e)) => e,
            other => panic!("{:?}", other.map(|_| ())),
        };
        assert!(err(dir.path()).contains("not a regular file"));
        let big = dir.path().join("big.toml");
        let f = std::fs::File::create(&big).unwrap();
        f.set_len(MAX_SCRIPT_BYTES + 1).unwrap();
        assert!(err(&big).contains("larger than"), "{}", err(&big));
        let ok = dir.path().join("ok.toml");
        std::fs::write(&ok, "[[turns]]\ntext = \"hi\"\n").unwrap();
        assert!(ScriptedProvider::from_file(&ok).is_ok());
    }

    fn script() -> ScriptedProvider {
        let file: ScriptFile = toml::from_str(
            r#"
            [[scripts]]
            agent = "main"
            [[scripts.turns]]
            text = "looking"
            [[scripts.turns.tool_calls]]
            name = "read_file"
            args = { path = "a.txt" }
            [[scripts.turns]]
            text = "saw: {{tool_results}}"

            [[scripts]]
            agent = "helper"
            prompt_contains = "special"
            [[scripts.turns]]
            text = "special answer"

            [[turns]]
            text = "fallback"
            "#,
        )
        .unwrap();
        ScriptedProvider::new(file)
    }

    fn req(agent: &str, messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            messages,
            metadata: RequestMetadata {
                agent: agent.into(),
                session_id: "s".into(),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[tokio::test]
    async fn turn_is_chosen_by_assistant_count_and_agent() {
        let p = script();
        let r1 = collect(p.stream(req("main", vec![Message::user("go")])))
            .await
            .unwrap();
        assert_eq!(r1.text, "looking");
        assert_eq!(r1.tool_calls[0].name, "read_file");
        assert_eq!(r1.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
        let history = vec![
            Message::user("go"),
            Message::Assistant {
                content: "looking".into(),
                thinking: None,
                thinking_signature: None,
                tool_calls: r1.tool_calls.clone(),
            },
            Message::Tool {
                tool_call_id: r1.tool_calls[0].id.clone(),
                name: "read_file".into(),
                content: "hello".into(),
                is_error: false,
                images: Vec::new(),
            },
        ];
        let r2 = collect(p.stream(req("main", history))).await.unwrap();
        assert_eq!(r2.text, "saw: hello");
        assert!(r2.usage.input_tokens > 0);

        let r3 = collect(p.stream(req("helper", vec![Message::user("a special job")])))
            .await
            .unwrap();
        assert_eq!(r3.text, "special answer");
        let r4 = collect(p.stream(req("helper", vec![Message::user("plain")])))
            .await
            .unwrap();
        assert_eq!(r4.text, "fallback");
    }

    #[tokio::test]
    async fn exhausted_script_is_an_error_naming_the_turn() {
        let p = script();
        let history = vec![Message::user("x"), Message::assistant("fallback")];
        let err = collect(p.stream(req("other", history))).await.unwrap_err();
        assert!(err.to_string().contains("turn 2"), "{err}");
    }

    #[test]
    fn chunks_keep_unicode_whole() {
        let t = "héllo wörld — ünïcödé text that is long enough to split into pieces";
        assert_eq!(chunks(t).concat(), t);
        assert!(chunks(t).len() > 1);
    }
}
