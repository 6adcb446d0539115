//! What the model is sent (docs/agent-loop.md "Context", docs/performance.md): the estimated size of
//! a request, and compaction, which elides older tool results from the
//! request when it nears the model's window.
//!
//! Truncation of each tool output (`max_tool_output_chars`) happens when
//! the result is recorded (`run.rs`); compaction happens here, per request.
//! Compaction changes only what is sent: the agent's conversation, and so
//! the transcript, keeps every message whole. It never drops a message, so
//! every tool call keeps its result (providers reject a call without one),
//! and it never touches user or assistant messages or the results of the
//! newest turn, which the model is about to read.

use std::collections::BTreeSet;

use serde_json::json;

use crate::core::{Message, ToolSpec};
use crate::llm::tokens;

/// Bytes per token of the rough estimate of [`tokens`]: the usual rule
/// of thumb for English and code.
pub const BYTES_PER_TOKEN: usize = 4;

/// The window budgeted when `context.max_tokens` is not set. It is the
/// ceiling docs/performance.md promises for a 50-step task's largest request, and it
/// fits every current hosted model; set `context.max_tokens` to use more
/// of a larger window, or less for a local model served with a short one.
pub const DEFAULT_WINDOW: u32 = crate::core::usage::DEFAULT_CONTEXT_WINDOW;

/// A compaction brings the request down to this fraction of the
/// threshold, not just under it: the next few steps then add their results
/// without compacting again, and the elided prefix stays the same from one
/// request to the next (provider prompt caches key on the prefix).
pub const COMPACT_TO: f64 = 0.8;

/// Roughly the tokens of `bytes` bytes of request text (bytes / 4).
pub fn tokens(bytes: usize) -> u64 {
    u64::try_from(bytes.div_ceil(BYTES_PER_TOKEN)).unwrap_or(u64::MAX)
}

/// The tokens of what every request carries besides the messages: the
/// system prompt and each tool's schema as the OpenAI wire sends it.
pub fn fixed_tokens(system: &str, tools: &[ToolSpec]) -> u64 {
    tokens::count(system)
        + tokens::PER_MESSAGE
        + tools
            .iter()
            .map(|tool| {
                let wire = json!({"type": "function", "function": {
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                }});
                tokens::count(&wire.to_string())
            })
            .sum::<u64>()
}

/// The tokens of one message as sent: its text, each call's name and
/// arguments, and what a chat template adds around it.
pub fn message_tokens(message: &Message) -> u64 {
    tokens::PER_MESSAGE
        + match message {
            Message::User { content } | Message::Tool { content, .. } => tokens::count(content),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                tokens::count(content)
                    + tool_calls
                        .iter()
                        .map(|call| {
                            tokens::count(&call.name) + tokens::count(&call.arguments.to_string())
                        })
                        .sum::<u64>()
            }
        }
}

/// What stands in for an elided tool result in a request.
pub fn elision_marker(bytes: usize) -> String {
    format!(
        "[ybs: this tool result ({bytes} chars) was elided to fit the context window; call the tool again if you need it]"
    )
}

/// The model's window and the fraction of it at which compaction starts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ContextWindow {
    /// The window, in tokens.
    pub tokens: u32,
    /// `context.compaction_threshold`: a fraction above 0, at most 1.
    pub threshold: f64,
}

impl ContextWindow {
    /// `context.max_tokens` (or [`DEFAULT_WINDOW`]) and
    /// `context.compaction_threshold`.
    pub fn new(max_tokens: Option<u32>, threshold: f64) -> Self {
        Self {
            tokens: max_tokens.unwrap_or(DEFAULT_WINDOW),
            threshold,
        }
    }

    /// The largest request, in estimated tokens, sent without compacting.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a fraction of a u32, not negative"
    )]
    pub fn limit(&self) -> u64 {
        (f64::from(self.tokens) * self.threshold.clamp(0.0, 1.0)) as u64
    }

    /// What a compaction brings the request down to.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a fraction of a token count far below 2^52"
    )]
    fn target(&self) -> u64 {
        (self.limit() as f64 * COMPACT_TO) as u64
    }
}

impl Default for ContextWindow {
    fn default() -> Self {
        Self::new(None, 0.95)
    }
}

/// One request's messages, compacted if they had to be.
#[derive(Debug, Clone, PartialEq)]
pub struct Prepared {
    pub messages: Vec<Message>,
    /// The request's estimated size in tokens, as sent: counted, plus the
    /// correction from the server's count.
    pub tokens: u64,
    /// Its tokens as counted here ([`crate::llm::tokens`]), uncorrected.
    pub counted: u64,
    /// Set when this request elided results the previous ones sent whole.
    pub compaction: Option<Compaction>,
}

/// What one compaction did.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// Tool results newly elided.
    pub results: usize,
    /// Their size in bytes.
    pub bytes: usize,
    /// The estimate before and after, in tokens.
    pub before: u64,
    pub after: u64,
    pub window: ContextWindow,
}

