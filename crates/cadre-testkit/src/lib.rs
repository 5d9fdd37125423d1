//! Test helpers for cadre: [`MockServer`], a local HTTP server that speaks the OpenAI
//! Chat Completions and Anthropic Messages protocols from scripted replies, records the
//! requests it receives, and injects faults (error statuses with `Retry-After`, delays,
//! streams that are cut or stall, multi-byte characters split across writes);
//! [`WebServer`], a plain web server of fixed pages for the tools that reach the web; and
//! [`schema_problems`], what keeps a tool's argument schema from reaching providers as written;
//! and [`wait_until`] / [`eventually`], waiting on a condition with a deadline instead of a sleep.
//!
//! ```no_run
//! # async fn demo() -> std::io::Result<()> {
//! use cadre_testkit::{MockReply, MockServer, OpenAiStream};
//! let mock = MockServer::start().await?;
//! mock.push_openai(MockReply::openai_error(429, "slow down", None).retry_after(1));
//! mock.push_openai(OpenAiStream::new().text("hi").finish("stop").done().into_reply());
//! // point a client at mock.openai_base_url(), then inspect mock.requests()
//! # Ok(()) }
//! ```

mod anthropic;
mod churn;
mod openai;
pub mod optional;
mod reply;
mod schema;
mod server;
mod sse;
pub mod wait;
mod web;

pub use anthropic::{AnthropicJson, AnthropicStream};
pub use churn::hostile_connection;
pub use openai::{OpenAiJson, OpenAiStream};
pub use reply::{MockReply, split_bytes_inside};
pub use schema::schema_problems;
pub use server::{Api, MockServer, RecordedRequest, Responder};
pub use sse::{sse_data, sse_event};
pub use wait::{eventually, eventually_some, poll_for, poll_some, wait_for, wait_until};
pub use web::{WebPage, WebRequest, WebServer};
