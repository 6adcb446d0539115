//! `provider: apple`: Apple's on-device Foundation Model (`system`) served
//! over the OpenAI Chat Completions wire by Apple's `fm serve` (macOS 27)
//! or by a bridge such as `apfel` (docs/providers.md "Apple").
//!
//! The OpenAI protocol ([`super::openai`]) with the servers' quirks fixed
//! here:
//! - no key: none is needed, and none is ever sent (the provider has no key
//!   variable, so no `Authorization` header is built);
//! - the tool-schema subset: nested parameter objects are not accepted, so
//!   each object-typed parameter with `properties` is flattened into
//!   top-level parameters named by their path joined with [`SEPARATOR`]
//!   (`address.city` becomes `address__city`), and a call's arguments are
//!   nested again before anything sees them; earlier calls sent back in
//!   the conversation are flattened the same way, so the model sees one
//!   naming throughout;
//! - usage: `prompt_tokens` comes back as 0 (and a bridge may send no
//!   usage at all): a zero count is replaced by ybs's own estimate
//!   ([`super::tokens`]), and the turn is marked `usage_estimated`, which
//!   the transcript's `llm_calls[]` records;
//! - a safety abort ends the turn with `finish_reason: content_filter`,
//!   which the OpenAI reading already turns into the task's reason
//!   `content_filter`.

use std::collections::BTreeMap;

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use super::openai::{self, Assembly};
use super::stream::{self, Framing, Scrub, Wire};
use super::{ChatRequest, ChatResponse, Message, ProviderError, Settings};

/// Where the base URL may come from, besides `llm.endpoint`.
pub const BASE_URL_VAR: &str = "APPLE_FM_BASE_URL";
/// `fm serve`'s own default address (`fm serve` with no `--host` or
/// `--port`): the port Apple's tool binds when given none, as the macOS 27
/// tools built around it use it. `apfel --serve` listens on
/// `http://127.0.0.1:11434/v1` (Ollama's port): name it with
/// `--endpoint`.
pub const DEFAULT_ENDPOINT: &str = "http://127.0.0.1:1976/v1";
/// The on-device model.
pub const DEFAULT_MODEL: &str = "system";
/// Joins the names of a flattened parameter's path.
pub const SEPARATOR: &str = "__";

/// The OpenAI wire with Apple's defaults and fixes.
#[derive(Debug)]
pub struct Apple;

impl Wire for Apple {
    type Turn = AppleTurn;
    const END: &'static str = <openai::OpenAi as Wire>::END;
    const FRAMING: Framing = Framing::Sse;
    const PATH: &'static [&'static str] = <openai::OpenAi as Wire>::PATH;

    /// Nothing: the server takes no key, and none is sent.
    fn headers(_settings: &Settings) -> Result<HeaderMap, ProviderError> {
        Ok(HeaderMap::new())
    }

    fn body(request: &ChatRequest, settings: &Settings) -> Value {
        let mut body =
            openai::request_body(request, settings.model(request), settings.streaming, false);
        flatten_body(&mut body, request);
        body
    }
}

/// An OpenAI turn, finished the Apple way.
#[derive(Debug, Default)]
pub(super) struct AppleTurn(Assembly);

impl stream::Turn for AppleTurn {
    fn feed(
        &mut self,
        event: Option<&str>,
        data: &str,
        scrub: Scrub,
    ) -> Result<bool, ProviderError> {
        self.0.feed(event, data, scrub)
    }

    fn whole(&mut self, value: &Value, scrub: Scrub) -> Result<(), ProviderError> {
        self.0.whole(value, scrub)
    }

    fn complete(&self) -> bool {
        self.0.complete()
    }

    fn text_so_far(&self) -> std::borrow::Cow<'_, str> {
        self.0.text_so_far()
    }

    fn finish(self, request: &ChatRequest, text_tool_calls: bool) -> ChatResponse {
        let mut response = self.0.finish(request, text_tool_calls);
        let flattened = Flattened::of(request);
        for call in &mut response.tool_calls {
            if let Some(paths) = flattened.get(&call.name) {
                nest(&mut call.arguments, paths);
            }
        }
        estimate_usage(&mut response, request);
        response
    }
}

