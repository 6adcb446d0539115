//! The output contract (`output:` in a task, docs/task-files.md): the
//! final answer must be a JSON value the task's JSON Schema accepts. The
//! value is taken from the answer bare, from its one fenced block, or
//! from the object it holds between its first `{` and last `}`; the
//! schema is checked with the `jsonschema` crate, and its messages go back
//! to the model like a failing check's output.

use serde_json::Value;

use crate::core::Reason;
use crate::task::{OutputSpec, TaskSpec};

/// At most this many validator messages go back to the model.
const MAX_MESSAGES: usize = 20;

/// Why an answer holds no one JSON value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    #[error("the answer holds {0} JSON blocks; give exactly one JSON value")]
    Blocks(usize),
    #[error("the answer is not JSON: expected a JSON value, bare or in one ```json block")]
    NotJson,
}

/// The JSON value in `text`: the whole text, else the one fenced block
/// that parses (```` ```json ```` or plain), else the span from the first
/// `{` to the last `}`. `Err` says why there is none.
pub fn extract(text: &str) -> Result<Value, ExtractError> {
    let trimmed = text.trim();
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Ok(value);
    }
    let blocks: Vec<Value> = fenced_blocks(trimmed)
        .into_iter()
        .filter_map(|block| serde_json::from_str(block.trim()).ok())
        .collect();
    let count = blocks.len();
    let mut blocks = blocks.into_iter();
    match (blocks.next(), count) {
        (Some(value), 1) => return Ok(value),
        (None, _) => {}
        (Some(_), count) => return Err(ExtractError::Blocks(count)),
    }
    if let (Some(start), Some(end)) = (trimmed.find('{'), trimmed.rfind('}'))
        && start < end
        && let Ok(value) = serde_json::from_str(&trimmed[start..=end])
    {
        return Ok(value);
    }
    Err(ExtractError::NotJson)
}

/// The text inside each fenced code block of `text` (fences of three or
/// more backticks, closed by a fence at least as long).
fn fenced_blocks(text: &str) -> Vec<&str> {
    let mut blocks = Vec::new();
    let mut open: Option<(usize, usize)> = None; // (fence length, start of body)
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let ticks = trimmed.chars().take_while(|&c| c == '`').count();
        match open {
            None if ticks >= 3 => open = Some((ticks, offset + line.len())),
            Some((fence, start)) if ticks >= fence && trimmed.trim_end().len() == ticks => {
                blocks.push(&text[start..offset]);
                open = None;
            }
            _ => {}
        }
        offset += line.len();
    }
    blocks
}

/// Checks `text` against the contract: the value, or the messages that
/// say why not (the validator's, each with the path it concerns).
pub fn check(spec: &OutputSpec, text: &str) -> Result<Value, Vec<String>> {
    let value = extract(text).map_err(|error| vec![error.to_string()])?;
    // The schema was compiled when the task file was loaded.
    let validator = jsonschema::validator_for(&spec.schema)
        .map_err(|error| vec![format!("the output schema is invalid: {error}")])?;
    let mut messages: Vec<String> = validator
        .iter_errors(&value)
        .map(|error| {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                "the answer".to_owned()
            } else {
                format!("`{path}`")
            };
            format!(
                "{at}: {error}{}",
                fragment(&spec.schema, &error.schema_path().to_string())
            )
        })
        .collect();
    if messages.is_empty() {
        return Ok(value);
    }
    let total = messages.len();
    if total > MAX_MESSAGES {
        messages.truncate(MAX_MESSAGES);
        messages.push(format!("… and {} more", total - MAX_MESSAGES));
    }
    Err(messages)
}

/// The part of `schema` a validator message concerns: the schema object
/// holding the keyword at `keyword_path` (`/properties/verdict/enum` →
/// `/properties/verdict`), at most [`FRAGMENT_CHARS`] of it.
fn fragment(schema: &Value, keyword_path: &str) -> String {
    let parent = keyword_path
        .rsplit_once('/')
        .map_or("", |(parent, _)| parent);
    let Some(part) = schema.pointer(parent) else {
        return String::new();
    };
    let text = part.to_string();
    let text = crate::core::text::truncate_middle(&text, FRAGMENT_CHARS).0;
    let at = if parent.is_empty() { "/" } else { parent };
    format!(" (the schema at `{at}`: {text})")
}

