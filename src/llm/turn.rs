//! What the three protocols share once bytes are parsed: tool calls
//! assembled from fragments, stable ids where a server gives none, and the
//! last touches on a complete turn.

use std::collections::{HashMap, HashSet, VecDeque};

use serde_json::{Map, Value, json};

use super::text_calls;
use super::{ChatRequest, ChatResponse, FinishReason};
use crate::core::{Message, ToolCall};

/// A tool call being assembled from stream fragments.
#[derive(Debug, Default, Clone, PartialEq)]
pub(super) struct PartialCall {
    pub id: String,
    pub name: String,
    /// The argument JSON text so far, fragments concatenated.
    pub arguments: String,
    /// Known to be cut off (the server never closed it): never run.
    pub unfinished: bool,
}

impl PartialCall {
    /// Adds a fragment of the name. Servers that repeat the whole name in
    /// every delta are tolerated.
    pub fn push_name(&mut self, fragment: &str) {
        if self.name != fragment {
            self.name.push_str(fragment);
        }
    }
}

/// Numbers ids for calls a server sent without one: `<prefix><n>`,
/// counting every call already in the conversation, so ids are unique in
/// it and the same on every replay of it.
pub(super) struct CallIds {
    prefix: &'static str,
    next: usize,
}

impl CallIds {
    pub fn new(prefix: &'static str, request: &ChatRequest) -> Self {
        let earlier = request
            .messages
            .iter()
            .map(|message| match message {
                Message::Assistant { tool_calls, .. } => tool_calls.len(),
                Message::User { .. } | Message::Tool { .. } => 0,
            })
            .sum::<usize>();
        Self {
            prefix,
            next: earlier + 1,
        }
    }

    pub fn next_id(&mut self) -> String {
        let id = format!("{}{}", self.prefix, self.next);
        self.next += 1;
        id
    }
}

/// Why a call the output token limit cut off was not run. Each
/// `invalid_arguments` text says why, without "not run": the agent words
/// the refusal ("the `X` call was not run: …").
pub(crate) const CUT_OFF: &str = "it was cut off by the output token limit (llm.max_output_tokens)";

/// Turns assembled fragments into calls. `cut_off` says the turn hit the
/// output token limit: then the last call may be unfinished, and if its
/// arguments do not parse (or never began) it gets `invalid_arguments`;
/// nothing is ever completed.
pub(super) fn finish_calls(
    partials: Vec<PartialCall>,
    cut_off: bool,
    ids: &mut CallIds,
) -> Vec<ToolCall> {
    let count = partials.len();
    partials
        .into_iter()
        .enumerate()
        .map(|(index, partial)| {
            let last_of_cut_turn = cut_off && index + 1 == count;
            finish_call(partial, last_of_cut_turn, ids)
        })
        .collect()
}

fn finish_call(partial: PartialCall, maybe_unfinished: bool, ids: &mut CallIds) -> ToolCall {
    let id = if partial.id.trim().is_empty() {
        ids.next_id()
    } else {
        partial.id
    };
    let parsed = if partial.unfinished {
        Err(format!(
            "{CUT_OFF} before it was complete; send it again complete, or in smaller parts"
        ))
    } else if maybe_unfinished && partial.arguments.trim().is_empty() {
        Err(format!("{CUT_OFF} before its arguments began"))
    } else {
        text_calls::parse_arguments(&partial.arguments).map_err(|message| {
            if maybe_unfinished {
                format!("{CUT_OFF}: {message}")
            } else {
                message
            }
        })
    };
    let problem = if partial.name.trim().is_empty() {
        Some("it names no tool".to_owned())
    } else {
        parsed.as_ref().err().cloned()
    };
    match (parsed, problem) {
        (Ok(arguments), None) => ToolCall::new(id, partial.name, arguments),
        (parsed, problem) => {
            let mut call = ToolCall::new(
                id,
                partial.name,
                parsed.unwrap_or(Value::String(partial.arguments)),
            );
            call.invalid_arguments = problem;
            call
        }
    }
}

/// The longest id every protocol takes.
const MAX_ID_CHARS: usize = 64;

/// True if and only if every protocol takes `id` as a tool-call id
/// (Anthropic's rule, the strictest: `[A-Za-z0-9_-]{1,64}`).
fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_CHARS
        && id
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

/// Gives ybs's own id (`ybs_call_<n>`) to every call of a new turn whose
/// id is empty, not valid for every protocol, or already used: earlier in
/// the conversation or by another call of the same turn (servers have
/// sent both). The same conversation always gets the same ids.
pub(super) fn unique_ids(calls: &mut [ToolCall], request: &ChatRequest) {
    let mut used: HashSet<String> = request
        .messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            Message::User { .. } | Message::Tool { .. } => &[],
        })
        .map(|call| call.id.clone())
        .collect();
    let mut next = used.len() + 1;
    for call in calls {
        if valid_id(&call.id) && !used.contains(&call.id) {
            used.insert(call.id.clone());
            continue;
        }
        let id = loop {
            let candidate = format!("ybs_call_{next}");
            next += 1;
            if !used.contains(&candidate) {
                break candidate;
            }
        };
        used.insert(id.clone());
        call.id = id;
    }
}

