//! `--record FILE`: wraps any provider and writes every request/response
//! pair to a cassette the `replay` provider can read. Requests carry no
//! credentials, so a cassette never holds an API key.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::cassette::CassetteWriter;
use super::{ChatRequest, ChatResponse, Provider, ProviderError};

/// A provider that records what the inner provider answers.
pub struct Recorder {
    inner: Box<dyn Provider>,
    writer: Arc<CassetteWriter>,
    task: String,
}

impl Recorder {
    pub fn new(
        inner: Box<dyn Provider>,
        writer: Arc<CassetteWriter>,
        task: impl Into<String>,
    ) -> Self {
        Self {
            inner,
            writer,
            task: task.into(),
        }
    }
}

impl Provider for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move {
            let result = self.inner.complete(request).await;
            if let Err(error) = self.writer.append(&self.task, request, &result) {
                return Err(ProviderError::Config(format!(
                    "cannot write cassette: {error}"
                )));
            }
            result
        })
    }
}
