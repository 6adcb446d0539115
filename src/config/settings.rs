//! Resolved settings: every default applied, so nothing below `config/`
//! sees an `Option` whose default is known (STYLE (c)2). An `Option` left
//! here means "not set, and there is no default" (no task timeout, say).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::llm::pricing::{Price, PriceTable};
use crate::llm::retry::RetrySettings;
use crate::task::{BUILTIN_TOOLS, LimitsSpec, LlmSpec, TaskSpec};

use super::layer::{Combine, ConfigLayer, LlmLayer};

/// Built-in defaults (SPEC §1, §2, §4; seed 003 §2.3).
pub mod defaults {
    use std::time::Duration;

    pub const PROVIDER: &str = "replay";
    pub const MODEL: &str = "replay";
    pub const MAX_ITERATIONS: u32 = 25;
    pub const MAX_TOOL_OUTPUT_CHARS: usize = 10_000;
    pub const RETRY_ATTEMPTS: u32 = 3;
    pub const RETRY_BACKOFF_BASE: Duration = Duration::from_millis(1000);
    pub const LLM_TIMEOUT: Duration = Duration::from_secs(120);
    pub const LLM_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
    pub const LLM_TOTAL_TIMEOUT: Duration = Duration::from_secs(600);
    pub const COMPACTION_THRESHOLD: f64 = 0.95;
    pub const REPO_MAP_TOKENS: u32 = 1024;
    pub const SHELL_TIMEOUT: Duration = Duration::from_secs(30);
    pub const EXTERNAL_TOOL_TIMEOUT: Duration = Duration::from_secs(30);
    pub const OUT: &str = "ybs-out";
    pub const COMMIT_MESSAGE_PREFIX: &str = "[ybs]";
    /// The policy's own lists: one source, so `safety.*` left unset
    /// never means fewer guards than the policy was built and tested
    /// with (`/proc/*/environ`, `su`, …).
    pub const BLOCKED_PATHS: &[&str] = crate::policy::guards::DEFAULT_BLOCKED_PATHS;
    pub const BLOCKED_COMMANDS: &[&str] = crate::policy::guards::DEFAULT_BLOCKED_COMMANDS;
}

/// Who set a value, for settings a repository must not widen (SECURITY S5).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Not set anywhere: the built-in default (or nothing).
    Default,
    /// Flags, `YBS_*`, or a config file outside the repository.
    Operator,
    /// The repository's own `./.ybs.json`.
    Repository,
    /// The task file (its own fields or its `defaults:`).
    TaskFile,
}

/// The resolved configuration of a run.
///
/// Honoured today: everything that reaches [`TaskSettings`], `retry()`,
/// `out`, `cassette`, `safety`, `git`, `llm.pricing`, `context.max_tokens`
/// and `context.compaction_threshold` (the agent's context window, through
/// the runner). Parsed and kept for the modules that will use them:
/// `context.repo_map_tokens`, `tools.*`,
/// `safety.require_confirmation`, `ui.*`.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub llm: LlmSettings,
    pub context: ContextSettings,
    pub agent: AgentSettings,
    pub safety: SafetySettings,
    pub tools: ToolsSettings,
    pub git: GitSettings,
    pub ui: UiSettings,
    /// Output directory (`--out`, `YBS_OUT`; default `ybs-out`).
    pub out: PathBuf,
    /// Cassette for the replay provider (`--cassette`, `YBS_CASSETTE`).
    pub cassette: Option<PathBuf>,
    /// The config files that were read, lowest precedence first.
    pub files: Vec<PathBuf>,
    /// Flags, env and files merged: the task-level values that beat a
    /// task's own fields.
    pub(super) over_tasks: OverTasks,
}

/// What the operator layers say about task-level settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct OverTasks {
    pub llm: LlmLayer,
    pub endpoint_origin: Option<Origin>,
    pub max_iterations: Option<u32>,
    pub timeout: Option<Duration>,
    pub max_tool_output_chars: Option<usize>,
}

/// `llm.*` that are not per task.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmSettings {
    /// `llm.timeout_seconds` (default 120 s): until the response headers.
    pub timeout: Duration,
    /// `llm.stream` (default on): stream responses where the provider can.
    pub stream: bool,
    /// `llm.stream_idle_timeout_seconds` (default 60 s): the longest
    /// silence inside a response body.
    pub idle_timeout: Duration,
    /// `llm.total_timeout_seconds` (default 600 s): one whole request.
    pub total_timeout: Duration,
    /// `llm.text_tool_calls` (default off).
    pub text_tool_calls: bool,
    /// `llm.pricing`: per-model prices over the built-in table.
    pub pricing: BTreeMap<String, Price>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// The model's context window in tokens; `None`: the agent's default
    /// (`agent::context::DEFAULT_WINDOW`, 32,000).
    pub max_tokens: Option<u32>,
    pub compaction_threshold: f64,
    pub repo_map_tokens: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct AgentSettings {
    pub retry_attempts: u32,
    pub retry_backoff_base: Duration,
}

