//! Ollama's native protocol: `POST {endpoint}/api/chat`, streaming as
//! NDJSON (one JSON object a line, the last with `done: true`).
//!
//! Ollama sends tool calls whole, with their arguments as an object, and
//! without ids: ybs numbers them `call_<n>` across the conversation, so
//! the same conversation always gets the same ids.

use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::http;
use super::stream::{self, Framing, Scrub, Wire};
use super::turn::{self, CallIds, PartialCall};
use super::{ChatRequest, ChatResponse, FinishReason, ProviderError, Settings};
use crate::core::Usage;

/// Ollama's native wire protocol (a server is a `Streaming<Ollama>`).
#[derive(Debug)]
pub struct Ollama;

impl Wire for Ollama {
    type Turn = Assembly;
    const END: &'static str = "`\"done\": true`";
    const FRAMING: Framing = Framing::Lines;
    const PATH: &'static [&'static str] = &["api", "chat"];

    fn headers(_settings: &Settings) -> Result<HeaderMap, ProviderError> {
        Ok(HeaderMap::new())
    }

    fn body(request: &ChatRequest, settings: &Settings) -> Value {
        request_body(request, settings.model(request), settings.streaming)
    }

    /// A 404 that is not Ollama's "model not found": the server has no
    /// `/api/chat`, so it is not Ollama (llama.cpp, vLLM, LM Studio).
    fn hint(error: &ProviderError) -> Option<&'static str> {
        match error {
            ProviderError::Status {
                status: 404,
                message,
                ..
            } if !message.contains("model") => Some(NOT_OLLAMA),
            _ => None,
        }
    }
}

/// The hint for a server without Ollama's API.
pub const NOT_OLLAMA: &str = "this server has no Ollama API (`/api/chat`); for an \
     OpenAI-compatible server (llama.cpp, vLLM, LM Studio, Ollama's own `/v1`) use \
     `--provider openai` with the endpoint's `/v1` base URL, e.g. `--endpoint http://127.0.0.1:8080/v1`";

/// The request body: the system prompt as the first message, calls with
/// object arguments, results as `tool` messages naming their tool.
pub(crate) fn request_body(request: &ChatRequest, model: &str, streaming: bool) -> Value {
    let messages = turn::chat_messages(
        request,
        false,
        |call, id| {
            json!({
                "id": id,
                "function": {
                    "name": call.name,
                    "arguments": turn::wire_arguments(call),
                },
            })
        },
        |name, content, id| {
            json!({
                "role": "tool",
                "content": content,
                "tool_name": name,
                "tool_call_id": id,
            })
        },
    );
    // The model stays loaded, and its prompt cache warm, between a task's
    // steps and its checks (Ollama unloads it after five idle minutes by
    // default); the options stay the same on every request, since a
    // change of them reloads the model (docs/local-models.md).
    let mut body = json!({"model": model, "stream": streaming, "keep_alive": KEEP_ALIVE});
    if !request.tools.is_empty() {
        body["tools"] = super::openai::function_tools(&request.tools);
    }
    let mut options = Map::new();
    if let Some(temperature) = request.temperature {
        options.insert("temperature".into(), json!(temperature));
    }
    if let Some(max_tokens) = request.max_tokens {
        options.insert("num_predict".into(), json!(max_tokens));
    }
    if !options.is_empty() {
        body["options"] = Value::Object(options);
    }
    body["messages"] = Value::Array(messages);
    body
}

/// How long Ollama keeps the model loaded after a request.
pub const KEEP_ALIVE: &str = "30m";

/// A turn being assembled from stream lines (or one whole response).
#[derive(Debug, Default)]
pub(super) struct Assembly {
    content: String,
    calls: Vec<PartialCall>,
    done: bool,
    done_reason: Option<String>,
    usage: Usage,
}

