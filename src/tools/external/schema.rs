//! An external tool's schema: parsing what a tool declares, the JSON
//! Schema the model is offered, and checking a call's parameters.
//!
//! Two spellings are accepted for `parameters` (docs/tools.md):
//!
//! - the seed format, a map of parameter name to
//!   `{type, description, required, default, enum, items}`;
//! - a JSON Schema object, `{"type": "object", "properties": {...},
//!   "required": [...]}`, with the same keywords per property.
//!
//! Both become one [`ToolSchema`]. Types are `string`, `integer`,
//! `number`, `boolean`, `array` and `object`. Checking is deliberately
//! strict: a parameter the schema does not name, or of the wrong type, is
//! an error naming the parameter, returned before any process starts.
//! A JSON Schema is also kept whole, and a call's parameters are checked
//! against it with the `jsonschema` crate, so the keywords the subset
//! above does not model (`minimum`, `pattern`, `maxLength`, nested
//! `properties`, …) hold too ([`violations`]; MCP tools use it as well).

use std::time::Duration;

use serde_json::{Map, Value, json};

/// The longest per-tool timeout a schema may ask for.
const MAX_SCHEMA_TIMEOUT: Duration = Duration::from_secs(3600);

/// A parameter's JSON type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    String,
    Integer,
    Number,
    Boolean,
    Array,
    Object,
}

impl ParamType {
    fn parse(text: &str) -> Option<Self> {
        Some(match text {
            "string" => Self::String,
            "integer" => Self::Integer,
            "number" => Self::Number,
            "boolean" => Self::Boolean,
            "array" => Self::Array,
            "object" => Self::Object,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::String => "string",
            Self::Integer => "integer",
            Self::Number => "number",
            Self::Boolean => "boolean",
            Self::Array => "array",
            Self::Object => "object",
        }
    }

    /// "a string", "an integer", ...
    fn article(self) -> &'static str {
        match self {
            Self::String => "a string",
            Self::Integer => "an integer",
            Self::Number => "a number",
            Self::Boolean => "a boolean",
            Self::Array => "an array",
            Self::Object => "an object",
        }
    }

    /// Returns true if and only if `value` has this type. A whole float
    /// (`3.0`) counts as an integer.
    fn matches(self, value: &Value) -> bool {
        match self {
            Self::String => value.is_string(),
            Self::Integer => {
                value.is_i64()
                    || value.is_u64()
                    || value.as_f64().is_some_and(|float| float.fract() == 0.0)
            }
            Self::Number => value.is_number(),
            Self::Boolean => value.is_boolean(),
            Self::Array => value.is_array(),
            Self::Object => value.is_object(),
        }
    }
}

/// One declared parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    pub kind: ParamType,
    pub description: Option<String>,
    pub required: bool,
    pub default: Option<Value>,
    /// Allowed values, when the tool lists them.
    pub choices: Option<Vec<Value>>,
    /// Element type of an array, when the tool gives one.
    pub items: Option<ParamType>,
}

/// What a tool declares about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSchema {
    /// The `name` the tool gave, if any. The tool's identity is the name
    /// it was discovered under; this is informational.
    pub name: Option<String>,
    pub description: String,
    pub params: Vec<Param>,
    /// `timeout_seconds`, when the tool suggests its own timeout.
    pub timeout: Option<Duration>,
    /// The parameters as declared, when they are a JSON Schema: checked
    /// whole after the subset above.
    pub declared: Option<Value>,
}

/// Why `value` breaks the JSON Schema `schema`, in one line (at most a few
/// of the validator's messages, each naming the path it concerns); `None`
/// when it does not, or when `schema` is not one the validator accepts
/// (what it declares is then not enforced beyond the checks above).
pub fn violations(schema: &Value, value: &Value) -> Option<String> {
    const SHOWN: usize = 3;
    let validator = jsonschema::validator_for(schema).ok()?;
    let messages: Vec<String> = validator
        .iter_errors(value)
        .map(|error| {
            let path = error.instance_path().to_string();
            let name = path.trim_start_matches('/').replace('/', ".");
            if name.is_empty() {
                error.to_string()
            } else {
                format!("parameter `{name}`: {error}")
            }
        })
        .collect();
    match messages.len() {
        0 => None,
        n if n > SHOWN => Some(format!(
            "{}; and {} more",
            messages[..SHOWN].join("; "),
            n - SHOWN
        )),
        _ => Some(messages.join("; ")),
    }
}

