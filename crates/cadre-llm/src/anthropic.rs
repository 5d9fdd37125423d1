//! Anthropic Messages provider.

use crate::{ModelRequest, ModelStream, Provider, ProviderConfig, ProviderError};

/// Placeholder replaced by the provider implementation.
pub struct AnthropicProvider {
    name: String,
}

impl AnthropicProvider {
    /// Build from a provider table.
    pub fn from_config(name: &str, _cfg: &ProviderConfig) -> Result<Self, ProviderError> {
        Ok(Self { name: name.into() })
    }
}

impl Provider for AnthropicProvider {
    fn name(&self) -> &str {
        &self.name
    }
    fn stream(&self, _request: ModelRequest) -> ModelStream {
        Box::pin(futures::stream::once(async {
            Err(ProviderError::Config("anthropic provider not built yet".into()))
        }))
    }
}
