//! `ybs resume`: the answers to a paused turn's calls, and the state a
//! paused half carries over (budget, loop guard, wrap-up warning).

use std::collections::BTreeSet;
use std::time::Duration;

use super::admission::Admitted;
use super::{Agent, Emitter, Stop};
use crate::agent::loop_guard::LoopGuard;
use crate::core::{Cost, Message, Reason, ToolCall, Usage};

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

impl Agent<'_> {
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
}