/// The declared `parameters` when they are a JSON Schema (not the seed
/// format).
fn declared_schema(parameters: &Value) -> Option<Value> {
    let object = parameters.as_object()?;
    let json_schema = object.get("type").and_then(Value::as_str) == Some("object")
        && object.get("properties").is_none_or(Value::is_object);
    json_schema.then(|| parameters.clone())
}

/// A tool schema that cannot be used (a sidecar, `--schema` output or a
/// config entry): what is wrong with it, one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("cannot read it: {0}")]
    Read(String),
    #[error("larger than {0} bytes")]
    TooLarge(usize),
    #[error("not valid JSON: {0}")]
    NotJson(String),
    #[error(transparent)]
    Invalid(#[from] InvalidSchema),
}

/// What is wrong in a schema's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidSchema {
    #[error("the schema is not a JSON object")]
    NotAnObject,
    /// `name` or `description`.
    #[error("`{0}` is not a string")]
    NotAString(&'static str),
    #[error("`parameters` is missing")]
    NoParameters,
    #[error("`parameters` is not an object")]
    ParametersNotAnObject,
    #[error("`timeout_seconds` is not a positive number")]
    Timeout,
    #[error("`required` lists a non-string")]
    RequiredNotAName,
    #[error("`required` is not a list of names")]
    RequiredNotAList,
    #[error("`required` names `{0}`, which is not a property")]
    RequiredUnknown(String),
    #[error("parameter name `{0}` is not valid (letters, digits, `_`, `-`, `.`; at most 64)")]
    ParamName(String),
    #[error("parameter `{0}` is not an object")]
    ParamNotAnObject(String),
    #[error(
        "parameter `{name}` has unknown type `{text}` (expected string, integer, number, boolean, array or object)"
    )]
    UnknownType { name: String, text: String },
    #[error("parameter `{0}` has no `type`")]
    NoType(String),
    /// A field of the parameter (`type`, `description`, …) of the wrong
    /// JSON type: `expected` is `a string`, `a boolean`.
    #[error("parameter `{name}`: `{field}` is not {expected}")]
    Field {
        name: String,
        field: &'static str,
        expected: &'static str,
    },
    #[error("parameter `{name}`: unknown item type `{text}`")]
    UnknownItemType { name: String, text: String },
    #[error("parameter `{0}`: `items` given for a non-array")]
    ItemsNotArray(String),
    #[error("parameter `{name}`: `enum` value {value} is not {expected}")]
    EnumValue {
        name: String,
        value: String,
        expected: &'static str,
    },
    #[error("parameter `{0}`: `enum` is not a non-empty list")]
    EnumNotAList(String),
    /// The default breaks the parameter's own type or choices.
    #[error("the default of {0}")]
    Default(ArgumentsError),
}

/// Arguments a tool's schema refuses: what goes back to the model, naming
/// the parameter.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgumentsError {
    #[error("the arguments must be a JSON object")]
    NotAnObject,
    /// `known`: the tool's parameters.
    #[error("unknown parameter `{name}`: {}", expected(.known))]
    Unknown { name: String, known: Vec<String> },
    #[error("missing required parameter `{name}` ({kind})")]
    Missing { name: String, kind: &'static str },
    /// `given`: what the model sent, briefly ([`describe`]).
    #[error("parameter `{name}` must be {expected}, not {given}")]
    Type {
        name: String,
        expected: &'static str,
        given: String,
    },
    #[error("parameter `{name}` must be one of {}, not {given}", .choices.join(", "))]
    Choice {
        name: String,
        choices: Vec<String>,
        given: String,
    },
    #[error("parameter `{name}[{index}]` must be {expected}, not {given}")]
    Item {
        name: String,
        index: usize,
        expected: &'static str,
        given: String,
    },
    /// The declared JSON Schema's validator: its messages.
    #[error("{0}")]
    Schema(String),
}

