//! Replies that are no final answer: an empty one, one the output token
//! limit cut, one that makes up a tool's result. The model is told and the
//! loop goes on, within the budget (docs/agent-loop.md). And a reply that
//! only restates the call just run, which is one.

use std::sync::LazyLock;

use regex::Regex;

use super::{Agent, Emitter, Stop};
use crate::core::{Message, Reason, ToolCall, ToolSpec};
use crate::llm::FinishReason;

/// What ybs tells the model after a reply the output limit cut.
pub(super) const CUT: &str = "Your reply was cut off at the output token limit. \
     Continue where it stopped, or give a shorter answer.";
/// Added to [`CUT`] when the cut reply held several calls written as text.
pub(super) const CUT_CALLS: &str = "No tool call in it was run: send one call at a time.";
/// What ybs tells the model after its first empty reply.
pub(super) const EMPTY: &str = "Your reply was empty. Call a tool, or give your final answer.";
/// What ybs tells the model after an answer with a made-up tool result.
pub(super) const MADE_UP: &str = "Tool results come only from calling the tool; your reply \
     contains a result you wrote yourself. Call the tool, or give your final answer without it.";

/// Whether the model was told about an empty reply and a made-up result:
/// each is said once per task.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Told {
    empty: bool,
    made_up: bool,
}

impl Agent<'_> {
    /// A reply whose one call, written as text, is the call run just
    /// before it with the same arguments, which succeeded: the model
    /// restates what it did as its final answer (small models do). The
    /// call is not run again; the reply's text is the answer (the call
    /// itself when there is no other text), with a note. Structured calls
    /// and calls after anything else (a failed call, a check's output) run
    /// as they are. True if the reply was taken as a restatement.
    pub(super) fn restated(
        &self,
        content: &mut String,
        tool_calls: &mut Vec<ToolCall>,
        emitter: &mut Emitter<'_>,
    ) -> bool {
        let [call] = tool_calls.as_slice() else {
            return false;
        };
        if !call.from_text || call.invalid_arguments.is_some() {
            return false;
        }
        let Some(previous) = self.last_call_if_succeeded() else {
            return false;
        };
        if previous.signature() != call.signature() {
            return false;
        }
        emitter.note(format!(
            "the model's reply repeats, as text, its last `{}` call, which already ran and \
             succeeded; it was taken as the final answer and not run again",
            call.name
        ));
        if content.trim().is_empty() {
            *content =
                serde_json::json!({"name": call.name, "arguments": call.arguments}).to_string();
        }
        tool_calls.clear();
        true
    }

    /// The last call of the previous turn, if its result is the last
    /// message and it succeeded.
    fn last_call_if_succeeded(&self) -> Option<&ToolCall> {
        let Some(Message::Tool {
            call_id,
            is_error: false,
            ..
        }) = self.messages.last()
        else {
            return None;
        };
        let turn = self
            .messages
            .iter()
            .rev()
            .find_map(|message| match message {
                Message::Assistant { tool_calls, .. } => Some(tool_calls),
                _ => None,
            })?;
        turn.last().filter(|call| &call.id == call_id)
    }

    /// A reply the output token limit cut that holds several calls written
    /// as text: none of them ran, and the reply is a cut reply first (asked
    /// to continue), not a request for exactly one call. Takes the call
    /// that says why none ran out of the turn and returns how many calls
    /// the text held (0: the turn is left as it is).
    pub(super) fn cut_written_calls(
        &self,
        content: &str,
        tool_calls: &mut Vec<ToolCall>,
        finish: FinishReason,
    ) -> usize {
        let unrunnable = |call: &ToolCall| call.from_text && call.invalid_arguments.is_some();
        if finish != FinishReason::Length
            || tool_calls.is_empty()
            || !tool_calls.iter().all(unrunnable)
        {
            return 0;
        }
        let count = crate::llm::text_calls::written_calls(content, &self.setup.tools.specs());
        if count < 2 {
            return 0;
        }
        tool_calls.clear();
        count
    }

    /// `None` when the reply is the final answer. Otherwise the model has
    /// been told why it is not (`Some(None)`: the loop goes on), or the
    /// task ends (`Some(Some(stop))`). `written` is how many calls written
    /// as text a cut reply held ([`Self::cut_written_calls`]).
    pub(super) fn not_an_answer(
        &mut self,
        content: &str,
        finish: FinishReason,
        written: usize,
        emitter: &mut Emitter<'_>,
    ) -> Option<Option<Stop>> {
        if finish == FinishReason::Length {
            if written == 0 {
                emitter.note(
                    "the model's reply was cut off at the output token limit \
                     (llm.max_output_tokens); it was asked to continue or answer shorter"
                        .to_owned(),
                );
                self.push(Message::user(CUT), emitter);
            } else {
                emitter.note(format!(
                    "the model's reply was cut off at the output token limit \
                     (llm.max_output_tokens) holding {written} tool calls written as text, none \
                     run; it was asked to continue or answer shorter, one call at a time"
                ));
                self.push(Message::user(format!("{CUT} {CUT_CALLS}")), emitter);
            }
            return Some(None);
        }
        if content.trim().is_empty() {
            if self.told.empty {
                return Some(Some(Stop::Failed {
                    reason: Reason::EmptyAnswer,
                    message: "the model's reply was empty again after it was asked to call \
                              a tool or give its final answer"
                        .to_owned(),
                }));
            }
            self.told.empty = true;
            emitter.note(
                "the model's reply was empty; it was asked to call a tool or give its final answer"
                    .to_owned(),
            );
            self.push(Message::user(EMPTY), emitter);
            return Some(None);
        }
        let made_up = (!self.told.made_up)
            .then(|| made_up_result(content, &self.setup.tools.specs()))
            .flatten();
        if let Some(marker) = made_up {
            self.told.made_up = true;
            emitter.note(format!(
                "the model's answer holds a tool result it wrote itself ({marker}); \
                 it was told that results come only from calling the tool"
            ));
            self.push(Message::user(MADE_UP), emitter);
            return Some(None);
        }
        None
    }
}

