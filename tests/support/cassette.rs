//! Builders for cassette interactions (the replay provider's input).

use serde_json::{Value, json};

/// A turn in which the model calls tools: `(name, arguments)` pairs.
pub fn calls(calls: &[(&str, Value)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .enumerate()
        .map(|(index, (name, arguments))| json!({"id": format!("call_{index}"), "name": name, "arguments": arguments}))
        .collect();
    json!({"response": {"content": "", "tool_calls": tool_calls, "usage": {"input_tokens": 100, "output_tokens": 20}}})
}

/// A turn with one tool call.
pub fn call(name: &str, arguments: Value) -> Value {
    calls(&[(name, arguments)])
}

/// A final answer with no tool call.
pub fn answer(text: &str) -> Value {
    json!({"response": {"content": text, "usage": {"input_tokens": 120, "output_tokens": 10}}})
}

/// A provider error.
pub fn error(kind: &str, status: u16, message: &str) -> Value {
    json!({"error": {"kind": kind, "status": status, "message": message}})
}