/// `expected `a`, `b``, or that there are no parameters.
fn expected(known: &[String]) -> String {
    if known.is_empty() {
        "it takes no parameters".to_owned()
    } else {
        let known: Vec<String> = known.iter().map(|name| format!("`{name}`")).collect();
        format!("expected {}", known.join(", "))
    }
}

impl ToolSchema {
    /// Parses a schema as `TOOL --schema` prints it or a sidecar holds it.
    pub fn parse(value: &Value) -> Result<Self, SchemaError> {
        Ok(Self::parse_object(value)?)
    }

    fn parse_object(value: &Value) -> Result<Self, InvalidSchema> {
        let object = value.as_object().ok_or(InvalidSchema::NotAnObject)?;
        let name = match object.get("name") {
            None | Some(Value::Null) => None,
            Some(Value::String(name)) => Some(name.clone()),
            Some(_) => return Err(InvalidSchema::NotAString("name")),
        };
        let description = match object.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(_) => return Err(InvalidSchema::NotAString("description")),
        };
        let (params, declared) = match object.get("parameters") {
            None => return Err(InvalidSchema::NoParameters),
            Some(parameters) => (parse_parameters(parameters)?, declared_schema(parameters)),
        };
        let timeout = match object.get("timeout_seconds") {
            None | Some(Value::Null) => None,
            Some(value) => match value.as_f64() {
                Some(seconds) if seconds > 0.0 && seconds.is_finite() => {
                    Some(Duration::from_secs_f64(seconds).min(MAX_SCHEMA_TIMEOUT))
                }
                _ => return Err(InvalidSchema::Timeout),
            },
        };
        Ok(Self {
            name,
            description,
            params,
            timeout,
            declared,
        })
    }

    /// A schema from a config entry: its `parameters` (either spelling)
    /// and `description`.
    pub fn from_config(description: Option<&str>, parameters: &Value) -> Result<Self, SchemaError> {
        Ok(Self {
            name: None,
            description: description.unwrap_or_default().to_owned(),
            params: parse_parameters(parameters)?,
            timeout: None,
            declared: declared_schema(parameters),
        })
    }

    /// The JSON Schema offered to the model as the tool's `parameters`.
    pub fn json_schema(&self) -> Value {
        let mut properties = Map::new();
        for param in &self.params {
            let mut property = Map::new();
            property.insert("type".to_owned(), json!(param.kind.as_str()));
            if let Some(description) = &param.description {
                property.insert("description".to_owned(), json!(description));
            }
            if let Some(choices) = &param.choices {
                property.insert("enum".to_owned(), Value::Array(choices.clone()));
            }
            if let Some(items) = param.items {
                property.insert("items".to_owned(), json!({"type": items.as_str()}));
            }
            if let Some(default) = &param.default {
                property.insert("default".to_owned(), default.clone());
            }
            // A nested object declared in a JSON Schema keeps its shape:
            // the model is told the fields the call is checked against.
            if let Some(declared) = self
                .declared
                .as_ref()
                .and_then(|schema| schema.get("properties")?.get(&param.name))
                .filter(|_| param.kind == ParamType::Object)
            {
                for keyword in ["properties", "required", "additionalProperties"] {
                    if let Some(value) = declared.get(keyword) {
                        property.insert(keyword.to_owned(), value.clone());
                    }
                }
            }
            properties.insert(param.name.clone(), Value::Object(property));
        }
        let required: Vec<&str> = self
            .params
            .iter()
            .filter(|param| param.required)
            .map(|param| param.name.as_str())
            .collect();
        let mut schema = json!({"type": "object", "properties": properties});
        if !required.is_empty() {
            schema["required"] = json!(required);
        }
        schema["additionalProperties"] = json!(false);
        schema
    }

    /// Checks a call's arguments and returns them with defaults applied.
    /// `null` for an optional parameter counts as absent. The error names
    /// the parameter.
    pub fn validate(&self, args: &Value) -> Result<Map<String, Value>, ArgumentsError> {
        let given = match args {
            Value::Object(map) => map.clone(),
            Value::Null => Map::new(),
            _ => return Err(ArgumentsError::NotAnObject),
        };
        if let Some(unknown) = given
            .keys()
            .find(|key| !self.params.iter().any(|param| &param.name == *key))
        {
            return Err(ArgumentsError::Unknown {
                name: unknown.clone(),
                known: self.params.iter().map(|param| param.name.clone()).collect(),
            });
        }
        let mut checked = Map::new();
        for param in &self.params {
            let value = given.get(&param.name).filter(|value| !value.is_null());
            let Some(value) = value.or(param.default.as_ref()) else {
                if param.required {
                    return Err(ArgumentsError::Missing {
                        name: param.name.clone(),
                        kind: param.kind.as_str(),
                    });
                }
                continue;
            };
            check_value(param, value)?;
            checked.insert(param.name.clone(), value.clone());
        }
        if let Some(schema) = &self.declared {
            let value = Value::Object(checked);
            if let Some(why) = violations(schema, &value) {
                return Err(ArgumentsError::Schema(why));
            }
            let Value::Object(checked) = value else {
                return Err(ArgumentsError::NotAnObject);
            };
            return Ok(checked);
        }
        Ok(checked)
    }
}