/// The longest schema fragment quoted in a message.
const FRAGMENT_CHARS: usize = 400;

/// The longest schema quoted whole in the feedback to an answer that is
/// no JSON value.
const SCHEMA_CHARS: usize = 4000;

/// How many times an invalid answer goes back to the model.
pub fn attempts(task: &TaskSpec) -> u32 {
    task.output
        .as_ref()
        .and_then(|spec| spec.attempts)
        .unwrap_or(task.fix_attempts)
}

/// What the model is told when its answer breaks the contract: the
/// validator's messages with the part of the schema each concerns, how
/// to answer, and, when the answer held no JSON value, the whole schema.
pub fn feedback(spec: &OutputSpec, text: &str, messages: &[String]) -> String {
    let mut feedback = format!(
        "Your answer does not match the required output schema. Answer again: call `{}` with the answer (or reply with only a JSON value that the schema accepts, bare or in one ```json block).\n\n{}",
        crate::agent::answer_tool::NAME,
        messages
            .iter()
            .map(|message| format!("- {message}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    if extract(text).is_err() {
        let schema = spec.schema.to_string();
        feedback.push_str(&format!(
            "\n\nThe schema the answer must match:\n{}",
            crate::core::text::truncate_middle(&schema, SCHEMA_CHARS).0
        ));
    }
    feedback
}

/// The valid JSON value of a final answer, for `task.output`: `None`
/// without a contract, or when the answer broke it.
pub fn valid_value(task: &TaskSpec, text: &str, reason: Reason) -> Option<Value> {
    if reason == Reason::OutputInvalid {
        return None;
    }
    check(task.output.as_ref()?, text).ok()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn takes_a_bare_fenced_or_embedded_value() {
        assert_eq!(extract(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(
            extract("Here it is:\n```json\n{\"a\": [1, 2]}\n```\nDone.").unwrap(),
            json!({"a": [1, 2]})
        );
        assert_eq!(
            extract("The result is {\"ok\": true}.").unwrap(),
            json!({"ok": true})
        );
        assert!(extract("All done, tests pass.").is_err());
        let two = "```json\n{\"a\": 1}\n```\nand\n```\n{\"b\": 2}\n```";
        assert!(
            extract(two)
                .unwrap_err()
                .to_string()
                .contains("2 JSON blocks")
        );
    }

    #[test]
    fn violations_name_the_path() {
        let spec = OutputSpec {
            schema: json!({
                "type": "object",
                "required": ["verdict"],
                "properties": {"verdict": {"enum": ["approve", "reject"]}}
            }),
            schema_file: None,
            attempts: None,
        };
        assert_eq!(
            check(&spec, "{\"verdict\": \"approve\"}").unwrap(),
            json!({"verdict": "approve"})
        );
        let messages = check(&spec, "{\"verdict\": \"maybe\"}").unwrap_err();
        assert!(messages[0].starts_with("`/verdict`:"), "{messages:?}");
        assert!(
            messages[0].ends_with(
                "(the schema at `/properties/verdict`: {\"enum\":[\"approve\",\"reject\"]})"
            ),
            "{messages:?}"
        );
        let messages = check(&spec, "{}").unwrap_err();
        assert!(messages[0].contains("verdict"), "{messages:?}");
        // No JSON at all: the feedback carries the whole schema and how to
        // answer.
        let prose = "I approve.";
        let messages = check(&spec, prose).unwrap_err();
        let told = feedback(&spec, prose, &messages);
        assert!(told.contains("call `final_answer`"), "{told}");
        assert!(told.contains("\"enum\":[\"approve\",\"reject\"]"), "{told}");
    }
}
