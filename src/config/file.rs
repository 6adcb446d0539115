//! One config file (JSON or YAML; JSON is read as YAML so both get
//! `file:line:col` diagnostics) decoded into a [`ConfigLayer`].
//!
//! Sections follow seed 003 §2.3: `llm`, `context`, `agent`, `safety`,
//! `tools`, `git`, `ui`. A file in the repository (`./.ybs.json`) cannot
//! widen what the operator allows (SECURITY S5): it may not set
//! `safety.allowed_paths`, `safety.env_passthrough` or turn the sandbox
//! off, and its blocked lists add to the others instead of replacing them.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::llm::pricing::Price;
use crate::task::decode::{Decoder, Fields, Spanned, positive, positive_duration};
use crate::task::yaml::{Node, NodeKind};
use crate::task::{API_KEY_MESSAGE, BUILTIN_TOOLS, check_endpoint, check_provider};

use super::layer::{
    AgentLayer, BuiltinToolLayer, ConfigLayer, ContextLayer, GitLayer, LlmLayer, SafetyLayer,
    ToolsLayer, UiLayer,
};
use super::settings::{ColorChoice, ExternalToolConfig, defaults};

const TOP_FIELDS: &[&str] = &[
    "version", "llm", "context", "agent", "safety", "tools", "git", "ui",
];
const LLM_FIELDS: &[&str] = &[
    "provider",
    "model",
    "endpoint",
    "temperature",
    "max_tokens",
    "timeout_seconds",
    "stream",
    "stream_idle_timeout_seconds",
    "total_timeout_seconds",
    "text_tool_calls",
    "pricing",
];
const CONTEXT_FIELDS: &[&str] = &[
    "max_tokens",
    "compaction_threshold",
    "max_tool_output_chars",
    "repo_map_tokens",
];
const AGENT_FIELDS: &[&str] = &["max_iterations", "retry_attempts", "retry_backoff_base_ms"];
const SAFETY_FIELDS: &[&str] = &[
    "allowed_paths",
    "sandbox_allowed_paths",
    "blocked_paths",
    "sandbox_blocked_paths",
    "blocked_commands",
    "env_passthrough",
    "sandbox_enabled",
    "sandbox_writable_paths",
    "sandbox_network",
    "sandbox_unix_sockets",
    "sandbox_require",
    "sandbox_check_network",
    "require_confirmation",
];
const TOOLS_FIELDS: &[&str] = &["builtin", "external", "search_paths"];
const EXTERNAL_FIELDS: &[&str] = &[
    "name",
    "type",
    "path",
    "description",
    "parameters",
    "timeout_seconds",
    "enabled",
];
const GIT_FIELDS: &[&str] = &["auto_commit", "commit_message_prefix"];
const UI_FIELDS: &[&str] = &[
    "color",
    "show_token_usage",
    "show_tool_calls",
    "stream_responses",
];

