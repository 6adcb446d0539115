//! One config file (JSON or YAML; JSON is read as YAML so both get
//! `file:line:col` diagnostics) decoded into a [`ConfigLayer`].
//!
//! Sections: `llm`, `context`, `agent`, `safety`,
//! `tools`, `git`, `ui`. A file in the repository (`./.ybs.json`) cannot
//! widen what the operator allows (docs/security.md S5): it may not set
//! `safety.allowed_paths`, `safety.env_passthrough`,
//! `safety.allowed_workdirs` or turn the sandbox
//! off, and its blocked lists add to the others instead of replacing them.
//! Nor may it price models (`llm.price`, `llm.pricing`). Its limits and
//! switches are checked against the operator's in `load.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::core::decode::yaml::{Node, NodeKind};
use crate::core::decode::{Decoder, Fields, Spanned, positive, positive_duration};
use crate::llm::pricing::Price;
use crate::task::{API_KEY_MESSAGE, BUILTIN_TOOLS, check_endpoint, check_provider};

use super::layer::{
    AgentLayer, BuiltinToolLayer, ConfigLayer, ContextLayer, GitLayer, LlmLayer, SafetyLayer,
    ToolsLayer,
};
use super::settings::{ExternalToolConfig, defaults};

const TOP_FIELDS: &[&str] = &[
    "version", "llm", "context", "agent", "safety", "tools", "git",
];
const LLM_FIELDS: &[&str] = &[
    "provider",
    "model",
    "endpoint",
    "temperature",
    "max_tokens",
    "max_output_tokens",
    "timeout_seconds",
    "stream",
    "stream_idle_timeout_seconds",
    "total_timeout_seconds",
    "text_tool_calls",
    "pricing",
    "price",
    "max_response_bytes",
    "prompt_cache",
    "prompt_cache_ttl",
    "prompt_cache_key",
];
const CONTEXT_FIELDS: &[&str] = &[
    "max_tokens",
    "compaction_threshold",
    "max_tool_output_chars",
];
const AGENT_FIELDS: &[&str] = &[
    "max_iterations",
    "max_total_tokens",
    "max_cost_usd",
    "timeout",
    "retry_attempts",
    "retry_backoff_base_ms",
];
const SAFETY_FIELDS: &[&str] = &[
    "allowed_paths",
    "sandbox_allowed_paths",
    "blocked_paths",
    "sandbox_blocked_paths",
    "blocked_commands",
    "env_passthrough",
    "sandbox_enabled",
    "sandbox_writable_paths",
    "sandbox_home_visible",
    "sandbox_network",
    "max_task_file_bytes",
    "allowed_workdirs",
    "sandbox_unix_sockets",
    "sandbox_require",
    "sandbox_check_network",
    "sandbox_exec_guard",
    "max_processes",
];
const PRICE_FIELDS: &[&str] = &[
    "input_per_mtok",
    "output_per_mtok",
    "cached_input_per_mtok",
    "cache_write_per_mtok",
    "cache_write_1h_per_mtok",
];
const TOOLS_FIELDS: &[&str] = &["builtin", "external", "search_paths", "mcp"];
const EXTERNAL_FIELDS: &[&str] = &[
    "name",
    "type",
    "path",
    "description",
    "parameters",
    "timeout_seconds",
    "enabled",
];
const GIT_FIELDS: &[&str] = &["auto_commit", "commit_message_prefix", "allow_secret_paths"];

/// Keys of the original design that ybs does not use: rejected with a
/// message saying so, never accepted and ignored.
fn unsupported(key: &str) -> Option<(&'static str, &'static str)> {
    match key {
        "ui" => Some((
            "`ui` is not supported: ybs's console output has no settings",
            "remove the `ui` section; -q and -v choose how much ybs prints",
        )),
        "repo_map_tokens" => Some((
            "`context.repo_map_tokens` is not supported: ybs does not build a repository map",
            "remove it; the model explores with list_files and search_files",
        )),
        "require_confirmation" => Some((
            "`safety.require_confirmation` is not supported",
            "write a policy `ask` rule for the calls to confirm (`ask: [run_shell]`) and choose what happens without a terminal with `on_ask`",
        )),
        _ => None,
    }
}

