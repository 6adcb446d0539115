//! Tool-call argument JSON, and tool calls recovered from text.
//!
//! Argument JSON is repaired only for cosmetic defects: a code fence
//! around it and trailing commas before `}` or `]`. A truncated object is
//! never completed: the call gets `invalid_arguments`, is not run, and the
//! model sees the error (docs/providers.md).
//!
//! With `text_tool_calls: true` (off by default), a turn with no
//! structured call whose content holds exactly one
//! `{"name": ..., "arguments": {...}}` object naming an offered tool, bare
//! or in a code fence, anywhere in the text, with arguments valid for the
//! tool's schema, becomes that call, marked `from_text`; the text around
//! it stays the turn's content. Two or more such objects, or one whose
//! arguments do not validate, become one call that is not run: its result
//! tells the model to send exactly one call as JSON. A text with no object
//! naming an offered tool stays an answer.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Value};

use super::{ChatResponse, FinishReason};
use crate::core::{ToolCall, ToolSpec};

/// Parses a tool call's argument text into a JSON object, after removing
/// a surrounding code fence and trailing commas. An empty text is `{}`.
/// The error says what is wrong in words the model can act on.
pub fn parse_arguments(raw: &str) -> Result<Value, String> {
    let text = strip_fence(raw.trim()).trim();
    if text.is_empty() {
        return Ok(Value::Object(Map::new()));
    }
    let value = parse_repaired(text).map_err(|error| describe(&error, text))?;
    if value.is_object() {
        Ok(value)
    } else {
        Err(format!(
            "its arguments must be a JSON object, not {}",
            kind(&value)
        ))
    }
}

/// Parses `text` as JSON, retrying once with trailing commas removed. A
/// text that ends before its value does (EOF) is never repaired.
fn parse_repaired(text: &str) -> Result<Value, serde_json::Error> {
    match serde_json::from_str(text) {
        Ok(value) => Ok(value),
        Err(error) if error.is_eof() => Err(error),
        Err(error) => {
            let repaired = remove_trailing_commas(text);
            if repaired == text {
                return Err(error);
            }
            serde_json::from_str(&repaired).map_err(|_| error)
        }
    }
}

fn describe(error: &serde_json::Error, text: &str) -> String {
    if error.is_eof() {
        format!(
            "its arguments are unterminated JSON (cut off after {} bytes): send it again complete",
            text.len()
        )
    } else {
        format!("its arguments are not valid JSON ({error})")
    }
}

/// The inside of one code fence (```` ``` ```` or ```` ```json ````)
/// wrapping the whole text; the text itself when it is not fenced.
fn strip_fence(text: &str) -> &str {
    let Some(rest) = text.strip_prefix("```") else {
        return text;
    };
    let Some(inner) = rest.strip_suffix("```") else {
        return text;
    };
    let Some((tag, body)) = inner.split_once('\n') else {
        return text;
    };
    let tag = tag.trim();
    if tag.is_empty() || tag.eq_ignore_ascii_case("json") {
        if body.contains("```") {
            return text;
        }
        body
    } else {
        text
    }
}

/// The text after an opening fence that is never closed; `""` otherwise.
fn strip_open_fence(text: &str) -> &str {
    let Some((tag, body)) = text
        .strip_prefix("```")
        .and_then(|rest| rest.split_once('\n'))
    else {
        return "";
    };
    let tag = tag.trim();
    if (tag.is_empty() || tag.eq_ignore_ascii_case("json")) && !body.contains("```") {
        body
    } else {
        ""
    }
}

