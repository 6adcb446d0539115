//! What every wire protocol shares: post the body, read the turn (a
//! stream of SSE events or NDJSON lines, or one JSON body), check that the
//! stream was complete, finish the turn. Each vendor supplies only the
//! parts that differ ([`Wire`]: its path and headers, the body, how one
//! frame feeds the turn, when a stream is done, how the turn finishes).

use futures_util::StreamExt;
use futures_util::future::BoxFuture;
use reqwest::header::HeaderMap;
use serde_json::Value;

use super::http::{self, Endpoint};
use super::{ChatRequest, ChatResponse, FinishReason, Provider, ProviderError, Settings};

/// How a protocol frames a streamed turn.
pub(super) enum Framing {
    /// Server-sent events, each with an optional event name.
    Sse,
    /// One JSON object a line.
    Lines,
}

/// Scrubs the key out of text quoted in messages.
pub(super) type Scrub<'a> = &'a dyn Fn(&str) -> String;

/// A turn being assembled, as each protocol reads it.
pub(super) trait Turn: Default + Send {
    /// Feeds one stream frame (`event`: the SSE event name; `None` for a
    /// line). Returns true when the frame ended the stream.
    fn feed(
        &mut self,
        event: Option<&str>,
        data: &str,
        scrub: Scrub,
    ) -> Result<bool, ProviderError>;

    /// Feeds a whole, non-streamed response.
    fn whole(&mut self, value: &Value, scrub: Scrub) -> Result<(), ProviderError>;

    /// True once the stream has sent the whole turn.
    fn complete(&self) -> bool;

    /// The turn's text so far, for a live view; it only grows.
    fn text_so_far(&self) -> std::borrow::Cow<'_, str>;

    /// The complete turn.
    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse;

    /// What of the endpoint's settings reading the turn needs.
    fn configure(&mut self, _settings: &Settings) {}
}

/// What differs between the wire protocols besides reading the turn.
pub(super) trait Wire: Send + Sync + 'static {
    type Turn: Turn;
    /// What ends a complete stream, for the message when it is missing.
    const END: &'static str;
    /// How a streamed turn arrives.
    const FRAMING: Framing;
    /// Appended to the configured base URL.
    const PATH: &'static [&'static str];

    /// The protocol's headers (the key among them, when there is one).
    fn headers(settings: &Settings) -> Result<HeaderMap, ProviderError>;

    /// The request body.
    fn body(request: &ChatRequest, settings: &Settings) -> Value;

    /// What to add to an error's message to say what is likely wrong.
    fn hint(_error: &ProviderError) -> Option<&'static str> {
        None
    }
}

/// A 404's message: the model is unknown to the server (the usual case:
/// a typo, or a model not pulled), or the endpoint has no such API (a
/// base URL without its `/v1`), each with what to check.
fn not_found(message: &str, model: &str, endpoint: &reqwest::Url) -> String {
    let endpoint = endpoint.as_str().trim_end_matches('/');
    if message.to_ascii_lowercase().contains("model") {
        format!(
            "model `{model}` not found at {endpoint} ({message}); hint: check `--model` (or `llm.model`) against the models the server has (an OpenAI-compatible server lists them at {endpoint}/models; Ollama: `ollama list`, `ollama pull {model}`)"
        )
    } else {
        format!(
            "{endpoint} has no such API ({message}); hint: check `--endpoint` (or `llm.endpoint`): the base URL as the provider's SDKs take it, e.g. `http://127.0.0.1:8080/v1` for an OpenAI-compatible server"
        )
    }
}

/// One frame parsed as JSON; `what` names it in the message (`chunk`,
/// `event`, `line`).
pub(super) fn parse(data: &str, what: &str, scrub: Scrub) -> Result<Value, ProviderError> {
    serde_json::from_str(data).map_err(|error| {
        ProviderError::Protocol(format!("invalid stream {what} ({error}): {}", scrub(data)))
    })
}

/// A provider speaking the wire protocol `W`.
#[derive(Debug)]
pub(super) struct Streaming<W> {
    endpoint: Endpoint,
    wire: std::marker::PhantomData<W>,
}

impl<W: Wire> Streaming<W> {
    pub fn new(settings: Settings) -> Result<Self, ProviderError> {
        let headers = W::headers(&settings)?;
        Ok(Self {
            endpoint: Endpoint::new(settings, W::PATH, headers)?,
            wire: std::marker::PhantomData,
        })
    }

