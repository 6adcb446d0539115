//! The `replay` provider: answers from a cassette, in order, with no
//! network. The default provider, so demos and tests need no keys.

use std::sync::Arc;

use futures_util::future::BoxFuture;

use super::cassette::Cassette;
use super::{ChatRequest, ChatResponse, Provider, ProviderError};

/// Replays one task's share of a cassette.
#[derive(Debug)]
pub struct Replay {
    cassette: Arc<Cassette>,
    task: String,
}

impl Replay {
    pub fn new(cassette: Arc<Cassette>, task: impl Into<String>) -> Self {
        Self {
            cassette,
            task: task.into(),
        }
    }
}

impl Provider for Replay {
    fn name(&self) -> &str {
        "replay"
    }

    fn complete<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.cassette.next_for(&self.task)? })
    }
}