/// Drops every comma, outside strings, that is followed (after
/// whitespace) by `}` or `]`.
fn remove_trailing_commas(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let mut in_string = false;
    let mut escaped = false;
    for (index, &ch) in chars.iter().enumerate() {
        if in_string {
            out.push(ch);
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
            continue;
        }
        match ch {
            '"' => {
                in_string = true;
                out.push(ch);
            }
            ',' => {
                let next = chars[index + 1..].iter().find(|c| !c.is_whitespace());
                if !matches!(next, Some('}' | ']')) {
                    out.push(ch);
                }
            }
            _ => out.push(ch),
        }
    }
    out
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// With the option on: turns a turn with a tool call written as JSON in
/// its text into that call (see the module docs). `id` is
/// the id to give the call. Returns true if and only if it did.
pub fn recover(response: &mut ChatResponse, tools: &[ToolSpec], id: String) -> bool {
    if !response.tool_calls.is_empty() {
        return false;
    }
    let content = response.content.trim();
    // The whole text is a call cut off before its end (bare, or in a
    // fence that never closed): the model is told, nothing is completed.
    let text = strip_fence(content).trim();
    let opened = strip_open_fence(content).trim();
    let cut = [text, opened]
        .into_iter()
        .find(|text| text.starts_with('{'))
        .filter(|text| parse_repaired(text).is_err_and(|error| error.is_eof()));
    let call = cut.and_then(|text| cut_off_call(text, tools, id.clone()));
    let Some(mut call) = call else {
        return recover_embedded(response, tools, id);
    };
    if response.finish_reason == FinishReason::Length && call.invalid_arguments.is_some() {
        call.invalid_arguments = Some(format!(
            "{} before it was complete; send it again complete, or in smaller parts",
            super::turn::CUT_OFF
        ));
    }
    response.tool_calls.push(call);
    response.content.clear();
    if response.finish_reason == FinishReason::Stop {
        response.finish_reason = FinishReason::ToolCalls;
    }
    true
}

/// A call-like JSON object found in a text: where it sits (its code fence
/// included) and what it says.
struct Embedded {
    span: std::ops::Range<usize>,
    object: Map<String, Value>,
}

/// The call objects written anywhere in the content (see the module
/// docs): one valid call is taken out of the text and becomes the turn's
/// call; several, or one that does not validate, become one call that is
/// not run and says why. Returns true if the turn got a call.
fn recover_embedded(response: &mut ChatResponse, tools: &[ToolSpec], id: String) -> bool {
    let found = embedded_calls(&response.content, tools);
    let [first, ..] = found.as_slice() else {
        return false;
    };
    let name = first
        .object
        .get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let call = if found.len() == 1 {
        match whole_call(&first.object, tools, id.clone()) {
            Some(call) => {
                let content = &response.content;
                let before = content[..first.span.start].trim_end();
                let after = content[first.span.end..].trim_start();
                response.content = match (before.is_empty(), after.is_empty()) {
                    (true, _) => after.to_owned(),
                    (false, true) => before.to_owned(),
                    (false, false) => format!("{before}\n\n{after}"),
                };
                call
            }
            None => {
                let problem = call_problem(&first.object, tools);
                not_one_call(
                    &id,
                    &name,
                    &response.content[first.span.clone()],
                    format!(
                        "it was written as JSON text and {problem}; send it again as exactly one \
                         JSON object {{\"name\": \"{name}\", \"arguments\": {{...}}}} with valid arguments"
                    ),
                )
            }
        }
    } else {
        let names: Vec<String> = found
            .iter()
            .filter_map(|call| call.object.get("name").and_then(Value::as_str))
            .map(|name| format!("`{name}`"))
            .collect();
        not_one_call(
            &id,
            &name,
            &response.content,
            format!(
                "the reply holds {} tool calls written as JSON text ({}) and none was run; \
                 send exactly one call, as one JSON object {{\"name\": ..., \"arguments\": {{...}}}}",
                found.len(),
                names.join(", ")
            ),
        )
    };
    response.tool_calls.push(call);
    if response.finish_reason == FinishReason::Stop {
        response.finish_reason = FinishReason::ToolCalls;
    }
    true
}

/// A call recovered from text that is not run: `problem` is what the
/// model is told (after "the `name` call was not run: ").
fn not_one_call(id: &str, name: &str, text: &str, problem: String) -> ToolCall {
    let mut call = ToolCall::new(id, name, Value::String(text.to_owned()));
    call.invalid_arguments = Some(problem);
    call.from_text = true;
    call
}

/// Why a call-like object is not a valid call.
fn call_problem(object: &Map<String, Value>, tools: &[ToolSpec]) -> String {
    let extra: Vec<&str> = object
        .keys()
        .map(String::as_str)
        .filter(|key| !matches!(*key, "name" | "arguments" | "parameters"))
        .collect();
    if !extra.is_empty() {
        return format!(
            "it has keys besides `name` and `arguments` ({})",
            extra.join(", ")
        );
    }
    let tool = object
        .get("name")
        .and_then(Value::as_str)
        .and_then(|name| tools.iter().find(|tool| tool.name == name));
    let arguments = object.get("arguments").or_else(|| object.get("parameters"));
    let fields = match arguments {
        Some(Value::Object(fields)) => Some(fields.clone()),
        Some(Value::String(text)) => match parse_arguments(text) {
            Ok(Value::Object(fields)) => Some(fields),
            _ => None,
        },
        _ => None,
    };
    match (tool, fields) {
        (Some(tool), Some(fields)) => match validate(&fields, &tool.parameters) {
            Err(error) => error,
            Ok(()) => "it is not a valid call".to_owned(),
        },
        _ => "its `arguments` is not a JSON object".to_owned(),
    }
}

/// Every top-level JSON object in `content` that names an offered tool
/// and has `arguments` (or `parameters`), in order, each with its span
/// widened to a code fence that holds only it.
fn embedded_calls(content: &str, tools: &[ToolSpec]) -> Vec<Embedded> {
    top_level_objects(content)
        .filter(|(object, _)| {
            let names_tool = object
                .get("name")
                .and_then(Value::as_str)
                .is_some_and(|name| tools.iter().any(|tool| tool.name == name));
            names_tool && (object.contains_key("arguments") || object.contains_key("parameters"))
        })
        .map(|(object, span)| Embedded {
            span: fenced(content, span),
            object,
        })
        .collect()
}

/// The JSON objects in `content` that are not inside another one, in
/// order, each with where it sits. A JSON object is skipped whole, the
/// objects nested in it too.
fn top_level_objects(
    content: &str,
) -> impl Iterator<Item = (Map<String, Value>, std::ops::Range<usize>)> + '_ {
    let mut at = 0;
    std::iter::from_fn(move || {
        while let Some(offset) = content.get(at..)?.find('{') {
            let start = at + offset;
            match object_at(content, start) {
                Some((object, end)) => {
                    at = end;
                    return Some((object, start..end));
                }
                None => at = start + 1,
            }
        }
        None
    })
}