/// The ids a request carries on the wire. Conversations from elsewhere (a
/// cassette, a provider switch in `ybs chat`) may hold ids another
/// protocol rejects, or the same id twice: each call gets an id valid and
/// unique in the request (its own when it is), and each tool result the
/// id of the call it answers (the earliest unanswered call with its id).
pub(super) struct WireIds {
    /// Per assistant message (by position in the conversation), its calls' ids.
    calls: HashMap<usize, Vec<String>>,
    /// Per tool message, its call's id.
    results: HashMap<usize, String>,
}

impl WireIds {
    pub fn new(messages: &[Message]) -> Self {
        let mut used = HashSet::new();
        let mut pending: HashMap<&str, VecDeque<String>> = HashMap::new();
        let mut calls = HashMap::new();
        let mut results = HashMap::new();
        let mut next = 1;
        let mut fresh = |used: &mut HashSet<String>| loop {
            let candidate = format!("ybs_call_{next}");
            next += 1;
            if used.insert(candidate.clone()) {
                break candidate;
            }
        };
        for (position, message) in messages.iter().enumerate() {
            match message {
                Message::Assistant { tool_calls, .. } => {
                    let ids: Vec<String> = tool_calls
                        .iter()
                        .map(|call| {
                            let id = if valid_id(&call.id) && used.insert(call.id.clone()) {
                                call.id.clone()
                            } else {
                                fresh(&mut used)
                            };
                            pending.entry(&call.id).or_default().push_back(id.clone());
                            id
                        })
                        .collect();
                    calls.insert(position, ids);
                }
                Message::Tool { call_id, .. } => {
                    let id = pending
                        .get_mut(call_id.as_str())
                        .and_then(VecDeque::pop_front)
                        .unwrap_or_else(|| {
                            if valid_id(call_id) {
                                call_id.clone()
                            } else {
                                fresh(&mut used)
                            }
                        });
                    results.insert(position, id);
                }
                Message::User { .. } => {}
            }
        }
        Self { calls, results }
    }

    /// The wire id of call `index` of the assistant message at `position`.
    pub fn call(&self, position: usize, index: usize) -> &str {
        self.calls
            .get(&position)
            .and_then(|ids| ids.get(index))
            .map_or("", String::as_str)
    }

    /// The wire id of the call the tool message at `position` answers.
    pub fn result(&self, position: usize) -> &str {
        self.results.get(&position).map_or("", String::as_str)
    }
}

/// The arguments of a call as sent back to a server: the object, or `{}`
/// for a call whose arguments were invalid (strict servers reject anything
/// else in the history; the tool result tells the model what went wrong).
pub(super) fn wire_arguments(call: &ToolCall) -> Value {
    match &call.arguments {
        Value::Object(_) if call.invalid_arguments.is_none() => call.arguments.clone(),
        _ => Value::Object(Map::new()),
    }
}

/// Last touches on a complete turn: a turn with calls reports `ToolCalls`
/// even when the server said `stop`, with `text_tool_calls` a call
/// printed as text is recovered, and every call id is unique in the
/// conversation ([`unique_ids`]).
pub(super) fn finish_turn(
    mut response: ChatResponse,
    request: &ChatRequest,
    text_tool_calls: bool,
) -> ChatResponse {
    if text_tool_calls && response.tool_calls.is_empty() {
        let id = CallIds::new("text_call_", request).next_id();
        text_calls::recover(&mut response, &request.tools, id);
    }
    unique_ids(&mut response.tool_calls, request);
    if !response.tool_calls.is_empty() && response.finish_reason == FinishReason::Stop {
        response.finish_reason = FinishReason::ToolCalls;
    }
    response
}

