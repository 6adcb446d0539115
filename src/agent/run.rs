//! The loop itself: request, decide, run, repeat.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;

use super::approve::{Approval, Approver};
use super::context::{self, Compactor, ContextWindow};
use super::emitter::Emitter;
use super::limits::{Budget, Limits};
use super::loop_guard::LoopGuard;
use crate::core::event::{Event, PendingCall, PendingKind};
use crate::core::text::truncate_middle;
use crate::core::{Cost, Message, Reason, Redactor, ToolCall, Usage};
use crate::llm::pricing::PriceTable;
use crate::llm::retry::{self, RetrySettings};
use crate::llm::{ChatRequest, FinishReason, Provider};
use crate::policy::{CallView, Decision, OnAsk, Policy, RuleRef, Verdict};
use crate::tools::{Registry, Target, Tool, ToolCtx, ToolError};

/// Runs `script` calls: each tool command is decided like a direct call.
#[cfg(feature = "script")]
mod script;

/// Everything one task's loop needs, resolved.
pub struct AgentSetup<'a> {
    pub provider: &'a dyn Provider,
    pub tools: &'a Registry,
    pub ctx: &'a ToolCtx,
    pub policy: &'a Policy,
    pub pricing: &'a PriceTable,
    pub model: String,
    pub system_prompt: String,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub limits: Limits,
    /// The model's window and the compaction threshold (docs/agent-loop.md Context).
    pub context: ContextWindow,
    pub retry: RetrySettings,
    /// Decide and record tool calls, but do not run them.
    pub dry_run: bool,
    /// Secrets to mask in what the model is sent (docs/security.md S7): tool
    /// results and the user messages ybs adds (a failing check's output).
    /// The sinks redact what is written; this keeps the values out of the
    /// provider's requests too.
    pub redactor: &'a Redactor,
    /// `--interactive` on a TTY: asks a human about `ask` decisions
    /// instead of `policy.on_ask`. `None` in every headless run (S3).
    pub approver: Option<&'a dyn Approver>,
}

/// Why the loop stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum Stop {
    /// The model answered without a tool call.
    Answered { content: String },
    /// A limit ended the run (iterations, timeout, budgets, loop).
    Limit { reason: Reason, message: String },
    /// The task failed for another reason (a required step denied).
    Failed { reason: Reason, message: String },
    /// Infrastructure or internal error (provider, auth, ybs bug).
    Error { reason: Reason, message: String },
    /// The turn called caller tools or asked for approval under
    /// `on_ask: pause`: the task waits for `ybs resume` (docs/resume.md).
    /// The turn's other calls ran; these have no result yet.
    Paused { pending: Vec<PendingCall> },
}

/// How `ybs resume` answers one pending call.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A caller tool's output (any JSON; a string is passed as it is).
    Output(serde_json::Value),
    /// A caller tool failed with this message.
    Error(String),
    /// An approval: run the call (decided by the policy again), or not.
    Approved(bool),
}

/// What deciding a call led to.
enum Admission {
    Run(Arc<dyn Tool>),
    /// Refused; recorded and worded for the model.
    Refused(Message),
    /// Waits for the caller; its decision is recorded.
    Pause(PendingCall),
}

/// One task's conversation and its bookkeeping.
pub struct Agent<'a> {
    setup: AgentSetup<'a>,
    messages: Vec<Message>,
    budget: Budget,
    guard: LoopGuard,
    /// Elides older tool results from requests near the window.
    compactor: Compactor,
    /// System prompt and tool schemas, in tokens: the fixed part of every
    /// request.
    fixed_tokens: u64,
    /// The server's count of the last request minus ours: added to the
    /// next estimate (0 until a server counts plausibly).
    correction: i64,
    /// Files the tools created, modified or deleted, relative to the workdir.
    pub changed: BTreeSet<PathBuf>,
    /// Files the user had uncommitted changes in when the run started
    /// (`--allow-dirty`), absolute: no file tool may write them.
    user_changed: BTreeSet<PathBuf>,
    /// The `script` call whose tool commands are being handled: their
    /// records name it, and nobody is asked to approve them.
    parent: Option<String>,
    /// `ybs resume`: the approvals given for pending calls, by call id,
    /// and who gave them.
    resumed: std::collections::HashMap<String, bool>,
    resumed_by: String,
}

impl<'a> Agent<'a> {
    /// Starts a conversation with the task's prompt.
    pub fn new(setup: AgentSetup<'a>, prompt: &str, emitter: &mut Emitter<'_>) -> Self {
        let mut agent = Self::resume(setup, Vec::new());
        agent.push(Message::user(prompt), emitter);
        agent
    }

