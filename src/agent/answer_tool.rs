//! The final-answer tool of a task with an output contract
//! (docs/task-files.md, "Output contracts"): the model is offered a tool
//! whose input schema is the task's output schema, and a call to it is the
//! answer. It works with native and text tool calls alike, so the schema
//! reaches every provider in the request itself. It is no real tool: the
//! policy never decides it, it runs nothing, and it is no step's tool
//! call. An answer given as plain JSON text is still accepted.

use serde_json::{Value, json};

use crate::core::{ToolCall, ToolSpec};

/// The tool's name.
pub const NAME: &str = "final_answer";

/// The property that carries an answer whose schema is not an object (a
/// tool's input is always an object).
const WRAPPED: &str = "answer";

/// A schema whose values are objects can be a tool's input as it is.
fn takes_objects(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
}

/// The tool offered to a task whose answer must match `schema`.
pub fn spec(schema: &Value) -> ToolSpec {
    let (parameters, how) = if takes_objects(schema) {
        (schema.clone(), "its arguments are the answer")
    } else {
        (
            json!({"type": "object", "properties": {WRAPPED: schema}, "required": [WRAPPED]}),
            "its `answer` argument is the answer",
        )
    };
    ToolSpec {
        name: NAME.to_owned(),
        description: format!(
            "Give the task's final answer, once the work is done: {how}, and must match this schema. Call it last, alone."
        ),
        parameters,
    }
}

/// The answer a call to the tool gives, as JSON text (pretty-printed), or
/// the arguments as the model wrote them when they were no JSON.
pub fn answer(call: &ToolCall, schema: &Value) -> String {
    if let Some(raw) = &call.invalid_arguments {
        return raw.clone();
    }
    let value = if takes_objects(schema) {
        &call.arguments
    } else {
        call.arguments.get(WRAPPED).unwrap_or(&call.arguments)
    };
    serde_json::to_string_pretty(value).unwrap_or_default()
}

/// What the call's result says: the answer is taken and checked.
pub const RECEIVED: &str = "The answer was received; ybs checks it against the output schema.";

/// How to give the answer, for the system prompt and the feedback.
pub const HOW: &str =
    "give the answer by calling `final_answer` with it (or reply with only the JSON value)";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_schema_is_the_input_and_any_other_is_wrapped() {
        let object = json!({"type": "object", "properties": {"verdict": {"enum": ["a", "b"]}}});
        assert_eq!(spec(&object).parameters, object);
        let call = ToolCall::new("c", NAME, json!({"verdict": "a"}));
        assert_eq!(answer(&call, &object), "{\n  \"verdict\": \"a\"\n}");
        let list = json!({"type": "array", "items": {"type": "string"}});
        assert_eq!(spec(&list).parameters["properties"]["answer"], list);
        let call = ToolCall::new("c", NAME, json!({"answer": ["x"]}));
        assert_eq!(answer(&call, &list), "[\n  \"x\"\n]");
        let mut broken = ToolCall::new("c", NAME, Value::Null);
        broken.invalid_arguments = Some("{\"verdict\": ".to_owned());
        assert_eq!(answer(&broken, &object), "{\"verdict\": ");
    }
}