/// The messages of a chat-style body (OpenAI, Ollama): the system prompt
/// first, then `user`, `assistant` (each call encoded by `call`, given its
/// wire id) and `tool` messages (encoded by `tool`, given the tool's name,
/// the result and its call's wire id). With `null_content`, an assistant
/// message that only calls tools has `content: null`.
pub(super) fn chat_messages(
    request: &ChatRequest,
    null_content: bool,
    call: impl Fn(&ToolCall, &str) -> Value,
    tool: impl Fn(&str, &str, &str) -> Value,
) -> Vec<Value> {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if !request.system.is_empty() {
        messages.push(json!({"role": "system", "content": request.system}));
    }
    let ids = WireIds::new(&request.messages);
    for (position, message) in request.messages.iter().enumerate() {
        messages.push(match message {
            Message::User { content } => json!({"role": "user", "content": content}),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let mut message = json!({"role": "assistant", "content": content});
                if !tool_calls.is_empty() {
                    if null_content && content.is_empty() {
                        message["content"] = Value::Null;
                    }
                    message["tool_calls"] = tool_calls
                        .iter()
                        .enumerate()
                        .map(|(index, each)| call(each, ids.call(position, index)))
                        .collect();
                }
                message
            }
            Message::Tool { name, content, .. } => tool(name, content, ids.result(position)),
        });
    }
    messages
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn request_with_calls(calls: usize) -> ChatRequest {
        ChatRequest {
            model: "m".into(),
            system: String::new(),
            messages: vec![
                Message::user("hi"),
                Message::Assistant {
                    content: String::new(),
                    tool_calls: (0..calls)
                        .map(|n| ToolCall::new(format!("x{n}"), "t", json!({})))
                        .collect(),
                },
            ],
            tools: vec![],
            temperature: None,
            max_tokens: None,
            deadline: None,
        }
    }

    fn partial(id: &str, name: &str, arguments: &str) -> PartialCall {
        PartialCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
            unfinished: false,
        }
    }

    #[test]
    fn ids_count_earlier_calls() {
        let mut ids = CallIds::new("call_", &request_with_calls(2));
        assert_eq!(ids.next_id(), "call_3");
        assert_eq!(ids.next_id(), "call_4");
    }

    #[test]
    fn cut_off_marks_only_an_unfinished_last_call() {
        let mut ids = CallIds::new("call_", &request_with_calls(0));
        let calls = finish_calls(
            vec![
                partial("a", "read_file", r#"{"path": "x"}"#),
                partial("", "write_file", r#"{"path": "y", "content": "hel"#),
            ],
            true,
            &mut ids,
        );
        assert!(calls[0].invalid_arguments.is_none());
        assert_eq!(calls[0].arguments, json!({"path": "x"}));
        assert_eq!(calls[1].id, "call_1");
        let message = calls[1].invalid_arguments.as_deref().unwrap();
        assert!(message.contains("cut off"), "{message}");
        assert_eq!(
            calls[1].arguments,
            json!(r#"{"path": "y", "content": "hel"#)
        );
        assert_eq!(wire_arguments(&calls[1]), json!({}));

        // Finished exactly at the limit: complete JSON is a complete call.
        let calls = finish_calls(vec![partial("a", "t", "{}")], true, &mut ids);
        assert!(calls[0].invalid_arguments.is_none());
        // Cut before any argument text.
        let calls = finish_calls(vec![partial("a", "t", "")], true, &mut ids);
        assert!(calls[0].invalid_arguments.is_some());
        // Not cut: empty arguments are `{}`.
        let calls = finish_calls(vec![partial("a", "t", "")], false, &mut ids);
        assert_eq!(calls[0].arguments, json!({}));
        let calls = finish_calls(vec![partial("a", "", "{}")], false, &mut ids);
        assert!(calls[0].invalid_arguments.is_some());
        // Known unfinished: never run, even when the text parses.
        let mut cut = partial("a", "t", r#"{"path": "x"}"#);
        cut.unfinished = true;
        let calls = finish_calls(vec![cut], false, &mut ids);
        assert!(calls[0].invalid_arguments.is_some());
    }

    #[test]
    fn duplicate_empty_and_odd_ids_get_ybs_ids() {
        // Earlier turn: x0, x1.
        let request = request_with_calls(2);
        let mut calls: Vec<ToolCall> = ["x1", "a", "a", "", "has.dot", "b"]
            .iter()
            .map(|id| ToolCall::new(*id, "t", json!({})))
            .collect();
        unique_ids(&mut calls, &request);
        let ids: Vec<&str> = calls.iter().map(|call| call.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "ybs_call_3",
                "a",
                "ybs_call_4",
                "ybs_call_5",
                "ybs_call_6",
                "b"
            ]
        );
    }

    #[test]
    fn wire_ids_pair_results_with_their_calls() {
        let call = |id: &str| ToolCall::new(id, "t", json!({}));
        let result = |id: &str| Message::Tool {
            call_id: id.into(),
            name: "t".into(),
            content: String::new(),
            is_error: false,
        };
        let messages = vec![
            Message::user("hi"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("call_0"), call("call_0")],
            },
            result("call_0"),
            result("call_0"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("call_0"), call("odd id!")],
            },
            result("call_0"),
            result("odd id!"),
        ];
        let ids = WireIds::new(&messages);
        let calls = [
            ids.call(1, 0),
            ids.call(1, 1),
            ids.call(4, 0),
            ids.call(4, 1),
        ];
        let results = [ids.result(2), ids.result(3), ids.result(5), ids.result(6)];
        assert_eq!(calls, results);
        assert_eq!(calls[0], "call_0");
        let unique: HashSet<&str> = calls.iter().copied().collect();
        assert_eq!(unique.len(), 4, "{calls:?}");
        assert!(calls.iter().all(|id| valid_id(id)), "{calls:?}");
    }

    #[test]
    fn name_fragments_append_but_repeats_do_not() {
        let mut call = PartialCall::default();
        call.push_name("read");
        call.push_name("_file");
        assert_eq!(call.name, "read_file");
        call.push_name("read_file");
        assert_eq!(call.name, "read_file");
    }
}
