//! Ollama's native protocol: `POST {endpoint}/api/chat`, streaming as
//! NDJSON (one JSON object a line, the last with `done: true`).
//!
//! Ollama sends tool calls whole, with their arguments as an object, and
//! without ids: ybs numbers them `call_<n>` across the conversation, so
//! the same conversation always gets the same ids.

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use reqwest::Url;
use reqwest::header::HeaderMap;
use serde_json::{Map, Value, json};

use super::http::{self, Http};
use super::turn::{self, CallIds, PartialCall};
use super::{ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Settings};
use crate::core::{Message, Usage};

/// An Ollama server.
#[derive(Debug)]
pub struct Ollama {
    settings: Settings,
    url: Url,
    headers: HeaderMap,
    http: Http,
}

impl Ollama {
    pub(crate) fn new(settings: Settings) -> Result<Self, ProviderError> {
        let url = settings.url(&["api", "chat"])?;
        let headers = HeaderMap::new();
        let http = Http::new(&settings.endpoint, settings.deadlines, settings.key.clone())?;
        Ok(Self {
            settings,
            url,
            headers,
            http,
        })
    }

    async fn complete_turn(&self, request: &ChatRequest) -> Result<ChatResponse, ProviderError> {
        let body = request_body(request, self.settings.model(request), self.settings.streaming);
        let response = self
            .http
            .post_json(&self.url, self.headers.clone(), &body)
            .await?;
        let scrub = |text: &str| self.http.scrub(text);
        let mut turn = Assembly::default();
        if self.settings.streaming {
            let mut lines = response.lines();
            while let Some(line) = lines.next().await {
                let line = line?;
                let value: Value = serde_json::from_str(&line).map_err(|error| {
                    ProviderError::Protocol(format!("invalid stream line ({error}): {}", scrub(&line)))
                })?;
                turn.part(&value, &scrub)?;
                if turn.done {
                    break;
                }
            }
            if !turn.done {
                return Err(ProviderError::Stream(
                    "the stream ended before the turn was complete (no `\"done\": true`)".into(),
                ));
            }
        } else {
            turn.part(&response.json().await?, &scrub)?;
            turn.done = true;
        }
        Ok(turn.finish(request, self.settings.text_tool_calls))
    }
}

impl Provider for Ollama {
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

/// The request body: the system prompt as the first message, calls with
/// object arguments, results as `tool` messages naming their tool.
pub(crate) fn request_body(request: &ChatRequest, model: &str, streaming: bool) -> Value {
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
                    message["tool_calls"] = tool_calls
                        .iter()
                        .map(|call| {
                            json!({
                                "id": call.id,
                                "function": {
                                    "name": call.name,
                                    "arguments": turn::wire_arguments(call),
                                },
                            })
                        })
                        .collect();
                }
                message
            }
            Message::Tool {
                call_id,
                name,
                content,
                ..
            } => json!({
                "role": "tool",
                "content": content,
                "tool_name": name,
                "tool_call_id": call_id,
            }),
        });
    }
    let mut body = json!({"model": model, "messages": messages, "stream": streaming});
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
    body
}

/// A turn being assembled from stream lines (or one whole response).
#[derive(Debug, Default)]
struct Assembly {
    content: String,
    calls: Vec<PartialCall>,
    done: bool,
    done_reason: Option<String>,
    usage: Usage,
}

impl Assembly {
    fn part(&mut self, value: &Value, scrub: &dyn Fn(&str) -> String) -> Result<(), ProviderError> {
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
            self.usage = Usage {
                input_tokens: count("prompt_eval_count"),
                output_tokens: count("eval_count"),
            };
        }
        Ok(())
    }

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let finish_reason = match self.done_reason.as_deref() {
            None | Some("stop") => FinishReason::Stop,
            Some("length") => FinishReason::Length,
            Some(_) => FinishReason::Other,
        };
        let mut ids = CallIds::new("call_", request);
        let tool_calls = turn::finish_calls(
            self.calls,
            finish_reason == FinishReason::Length,
            &mut ids,
        );
        turn::finish_turn(
            ChatResponse {
                content: self.content,
                tool_calls,
                usage: self.usage,
                response_id: None,
                finish_reason,
            },
            request,
            text_tool_calls,
        )
    }
}
