//! The task fields as written in one place (a task or `defaults:`), before
//! merging: every field optional, strings that take placeholders keep their
//! position so an unknown `{{name}}` is reported where it was written.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::core::span::Span;
use crate::core::text::{closest, list};
use crate::policy::PolicySpec;

use super::model::{
    CallerToolSpec, CommitSpec, ContextSpec, Expect, LimitSpans, LimitsSpec, LlmSpec, OutputSpec,
    PROVIDERS,
};
use super::policy::decode_policy;
use super::vars::is_var_name;
use crate::core::decode::yaml::{Node, NodeKind};
use crate::core::decode::{Decoder, Fields, Spanned, non_empty, positive, positive_duration};

mod mcp;
pub use mcp::decode_mcp_servers;

mod output;
use output::{decode_context, decode_output};

mod tools;
pub use tools::check_builtin_tool;
use tools::{decode_caller_tools, decode_required_external, decode_tools};

/// Every task field, in the order messages list them.
pub const TASK_FIELDS: &[&str] = &[
    "id",
    "prompt",
    "system",
    "vars",
    "workdir",
    "provider",
    "model",
    "endpoint",
    "temperature",
    "max_tokens",
    "max_output_tokens",
    "tools",
    "policy",
    "limits",
    "checks",
    "fix_attempts",
    "commit",
    "expect",
    "context",
    "output",
];

const TOOLS_FIELDS: &[&str] = &["builtin", "external", "caller", "mcp", "script"];
pub const LIMITS_FIELDS: &[&str] = &[
    "max_iterations",
    "timeout",
    "max_total_tokens",
    "max_cost_usd",
    "max_tool_output_chars",
];
pub const CHECK_FIELDS: &[&str] = &["name", "run", "timeout", "expect_exit", "network"];

/// One layer of task fields.
#[derive(Debug, Clone, Default)]
pub struct TaskLayer {
    pub id: Option<Spanned<String>>,
    pub prompt: Option<Spanned<String>>,
    pub system: Option<Spanned<String>>,
    pub vars: BTreeMap<String, String>,
    pub workdir: Option<Spanned<String>>,
    pub llm: LlmSpec,
    pub builtin_tools: Option<Vec<String>>,
    pub external_tools: Option<Vec<String>>,
    /// The `external_tools` marked `required: true`.
    pub required_external: Vec<Spanned<String>>,
    /// `tools.script`.
    pub script_tool: Option<bool>,
    /// `tools.caller`.
    pub caller_tools: Option<Vec<CallerToolSpec>>,
    /// `tools.mcp`.
    pub mcp_servers: Option<Vec<crate::tools::mcp::ServerSpec>>,
    pub policy: Option<PolicySpec>,
    pub limits: LimitsSpec,
    pub checks: Option<Vec<CheckLayer>>,
    pub fix_attempts: Option<u32>,
    pub commit: Option<CommitSpec>,
    pub expect: Option<Expect>,
    pub context: Option<ContextSpec>,
    pub output: Option<OutputSpec>,
}

/// A check before placeholders are substituted.
#[derive(Debug, Clone)]
pub struct CheckLayer {
    pub name: Option<Spanned<String>>,
    pub run: Spanned<String>,
    pub timeout: Option<Duration>,
    pub expect_exit: i32,
    /// The check runs with the network (default: false).
    pub network: bool,
    /// Where `network: true` was written.
    pub network_span: Option<Span>,
}

