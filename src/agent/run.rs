//! The loop itself: request, decide, run, repeat.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use super::answer_tool;
use super::approve::Approver;
use super::context::{self, Compactor, ContextWindow};
use super::emitter::Emitter;
use super::limits::{Budget, Limits};
use super::loop_guard::LoopGuard;
use crate::core::event::{Event, MessageAppended, PendingCall, Redactions};
use crate::core::text::truncate_middle;
use crate::core::{Cost, Message, Reason, Redactor, ToolCall, Usage};
use crate::llm::pricing::PriceTable;
use crate::llm::retry::RetrySettings;
use crate::llm::{FinishReason, Provider};
use crate::policy::Policy;
use crate::tools::{Registry, ToolCtx};

/// Deciding each call: resolve, decide, gate, run or pause.
mod admission;
/// `ybs resume`'s answers and the state a paused half carries.
mod answers;
/// Replies that are no final answer: empty, cut, or with a made-up result.
mod nudge;
/// Running an admitted call and recording each call's result.
mod outcome;
/// One request to the model.
mod request;
/// Runs `script` calls: each tool command is decided like a direct call.
#[cfg(feature = "script")]
mod script;
/// The admission table, and the loop with a scripted provider.
#[cfg(test)]
mod tests;

use admission::Admitted;
pub use answers::Answer;
use outcome::not_run;

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
    /// The task's output schema (`output:`): offered as the final-answer
    /// tool ([`super::answer_tool`]).
    pub output_schema: Option<&'a serde_json::Value>,
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

