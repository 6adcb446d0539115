//! A provider that could not be built and fails every request with the
//! reason it could not be built (a missing API key, say). The task then
//! stops with that error's reason and writes its outputs, instead of the
//! whole run aborting before any output.

use futures_util::future::BoxFuture;

use super::{ChatRequest, ChatResponse, Provider, ProviderError};

/// Fails every request with the same error.
#[derive(Debug)]
pub struct Failing {
    name: String,
    error: ProviderError,
}

impl Failing {
    pub fn new(name: impl Into<String>, error: ProviderError) -> Self {
        Self {
            name: name.into(),
            error,
        }
    }
}

impl Provider for Failing {
    fn name(&self) -> &str {
        &self.name
    }

    fn complete<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { Err(self.error.clone()) })
    }
}
