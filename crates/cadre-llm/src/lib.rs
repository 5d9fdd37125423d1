//! Model providers for cadre. One stream-first trait, [`Provider`], with the
//! OpenAI-compatible, Anthropic and scripted implementations behind it, a retry
//! policy, and [`ProviderRegistry`], which builds each provider once per process and
//! routes `provider:model` names to it (with the model's price, see [`pricing`]).

mod cache;
mod context_window;
mod error;
mod gate;
// Also built with the unit tests, so that `cargo clippy --all-targets` keeps it compiling.
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzzing;
mod http;
mod json;
pub mod pricing;
mod provider;
pub mod redirects;
mod registry;
pub mod retry;
pub mod schema;
pub mod scripted;

pub mod anthropic;
pub mod openai;

pub use cache::{CacheMode, CacheTtl};
pub use context_window::ContextWindows;
pub use error::ProviderError;
pub use gate::{RetryAsk, RetryAsks, RetryGate};
pub use pricing::{ModelPrice, PriceError, PriceTable};
pub use provider::{
    DEFAULT_MAX_REPLY_BYTES, ModelRequest, ModelResponse, ModelStream, Provider, RequestMetadata,
    StreamEvent, collect,
};
pub use registry::{
    BUILTIN_PROVIDERS, NotReady, ProviderConfig, ProviderKind, ProviderRegistry, ResolvedModel,
};
pub use retry::RetryPolicy;
pub use schema::normalize_tool_schema;
