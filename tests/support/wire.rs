//! Response bodies in each provider's wire format, for the scripted
//! server: OpenAI Chat Completions (SSE and JSON), Anthropic Messages
//! (typed SSE events and JSON), Ollama `/api/chat` (NDJSON).

use serde_json::{Value, json};

use super::server::Reply;

/// `data: <json>` events, then `data: [DONE]`.
pub fn sse_done(chunks: &[Value]) -> String {
    let mut text: String = chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    text.push_str("data: [DONE]\n\n");
    text
}

/// `data: <json>` events, each followed by a keep-alive comment line
/// (`: ...`, as proxies and OpenRouter send), then `data: [DONE]`.
pub fn sse_done_with_comments(chunks: &[Value]) -> String {
    let mut text = String::from(": connected\n\n");
    for chunk in chunks {
        text.push_str(&format!("data: {chunk}\n\n: keep-alive\n\n"));
    }
    text.push_str(": OPENROUTER PROCESSING\n\ndata: [DONE]\n\n");
    text
}

/// Named events: `event: <type>` + `data: <json>`.
pub fn sse_events(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| {
            let name = event["type"].as_str().unwrap_or("message");
            format!("event: {name}\ndata: {event}\n\n")
        })
        .collect()
}

/// OpenAI: the chunks of a streamed turn with tool calls `(id, name,
/// arguments JSON)`, each call's arguments split into `fragment`-character
/// pieces, one chunk each (fragments of different calls alternate when
/// `interleave`), then `finish_reason: tool_calls` and usage.
pub fn openai_call_chunks(
    calls: &[(&str, &str, &str)],
    fragment: usize,
    interleave: bool,
) -> Vec<Value> {
    let chunk = |delta: Value| {
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    };
    let mut chunks = vec![chunk(json!({"role": "assistant", "content": null}))];
    let pieces: Vec<Vec<String>> = calls
        .iter()
        .map(|(_, _, arguments)| {
            let chars: Vec<char> = arguments.chars().collect();
            chars
                .chunks(fragment.max(1))
                .map(|piece| piece.iter().collect())
                .collect()
        })
        .collect();
    let opening = |index: usize| {
        let (id, name, _) = calls[index];
        chunk(
            json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                     "function": {"name": name, "arguments": ""}}]}),
        )
    };
    let fragment_chunk = |index: usize, piece: &str| {
        chunk(json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    };
    if interleave {
        for index in 0..calls.len() {
            chunks.push(opening(index));
        }
        let longest = pieces.iter().map(Vec::len).max().unwrap_or(0);
        for step in 0..longest {
            for (index, call_pieces) in pieces.iter().enumerate() {
                if let Some(piece) = call_pieces.get(step) {
                    chunks.push(fragment_chunk(index, piece));
                }
            }
        }
    } else {
        for (index, call_pieces) in pieces.iter().enumerate() {
            chunks.push(opening(index));
            for piece in call_pieces {
                chunks.push(fragment_chunk(index, piece));
            }
        }
    }
    chunks.push(
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
                       "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
    );
    chunks.push(json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
                       "choices": [], "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}));
    chunks
}

/// OpenAI: a streamed turn calling one tool.
pub fn openai_sse_call(id: &str, name: &str, arguments: &Value) -> Reply {
    Reply::sse(&sse_done(&openai_call_chunks(
        &[(id, name, &arguments.to_string())],
        16,
        false,
    )))
}

/// OpenAI: a streamed answer in a few pieces.
pub fn openai_sse_answer(text: &str) -> Reply {
    let mut chunks: Vec<Value> = text
        .split_inclusive(' ')
        .map(|piece| {
            json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        })
        .collect();
    chunks.push(json!({"id": "chatcmpl-2", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}));
    chunks.push(json!({"id": "chatcmpl-2", "choices": [], "usage": {"prompt_tokens": 130, "completion_tokens": 5, "total_tokens": 135}}));
    Reply::sse(&sse_done(&chunks))
}

/// OpenAI: a streamed turn whose content is `text` (no structured call).
pub fn openai_sse_content(text: &str) -> Reply {
    Reply::sse(&sse_done(&[
        json!({"id": "chatcmpl-3", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]}),
        json!({"id": "chatcmpl-3", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
    ]))
}

/// OpenAI: a non-streamed turn calling one tool.
pub fn openai_json_call(id: &str, name: &str, arguments: &Value) -> Reply {
    Reply::json(
        200,
        &json!({"id": "chatcmpl-j1", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "finish_reason": "tool_calls",
                             "message": {"role": "assistant", "content": null,
                                         "tool_calls": [{"id": id, "type": "function",
                                                         "function": {"name": name, "arguments": arguments.to_string()}}]}}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 20, "total_tokens": 120}}),
    )
}