impl Compaction {
    /// The `task.note` that reports it.
    pub fn note(&self) -> String {
        let mut note = format!(
            "context compaction: elided {} older tool result{} ({} chars) from the request, {} -> {} estimated tokens (threshold {} of a {}-token window); the transcript keeps them whole",
            self.results,
            if self.results == 1 { "" } else { "s" },
            self.bytes,
            self.before,
            self.after,
            self.window.threshold,
            self.window.tokens,
        );
        if self.after > self.window.limit() {
            note.push_str(
                "; the request is still over the threshold: what is left is the newest turn and the messages compaction never elides",
            );
        }
        // What it costs with a provider's prompt cache (docs/providers.md).
        note.push_str(
            "; the prompt cache is read up to the first newly elided result only (the tools, the system prompt and the messages before it stay cached)",
        );
        note
    }
}

/// Remembers which results are elided, so that each request elides at
/// least what the previous one did: the prefix the model sees only changes
/// at a compaction.
#[derive(Debug, Clone, Default)]
pub struct Compactor {
    window: ContextWindow,
    /// Indexes into the conversation of the elided tool results.
    elided: BTreeSet<usize>,
    /// Per message of the conversation, its size in bytes when counted
    /// and its tokens as sent (elided or not): a message is counted once
    /// unless it changes.
    counted: Vec<(usize, u64)>,
}

impl Compactor {
    pub fn new(window: ContextWindow) -> Self {
        Self {
            window,
            elided: BTreeSet::new(),
            counted: Vec::new(),
        }
    }

    /// The tokens of each message of `messages` (as sent), counting only
    /// those new or changed since the last request.
    fn count(&mut self, messages: &[Message]) -> Vec<u64> {
        self.counted.truncate(messages.len());
        messages
            .iter()
            .enumerate()
            .map(|(index, message)| {
                let bytes = message.approx_chars();
                match self.counted.get(index) {
                    Some(&(was, tokens)) if was == bytes => tokens,
                    _ => {
                        let tokens = message_tokens(message);
                        if index < self.counted.len() {
                            self.counted[index] = (bytes, tokens);
                        } else {
                            self.counted.push((bytes, tokens));
                        }
                        tokens
                    }
                }
            })
            .collect()
    }

    /// The messages to send for `conversation`, with `fixed` tokens of
    /// system prompt and tool schemas beside them. `correction` is added
    /// to the counted tokens: what the server counted for the previous
    /// request minus what was counted here (its chat template, a
    /// tokenizer other than ours). Below the threshold this is the
    /// conversation as is (after earlier compactions, with what they
    /// elided still elided). Above it, the oldest tool results are elided
    /// until the request is under [`COMPACT_TO`] of the threshold, or only
    /// the newest turn's results are left.
    pub fn prepare(&mut self, fixed: u64, conversation: &[Message], correction: i64) -> Prepared {
        let mut messages = conversation.to_vec();
        for &index in &self.elided {
            elide(&mut messages[index]);
        }
        let sizes = self.count(&messages);
        let counted = fixed + sizes.iter().sum::<u64>();
        let mut total = counted.saturating_add_signed(correction);
        let before = total;
        if before <= self.window.limit() {
            return Prepared {
                messages,
                tokens: before,
                counted,
                compaction: None,
            };
        }
        // The results after the last assistant message answer the calls
        // the model just made: it is about to read them.
        let newest = messages
            .iter()
            .rposition(|message| matches!(message, Message::Assistant { .. }))
            .unwrap_or(0);
        let target = self.window.target();
        let (mut results, mut elided_bytes) = (0, 0);
        let mut counted = counted;
        for (index, message) in messages.iter_mut().enumerate().take(newest) {
            if total <= target {
                break;
            }
            if self.elided.contains(&index) {
                continue;
            }
            if let Some((was, _)) = elide(message) {
                self.elided.insert(index);
                let is = message_tokens(message);
                self.counted[index] = (message.approx_chars(), is);
                let saved = sizes[index].saturating_sub(is);
                total = total.saturating_sub(saved);
                counted = counted.saturating_sub(saved);
                results += 1;
                elided_bytes += was;
            }
        }
        let after = total;
        Prepared {
            messages,
            tokens: after,
            counted,
            compaction: (results > 0).then_some(Compaction {
                results,
                bytes: elided_bytes,
                before,
                after,
                window: self.window,
            }),
        }
    }
}