fn check_value(param: &Param, value: &Value) -> Result<(), ArgumentsError> {
    if !param.kind.matches(value) {
        return Err(ArgumentsError::Type {
            name: param.name.clone(),
            expected: param.kind.article(),
            given: describe(value),
        });
    }
    if let Some(choices) = &param.choices
        && !choices.contains(value)
    {
        return Err(ArgumentsError::Choice {
            name: param.name.clone(),
            choices: choices.iter().map(Value::to_string).collect(),
            given: value.to_string(),
        });
    }
    if let (Some(items), Some(elements)) = (param.items, value.as_array())
        && let Some((index, bad)) = elements
            .iter()
            .enumerate()
            .find(|(_, element)| !items.matches(element))
    {
        return Err(ArgumentsError::Item {
            name: param.name.clone(),
            index,
            expected: items.article(),
            given: describe(bad),
        });
    }
    Ok(())
}

/// "a string (\"5\")", "null", ...: what the model sent, briefly.
fn describe(value: &Value) -> String {
    let kind = match value {
        Value::Null => return "null".to_owned(),
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    let mut shown = value.to_string();
    if shown.chars().count() > 40 {
        shown = shown.chars().take(37).collect::<String>() + "...";
    }
    format!("{kind} ({shown})")
}

fn parse_parameters(parameters: &Value) -> Result<Vec<Param>, InvalidSchema> {
    let Some(object) = parameters.as_object() else {
        return Err(InvalidSchema::ParametersNotAnObject);
    };
    let json_schema = object.get("type").and_then(Value::as_str) == Some("object")
        && object.get("properties").is_none_or(Value::is_object);
    if json_schema {
        return parse_json_schema(object);
    }
    let mut params = Vec::new();
    for (name, definition) in object {
        params.push(parse_param(name, definition, None)?);
    }
    Ok(params)
}

/// `{"type": "object", "properties": {...}, "required": [...]}`.
fn parse_json_schema(object: &Map<String, Value>) -> Result<Vec<Param>, InvalidSchema> {
    let required: Vec<&str> = match object.get("required") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(names)) => names
            .iter()
            .map(|name| name.as_str().ok_or(InvalidSchema::RequiredNotAName))
            .collect::<Result<_, _>>()?,
        Some(_) => return Err(InvalidSchema::RequiredNotAList),
    };
    let empty = Map::new();
    let properties = object
        .get("properties")
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    if let Some(name) = required
        .iter()
        .find(|name| !properties.contains_key(**name))
    {
        return Err(InvalidSchema::RequiredUnknown((*name).to_owned()));
    }
    properties
        .iter()
        .map(|(name, definition)| {
            parse_param(name, definition, Some(required.contains(&name.as_str())))
        })
        .collect()
}