    /// Carries on a conversation (`ybs chat`, after a provider or model
    /// change) with a fresh budget; nothing is emitted.
    pub fn resume(setup: AgentSetup<'a>, messages: Vec<Message>) -> Self {
        // Counted first: loading the tokenizer is not the task's time.
        let fixed_tokens = context::fixed_tokens(&setup.system_prompt, &setup.tools.specs());
        let mut budget = Budget::new(setup.limits.clone());
        // Unknown cost is "unknown" from the start, never $0 (docs/agent-loop.md).
        if setup.pricing.price(&setup.model).is_none() {
            budget.cost = Cost::Unknown;
        }
        let compactor = Compactor::new(setup.context);
        Self {
            setup,
            messages,
            budget,
            guard: LoopGuard::default(),
            compactor,
            fixed_tokens,
            correction: 0,
            changed: BTreeSet::new(),
            user_changed: BTreeSet::new(),
            parent: None,
            resumed: std::collections::HashMap::new(),
            resumed_by: String::new(),
        }
    }

    /// `ybs resume`: what the paused halves spent counts against the
    /// same limits (iterations, tokens, cost and running time).
    pub fn carry(&mut self, iterations: u32, usage: Usage, cost: Cost, elapsed: Duration) {
        self.budget.carry(iterations, usage, cost, elapsed);
    }

    /// `ybs resume`: the loop guard's count and whether the wrap-up
    /// warning was given, as the paused half left them, so neither starts
    /// over at a pause (docs/resume.md).
    pub fn carry_guards(&mut self, guard: LoopGuard, warned: bool) {
        self.guard = guard;
        self.budget.carry_warned(warned);
    }

    /// The loop guard, for a paused task's state.
    pub fn loop_guard(&self) -> &LoopGuard {
        &self.guard
    }

    /// Whether the wrap-up warning was given, for a paused task's state.
    pub fn wrap_up_warned(&self) -> bool {
        self.budget.warned()
    }

