//! One request to the model: the estimate, compaction, the retries, the
//! deadline, and what the response cost.

use std::time::{Duration, Instant};

use super::{Agent, Emitter, Stop, millis};
use crate::core::event::{Event, LlmResponse, LlmRetry};
use crate::core::{Cost, Message, Reason, Usage};
use crate::llm::retry;
use crate::llm::{ChatRequest, ChatResponse, FinishReason};

/// One request as its `llm.response` record describes it, whatever
/// comes back.
struct Attempt {
    iteration: u32,
    started: Instant,
    /// The request's estimated size, as sent, and as counted here.
    estimate: u64,
    counted: u64,
    /// How the estimate was made.
    method: String,
}

impl Attempt {
    /// The `llm.response` of a request that returned no turn.
    fn failed(&self, error: &str) -> Event {
        Event::LlmResponse(LlmResponse {
            iteration: self.iteration,
            response_id: None,
            request_id: None,
            usage: Usage::default(),
            cost: Cost::Unknown,
            duration_ms: millis(self.started.elapsed()),
            tool_calls: 0,
            request_tokens_estimate: Some(self.estimate),
            request_tokens_method: Some(self.method.clone()),
            incomplete: Some(error.to_owned()),
            finish_reason: None,
            usage_estimated: false,
        })
    }
}

