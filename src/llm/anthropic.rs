//! The Anthropic Messages protocol: `POST {endpoint}/v1/messages` with
//! `x-api-key` and `anthropic-version`, streaming as typed SSE events.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};

use super::http;
use super::stream::{self, Framing, Scrub, Wire};
use super::turn::{self, CallIds, PartialCall};
use super::{ChatRequest, ChatResponse, FinishReason, PromptCache, ProviderError, Settings};
use crate::core::{Message, Usage};

/// The API version ybs speaks.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";
/// `max_tokens` is required by the API; this is sent when a task sets none.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

/// The Anthropic Messages wire protocol (an endpoint is a
/// `Streaming<Anthropic>`).
#[derive(Debug)]
pub struct Anthropic;

impl Wire for Anthropic {
    type Turn = Assembly;
    const END: &'static str = "`message_stop`";
    const FRAMING: Framing = Framing::Sse;
    const PATH: &'static [&'static str] = &["v1", "messages"];

    fn headers(settings: &Settings) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = &settings.key {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                key.header_value("", super::ANTHROPIC_API_KEY)?,
            );
        }
        Ok(headers)
    }

    fn body(request: &ChatRequest, settings: &Settings) -> Value {
        request_body(
            request,
            settings.model(request),
            settings.streaming,
            &settings.prompt_cache,
        )
    }
}

/// The request body. The system prompt is top-level `system`; assistant
/// calls are `tool_use` blocks; tool results are `tool_result` blocks in a
/// user message, consecutive results (and a user text right after them)
/// merged into one message, since roles must alternate.
///
/// What stays put for the whole task comes first (settings, tools, the
/// system prompt), the conversation last. With prompt caching on, three
/// `cache_control` breakpoints (of the four the API allows): the last
/// tool, the system prompt (as a text block) and the last block of the
/// last user message, so each step reads the one before it from the
/// cache.
pub(crate) fn request_body(
    request: &ChatRequest,
    model: &str,
    streaming: bool,
    cache: &PromptCache,
) -> Value {
    let mut messages: Vec<(&str, Vec<Value>)> = Vec::new();
    let mut push = |role: &'static str, blocks: Vec<Value>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => messages.push((role, blocks)),
        }
    };
    let ids = turn::WireIds::new(&request.messages);
    for (position, message) in request.messages.iter().enumerate() {
        match message {
            Message::User { content } => push("user", text_block(content)),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut blocks = text_block(content);
                blocks.extend(tool_calls.iter().enumerate().map(|(index, call)| {
                    json!({
                        "type": "tool_use",
                        "id": ids.call(position, index),
                        "name": call.name,
                        "input": turn::wire_arguments(call),
                    })
                }));
                push("assistant", blocks);
            }
            Message::Tool {
                content, is_error, ..
            } => push(
                "user",
                vec![json!({
                    "type": "tool_result",
                    "tool_use_id": ids.result(position),
                    "content": content,
                    "is_error": is_error,
                })],
            ),
        }
    }
    // A paused turn (`pause_turn`) goes on from the assistant message
    // sent last, whose text the API takes without trailing whitespace.
    if let Some(("assistant", blocks)) = messages.last_mut()
        && let Some(last) = blocks.last_mut()
        && let Some(text) = last.get("text").and_then(Value::as_str)
    {
        let trimmed = text.trim_end().to_owned();
        if trimmed.is_empty() {
            blocks.pop();
            if blocks.is_empty() {
                messages.pop();
            }
        } else {
            last["text"] = json!(trimmed);
        }
    }
    // The last user message (a paused turn's assistant text, sent back
    // to be continued, stays as it was).
    let control = cache.control();
    if let Some(control) = &control
        && let Some((_, blocks)) = messages.iter_mut().rev().find(|(role, _)| *role == "user")
        && let Some(last) = blocks.last_mut()
    {
        last["cache_control"] = control.clone();
    }
    let messages: Vec<Value> = messages
        .into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect();
    let mut body = json!({
        "model": model,
        "max_tokens": request.max_tokens.unwrap_or(DEFAULT_MAX_TOKENS),
    });
    if let Some(temperature) = request.temperature {
        body["temperature"] = json!(temperature);
    }
    if streaming {
        body["stream"] = json!(true);
    }
    if !request.tools.is_empty() {
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        if let (Some(control), Some(last)) = (&control, tools.last_mut()) {
            last["cache_control"] = control.clone();
        }
        body["tools"] = Value::Array(tools);
    }
    if !request.system.is_empty() {
        body["system"] = match &control {
            Some(control) => json!([
                {"type": "text", "text": request.system, "cache_control": control}
            ]),
            None => json!(request.system),
        };
    }
    body["messages"] = Value::Array(messages);
    body
}