    /// `ybs resume`: answers the calls of the last turn that have no
    /// result yet (as listed in the state's `pending`), in the turn's
    /// order: a caller tool's output or error becomes its result (masked
    /// and capped like any tool output); an approved call is decided by
    /// the policy again and runs if it allows or asks; a denied one gets
    /// the refusal. `Some(stop)` when the task cannot go on: it paused
    /// again (an approved call to a caller tool), or a call failed it.
    pub async fn answer(
        &mut self,
        answers: &std::collections::HashMap<String, Answer>,
        by: &str,
        emitter: &mut Emitter<'_>,
    ) -> Option<Stop> {
        by.clone_into(&mut self.resumed_by);
        let open = self.open_calls();
        let mut pending = Vec::new();
        for call in &open {
            let message = match answers.get(&call.id) {
                Some(Answer::Output(value)) => {
                    let text = match value {
                        serde_json::Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    self.completed(call, true, true, Duration::ZERO, &text, emitter)
                }
                Some(Answer::Error(error)) => {
                    let text = format!("error: {error}");
                    self.completed(call, false, true, Duration::ZERO, &text, emitter)
                }
                Some(Answer::Approved(yes)) => {
                    self.resumed.insert(call.id.clone(), *yes);
                    match self.handle(call, emitter).await {
                        Ok(Admitted::Done(message)) => message,
                        Ok(Admitted::Pending(call)) => {
                            pending.push(call);
                            continue;
                        }
                        Err(stop) => return Some(stop),
                    }
                }
                None => {
                    return Some(Stop::Error {
                        reason: Reason::InternalError,
                        message: format!("pending call `{}` was not answered", call.id),
                    });
                }
            };
            self.push(message, emitter);
        }
        self.resumed.clear();
        (!pending.is_empty()).then_some(Stop::Paused { pending })
    }

    /// The calls of the last assistant turn that have no result yet.
    pub fn open_calls(&self) -> Vec<ToolCall> {
        let Some(at) = self
            .messages
            .iter()
            .rposition(|message| matches!(message, Message::Assistant { .. }))
        else {
            return Vec::new();
        };
        let answered: BTreeSet<&str> = self.messages[at + 1..]
            .iter()
            .filter_map(|message| match message {
                Message::Tool { call_id, .. } => Some(call_id.as_str()),
                _ => None,
            })
            .collect();
        match &self.messages[at] {
            Message::Assistant { tool_calls, .. } => tool_calls
                .iter()
                .filter(|call| !answered.contains(call.id.as_str()))
                .cloned()
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Refuses every file-tool write to these files (absolute paths): the
    /// user's uncommitted work under `--allow-dirty` (docs/security.md S12).
    pub fn protect_user_changes(&mut self, paths: impl IntoIterator<Item = PathBuf>) {
        self.user_changed.extend(paths);
    }

    /// The conversation, for the next [`Agent::resume`].
    pub fn into_messages(self) -> Vec<Message> {
        self.messages
    }

    pub fn iterations(&self) -> u32 {
        self.budget.iterations
    }

    /// Time left before the task timeout (`limits.timeout`), if there is
    /// one: what bounds the work done outside the loop (the checks).
    pub fn time_left(&self) -> Option<Duration> {
        self.budget.remaining()
    }

    /// The stop for a task timeout that passed outside the loop.
    pub fn timeout_stop(&self) -> Stop {
        self.limit_stop(Reason::Timeout)
    }

    pub fn usage(&self) -> Usage {
        self.budget.usage
    }

    pub fn cost(&self) -> Cost {
        self.budget.cost
    }

    pub fn messages(&self) -> &[Message] {
        &self.messages
    }

    /// Appends a user message (a failing check's output, for a fix attempt),
    /// its secrets masked.
    pub fn push_user(&mut self, text: &str, emitter: &mut Emitter<'_>) {
        let text = redact_counted(self.setup.redactor, text, emitter);
        self.push(Message::user(text), emitter);
    }

    fn push(&mut self, message: Message, emitter: &mut Emitter<'_>) {
        emitter.emit(Event::Message {
            message: message.clone(),
        });
        self.messages.push(message);
    }

    /// Runs until the model answers without a tool call, or something stops it.
    pub async fn run(&mut self, emitter: &mut Emitter<'_>) -> Stop {
        loop {
            if let Some(reason) = self.budget.exceeded() {
                return self.limit_stop(reason);
            }
            if let Some(warning) = self.budget.wrap_up_warning() {
                emitter.note(warning.clone());
                self.attach_warning(warning);
            }
            self.budget.iterations += 1;
            let iteration = self.budget.iterations;
            let response = match self.request(iteration, emitter).await {
                Ok(response) => response,
                Err(stop) => return stop,
            };
            let refusal = refused(&response);
            // The turn is kept once, in the conversation; each call is
            // copied from there only while it is handled (a call may carry
            // megabytes of file content).
            let crate::llm::ChatResponse {
                content,
                tool_calls,
                finish_reason,
                ..
            } = response;
            let count = tool_calls.len();
            // A paused turn (`pause_turn`) is no answer: the next request
            // sends it back and the model goes on (within the budget).
            let paused = finish_reason == FinishReason::Paused;
            let answer = (tool_calls.is_empty() && !paused).then(|| content.clone());
            self.push(
                Message::Assistant {
                    content,
                    tool_calls,
                },
                emitter,
            );
            if let Some(stop) = refusal {
                return stop;
            }
            if let Some(content) = answer {
                if let Some(call) =
                    crate::llm::text_calls::as_call(&content, &self.setup.tools.specs())
                {
                    emitter.note(text_call_hint(&call.name));
                }
                return Stop::Answered { content };
            }
            let turn_at = self.messages.len() - 1;
            let max_calls = self.setup.limits.max_tool_calls_per_turn;
            let mut pending = Vec::new();
            for index in 0..count {
                let Some(call) = self.turn_call(turn_at, index) else {
                    break;
                };
                let call = &call;
                if self.guard.record(call) {
                    return Stop::Limit {
                        reason: Reason::LoopDetected,
                        message: format!(
                            "the model made the same call {} times in a row: {}",
                            super::loop_guard::REPEATS,
                            crate::core::text::truncate_middle(&call.signature(), 200).0
                        ),
                    };
                }
                let result = if index >= max_calls {
                    self.refuse(
                        call,
                        "invalid",
                        "limit:tool_calls_per_turn",
                        &format!(
                            "{}: too many tool calls in one turn (limit {max_calls})",
                            not_run(call)
                        ),
                        emitter,
                    )
                } else {
                    match self.handle(call, emitter).await {
                        Ok(Admitted::Done(message)) => message,
                        // The turn's other calls still run first.
                        Ok(Admitted::Pending(call)) => {
                            pending.push(call);
                            continue;
                        }
                        Err(stop) => return stop,
                    }
                };
                self.push(result, emitter);
            }
            if !pending.is_empty() {
                return Stop::Paused { pending };
            }
        }
    }

    /// A copy of call `index` of the assistant message at `at`.
    fn turn_call(&self, at: usize, index: usize) -> Option<ToolCall> {
        match self.messages.get(at) {
            Some(Message::Assistant { tool_calls, .. }) => tool_calls.get(index).cloned(),
            _ => None,
        }
    }

    fn limit_stop(&self, reason: Reason) -> Stop {
        let limits = &self.setup.limits;
        let message = match reason {
            Reason::MaxIterations => format!(
                "stopped after {} iterations (max_iterations)",
                limits.max_iterations
            ),
            Reason::Timeout => format!(
                "stopped after {}s (timeout {}s)",
                self.budget.elapsed().as_secs(),
                limits.timeout.map_or(0, |t| t.as_secs())
            ),
            Reason::TokenBudget => format!(
                "used {} tokens (max_total_tokens {})",
                self.budget.usage.total(),
                limits.max_total_tokens.unwrap_or(0)
            ),
            Reason::CostBudget => format!(
                "spent {} (max_cost_usd {})",
                self.budget.cost,
                limits.max_cost_usd.unwrap_or(0.0)
            ),
            other => other.to_string(),
        };
        Stop::Limit { reason, message }
    }

    /// Puts the wrap-up warning where every provider accepts it: after the
    /// last tool result, or as a user message.
    fn attach_warning(&mut self, warning: String) {
        match self.messages.last_mut() {
            Some(Message::Tool { content, .. }) => {
                content.push_str("\n\n");
                content.push_str(&warning);
            }
            _ => self.messages.push(Message::user(warning)),
        }
    }

    async fn request(
        &mut self,
        iteration: u32,
        emitter: &mut Emitter<'_>,
    ) -> Result<crate::llm::ChatResponse, Stop> {
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
        let started = Instant::now();
        let request = ChatRequest {
            model: self.setup.model.clone(),
            system: self.setup.system_prompt.clone(),
            messages: prepared.messages,
            tools: self.setup.tools.specs(),
            temperature: self.setup.temperature,
            max_tokens: self.setup.max_tokens,
            // A stream still arriving when the task's time runs out is
            // cut there, and what came of it kept.
            deadline: self.budget.remaining().map(|left| started + left),
        };
        let failed = |error: &str, elapsed: Duration| Event::LlmResponse {
            iteration,
            response_id: None,
            request_id: None,
            usage: Usage::default(),
            cost: Cost::Unknown,
            duration_ms: millis(elapsed),
            tool_calls: 0,
            request_tokens_estimate: Some(prepared.tokens),
            request_tokens_method: Some(method.clone()),
            incomplete: Some(error.to_owned()),
        };
        // The model's text goes to the live view line by line as it
        // streams in; the rest of the last line comes with the message.
        let mut partial = String::new();
        let mut on_progress = |progress: retry::Progress<'_>| match progress {
            retry::Progress::Retry(notice) => {
                partial.clear();
                emitter.emit(Event::LlmRetry {
                    iteration,
                    attempt: notice.attempt,
                    delay_ms: millis(notice.delay),
                    error: notice.error.to_string(),
                });
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
            let deadline = started + left;
            settings.deadline = Some(settings.deadline.map_or(deadline, |d| d.min(deadline)));
        }
        // A streaming provider stops at the deadline itself and returns
        // what came; the grace lets it, and bounds any other provider.
        let call = retry::complete_live(self.setup.provider, &request, settings, &mut on_progress);
        let result = match self.budget.remaining() {
            Some(left) => match tokio::time::timeout(left + DEADLINE_GRACE, call).await {
                Ok(result) => result,
                Err(_) => {
                    self.budget.cost = Cost::Unknown;
                    emitter.emit(failed(
                        "the task's time ran out before the model's turn arrived",
                        started.elapsed(),
                    ));
                    return Err(self.limit_stop(Reason::Timeout));
                }
            },
            None => call.await,
        };
        let mut response = match result {
            Ok(response) => response,
            Err(error) => {
                // A request that failed may still have been billed: what
                // the task cost is not known any more.
                self.budget.cost = Cost::Unknown;
                let (reason, message) = (error.reason(), error.to_string());
                if !error.before_request() {
                    emitter.emit(failed(&message, started.elapsed()));
                }
                return Err(if reason.is_limit() {
                    Stop::Limit { reason, message }
                } else {
                    Stop::Error { reason, message }
                });
            }
        };
        let interrupted = response.finish_reason == FinishReason::Interrupted;
        let mut incomplete = None;
        if interrupted {
            // A server sends usage at the end of a stream: for one cut
            // short, count what came.
            let estimated = response.usage.output_tokens == 0 && !response.content.is_empty();
            if estimated {
                response.usage.output_tokens = crate::llm::tokens::count(&response.content);
                response.usage.input_tokens = prepared.tokens;
            }
            incomplete = Some(format!(
                "the task's time ran out while the model's turn streamed; its text so far is kept{}",
                if estimated {
                    " and its usage estimated"
                } else {
                    ""
                }
            ));
        } else if self.setup.provider.name() != "replay" {
            self.correct(prepared.counted, response.usage.input_tokens);
        }
        let cost = self.setup.pricing.cost(&self.setup.model, response.usage);
        self.budget.usage.add(response.usage);
        self.budget.cost = self.budget.cost.plus(cost);
        emitter.emit(Event::LlmResponse {
            iteration,
            response_id: response.response_id.clone(),
            request_id: response.request_id.clone(),
            usage: response.usage,
            cost,
            duration_ms: millis(started.elapsed()),
            tool_calls: response.tool_calls.len(),
            request_tokens_estimate: Some(prepared.tokens),
            request_tokens_method: Some(method),
            incomplete,
        });
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
    fn correct(&mut self, counted: u64, server: u64) {
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

    /// Decides and (if allowed) runs one call; returns the tool message,
    /// or the call when it waits for the caller.
    async fn handle(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Admitted, Stop> {
        match self.admission(call, emitter).await? {
            Admission::Run(tool) => self
                .execute(call, tool.as_ref(), emitter)
                .await
                .map(Admitted::Done),
            Admission::Refused(refused) => Ok(Admitted::Done(refused)),
            Admission::Pause(pending) => Ok(Admitted::Pending(pending)),
        }
    }

    /// Resolves and decides one call: the tool when it may run, or the
    /// refusal, already recorded and worded for the model. Inside a
    /// `script` nothing pauses (see [`Self::admission`]).
    #[cfg(feature = "script")]
    async fn admit(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Result<Arc<dyn Tool>, Message>, Stop> {
        Ok(match self.admission(call, emitter).await? {
            Admission::Run(tool) => Ok(tool),
            Admission::Refused(message) => Err(message),
            Admission::Pause(pending) => {
                let text = format!(
                    "`{}` waits for the caller (rule `{}`) and cannot be called from here; the call was not run",
                    call.name, pending.rule
                );
                Err(self.completed(call, false, false, Duration::ZERO, &text, emitter))
            }
        })
    }

    /// [`Self::admit`], with the third way out: a caller tool the policy
    /// allows, or an `ask` under `on_ask: pause`, waits for the caller.
    /// Neither pauses inside a `script` (refused there) or under
    /// `--dry-run` (recorded, not run).
    async fn admission(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Admission, Stop> {
        let (tool, target) = match self.resolve(call, emitter)? {
            Resolved::Ready(tool, target) => (tool, target),
            Resolved::Refused(message) => return Ok(Admission::Refused(message)),
        };
        if let Some(path) = self.users_file(tool.as_ref(), &target) {
            let text = format!(
                "`{path}` holds the user's uncommitted changes from before this run; leave it alone: \
                 do not write, edit or delete it, and make your change elsewhere or report that it is needed; \
                 the call was not run"
            );
            return Ok(Admission::Refused(self.refuse(
                call,
                "deny",
                "guard:user_changes",
                &text,
                emitter,
            )));
        }
        let (decision, approval) = self.decide(call, &target, emitter).await;
        let rule = decision.rule.to_string();
        let pausable = self.parent.is_none() && !self.setup.dry_run;
        if decision.verdict == Verdict::Ask
            && approval.is_none()
            && self.setup.policy.on_ask() == OnAsk::Pause
            && pausable
        {
            return Ok(Admission::Pause(pending(call, PendingKind::Approval, rule)));
        }
        if let Some(refused) = self.gate(call, &decision, approval, emitter)? {
            return Ok(Admission::Refused(refused));
        }
        if tool.is_caller() && !self.setup.dry_run {
            if !pausable {
                let text = format!(
                    "`{}` is run by the caller of ybs and cannot be called from a script; call it directly; the call was not run",
                    call.name
                );
                return Ok(Admission::Refused(self.completed(
                    call,
                    false,
                    false,
                    Duration::ZERO,
                    &text,
                    emitter,
                )));
            }
            return Ok(Admission::Pause(pending(call, PendingKind::Caller, rule)));
        }
        Ok(Admission::Run(tool))
    }

    /// Finds the tool and what the call acts on. A call that cannot be
    /// resolved is refused with a result the model sees.
    fn resolve(&self, call: &ToolCall, emitter: &mut Emitter<'_>) -> Result<Resolved, Stop> {
        if let Some(problem) = &call.invalid_arguments {
            let text = format!("{}: {problem}", not_run(call));
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "arguments",
                &text,
                emitter,
            )));
        }
        // A tool withheld from the offer is decided like any other: the
        // policy refuses the call and the record names its rule.
        let found =
            (self.setup.tools.get(&call.name)).or_else(|| self.setup.tools.withheld(&call.name));
        let Some(tool) = found.cloned() else {
            let text = format!(
                "{}: unknown tool `{}`; the tools are {}",
                not_run(call),
                call.name,
                self.setup.tools.names().join(", ")
            );
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "unknown_tool",
                &text,
                emitter,
            )));
        };
        if !call.arguments.is_object() {
            let text = format!(
                "{}: its arguments must be a JSON object (the tool's schema)",
                not_run(call)
            );
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "arguments",
                &text,
                emitter,
            )));
        }
        match tool.target(&call.arguments, self.setup.ctx) {
            Ok(target) => Ok(Resolved::Ready(tool, target)),
            Err(ToolError::Model(message)) => Ok(Resolved::Refused(
                self.refuse_unresolved(call, &message, emitter),
            )),
            Err(ToolError::Fatal(message)) => Err(Stop::Error {
                reason: Reason::InternalError,
                message,
            }),
        }
    }

    /// The path a file-writing call targets when it is one of the user's
    /// changed files (see [`Agent::protect_user_changes`]).
    fn users_file<'t>(&self, tool: &dyn Tool, target: &'t Target) -> Option<&'t str> {
        if self.user_changed.is_empty() || !tool.is_mutating() || target.command.is_some() {
            return None;
        }
        let path = target.path.as_deref()?;
        let joined = self.setup.ctx.workdir.join(path);
        // The parent resolved, the name as given: a symlink named by the
        // user's path is the user's path.
        let absolute = match (joined.parent(), joined.file_name()) {
            (Some(parent), Some(name)) => parent
                .canonicalize()
                .map_or_else(|_| joined.clone(), |parent| parent.join(name)),
            _ => joined.clone(),
        };
        (self.user_changed.contains(&absolute) || self.user_changed.contains(&joined))
            .then_some(path)
    }

    /// Asks the policy (and, for `ask` under `--interactive`, the human)
    /// and records the decision (S13). A human's answer is recorded as the
    /// verdict it gave, the rule saying so.
    async fn decide(
        &self,
        call: &ToolCall,
        target: &Target,
        emitter: &mut Emitter<'_>,
    ) -> (Decision, Option<Approval>) {
        // For run_shell the resolved path is its working directory.
        let (path, cwd) = match target.command {
            Some(_) => (None, target.path.as_deref()),
            None => (target.path.as_deref(), None),
        };
        let view = CallView {
            tool: &call.name,
            path,
            command: target.command.as_deref(),
            cwd,
        };
        let decision = self.setup.policy.decide(&view);
        // A tool command inside a script is never put to a human: `ask`
        // resolves as in a headless run.
        let approver = self.setup.approver.filter(|_| self.parent.is_none());
        // `ybs resume` answered this call: an approval stands in for a
        // human's only where the policy (read again) still asks; a denial
        // stands wherever the policy would let the call run.
        let resumed = self
            .resumed
            .get(&call.id)
            .copied()
            .filter(|_| self.parent.is_none());
        let approval = match (decision.verdict, resumed, approver) {
            (Verdict::Ask, Some(yes), _) => Some(if yes { Approval::Yes } else { Approval::No }),
            (Verdict::Allow, Some(false), _) => Some(Approval::No),
            (Verdict::Ask, None, Some(approver)) => {
                Some(approver.approve(call, &view, &decision).await)
            }
            _ => None,
        };
        let (verdict, rule) = match approval {
            None if decision.verdict == Verdict::Deny && resumed == Some(true) => (
                Verdict::Deny,
                format!(
                    "{} (approved at resume by {}, but the policy read again denies it)",
                    decision.rule, self.resumed_by
                ),
            ),
            None => (decision.verdict, decision.rule.to_string()),
            Some(approval) => (
                if approval == Approval::No {
                    Verdict::Deny
                } else {
                    Verdict::Allow
                },
                match resumed {
                    Some(yes) => format!(
                        "{} ({} at resume by {})",
                        decision.rule,
                        if yes { "approved" } else { "denied" },
                        self.resumed_by
                    ),
                    None => format!("{} ({})", decision.rule, approval.note()),
                },
            ),
        };
        emitter.emit(Event::ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: verdict.as_str().to_owned(),
            rule,
            detail: decision.detail.clone(),
            resolved: Some(json!({
                "path": decision.path.as_deref().or(path),
                "working_directory": cwd,
                "command": target.command,
                "argv": decision.parsed,
            })),
            parent: self.parent.clone(),
        });
        (decision, approval)
    }

    /// Turns a `deny` or `ask` into the result the model sees, or into a
    /// failed task under `on_ask: fail`. `None` when the call may run.
    fn gate(
        &self,
        call: &ToolCall,
        decision: &Decision,
        approval: Option<Approval>,
        emitter: &mut Emitter<'_>,
    ) -> Result<Option<Message>, Stop> {
        let rule = decision.rule.to_string();
        match approval {
            Some(Approval::Yes | Approval::Always) => return Ok(None),
            Some(Approval::No) => {
                let text =
                    if self.resumed.contains_key(&call.id) && decision.verdict == Verdict::Allow {
                        format!(
                            "{} denied this call at resume; the policy read again would allow it \
                         (rule `{rule}`), but the denial stands; the call was not run",
                            self.resumed_by
                        )
                    } else if self.resumed.contains_key(&call.id) {
                        format!(
                            "this call needs approval (rule `{rule}`) and {} denied it; \
                         the call was not run",
                            self.resumed_by
                        )
                    } else {
                        format!(
                            "the user declined this call at the approval prompt (rule `{rule}`); \
                         the call was not run"
                        )
                    };
                return Ok(Some(self.completed(
                    call,
                    false,
                    false,
                    Duration::ZERO,
                    &text,
                    emitter,
                )));
            }
            None => {}
        }
        let why = decision
            .detail
            .as_ref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        let text = match (decision.verdict, self.setup.policy.on_ask()) {
            (Verdict::Allow, _) => return Ok(None),
            (Verdict::Deny, _) if self.resumed.get(&call.id) == Some(&true) => format!(
                "denied by policy (rule `{rule}`){why}; it was approved at resume by {}, but the \
                 policy read again denies it; the call was not run",
                self.resumed_by
            ),
            (Verdict::Deny, _) => {
                format!("denied by policy (rule `{rule}`){why}; the call was not run")
            }
            (Verdict::Ask, OnAsk::Deny) => format!(
                "this call needs approval (rule `{rule}`){why}, and nobody can approve it in this \
                 headless run (policy.on_ask: deny); the call was not run"
            ),
            // `pause` gets here only where nothing can pause: a tool
            // command inside a script, or `--dry-run`.
            (Verdict::Ask, OnAsk::Pause) if self.setup.dry_run => {
                "[dry-run] this call needs approval; the run would pause for it (policy.on_ask: pause)".to_owned()
            }
            (Verdict::Ask, OnAsk::Pause) => format!(
                "this call needs approval (rule `{rule}`){why}, and a tool command inside a script \
                 cannot pause for it (policy.on_ask: pause); call it directly; the call was not run"
            ),
            (Verdict::Ask, OnAsk::Fail) => {
                let text = format!(
                    "`{}` needs approval (rule `{rule}`){why} and policy.on_ask is fail",
                    call.name
                );
                self.completed(call, false, false, Duration::ZERO, &text, emitter);
                return Err(Stop::Failed {
                    reason: Reason::PolicyDenied,
                    message: text,
                });
            }
        };
        Ok(Some(self.completed(
            call,
            false,
            false,
            Duration::ZERO,
            &text,
            emitter,
        )))
    }

    /// Runs an allowed call (or only records it under `--dry-run`).
    async fn execute(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        emitter: &mut Emitter<'_>,
    ) -> Result<Message, Stop> {
        if self.setup.dry_run {
            let text = "[dry-run] allowed by policy, not executed";
            return Ok(self.completed(call, true, false, Duration::ZERO, text, emitter));
        }
        #[cfg(feature = "script")]
        if let Some(script) = tool.as_script() {
            return self.run_script(call, script, emitter).await;
        }
        self.run_tool(call, tool, emitter).await
    }

    /// Runs an allowed call of an ordinary tool.
    async fn run_tool(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        emitter: &mut Emitter<'_>,
    ) -> Result<Message, Stop> {
        let started = Instant::now();
        let run = tool.call(call.arguments.clone(), self.setup.ctx);
        let outcome = match self.budget.remaining() {
            Some(left) => match tokio::time::timeout(left, run).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(self.limit_stop(Reason::Timeout)),
            },
            None => run.await,
        };
        let elapsed = started.elapsed();
        match outcome {
            Ok(output) => {
                self.changed.extend(output.changed);
                Ok(self.completed(call, true, true, elapsed, &output.content, emitter))
            }
            Err(ToolError::Model(message)) => {
                Ok(self.completed(call, false, true, elapsed, &message, emitter))
            }
            Err(ToolError::Fatal(message)) => Err(Stop::Error {
                reason: Reason::InternalError,
                message,
            }),
        }
    }

    /// Records a call whose arguments the tool refused to resolve (a path
    /// outside the roots or through a symlink out of them, a blocked or
    /// protected path, a FIFO, a missing parameter). The policy is still
    /// asked about the arguments as written, so the record names the guard
    /// that forbids them where one does, as `ybs policy explain` would,
    /// and carries the path as far as it resolves (S13); the model gets
    /// the tool's own reason.
    fn refuse_unresolved(
        &self,
        call: &ToolCall,
        message: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        let arguments = &call.arguments;
        let text_argument = |name: &str| arguments.get(name).and_then(serde_json::Value::as_str);
        let command = text_argument("command");
        let (path, cwd) = match command {
            Some(_) => (None, text_argument("working_directory")),
            None => (text_argument("path"), None),
        };
        let view = CallView {
            tool: &call.name,
            path,
            command,
            cwd,
        };
        let decision = self.setup.policy.decide(&view);
        let rule = match (decision.verdict, &decision.rule) {
            (Verdict::Deny, RuleRef::Guard { .. }) => decision.rule.to_string(),
            _ => "guard:arguments".to_owned(),
        };
        let text = format!("{}: {message}", not_run(call));
        emitter.emit(Event::ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: Verdict::Deny.as_str().to_owned(),
            rule,
            detail: Some(text.clone()),
            resolved: Some(json!({
                "path": decision.path.as_deref().or(path),
                "working_directory": cwd,
                "command": command,
                "argv": decision.parsed,
            })),
            parent: self.parent.clone(),
        });
        self.completed(call, false, false, Duration::ZERO, &text, emitter)
    }

    /// Records a call refused before policy (bad arguments, unknown tool).
    fn refuse(
        &self,
        call: &ToolCall,
        verdict: &str,
        rule: &str,
        text: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        emitter.emit(Event::ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: verdict.to_owned(),
            rule: rule.to_owned(),
            detail: Some(text.to_owned()),
            resolved: None,
            parent: self.parent.clone(),
        });
        self.completed(call, false, false, Duration::ZERO, text, emitter)
    }

    /// Masks secrets, truncates the output, records `tool.completed`,
    /// builds the message. Masking comes first so a cut cannot leave half
    /// a secret that no longer matches.
    fn completed(
        &self,
        call: &ToolCall,
        ok: bool,
        ran: bool,
        elapsed: Duration,
        output: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        let output = redact_counted(self.setup.redactor, output, emitter);
        let (content, truncated) =
            truncate_middle(&output, self.setup.limits.max_tool_output_chars);
        emitter.emit(Event::ToolCompleted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            ran,
            duration_ms: millis(elapsed),
            truncated,
            output: content.clone(),
        });
        Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: !ok,
        }
    }
}