    async fn complete_turn(
        &self,
        request: &ChatRequest,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        let body = W::body(request, &self.endpoint.settings);
        let response = match self.endpoint.post(&body).await {
            Ok(response) => response,
            Err(mut error) => {
                let hint = W::hint(&error);
                if let (ProviderError::Status { message, .. }, Some(hint)) = (&mut error, hint) {
                    message.push_str("; hint: ");
                    message.push_str(hint);
                } else if let ProviderError::Status {
                    status: 404,
                    message,
                    ..
                } = &mut error
                {
                    *message = not_found(
                        message,
                        self.endpoint.settings.model(request),
                        &self.endpoint.settings.endpoint,
                    );
                }
                return Err(error);
            }
        };
        let request_id = response.request_id.clone();
        http::with_request_id(self.read_turn(request, response, on_text).await, request_id)
    }

    async fn read_turn(
        &self,
        request: &ChatRequest,
        response: http::ResponseBody,
        on_text: &mut (dyn FnMut(&str) + Send),
    ) -> Result<ChatResponse, ProviderError> {
        let scrub = |text: &str| self.endpoint.http.scrub(text);
        let mut turn = W::Turn::default();
        turn.configure(&self.endpoint.settings);
        // How much of the turn's text `on_text` has had.
        let mut shown = 0;
        let mut show = |turn: &W::Turn| {
            let text = turn.text_so_far();
            if let Some(new) = text.get(shown..).filter(|new| !new.is_empty()) {
                on_text(new);
                shown = text.len();
            }
        };
        if self.endpoint.settings.streaming {
            // The next frame, or `None` once the request's deadline passed.
            async fn before<T>(
                deadline: Option<std::time::Instant>,
                next: impl std::future::Future<Output = T>,
            ) -> Option<T> {
                match deadline {
                    Some(at) => tokio::time::timeout_at(at.into(), next).await.ok(),
                    None => Some(next.await),
                }
            }
            let mut cut = false;
            match W::FRAMING {
                Framing::Sse => {
                    let mut events = response.events();
                    loop {
                        let Some(next) = before(request.deadline, events.next()).await else {
                            cut = true;
                            break;
                        };
                        let Some(event) = next else { break };
                        let event = event.map_err(|error| keep_text(error, &turn.text_so_far()))?;
                        let Some(data) = event.data else { continue };
                        let done = turn.feed(event.event.as_deref(), &data, &scrub)?;
                        show(&turn);
                        if done {
                            break;
                        }
                    }
                }
                Framing::Lines => {
                    let mut lines = response.lines();
                    loop {
                        let Some(next) = before(request.deadline, lines.next()).await else {
                            cut = true;
                            break;
                        };
                        let Some(line) = next else { break };
                        let line = line.map_err(|error| keep_text(error, &turn.text_so_far()))?;
                        let done = turn.feed(None, &line, &scrub)?;
                        show(&turn);
                        if done {
                            break;
                        }
                    }
                }
            }
            if cut {
                // The turn as far as it came: its text and any usage the
                // server sent; a call in it may be unfinished, so none
                // is kept.
                let mut partial = turn.finish(request, false);
                partial.tool_calls.clear();
                partial.finish_reason = FinishReason::Interrupted;
                return Ok(partial);
            }
            if !turn.complete() {
                return Err(ProviderError::Stream(format!(
                    "the stream ended before the turn was complete (no {})",
                    W::END
                )));
            }
        } else {
            turn.whole(&response.json().await?, &scrub)?;
        }
        Ok(turn.finish(request, self.endpoint.settings.text_tool_calls))
    }
}

impl<W: Wire> Provider for Streaming<W> {
    fn name(&self) -> &str {
        &self.endpoint.settings.name
    }

    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(async move { self.complete_turn(request, &mut |_| {}).await })
    }

    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        Box::pin(self.complete_turn(request, on_text))
    }
}

/// The most of a stalled turn's text an error message carries.
const KEPT_TEXT_CHARS: usize = 4_000;

/// A stream that passed its idle or total deadline after some text
/// arrived: the error (retried, then reported like any timeout) keeps
/// that text and its estimated size, so the transcript's retry or
/// `llm_calls` entry shows what the model had said.
fn keep_text(error: ProviderError, text: &str) -> ProviderError {
    match error {
        ProviderError::Timeout(message) if !text.trim().is_empty() => {
            let shown: String = text.chars().take(KEPT_TEXT_CHARS).collect();
            let more = if shown.len() < text.len() { " …" } else { "" };
            ProviderError::Timeout(format!(
                "{message}; the turn's text so far (about {} tokens) was: {shown:?}{more}",
                super::tokens::count(text)
            ))
        }
        other => other,
    }
}
