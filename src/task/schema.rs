//! The JSON Schema of a task file (`ybs schema task`), for editors and
//! linters. Task files are decoded by hand from a YAML tree (see
//! [`crate::core::decode`]), so this schema is written by hand too; the field
//! lists come from the decoder's own constants and the tests below hold
//! the two together. What a schema cannot say (an unknown `{{placeholder}}`,
//! a bad glob, duplicate ids, a duration of zero) `ybs validate` still
//! reports.

use serde_json::{Map, Value, json};

use super::layer::TASK_FIELDS;
use super::model::{BUILTIN_TOOLS, PROVIDERS};

/// `[a-z0-9][a-z0-9._-]*` (`core::ids::is_valid_task_id`).
const TASK_ID: &str = "^[a-z0-9][a-z0-9._-]*$";
/// Letters, digits, `_` and `-`, starting with a letter or `_`.
const VAR_NAME: &str = "^[A-Za-z_][A-Za-z0-9_-]*$";
/// A tool name or `*`, as the key of a rule mapping.
const RULE_TOOL: &str = r"^\s*(?:\*|[A-Za-z0-9_.-]+)\s*$";
/// `tool` or `tool(glob)`.
const RULE_STRING: &str = r"^\s*(?:\*|[A-Za-z0-9_.-]+)\s*(?:\(.*\S.*\))?\s*$";
/// A whole number of seconds, or `h`, `m`, `s`, `ms` parts, largest first.
const DURATION: &str =
    r"^\s*(?=[0-9])(?:[0-9]+|(?:[0-9]+h\s*)?(?:[0-9]+m\s*)?(?:[0-9]+s\s*)?(?:[0-9]+ms\s*)?)\s*$";
/// Something other than whitespace.
const NOT_BLANK: &str = r"\S";

/// The schema of a task file: the single-task form (task fields at the top
/// level) or the list form (`tasks:` with `defaults:`), told apart by the
/// presence of `tasks`, as the loader does.
pub fn task() -> Value {
    let mut single = task_fields();
    single.insert("version".to_owned(), json!({ "$ref": "#/$defs/version" }));
    single.insert("name".to_owned(), json!({ "$ref": "#/$defs/name" }));
    let defaults: Map<String, Value> = task_fields()
        .into_iter()
        .filter(|(name, _)| !matches!(name.as_str(), "id" | "prompt"))
        .collect();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "ybs task file",
        "description": "A ybs task file (YAML): one task with its fields at the top level (`id` defaults to the file stem), or several under `tasks:` with shared `defaults:` and `vars:`. Unknown fields are errors.",
        "type": "object",
        "if": { "required": ["tasks"] },
        "then": { "$ref": "#/$defs/task_list" },
        "else": { "$ref": "#/$defs/single_task" },
        "$defs": {
            "single_task": {
                "description": "The single-task form: task fields plus `version` and `name` at the top level.",
                "type": "object",
                "properties": single,
                "required": ["prompt"],
                "additionalProperties": false
            },
            "task_list": {
                "description": "The list form: `version`, `name`, `defaults`, `vars` and `tasks`.",
                "type": "object",
                "properties": {
                    "version": { "$ref": "#/$defs/version" },
                    "name": { "$ref": "#/$defs/name" },
                    "defaults": {
                        "description": "Fields every task of the file gets unless it sets them: any task field but `id` and `prompt`. `vars` and `limits` merge field by field; `policy` becomes the lower layer of each task's policy; the rest is replaced.",
                        "type": ["object", "null"],
                        "properties": defaults,
                        "additionalProperties": false
                    },
                    "vars": { "$ref": "#/$defs/vars" },
                    "tasks": {
                        "type": "array",
                        "minItems": 1,
                        "items": { "$ref": "#/$defs/task" }
                    }
                },
                "required": ["tasks"],
                "additionalProperties": false
            },
            "task": {
                "description": "One entry of `tasks:`; `id` is required and unique in the file.",
                "type": "object",
                "properties": task_fields(),
                "required": ["id", "prompt"],
                "additionalProperties": false
            },
            "version": {
                "description": "The task file format version.",
                "enum": [1, "1"]
            },
            "name": {
                "description": "The suite name (JUnit testsuite). Default: the file stem.",
                "type": "string"
            },
            "vars": {
                "description": "Values for `{{name}}` placeholders in `prompt`, `system`, `workdir` and checks; `--var KEY=VALUE` overrides. An unknown placeholder is an error.",
                "type": ["object", "null"],
                "propertyNames": { "pattern": VAR_NAME },
                "additionalProperties": { "type": ["string", "number", "boolean"] }
            },
            "duration": {
                "description": "A duration longer than 0: `15m`, `30s`, `2h`, `1h30m`, `500ms`, or a whole number of seconds.",
                "anyOf": [
                    { "type": "integer", "minimum": 1 },
                    { "type": "string", "pattern": DURATION }
                ]
            },
            "policy": policy(),
            "rule": rule(),
            "globs": {
                "description": "A glob or a non-empty list of globs.",
                "anyOf": [
                    { "type": "string" },
                    { "type": "array", "items": { "type": "string" }, "minItems": 1 }
                ]
            },
            "check": check()
        }
    })
}

