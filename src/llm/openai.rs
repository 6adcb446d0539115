//! The OpenAI Chat Completions protocol, spoken by OpenAI and by most
//! local servers (Ollama's `/v1`, vLLM, llama.cpp, LM Studio):
//! `POST {endpoint}/chat/completions`, streaming as SSE.

use std::collections::BTreeMap;

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};
use serde_json::{Value, json};

use super::http::{self, Http};
use super::turn::{self, CallIds, PartialCall};
use super::{ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Settings};
use crate::core::{Message, Usage};

/// An OpenAI-compatible endpoint.
#[derive(Debug)]
pub struct OpenAi {
    settings: Settings,
    url: Url,
    headers: HeaderMap,
    http: Http,
}

impl OpenAi {
    pub(crate) fn new(settings: Settings) -> Result<Self, ProviderError> {
        let url = settings.url(&["chat", "completions"])?;
        let mut headers = HeaderMap::new();
        if let Some(key) = &settings.key {
            headers.insert(
                AUTHORIZATION,
                key.header_value("Bearer ", super::OPENAI_API_KEY)?,
            );
        }
        let http = Http::new(&settings.endpoint, settings.deadlines, settings.key.clone())?;
        Ok(Self {
            settings,
            url,
            headers,
            http,
        })
    }

    async fn complete_turn(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = request_body(
            request,
            self.settings.model(request),
            self.settings.streaming,
            self.settings.vendor,
        );
        let response = self
            .http
            .post_json(&self.url, self.headers.clone(), &body)
            .await?;
        let scrub = |text: &str| self.http.scrub(text);
        let mut turn = Assembly::default();
        if self.settings.streaming {
            let mut events = response.events();
            while let Some(event) = events.next().await {
                let Some(data) = event?.data else { continue };
                let data = data.trim();
                if data.is_empty() {
                    continue;
                }
                if data == "[DONE]" {
                    turn.done = true;
                    break;
                }
                let chunk: Value = serde_json::from_str(data).map_err(|error| {
                    ProviderError::Protocol(format!("invalid stream chunk ({error}): {}", scrub(data)))
                })?;
                turn.chunk(&chunk, &scrub)?;
            }
            // `[DONE]` ends a stream; a server that omits it but sent a
            // finish reason has sent every delta of the turn.
            if !turn.done && turn.finish.is_none() {
                return Err(ProviderError::Stream(
                    "the stream ended before the turn was complete (no `data: [DONE]`)".into(),
                ));
            }
        } else {
            turn.message(&response.json().await?, &scrub)?;
        }
        Ok(turn.finish(request, self.settings.text_tool_calls))
    }
}

impl Provider for OpenAi {
    fn name(&self) -> &str {
        &self.settings.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.complete_turn(request))
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
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    for message in &request.messages {
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut message = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    if content.is_empty() {
                        message["content"] = Value::Null;
                    }
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "type": "function",
                                "function": {
                                    "name": call.name,
                                    "arguments": turn::wire_arguments(call).to_string(),
                                },
                            })
                        })
                        .collect();
                }
                message
            }
            Message::Tool {
                call_id, content, ..
            } => json!({"role": "tool", "tool_call_id": call_id, "content": content}),
        });
    }
    let mut body = json!({"model": model, "messages": messages});
    if !request.tools.is_empty() {
        body["tools"] = request
            .tools
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
            .collect();
    }
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
    body
}

/// A turn being assembled from chunks (or from one whole message).
#[derive(Debug, Default)]
struct Assembly {
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
    fn chunk(&mut self, chunk: &Value, scrub: &dyn Fn(&str) -> String) -> Result<(), ProviderError> {
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

    /// A whole non-streaming response.
    fn message(&mut self, body: &Value, scrub: &dyn Fn(&str) -> String) -> Result<(), ProviderError> {
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

    fn common(&mut self, value: &Value) {
        if self.id.is_none() {
            self.id = value.get("id").and_then(Value::as_str).map(str::to_owned);
        }
        if let Some(usage) = value.get("usage").filter(|usage| usage.is_object()) {
            let count = |name: &str| usage.get(name).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
            };
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
        let id = delta.get("id").and_then(Value::as_str).filter(|id| !id.is_empty());
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

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let finish_reason = match self.finish.as_deref() {
            None | Some("stop") => FinishReason::Stop,
            Some("tool_calls" | "function_call") => FinishReason::ToolCalls,
            Some("length") => FinishReason::Length,
            Some(_) => FinishReason::Other,
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
            },
            request,
            text_tool_calls,
        )
    }
}

fn first_choice(value: &Value) -> Option<&Value> {
    value.get("choices")?.as_array()?.iter().find(|choice| {
        choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0
    })
}

fn short(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(200) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text,
    }
}