/// What handling a call gave: its result, or the call waiting for the
/// caller.
enum Admitted {
    Done(Message),
    Pending(PendingCall),
}

/// The pending record of `call`.
fn pending(call: &ToolCall, kind: PendingKind, rule: String) -> PendingCall {
    PendingCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        kind,
        rule,
    }
}

/// How long past the task's deadline a request may take to return: a
/// streaming provider stops at the deadline and returns the turn so far.
const DEADLINE_GRACE: Duration = Duration::from_secs(1);

/// How every refusal of a call begins; what follows says why.
fn not_run(call: &ToolCall) -> String {
    if call.name.trim().is_empty() {
        "the call was not run".to_owned()
    } else {
        format!("the `{}` call was not run", call.name)
    }
}

/// The note for an answer that is a tool call written as text while
/// `llm.text_tool_calls` is off: the task ends on it as an answer.
pub fn text_call_hint(tool: &str) -> String {
    format!(
        "{}the model's answer is a `{tool}` tool call written as JSON text, not a structured call, \
         so it was taken as the answer; models that write calls as text need \
         `llm.text_tool_calls: true` in a config file",
        crate::core::event::HINT
    )
}

/// What resolving a call gave: the tool and its target, or a refusal
/// already recorded and worded for the model.
enum Resolved {
    Ready(Arc<dyn Tool>, Target),
    Refused(Message),
}

/// A turn the model refused or the provider's filter ended: the task
/// fails with its own reason (never a pass), and none of its calls run.
fn refused(response: &crate::llm::ChatResponse) -> Option<Stop> {
    let (reason, what) = match response.finish_reason {
        FinishReason::Refusal => (Reason::Refusal, "the model refused"),
        FinishReason::ContentFilter => (
            Reason::ContentFilter,
            "the provider's content filter ended the model's turn",
        ),
        _ => return None,
    };
    let said = response.content.trim();
    let message = if said.is_empty() {
        what.to_owned()
    } else {
        format!("{what}: {}", truncate_middle(said, 300).0)
    };
    Some(Stop::Failed { reason, message })
}

/// Masks the secrets in a text on its way into the conversation, and
/// reports what it masked (`task.redactions`; the runner sums them per task).
fn redact_counted(redactor: &Redactor, text: &str, emitter: &mut Emitter<'_>) -> String {
    let mut counts = crate::core::redact::Redactions::new();
    let clean = redactor.redact_counting(text, &mut counts);
    if !counts.is_empty() {
        emitter.emit(Event::Redactions { counts });
    }
    clean
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