/// The mark of a tool result the model wrote into its text instead of
/// calling the tool: a `<tool_response>`, `<tool_result>` or
/// `<tool_output>` tag, or a code fence labelled as a tool's output
/// (`tool_output`, `read_file_result`, ...).
pub(super) fn made_up_result(content: &str, tools: &[ToolSpec]) -> Option<String> {
    static TAG: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?i)<\|?tool_(?:response|result|output)s?\|?>").ok());
    static FENCE: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"(?m)^[ \t]*```[ \t]*([A-Za-z0-9_. -]+?)[ \t]*$").ok());
    if let Some(found) = TAG.as_ref().and_then(|tag| tag.find(content)) {
        return Some(format!("`{}`", found.as_str()));
    }
    for label in FENCE.as_ref()?.captures_iter(content) {
        let label = label.get(1)?.as_str();
        let words = label.to_ascii_lowercase().replace([' ', '-', '.'], "_");
        let Some(subject) = ["_output", "_outputs", "_result", "_results", "_response"]
            .iter()
            .find_map(|suffix| words.strip_suffix(suffix))
        else {
            continue;
        };
        if subject == "tool"
            || subject == "tool_call"
            || tools.iter().any(|tool| tool.name == subject)
        {
            return Some(format!("a code block labelled `{label}`"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn made_up_results_are_told_from_answers() {
        let tools = [ToolSpec {
            name: "run_shell".into(),
            description: String::new(),
            parameters: json!({"type": "object"}),
        }];
        for text in [
            "I ran it.\n<tool_response>\nok\n</tool_response>\nAll passed.",
            "<TOOL_RESULT>{\"ok\": true}</TOOL_RESULT>",
            "Result:\n```tool_output\n3 passed\n```",
            "```run_shell output\n$ make\n```",
            "```Tool-Result\nfine\n```",
        ] {
            assert!(made_up_result(text, &tools).is_some(), "{text}");
        }
        for text in [
            "All tests pass.",
            "```rust\nfn main() {}\n```",
            "```output\nreal output quoted\n```",
            "```read_file_output\nno such tool offered\n```",
            "The tool_response field is documented.",
        ] {
            assert!(made_up_result(text, &tools).is_none(), "{text}");
        }
    }
}