/// The JSON object that starts at `start` in `content`, and where it
/// ends; trailing commas are forgiven, as in a whole-text call.
fn object_at(content: &str, start: usize) -> Option<(Map<String, Value>, usize)> {
    let rest = &content[start..];
    let mut stream = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    match stream.next()? {
        Ok(Value::Object(object)) => Some((object, start + stream.byte_offset())),
        Ok(_) => None,
        Err(_) => {
            let length = closing_brace(rest)?;
            match parse_repaired(&rest[..length]) {
                Ok(Value::Object(object)) => Some((object, start + length)),
                _ => None,
            }
        }
    }
}

/// The length of the `{...}` block that starts `text`, braces inside
/// strings ignored; `None` when it never closes.
fn closing_brace(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, ch) in text.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if ch == '\\' {
                escaped = true;
            } else if ch == '"' {
                in_string = false;
            }
            continue;
        }
        match ch {
            '"' => in_string = true,
            '{' => depth += 1,
            '}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            _ => {}
        }
    }
    None
}

/// `span` widened to the code fence around it, when a fence (bare or
/// `json`) opens just before it and closes just after it (or the text
/// ends there).
fn fenced(content: &str, span: std::ops::Range<usize>) -> std::ops::Range<usize> {
    let before = content[..span.start].trim_end();
    let opened = ["```json", "```JSON", "```"]
        .iter()
        .find_map(|fence| before.strip_suffix(fence));
    let after = &content[span.end..];
    let rest = after.trim_start();
    match opened {
        Some(prefix) if rest.starts_with("```") => {
            prefix.len()..span.end + (after.len() - rest.len()) + 3
        }
        // A fence the turn never closed, the call last in it.
        Some(prefix) if rest.is_empty() => prefix.len()..content.len(),
        _ => span,
    }
}

