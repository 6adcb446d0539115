//! The OpenAI Chat Completions protocol, spoken by OpenAI and by most
//! local servers (Ollama's `/v1`, vLLM, llama.cpp, LM Studio):
//! `POST {endpoint}/chat/completions`, streaming as SSE.

use std::collections::BTreeMap;

use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use super::http;
use super::stream::{self, Framing, Scrub, Wire};
use super::turn::{self, CallIds, PartialCall};
use super::{ChatRequest, ChatResponse, FinishReason, ProviderError, Settings};
use crate::core::Usage;

/// The OpenAI Chat Completions wire protocol (an OpenAI-compatible
/// endpoint is a `Streaming<OpenAi>`).
#[derive(Debug)]
pub struct OpenAi;

impl Wire for OpenAi {
    type Turn = Assembly;
    const END: &'static str = "`data: [DONE]`";
    const FRAMING: Framing = Framing::Sse;
    const PATH: &'static [&'static str] = &["chat", "completions"];

    fn headers(settings: &Settings) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &settings.key {
            headers.insert(
                AUTHORIZATION,
                key.header_value("Bearer ", super::OPENAI_API_KEY)?,
            );
        }
        Ok(headers)
    }

    fn body(request: &ChatRequest, settings: &Settings) -> Value {
        let mut body = request_body(
            request,
            settings.model(request),
            settings.streaming,
            settings.vendor,
        );
        // The task's cache key: OpenAI's own endpoint routes the requests
        // that share it (and their prefix) to the same cache; another
        // server gets it only when the config says so.
        let cache = &settings.prompt_cache;
        if let Some(key) = cache
            .key
            .as_ref()
            .filter(|_| settings.vendor || cache.key_anywhere)
        {
            let messages = body
                .as_object_mut()
                .and_then(|body| body.shift_remove("messages"));
            body["prompt_cache_key"] = json!(key);
            if let Some(messages) = messages {
                body["messages"] = messages;
            }
        }
        body
    }
}

/// The request body. The system prompt is the first message; assistant
/// calls carry their arguments as a JSON string; each tool result is a
/// `tool` message tied to its call by `tool_call_id`. OpenAI's own endpoint
/// takes `max_completion_tokens`, compatible servers `max_tokens`.
pub(crate) fn request_body(
    request: &ChatRequest,
    model: &str,
    streaming: bool,
    vendor: bool,
) -> Value {
    let messages = turn::chat_messages(
        request,
        true,
        |call, id| {
            json!({
                "id": id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": turn::wire_arguments(call).to_string(),
                },
            })
        },
        |_, content, id| json!({"role": "tool", "tool_call_id": id, "content": content}),
    );
    // What stays put for the whole task first (settings, tools, then the
    // system prompt, the first message), so every request of a task
    // begins with the same bytes (docs/providers.md, "Prompt caching").
    let mut body = json!({"model": model});
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if let Some(max_tokens) = request.max_tokens {
        let field = if vendor {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body[field] = json!(max_tokens);
    }
    if streaming {
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
    }
    if !request.tools.is_empty() {
        body["tools"] = function_tools(&request.tools);
    }
    body["messages"] = Value::Array(messages);
    body
}

/// A turn being assembled from chunks (or from one whole message).
#[derive(Debug, Default)]
pub(super) struct Assembly {
    id: Option<String>,
    content: String,
    refusal: String,
    /// By the server's `index`.
    calls: BTreeMap<u64, PartialCall>,
    /// The index the last delta without an `index` went to.
    last_index: Option<u64>,
    finish: Option<String>,
    usage: Usage,
    done: bool,
}