impl Agent<'_> {
    /// Sends the conversation (compacted near the window) and accounts
    /// for the turn that comes back.
    pub(super) async fn request(
        &mut self,
        iteration: u32,
        emitter: &mut Emitter<'_>,
    ) -> Result<ChatResponse, Stop> {
        // The conversation keeps everything; the request may be compacted.
        let prepared = self
            .compactor
            .prepare(self.fixed_tokens, &self.messages, self.correction);
        if let Some(compaction) = &prepared.compaction {
            emitter.note(compaction.note());
        }
        let method = if self.correction == 0 {
            crate::llm::tokens::METHOD.to_owned()
        } else {
            format!("{} + server count", crate::llm::tokens::METHOD)
        };
        let attempt = Attempt {
            iteration,
            started: Instant::now(),
            estimate: prepared.tokens,
            counted: prepared.counted,
            method,
        };
        let request = ChatRequest {
            model: self.setup.model.clone(),
            system: self.setup.system_prompt.clone(),
            messages: prepared.messages,
            tools: super::offered(&self.setup),
            temperature: self.setup.temperature,
            max_tokens: self.setup.max_tokens,
            // A stream still arriving when the task's time runs out is
            // cut there, and what came of it kept.
            deadline: self.budget.remaining().map(|left| attempt.started + left),
        };
        let response = self.send(&request, &attempt, emitter).await?;
        self.account(response, attempt, emitter)
    }

    /// Sends one request with retries, bounded by the task's time left.
    async fn send(
        &mut self,
        request: &ChatRequest,
        attempt: &Attempt,
        emitter: &mut Emitter<'_>,
    ) -> Result<ChatResponse, Stop> {
        let iteration = attempt.iteration;
        // The model's text goes to the live view line by line as it
        // streams in; the rest of the last line comes with the message.
        let mut partial = String::new();
        let mut on_progress = |progress: retry::Progress<'_>| match progress {
            retry::Progress::Retry(notice) => {
                partial.clear();
                emitter.emit(Event::LlmRetry(LlmRetry {
                    iteration,
                    attempt: notice.attempt,
                    delay_ms: millis(notice.delay),
                    error: notice.error.to_string(),
                }));
            }
            retry::Progress::Text(piece) => {
                partial.push_str(piece);
                while let Some(end) = partial.find('\n') {
                    emitter.text(partial[..end].trim_end_matches('\r'));
                    partial.drain(..=end);
                }
            }
        };
        // A retry wait that would pass the task's timeout fails at once.
        let mut settings = self.setup.retry;
        if let Some(left) = self.budget.remaining() {
            let deadline = attempt.started + left;
            settings.deadline = Some(settings.deadline.map_or(deadline, |d| d.min(deadline)));
        }
        // A streaming provider stops at the deadline itself and returns
        // what came; the grace lets it, and bounds any other provider.
        let call = retry::complete_live(self.setup.provider, request, settings, &mut on_progress);
        let result = match self.budget.remaining() {
            Some(left) => match tokio::time::timeout(left + DEADLINE_GRACE, call).await {
                Ok(result) => result,
                Err(_) => {
                    self.budget.cost = Cost::Unknown;
                    emitter.emit(
                        attempt.failed("the task's time ran out before the model's turn arrived"),
                    );
                    return Err(self.limit_stop(Reason::Timeout));
                }
            },
            None => call.await,
        };
        result.map_err(|error| {
            // A request that failed may still have been billed: what
            // the task cost is not known any more.
            self.budget.cost = Cost::Unknown;
            let (reason, message) = (error.reason(), error.to_string());
            if !error.before_request() {
                emitter.emit(attempt.failed(&message));
            }
            if reason.is_limit() {
                Stop::Limit { reason, message }
            } else {
                Stop::Error { reason, message }
            }
        })
    }

    /// Counts the turn's usage and cost and records its `llm.response`;
    /// a turn the task's deadline cut short is kept and ends the task.
    fn account(
        &mut self,
        mut response: ChatResponse,
        attempt: Attempt,
        emitter: &mut Emitter<'_>,
    ) -> Result<ChatResponse, Stop> {
        let interrupted = response.finish_reason == FinishReason::Interrupted;
        let mut incomplete = None;
        if interrupted {
            // A server sends usage at the end of a stream: for one cut
            // short, count what came.
            let estimated = response.usage.output_tokens == 0 && !response.content.is_empty();
            if estimated {
                response.usage.output_tokens = crate::llm::tokens::count(&response.content);
                response.usage.input_tokens = attempt.estimate;
                response.usage_estimated = true;
            }
            incomplete = Some(format!(
                "the task's time ran out while the model's turn streamed; its text so far is kept{}",
                if estimated {
                    " and its usage estimated"
                } else {
                    ""
                }
            ));
        } else if self.setup.provider.name() != "replay" && !response.usage_estimated {
            // An estimate is no correction of our count.
            self.correct(attempt.counted, response.usage.input_tokens);
        }
        let cost = self.setup.pricing.cost(&self.setup.model, response.usage);
        self.budget.usage.add(response.usage);
        self.budget.cost = self.budget.cost.plus(cost);
        emitter.emit(Event::LlmResponse(LlmResponse {
            iteration: attempt.iteration,
            response_id: response.response_id.clone(),
            request_id: response.request_id.clone(),
            usage: response.usage,
            cost,
            duration_ms: millis(attempt.started.elapsed()),
            tool_calls: response.tool_calls.len(),
            request_tokens_estimate: Some(attempt.estimate),
            request_tokens_method: Some(attempt.method),
            incomplete,
            finish_reason: Some(response.finish_reason.as_str().to_owned()),
            usage_estimated: response.usage_estimated,
        }));
        if interrupted {
            self.push(
                Message::Assistant {
                    content: response.content,
                    tool_calls: Vec::new(),
                },
                emitter,
            );
            return Err(self.limit_stop(Reason::Timeout));
        }
        Ok(response)
    }

    /// Takes the server's count of a request (`input_tokens`) as the
    /// truth for the next estimates: the difference from our count is
    /// its chat template and tokenizer. A count far from ours (a server
    /// that leaves cached tokens out, or reports none) is not used.
    pub(super) fn correct(&mut self, counted: u64, server: u64) {
        if counted == 0 || server == 0 {
            return;
        }
        #[expect(clippy::cast_precision_loss, reason = "a ratio of token counts")]
        let ratio = server as f64 / counted as f64;
        if (0.5..=3.0).contains(&ratio) {
            self.correction = i64::try_from(server).unwrap_or(i64::MAX)
                - i64::try_from(counted).unwrap_or(i64::MAX);
        }
    }
}

/// How long past the task's deadline a request may take to return: a
/// streaming provider stops at the deadline and returns the turn so far.
pub(super) const DEADLINE_GRACE: Duration = Duration::from_secs(1);