/// Decodes a whole config file. `repository` is true for `./.ybs.json`.
pub fn decode_config(decoder: &mut Decoder<'_>, root: &Node, repository: bool) -> ConfigLayer {
    let mut layer = ConfigLayer::default();
    let Some(fields) = decoder.fields(root, "the config file", TOP_FIELDS) else {
        return layer;
    };
    if let Some(node) = fields.node("version") {
        let ok = match &node.kind {
            NodeKind::Int(1) => true,
            NodeKind::Float(version) => (*version - 1.0).abs() < f64::EPSILON,
            NodeKind::Str(version) => version == "1" || version == "1.0",
            _ => false,
        };
        if !ok {
            decoder.expected(node, "version", "`1` or `\"1.0\"`");
        }
    }
    let section = |decoder: &mut Decoder<'_>, name: &str, allowed: &[&str]| {
        let node = fields.node(name)?;
        decoder.fields(node, &format!("`{name}`"), allowed)
    };
    let llm = fields.node("llm").and_then(|node| {
        decoder.fields_accepting(node, "`llm`", LLM_FIELDS, &["api_key"], |_| None)
    });
    if let Some(llm) = llm {
        layer.llm = decode_llm(decoder, &llm);
    }
    if let Some(context) = section(decoder, "context", CONTEXT_FIELDS) {
        layer.context = decode_context(decoder, &context);
    }
    if let Some(agent) = section(decoder, "agent", AGENT_FIELDS) {
        layer.agent = decode_agent(decoder, &agent);
    }
    if let Some(safety) = section(decoder, "safety", SAFETY_FIELDS) {
        layer.safety = decode_safety(decoder, &safety, repository);
    }
    if let Some(tools) = section(decoder, "tools", TOOLS_FIELDS) {
        layer.tools = decode_tools(decoder, &tools, repository);
    }
    if let Some(git) = section(decoder, "git", GIT_FIELDS) {
        layer.git = GitLayer {
            auto_commit: git.get(decoder, "auto_commit"),
            commit_message_prefix: git.get(decoder, "commit_message_prefix"),
            author: None,
        };
    }
    if let Some(ui) = section(decoder, "ui", UI_FIELDS) {
        layer.ui = UiLayer {
            color: ui
                .node("color")
                .and_then(|node| decode_color(decoder, node)),
            show_token_usage: ui.get(decoder, "show_token_usage"),
            show_tool_calls: ui.get(decoder, "show_tool_calls"),
            stream_responses: ui.get(decoder, "stream_responses"),
        };
    }
    layer
}

