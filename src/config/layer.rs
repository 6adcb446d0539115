//! Raw configuration layers: what one source (a file, the `YBS_*`
//! environment, the flags) says, every field optional. Layers merge with
//! [`Combine`] (the higher layer wins) and are resolved once into the
//! fully defaulted settings of `settings.rs`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use crate::llm::pricing::Price;

use super::settings::{ExternalToolConfig, GitAuthor};

/// Merging two layers: `self` is the higher one and wins.
pub trait Combine {
    #[must_use]
    fn combine(self, lower: Self) -> Self;
}

impl<T> Combine for Option<T> {
    fn combine(self, lower: Self) -> Self {
        self.or(lower)
    }
}

/// Maps merge key by key; a key in both combines its values.
impl<V: Combine> Combine for BTreeMap<String, V> {
    fn combine(self, mut lower: Self) -> Self {
        for (key, value) in self {
            let merged = match lower.remove(&key) {
                Some(below) => value.combine(below),
                None => value,
            };
            lower.insert(key, merged);
        }
        lower
    }
}

/// Additions accumulate from every layer, lowest first.
impl Combine for Vec<String> {
    fn combine(self, mut lower: Self) -> Self {
        for item in self {
            if !lower.contains(&item) {
                lower.push(item);
            }
        }
        lower
    }
}

impl Combine for Price {
    fn combine(self, _lower: Self) -> Self {
        self
    }
}

impl Combine for Vec<ExternalToolConfig> {
    fn combine(mut self, lower: Self) -> Self {
        self.extend(lower);
        self
    }
}

impl Combine for ExternalToolConfig {
    fn combine(self, _lower: Self) -> Self {
        self
    }
}

/// `impl Combine` for a struct, field by field.
macro_rules! combine_fields {
    ($($ty:ident { $($field:ident),* $(,)? })*) => {$(
        impl Combine for $ty {
            fn combine(self, lower: Self) -> Self {
                Self { $($field: self.$field.combine(lower.$field)),* }
            }
        }
    )*};
}