/// `{"name": ..., "arguments": {...}}` (or `parameters`, as Llama models
/// write it) and nothing else, naming an offered tool, arguments valid.
fn whole_call(object: &Map<String, Value>, tools: &[ToolSpec], id: String) -> Option<ToolCall> {
    if object.len() != 2 {
        return None;
    }
    let name = object.get("name")?.as_str()?;
    let arguments = object
        .get("arguments")
        .or_else(|| object.get("parameters"))?;
    let tool = tools.iter().find(|tool| tool.name == name)?;
    let arguments = match arguments {
        Value::Object(_) => arguments.clone(),
        // Some models encode the arguments as a JSON string.
        Value::String(text) => parse_arguments(text).ok()?,
        _ => return None,
    };
    let Value::Object(fields) = &arguments else {
        return None;
    };
    validate(fields, &tool.parameters).ok()?;
    let mut call = ToolCall::new(id, name, arguments);
    call.from_text = true;
    Some(call)
}

/// The first call written in `content` (bare or fenced, alone or in
/// prose) that names a tool of `tools` with arguments valid for its
/// schema: what `text_tool_calls` would run; with the option off, the
/// agent tells the user about it.
pub fn as_call(content: &str, tools: &[ToolSpec]) -> Option<ToolCall> {
    embedded_calls(content, tools)
        .iter()
        .find_map(|found| whole_call(&found.object, tools, "text_call".to_owned()))
}

/// The name in the first object of `content` shaped like a call, exactly
/// `{"name": "...", "arguments": {...}}` (or `parameters`), that names no
/// tool of `tools`: the model called a tool that is not offered, and the
/// text stays an answer (the agent notes it).
pub fn unoffered_call(content: &str, tools: &[ToolSpec]) -> Option<String> {
    top_level_objects(content).find_map(|(object, _)| {
        let name = object.get("name").and_then(Value::as_str)?;
        let arguments = object.get("arguments").or_else(|| object.get("parameters"));
        let shaped = object.len() == 2 && matches!(arguments, Some(Value::Object(_)));
        (shaped && !tools.iter().any(|tool| tool.name == name)).then(|| name.to_owned())
    })
}

/// How many objects naming a tool of `tools` with `arguments` the content
/// holds, valid or not: what `text_tool_calls` reads as calls.
pub fn written_calls(content: &str, tools: &[ToolSpec]) -> usize {
    embedded_calls(content, tools).len()
}

/// A content that is an unterminated `{"name": "<offered tool>",
/// "arguments": ...`: the model tried to call the tool and was cut off.
/// It becomes a call with `invalid_arguments`, so the model is told,
/// instead of an answer that ends the task; nothing is completed.
fn cut_off_call(text: &str, tools: &[ToolSpec], id: String) -> Option<ToolCall> {
    static START: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r#"^\{\s*"name"\s*:\s*"([^"\\]+)"\s*,\s*"(?:arguments|parameters)"\s*:"#).ok()
    });
    let name = START.as_ref()?.captures(text)?.get(1)?.as_str();
    tools.iter().find(|tool| tool.name == name)?;
    let mut call = ToolCall::new(id, name, Value::String(text.to_owned()));
    call.invalid_arguments = Some(format!(
        "it is unterminated JSON (cut off after {} bytes): send it again complete",
        text.len()
    ));
    call.from_text = true;
    Some(call)
}