/// Every task field, in [`TASK_FIELDS`] order.
fn task_fields() -> Map<String, Value> {
    let fields = json!({
        "id": {
            "description": "The task id: lowercase letters, digits, `.`, `_` and `-`, starting with a letter or digit.",
            "type": "string",
            "pattern": TASK_ID
        },
        "prompt": {
            "description": "What the agent should do.",
            "type": "string",
            "pattern": NOT_BLANK
        },
        "system": {
            "description": "Extra instructions appended to the system prompt.",
            "type": "string"
        },
        "vars": { "$ref": "#/$defs/vars" },
        "workdir": {
            "description": "Where the task runs. Default: the directory ybs runs in.",
            "type": "string"
        },
        "provider": {
            "description": "The LLM provider.",
            "enum": PROVIDERS
        },
        "model": {
            "description": "The model name, as the provider knows it.",
            "type": "string",
            "pattern": NOT_BLANK
        },
        "endpoint": {
            "description": "The provider's base URL.",
            "type": "string",
            "pattern": r"^\s*https?://\S"
        },
        "temperature": { "type": "number", "minimum": 0 },
        "max_tokens": {
            "description": "The older name of `max_output_tokens`.",
            "type": "integer", "minimum": 1, "maximum": u32::MAX
        },
        "max_output_tokens": {
            "description": "The longest answer the model may give, in tokens (sent as `max_tokens`, `max_completion_tokens` or `num_predict`). Default: 4096, or the operator's `llm.max_output_tokens`, which a task may not exceed.",
            "type": "integer", "minimum": 1, "maximum": u32::MAX
        },
        "tools": tools_field(),
        "policy": { "$ref": "#/$defs/policy" },
        "limits": limits_field(),
        "checks": {
            "description": "Commands run in the workdir after the agent stops; all must pass.",
            "type": ["array", "null"],
            "items": { "$ref": "#/$defs/check" }
        },
        "fix_attempts": {
            "description": "How many times failing check output goes back to the agent. Default: 0.",
            "type": "integer", "minimum": 0, "maximum": u32::MAX
        },
        "commit": {
            "description": "Commit the task's changes after the checks pass: `true` (default), `false`, or `{message, branch}`.",
            "anyOf": [
                { "type": "boolean" },
                {
                    "type": "object",
                    "properties": {
                        "message": { "type": "string", "pattern": NOT_BLANK },
                        "branch": { "type": "string", "pattern": NOT_BLANK }
                    },
                    "additionalProperties": false
                }
            ]
        },
        "expect": {
            "description": "`fail` makes a negative test: the task passes when the run fails.",
            "enum": ["pass", "fail"]
        },
        "context": {
            "description": "What ybs adds to the system prompt from the repository.",
            "type": ["object", "null"],
            "properties": {
                "agents_md": {
                    "description": "Read the AGENTS.md files of the workdir and its parents up to the repository root into the system prompt (masked, at most 8 KB in all). Default: true.",
                    "type": "boolean"
                },
                "checks": {
                    "description": "Name the task's checks (name and command, masked) in the system prompt, so the model can run them before it answers. Default: true.",
                    "type": "boolean"
                }
            },
            "additionalProperties": false
        },
        "output": output_field()
    });
    let Value::Object(mut fields) = fields else {
        return Map::new();
    };
    // In the decoder's order, whatever order the literal above keeps.
    let mut ordered = Map::new();
    for name in TASK_FIELDS {
        if let Some(schema) = fields.remove(*name) {
            ordered.insert((*name).to_owned(), schema);
        }
    }
    ordered.extend(fields);
    ordered
}