/// The API rejects empty text blocks.
fn text_block(text: &str) -> Vec<Value> {
    if text.is_empty() {
        Vec::new()
    } else {
        vec![json!({"type": "text", "text": text})]
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        call: PartialCall,
        stopped: bool,
    },
    /// A block ybs does not use (thinking, server tools…).
    Other,
}

/// A turn being assembled from events (or from one whole message).
#[derive(Debug, Default)]
pub(super) struct Assembly {
    id: Option<String>,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: Usage,
    stopped: bool,
    /// One-hour cache writes were asked for.
    one_hour: bool,
}

impl Assembly {
    /// One streamed event; its `type` field names it, the SSE event name
    /// is the fallback.
    fn event(
        &mut self,
        name: Option<&str>,
        data: &Value,
        scrub: &dyn Fn(&str) -> String,
    ) -> Result<(), ProviderError> {
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .or(name)
            .unwrap_or_default();
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                let message = data.get("message").unwrap_or(&Value::Null);
                self.id = message.get("id").and_then(Value::as_str).map(str::to_owned);
                self.usage(message.get("usage"));
            }
            "content_block_start" => {
                let block = data.get("content_block").unwrap_or(&Value::Null);
                self.blocks.insert(index, start_block(block));
            }
            "content_block_delta" => {
                let delta = data.get("delta").unwrap_or(&Value::Null);
                let text =
                    |field: &str| delta.get(field).and_then(Value::as_str).unwrap_or_default();
                match (
                    self.blocks.get_mut(&index),
                    delta.get("type").and_then(Value::as_str),
                ) {
                    (Some(Block::Text(content)), Some("text_delta")) => {
                        content.push_str(text("text"))
                    }
                    (Some(Block::ToolUse { call, .. }), Some("input_json_delta")) => {
                        call.arguments.push_str(text("partial_json"));
                    }
                    (None, Some("text_delta")) => {
                        self.blocks
                            .insert(index, Block::Text(text("text").to_owned()));
                    }
                    _ => {}
                }
            }
            "content_block_stop" => {
                if let Some(Block::ToolUse { stopped, .. }) = self.blocks.get_mut(&index) {
                    *stopped = true;
                }
            }
            "message_delta" => {
                if let Some(reason) = data
                    .get("delta")
                    .and_then(|delta| delta.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(reason.to_owned());
                }
                self.usage(data.get("usage"));
            }
            "message_stop" => self.stopped = true,
            "error" => {
                let error = data.get("error").unwrap_or(data);
                return Err(http::stream_error(error, scrub));
            }
            // `ping` and event types added after this was written.
            _ => {}
        }
        Ok(())
    }

    /// Input tokens (cache reads and writes included, and counted apart
    /// too) and output tokens; `message_delta` carries cumulative counts
    /// that replace earlier ones. Writes without the API's breakdown by
    /// lifetime count as one-hour writes when ybs asked for those (never
    /// under-stated).
    fn usage(&mut self, usage: Option<&Value>) {
        let Some(usage) = usage.filter(|usage| usage.is_object()) else {
            return;
        };
        let count = |name: &str| usage.get(name).and_then(Value::as_u64);
        if let Some(input) = count("input_tokens") {
            let written = count("cache_creation_input_tokens").unwrap_or(0);
            let read = count("cache_read_input_tokens").unwrap_or(0);
            self.usage.input_tokens = input.saturating_add(written).saturating_add(read);
            self.usage.cache_read_input_tokens = read;
            self.usage.cache_creation_input_tokens = written;
            self.usage.cache_creation_1h_input_tokens = usage
                .get("cache_creation")
                .and_then(|by_ttl| by_ttl.get("ephemeral_1h_input_tokens"))
                .and_then(Value::as_u64)
                .unwrap_or(if self.one_hour { written } else { 0 });
        }
        if let Some(output) = count("output_tokens") {
            self.usage.output_tokens = output;
        }
    }
}