impl TaskLayer {
    /// Decodes the task fields present in `fields` (already checked for
    /// unknown keys by the caller, who knows the context).
    pub fn decode(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> Self {
        let mut layer = Self {
            id: fields.get(decoder, "id"),
            prompt: fields.get(decoder, "prompt"),
            system: fields.get(decoder, "system"),
            workdir: fields.get(decoder, "workdir"),
            fix_attempts: fields.get(decoder, "fix_attempts"),
            ..Self::default()
        };
        if let Some(node) = fields.node("vars") {
            layer.vars = decode_vars(decoder, node);
        }
        layer.llm = decode_llm(decoder, fields);
        if let Some(node) = fields.node("tools") {
            (layer.builtin_tools, layer.external_tools, layer.script_tool) =
                decode_tools(decoder, node);
            layer.required_external = decode_required_external(decoder, node);
            layer.caller_tools = decode_caller_tools(decoder, node);
            if let Some(mcp) = node.get("mcp") {
                layer.mcp_servers = Some(decode_mcp_servers(decoder, mcp, "tools.mcp"));
            }
        }
        if let Some(node) = fields.node("policy") {
            layer.policy = decode_policy(decoder, node, "`policy`");
        }
        if let Some(node) = fields.node("limits") {
            layer.limits = decode_limits(decoder, node);
        }
        if let Some(node) = fields.node("checks") {
            layer.checks = decode_checks(decoder, node);
        }
        if let Some(node) = fields.node("commit") {
            layer.commit = decode_commit(decoder, node);
        }
        if let Some(node) = fields.node("expect") {
            layer.expect = decode_expect(decoder, node);
        }
        if let Some(node) = fields.node("context") {
            layer.context = decode_context(decoder, node);
        }
        if let Some(node) = fields.node("output") {
            layer.output = decode_output(decoder, node);
        }
        layer
    }

    /// This layer over `lower` (`defaults:`): set fields win; `vars` maps
    /// merge; `limits` merge field by field; `checks` replace the list.
    /// Policy is not merged here: it becomes a list of layers.
    pub fn over(self, lower: &Self) -> Self {
        let mut vars = lower.vars.clone();
        vars.extend(self.vars);
        Self {
            id: self.id,
            prompt: self.prompt,
            system: self.system.or_else(|| lower.system.clone()),
            vars,
            workdir: self.workdir.or_else(|| lower.workdir.clone()),
            llm: LlmSpec {
                provider: self.llm.provider.or_else(|| lower.llm.provider.clone()),
                model: self.llm.model.or_else(|| lower.llm.model.clone()),
                endpoint: self.llm.endpoint.or_else(|| lower.llm.endpoint.clone()),
                temperature: self.llm.temperature.or(lower.llm.temperature),
                max_tokens: self.llm.max_tokens.or(lower.llm.max_tokens),
            },
            builtin_tools: self.builtin_tools.or_else(|| lower.builtin_tools.clone()),
            required_external: if self.external_tools.is_some() {
                self.required_external
            } else {
                lower.required_external.clone()
            },
            external_tools: self.external_tools.or_else(|| lower.external_tools.clone()),
            script_tool: self.script_tool.or(lower.script_tool),
            caller_tools: self.caller_tools.or_else(|| lower.caller_tools.clone()),
            mcp_servers: self.mcp_servers.or_else(|| lower.mcp_servers.clone()),
            policy: self.policy,
            limits: self.limits.over(&lower.limits),
            checks: self.checks.or_else(|| lower.checks.clone()),
            fix_attempts: self.fix_attempts.or(lower.fix_attempts),
            commit: self.commit.or_else(|| lower.commit.clone()),
            expect: self.expect.or(lower.expect),
            context: self.context.or_else(|| lower.context.clone()),
            output: self.output.or_else(|| lower.output.clone()),
        }
    }
}

impl LimitsSpec {
    /// These limits over `lower`'s, field by field, each with its span.
    fn over(self, lower: &Self) -> Self {
        let (mine, theirs) = (self.spans, lower.spans);
        let pick = |own: Option<Span>, low: Option<Span>, set: bool| if set { own } else { low };
        Self {
            max_iterations: self.max_iterations.or(lower.max_iterations),
            timeout: self.timeout.or(lower.timeout),
            max_total_tokens: self.max_total_tokens.or(lower.max_total_tokens),
            max_cost_usd: self.max_cost_usd.or(lower.max_cost_usd),
            max_tool_output_chars: self.max_tool_output_chars.or(lower.max_tool_output_chars),
            spans: LimitSpans {
                max_iterations: pick(
                    mine.max_iterations,
                    theirs.max_iterations,
                    self.max_iterations.is_some(),
                ),
                timeout: pick(mine.timeout, theirs.timeout, self.timeout.is_some()),
                max_total_tokens: pick(
                    mine.max_total_tokens,
                    theirs.max_total_tokens,
                    self.max_total_tokens.is_some(),
                ),
                max_cost_usd: pick(
                    mine.max_cost_usd,
                    theirs.max_cost_usd,
                    self.max_cost_usd.is_some(),
                ),
                max_tool_output_chars: pick(
                    mine.max_tool_output_chars,
                    theirs.max_tool_output_chars,
                    self.max_tool_output_chars.is_some(),
                ),
            },
        }
    }
}

/// `vars:` a mapping of names to scalar values (numbers and booleans are
/// written out as text).
pub fn decode_vars(decoder: &mut Decoder<'_>, node: &Node) -> BTreeMap<String, String> {
    let mut vars = BTreeMap::new();
    let entries = match &node.kind {
        NodeKind::Map(entries) => entries,
        NodeKind::Null => return vars,
        _ => {
            decoder.expected(node, "vars", "a mapping of names to values");
            return vars;
        }
    };
    for (key, value) in entries {
        if !is_var_name(&key.name) {
            decoder.error(
                key.span,
                format!(
                    "invalid variable name `{}`: use letters, digits, `_` and `-`, starting with a letter or `_`",
                    key.name
                ),
            );
            continue;
        }
        let Some(text) = scalar_text(decoder, value, &key.name) else {
            continue;
        };
        vars.insert(key.name.clone(), text);
    }
    vars
}

/// A scalar value (`vars:`, an MCP server's `env:`) as text; anything else
/// is an error ("expected a string") at `value`.
fn scalar_text(decoder: &mut Decoder<'_>, value: &Node, key: &str) -> Option<String> {
    match &value.kind {
        NodeKind::Str(text) => Some(text.clone()),
        NodeKind::Int(int) => Some(int.to_string()),
        NodeKind::Float(float) => Some(float.to_string()),
        NodeKind::Bool(flag) => Some(flag.to_string()),
        _ => {
            decoder.expected(value, key, "a string");
            None
        }
    }
}

fn decode_llm(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> LlmSpec {
    let provider: Option<Spanned<String>> = fields.get(decoder, "provider");
    let provider = provider.and_then(|provider| check_provider(decoder, provider));
    let model: Option<Spanned<String>> = fields.get(decoder, "model");
    let model = model.and_then(|model| non_empty(decoder, model, "model"));
    let endpoint: Option<Spanned<String>> = fields.get(decoder, "endpoint");
    let endpoint = endpoint.and_then(|endpoint| check_endpoint(decoder, endpoint));
    let temperature: Option<Spanned<f64>> = fields.get(decoder, "temperature");
    let temperature = temperature.and_then(|t| {
        if t.value < 0.0 {
            decoder.error(t.span, "invalid `temperature`: must be 0 or more");
            None
        } else {
            Some(t.value)
        }
    });
    let max_tokens = output_limit(decoder, fields);
    LlmSpec {
        provider,
        model,
        endpoint,
        temperature,
        max_tokens,
    }
}

/// `max_output_tokens`, or its older name `max_tokens`: the longest
/// answer the model may give, in tokens. Both at once is an error.
pub fn output_limit(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> Option<u32> {
    let old: Option<Spanned<u32>> = fields.get(decoder, "max_tokens");
    let new: Option<Spanned<u32>> = fields.get(decoder, "max_output_tokens");
    match (new, old) {
        (Some(new), Some(_)) => {
            decoder.error_with_hint(
                new.span,
                "`max_output_tokens` and `max_tokens` are the same setting",
                "keep `max_output_tokens` and remove `max_tokens`",
            );
            None
        }
        (Some(limit), None) => positive(decoder, limit, "max_output_tokens"),
        (None, Some(limit)) => positive(decoder, limit, "max_tokens"),
        (None, None) => None,
    }
}

/// A provider name ybs knows, with a suggestion for a typo.
pub fn check_provider(decoder: &mut Decoder<'_>, provider: Spanned<String>) -> Option<String> {
    if PROVIDERS.contains(&provider.value.as_str()) {
        return Some(provider.value);
    }
    let message = format!(
        "unknown provider `{}`, expected one of {}",
        provider.value,
        list(&PROVIDERS)
    );
    match closest(&provider.value, PROVIDERS) {
        Some(near) => {
            decoder.error_with_hint(provider.span, message, format!("did you mean `{near}`?"))
        }
        None => decoder.error(provider.span, message),
    }
    None
}

/// An `http://` or `https://` URL.
pub fn check_endpoint(decoder: &mut Decoder<'_>, endpoint: Spanned<String>) -> Option<String> {
    let url = endpoint.value.trim();
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    if rest.is_some_and(|rest| !rest.is_empty()) {
        Some(url.to_owned())
    } else {
        decoder.error(
            endpoint.span,
            format!(
                "invalid `endpoint`: expected a URL starting with http:// or https://, found `{}`",
                endpoint.value
            ),
        );
        None
    }
}

fn decode_limits(decoder: &mut Decoder<'_>, node: &Node) -> LimitsSpec {
    let Some(fields) = decoder.fields(node, "`limits`", LIMITS_FIELDS) else {
        return LimitsSpec::default();
    };
    let max_iterations: Option<Spanned<u32>> = fields.get(decoder, "max_iterations");
    let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout");
    let max_total_tokens: Option<Spanned<u64>> = fields.get(decoder, "max_total_tokens");
    let max_cost_usd: Option<Spanned<f64>> = fields.get(decoder, "max_cost_usd");
    let max_tool_output_chars: Option<Spanned<usize>> =
        fields.get(decoder, "max_tool_output_chars");
    let span_of = |key: &str| fields.node(key).map(|node| node.span);
    let spans = LimitSpans {
        max_iterations: span_of("max_iterations"),
        timeout: span_of("timeout"),
        max_total_tokens: span_of("max_total_tokens"),
        max_cost_usd: span_of("max_cost_usd"),
        max_tool_output_chars: span_of("max_tool_output_chars"),
    };
    LimitsSpec {
        spans,
        max_iterations: max_iterations.and_then(|v| positive(decoder, v, "max_iterations")),
        timeout: timeout.and_then(|v| positive_duration(decoder, v, "timeout")),
        max_total_tokens: max_total_tokens.and_then(|v| positive(decoder, v, "max_total_tokens")),
        max_cost_usd: max_cost_usd.and_then(|v| {
            if v.value > 0.0 {
                Some(v.value)
            } else {
                decoder.error(v.span, "invalid `max_cost_usd`: must be more than 0");
                None
            }
        }),
        max_tool_output_chars: max_tool_output_chars
            .and_then(|v| positive(decoder, v, "max_tool_output_chars")),
    }
}

fn decode_checks(decoder: &mut Decoder<'_>, node: &Node) -> Option<Vec<CheckLayer>> {
    let NodeKind::Seq(items) = &node.kind else {
        if matches!(node.kind, NodeKind::Null) {
            return Some(Vec::new());
        }
        decoder.expected(node, "checks", "a list of checks like `- run: cargo test`");
        return None;
    };
    let checks: Vec<Option<CheckLayer>> = items
        .iter()
        .map(|item| decode_check(decoder, item))
        .collect();
    checks.into_iter().collect()
}

/// `{name, run, timeout, expect_exit}`, or just the command as a string.
fn decode_check(decoder: &mut Decoder<'_>, node: &Node) -> Option<CheckLayer> {
    if let NodeKind::Str(run) = &node.kind {
        let run = non_empty(decoder, Spanned::new(run.clone(), node.span), "run")?;
        return Some(CheckLayer {
            name: None,
            run: Spanned::new(run, node.span),
            timeout: None,
            expect_exit: 0,
            network: false,
            network_span: None,
        });
    }
    let fields = decoder.fields(node, "a check", CHECK_FIELDS)?;
    let before = decoder.error_count();
    let name: Option<Spanned<String>> = fields.get(decoder, "name");
    let run: Option<Spanned<String>> = fields.get(decoder, "run");
    let timeout: Option<Spanned<Duration>> = fields.get(decoder, "timeout");
    let expect_exit: Option<i32> = fields.get(decoder, "expect_exit");
    let network: Option<Spanned<bool>> = fields.get(decoder, "network");
    if run.is_none() && !fields.has("run") && !fields.has_typo_of("run", CHECK_FIELDS) {
        decoder.error(fields.span, "missing required field `run` in a check");
    }
    let run = run.and_then(|run| {
        let span = run.span;
        non_empty(decoder, run, "run").map(|text| Spanned::new(text, span))
    });
    let timeout = timeout.and_then(|t| positive_duration(decoder, t, "timeout"));
    if decoder.error_count() != before {
        return None;
    }
    Some(CheckLayer {
        name,
        run: run?,
        timeout,
        expect_exit: expect_exit.unwrap_or(0),
        network: network.as_ref().is_some_and(|network| network.value),
        network_span: network.map(|network| network.span),
    })
}

fn decode_commit(decoder: &mut Decoder<'_>, node: &Node) -> Option<CommitSpec> {
    match &node.kind {
        NodeKind::Bool(enabled) => Some(CommitSpec {
            enabled: *enabled,
            ..CommitSpec::default()
        }),
        NodeKind::Map(_) => {
            let fields = decoder.fields(node, "`commit`", &["message", "branch"])?;
            let message: Option<Spanned<String>> = fields.get(decoder, "message");
            let branch: Option<Spanned<String>> = fields.get(decoder, "branch");
            Some(CommitSpec {
                enabled: true,
                message: message.and_then(|m| non_empty(decoder, m, "message")),
                branch: branch.and_then(|b| non_empty(decoder, b, "branch")),
            })
        }
        _ => {
            decoder.expected(node, "commit", "`true`, `false` or `{message, branch}`");
            None
        }
    }
}

fn decode_expect(decoder: &mut Decoder<'_>, node: &Node) -> Option<Expect> {
    match &node.kind {
        NodeKind::Str(text) if text == "pass" => Some(Expect::Pass),
        NodeKind::Str(text) if text == "fail" => Some(Expect::Fail),
        _ => {
            decoder.expected_one_of(node, "expect", &["pass", "fail"]);
            None
        }
    }
}

/// The fields `defaults:` accepts: every task field but `id` and `prompt`.
pub fn defaults_fields() -> Vec<&'static str> {
    TASK_FIELDS
        .iter()
        .copied()
        .filter(|field| !matches!(*field, "id" | "prompt"))
        .collect()
}