impl Assembly {
    fn part(&mut self, value: &Value, scrub: Scrub) -> Result<(), ProviderError> {
        if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
            return Err(http::stream_error(error, scrub));
        }
        if let Some(message) = value.get("message") {
            if let Some(text) = message.get("content").and_then(Value::as_str) {
                self.content.push_str(text);
            }
            for call in message
                .get("tool_calls")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let function = call.get("function").unwrap_or(&Value::Null);
                let arguments = match function.get("arguments") {
                    Some(Value::String(text)) => text.clone(),
                    Some(Value::Null) | None => String::new(),
                    Some(other) => other.to_string(),
                };
                self.calls.push(PartialCall {
                    id: call
                        .get("id")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    name: function
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                    arguments,
                    unfinished: false,
                });
            }
        }
        if value.get("done").and_then(Value::as_bool) == Some(true) {
            self.done = true;
            self.done_reason = value
                .get("done_reason")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let count = |name: &str| value.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage::new(count("prompt_eval_count"), count("eval_count"));
        }
        Ok(())
    }
}

impl stream::Turn for Assembly {
    fn feed(
        &mut self,
        _event: Option<&str>,
        line: &str,
        scrub: Scrub,
    ) -> Result<bool, ProviderError> {
        self.part(&stream::parse(line, "line", scrub)?, scrub)?;
        Ok(self.done)
    }

    fn whole(&mut self, value: &Value, scrub: Scrub) -> Result<(), ProviderError> {
        self.part(value, scrub)?;
        self.done = true;
        Ok(())
    }

    fn complete(&self) -> bool {
        self.done
    }