/// One parameter; `required` comes from the JSON Schema `required` list
/// when there is one, else from the parameter's own `required` flag.
fn parse_param(
    name: &str,
    definition: &Value,
    required: Option<bool>,
) -> Result<Param, InvalidSchema> {
    if !valid_param_name(name) {
        return Err(InvalidSchema::ParamName(name.to_owned()));
    }
    let field = |field, expected| InvalidSchema::Field {
        name: name.to_owned(),
        field,
        expected,
    };
    let Some(definition) = definition.as_object() else {
        return Err(InvalidSchema::ParamNotAnObject(name.to_owned()));
    };
    let kind = match definition.get("type") {
        Some(Value::String(text)) => {
            ParamType::parse(text).ok_or_else(|| InvalidSchema::UnknownType {
                name: name.to_owned(),
                text: text.clone(),
            })?
        }
        Some(_) => return Err(field("type", "a string")),
        None => return Err(InvalidSchema::NoType(name.to_owned())),
    };
    let description = match definition.get("description") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => Some(text.clone()),
        Some(_) => return Err(field("description", "a string")),
    };
    let required = match (required, definition.get("required")) {
        (Some(required), _) => required,
        (None, None | Some(Value::Null)) => false,
        (None, Some(Value::Bool(flag))) => *flag,
        (None, Some(_)) => return Err(field("required", "a boolean")),
    };
    let items = match definition.get("items") {
        None | Some(Value::Null) => None,
        Some(items) if kind == ParamType::Array => match items.get("type") {
            None => None,
            Some(Value::String(text)) => {
                Some(
                    ParamType::parse(text).ok_or_else(|| InvalidSchema::UnknownItemType {
                        name: name.to_owned(),
                        text: text.clone(),
                    })?,
                )
            }
            Some(_) => return Err(field("items.type", "a string")),
        },
        Some(_) => return Err(InvalidSchema::ItemsNotArray(name.to_owned())),
    };
    let choices = match definition.get("enum") {
        None | Some(Value::Null) => None,
        Some(Value::Array(choices)) if !choices.is_empty() => {
            if let Some(bad) = choices.iter().find(|choice| !kind.matches(choice)) {
                return Err(InvalidSchema::EnumValue {
                    name: name.to_owned(),
                    value: bad.to_string(),
                    expected: kind.article(),
                });
            }
            Some(choices.clone())
        }
        Some(_) => return Err(InvalidSchema::EnumNotAList(name.to_owned())),
    };
    let default = definition
        .get("default")
        .filter(|value| !value.is_null())
        .cloned();
    let param = Param {
        name: name.to_owned(),
        kind,
        description,
        required,
        default: None,
        choices,
        items,
    };
    if let Some(default) = &default {
        check_value(&param, default).map_err(InvalidSchema::Default)?;
    }
    Ok(Param { default, ..param })
}