/// One task's conversation and its bookkeeping.
pub struct Agent<'a> {
    setup: AgentSetup<'a>,
    messages: Vec<Message>,
    budget: Budget,
    guard: LoopGuard,
    /// The same for replies ybs could not act on: repeated, they end the
    /// task too, but later (`loop_guard::REPLY_REPEATS`).
    replies: LoopGuard,
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
    /// What the model was told once about replies that are no answer.
    told: nudge::Told,
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
        let fixed_tokens = context::fixed_tokens(&setup.system_prompt, &offered(&setup));
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
            replies: LoopGuard::default(),
            compactor,
            fixed_tokens,
            correction: 0,
            changed: BTreeSet::new(),
            user_changed: BTreeSet::new(),
            parent: None,
            resumed: std::collections::HashMap::new(),
            resumed_by: String::new(),
            told: nudge::Told::default(),
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
        emitter.emit(Event::MessageAppended(MessageAppended {
            message: message.clone(),
        }));
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
                mut content,
                mut tool_calls,
                finish_reason,
                ..
            } = response;
            let restated = self.restated(&mut content, &mut tool_calls, emitter);
            let written = self.cut_written_calls(&content, &mut tool_calls, finish_reason);
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
            if let Some(stop) = self.same_reply(finish_reason) {
                return stop;
            }
            if let Some(content) = answer {
                match self.not_an_answer(&content, finish_reason, written, emitter) {
                    Some(None) => continue,
                    Some(Some(stop)) => return stop,
                    None => {}
                }
                let offered = offered(&self.setup);
                let written_call = (!restated)
                    .then(|| crate::llm::text_calls::as_call(&content, &offered))
                    .flatten();
                if let Some(call) = written_call {
                    emitter.note(text_call_hint(&call.name));
                } else if let Some(name) =
                    crate::llm::text_calls::unoffered_call(&content, &offered)
                {
                    emitter.note(unoffered_call_note(&name, &offered));
                }
                return Stop::Answered { content };
            }
            let turn_at = self.messages.len() - 1;
            self.note_unrun_text_calls(turn_at, emitter);
            let pending = match self.run_calls(turn_at, count, emitter).await {
                Ok(pending) => pending,
                Err(stop) => return stop,
            };
            if !pending.is_empty() {
                return Stop::Paused { pending };
            }
            // A call to the final-answer tool is the answer, once the
            // turn's other calls ran.
            if let Some(content) = self.answer_call(turn_at) {
                return Stop::Answered { content };
            }
        }
    }

    /// The answer the turn at `turn_at` gave through the final-answer
    /// tool, if it called it.
    fn answer_call(&self, turn_at: usize) -> Option<String> {
        let schema = self.setup.output_schema?;
        match self.messages.get(turn_at) {
            Some(Message::Assistant { tool_calls, .. }) => tool_calls
                .iter()
                .find(|call| call.name == answer_tool::NAME)
                .map(|call| answer_tool::answer(call, schema)),
            _ => None,
        }
    }

    /// The calls of the turn at `turn_at`, in order: each admitted and run,
    /// refused past the turn's limit, or pending (the turn's other calls
    /// still run first). A repeated call or an admission stops the loop.
    async fn run_calls(
        &mut self,
        turn_at: usize,
        count: usize,
        emitter: &mut Emitter<'_>,
    ) -> Result<Vec<PendingCall>, Stop> {
        let max_calls = self.setup.limits.max_tool_calls_per_turn;
        let mut pending = Vec::new();
        // The final-answer tool's calls are no step's tool calls.
        let mut answers = 0;
        for position in 0..count {
            let Some(call) = self.turn_call(turn_at, position) else {
                break;
            };
            let call = &call;
            if self.setup.output_schema.is_some() && call.name == answer_tool::NAME {
                answers += 1;
                let received = Message::Tool {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    content: answer_tool::RECEIVED.to_owned(),
                    is_error: false,
                };
                self.push(received, emitter);
                continue;
            }
            let index = position - answers;
            // A call ybs read from text and could not run is ybs's refusal,
            // not the model repeating a call: the iteration budget and
            // `same_reply` bound those replies.
            let unrunnable = call.from_text && call.invalid_arguments.is_some();
            if !unrunnable && self.guard.record(call) {
                return Err(Stop::Limit {
                    reason: Reason::LoopDetected,
                    message: format!(
                        "the model made the same call {} times in a row: {}",
                        super::loop_guard::REPEATS,
                        crate::core::text::truncate_middle(&call.signature(), 200).0
                    ),
                });
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
                    Err(stop) => return Err(stop),
                }
            };
            self.push(result, emitter);
        }
        Ok(pending)
    }

    /// Counts the reply just pushed when ybs can act on nothing in it: cut
    /// off by the output token limit, or holding only calls written as
    /// text that cannot run. The same such reply [`REPLY_REPEATS`] times
    /// in a row ends the task (`loop_detected`); any other reply starts
    /// the count again.
    ///
    /// [`REPLY_REPEATS`]: super::loop_guard::REPLY_REPEATS
    fn same_reply(&mut self, finish: FinishReason) -> Option<Stop> {
        let Some(Message::Assistant {
            content,
            tool_calls,
        }) = self.messages.last()
        else {
            return None;
        };
        let unrunnable = tool_calls
            .iter()
            .all(|call| call.from_text && call.invalid_arguments.is_some());
        let cut = finish == FinishReason::Length;
        if !unrunnable || (tool_calls.is_empty() && !cut) {
            self.replies = LoopGuard::default();
            return None;
        }
        if !self.replies.record_reply(content, tool_calls) {
            return None;
        }
        let why = if cut {
            "cut off at the output token limit each time"
        } else {
            "each time with calls written as text that could not be run"
        };
        Some(Stop::Limit {
            reason: Reason::LoopDetected,
            message: format!(
                "the model sent the same reply {} times in a row, {why}, although it was told \
                 each time: {}",
                super::loop_guard::REPLY_REPEATS,
                truncate_middle(content.trim(), 200).0
            ),
        })
    }

    /// A reply that looked like a call written as text and was not run
    /// is a note (docs/providers.md).
    fn note_unrun_text_calls(&self, at: usize, emitter: &mut Emitter<'_>) {
        let Some(Message::Assistant { tool_calls, .. }) = self.messages.get(at) else {
            return;
        };
        for call in tool_calls {
            if let (true, Some(problem)) = (call.from_text, &call.invalid_arguments) {
                emitter.note(format!(
                    "the model wrote a call of `{}` as text that was not run: {problem}",
                    call.name
                ));
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
}

/// The note for an answer that is a tool call written as text while
/// `llm.text_tool_calls` is off: the task ends on it as an answer.
pub fn text_call_hint(tool: &str) -> String {
    format!(
        "{}the model's answer holds a `{tool}` tool call written as JSON text, not a structured call, \
         so it was not run and the text was taken as the answer; models that write calls as text need \
         `llm.text_tool_calls: true` in a config file",
        crate::core::event::HINT
    )
}

/// The note for an answer holding a call, written as JSON text, of a
/// tool that is not offered: nothing ran, and the text is the answer.
/// The tools a request offers: the registry's, and the final-answer tool
/// of a task with an output contract.
fn offered(setup: &AgentSetup<'_>) -> Vec<crate::core::ToolSpec> {
    let mut specs = setup.tools.specs();
    specs.extend(setup.output_schema.map(answer_tool::spec));
    specs
}

fn unoffered_call_note(name: &str, tools: &[crate::core::ToolSpec]) -> String {
    let offered: Vec<String> = tools
        .iter()
        .map(|tool| format!("`{}`", tool.name))
        .collect();
    format!(
        "the model's answer holds a call of `{name}` written as JSON text, and no tool of that \
         name is offered ({}), so nothing ran and the text was taken as the answer",
        if offered.is_empty() {
            "no tools are".to_owned()
        } else {
            format!("offered: {}", offered.join(", "))
        }
    )
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
        emitter.emit(Event::Redactions(Redactions { counts }));
    }
    clean
}

fn millis(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}