/// Reports the [`unsupported`] keys among `fields`.
fn reject_unsupported(decoder: &mut Decoder<'_>, fields: &Fields<'_>, keys: &[&str]) {
    for key in keys {
        if let (Some((key, _)), Some((message, hint))) = (fields.entry(key), unsupported(key)) {
            decoder.error_with_hint(key.span, message, hint);
        }
    }
}

/// Decodes a whole config file. `repository` is true for `./.ybs.json`.
pub fn decode_config(decoder: &mut Decoder<'_>, root: &Node, repository: bool) -> ConfigLayer {
    let mut layer = ConfigLayer::default();
    let Some(fields) =
        decoder.fields_accepting(root, "the config file", TOP_FIELDS, &["ui"], |_| None)
    else {
        return layer;
    };
    reject_unsupported(decoder, &fields, &["ui"]);
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
        layer.llm = decode_llm(decoder, &llm, repository);
    }
    let context = fields.node("context").and_then(|node| {
        decoder.fields_accepting(
            node,
            "`context`",
            CONTEXT_FIELDS,
            &["repo_map_tokens"],
            |_| None,
        )
    });
    if let Some(context) = context {
        reject_unsupported(decoder, &context, &["repo_map_tokens"]);
        layer.context = decode_context(decoder, &context);
    }
    if let Some(agent) = section(decoder, "agent", AGENT_FIELDS) {
        (layer.agent, layer.run.timeout) = decode_agent(decoder, &agent);
    }
    let safety = fields.node("safety").and_then(|node| {
        decoder.fields_accepting(
            node,
            "`safety`",
            SAFETY_FIELDS,
            &["require_confirmation"],
            |_| None,
        )
    });
    if let Some(safety) = safety {
        reject_unsupported(decoder, &safety, &["require_confirmation"]);
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
            allow_secret_paths: decode_allow_secret_paths(decoder, &git, repository),
        };
    }
    layer
}

fn decode_llm(decoder: &mut Decoder<'_>, fields: &Fields<'_>, repository: bool) -> LlmLayer {
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
    let max_tokens = crate::task::output_limit(decoder, fields);
    let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout_seconds");
    let idle: Option<Spanned<Duration>> = fields.get(decoder, "stream_idle_timeout_seconds");
    let total: Option<Spanned<Duration>> = fields.get(decoder, "total_timeout_seconds");
    let max_response: Option<Spanned<u64>> = fields.get(decoder, "max_response_bytes");
    let mut layer = LlmLayer {
        provider: provider.and_then(|p| check_provider(decoder, p)),
        model: fields.get(decoder, "model"),
        endpoint: endpoint.and_then(|e| check_endpoint(decoder, e)),
        temperature: temperature.and_then(|t| at_least(decoder, t, 0.0, "temperature")),
        max_tokens,
        timeout: timeout.and_then(|t| positive_duration(decoder, t, "timeout_seconds")),
        stream: fields.get(decoder, "stream"),
        idle_timeout: idle
            .and_then(|t| positive_duration(decoder, t, "stream_idle_timeout_seconds")),
        total_timeout: total.and_then(|t| positive_duration(decoder, t, "total_timeout_seconds")),
        text_tool_calls: fields.get(decoder, "text_tool_calls"),
        prompt_cache: fields.get(decoder, "prompt_cache"),
        prompt_cache_1h: fields
            .get::<Spanned<String>>(decoder, "prompt_cache_ttl")
            .and_then(|ttl| match ttl.value.as_str() {
                "5m" => Some(false),
                "1h" => Some(true),
                other => {
                    decoder.error_with_hint(
                        ttl.span,
                        format!("`llm.prompt_cache_ttl` is `{other}`"),
                        "use `5m` (the default) or `1h`",
                    );
                    None
                }
            }),
        prompt_cache_key: fields.get(decoder, "prompt_cache_key"),
        max_response_bytes: max_response.and_then(|m| positive(decoder, m, "max_response_bytes")),
        pricing: fields
            .node("pricing")
            .map(|node| decode_pricing(decoder, node))
            .unwrap_or_default(),
        price: fields
            .node("price")
            .and_then(|node| decode_price(decoder, node, "`llm.price`")),
    };
    if repository {
        // A price decides whether `max_cost_usd` stops a task: the
        // operator's to say (docs/security.md S5).
        for key in ["pricing", "price"] {
            if let Some((key, _)) = fields.entry(key) {
                decoder.error_with_hint(
                    key.span,
                    format!("`llm.{}` cannot be set in the repository's config: prices decide when `max_cost_usd` stops a task", key.name),
                    "set it in ~/.config/ybs/config.json or a file given with --config",
                );
            }
        }
        layer.pricing.clear();
        layer.price = None;
    }
    layer
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
    for (model, value) in entries {
        let context = format!("the price of `{}`", model.name);
        if let Some(price) = decode_price(decoder, value, &context) {
            pricing.insert(model.name.clone(), price);
        }
    }
    pricing
}