/// A zero count (the server's `prompt_tokens: 0`, or no usage at all)
/// replaced by ybs's own count: the request's text and tool schemas, and
/// the turn's text and call arguments.
fn estimate_usage(response: &mut ChatResponse, request: &ChatRequest) {
    use super::tokens::{PER_MESSAGE, count};
    if response.usage.input_tokens == 0 {
        let mut tokens = count(&request.system).saturating_add(PER_MESSAGE);
        for message in &request.messages {
            let text = match message {
                Message::User { content } => count(content),
                Message::Assistant {
                    content,
                    tool_calls,
                } => tool_calls.iter().fold(count(content), |sum, call| {
                    sum.saturating_add(count(&call.name))
                        .saturating_add(count(&call.arguments.to_string()))
                }),
                Message::Tool { content, .. } => count(content),
            };
            tokens = tokens.saturating_add(text).saturating_add(PER_MESSAGE);
        }
        for tool in &request.tools {
            tokens = tokens
                .saturating_add(count(&tool.name))
                .saturating_add(count(&tool.description))
                .saturating_add(count(&tool.parameters.to_string()));
        }
        response.usage.input_tokens = tokens;
        response.usage_estimated = true;
    }
    if response.usage.output_tokens == 0
        && (!response.content.is_empty() || !response.tool_calls.is_empty())
    {
        response.usage.output_tokens =
            response
                .tool_calls
                .iter()
                .fold(count(&response.content), |sum, call| {
                    sum.saturating_add(count(&call.name))
                        .saturating_add(count(&call.arguments.to_string()))
                });
        response.usage_estimated = true;
    }
}

/// The flat name of each nested parameter, per tool with any: flat name
/// → its path of property names.
type Paths = BTreeMap<String, Vec<String>>;

/// The tools of a request whose schemas are flattened.
struct Flattened {
    tools: BTreeMap<String, (Value, Paths)>,
}

impl Flattened {
    fn of(request: &ChatRequest) -> Self {
        let tools = request
            .tools
            .iter()
            .filter_map(|tool| {
                flatten_schema(&tool.parameters).map(|flat| (tool.name.clone(), flat))
            })
            .collect();
        Self { tools }
    }

    fn get(&self, tool: &str) -> Option<&Paths> {
        self.tools.get(tool).map(|(_, paths)| paths)
    }
}

/// The body with every tool's nested parameters flattened, and the
/// arguments of the calls already made flattened to match.
fn flatten_body(body: &mut Value, request: &ChatRequest) {
    let flattened = Flattened::of(request);
    if flattened.tools.is_empty() {
        return;
    }
    if let Some(tools) = body.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools {
            let function = &mut tool["function"];
            let Some(name) = function.get("name").and_then(Value::as_str) else {
                continue;
            };
            if let Some((schema, _)) = flattened.tools.get(name) {
                function["parameters"] = schema.clone();
            }
        }
    }
    let Some(messages) = body.get_mut("messages").and_then(Value::as_array_mut) else {
        return;
    };
    for message in messages {
        let Some(calls) = message.get_mut("tool_calls").and_then(Value::as_array_mut) else {
            continue;
        };
        for call in calls {
            let function = &mut call["function"];
            let Some(paths) = function
                .get("name")
                .and_then(Value::as_str)
                .and_then(|name| flattened.get(name))
            else {
                continue;
            };
            let arguments = function.get("arguments").and_then(Value::as_str);
            if let Some(Value::Object(arguments)) =
                arguments.and_then(|text| serde_json::from_str::<Value>(text).ok())
            {
                function["arguments"] = Value::String(flat_arguments(arguments, paths).to_string());
            }
        }
    }
}

/// `schema` with each object-typed property that has `properties`
/// replaced by its properties, named by their path (recursively), and
/// what each flat name stands for; `None` when there is nothing to
/// flatten, or when a flat name would collide with another parameter
/// (the schema is then sent as it is).
fn flatten_schema(schema: &Value) -> Option<(Value, Paths)> {
    let properties = schema.get("properties")?.as_object()?;
    if !properties.values().any(nested) {
        return None;
    }
    let mut flat = Map::new();
    let mut required = Vec::new();
    let mut paths = Paths::new();
    flatten_into(
        properties,
        &required_of(schema),
        true,
        &[],
        "",
        &mut flat,
        &mut required,
        &mut paths,
    )?;
    let mut out = schema.as_object()?.clone();
    out.insert("properties".into(), Value::Object(flat));
    out.insert(
        "required".into(),
        Value::Array(required.into_iter().map(Value::String).collect()),
    );
    Some((Value::Object(out), paths))
}

/// An object-typed property with properties of its own.
fn nested(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        && schema
            .get("properties")
            .and_then(Value::as_object)
            .is_some_and(|properties| !properties.is_empty())
}