/// OpenAI: a non-streamed answer.
pub fn openai_json_answer(text: &str) -> Reply {
    Reply::json(
        200,
        &json!({"id": "chatcmpl-j2", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 130, "completion_tokens": 5, "total_tokens": 135}}),
    )
}

fn anthropic_start(id: &str, input_tokens: u64) -> Value {
    json!({"type": "message_start", "message": {"id": id, "type": "message", "role": "assistant",
           "content": [], "model": "m", "stop_reason": null, "stop_sequence": null,
           "usage": {"input_tokens": input_tokens, "output_tokens": 1}}})
}

/// Anthropic: a streamed turn calling one tool, its input JSON in
/// `fragment`-character `input_json_delta`s, with a `ping` in between.
pub fn anthropic_sse_call(id: &str, name: &str, input: &Value, fragment: usize) -> Reply {
    let text = input.to_string();
    let mut events = vec![
        anthropic_start("msg_1", 100),
        json!({"type": "ping"}),
        json!({"type": "content_block_start", "index": 0,
               "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
    ];
    let chars: Vec<char> = text.chars().collect();
    for piece in chars.chunks(fragment.max(1)) {
        let piece: String = piece.iter().collect();
        events.push(json!({"type": "content_block_delta", "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": piece}}));
    }
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null},
               "usage": {"output_tokens": 20}}),
        json!({"type": "message_stop"}),
    ]);
    Reply::sse(&sse_events(&events))
}

/// Anthropic: a streamed text answer.
pub fn anthropic_sse_answer(text: &str) -> Reply {
    let mut events = vec![
        anthropic_start("msg_2", 130),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    for piece in text.split_inclusive(' ') {
        events.push(json!({"type": "content_block_delta", "index": 0,
                           "delta": {"type": "text_delta", "text": piece}}));
    }
    events.extend([
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null},
               "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ]);
    Reply::sse(&sse_events(&events))
}

/// Anthropic: a non-streamed turn calling one tool.
pub fn anthropic_json_call(id: &str, name: &str, input: &Value) -> Reply {
    Reply::json(
        200,
        &json!({"id": "msg_j1", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": "Writing it."},
                            {"type": "tool_use", "id": id, "name": name, "input": input}],
                "stop_reason": "tool_use", "stop_sequence": null,
                "usage": {"input_tokens": 100, "output_tokens": 20}}),
    )
}

/// Anthropic: a non-streamed answer.
pub fn anthropic_json_answer(text: &str) -> Reply {
    Reply::json(
        200,
        &json!({"id": "msg_j2", "type": "message", "role": "assistant", "model": "m",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 130, "output_tokens": 5}}),
    )
}

/// Ollama: a streamed turn calling tools (Ollama sends calls whole, with
/// object arguments and no ids).
pub fn ollama_call(calls: &[(&str, Value)]) -> Reply {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(name, arguments)| json!({"function": {"name": name, "arguments": arguments}}))
        .collect();
    Reply::ndjson(&[
        json!({"model": "m", "created_at": "2025-01-01T00:00:00Z",
               "message": {"role": "assistant", "content": "", "tool_calls": tool_calls}, "done": false}),
        json!({"model": "m", "created_at": "2025-01-01T00:00:01Z",
               "message": {"role": "assistant", "content": ""}, "done": true, "done_reason": "stop",
               "prompt_eval_count": 100, "eval_count": 20}),
    ])
}

/// Ollama: a streamed answer, a few words a line.
pub fn ollama_answer(text: &str) -> Reply {
    let mut lines: Vec<Value> = text
        .split_inclusive(' ')
        .map(|piece| json!({"model": "m", "message": {"role": "assistant", "content": piece}, "done": false}))
        .collect();
    lines.push(
        json!({"model": "m", "message": {"role": "assistant", "content": ""}, "done": true,
                      "done_reason": "stop", "prompt_eval_count": 130, "eval_count": 5}),
    );
    Reply::ndjson(&lines)
}