/// `tools:` (docs/tools.md).
fn tools_field() -> Value {
    json!({
        "description": "Which tools the task may use.",
        "type": ["object", "null"],
        "properties": {
            "builtin": {
                "description": "Built-in tools offered to the model. Default: all six.",
                "type": ["array", "null"],
                "items": { "enum": BUILTIN_TOOLS }
            },
            "external": {
                "description": "External tools, by name or path; `{name, required: true}` makes the task an error when the tool cannot be offered (else the task goes on without it, saying so on the console and in the summary).",
                "type": ["array", "null"],
                "items": {
                    "oneOf": [
                        { "type": "string", "pattern": NOT_BLANK },
                        {
                            "type": "object",
                            "properties": {
                                "name": { "type": "string", "pattern": NOT_BLANK },
                                "required": { "type": "boolean" }
                            },
                            "required": ["name"],
                            "additionalProperties": false
                        }
                    ]
                }
            },
            "caller": {
                "description": "Tools the caller runs: a call pauses the task (exit 3) until `ybs resume` brings the result. See docs/resume.md.",
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "pattern": "^[A-Za-z0-9_-]{1,64}$" },
                        "description": { "type": "string" },
                        "parameters": {
                            "description": "JSON Schema of the arguments (`type: object`).",
                            "type": "object"
                        }
                    },
                    "required": ["name", "description"],
                    "additionalProperties": false
                }
            },
            "mcp": {
                "description": "MCP servers (stdio) whose tools join the registry as NAME__tool, decided by the policy and confined like any tool. See docs/mcp.md.",
                "type": ["array", "null"],
                "items": {
                    "type": "object",
                    "properties": {
                        "name": { "type": "string", "pattern": r"^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$", "maxLength": 32 },
                        "command": { "type": "string", "pattern": NOT_BLANK },
                        "args": { "type": ["array", "null"], "items": { "type": "string" } },
                        "env": { "type": ["object", "null"], "additionalProperties": { "type": ["string", "number", "boolean"] } },
                        "timeout_seconds": { "$ref": "#/$defs/duration" },
                        "required": {
                            "description": "A server that cannot start makes the task an error (reason tool_unavailable). Default: false: the task goes on without its tools, saying so on the console and in the summary.",
                            "type": "boolean"
                        }
                    },
                    "required": ["name", "command"],
                    "additionalProperties": false
                }
            },
            "script": {
                "description": "Offer the `script` tool: one bash script in which the task's other tools (not run_shell) are commands, each decided by the policy. Needs ybs built with the `script` feature. Default: false.",
                "type": "boolean"
            }
        },
        "additionalProperties": false
    })
}

/// `limits:`.
fn limits_field() -> Value {
    json!({
        "description": "Budgets; a task that hits one fails with its reason and keeps its changes.",
        "type": ["object", "null"],
        "properties": {
            "max_iterations": {
                "description": "Provider requests. Default: 25.",
                "type": "integer", "minimum": 1, "maximum": u32::MAX
            },
            "timeout": { "$ref": "#/$defs/duration" },
            "max_total_tokens": { "type": "integer", "minimum": 1 },
            "max_cost_usd": { "type": "number", "exclusiveMinimum": 0 },
            "max_tool_output_chars": {
                "description": "Longer tool outputs are truncated with a marker. Default: 10000.",
                "type": "integer", "minimum": 1
            }
        },
        "additionalProperties": false
    })
}

/// `output:`, the output contract (docs/task-files.md).
fn output_field() -> Value {
    json!({
        "description": "An output contract: the final answer must be a JSON value (bare or in one fenced block) that the schema accepts; it is written to OUT/<task>/output.json. A violation goes back to the model; a task that never answers validly fails with reason `output_invalid`.",
        "type": "object",
        "properties": {
            "schema": {
                "description": "The JSON Schema, inline (draft 2020-12 unless `$schema` names another).",
                "type": ["object", "boolean"]
            },
            "schema_file": {
                "description": "A JSON or YAML file holding the JSON Schema, relative to the task file.",
                "type": "string", "pattern": NOT_BLANK
            },
            "attempts": {
                "description": "How many times an invalid answer goes back to the model. Default: `fix_attempts`.",
                "type": "integer", "minimum": 0, "maximum": u32::MAX
            }
        },
        "oneOf": [
            { "required": ["schema"] },
            { "required": ["schema_file"] }
        ],
        "additionalProperties": false
    })
}