    fn text_so_far(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.content)
    }

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let finish_reason = match self.done_reason.as_deref() {
            None | Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some(_) => FinishReason::Other,
        };
        let mut ids = CallIds::new("call_", request);
        let tool_calls =
            turn::finish_calls(self.calls, finish_reason == FinishReason::Length, &mut ids);
        turn::finish_turn(
            ChatResponse {
                content: self.content,
                tool_calls,
                usage: self.usage,
                response_id: None,
                finish_reason,
                request_id: None,
                usage_estimated: false,
            },
            request,
            text_tool_calls,
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::Message;
    use crate::llm::Provider;
    use crate::llm::build;
    use crate::llm::test_fixtures::{config, env, first_request, second_request};
    use crate::llm::test_server::{Reply, Server};

    fn provider(server: &Server, streaming: bool) -> Box<dyn Provider> {
        let mut config = config("ollama", &server.url);
        config.streaming = streaming;
        build(&config, &env(&[])).unwrap()
    }

    fn part(content: &str) -> Value {
        json!({"model": "test-model", "created_at": "2025-01-01T00:00:00Z",
               "message": {"role": "assistant", "content": content}, "done": false})
    }

    fn done(reason: &str, input: u64, output: u64) -> Value {
        json!({"model": "test-model", "message": {"role": "assistant", "content": ""},
               "done": true, "done_reason": reason, "prompt_eval_count": input, "eval_count": output})
    }

    fn calls_part() -> Value {
        json!({"model": "test-model", "done": false, "message": {"role": "assistant", "content": "",
        "tool_calls": [
            {"function": {"name": "read_file", "arguments": {"path": "a.txt"}}},
            {"function": {"name": "read_file", "arguments": {"path": "src/lib.rs"}}}
        ]}})
    }

    fn assert_requests(server: &Server, streaming: bool) {
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.path, "/api/chat");
            assert!(request.header("authorization").is_none());
            let body = request.json();
            assert_eq!(body["stream"], streaming);
            assert_eq!(body["model"], "test-model");
            assert_eq!(
                body["messages"][0],
                json!({"role": "system", "content": "You are ybs."})
            );
            assert_eq!(body["tools"][0]["function"]["name"], "read_file");
            assert_eq!(
                body["tools"][0]["function"]["parameters"]["required"],
                json!(["path"])
            );
            assert_eq!(
                body["options"],
                json!({"temperature": 0.0, "num_predict": 512})
            );
        }
        let second = requests[1].json();
        let messages = second["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 5);
        assert_eq!(
            messages[2]["tool_calls"][1]["function"],
            json!({"name": "read_file", "arguments": {"path": "src/lib.rs"}})
        );
        assert_eq!(
            messages[3],
            json!({"role": "tool", "content": "contents of \"a.txt\"", "tool_name": "read_file", "tool_call_id": "call_1"})
        );
        assert_eq!(messages[4]["tool_call_id"], "call_2");
    }

    #[tokio::test]
    async fn streaming_two_turns() {
        let server = Server::start(vec![
            Reply::ndjson(&[part(""), calls_part(), done("stop", 40, 20)]),
            Reply::ndjson(&[part("Both "), part("say hello."), done("stop", 90, 5)]),
        ]);
        let provider = provider(&server, true);
        assert_eq!(provider.name(), "ollama");
        let first = provider.complete(&first_request()).await.unwrap();
        let ids: Vec<&str> = first
            .tool_calls
            .iter()
            .map(|call| call.id.as_str())
            .collect();
        assert_eq!(ids, ["call_1", "call_2"]);
        assert_eq!(first.tool_calls[1].arguments, json!({"path": "src/lib.rs"}));
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        assert_eq!(first.usage, Usage::new(40, 20));
        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "Both say hello.");
        assert_eq!(second.usage, Usage::new(90, 5));
        assert_requests(&server, true);

        // Ids continue across the conversation and are the same each time.
        let mut third = second_request(&first.tool_calls);
        third.messages.push(Message::user("again"));
        let server = Server::start(vec![Reply::ndjson(&[calls_part(), done("stop", 1, 1)])]);
        let again = super::super::build(&config("ollama", &server.url), &env(&[]))
            .unwrap()
            .complete(&third)
            .await
            .unwrap();
        let ids: Vec<&str> = again
            .tool_calls
            .iter()
            .map(|call| call.id.as_str())
            .collect();
        assert_eq!(ids, ["call_3", "call_4"]);
    }

    #[tokio::test]
    async fn non_streaming_two_turns() {
        let mut first = calls_part();
        first["done"] = json!(true);
        first["done_reason"] = json!("stop");
        first["prompt_eval_count"] = json!(40);
        first["eval_count"] = json!(20);
        let mut second = done("stop", 90, 5);
        second["message"]["content"] = json!("Both say hello.");
        let server = Server::start(vec![Reply::json(200, &first), Reply::json(200, &second)]);
        let provider = provider(&server, false);
        let first = provider.complete(&first_request()).await.unwrap();
        assert_eq!(first.tool_calls.len(), 2);
        assert_eq!(first.usage, Usage::new(40, 20));
        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "Both say hello.");
        assert_requests(&server, false);
    }

    #[tokio::test]
    async fn stream_errors_and_early_ends() {
        let server = Server::start(vec![
            Reply::ndjson(&[
                part("Hel"),
                json!({"error": "model runner has unexpectedly stopped"}),
            ]),
            Reply::ndjson(&[part("Hel")]),
            Reply::json(404, &json!({"error": "model 'nope' not found"})),
        ]);
        let provider = provider(&server, true);
        let error = provider.complete(&first_request()).await.unwrap_err();
        assert!(matches!(error, ProviderError::Stream(_)), "{error:?}");
        assert!(
            error
                .to_string()
                .contains("model runner has unexpectedly stopped")
        );
        let error = provider.complete(&first_request()).await.unwrap_err();
        assert!(matches!(error, ProviderError::Stream(_)), "{error:?}");
        let error = provider.complete(&first_request()).await.unwrap_err();
        let message = error.to_string();
        assert!(message.starts_with("HTTP 404: model `"), "{message}");
        assert!(
            message.contains("not found at http://127.0.0.1:"),
            "{message}"
        );
        assert!(message.contains("(model 'nope' not found)"), "{message}");
        assert!(!error.is_retryable());
    }

    #[tokio::test]
    async fn string_arguments_and_length() {
        let server = Server::start(vec![Reply::ndjson(&[
            json!({"message": {"role": "assistant", "content": "", "tool_calls": [
                {"function": {"name": "read_file", "arguments": "{\"path\": \"a\",}"}},
                {"function": {"name": "read_file", "arguments": "{\"path\": \"b"}}
            ]}, "done": false}),
            done("length", 1, 1),
        ])]);
        let response = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap();
        assert_eq!(response.finish_reason, FinishReason::Length);
        assert_eq!(response.tool_calls[0].arguments, json!({"path": "a"}));
        assert!(response.tool_calls[1].invalid_arguments.is_some());
    }
}