impl Assembly {
    /// One streamed chunk: `choices[0].delta`, `finish_reason`, `usage`,
    /// or an `error` object.
    fn chunk(
        &mut self,
        chunk: &Value,
        scrub: &dyn Fn(&str) -> String,
    ) -> Result<(), ProviderError> {
        if let Some(error) = chunk.get("error").filter(|error| !error.is_null()) {
            return Err(http::stream_error(error, scrub));
        }
        self.common(chunk);
        if let Some(choice) = first_choice(chunk) {
            if let Some(delta) = choice.get("delta") {
                self.text(delta);
                if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                    for call in calls {
                        self.call_delta(call, None);
                    }
                }
            }
            self.finish_reason(choice);
        }
        Ok(())
    }

    fn common(&mut self, value: &Value) {
        if self.id.is_none() {
            self.id = value.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(usage) = value.get("usage").filter(|usage| usage.is_object()) {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage::new(count("prompt_tokens"), count("completion_tokens"));
            // Of the prompt's tokens, those served from OpenAI's cache.
            self.usage.cache_read_input_tokens = usage
                .get("prompt_tokens_details")
                .and_then(|details| details.get("cached_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(0)
                .min(self.usage.input_tokens);
        }
    }

    fn text(&mut self, delta: &Value) {
        if let Some(text) = delta.get("content").and_then(Value::as_str) {
            self.content.push_str(text);
        }
        if let Some(text) = delta.get("refusal").and_then(Value::as_str) {
            self.refusal.push_str(text);
        }
    }

    fn finish_reason(&mut self, choice: &Value) {
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish = Some(reason.to_owned());
        }
    }

    /// One tool-call delta, keyed by its `index`. A server that sends no
    /// index (some compatible ones) gets one: a new id opens a new call,
    /// a delta with neither continues the last one.
    fn call_delta(&mut self, delta: &Value, position: Option<u64>) {
        let id = delta
            .get("id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty());
        let index = delta
            .get("index")
            .and_then(Value::as_u64)
            .or(position)
            .or_else(|| {
                id.and_then(|id| {
                    self.calls
                        .iter()
                        .find(|(_, call)| call.id == id)
                        .map(|(index, _)| *index)
                })
            })
            .or_else(|| if id.is_some() { None } else { self.last_index })
            .unwrap_or_else(|| self.calls.keys().next_back().map_or(0, |last| last + 1));
        self.last_index = Some(index);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = id {
            id.clone_into(&mut call.id);
        }
        if let Some(function) = delta.get("function") {
            if let Some(name) = function.get("name").and_then(Value::as_str) {
                call.push_name(name);
            }
            match function.get("arguments") {
                Some(Value::String(fragment)) => call.arguments.push_str(fragment),
                // Some servers send the arguments as an object.
                Some(object @ Value::Object(_)) => call.arguments.push_str(&object.to_string()),
                _ => {}
            }
        }
    }
}

impl stream::Turn for Assembly {
    fn feed(
        &mut self,
        _event: Option<&str>,
        data: &str,
        scrub: Scrub,
    ) -> Result<bool, ProviderError> {
        let data = data.trim();
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            self.done = true;
            return Ok(true);
        }
        self.chunk(&stream::parse(data, "chunk", scrub)?, scrub)?;
        Ok(false)
    }

    /// A whole non-streaming response.
    fn whole(&mut self, body: &Value, scrub: Scrub) -> Result<(), ProviderError> {
        if let Some(error) = body.get("error").filter(|error| !error.is_null()) {
            return Err(http::stream_error(error, scrub));
        }
        let choice = first_choice(body).ok_or_else(|| {
            ProviderError::Protocol(format!("response has no `choices`: {}", short(body)))
        })?;
        self.common(body);
        if let Some(message) = choice.get("message") {
            self.text(message);
            if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
                for (position, call) in (0_u64..).zip(calls) {
                    self.call_delta(call, Some(position));
                }
            }
        }
        self.finish_reason(choice);
        self.done = true;
        Ok(())
    }

    /// `[DONE]` ends a stream; a server that omits it but sent a finish
    /// reason has sent every delta of the turn.
    fn complete(&self) -> bool {
        self.done || self.finish.is_some()
    }

    fn text_so_far(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(&self.content)
    }

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let finish_reason = match self.finish.as_deref() {
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some("length") => FinishReason::Length,
            Some("content_filter") => FinishReason::ContentFilter,
            Some(_) => FinishReason::Other,
        };
        // A message with `refusal` text is a refusal, whatever the finish
        // reason says (`stop`, usually).
        let finish_reason = if self.refusal.trim().is_empty() {
            finish_reason
        } else {
            FinishReason::Refusal
        };
        let mut ids = CallIds::new("call_", request);
        let tool_calls = turn::finish_calls(
            self.calls.into_values().collect(),
            finish_reason == FinishReason::Length,
            &mut ids,
        );
        let content = if self.content.is_empty() {
            self.refusal
        } else {
            self.content
        };
        turn::finish_turn(
            ChatResponse {
                content,
                tool_calls,
                usage: self.usage,
                response_id: self.id,
                finish_reason,
                request_id: None,
                usage_estimated: false,
            },
            request,
            text_tool_calls,
        )
    }
}