/// Checks `arguments` against the parts of a JSON Schema that matter for
/// telling a call from prose: required properties, primitive types of
/// declared properties, and `additionalProperties: false`.
pub fn validate(arguments: &Map<String, Value>, schema: &Value) -> Result<(), String> {
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !arguments.contains_key(name) {
                return Err(format!("missing required argument `{name}`"));
            }
        }
    }
    let properties = schema.get("properties").and_then(Value::as_object);
    let closed = schema.get("additionalProperties") == Some(&Value::Bool(false));
    for (name, value) in arguments {
        let Some(property) = properties.and_then(|properties| properties.get(name)) else {
            if closed {
                return Err(format!("unknown argument `{name}`"));
            }
            continue;
        };
        let allowed: Vec<&str> = match property.get("type") {
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(many)) => many.iter().filter_map(Value::as_str).collect(),
            _ => continue,
        };
        if !allowed.iter().any(|kind| has_type(value, kind)) {
            return Err(format!(
                "argument `{name}` must be of type {}",
                allowed.join(" or ")
            ));
        }
    }
    Ok(())
}

fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "boolean" => value.is_boolean(),
        "number" => value.is_number(),
        "integer" => {
            value.is_i64()
                || value.is_u64()
                || value.as_f64().is_some_and(|number| number.fract() == 0.0)
        }
        "array" => value.is_array(),
        "object" => value.is_object(),
        "null" => value.is_null(),
        // A type this check does not know: do not reject on it.
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn tools() -> Vec<ToolSpec> {
        vec![ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "max_lines": {"type": "integer"}
                },
                "required": ["path"]
            }),
        }]
    }

    fn answer(content: &str) -> ChatResponse {
        ChatResponse {
            content: content.into(),
            ..ChatResponse::default()
        }
    }

    fn recovered(content: &str) -> Option<ToolCall> {
        let (call, rest) = recovered_in(content);
        if call.is_some() {
            assert!(rest.is_empty(), "{rest}");
        }
        call
    }

    /// The call recovered and the text left around it.
    fn recovered_in(content: &str) -> (Option<ToolCall>, String) {
        let mut response = answer(content);
        if recover(&mut response, &tools(), "text_call_1".into()) {
            assert_eq!(response.finish_reason, FinishReason::ToolCalls);
            (Some(response.tool_calls.remove(0)), response.content)
        } else {
            assert_eq!(response.content, content);
            assert!(response.tool_calls.is_empty());
            (None, response.content)
        }
    }

    #[test]
    fn arguments_cosmetic_repair_only() {
        assert_eq!(
            parse_arguments(r#"{"path": "a"}"#),
            Ok(json!({"path": "a"}))
        );
        assert_eq!(parse_arguments(""), Ok(json!({})));
        assert_eq!(parse_arguments("  "), Ok(json!({})));
        assert_eq!(
            parse_arguments("```json\n{\"path\": \"a\",}\n```"),
            Ok(json!({"path": "a"}))
        );
        assert_eq!(
            parse_arguments(r#"{"paths": ["a", "b",], "x": {"y": 1,},}"#),
            Ok(json!({"paths": ["a", "b"], "x": {"y": 1}}))
        );
        // A comma inside a string is content, not a defect.
        assert_eq!(
            parse_arguments(r#"{"text": "a,}"}"#),
            Ok(json!({"text": "a,}"}))
        );
        assert_eq!(
            parse_arguments(r#"{"text": "say \",]\"",}"#),
            Ok(json!({"text": "say \",]\""}))
        );
        let cut = parse_arguments(r#"{"path": "src/ma"#).unwrap_err();
        assert!(cut.contains("unterminated"), "{cut}");
        let cut = parse_arguments(r#"{"path": "a","#).unwrap_err();
        assert!(cut.contains("unterminated"), "{cut}");
        let bad = parse_arguments(r#"{"path": 'a'}"#).unwrap_err();
        assert!(bad.contains("not valid JSON"), "{bad}");
        let array = parse_arguments("[1]").unwrap_err();
        assert!(array.contains("JSON object"), "{array}");
    }

    #[test]
    fn fenced_and_bare_calls_are_recovered() {
        let call = recovered(
            "```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```",
        )
        .unwrap();
        assert_eq!(call.name, "read_file");
        assert_eq!(call.arguments, json!({"path": "src/lib.rs"}));
        assert!(call.from_text);
        assert_eq!(call.id, "text_call_1");
        assert!(call.invalid_arguments.is_none());

        let call = recovered(
            "  {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\", \"max_lines\": 3}}\n",
        )
        .unwrap();
        assert_eq!(call.arguments, json!({"path": "a", "max_lines": 3}));
        let call =
            recovered("```\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\",},}\n```")
                .unwrap();
        assert_eq!(call.arguments, json!({"path": "a"}));
        let call = recovered(r#"{"name": "read_file", "parameters": {"path": "a"}}"#).unwrap();
        assert_eq!(call.arguments, json!({"path": "a"}));
        let call = recovered(r#"{"name": "read_file", "arguments": "{\"path\": \"a\"}"}"#).unwrap();
        assert_eq!(call.arguments, json!({"path": "a"}));
    }

    #[test]
    fn a_call_inside_prose_is_recovered_and_the_prose_kept() {
        let (call, rest) = recovered_in(
            "I will read it first.\n```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}\n```\nThen I fix it.",
        );
        let call = call.unwrap();
        assert_eq!(call.arguments, json!({"path": "a"}));
        assert!(call.invalid_arguments.is_none() && call.from_text);
        assert_eq!(rest, "I will read it first.\n\nThen I fix it.");
        let (call, rest) =
            recovered_in("Calling: {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\",},}");
        assert_eq!(call.unwrap().arguments, json!({"path": "a"}));
        assert_eq!(rest, "Calling:");
        // Braces in prose before the call are no obstacle.
        let (call, rest) = recovered_in(
            "A set {1, 2} and a map {\"k\": 1}; now {\"name\": \"read_file\", \"parameters\": {\"path\": \"b\"}} done",
        );
        assert_eq!(call.unwrap().arguments, json!({"path": "b"}));
        assert_eq!(rest, "A set {1, 2} and a map {\"k\": 1}; now\n\ndone");
    }

    /// The call made of a text that holds calls but no valid single one:
    /// not run, saying why.
    fn refused(content: &str) -> String {
        let (call, rest) = recovered_in(content);
        let call = call.expect("a call that is not run");
        assert!(call.from_text);
        assert_eq!(rest, content, "the text is kept whole");
        call.invalid_arguments.expect("a reason")
    }

    #[test]
    fn several_calls_or_an_invalid_one_are_refused_with_a_reason() {
        let two = refused(
            "First {\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}} then {\"name\": \"read_file\", \"arguments\": {\"path\": \"b\"}}",
        );
        assert!(two.contains("2 tool calls"), "{two}");
        assert!(two.contains("exactly one call"), "{two}");
        for (content, why) in [
            (
                r#"{"name": "read_file", "arguments": {}}"#,
                "missing required argument `path`",
            ),
            (
                r#"{"name": "read_file", "arguments": {"path": 3}}"#,
                "`path` must be of type string",
            ),
            (
                r#"{"name": "read_file", "arguments": {"path": "a", "max_lines": "3"}}"#,
                "`max_lines`",
            ),
            (
                r#"{"name": "read_file", "arguments": ["a"]}"#,
                "not a JSON object",
            ),
            (
                r#"Here: {"name": "read_file", "arguments": {"path": "a"}, "why": "x"}"#,
                "keys besides",
            ),
        ] {
            let problem = refused(content);
            assert!(problem.contains(why), "{content}: {problem}");
            assert!(problem.contains("exactly one"), "{problem}");
        }
    }

    #[test]
    fn everything_else_stays_an_answer() {
        // Names no offered tool.
        assert!(recovered(r#"{"name": "delete_everything", "arguments": {}}"#).is_none());
        assert!(
            recovered("Try {\"name\": \"rm\", \"arguments\": {\"path\": \"a\"}} yourself.")
                .is_none()
        );
        // A JSON answer that is not a call.
        assert!(recovered(r#"{"answer": 42}"#).is_none());
        assert!(recovered(r#"{"name": "read_file", "size": 3}"#).is_none());
        // Plain text, braces or not.
        assert!(recovered("The file says hello.").is_none());
        assert!(recovered("fn main() { println!(\"{}\", 1); }").is_none());
        assert!(recovered("").is_none());
    }

    #[test]
    fn calls_of_tools_not_offered_and_calls_counted() {
        let tools = tools();
        let repeat = r#"```json
{"name": "repeat", "arguments": {"path": "a"}}
```"#;
        assert_eq!(unoffered_call(repeat, &tools).as_deref(), Some("repeat"));
        assert_eq!(
            unoffered_call(r#"{"name": "rm", "parameters": {}}"#, &tools).as_deref(),
            Some("rm")
        );
        // An offered tool, a JSON answer, another shape: none.
        for text in [
            r#"{"name": "read_file", "arguments": {"path": "a"}}"#,
            r#"{"answer": 42}"#,
            r#"{"name": "rm", "arguments": {}, "why": "x"}"#,
            r#"{"name": "rm", "arguments": "a"}"#,
            r#"{"outer": {"name": "rm", "arguments": {}}}"#,
            "no JSON {here",
        ] {
            assert_eq!(unoffered_call(text, &tools), None, "{text}");
        }
        let call = r#"{"name": "read_file", "arguments": {"path": "a"}}"#;
        assert_eq!(
            written_calls(&format!("{call}\n{call}\n{{\"name\": \"re"), &tools),
            2
        );
        assert_eq!(written_calls("plain text", &tools), 0);
    }

    #[test]
    fn structured_calls_win() {
        let mut response = answer(r#"{"name": "read_file", "arguments": {"path": "a"}}"#);
        response
            .tool_calls
            .push(ToolCall::new("c1", "read_file", json!({"path": "b"})));
        assert!(!recover(&mut response, &tools(), "x".into()));
        assert_eq!(response.tool_calls.len(), 1);
    }

    #[test]
    fn unterminated_call_is_an_error_not_a_guess() {
        let call =
            recovered("```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/ma")
                .unwrap();
        assert_eq!(call.name, "read_file");
        assert!(call.from_text);
        let message = call.invalid_arguments.unwrap();
        assert!(message.contains("unterminated"), "{message}");
        assert!(
            call.arguments.is_string(),
            "the raw text is kept, not completed"
        );
        // Complete JSON, the fence never closed: the call is whole.
        let call =
            recovered("```json\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a\"}}")
                .unwrap();
        assert!(call.invalid_arguments.is_none());
        // Unterminated, naming no offered tool: an answer.
        assert!(recovered(r#"{"name": "rm", "arguments": {"path": "#).is_none());
    }

    #[test]
    fn schema_checks() {
        let schema = json!({
            "type": "object",
            "properties": {"n": {"type": ["integer", "null"]}, "flag": {"type": "boolean"}},
            "required": ["n"],
            "additionalProperties": false
        });
        let object = |value: Value| value.as_object().unwrap().clone();
        assert!(validate(&object(json!({"n": 1})), &schema).is_ok());
        assert!(validate(&object(json!({"n": 1.0})), &schema).is_ok());
        assert!(validate(&object(json!({"n": null, "flag": true})), &schema).is_ok());
        assert!(validate(&object(json!({"n": 1.5})), &schema).is_err());
        assert!(validate(&object(json!({"flag": true})), &schema).is_err());
        assert!(validate(&object(json!({"n": 1, "other": 2})), &schema).is_err());
        assert!(validate(&object(json!({"anything": 1})), &json!({"type": "object"})).is_ok());
    }
}