impl stream::Turn for Assembly {
    fn configure(&mut self, settings: &Settings) {
        self.one_hour = settings.prompt_cache.enabled && settings.prompt_cache.one_hour;
    }

    fn feed(
        &mut self,
        event: Option<&str>,
        data: &str,
        scrub: Scrub,
    ) -> Result<bool, ProviderError> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        self.event(event, &stream::parse(data, "event", scrub)?, scrub)?;
        Ok(self.stopped)
    }

    /// A whole non-streaming response.
    fn whole(&mut self, body: &Value, scrub: Scrub) -> Result<(), ProviderError> {
        if body.get("type").and_then(Value::as_str) == Some("error") {
            let error = body.get("error").unwrap_or(body);
            return Err(http::stream_error(error, scrub));
        }
        let content = body
            .get("content")
            .and_then(Value::as_array)
            .ok_or_else(|| ProviderError::Protocol("response has no `content` array".into()))?;
        self.id = body.get("id").and_then(Value::as_str).map(str::to_owned);
        self.stop_reason = body
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(str::to_owned);
        self.usage(body.get("usage"));
        for (index, block) in (0_u64..).zip(content) {
            let mut block = start_block(block);
            if let Block::ToolUse { stopped, .. } = &mut block {
                *stopped = true;
            }
            self.blocks.insert(index, block);
        }
        // Stopped at the token limit with a tool call last: that call may
        // be cut short, and a whole response cannot show whether it was.
        if self.stop_reason.as_deref() == Some("max_tokens")
            && let Some((_, Block::ToolUse { stopped, .. })) = self.blocks.iter_mut().next_back()
        {
            *stopped = false;
        }
        self.stopped = true;
        Ok(())
    }

    /// `message_stop` ends a stream; a server that omits it but sent the
    /// stop reason has sent the whole turn.
    fn complete(&self) -> bool {
        self.stopped || self.stop_reason.is_some()
    }

    /// The text blocks so far, joined as [`finish`](Self::finish) joins them.
    fn text_so_far(&self) -> std::borrow::Cow<'_, str> {
        let texts: Vec<&str> = self
            .blocks
            .values()
            .filter_map(|block| match block {
                Block::Text(text) if !text.is_empty() => Some(text.as_str()),
                _ => None,
            })
            .collect();
        std::borrow::Cow::Owned(texts.join("\n\n"))
    }

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let finish_reason = match self.stop_reason.as_deref() {
            None | Some("end_turn" | "stop_sequence") => FinishReason::Stop,
            Some("tool_use") => FinishReason::ToolCalls,
            Some("max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("refusal") => FinishReason::Refusal,
            Some("pause_turn") => FinishReason::Paused,
            Some(_) => FinishReason::Other,
        };
        let mut texts = Vec::new();
        let mut calls = Vec::new();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) if !text.is_empty() => texts.push(text),
                Block::ToolUse { mut call, stopped } => {
                    call.unfinished = !stopped;
                    calls.push(call);
                }
                Block::Text(_) | Block::Other => {}
            }
        }
        let mut ids = CallIds::new("toolu_ybs_", request);
        let tool_calls = turn::finish_calls(calls, finish_reason == FinishReason::Length, &mut ids);
        turn::finish_turn(
            ChatResponse {
                content: texts.join("\n\n"),
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

/// A content block as it starts (streaming) or as a whole (non-streaming).
fn start_block(block: &Value) -> Block {
    let field = |name: &str| {
        block
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    match block.get("type").and_then(Value::as_str) {
        Some("text") => Block::Text(field("text")),
        Some("tool_use") => {
            // A streamed block starts with `input: {}` and gets its JSON in
            // deltas; a whole block has it all.
            let arguments = match block.get("input") {
                Some(Value::Object(input)) if !input.is_empty() => {
                    Value::Object(input.clone()).to_string()
                }
                _ => String::new(),
            };
            Block::ToolUse {
                call: PartialCall {
                    id: field("id"),
                    name: field("name"),
                    arguments,
                    unfinished: false,
                },
                stopped: false,
            }
        }
        _ => Block::Other,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::ToolCall;
    use crate::llm::Provider;
    use crate::llm::build;
    use crate::llm::test_fixtures::{
        CANARY, config, env, first_request, second_request, sse_events,
    };
    use crate::llm::test_server::{Reply, Server};

    fn provider(server: &Server, streaming: bool) -> Box<dyn Provider> {
        let mut config = config("anthropic", &server.url);
        config.streaming = streaming;
        build(&config, &env(&[("ANTHROPIC_API_KEY", CANARY)])).unwrap()
    }

    fn message_start() -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant",
               "content": [], "model": "test-model", "stop_reason": null,
               "usage": {"input_tokens": 50, "output_tokens": 1}}})
    }

    fn tool_block_start(index: u64, id: &str) -> Value {
        json!({"type": "content_block_start", "index": index,
               "content_block": {"type": "tool_use", "id": id, "name": "read_file", "input": {}}})
    }

    fn json_delta(index: u64, partial: &str) -> Value {
        json!({"type": "content_block_delta", "index": index,
               "delta": {"type": "input_json_delta", "partial_json": partial}})
    }

    fn stop(index: u64) -> Value {
        json!({"type": "content_block_stop", "index": index})
    }

    fn message_delta(reason: &str, output: u64) -> Value {
        json!({"type": "message_delta", "delta": {"stop_reason": reason, "stop_sequence": null},
               "usage": {"output_tokens": output}})
    }

    /// Turn 1: a sentence, then two calls (so two results to merge), the
    /// second call's JSON in one-character deltas; pings in between.
    fn two_calls_stream() -> String {
        let mut events = vec![
            message_start(),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Reading "}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "both."}}),
            stop(0),
            tool_block_start(1, "toolu_a"),
            json_delta(1, ""),
            json_delta(1, r#"{"path": "#),
            json_delta(1, r#""a.txt"}"#),
            stop(1),
            tool_block_start(2, "toolu_b"),
        ];
        events.extend(
            r#"{"path": "src/lib.rs"}"#
                .chars()
                .map(|ch| json_delta(2, &ch.to_string())),
        );
        events.extend([
            json!({"type": "ping"}),
            stop(2),
            message_delta("tool_use", 30),
            json!({"type": "message_stop"}),
        ]);
        sse_events(&events)
    }

    fn answer_stream() -> String {
        sse_events(&[
            message_start(),
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Both say hello."}}),
            stop(0),
            message_delta("end_turn", 6),
            json!({"type": "message_stop"}),
        ])
    }

    fn assert_requests(server: &Server, streaming: bool) {
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        for request in &requests {
            assert_eq!(request.method, "POST");
            assert_eq!(request.path, "/v1/messages");
            assert_eq!(request.header("x-api-key"), Some(CANARY));
            assert_eq!(request.header("anthropic-version"), Some("2023-06-01"));
            assert_eq!(request.header("content-type"), Some("application/json"));
            assert!(request.header("authorization").is_none());
            let body = request.json();
            assert_eq!(body["model"], "test-model");
            // The breakpoints of prompt caching (on by default): the
            // system prompt, the last tool, the last message's last block.
            let cache = json!({"type": "ephemeral"});
            assert_eq!(
                body["system"],
                json!([{"type": "text", "text": "You are ybs.", "cache_control": cache}])
            );
            assert_eq!(body["max_tokens"], 512);
            assert_eq!(
                body["tools"][0],
                json!({"name": "read_file", "description": "Read a file", "input_schema": {
                    "type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
                    "cache_control": cache})
            );
            let last = body["messages"].as_array().unwrap().last().unwrap()["content"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            assert_eq!(last["cache_control"], cache, "{body}");
            assert_eq!(body.get("stream").is_some(), streaming);
            assert_eq!(body["messages"][0]["role"], "user");
            assert_eq!(
                body["messages"][0]["content"][0]["text"],
                "What does src/lib.rs say?"
            );
        }
        let second = requests[1].json();
        let messages = second["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3, "the two results are one user message");
        assert_eq!(
            messages[1],
            json!({"role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.txt"}},
                {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "src/lib.rs"}},
            ]})
        );
        assert_eq!(
            messages[2],
            json!({"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_a", "content": "contents of \"a.txt\"", "is_error": false},
                {"type": "tool_result", "tool_use_id": "toolu_b", "content": "contents of \"src/lib.rs\"", "is_error": false,
                 "cache_control": {"type": "ephemeral"}},
            ]})
        );
    }

    fn assert_calls(calls: &[ToolCall]) {
        let calls: Vec<(&str, &Value)> = calls
            .iter()
            .map(|call| (call.id.as_str(), &call.arguments))
            .collect();
        assert_eq!(
            calls,
            [
                ("toolu_a", &json!({"path": "a.txt"})),
                ("toolu_b", &json!({"path": "src/lib.rs"}))
            ]
        );
    }

    #[tokio::test]
    async fn streaming_two_turns() {
        let server = Server::start(vec![
            Reply::sse_in_pieces(&two_calls_stream(), 3),
            Reply::sse(&answer_stream()),
        ]);
        let provider = provider(&server, true);
        assert_eq!(provider.name(), "anthropic");
        let first = provider.complete(&first_request()).await.unwrap();
        assert_eq!(first.content, "Reading both.");
        assert_eq!(first.finish_reason, FinishReason::ToolCalls);
        assert_calls(&first.tool_calls);
        assert_eq!(first.usage, Usage::new(50, 30));
        assert_eq!(first.response_id.as_deref(), Some("msg_1"));

        // The text of turn 1 is dropped from the history here: the
        // fixture's assistant message has calls only.
        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "Both say hello.");
        assert_eq!(second.finish_reason, FinishReason::Stop);
        assert_eq!(second.usage, Usage::new(50, 6));
        assert_requests(&server, true);
    }

    #[tokio::test]
    async fn non_streaming_two_turns() {
        let server = Server::start(vec![
            Reply::json(
                200,
                &json!({"id": "msg_2", "type": "message", "role": "assistant", "model": "test-model",
                    "content": [
                        {"type": "text", "text": "Reading both."},
                        {"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "a.txt"}},
                        {"type": "tool_use", "id": "toolu_b", "name": "read_file", "input": {"path": "src/lib.rs"}}
                    ],
                    "stop_reason": "tool_use",
                    "usage": {"input_tokens": 50, "output_tokens": 30, "cache_read_input_tokens": 10}}),
            ),
            Reply::json(
                200,
                &json!({"id": "msg_3", "type": "message", "role": "assistant",
                    "content": [{"type": "text", "text": "Both say hello."}],
                    "stop_reason": "end_turn", "usage": {"input_tokens": 90, "output_tokens": 6}}),
            ),
        ]);
        let provider = provider(&server, false);
        let first = provider.complete(&first_request()).await.unwrap();
        assert_calls(&first.tool_calls);
        assert_eq!(first.content, "Reading both.");
        assert_eq!(
            first.usage,
            Usage {
                cache_read_input_tokens: 10,
                ..Usage::new(60, 30)
            }
        );
        let second = provider
            .complete(&second_request(&first.tool_calls))
            .await
            .unwrap();
        assert_eq!(second.content, "Both say hello.");
        assert_eq!(second.response_id.as_deref(), Some("msg_3"));
        assert_requests(&server, false);
    }

    #[tokio::test]
    async fn max_tokens_with_an_unfinished_tool_use_is_invalid_arguments() {
        let streamed = sse_events(&[
            message_start(),
            tool_block_start(0, "toolu_a"),
            json_delta(0, r#"{"path": "src/ma"#),
            stop(0),
            message_delta("max_tokens", 512),
            json!({"type": "message_stop"}),
        ]);
        let whole = json!({"id": "msg_4", "type": "message", "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_a", "name": "read_file", "input": {"path": "src/ma"}}],
            "stop_reason": "max_tokens", "usage": {"input_tokens": 5, "output_tokens": 512}});
        for (reply, streaming) in [
            (Reply::sse(&streamed), true),
            (Reply::json(200, &whole), false),
        ] {
            let server = Server::start(vec![reply]);
            let response = provider(&server, streaming)
                .complete(&first_request())
                .await
                .unwrap();
            assert_eq!(response.finish_reason, FinishReason::Length);
            assert_eq!(response.tool_calls.len(), 1);
            let message = response.tool_calls[0].invalid_arguments.as_deref().unwrap();
            assert!(message.contains("cut off"), "{message}");
        }
    }

    #[tokio::test]
    async fn overloaded_error_event_is_a_retryable_529() {
        let server = Server::start(vec![Reply::sse(&sse_events(&[
            message_start(),
            json!({"type": "ping"}),
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        ]))]);
        let error = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap_err();
        assert!(
            matches!(error, ProviderError::Status { status: 529, .. }),
            "{error:?}"
        );
        assert_eq!(error.to_string(), "HTTP 529: Overloaded");
        assert!(error.is_retryable());
    }

    #[tokio::test]
    async fn stream_cut_before_message_stop_is_interrupted() {
        let text = two_calls_stream();
        let server = Server::start(vec![Reply::sse(&text[..text.len() * 2 / 3]).cut()]);
        let error = provider(&server, true)
            .complete(&first_request())
            .await
            .unwrap_err();
        assert!(matches!(error, ProviderError::Stream(_)), "{error:?}");
    }

    #[test]
    fn caching_off_sends_no_breakpoint_and_the_stable_part_comes_first() {
        let request = second_request(&[ToolCall::new("t1", "read_file", json!({"path": "a"}))]);
        let off = PromptCache {
            enabled: false,
            ..PromptCache::default()
        };
        let body = request_body(&request, "m", true, &off);
        assert!(!body.to_string().contains("cache_control"), "{body}");
        assert_eq!(body["system"], "You are ybs.");
        let keys: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                "model",
                "max_tokens",
                "temperature",
                "stream",
                "tools",
                "system",
                "messages"
            ]
        );
        let hour = PromptCache {
            one_hour: true,
            ..PromptCache::default()
        };
        let body = request_body(&request, "m", false, &hour);
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral", "ttl": "1h"})
        );
        assert_eq!(body.to_string().matches("cache_control").count(), 3);
    }

    #[test]
    fn cache_reads_and_writes_are_counted_apart_and_within_the_input() {
        let mut turn = Assembly::default();
        turn.usage(Some(&json!({"input_tokens": 5, "output_tokens": 1,
            "cache_read_input_tokens": 100, "cache_creation_input_tokens": 40,
            "cache_creation": {"ephemeral_5m_input_tokens": 10, "ephemeral_1h_input_tokens": 30}})));
        assert_eq!(
            turn.usage,
            Usage {
                input_tokens: 145,
                output_tokens: 1,
                cache_read_input_tokens: 100,
                cache_creation_input_tokens: 40,
                cache_creation_1h_input_tokens: 30,
            }
        );
        // Without the breakdown, writes count at the lifetime asked for.
        let mut turn = Assembly {
            one_hour: true,
            ..Assembly::default()
        };
        turn.usage(Some(
            &json!({"input_tokens": 5, "cache_creation_input_tokens": 40}),
        ));
        assert_eq!(turn.usage.cache_creation_1h_input_tokens, 40);
    }

    #[test]
    fn user_text_after_results_joins_their_message() {
        let mut request = second_request(&[ToolCall::new("t1", "read_file", json!({"path": "a"}))]);
        request.messages.push(Message::user("Wrap up now."));
        request.messages.push(Message::Assistant {
            content: String::new(),
            tool_calls: vec![],
        });
        request.system.clear();
        let body = request_body(&request, "m", false, &PromptCache::default());
        let messages = body["messages"].as_array().unwrap();
        assert_eq!(messages.len(), 3);
        assert_eq!(messages[2]["content"][0]["type"], "tool_result");
        assert_eq!(
            messages[2]["content"][1],
            json!({"type": "text", "text": "Wrap up now.", "cache_control": {"type": "ephemeral"}})
        );
        assert!(body.get("system").is_none());
        assert_eq!(
            request_body(&first_request(), "m", false, &PromptCache::default())["max_tokens"],
            512
        );
        let mut unlimited = first_request();
        unlimited.max_tokens = None;
        assert_eq!(
            request_body(&unlimited, "m", false, &PromptCache::default())["max_tokens"],
            DEFAULT_MAX_TOKENS
        );
    }
}
