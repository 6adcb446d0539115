//! How a tool looks as a command inside a script: its flags (from its
//! JSON Schema), its usage line, which parameter piped stdin fills, and
//! how its result is printed.

use serde_json::{Map, Value, json};

use crate::core::ToolSpec;

/// The flag every command accepts: print the tool's JSON result as is.
pub const JSON_FLAG: &str = "json";

/// One tool offered as a command.
#[derive(Debug, Clone)]
pub struct Command {
    pub name: String,
    /// The first sentence of the tool's description.
    pub summary: String,
    /// The schema the interpreter parses flags with: the tool's own plus
    /// `--json`.
    pub flags_schema: Value,
    /// The string parameter piped stdin fills when no flag gives it.
    pub stdin_param: Option<String>,
    /// `read_file --path <str> [--offset <int>] ...`
    pub usage: String,
}

impl Command {
    pub fn new(spec: &ToolSpec) -> Self {
        let properties = spec
            .parameters
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let required: Vec<&str> = spec
            .parameters
            .get("required")
            .and_then(Value::as_array)
            .map(|names| names.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut flags = properties.clone();
        flags.insert(JSON_FLAG.to_owned(), json!({"type": "boolean"}));
        let mut flags_schema = spec.parameters.clone();
        if let Some(object) = flags_schema.as_object_mut() {
            object.insert("properties".to_owned(), Value::Object(flags));
            // Required parameters may come from stdin; the tool itself
            // still checks what it needs.
            object.remove("required");
        } else {
            flags_schema = json!({"type": "object", "properties": Value::Object(flags)});
        }
        Self {
            name: spec.name.clone(),
            summary: summary(&spec.description),
            flags_schema,
            stdin_param: stdin_param(&properties),
            usage: usage(&spec.name, &properties, &required),
        }
    }

    /// The call's arguments: the flags, `--json` removed, and piped stdin
    /// in [`Command::stdin_param`] when no flag gave it. Returns whether
    /// the raw JSON result was asked for.
    pub fn arguments(&self, mut params: Value, stdin: Option<String>) -> (Value, bool) {
        if !params.is_object() {
            params = Value::Object(Map::new());
        }
        #[expect(clippy::expect_used, reason = "`params` was made an object just above")]
        let object = params.as_object_mut().expect("made an object above");
        let raw = matches!(object.remove(JSON_FLAG), Some(Value::Bool(true)));
        if let (Some(param), Some(stdin)) = (&self.stdin_param, stdin)
            && !object.contains_key(param)
        {
            object.insert(param.clone(), Value::String(stdin));
        }
        (params, raw)
    }
}

/// The first sentence (or line) of a description, at most 100 characters.
fn summary(description: &str) -> String {
    let line = description.lines().next().unwrap_or("").trim();
    let end = line.find(". ").map_or(line.len(), |at| at + 1);
    let sentence = &line[..end];
    match sentence.char_indices().nth(100) {
        Some((at, _)) => format!("{}...", &sentence[..at]),
        None => sentence.to_owned(),
    }
}

/// Piped text fills the main text parameter of a tool: `content` (e.g.
/// `write_file`), else `input`, `text` or `stdin`, when it is a string.
fn stdin_param(properties: &Map<String, Value>) -> Option<String> {
    ["content", "input", "text", "stdin"]
        .into_iter()
        .find(|name| {
            properties
                .get(*name)
                .and_then(|schema| schema.get("type"))
                .and_then(Value::as_str)
                == Some("string")
        })
        .map(str::to_owned)
}

fn usage(name: &str, properties: &Map<String, Value>, required: &[&str]) -> String {
    let mut line = name.to_owned();
    for (key, schema) in properties {
        let kind = match schema.get("type").and_then(Value::as_str) {
            Some("integer") => "<int>",
            Some("number") => "<num>",
            Some("string") => "<str>",
            Some("array") => "<json>",
            Some("object") => "<json>",
            _ => "<value>",
        };
        let flag = if schema.get("type").and_then(Value::as_str) == Some("boolean") {
            format!("--{key}")
        } else {
            format!("--{key} {kind}")
        };
        if required.contains(&key.as_str()) {
            line.push_str(&format!(" {flag}"));
        } else {
            line.push_str(&format!(" [{flag}]"));
        }
    }
    line
}

/// What a successful call prints: plain text where the result has an
/// obvious text form (a file's lines without their numbers, one path per
/// line, `file:line:text` matches), the JSON result otherwise or when
/// `--json` was given. Always ends with a newline.
pub fn render(content: &str, raw: bool) -> String {
    let mut out = match (raw, serde_json::from_str::<Value>(content)) {
        (false, Ok(value)) => plain(&value).unwrap_or_else(|| content.to_owned()),
        _ => content.to_owned(),
    };
    if !out.ends_with('\n') {
        out.push('\n');
    }
    out
}

fn plain(value: &Value) -> Option<String> {
    if let Some(text) = value.get("content").and_then(Value::as_str)
        && value.get("total_lines").is_some()
    {
        let mut out = String::with_capacity(text.len());
        for line in text.split('\n') {
            let unnumbered = line
                .trim_start()
                .split_once('\t')
                .filter(|(number, _)| number.bytes().all(|b| b.is_ascii_digit()))
                .map_or(line, |(_, rest)| rest);
            out.push_str(unnumbered);
            out.push('\n');
        }
        return Some(out);
    }
    if let Some(files) = value.get("files").and_then(Value::as_array) {
        return Some(
            files
                .iter()
                .filter_map(Value::as_str)
                .map(|file| format!("{file}\n"))
                .collect(),
        );
    }
    if let Some(matches) = value.get("matches").and_then(Value::as_array) {
        return Some(
            matches
                .iter()
                .map(|m| {
                    format!(
                        "{}:{}:{}\n",
                        m.get("file").and_then(Value::as_str).unwrap_or(""),
                        m.get("line").and_then(Value::as_u64).unwrap_or(0),
                        m.get("content").and_then(Value::as_str).unwrap_or("")
                    )
                })
                .collect(),
        );
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ToolSpec {
        ToolSpec {
            name: "write_file".to_owned(),
            description: "Write a file. Creates parents.\nMore.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                    "append": {"type": "boolean"},
                    "limit": {"type": "integer"},
                },
                "required": ["path", "content"],
                "additionalProperties": false,
            }),
        }
    }

    #[test]
    fn usage_summary_and_flags_schema() {
        let command = Command::new(&spec());
        assert_eq!(command.summary, "Write a file.");
        assert_eq!(
            command.usage,
            "write_file --path <str> --content <str> [--append] [--limit <int>]"
        );
        assert_eq!(command.stdin_param.as_deref(), Some("content"));
        assert_eq!(
            command.flags_schema["properties"]["json"]["type"],
            "boolean"
        );
        assert!(command.flags_schema.get("required").is_none());
        assert_eq!(command.flags_schema["additionalProperties"], false);
    }

    #[test]
    fn stdin_fills_the_text_parameter_unless_a_flag_gave_it() {
        let command = Command::new(&spec());
        let (args, raw) = command.arguments(json!({"path": "a"}), Some("piped".to_owned()));
        assert_eq!(args, json!({"path": "a", "content": "piped"}));
        assert!(!raw);
        let (args, raw) = command.arguments(
            json!({"path": "a", "content": "flag", "json": true}),
            Some("piped".to_owned()),
        );
        assert_eq!(args, json!({"path": "a", "content": "flag"}));
        assert!(raw);
    }

    #[test]
    fn results_print_as_text_for_pipes() {
        let read = json!({"path": "a", "content": " 9\tfn a() {}\n10\t\tb", "total_lines": 10, "truncated": false});
        assert_eq!(render(&read.to_string(), false), "fn a() {}\n\tb\n");
        let list = json!({"files": ["a.rs", "b.rs"], "total_matches": 2, "truncated": false});
        assert_eq!(render(&list.to_string(), false), "a.rs\nb.rs\n");
        let search = json!({"matches": [{"file": "a.rs", "line": 3, "content": "fn x"}]});
        assert_eq!(render(&search.to_string(), false), "a.rs:3:fn x\n");
        let other = json!({"path": "a", "replacements": 1}).to_string();
        assert_eq!(render(&other, false), format!("{other}\n"));
        assert_eq!(render(&list.to_string(), true), format!("{list}\n"));
        assert_eq!(render("not json", false), "not json\n");
    }
}