/// `safety.*`. Paths are as written (`~` not yet expanded).
#[derive(Debug, Clone, PartialEq)]
pub struct SafetySettings {
    /// Roots besides the workdir that paths may resolve into.
    pub allowed_paths: Vec<String>,
    pub blocked_paths: Vec<String>,
    pub blocked_commands: Vec<String>,
    /// Secret-looking variables passed to children anyway.
    pub env_passthrough: Vec<String>,
    /// Off only with `--no-sandbox` or `sandbox_enabled: false` in an
    /// operator config.
    pub sandbox_enabled: bool,
    /// Extra roots sandboxed children may write (operator config only;
    /// `safety.allowed_paths` are writable too).
    pub sandbox_writable_paths: Vec<String>,
    /// Sandboxed children may use the network (operator config only).
    pub sandbox_network: bool,
    /// Sandboxed children may create named unix sockets (operator config
    /// only).
    pub sandbox_unix_sockets: bool,
    /// `all` (namespaces, Landlock, seccomp) or `landlock` (Landlock and
    /// seccomp accepted without namespaces; operator config only).
    pub sandbox_require: String,
    /// A check that asks for the network (`network: true`) gets it;
    /// the operator may forbid it (false).
    pub sandbox_check_network: bool,
    /// Kept from the seed schema; policy `ask` rules do this job in ybs.
    pub require_confirmation: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolsSettings {
    /// Every built-in tool, by name.
    pub builtin: BTreeMap<String, BuiltinToolSettings>,
    /// `tools.external`, by name.
    pub external: Vec<ExternalToolConfig>,
    /// `tools.search_paths`, searched after `./tools` and `~/.ybs/tools`.
    pub search_paths: Vec<PathBuf>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinToolSettings {
    pub enabled: bool,
    /// `run_shell`'s default command timeout (30 s); `None` for tools
    /// that have no timeout.
    pub timeout: Option<Duration>,
}

/// One `tools.external` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalToolConfig {
    pub name: String,
    /// Only `executable` today.
    pub kind: String,
    pub path: PathBuf,
    pub description: Option<String>,
    /// A JSON Schema given inline instead of `TOOL --schema`.
    pub parameters: Option<serde_json::Value>,
    pub timeout: Duration,
    pub enabled: bool,
    /// Declared in the repository's `./.ybs.json`: repository content,
    /// so it does not enable the tool by itself (SECURITY S5).
    pub from_repository: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GitSettings {
    pub auto_commit: bool,
    pub commit_message_prefix: String,
    /// `YBS_GIT_AUTHOR`; `None`: git config, else `ybs <ybs@localhost>`.
    pub author: Option<GitAuthor>,
}

/// `Name <email>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitAuthor {
    pub name: String,
    pub email: String,
}

impl GitAuthor {
    /// Parses `Name <email>`.
    pub fn parse(text: &str) -> Option<Self> {
        let (name, rest) = text.trim().split_once('<')?;
        let email = rest.strip_suffix('>')?.trim();
        let name = name.trim();
        (!name.is_empty() && email.contains('@') && !email.contains(['<', '>'])).then(|| Self {
            name: name.to_owned(),
            email: email.to_owned(),
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ColorChoice {
    #[default]
    Auto,
    Always,
    Never,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UiSettings {
    pub color: ColorChoice,
    pub show_token_usage: bool,
    pub show_tool_calls: bool,
    pub stream_responses: bool,
}

/// Everything one task runs with, after every layer (SPEC §1): flags >
/// `YBS_*` > config files > the task's own fields > its file's
/// `defaults:` > built-in defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSettings {
    pub provider: String,
    pub model: String,
    pub endpoint: Option<String>,
    /// Who chose `endpoint`; a task file or the repository's config must
    /// not receive the operator's API key for a vendor (SECURITY S5).
    pub endpoint_origin: Origin,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
    pub text_tool_calls: bool,
    pub stream: bool,
    pub llm_timeout: Duration,
    pub llm_idle_timeout: Duration,
    pub llm_total_timeout: Duration,
    pub max_iterations: u32,
    pub timeout: Option<Duration>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_tool_output_chars: usize,
}

/// Built-in defaults only: no files, no environment, no flags. For tests
/// and for callers that run without configuration.
impl Default for Config {
    fn default() -> Self {
        Self::resolve(ConfigLayer::default(), OverTasks::default(), Vec::new())
    }
}

impl Config {
    /// Resolves merged layers into settings.
    pub(super) fn resolve(layer: ConfigLayer, over_tasks: OverTasks, files: Vec<PathBuf>) -> Self {
        let ConfigLayer {
            llm,
            context,
            agent,
            safety,
            tools,
            git,
            ui,
            run,
        } = layer;
        let strings = |items: &[&str]| items.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let builtin = BUILTIN_TOOLS
            .iter()
            .map(|name| {
                let layer = tools.builtin.get(*name).cloned().unwrap_or_default();
                let default_timeout = (*name == "run_shell").then_some(defaults::SHELL_TIMEOUT);
                let settings = BuiltinToolSettings {
                    enabled: layer.enabled.unwrap_or(true),
                    timeout: layer.timeout.or(default_timeout),
                };
                ((*name).to_owned(), settings)
            })
            .collect();
        Self {
            llm: LlmSettings {
                timeout: llm.timeout.unwrap_or(defaults::LLM_TIMEOUT),
                stream: llm.stream.unwrap_or(true),
                idle_timeout: llm.idle_timeout.unwrap_or(defaults::LLM_IDLE_TIMEOUT),
                total_timeout: llm.total_timeout.unwrap_or(defaults::LLM_TOTAL_TIMEOUT),
                text_tool_calls: llm.text_tool_calls.unwrap_or(false),
                pricing: llm.pricing,
            },
            context: ContextSettings {
                max_tokens: context.max_tokens,
                compaction_threshold: context
                    .compaction_threshold
                    .unwrap_or(defaults::COMPACTION_THRESHOLD),
                repo_map_tokens: context.repo_map_tokens.unwrap_or(defaults::REPO_MAP_TOKENS),
            },
            agent: AgentSettings {
                retry_attempts: agent.retry_attempts.unwrap_or(defaults::RETRY_ATTEMPTS),
                retry_backoff_base: agent
                    .retry_backoff_base
                    .unwrap_or(defaults::RETRY_BACKOFF_BASE),
            },
            safety: SafetySettings {
                allowed_paths: safety.allowed_paths.unwrap_or_default(),
                blocked_paths: safety
                    .blocked_paths
                    .unwrap_or_else(|| strings(defaults::BLOCKED_PATHS))
                    .combine(safety.extra_blocked_paths),
                blocked_commands: safety
                    .blocked_commands
                    .unwrap_or_else(|| strings(defaults::BLOCKED_COMMANDS))
                    .combine(safety.extra_blocked_commands),
                env_passthrough: safety.env_passthrough.unwrap_or_default(),
                sandbox_enabled: safety.sandbox_enabled.unwrap_or(true),
                sandbox_writable_paths: safety.sandbox_writable_paths.unwrap_or_default(),
                sandbox_network: safety.sandbox_network.unwrap_or(false),
                sandbox_unix_sockets: safety.sandbox_unix_sockets.unwrap_or(false),
                sandbox_require: safety.sandbox_require.unwrap_or_else(|| "all".to_owned()),
                sandbox_check_network: safety.sandbox_check_network.unwrap_or(true),
                require_confirmation: safety.require_confirmation.unwrap_or_default(),
            },
            tools: ToolsSettings {
                builtin,
                external: tools.external.into_values().collect(),
                search_paths: tools.search_paths.unwrap_or_default(),
            },
            git: GitSettings {
                auto_commit: git.auto_commit.unwrap_or(true),
                commit_message_prefix: git
                    .commit_message_prefix
                    .unwrap_or_else(|| defaults::COMMIT_MESSAGE_PREFIX.to_owned()),
                author: git.author,
            },
            ui: UiSettings {
                color: ui.color.unwrap_or_default(),
                show_token_usage: ui.show_token_usage.unwrap_or(true),
                show_tool_calls: ui.show_tool_calls.unwrap_or(true),
                stream_responses: ui.stream_responses.unwrap_or(true),
            },
            out: run.out.unwrap_or_else(|| PathBuf::from(defaults::OUT)),
            cassette: run.cassette,
            files,
            over_tasks,
        }
    }

    /// The settings `task` runs with.
    pub fn task_settings(&self, task: &TaskSpec) -> TaskSettings {
        self.resolve_task(&task.llm, &task.limits)
    }

    /// The settings of a session with no task file (`ybs chat`).
    pub fn session_settings(&self) -> TaskSettings {
        self.resolve_task(&LlmSpec::default(), &LimitsSpec::default())
    }

    fn resolve_task(&self, llm: &LlmSpec, limits: &LimitsSpec) -> TaskSettings {
        let over = &self.over_tasks;
        let endpoint_origin = match (&over.llm.endpoint, &llm.endpoint) {
            (Some(_), _) => over.endpoint_origin.unwrap_or(Origin::Operator),
            (None, Some(_)) => Origin::TaskFile,
            (None, None) => Origin::Default,
        };
        TaskSettings {
            provider: over
                .llm
                .provider
                .clone()
                .or_else(|| llm.provider.clone())
                .unwrap_or_else(|| defaults::PROVIDER.to_owned()),
            model: over
                .llm
                .model
                .clone()
                .or_else(|| llm.model.clone())
                .unwrap_or_else(|| defaults::MODEL.to_owned()),
            endpoint: over.llm.endpoint.clone().or_else(|| llm.endpoint.clone()),
            endpoint_origin,
            temperature: over.llm.temperature.or(llm.temperature),
            max_tokens: over.llm.max_tokens.or(llm.max_tokens),
            text_tool_calls: self.llm.text_tool_calls,
            stream: self.llm.stream,
            llm_timeout: self.llm.timeout,
            llm_idle_timeout: self.llm.idle_timeout,
            llm_total_timeout: self.llm.total_timeout,
            max_iterations: over
                .max_iterations
                .or(limits.max_iterations)
                .unwrap_or(defaults::MAX_ITERATIONS),
            timeout: over.timeout.or(limits.timeout),
            max_total_tokens: limits.max_total_tokens,
            max_cost_usd: limits.max_cost_usd,
            max_tool_output_chars: over
                .max_tool_output_chars
                .or(limits.max_tool_output_chars)
                .unwrap_or(defaults::MAX_TOOL_OUTPUT_CHARS),
        }
    }

    /// Provider retries (`agent.retry_attempts`, `agent.retry_backoff_base_ms`).
    pub fn retry(&self) -> RetrySettings {
        RetrySettings {
            attempts: self.agent.retry_attempts,
            base_delay: self.agent.retry_backoff_base,
            ..RetrySettings::default()
        }
    }

    pub fn safety(&self) -> &SafetySettings {
        &self.safety
    }

    /// Built-in prices with `llm.pricing` over them.
    pub fn price_table(&self) -> PriceTable {
        PriceTable::new(self.llm.pricing.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_author_parses_name_and_email() {
        assert_eq!(
            GitAuthor::parse("CI Bot <ci@example.com>"),
            Some(GitAuthor {
                name: "CI Bot".into(),
                email: "ci@example.com".into()
            })
        );
        for bad in ["ci@example.com", "Bot <>", "<a@b>", "Bot <a@b", "Bot a@b>"] {
            assert_eq!(GitAuthor::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn built_in_defaults() {
        let config = Config::default();
        let task = config.session_settings();
        assert_eq!(task.provider, "replay");
        assert_eq!(task.model, "replay");
        assert_eq!(task.max_iterations, 25);
        assert_eq!(task.max_tool_output_chars, 10_000);
        assert_eq!(task.timeout, None);
        assert_eq!(task.llm_timeout, Duration::from_secs(120));
        assert!(task.stream);
        assert_eq!(task.llm_idle_timeout, Duration::from_secs(60));
        assert_eq!(task.llm_total_timeout, Duration::from_secs(600));
        assert_eq!(task.endpoint_origin, Origin::Default);
        assert_eq!(config.retry().attempts, 3);
        assert_eq!(config.retry().base_delay, Duration::from_millis(1000));
        assert!((config.context.compaction_threshold - 0.95).abs() < f64::EPSILON);
        assert_eq!(config.safety.blocked_paths, defaults::BLOCKED_PATHS);
        assert_eq!(config.safety.blocked_commands, defaults::BLOCKED_COMMANDS);
        assert!(config.safety.sandbox_enabled);
        assert_eq!(config.out, PathBuf::from("ybs-out"));
        assert_eq!(config.tools.builtin.len(), 6);
        assert_eq!(
            config.tools.builtin["run_shell"].timeout,
            Some(Duration::from_secs(30))
        );
        assert_eq!(config.tools.builtin["read_file"].timeout, None);
    }
}