/// `{input_per_mtok, output_per_mtok, cached_input_per_mtok,
/// cache_write_per_mtok, cache_write_1h_per_mtok}` in USD per million
/// tokens; the first two are required.
fn decode_price(decoder: &mut Decoder<'_>, node: &Node, context: &str) -> Option<Price> {
    let fields = decoder.fields(node, context, PRICE_FIELDS)?;
    let mut get = |key: &str, required: bool| {
        let price: Option<Spanned<f64>> = fields.get(decoder, key);
        if required && !fields.has(key) {
            decoder.error(
                fields.span,
                format!("missing required field `{key}` in {context}"),
            );
        }
        price.and_then(|p| at_least(decoder, p, 0.0, key))
    };
    let input = get("input_per_mtok", true);
    let output = get("output_per_mtok", true);
    let cached = get("cached_input_per_mtok", false);
    let write = get("cache_write_per_mtok", false);
    let write_1h = get("cache_write_1h_per_mtok", false);
    Some(Price {
        input_per_mtok: input?,
        output_per_mtok: output?,
        cached_input_per_mtok: cached,
        cache_write_per_mtok: write,
        cache_write_1h_per_mtok: write_1h,
    })
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
    }
}

fn decode_agent(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> (AgentLayer, Option<Duration>) {
    let max_iterations: Option<Spanned<u32>> = fields.get(decoder, "max_iterations");
    let max_total_tokens: Option<Spanned<u64>> = fields.get(decoder, "max_total_tokens");
    let max_cost_usd: Option<Spanned<f64>> = fields.get(decoder, "max_cost_usd");
    let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout");
    let backoff: Option<u64> = fields.get(decoder, "retry_backoff_base_ms");
    let timeout = timeout.and_then(|t| positive_duration(decoder, t, "timeout"));
    let max_cost_usd = max_cost_usd.and_then(|v| {
        if v.value > 0.0 {
            Some(v.value)
        } else {
            decoder.error(v.span, "invalid `max_cost_usd`: must be more than 0");
            None
        }
    });
    let layer = AgentLayer {
        max_iterations: max_iterations.and_then(|m| positive(decoder, m, "max_iterations")),
        max_total_tokens: max_total_tokens.and_then(|m| positive(decoder, m, "max_total_tokens")),
        max_cost_usd,
        retry_attempts: fields.get(decoder, "retry_attempts"),
        retry_backoff_base: backoff.map(Duration::from_millis),
    };
    (layer, timeout)
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
                "allowed_paths"
                    | "env_passthrough"
                    | "sandbox_writable_paths"
                    | "sandbox_home_visible"
                    | "allowed_workdirs"
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
    let max_bytes: Option<Spanned<u64>> = fields.get(decoder, "max_task_file_bytes");
    let mut layer = SafetyLayer {
        allowed_paths: list(decoder, "allowed_paths", Some("sandbox_allowed_paths")),
        blocked_paths: list(decoder, "blocked_paths", Some("sandbox_blocked_paths")),
        blocked_commands: list(decoder, "blocked_commands", None),
        env_passthrough: list(decoder, "env_passthrough", None),
        sandbox_enabled: fields.get(decoder, "sandbox_enabled"),
        sandbox_writable_paths: list(decoder, "sandbox_writable_paths", None),
        sandbox_home_visible: list(decoder, "sandbox_home_visible", None),
        sandbox_network: fields.get(decoder, "sandbox_network"),
        max_task_file_bytes: max_bytes.and_then(|m| positive(decoder, m, "max_task_file_bytes")),
        allowed_workdirs: list(decoder, "allowed_workdirs", None),
        sandbox_unix_sockets: fields.get(decoder, "sandbox_unix_sockets"),
        sandbox_require: fields.get(decoder, "sandbox_require"),
        sandbox_check_network: fields.get(decoder, "sandbox_check_network"),
        sandbox_exec_guard: fields.get(decoder, "sandbox_exec_guard"),
        max_processes: fields
            .get::<Spanned<u32>>(decoder, "max_processes")
            .and_then(|m| positive(decoder, m, "max_processes")),
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
        repository_safety(decoder, fields, &mut layer);
    }
    layer
}

/// What the repository's config may not set in `safety`: its blocked
/// paths and commands only add to the operator's; nothing that turns the
/// sandbox off or widens it (each refused with its position).
fn repository_safety(decoder: &mut Decoder<'_>, fields: &Fields<'_>, layer: &mut SafetyLayer) {
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
            if name.name != "run_shell"
                && let Some((key, _)) = tool.entry("timeout_seconds")
            {
                decoder.error_with_hint(
                    key.span,
                    format!(
                        "`tools.builtin.{}.timeout_seconds` has no effect: only `run_shell` runs with a timeout",
                        name.name
                    ),
                    "remove it",
                );
            }
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
    if let Some((key, node)) = fields.entry("mcp") {
        if repository {
            // A server is a program ybs runs for every task: operator
            // config only (docs/security.md S5). A task file may declare
            // its own under the task's `tools.mcp`.
            decoder.error_with_hint(
                key.span,
                "`tools.mcp` cannot be set in the repository's config: ybs runs the servers it lists for every task",
                "declare the server under the task's `tools.mcp`, or in ~/.config/ybs/config.json or a file given with --config",
            );
        } else {
            layer.mcp = Some(crate::task::decode_mcp_servers(decoder, node, "tools.mcp"));
        }
    }
    let search_paths: Option<Vec<String>> = fields.get(decoder, "search_paths");
    if repository
        && search_paths.is_some()
        && let Some((key, _)) = fields.entry("search_paths")
    {
        // Operator tool directories are trusted as found: a repository
        // must not add any (docs/security.md S5). Its tools go in ./tools.
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

/// `git.allow_secret_paths`: globs; operator config only, since it lets
/// credentials into commits (docs/security.md S5, S12).
fn decode_allow_secret_paths(
    decoder: &mut Decoder<'_>,
    fields: &Fields<'_>,
    repository: bool,
) -> Option<Vec<String>> {
    let (key, node) = fields.entry("allow_secret_paths")?;
    if repository {
        decoder.error_with_hint(
            key.span,
            "`git.allow_secret_paths` cannot be set in the repository's config: it lets credentials into commits",
            "set it in ~/.config/ybs/config.json or a file given with --config",
        );
        return None;
    }
    let globs: Vec<String> = decoder.decode(node, "allow_secret_paths")?;
    for glob in &globs {
        if let Err(error) = globset::Glob::new(glob) {
            decoder.error(
                node.span,
                format!(
                    "`git.allow_secret_paths`: `{glob}` is not a valid glob: {}",
                    error.kind()
                ),
            );
            return None;
        }
    }
    Some(globs)
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
            parameters: fields.node("parameters").map(Node::to_json),
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