/// One source's settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConfigLayer {
    pub llm: LlmLayer,
    pub context: ContextLayer,
    pub agent: AgentLayer,
    pub safety: SafetyLayer,
    pub tools: ToolsLayer,
    pub git: GitLayer,
    pub run: RunLayer,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct LlmLayer {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub timeout: Option<Duration>,
    pub stream: Option<bool>,
    pub idle_timeout: Option<Duration>,
    pub total_timeout: Option<Duration>,
    pub text_tool_calls: Option<bool>,
    /// `llm.prompt_cache`: Anthropic's cache breakpoints (default on).
    pub prompt_cache: Option<bool>,
    /// `llm.prompt_cache_ttl: 1h` (true) or `5m`.
    pub prompt_cache_1h: Option<bool>,
    /// `llm.prompt_cache_key`: send the task's key to any OpenAI-compatible
    /// endpoint, not only OpenAI's own.
    pub prompt_cache_key: Option<bool>,
    pub max_response_bytes: Option<u64>,
    pub pricing: BTreeMap<String, Price>,
    /// `llm.price`: the price of every model without a `pricing` entry.
    pub price: Option<Price>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextLayer {
    pub max_tokens: Option<u32>,
    pub compaction_threshold: Option<f64>,
    pub max_tool_output_chars: Option<usize>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentLayer {
    pub max_iterations: Option<u32>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub retry_attempts: Option<u32>,
    pub retry_backoff_base: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct SafetyLayer {
    pub allowed_paths: Option<Vec<String>>,
    pub blocked_paths: Option<Vec<String>>,
    pub blocked_commands: Option<Vec<String>>,
    pub env_passthrough: Option<Vec<String>>,
    pub sandbox_enabled: Option<bool>,
    pub sandbox_writable_paths: Option<Vec<String>>,
    /// Paths under the home confined programs see besides the toolchains
    /// (operator config only).
    pub sandbox_home_visible: Option<Vec<String>>,
    pub sandbox_network: Option<bool>,
    /// The largest task file read (default 1 MiB).
    pub max_task_file_bytes: Option<u64>,
    /// Roots outside the task file's repository a task's `workdir` may be
    /// in (operator config only).
    pub allowed_workdirs: Option<Vec<String>>,
    pub sandbox_unix_sockets: Option<bool>,
    pub sandbox_require: Option<String>,
    pub sandbox_check_network: Option<bool>,
    /// `false`: no exec guard (docs/sandbox.md), the policy reads alone.
    pub sandbox_exec_guard: Option<bool>,
    /// At most this many processes of a task's confined programs at once
    /// (at least 1). A repository may lower it, not raise it.
    pub max_processes: Option<u32>,
    /// From the repository's `./.ybs.json`, which may only add to the
    /// blocked lists (docs/security.md S5).
    pub extra_blocked_paths: Vec<String>,
    pub extra_blocked_commands: Vec<String>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolsLayer {
    pub builtin: BTreeMap<String, BuiltinToolLayer>,
    pub external: BTreeMap<String, ExternalToolConfig>,
    pub search_paths: Option<Vec<PathBuf>>,
    /// Repository entries named like an operator's: kept to be listed as
    /// shadowed, never run.
    pub shadowed: Vec<ExternalToolConfig>,
    /// `tools.mcp` (operator config only): servers for every task.
    pub mcp: Option<Vec<crate::tools::mcp::ServerSpec>>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct BuiltinToolLayer {
    pub enabled: Option<bool>,
    pub timeout: Option<Duration>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct GitLayer {
    pub auto_commit: Option<bool>,
    pub commit_message_prefix: Option<String>,
    pub author: Option<GitAuthor>,
    pub allow_secret_paths: Option<Vec<String>>,
}

/// Settings of a run that only the environment and flags give.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunLayer {
    pub out: Option<PathBuf>,
    pub cassette: Option<PathBuf>,
    /// The task timeout (`YBS_TIMEOUT`), over every task's `limits.timeout`.
    pub timeout: Option<Duration>,
}

combine_fields! {
    ConfigLayer { llm, context, agent, safety, tools, git, run }
    LlmLayer { provider, model, endpoint, temperature, max_tokens, timeout, stream, idle_timeout, total_timeout, text_tool_calls, prompt_cache, prompt_cache_1h, prompt_cache_key, max_response_bytes, pricing, price }
    ContextLayer { max_tokens, compaction_threshold, max_tool_output_chars }
    AgentLayer { max_iterations, max_total_tokens, max_cost_usd, retry_attempts, retry_backoff_base }
    SafetyLayer {
        allowed_paths, blocked_paths, blocked_commands, env_passthrough, sandbox_enabled,
        sandbox_writable_paths, sandbox_home_visible, sandbox_network, sandbox_unix_sockets, sandbox_require, sandbox_check_network, sandbox_exec_guard,
        max_task_file_bytes, extra_blocked_paths, extra_blocked_commands, allowed_workdirs,
        max_processes,
    }
    ToolsLayer { builtin, external, search_paths, shadowed, mcp }
    BuiltinToolLayer { enabled, timeout }
    GitLayer { auto_commit, commit_message_prefix, author, allow_secret_paths }
    RunLayer { out, cassette, timeout }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn higher_layer_wins_field_by_field() {
        let high = LlmLayer {
            model: Some("high".into()),
            ..LlmLayer::default()
        };
        let low = LlmLayer {
            model: Some("low".into()),
            provider: Some("openai".into()),
            ..LlmLayer::default()
        };
        let merged = high.combine(low);
        assert_eq!(merged.model.as_deref(), Some("high"));
        assert_eq!(merged.provider.as_deref(), Some("openai"));
    }

    #[test]
    fn maps_merge_and_additions_accumulate() {
        let high: BTreeMap<String, BuiltinToolLayer> = [(
            "run_shell".to_owned(),
            BuiltinToolLayer {
                enabled: Some(false),
                timeout: None,
            },
        )]
        .into();
        let low: BTreeMap<String, BuiltinToolLayer> = [(
            "run_shell".to_owned(),
            BuiltinToolLayer {
                enabled: Some(true),
                timeout: Some(Duration::from_secs(5)),
            },
        )]
        .into();
        let merged = high.combine(low);
        assert_eq!(
            merged["run_shell"],
            BuiltinToolLayer {
                enabled: Some(false),
                timeout: Some(Duration::from_secs(5))
            }
        );
        let extra = vec!["b".to_owned(), "a".to_owned()].combine(vec!["a".to_owned()]);
        assert_eq!(extra, ["a", "b"]);
    }
}
