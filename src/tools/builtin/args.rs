//! Reading a call's arguments, with errors that name the parameter.
//!
//! Lenient where a model's slip is unambiguous (a number sent as a string,
//! `null` for an omitted optional), strict where it is not.

use serde_json::{Map, Value};

use crate::core::ToolSpec;
use crate::tools::ToolError;

/// A call's argument object.
#[derive(Debug)]
pub(super) struct Args<'a> {
    map: Option<&'a Map<String, Value>>,
}

impl<'a> Args<'a> {
    /// The arguments of a call to the tool of `spec`. A parameter the
    /// tool does not take is refused, naming it: the call does not run
    /// with it silently dropped (external tools are as strict).
    pub(super) fn new(value: &'a Value, spec: &ToolSpec) -> Result<Self, ToolError> {
        let map = match value {
            Value::Object(map) => map,
            Value::Null => return Ok(Self { map: None }),
            _ => {
                return Err(ToolError::Model(
                    "arguments must be a JSON object".to_owned(),
                ));
            }
        };
        let known = spec.parameters["properties"].as_object();
        let unknown: Vec<String> = map
            .keys()
            .filter(|key| !known.is_some_and(|known| known.contains_key(key.as_str())))
            .map(|key| format!("`{key}`"))
            .collect();
        if !unknown.is_empty() {
            let takes: Vec<String> = known
                .into_iter()
                .flat_map(|known| known.keys())
                .map(|key| format!("`{key}`"))
                .collect();
            return Err(ToolError::Model(format!(
                "unknown parameter{} {} for `{}`; it takes {}",
                if unknown.len() == 1 { "" } else { "s" },
                unknown.join(", "),
                spec.name,
                takes.join(", ")
            )));
        }
        Ok(Self { map: Some(map) })
    }

    fn get(&self, name: &str) -> Option<&'a Value> {
        self.map
            .and_then(|map| map.get(name))
            .filter(|value| !value.is_null())
    }

    /// A required string.
    pub(super) fn string(&self, name: &str) -> Result<&'a str, ToolError> {
        self.opt_string(name)?
            .ok_or_else(|| ToolError::Model(format!("missing required parameter `{name}`")))
    }

    pub(super) fn opt_string(&self, name: &str) -> Result<Option<&'a str>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(wrong_type(name, "a string")),
        }
    }

    /// An optional non-negative integer (a whole float or a numeric string
    /// is accepted too).
    pub(super) fn opt_u64(&self, name: &str) -> Result<Option<u64>, ToolError> {
        let value = match self.get(name) {
            None => return Ok(None),
            Some(value) => value,
        };
        let number = match value {
            Value::Number(number) => number.as_u64().or_else(|| {
                number
                    .as_f64()
                    .filter(|float| float.fract() == 0.0 && *float >= 0.0 && *float < 1e15)
                    .map(|float| float as u64)
            }),
            Value::String(text) => text.trim().parse().ok(),
            _ => None,
        };
        number
            .map(Some)
            .ok_or_else(|| wrong_type(name, "a non-negative integer"))
    }

    /// An optional boolean (`"true"`/`"false"` accepted too).
    pub(super) fn opt_bool(&self, name: &str) -> Result<Option<bool>, ToolError> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::Bool(flag)) => Ok(Some(*flag)),
            Some(Value::String(text)) if text == "true" => Ok(Some(true)),
            Some(Value::String(text)) if text == "false" => Ok(Some(false)),
            Some(_) => Err(wrong_type(name, "a boolean")),
        }
    }
}

fn wrong_type(name: &str, expected: &str) -> ToolError {
    ToolError::Model(format!("parameter `{name}` must be {expected}"))
}

/// A spec from its name, description and `parameters` schema.
pub(super) fn spec(name: &str, description: &str, parameters: Value) -> ToolSpec {
    ToolSpec {
        name: name.to_owned(),
        description: description.to_owned(),
        parameters,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn message(result: Result<impl std::fmt::Debug, ToolError>) -> String {
        match result {
            Err(ToolError::Model(message)) => message,
            other => panic!("expected a model error, got {other:?}"),
        }
    }

    fn any() -> ToolSpec {
        spec(
            "t",
            "",
            json!({"type": "object", "properties": {
                "path": {}, "limit": {}, "flag": {}, "other": {},
                "a": {}, "b": {}, "c": {}, "d": {}, "x": {}
            }}),
        )
    }

    #[test]
    fn unknown_parameters_are_refused_by_name() {
        let spec = spec(
            "read_file",
            "",
            json!({"type": "object", "properties": {"path": {}, "offset": {}}}),
        );
        assert_eq!(
            message(Args::new(&json!({"path": "a", "extra": true}), &spec)),
            "unknown parameter `extra` for `read_file`; it takes `path`, `offset`"
        );
        assert_eq!(
            message(Args::new(&json!({"cwd": "/", "x": 1}), &spec)),
            "unknown parameters `cwd`, `x` for `read_file`; it takes `path`, `offset`"
        );
        assert!(Args::new(&json!({"path": "a", "offset": 2}), &spec).is_ok());
    }

    #[test]
    fn errors_name_the_parameter() {
        let value = json!({"path": 3, "limit": "x", "flag": 1});
        let args = Args::new(&value, &any()).unwrap();
        assert_eq!(
            message(args.string("path")),
            "parameter `path` must be a string"
        );
        assert_eq!(
            message(args.string("other")),
            "missing required parameter `other`"
        );
        assert_eq!(
            message(args.opt_u64("limit")),
            "parameter `limit` must be a non-negative integer"
        );
        assert_eq!(
            message(args.opt_bool("flag")),
            "parameter `flag` must be a boolean"
        );
        assert_eq!(
            message(Args::new(&json!([1]), &any())),
            "arguments must be a JSON object"
        );
    }

    #[test]
    fn lenient_where_unambiguous() {
        let value = json!({"a": "12", "b": 3.0, "c": null, "d": "true"});
        let args = Args::new(&value, &any()).unwrap();
        assert_eq!(args.opt_u64("a").unwrap(), Some(12));
        assert_eq!(args.opt_u64("b").unwrap(), Some(3));
        assert_eq!(args.opt_u64("c").unwrap(), None);
        assert_eq!(args.opt_bool("d").unwrap(), Some(true));
        assert!(args.opt_u64("missing").unwrap().is_none());
        assert!(
            Args::new(&Value::Null, &any())
                .unwrap()
                .opt_string("x")
                .unwrap()
                .is_none()
        );
    }
}