fn decode_llm(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> LlmLayer {
    if let Some((key, _)) = fields.entry("api_key") {
        decoder.error_with_hint(
            key.span,
            format!("`llm.api_key` is not allowed: {API_KEY_MESSAGE}"),
            "remove `api_key` and export OPENAI_API_KEY or ANTHROPIC_API_KEY",
        );
    }
    let provider: Option<Spanned<String>> = fields.get(decoder, "provider");
    let endpoint: Option<Spanned<String>> = fields.get(decoder, "endpoint");
    let temperature: Option<Spanned<f64>> = fields.get(decoder, "temperature");
    let max_tokens: Option<Spanned<u32>> = fields.get(decoder, "max_tokens");
    let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout_seconds");
    let idle: Option<Spanned<Duration>> = fields.get(decoder, "stream_idle_timeout_seconds");
    let total: Option<Spanned<Duration>> = fields.get(decoder, "total_timeout_seconds");
    LlmLayer {
        provider: provider.and_then(|p| check_provider(decoder, p)),
        model: fields.get(decoder, "model"),
        endpoint: endpoint.and_then(|e| check_endpoint(decoder, e)),
        temperature: temperature.and_then(|t| at_least(decoder, t, 0.0, "temperature")),
        max_tokens: max_tokens.and_then(|m| positive(decoder, m, "max_tokens")),
        timeout: timeout.and_then(|t| positive_duration(decoder, t, "timeout_seconds")),
        stream: fields.get(decoder, "stream"),
        idle_timeout: idle
            .and_then(|t| positive_duration(decoder, t, "stream_idle_timeout_seconds")),
        total_timeout: total.and_then(|t| positive_duration(decoder, t, "total_timeout_seconds")),
        text_tool_calls: fields.get(decoder, "text_tool_calls"),
        pricing: fields
            .node("pricing")
            .map(|node| decode_pricing(decoder, node))
            .unwrap_or_default(),
    }
}

fn decode_pricing(decoder: &mut Decoder<'_>, node: &Node) -> BTreeMap<String, Price> {
    let mut pricing = BTreeMap::new();
    let entries = match &node.kind {
        NodeKind::Map(entries) => entries,
        NodeKind::Null => return pricing,
        _ => {
            decoder.expected(node, "pricing", "a mapping of model names to prices");
            return pricing;
        }
    };
    let price_fields = ["input_per_mtok", "output_per_mtok"];
    for (model, value) in entries {
        let Some(fields) = decoder.fields(
            value,
            &format!("the price of `{}`", model.name),
            &price_fields,
        ) else {
            continue;
        };
        let mut get = |key: &str| {
            let price: Option<Spanned<f64>> = fields.get(decoder, key);
            if !fields.has(key) {
                decoder.error(
                    fields.span,
                    format!(
                        "missing required field `{key}` in the price of `{}`",
                        model.name
                    ),
                );
            }
            price.and_then(|p| at_least(decoder, p, 0.0, key))
        };
        if let (Some(input), Some(output)) = (get("input_per_mtok"), get("output_per_mtok")) {
            pricing.insert(
                model.name.clone(),
                Price {
                    input_per_mtok: input,
                    output_per_mtok: output,
                },
            );
        }
    }
    pricing
}

fn decode_context(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> ContextLayer {
    let max_tokens: Option<Spanned<u32>> = fields.get(decoder, "max_tokens");
    let threshold: Option<Spanned<f64>> = fields.get(decoder, "compaction_threshold");
    let max_chars: Option<Spanned<usize>> = fields.get(decoder, "max_tool_output_chars");
    ContextLayer {
        max_tokens: max_tokens.and_then(|m| positive(decoder, m, "max_tokens")),
        compaction_threshold: threshold.and_then(|t| {
            if t.value > 0.0 && t.value <= 1.0 {
                Some(t.value)
            } else {
                decoder.error(t.span, "invalid `compaction_threshold`: expected a fraction above 0 and at most 1, like 0.95");
                None
            }
        }),
        max_tool_output_chars: max_chars.and_then(|m| positive(decoder, m, "max_tool_output_chars")),
        repo_map_tokens: fields.get(decoder, "repo_map_tokens"),
    }
}

fn decode_agent(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> AgentLayer {
    let max_iterations: Option<Spanned<u32>> = fields.get(decoder, "max_iterations");
    let backoff: Option<u64> = fields.get(decoder, "retry_backoff_base_ms");
    AgentLayer {
        max_iterations: max_iterations.and_then(|m| positive(decoder, m, "max_iterations")),
        retry_attempts: fields.get(decoder, "retry_attempts"),
        retry_backoff_base: backoff.map(Duration::from_millis),
    }
}

fn decode_safety(decoder: &mut Decoder<'_>, fields: &Fields<'_>, repository: bool) -> SafetyLayer {
    let list = |decoder: &mut Decoder<'_>,
                name: &str,
                alias: Option<&str>|
     -> Option<Vec<String>> {
        let alias_entry = alias.and_then(|alias| fields.entry(alias));
        if let (Some(_), Some((key, _))) = (fields.entry(name), alias_entry) {
            decoder.error(
                key.span,
                format!(
                    "`{}` is an alias of `{name}`; set only one of them",
                    key.name
                ),
            );
        }
        let (key, node) = fields.entry(name).or(alias_entry)?;
        let items: Option<Vec<String>> = decoder.decode(node, &key.name);
        if repository
            && items.is_some()
            && matches!(
                name,
                "allowed_paths" | "env_passthrough" | "sandbox_writable_paths"
            )
        {
            decoder.error_with_hint(
                key.span,
                format!("`safety.{}` cannot be set in the repository's config: it would widen what the operator allows", key.name),
                "set it in ~/.config/ybs/config.json or a file given with --config",
            );
            return None;
        }
        items
    };
    let mut layer = SafetyLayer {
        allowed_paths: list(decoder, "allowed_paths", Some("sandbox_allowed_paths")),
        blocked_paths: list(decoder, "blocked_paths", Some("sandbox_blocked_paths")),
        blocked_commands: list(decoder, "blocked_commands", None),
        env_passthrough: list(decoder, "env_passthrough", None),
        sandbox_enabled: fields.get(decoder, "sandbox_enabled"),
        sandbox_writable_paths: list(decoder, "sandbox_writable_paths", None),
        sandbox_network: fields.get(decoder, "sandbox_network"),
        sandbox_unix_sockets: fields.get(decoder, "sandbox_unix_sockets"),
        sandbox_require: fields.get(decoder, "sandbox_require"),
        sandbox_check_network: fields.get(decoder, "sandbox_check_network"),
        require_confirmation: list(decoder, "require_confirmation", None),
        ..SafetyLayer::default()
    };
    if let Some(require) = &layer.sandbox_require
        && !matches!(require.as_str(), "all" | "landlock")
        && let Some((key, _)) = fields.entry("sandbox_require")
    {
        decoder.error_with_hint(
            key.span,
            format!("`safety.sandbox_require` must be `all` or `landlock`, not `{require}`"),
            "`all` (the default) needs namespaces, Landlock and seccomp; `landlock` accepts Landlock and seccomp alone",
        );
        layer.sandbox_require = None;
    }
    if repository {
        layer.extra_blocked_paths = layer.blocked_paths.take().unwrap_or_default();
        layer.extra_blocked_commands = layer.blocked_commands.take().unwrap_or_default();
        if layer.sandbox_enabled == Some(false)
            && let Some((key, _)) = fields.entry("sandbox_enabled")
        {
            decoder.error_with_hint(
                key.span,
                "`safety.sandbox_enabled: false` cannot be set in the repository's config",
                "pass --no-sandbox, or set it in ~/.config/ybs/config.json",
            );
            layer.sandbox_enabled = None;
        }
        if layer.sandbox_network == Some(true)
            && let Some((key, _)) = fields.entry("sandbox_network")
        {
            decoder.error_with_hint(
                key.span,
                "`safety.sandbox_network: true` cannot be set in the repository's config",
                "set it in ~/.config/ybs/config.json or a file given with --config",
            );
            layer.sandbox_network = None;
        }
        let widening = [
            (
                "sandbox_unix_sockets",
                layer.sandbox_unix_sockets == Some(true),
                "true",
            ),
            (
                "sandbox_require",
                layer.sandbox_require.as_deref() == Some("landlock"),
                "landlock",
            ),
            (
                "sandbox_check_network",
                layer.sandbox_check_network == Some(true),
                "true",
            ),
        ];
        for (name, widens, value) in widening {
            if widens && let Some((key, _)) = fields.entry(name) {
                decoder.error_with_hint(
                    key.span,
                    format!("`safety.{name}: {value}` cannot be set in the repository's config"),
                    "set it in ~/.config/ybs/config.json or a file given with --config",
                );
                match name {
                    "sandbox_unix_sockets" => layer.sandbox_unix_sockets = None,
                    "sandbox_require" => layer.sandbox_require = None,
                    _ => layer.sandbox_check_network = None,
                }
            }
        }
    }
    layer
}

fn decode_tools(decoder: &mut Decoder<'_>, fields: &Fields<'_>, repository: bool) -> ToolsLayer {
    let mut layer = ToolsLayer::default();
    if let Some(node) = fields.node("builtin")
        && let Some(builtin) = decoder.fields(node, "`tools.builtin`", &BUILTIN_TOOLS)
    {
        for (name, value) in builtin.entries {
            let Some(tool) = decoder.fields(
                value,
                &format!("`tools.builtin.{}`", name.name),
                &["enabled", "timeout_seconds"],
            ) else {
                continue;
            };
            let timeout: Option<Spanned<Duration>> = tool.get(decoder, "timeout_seconds");
            let settings = BuiltinToolLayer {
                enabled: tool.get(decoder, "enabled"),
                timeout: timeout.and_then(|t| positive_duration(decoder, t, "timeout_seconds")),
            };
            if BUILTIN_TOOLS.contains(&name.name.as_str()) {
                layer.builtin.insert(name.name.clone(), settings);
            }
        }
    }
    if let Some(node) = fields.node("external") {
        layer.external = decode_external(decoder, node, repository);
    }
    let search_paths: Option<Vec<String>> = fields.get(decoder, "search_paths");
    if repository
        && search_paths.is_some()
        && let Some((key, _)) = fields.entry("search_paths")
    {
        // Operator tool directories are trusted as found: a repository
        // must not add any (SECURITY S5). Its tools go in ./tools.
        decoder.error_with_hint(
            key.span,
            "`tools.search_paths` cannot be set in the repository's config: ybs runs the tools it finds there",
            "put the repository's tools in ./tools, or set search_paths in ~/.config/ybs/config.json or a file given with --config",
        );
        return layer;
    }
    layer.search_paths = search_paths.map(|paths| paths.into_iter().map(PathBuf::from).collect());
    layer
}

fn decode_external(
    decoder: &mut Decoder<'_>,
    node: &Node,
    repository: bool,
) -> BTreeMap<String, ExternalToolConfig> {
    let mut tools = BTreeMap::new();
    let items = match &node.kind {
        NodeKind::Seq(items) => items.as_slice(),
        NodeKind::Null => &[],
        _ => {
            decoder.expected(node, "external", "a list of tools");
            return tools;
        }
    };
    for item in items {
        let Some(fields) = decoder.fields(item, "an external tool", EXTERNAL_FIELDS) else {
            continue;
        };
        let before = decoder.error_count();
        let name: Option<Spanned<String>> = fields.get(decoder, "name");
        let path: Option<String> = fields.get(decoder, "path");
        for key in ["name", "path"] {
            if !fields.has(key) {
                decoder.error(
                    fields.span,
                    format!("missing required field `{key}` in an external tool"),
                );
            }
        }
        let kind: Option<Spanned<String>> = fields.get(decoder, "type");
        if let Some(kind) = &kind
            && kind.value != "executable"
        {
            decoder.error(
                kind.span,
                format!(
                    "invalid `type`: expected `executable`, found `{}`",
                    kind.value
                ),
            );
        }
        let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout_seconds");
        let timeout = timeout.and_then(|t| positive_duration(decoder, t, "timeout_seconds"));
        let tool = ExternalToolConfig {
            name: String::new(),
            kind: "executable".to_owned(),
            path: PathBuf::from(path.unwrap_or_default()),
            description: fields.get(decoder, "description"),
            parameters: fields.node("parameters").map(to_json),
            timeout: timeout.unwrap_or(defaults::EXTERNAL_TOOL_TIMEOUT),
            enabled: fields.get(decoder, "enabled").unwrap_or(true),
            from_repository: repository,
        };
        let Some(name) = name else { continue };
        if decoder.error_count() != before {
            continue;
        }
        if tools.contains_key(&name.value) {
            decoder.error(
                name.span,
                format!("duplicate external tool `{}`", name.value),
            );
            continue;
        }
        tools.insert(
            name.value.clone(),
            ExternalToolConfig {
                name: name.value,
                ..tool
            },
        );
    }
    tools
}

fn decode_color(decoder: &mut Decoder<'_>, node: &Node) -> Option<ColorChoice> {
    let choice = match &node.kind {
        NodeKind::Bool(true) => Some(ColorChoice::Always),
        NodeKind::Bool(false) => Some(ColorChoice::Never),
        NodeKind::Str(text) => match text.as_str() {
            "auto" => Some(ColorChoice::Auto),
            "always" => Some(ColorChoice::Always),
            "never" => Some(ColorChoice::Never),
            _ => None,
        },
        _ => None,
    };
    if choice.is_none() {
        decoder.expected(
            node,
            "color",
            "`true`, `false`, `auto`, `always` or `never`",
        );
    }
    choice
}

/// A node as JSON (for inline tool schemas).
pub fn to_json(node: &Node) -> serde_json::Value {
    use serde_json::Value;
    match &node.kind {
        NodeKind::Null => Value::Null,
        NodeKind::Bool(value) => Value::Bool(*value),
        NodeKind::Int(value) => Value::from(*value),
        NodeKind::Float(value) => {
            serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number)
        }
        NodeKind::Str(text) => Value::String(text.clone()),
        NodeKind::Seq(items) => Value::Array(items.iter().map(to_json).collect()),
        NodeKind::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, value)| (key.name.clone(), to_json(value)))
                .collect(),
        ),
    }
}

fn at_least(decoder: &mut Decoder<'_>, value: Spanned<f64>, min: f64, field: &str) -> Option<f64> {
    if value.value >= min {
        Some(value.value)
    } else {
        decoder.error(
            value.span,
            format!("invalid `{field}`: must be {min} or more"),
        );
        None
    }
}