/// `policy:` (docs/policy.md).
fn policy() -> Value {
    let rules = json!({ "type": ["array", "null"], "items": { "$ref": "#/$defs/rule" } });
    let calls = json!({
        "type": ["array", "null"],
        "items": { "type": "string", "pattern": RULE_STRING }
    });
    json!({
        "description": "Answers every tool call: built-in guards, then `deny`, then `ask`, then `allow`, then `default`.",
        "type": ["object", "null"],
        "properties": {
            "allow": rules,
            "deny": rules,
            "ask": rules,
            "default": {
                "description": "The verdict when no rule matches. Default: deny.",
                "enum": ["allow", "deny", "ask"]
            },
            "on_ask": {
                "description": "How `ask` resolves without a human: `deny` (the model is told), `fail` (the task fails) or `pause` (the task pauses until `ybs resume` approves or denies; docs/resume.md).",
                "enum": ["deny", "fail", "pause"]
            },
            "opaque": {
                "description": "What a wildcard allow rule (or `default: allow`) gives a shell command the policy cannot see through (a program run by a path outside the system directories, a script or module given to a shell or interpreter) while a `deny` or `ask` rule on run_shell exists: `ask` (the default), `deny`, or `allow` (trust the wildcard). Unset, and where the sandbox's exec guard enforces every such rule (deny rules on programs), such commands run and the guard refuses a denied program at exec; set, this value decides. docs/policy.md.",
                "enum": ["ask", "deny", "allow"]
            },
            "examples": {
                "description": "Calls in string form the policy must decide as listed (checked by `ybs validate`).",
                "type": ["object", "null"],
                "properties": { "allow": calls, "deny": calls, "ask": calls },
                "additionalProperties": false
            }
        },
        "additionalProperties": false
    })
}

/// A rule: `tool`, `tool(glob)`, or `{tool: {path, command}}`.
fn rule() -> Value {
    let matchers = |keys: &[&str]| {
        let properties: Map<String, Value> = keys
            .iter()
            .map(|key| ((*key).to_owned(), json!({ "$ref": "#/$defs/globs" })))
            .collect();
        json!({
            "type": ["object", "null"],
            "properties": properties,
            "additionalProperties": false
        })
    };
    json!({
        "description": "A tool name (or `*`), optionally with argument globs: `read_file`, `run_shell(cargo test*)`, or a one-key mapping like `edit_file: { path: \"src/**\" }` / `run_shell: { command: [\"cargo build*\"] }`.",
        "anyOf": [
            { "type": "string", "pattern": RULE_STRING },
            {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "propertyNames": { "pattern": RULE_TOOL },
                "properties": {
                    "run_shell": matchers(&["command"]),
                    "*": matchers(&["path", "command"])
                },
                "additionalProperties": matchers(&["path"])
            }
        ]
    })
}

/// One check: the command as a string, or `{name, run, timeout, expect_exit, network}`.
fn check() -> Value {
    json!({
        "anyOf": [
            { "type": "string", "pattern": NOT_BLANK },
            {
                "type": "object",
                "properties": {
                    "name": { "type": "string" },
                    "run": { "type": "string", "pattern": NOT_BLANK },
                    "timeout": { "$ref": "#/$defs/duration" },
                    "expect_exit": {
                        "description": "The exit code that passes. Default: 0.",
                        "type": "integer", "minimum": i32::MIN, "maximum": i32::MAX
                    },
                    "network": {
                        "description": "Run the check with the network. The operator grants it (safety.sandbox_check_network: true in the operator config); without the grant the task file is refused at load. Default: false.",
                        "type": "boolean"
                    }
                },
                "required": ["run"],
                "additionalProperties": false
            }
        ]
    })
}

#[cfg(test)]
mod tests {
    use super::super::layer::{CHECK_FIELDS, LIMITS_FIELDS, defaults_fields};
    use super::super::loader::FILE_FIELDS;
    use super::super::policy::POLICY_FIELDS;
    use super::*;

    fn keys(value: &Value) -> Vec<&str> {
        value
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    /// The schema lists exactly the fields the decoder accepts, in its order.
    #[test]
    fn fields_match_the_decoder() {
        let schema = task();
        let defs = &schema["$defs"];
        assert_eq!(keys(&defs["task"]["properties"]), TASK_FIELDS);
        let mut single = TASK_FIELDS.to_vec();
        single.extend(["version", "name"]);
        assert_eq!(keys(&defs["single_task"]["properties"]), single);
        assert_eq!(keys(&defs["task_list"]["properties"]), FILE_FIELDS);
        assert_eq!(
            keys(&defs["task_list"]["properties"]["defaults"]["properties"]),
            defaults_fields()
        );
        assert_eq!(
            keys(&defs["task"]["properties"]["limits"]["properties"]),
            LIMITS_FIELDS
        );
        assert_eq!(keys(&defs["check"]["anyOf"][1]["properties"]), CHECK_FIELDS);
        assert_eq!(keys(&defs["policy"]["properties"]), POLICY_FIELDS);
    }
}