fn required_of(schema: &Value) -> Vec<String> {
    schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

#[expect(clippy::too_many_arguments, reason = "one recursive walk's state")]
fn flatten_into(
    properties: &Map<String, Value>,
    required: &[String],
    parent_required: bool,
    path: &[String],
    parent_description: &str,
    flat: &mut Map<String, Value>,
    flat_required: &mut Vec<String>,
    paths: &mut Paths,
) -> Option<()> {
    for (name, schema) in properties {
        let mut here = path.to_vec();
        here.push(name.clone());
        let is_required = parent_required && required.iter().any(|r| r == name);
        if nested(schema) {
            let description = schema
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            flatten_into(
                schema.get("properties")?.as_object()?,
                &required_of(schema),
                is_required,
                &here,
                description,
                flat,
                flat_required,
                paths,
            )?;
            continue;
        }
        let flat_name = here.join(SEPARATOR);
        if flat.contains_key(&flat_name) {
            return None;
        }
        let mut schema = schema.clone();
        if !parent_description.is_empty()
            && let Some(object) = schema.as_object_mut()
        {
            let own = object
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let joined = if own.is_empty() {
                parent_description.to_owned()
            } else {
                format!("{parent_description}: {own}")
            };
            object.insert("description".into(), Value::String(joined));
        }
        flat.insert(flat_name.clone(), schema);
        if is_required {
            flat_required.push(flat_name.clone());
        }
        if here.len() > 1 {
            paths.insert(flat_name, here);
        }
    }
    Some(())
}

/// A call's arguments, nested again: each flat name of `paths` becomes
/// its path (`{"address__city": "Paris"}` → `{"address": {"city":
/// "Paris"}}`); other names stay as they are.
fn nest(arguments: &mut Value, paths: &Paths) {
    let Value::Object(object) = arguments else {
        return;
    };
    let mut nested = Map::new();
    for (name, value) in std::mem::take(object) {
        match paths.get(&name) {
            Some(path) => insert_at(&mut nested, path, value),
            None => {
                nested.insert(name, value);
            }
        }
    }
    *object = nested;
}

fn insert_at(object: &mut Map<String, Value>, path: &[String], value: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = object;
    for name in parents {
        let slot = here
            .entry(name.clone())
            .or_insert_with(|| Value::Object(Map::new()));
        if !slot.is_object() {
            *slot = Value::Object(Map::new());
        }
        let Value::Object(inner) = slot else { return };
        here = inner;
    }
    here.insert(last.clone(), value);
}

/// Nested arguments flattened as the schema was (the inverse of
/// [`nest`]), for calls sent back in the conversation.
fn flat_arguments(arguments: Map<String, Value>, paths: &Paths) -> Value {
    let objects: std::collections::BTreeSet<&[String]> = paths
        .values()
        .flat_map(|path| (1..path.len()).map(move |end| &path[..end]))
        .collect();
    let mut flat = Map::new();
    let mut stack: Vec<(Vec<String>, Map<String, Value>)> = vec![(Vec::new(), arguments)];
    while let Some((prefix, object)) = stack.pop() {
        for (name, value) in object {
            let mut path = prefix.clone();
            path.push(name);
            match value {
                Value::Object(inner) if objects.contains(path.as_slice()) => {
                    stack.push((path, inner));
                }
                value => {
                    flat.insert(path.join(SEPARATOR), value);
                }
            }
        }
    }
    Value::Object(flat)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({"type": "object", "additionalProperties": false,
               "properties": {
                   "name": {"type": "string"},
                   "address": {"type": "object", "description": "Where",
                       "properties": {
                           "city": {"type": "string", "description": "The city"},
                           "geo": {"type": "object", "properties": {"lat": {"type": "number"}}, "required": ["lat"]}},
                       "required": ["city", "geo"]},
                   "tags": {"type": "array", "items": {"type": "string"}}},
               "required": ["name", "address"]})
    }

    #[test]
    fn nested_objects_flatten_and_calls_nest_back() {
        let (flat, paths) = flatten_schema(&schema()).unwrap();
        let properties = flat["properties"].as_object().unwrap();
        let names: Vec<&str> = properties.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["name", "address__city", "address__geo__lat", "tags"]
        );
        assert!(properties.values().all(|p| p["type"] != "object"), "{flat}");
        assert_eq!(
            flat["required"],
            json!(["name", "address__city", "address__geo__lat"])
        );
        assert_eq!(
            properties["address__city"]["description"],
            "Where: The city"
        );
        assert_eq!(flat["additionalProperties"], false);
        let mut arguments = json!({"name": "n", "address__city": "Paris", "address__geo__lat": 48.8, "tags": ["a"]});
        nest(&mut arguments, &paths);
        let nested =
            json!({"name": "n", "address": {"city": "Paris", "geo": {"lat": 48.8}}, "tags": ["a"]});
        assert_eq!(arguments, nested);
        let Value::Object(object) = nested else {
            unreachable!()
        };
        assert_eq!(
            flat_arguments(object, &paths),
            json!({"name": "n", "address__city": "Paris", "address__geo__lat": 48.8, "tags": ["a"]})
        );
    }

    #[test]
    fn flat_schemas_and_collisions_are_left_alone() {
        assert!(
            flatten_schema(&json!({"type": "object", "properties": {"a": {"type": "string"}}}))
                .is_none()
        );
        let colliding = json!({"type": "object", "properties": {
            "a__b": {"type": "string"},
            "a": {"type": "object", "properties": {"b": {"type": "string"}}}}});
        assert!(flatten_schema(&colliding).is_none());
        // An object without properties (free-form) is not flattened.
        assert!(
            flatten_schema(&json!({"type": "object", "properties": {"o": {"type": "object"}}}))
                .is_none()
        );
    }
}
