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

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move {
            let result = self.inner.complete_streaming(request, on_text).await;
            if let Err(error) = self.writer.append(&self.task, request, &result) {
                return Err(ProviderError::Config(format!(
                    "cannot write cassette: {error}"
                )));
            }
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;
    use crate::llm::cassette::Cassette;
    use crate::llm::replay::Replay;
    use crate::llm::retry::{self, RetrySettings};
    use crate::llm::test_fixtures::{CANARY, config, env, first_request, second_request, sse_done};
    use crate::llm::test_server::{Reply, Server};
    use crate::llm::{ChatRequest, build};

    async fn drive(provider: &dyn Provider) -> (Vec<ChatResponse>, usize) {
        let settings = RetrySettings {
            attempts: 2,
            base_delay: Duration::from_millis(5),
            max_delay: Duration::from_secs(1),
            deadline: None,
        };
        let mut retries = 0;
        let mut on_retry = |_: &retry::RetryNotice| retries += 1;
        let first = retry::complete(provider, &first_request(), settings, &mut on_retry)
            .await
            .unwrap();
        let second: ChatRequest = second_request(&first.tool_calls);
        let second = retry::complete(provider, &second, settings, &mut on_retry)
            .await
            .unwrap();
        (vec![first, second], retries)
    }

    #[tokio::test]
    async fn a_recorded_run_replays_offline_without_the_key() {
        let server = Server::start(vec![
            Reply::json(500, &json!({"error": {"message": "boom"}})),
            Reply::sse(&sse_done(&[
                json!({"id": "r1", "choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1",
                    "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]}}]}),
                json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
                json!({"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}),
            ])),
            Reply::sse(&sse_done(&[
                json!({"id": "r2", "choices": [{"index": 0, "delta": {"content": "hello"}, "finish_reason": "stop"}]}),
            ])),
        ]);
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("run.cassette.json");
        let writer = CassetteWriter::create(&path, crate::core::Redactor::new()).unwrap();
        let inner = build(
            &config("openai", &format!("{}/v1", server.url)),
            &env(&[("OPENAI_API_KEY", CANARY)]),
        )
        .unwrap();
        let recorder = Recorder::new(inner, writer, "demo");
        assert_eq!(recorder.name(), "openai");
        let (live, live_retries) = drive(&recorder).await;
        assert_eq!(live_retries, 1);
        assert_eq!(
            live[0].tool_calls[0].arguments,
            json!({"path": "src/lib.rs"})
        );
        assert_eq!(live[1].content, "hello");

        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains(CANARY));
        assert!(text.contains("\"task\": \"demo\""));

        drop(server);
        let cassette = Cassette::open(&path).unwrap();
        let replay = Replay::new(cassette, "demo");
        let (replayed, replay_retries) = drive(&replay).await;
        assert_eq!(replayed, live);
        assert_eq!(replay_retries, live_retries);
    }
}