fn valid_param_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || matches!(byte, b'_' | b'-' | b'.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> ToolSchema {
        ToolSchema::parse(&json!({
            "name": "web_search",
            "description": "Search the web",
            "parameters": {
                "query": {"type": "string", "description": "Search query", "required": true},
                "maxResults": {"type": "integer", "required": false, "default": 10},
                "mode": {"type": "string", "enum": ["fast", "deep"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            }
        }))
        .unwrap()
    }

    #[test]
    fn a_declared_nested_object_is_offered_with_its_fields() {
        let address = json!({"type": "object", "description": "Where",
            "properties": {"city": {"type": "string"}}, "required": ["city"],
            "additionalProperties": false});
        let schema = ToolSchema::parse(&json!({"parameters": {"type": "object",
            "properties": {"address": address, "name": {"type": "string"}}}}))
        .unwrap();
        let offered = schema.json_schema();
        assert_eq!(offered["properties"]["address"], address, "{offered}");
        assert_eq!(offered["properties"]["name"], json!({"type": "string"}));
    }

    #[test]
    fn keywords_the_subset_does_not_model_are_checked_with_the_validator() {
        let schema = ToolSchema::parse(&json!({
            "parameters": {
                "type": "object",
                "properties": {
                    "count": {"type": "integer", "minimum": 1, "maximum": 10},
                    "name": {"type": "string", "pattern": "^[a-z]+$"}
                },
                "required": ["count"]
            }
        }))
        .unwrap();
        assert!(schema.validate(&json!({"count": 3, "name": "abc"})).is_ok());
        let error = schema
            .validate(&json!({"count": 0}))
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("parameter `count`:"), "{error}");
        assert!(error.contains("minimum"), "{error}");
        let error = schema
            .validate(&json!({"count": 2, "name": "A1"}))
            .unwrap_err()
            .to_string();
        assert!(error.contains("parameter `name`"), "{error}");
        // The seed format keeps no JSON Schema of its own.
        assert!(seed().declared.is_none());
    }

    #[test]
    fn seed_format_becomes_a_json_schema() {
        let schema = seed();
        assert_eq!(schema.name.as_deref(), Some("web_search"));
        assert_eq!(
            schema.json_schema(),
            json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "description": "Search query"},
                    "maxResults": {"type": "integer", "default": 10},
                    "mode": {"type": "string", "enum": ["fast", "deep"]},
                    "tags": {"type": "array", "items": {"type": "string"}},
                },
                "required": ["query"],
                "additionalProperties": false,
            })
        );
    }

    #[test]
    fn json_schema_form_is_accepted() {
        let schema = ToolSchema::parse(&json!({
            "description": "d",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "depth": {"type": "integer", "default": 1}},
                "required": ["path"],
            },
            "timeout_seconds": 5,
        }))
        .unwrap();
        assert_eq!(schema.params.len(), 2);
        assert!(schema.params[0].required);
        assert!(!schema.params[1].required);
        assert_eq!(schema.timeout, Some(Duration::from_secs(5)));
        let empty = ToolSchema::parse(&json!({"parameters": {"type": "object"}})).unwrap();
        assert!(empty.params.is_empty());
    }

    #[test]
    fn validation_applies_defaults_and_names_the_parameter() {
        let schema = seed();
        let args = schema
            .validate(&json!({"query": "rust", "mode": null}))
            .unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"query": "rust", "maxResults": 10})
        );
        for (args, expected) in [
            (json!({}), "missing required parameter `query` (string)"),
            (
                json!({"query": 5}),
                "parameter `query` must be a string, not a number (5)",
            ),
            (
                json!({"query": "q", "maxResults": "10"}),
                "parameter `maxResults` must be an integer, not a string (\"10\")",
            ),
            (
                json!({"query": "q", "maxResults": 2.5}),
                "`maxResults` must be an integer",
            ),
            (
                json!({"query": "q", "mode": "slow"}),
                "`mode` must be one of \"fast\", \"deep\"",
            ),
            (
                json!({"query": "q", "tags": ["a", 1]}),
                "`tags[1]` must be a string",
            ),
            (
                json!({"query": "q", "qurey": 1}),
                "unknown parameter `qurey`",
            ),
            (json!([1]), "must be a JSON object"),
        ] {
            let error = schema.validate(&args).unwrap_err().to_string();
            assert!(error.contains(expected), "{args}: {error}");
        }
        assert!(
            schema
                .validate(&json!({"query": "q", "maxResults": 3.0}))
                .is_ok()
        );
    }

    #[test]
    fn invalid_schemas_say_why() {
        for (schema, expected) in [
            (json!([]), "not a JSON object"),
            (json!({"description": "d"}), "`parameters` is missing"),
            (
                json!({"parameters": {"x": {"type": "text"}}}),
                "unknown type `text`",
            ),
            (json!({"parameters": {"x": {}}}), "has no `type`"),
            (
                json!({"parameters": {"x": {"type": "integer", "default": "a"}}}),
                "the default of parameter `x`",
            ),
            (
                json!({"parameters": {"x": {"type": "string", "required": "yes"}}}),
                "`required` is not a boolean",
            ),
            (
                json!({"parameters": {"bad name": {"type": "string"}}}),
                "not valid",
            ),
            (
                json!({"parameters": {"type": "object", "required": ["y"]}}),
                "`required` names `y`",
            ),
            (
                json!({"name": 3, "parameters": {}}),
                "`name` is not a string",
            ),
            (
                json!({"parameters": {}, "timeout_seconds": -1}),
                "`timeout_seconds`",
            ),
        ] {
            let error = ToolSchema::parse(&schema).unwrap_err().to_string();
            assert!(error.contains(expected), "{schema}: {error}");
        }
    }
}