/// Replaces a tool result's content with the marker, if that saves at
/// least the marker's size again. Returns the content's size before and
/// after.
fn elide(message: &mut Message) -> Option<(usize, usize)> {
    let Message::Tool { content, .. } = message else {
        return None;
    };
    let marker = elision_marker(content.len());
    if marker.len() * 2 > content.len() {
        return None;
    }
    let before = content.len();
    *content = marker;
    Some((before, content.len()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::ToolCall;

    fn turn(step: usize, output_bytes: usize) -> [Message; 2] {
        let id = format!("call_{step}");
        [
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall::new(
                    id.clone(),
                    "read_file",
                    json!({"path": format!("f{step}.txt")}),
                )],
            },
            Message::Tool {
                call_id: id,
                name: "read_file".into(),
                content: format!("{step}:").repeat(output_bytes / 2),
                is_error: false,
            },
        ]
    }

    fn conversation(steps: usize, output_bytes: usize) -> Vec<Message> {
        let mut messages = vec![Message::user("read every file")];
        for step in 0..steps {
            messages.extend(turn(step, output_bytes));
        }
        messages
    }

    fn is_elided(message: &Message) -> bool {
        matches!(message, Message::Tool { content, .. } if content.starts_with("[ybs: this tool result"))
    }

    #[test]
    fn a_small_conversation_is_sent_as_is() {
        let messages = conversation(3, 1000);
        let mut compactor = Compactor::new(ContextWindow::new(Some(8000), 0.95));
        let prepared = compactor.prepare(500, &messages, 0);
        assert_eq!(prepared.messages, messages);
        assert!(prepared.compaction.is_none());
        let counted = 500 + messages.iter().map(message_tokens).sum::<u64>();
        assert_eq!(prepared.tokens, counted);
        assert_eq!(prepared.counted, counted);
        // The server's count of the last request corrects the estimate.
        let corrected = compactor.prepare(500, &messages, 300);
        assert_eq!(corrected.tokens, counted + 300);
        assert_eq!(corrected.counted, counted);
    }

    #[test]
    fn oldest_results_are_elided_until_under_budget_with_every_pairing_intact() {
        let window = ContextWindow::new(Some(8000), 0.95);
        let messages = conversation(20, 4000);
        let mut compactor = Compactor::new(window);
        let prepared = compactor.prepare(500, &messages, 0);

        assert!(prepared.tokens <= window.limit(), "{}", prepared.tokens);
        let compaction = prepared.compaction.clone().unwrap();
        assert!(compaction.before > window.limit());
        assert_eq!(compaction.after, prepared.tokens);
        assert!(compaction.note().contains("elided"));
        // Same messages, same order, same roles and ids: only some tool
        // contents changed.
        assert_eq!(prepared.messages.len(), messages.len());
        for (sent, kept) in prepared.messages.iter().zip(&messages) {
            match (sent, kept) {
                (
                    Message::Tool {
                        call_id: a,
                        name: x,
                        ..
                    },
                    Message::Tool {
                        call_id: b,
                        name: y,
                        ..
                    },
                ) => assert_eq!((a, x), (b, y)),
                _ => assert_eq!(sent, kept),
            }
        }
        // The oldest are elided, the newest kept: a prefix of the results.
        let elided: Vec<bool> = prepared
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .map(is_elided)
            .collect();
        let count = elided.iter().filter(|e| **e).count();
        assert_eq!(count, compaction.results);
        assert!(count > 0 && count < elided.len());
        assert!(elided[..count].iter().all(|e| *e));
        assert!(elided[count..].iter().all(|e| !*e));
        assert_eq!(prepared.messages.last(), messages.last());
        assert!(prepared.tokens <= window.target() || count == elided.len() - 1);
    }

    #[test]
    fn later_requests_keep_what_was_elided_and_note_only_new_compactions() {
        let window = ContextWindow::new(Some(8000), 0.95);
        let mut messages = conversation(20, 4000);
        let mut compactor = Compactor::new(window);
        let first = compactor.prepare(500, &messages, 0);
        let first_count = first.compaction.unwrap().results;
        // One more small step: under the threshold again, nothing new.
        messages.extend(turn(20, 200));
        let second = compactor.prepare(500, &messages, 0);
        assert!(second.compaction.is_none());
        assert_eq!(
            second.messages.iter().filter(|m| is_elided(m)).count(),
            first_count
        );
        assert_eq!(second.messages[..first.messages.len()], first.messages[..]);
        // Many more big steps: another compaction, further along.
        for step in 21..40 {
            messages.extend(turn(step, 4000));
            let prepared = compactor.prepare(500, &messages, 0);
            assert!(prepared.tokens <= window.limit());
        }
    }

    #[test]
    fn the_newest_turn_is_never_elided() {
        let window = ContextWindow::new(Some(1000), 0.95);
        let mut messages = conversation(2, 400);
        messages.extend(turn(2, 10_000));
        let mut compactor = Compactor::new(window);
        let prepared = compactor.prepare(0, &messages, 0);
        assert_eq!(prepared.messages.last(), messages.last());
        let compaction = prepared.compaction.unwrap();
        assert_eq!(compaction.results, 2);
        assert!(compaction.note().contains("still over the threshold"));
    }

    #[test]
    fn results_barely_longer_than_the_marker_are_left_alone() {
        let window = ContextWindow::new(Some(100), 0.95);
        let messages = conversation(4, 150);
        let prepared = Compactor::new(window).prepare(0, &messages, 0);
        assert_eq!(prepared.messages, messages);
        assert!(prepared.compaction.is_none());
        assert!(prepared.tokens > window.limit());
    }

    #[test]
    fn the_window_defaults_to_32k() {
        let window = ContextWindow::new(None, 0.95);
        assert_eq!(window.tokens, 32_000);
        assert_eq!(window.limit(), 30_400);
        assert_eq!(tokens(9), 3);
    }
}