fn first_choice(value: &Value) -> Option<&Value> {
    value
        .get("choices")?
        .as_array()?
        .iter()
        .find(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}

/// Tools in the OpenAI function format, which Ollama's native API takes too.
pub(super) fn function_tools(tools: &[crate::core::ToolSpec]) -> Value {
    tools
        .iter()
        .map(|tool| {
            json!({
                "type": "function",
                "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                },
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::llm::Provider;
    use crate::llm::build;
    use crate::llm::test_fixtures::{CANARY, config, env, first_request, second_request, sse_done};
    use crate::llm::test_server::{Reply, Server};

    fn chunk(delta: Value, finish: Option<&str>) -> Value {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    }

    fn call_delta(index: u64, id: Option<&str>, name: Option<&str>, arguments: &str) -> Value {
        let mut function = json!({"arguments": arguments});
        if let Some(name) = name {
            function["name"] = json!(name);
        }
        let mut call = json!({"index": index, "function": function});
        if let Some(id) = id {
            call["id"] = json!(id);
            call["type"] = json!("function");
        }
        json!({"tool_calls": [call]})
    }

    fn usage(input: u64, output: u64) -> Value {
        json!({"id": "chatcmpl-1", "choices": [],
               "usage": {"prompt_tokens": input, "completion_tokens": output, "total_tokens": input + output}})
    }

    /// Turn 1 of the two-turn task: one call to read_file, its arguments
    /// split in pieces of `piece` characters.
    fn tool_call_stream(piece: usize) -> String {
        let arguments = r#"{"path": "src/lib.rs"}"#;
        let mut chunks = vec![
            chunk(json!({"role": "assistant", "content": null}), None),
            chunk(call_delta(0, Some("call_abc"), Some("read_file"), ""), None),
        ];
        let characters: Vec<char> = arguments.chars().collect();
        for part in characters.chunks(piece) {
            let part: String = part.iter().collect();
            chunks.push(chunk(call_delta(0, None, None, &part), None));
        }
        chunks.push(chunk(json!({}), Some("tool_calls")));
        chunks.push(usage(50, 12));
        sse_done(&chunks)
    }

    fn answer_stream() -> String {
        sse_done(&[
            chunk(json!({"role": "assistant", "content": "It says "}), None),
            chunk(json!({"content": "hello."}), None),
            chunk(json!({}), Some("stop")),
            usage(80, 4),
        ])
    }

    fn provider(server: &Server, streaming: bool) -> Box<dyn Provider> {
        let mut config = config("openai", &format!("{}/v1", server.url));
        config.streaming = streaming;
        build(&config, &env(&[("OPENAI_API_KEY", CANARY)])).unwrap()
    }

    /// What every first request must carry.
    fn assert_first_request(body: &Value) {
        assert_eq!(body["model"], "test-model");
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "You are ybs."})
        );
        assert_eq!(
            body["messages"][1],
            json!({"role": "user", "content": "What does src/lib.rs say?"})
        );
        assert_eq!(body["tools"][0]["type"], "function");
        assert_eq!(body["tools"][0]["function"]["name"], "read_file");
        assert_eq!(
            body["tools"][0]["function"]["parameters"]["required"],
            json!(["path"])
        );
        assert_eq!(body["temperature"], json!(0.0));
        assert_eq!(body["max_tokens"], 512);
    }

    fn assert_second_request(body: &Value) {
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 4);
        assert_eq!(messages[2]["role"], "assistant");
        assert_eq!(messages[2]["content"], Value::Null);
        let call = &messages[2]["tool_calls"][0];
        assert_eq!(call["id"], "call_abc");
        assert_eq!(call["type"], "function");
        assert_eq!(call["function"]["name"], "read_file");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments, json!({"path": "src/lib.rs"}));
        assert_eq!(
            messages[3],
            json!({"role": "tool", "tool_call_id": "call_abc", "content": "contents of \"src/lib.rs\""})
        );
    }

    #[tokio::test]
    async fn streaming_two_turns() {
        let server = Server::start(vec![
            Reply::sse(&tool_call_stream(5)),
            Reply::sse(&answer_stream()),
        ]);
        let provider = provider(&server, true);
        assert_eq!(provider.name(), "openai");

        let first = provider.complete(&first_request()).await.unwrap();
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        assert_eq!(first.content, "");
        assert_eq!(first.tool_calls.len(), 1);
        let call = &first.tool_calls[0];
        assert_eq!(
            (call.id.as_str(), call.name.as_str()),
            ("call_abc", "read_file")
        );
        assert_eq!(call.arguments, json!({"path": "src/lib.rs"}));
        assert!(call.invalid_arguments.is_none() && !call.from_text);
        assert_eq!(first.usage, Usage::new(50, 12));
        assert_eq!(first.response_id.as_deref(), Some("chatcmpl-1"));

        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "It says hello.");
        assert!(second.tool_calls.is_empty());
        assert_eq!(second.finish_reason, FinishReason::Stop);
        assert_eq!(second.usage, Usage::new(80, 4));

        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.method, "POST");
            assert_eq!(request.path, "/v1/chat/completions");
            assert_eq!(
                request.header("authorization"),
                Some(&*format!("Bearer {CANARY}"))
            );
            assert_eq!(request.header("content-type"), Some("application/json"));
            let body = request.json();
            assert_eq!(body["stream"], true);
            assert_eq!(body["stream_options"], json!({"include_usage": true}));
        }
        assert_first_request(&requests[0].json());
        assert_second_request(&requests[1].json());
    }

    #[tokio::test]
    async fn non_streaming_two_turns() {
        let server = Server::start(vec![
            Reply::json(
                200,
                &json!({
                    "id": "chatcmpl-2", "object": "chat.completion",
                    "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                        "role": "assistant", "content": null,
                        "tool_calls": [{"id": "call_abc", "type": "function",
                            "function": {"name": "read_file", "arguments": "{\"path\": \"src/lib.rs\"}"}}]}}],
                    "usage": {"prompt_tokens": 50, "completion_tokens": 12}
                }),
            ),
            Reply::json(
                200,
                &json!({
                    "id": "chatcmpl-3",
                    "choices": [{"index": 0, "finish_reason": "stop",
                        "message": {"role": "assistant", "content": "It says hello."}}],
                    "usage": {"prompt_tokens": 80, "completion_tokens": 4}
                }),
            ),
        ]);
        let provider = provider(&server, false);
        let first = provider.complete(&first_request()).await.unwrap();
        assert_eq!(first.tool_calls.len(), 1);
        assert_eq!(first.tool_calls[0].arguments, json!({"path": "src/lib.rs"}));
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        assert_eq!(first.usage, Usage::new(50, 12));
        assert_eq!(first.response_id.as_deref(), Some("chatcmpl-2"));
        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "It says hello.");

        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(
                request.header("authorization"),
                Some(&*format!("Bearer {CANARY}"))
            );
            assert!(request.json().get("stream").is_none());
        }
        assert_first_request(&requests[0].json());
        assert_second_request(&requests[1].json());
    }

    #[tokio::test]
    async fn one_byte_fragments_reassemble() {
        // Arguments in 1-character deltas, and the stream's bytes
        // delivered one at a time.
        let server = Server::start(vec![Reply::sse_in_pieces(&tool_call_stream(1), 1)]);
        let response = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap();
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(
            response.tool_calls[0].arguments,
            json!({"path": "src/lib.rs"})
        );
        assert_eq!(response.usage.output_tokens, 12);
    }

    #[tokio::test]
    async fn interleaved_parallel_calls_and_keep_alives() {
        let a = r#"{"path": "a.txt"}"#;
        let b = r#"{"path": "dir/b.txt"}"#;
        let mut text = String::from(": keep-alive\n\n");
        text.push_str(&format!(
            "data: {}\n\n",
            chunk(call_delta(0, Some("call_a"), Some("read_file"), ""), None)
        ));
        text.push_str(&format!(
            "data: {}\n\n",
            chunk(call_delta(1, Some("call_b"), Some("read_file"), ""), None)
        ));
        let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
        for step in 0..a.len().max(b.len()) {
            for (index, chars) in [(0, &a), (1, &b)] {
                if let Some(ch) = chars.get(step) {
                    text.push_str(&format!(
                        "data: {}\n\n",
                        chunk(call_delta(index, None, None, &ch.to_string()), None)
                    ));
                }
            }
            if step % 4 == 0 {
                text.push_str(": keep-alive\n\n");
            }
        }
        text.push_str(&format!(
            "data: {}\n\n",
            chunk(json!({}), Some("tool_calls"))
        ));
        text.push_str(": keep-alive\r\n\r\n");
        text.push_str("data: [DONE]\n\n");
        let server = Server::start(vec![Reply::sse_in_pieces(&text, 7)]);
        let response = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap();
        let calls: Vec<(&str, &Value)> = response
            .tool_calls
            .iter()
            .map(|call| (call.id.as_str(), &call.arguments))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_a", &json!({"path": "a.txt"})),
                ("call_b", &json!({"path": "dir/b.txt"}))
            ]
        );
    }

    #[tokio::test]
    async fn length_with_half_a_call_is_invalid_arguments() {
        let server = Server::start(vec![Reply::sse(&sse_done(&[
            chunk(
                call_delta(0, Some("call_1"), Some("read_file"), r#"{"path": "a"}"#),
                None,
            ),
            chunk(
                call_delta(1, Some("call_2"), Some("read_file"), r#"{"path": "src/ma"#),
                None,
            ),
            chunk(json!({}), Some("length")),
        ]))]);
        let response = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap();
        assert_eq!(response.finish_reason, FinishReason::Length);
        assert_eq!(response.tool_calls.len(), 2);
        assert!(response.tool_calls[0].invalid_arguments.is_none());
        let message = response.tool_calls[1].invalid_arguments.as_deref().unwrap();
        assert!(message.contains("cut off"), "{message}");
    }

    #[tokio::test]
    async fn error_object_in_a_chunk_is_an_error() {
        let server = Server::start(vec![Reply::sse(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\n\n\
             data: {\"error\":{\"message\":\"The server had an error\",\"type\":\"server_error\"}}\n\n",
        )]);
        let error = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ProviderError::Status { status: 500, .. }),
            "{error:?}"
        );
        assert!(error.to_string().contains("The server had an error"));
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn stream_without_done_is_interrupted() {
        let text = tool_call_stream(3);
        let cut = &text[..text.len() / 2];
        for reply in [Reply::sse(cut), Reply::sse(cut).cut()] {
            let server = Server::start(vec![reply]);
            let error = provider(&server, true)
                .complete(&first_request())
                .await
                .unwrap_err();
            assert!(matches!(error, ProviderError::Stream(_)), "{error:?}");
            assert!(error.is_retryable());
        }
    }

    #[tokio::test]
    async fn servers_without_indexes_or_ids() {
        // Some compatible servers omit `index` and `id`: each id opens a
        // call, id-less deltas continue the last one, missing ids are made.
        let server = Server::start(vec![Reply::sse(&sse_done(&[
            chunk(
                json!({"tool_calls": [{"id": "x1", "function": {"name": "read_file", "arguments": "{\"path\":"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"function": {"arguments": " \"a\"}"}}]}),
                None,
            ),
            chunk(
                json!({"tool_calls": [{"id": "x2", "function": {"name": "read_file", "arguments": {"path": "b"}}}]}),
                None,
            ),
            chunk(json!({}), Some("stop")),
        ]))]);
        let response = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap();
        assert_eq!(response.finish_reason, FinishReason::ToolCalls);
        let arguments: Vec<&Value> = response.tool_calls.iter().map(|c| &c.arguments).collect();
        assert_eq!(arguments, [&json!({"path": "a"}), &json!({"path": "b"})]);
    }

    /// llama.cpp's server behind a Qwen coder model: the call is printed.
    fn printed(content: &str) -> Reply {
        Reply::sse(&sse_done(&[
            chunk(json!({"role": "assistant", "content": content}), None),
            chunk(json!({}), Some("stop")),
        ]))
    }

    #[tokio::test]
    async fn text_tool_calls_are_recovered_only_when_enabled() {
        let fenced =
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```";
        let unterminated = "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/li";
        let server = Server::start(vec![
            printed(fenced),
            printed(fenced),
            printed(r#"{"name": "web_search", "arguments": {"q": "x"}}"#),
            printed(&format!("Sure! {fenced}")),
            printed(unterminated),
        ]);
        let mut config = config("openai", &format!("{}/v1", server.url));
        let off = build(&config, &env(&[])).unwrap();
        config.text_tool_calls = true;
        let on = build(&config, &env(&[])).unwrap();

        let answer = off.complete(&first_request()).await.unwrap();
        assert_eq!(answer.content, fenced);
        assert!(answer.tool_calls.is_empty());

        let turn = on.complete(&first_request()).await.unwrap();
        assert_eq!(turn.content, "");
        assert_eq!(turn.finish_reason, FinishReason::ToolCalls);
        let call = &turn.tool_calls[0];
        assert!(call.from_text);
        assert_eq!(
            (call.id.as_str(), call.name.as_str()),
            ("text_call_1", "read_file")
        );
        assert_eq!(call.arguments, json!({"path": "src/lib.rs"}));

        // Names no offered tool: an answer.
        let answer = on.complete(&first_request()).await.unwrap();
        assert!(answer.tool_calls.is_empty());
        assert!(!answer.content.is_empty());
        // Prose around the JSON: the call, the prose kept.
        let turn = on.complete(&first_request()).await.unwrap();
        assert_eq!(turn.content, "Sure!");
        assert_eq!(turn.tool_calls[0].arguments, json!({"path": "src/lib.rs"}));
        // Unterminated: an error result for the model, not a repair.
        let turn = on.complete(&first_request()).await.unwrap();
        let call = &turn.tool_calls[0];
        assert!(call.from_text);
        assert!(
            call.invalid_arguments
                .as_deref()
                .unwrap()
                .contains("unterminated")
        );
    }

    #[test]
    fn debug_output_hides_the_key() {
        let provider = super::stream::Streaming::<OpenAi>::new(
            Settings::resolve(
                &crate::llm::ProviderConfig::new("openai", "m"),
                &env(&[("OPENAI_API_KEY", CANARY)]),
                &crate::llm::Vendor {
                    base_url_var: "OPENAI_BASE_URL",
                    default_endpoint: "https://api.openai.com/v1",
                    vendor_host: Some("api.openai.com"),
                    key_var: Some(crate::llm::OPENAI_API_KEY),
                    bare_host: false,
                },
            )
            .unwrap(),
        )
        .unwrap();
        let debug = format!("{provider:?}");
        assert!(!debug.contains(CANARY), "{debug}");
        assert!(debug.contains("[REDACTED]"), "{debug}");
    }

    #[test]
    fn vendor_endpoint_takes_max_completion_tokens() {
        let body = request_body(&first_request(), "gpt-4.1", false, true);
        assert_eq!(body["max_completion_tokens"], 512);
        assert!(body.get("max_tokens").is_none());
    }
}
