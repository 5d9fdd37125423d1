//! OpenAI-compatible Chat Completions provider.

use crate::{ModelRequest, ModelStream, Provider, ProviderConfig, ProviderError};

/// Placeholder replaced by the provider implementation.
pub struct OpenAiProvider {
    name: String,
}

impl OpenAiProvider {
    /// Build from a provider table.
    pub fn from_config(name: &str, _cfg: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self { name: name.into() })
    }
}

impl Provider for OpenAiProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn stream(&self, _request: ModelRequest) -> ModelStream {
        Box::pin(futures::stream::once(async {
            Err(ProviderError::Config("openai provider not built yet".into()))
        }))
    }
}
