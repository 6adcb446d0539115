//! Resolved settings: every default applied, so nothing below `config/`
//! sees an `Option` whose default is known. An `Option` left
//! here means "not set, and there is no default" (no task timeout, say).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::llm::pricing::{Price, PriceTable};
use crate::llm::retry::RetrySettings;
use crate::task::{BUILTIN_TOOLS, Diagnostic, LimitsSpec, LlmSpec, TaskSpec};

use super::ceiling::{Bound, Ceiling, narrower, wider};
use super::layer::{Combine, ConfigLayer, LlmLayer};

/// Built-in defaults (docs/cli.md, docs/task-files.md, docs/policy.md).
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
    /// `llm.max_response_bytes`: 8 MiB.
    pub const LLM_MAX_RESPONSE_BYTES: u64 = crate::llm::DEFAULT_MAX_RESPONSE_BYTES;
    pub const COMPACTION_THRESHOLD: f64 = 0.95;
    /// `llm.max_output_tokens`: every provider is sent a limit, so a
    /// local server cannot generate for minutes.
    pub const MAX_OUTPUT_TOKENS: u32 = 4096;
    pub const MAX_TASK_FILE_BYTES: u64 = 1 << 20;
    pub const MAX_PROCESSES: u32 = 1024;
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

/// Who set a value, for settings a repository must not widen (docs/security.md S5).
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
/// Every key has an effect: what reaches [`TaskSettings`], `retry()`,
/// `out`, `cassette`, `safety`, `git`, `llm.pricing` and `llm.price`,
/// `context.*` (the agent's context window, through the runner) and
/// `tools.*` (the registry and the tools' timeouts). Keys of the original
/// design that ybs does not use (`ui.*`, `context.repo_map_tokens`,
/// `safety.require_confirmation`) are rejected when a file is read.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    pub llm: LlmSettings,
    pub context: ContextSettings,
    pub agent: AgentSettings,
    pub safety: SafetySettings,
    pub tools: ToolsSettings,
    pub git: GitSettings,
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

/// What the config layers say about task-level settings.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct OverTasks {
    pub llm: LlmLayer,
    pub endpoint_origin: Option<Origin>,
    /// The config file (or `a YBS_* variable`) that sets `llm.provider`
    /// over every task's own; `None` when unset or set by a flag.
    pub provider_from: Option<String>,
    /// Likewise for `llm.model`.
    pub model_from: Option<String>,
    /// The limits of every config layer, the repository's narrowing the
    /// operator's; a task's own limit narrows them further.
    pub max_iterations: Option<u32>,
    pub timeout: Option<Duration>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_tool_output_chars: Option<usize>,
    /// The operator's own values: a task file may not go above them.
    pub ceilings: TaskCeilings,
}

/// The operator's limits for tasks, with where each was set.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct TaskCeilings {
    pub max_iterations: Option<Ceiling<u32>>,
    pub timeout: Option<Ceiling<Duration>>,
    pub max_total_tokens: Option<Ceiling<u64>>,
    pub max_cost_usd: Option<Ceiling<f64>>,
    pub max_tool_output_chars: Option<Ceiling<usize>>,
    /// `llm.max_tokens`: the longest answer the model may give.
    pub max_tokens: Option<Ceiling<u32>>,
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
    /// `llm.max_response_bytes` (default 8 MiB): one response, as it
    /// arrives on the wire (stream framing included).
    pub max_response_bytes: u64,
    /// `llm.text_tool_calls` (default off).
    pub text_tool_calls: bool,
    /// `llm.prompt_cache` (default on): Anthropic's cache breakpoints.
    pub prompt_cache: bool,
    /// `llm.prompt_cache_ttl: 1h` (default `5m`).
    pub prompt_cache_1h: bool,
    /// `llm.prompt_cache_key` (default off): the task's cache key to any
    /// OpenAI-compatible endpoint, not only OpenAI's own.
    pub prompt_cache_key: bool,
    /// `llm.pricing`: per-model prices over the built-in table.
    pub pricing: BTreeMap<String, Price>,
    /// `llm.price`: the price of every model without a `pricing` entry.
    pub price: Option<Price>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ContextSettings {
    /// The model's context window in tokens; `None`: the agent's default
    /// (`agent::context::DEFAULT_WINDOW`, 32,000).
    pub max_tokens: Option<u32>,
    pub compaction_threshold: f64,
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
    /// Paths under the home confined programs see besides the toolchain
    /// directories (operator config only; `~` not yet expanded).
    pub sandbox_home_visible: Vec<String>,
    /// Sandboxed children may use the network (operator config only).
    pub sandbox_network: bool,
    /// The largest task file ybs reads (`safety.max_task_file_bytes`,
    /// default 1 MiB).
    pub max_task_file_bytes: u64,
    /// At most this many processes of a task's confined programs at once
    /// (`safety.max_processes`, default 1024).
    pub max_processes: u32,
    /// Roots outside the task file's repository a task's `workdir` may
    /// resolve into (operator config only; `~` not yet expanded).
    pub allowed_workdirs: Vec<String>,
    /// Sandboxed children may create named unix sockets (operator config
    /// only).
    pub sandbox_unix_sockets: bool,
    /// `all` (namespaces, Landlock, seccomp) or `landlock` (Landlock and
    /// seccomp accepted without namespaces; operator config only).
    pub sandbox_require: String,
    /// A check that asks for the network (`network: true`) gets it
    /// (operator config only; default false: such a check is an error at
    /// load).
    pub sandbox_check_network: bool,
    /// The sandbox refuses, at exec, a program a `deny` rule on
    /// `run_shell` matches, when the kernel allows (docs/sandbox.md, "The
    /// exec guard"); `false` turns it off and the policy decides alone
    /// (stricter, never looser).
    pub sandbox_exec_guard: bool,
}

impl SafetySettings {
    /// Whether a check's `network: true` is granted: the operator allows
    /// checks the network, or every sandboxed child has it.
    pub fn check_network_granted(&self) -> bool {
        self.sandbox_check_network || self.sandbox_network
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ToolsSettings {
    /// Every built-in tool, by name.
    pub builtin: BTreeMap<String, BuiltinToolSettings>,
    /// `tools.external`, by name.
    pub external: Vec<ExternalToolConfig>,
    /// `tools.search_paths`, searched after `./tools` and `~/.ybs/tools`.
    pub search_paths: Vec<PathBuf>,
    /// `tools.mcp`: MCP servers started for every task (docs/mcp.md).
    pub mcp: Vec<crate::tools::mcp::ServerSpec>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct BuiltinToolSettings {
    /// Off: the tool is not offered to the model, and a call to it is
    /// refused as an unknown tool.
    pub enabled: bool,
    /// `run_shell`'s default command timeout (30 s); `None` for tools
    /// that have no timeout.
    pub timeout: Option<Duration>,
    /// `tools.builtin.run_shell.timeout_seconds` when set: also the
    /// longest a call may ask for.
    pub max_timeout: Option<Duration>,
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
    /// so it does not enable the tool by itself (docs/security.md S5).
    pub from_repository: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct GitSettings {
    pub auto_commit: bool,
    pub commit_message_prefix: String,
    /// `YBS_GIT_AUTHOR`; `None`: git config, else `ybs <ybs@localhost>`.
    pub author: Option<GitAuthor>,
    /// Globs of paths committed even when they look like they hold a
    /// credential (operator config only).
    pub allow_secret_paths: Vec<String>,
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

    /// `Name <email>`, as git writes a signature.
    pub fn signature(&self) -> String {
        format!("{} <{}>", self.name, self.email)
    }
}

/// Everything one task runs with, after every layer (docs/cli.md): flags >
/// `YBS_*` > config files > the task's own fields > its file's
/// `defaults:` > built-in defaults.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSettings {
    pub provider: String,
    pub model: String,
    pub endpoint: Option<String>,
    /// Who chose `endpoint`; a task file or the repository's config must
    /// not receive the operator's API key for a vendor (docs/security.md S5).
    pub endpoint_origin: Origin,
    pub temperature: Option<f64>,
    /// `llm.max_output_tokens` (or the task's): default 4096.
    pub max_tokens: u32,
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
                    max_timeout: layer.timeout,
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
                prompt_cache: llm.prompt_cache.unwrap_or(true),
                prompt_cache_1h: llm.prompt_cache_1h.unwrap_or(false),
                prompt_cache_key: llm.prompt_cache_key.unwrap_or(false),
                max_response_bytes: llm
                    .max_response_bytes
                    .unwrap_or(defaults::LLM_MAX_RESPONSE_BYTES),
                pricing: llm.pricing,
                price: llm.price,
            },
            context: ContextSettings {
                max_tokens: context.max_tokens,
                compaction_threshold: context
                    .compaction_threshold
                    .unwrap_or(defaults::COMPACTION_THRESHOLD),
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
                sandbox_home_visible: safety.sandbox_home_visible.unwrap_or_default(),
                sandbox_network: safety.sandbox_network.unwrap_or(false),
                max_task_file_bytes: safety
                    .max_task_file_bytes
                    .unwrap_or(defaults::MAX_TASK_FILE_BYTES),
                max_processes: safety.max_processes.unwrap_or(defaults::MAX_PROCESSES),
                allowed_workdirs: safety.allowed_workdirs.unwrap_or_default(),
                sandbox_unix_sockets: safety.sandbox_unix_sockets.unwrap_or(false),
                sandbox_require: safety.sandbox_require.unwrap_or_else(|| "all".to_owned()),
                sandbox_check_network: safety.sandbox_check_network.unwrap_or(false),
                sandbox_exec_guard: safety.sandbox_exec_guard.unwrap_or(true),
            },
            tools: ToolsSettings {
                builtin,
                // The operator's entries first: discovery keeps the first
                // of a name and lists later ones as shadowed.
                external: tools.external.into_values().chain(tools.shadowed).collect(),
                search_paths: tools.search_paths.unwrap_or_default(),
                mcp: tools.mcp.unwrap_or_default(),
            },
            git: GitSettings {
                auto_commit: git.auto_commit.unwrap_or(true),
                commit_message_prefix: git
                    .commit_message_prefix
                    .unwrap_or_else(|| defaults::COMMIT_MESSAGE_PREFIX.to_owned()),
                author: git.author,
                allow_secret_paths: git.allow_secret_paths.unwrap_or_default(),
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

    /// The provider the config layers (flags, `YBS_PROVIDER`, files) name,
    /// over every task's own `provider:`; `None` when none does.
    pub fn provider_override(&self) -> Option<&str> {
        self.over_tasks.llm.provider.as_deref()
    }

    /// What a config file or a `YBS_*` variable replaces of the provider
    /// and the model `task` pins, said in one sentence (`None`: nothing,
    /// or only a flag of this command): the task runs on another model
    /// than its file says, which its transcript should say.
    pub fn replaced_pins(&self, task: &TaskSpec) -> Option<String> {
        let settings = self.task_settings(task);
        let mut replaced = Vec::new();
        for (what, pinned, used, from) in [
            (
                "provider",
                &task.llm.provider,
                &settings.provider,
                &self.over_tasks.provider_from,
            ),
            (
                "model",
                &task.llm.model,
                &settings.model,
                &self.over_tasks.model_from,
            ),
        ] {
            if let (Some(pinned), Some(from)) = (pinned, from)
                && pinned != used
            {
                replaced.push(format!("{what} `{pinned}` with `{used}` (from {from})"));
            }
        }
        (!replaced.is_empty()).then(|| {
            format!(
                "the config replaces the task file's {}",
                replaced.join(" and its ")
            )
        })
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
        let provider = over
            .llm
            .provider
            .clone()
            .or_else(|| llm.provider.clone())
            .unwrap_or_else(|| defaults::PROVIDER.to_owned());
        // A provider with a model of its own (`apple`: `system`) needs none named.
        let default_model = crate::llm::provider_info(&provider)
            .and_then(|info| info.default_model)
            .unwrap_or(defaults::MODEL);
        TaskSettings {
            model: over
                .llm
                .model
                .clone()
                .or_else(|| llm.model.clone())
                .unwrap_or_else(|| default_model.to_owned()),
            provider,
            endpoint: over.llm.endpoint.clone().or_else(|| llm.endpoint.clone()),
            endpoint_origin,
            temperature: over.llm.temperature.or(llm.temperature),
            max_tokens: narrower(over.llm.max_tokens, llm.max_tokens)
                .unwrap_or(defaults::MAX_OUTPUT_TOKENS),
            text_tool_calls: self.llm.text_tool_calls,
            stream: self.llm.stream,
            llm_timeout: self.llm.timeout,
            llm_idle_timeout: self.llm.idle_timeout,
            llm_total_timeout: self.llm.total_timeout,
            // Narrower wins (docs/security.md S5); a task above the operator's
            // value is refused earlier, by `check_task`.
            max_iterations: narrower(over.max_iterations, limits.max_iterations)
                .unwrap_or(defaults::MAX_ITERATIONS),
            timeout: narrower(over.timeout, limits.timeout),
            max_total_tokens: narrower(over.max_total_tokens, limits.max_total_tokens),
            max_cost_usd: narrower(over.max_cost_usd, limits.max_cost_usd),
            max_tool_output_chars: narrower(
                over.max_tool_output_chars,
                limits.max_tool_output_chars,
            )
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

    /// Built-in prices with `llm.price` and `llm.pricing` over them.
    pub fn price_table(&self) -> PriceTable {
        PriceTable::new(self.llm.pricing.clone()).with_price(self.llm.price)
    }

    /// What is wrong with running `task` under this configuration, before
    /// anything runs (exit 2): a limit wider than the operator's (docs/security.md
    /// S5), a built-in tool the config disabled, a cost limit for a model
    /// whose price is unknown.
    pub fn check_task(&self, task: &TaskSpec) -> Vec<Diagnostic> {
        let mut problems = Vec::new();
        self.check_limits(task, &mut problems);
        self.check_asks(task, &mut problems);
        let settings = self.task_settings(task);
        if let Some(max) = settings.max_cost_usd
            && self.price_table().price(&settings.model).is_none()
        {
            problems.push(
                Diagnostic::new(
                    &task.file,
                    task.limits.spans.max_cost_usd.unwrap_or(task.span),
                    format!(
                        "task `{}` has max_cost_usd {max}, but the price of model `{}` is not known, so the limit could not be enforced",
                        task.id, settings.model
                    ),
                )
                .with_hint(
                    "give the price in the operator's config: `llm.price: {input_per_mtok: 1.25, output_per_mtok: 10}` (USD per million tokens)",
                ),
            );
        }
        self.check_output_size(task, &mut problems);
        problems
    }

    /// An output schema is sent with every request (the final-answer
    /// tool's input schema): one larger than a quarter of the context
    /// window would crowd out the work.
    fn check_output_size(&self, task: &TaskSpec, problems: &mut Vec<Diagnostic>) {
        let Some(output) = &task.output else {
            return;
        };
        let window = u64::from(
            self.context
                .max_tokens
                .unwrap_or(crate::core::usage::DEFAULT_CONTEXT_WINDOW),
        );
        let tokens = crate::llm::tokens::count(&output.schema.to_string());
        if tokens > window / 4 {
            problems.push(
                Diagnostic::new(
                    &task.file,
                    task.span,
                    format!(
                        "the output schema of task `{}` is {tokens} tokens, more than a quarter of the {window}-token context window (context.max_tokens); it is sent with every request",
                        task.id
                    ),
                )
                .with_hint("shorten the schema (descriptions, examples), or raise context.max_tokens for a model with a larger window"),
            );
        }
    }

    /// A task's limits (and its checks' timeouts) above the operator's
    /// ceilings.
    fn check_limits(&self, task: &TaskSpec, problems: &mut Vec<Diagnostic>) {
        let ceilings = &self.over_tasks.ceilings;
        let limits = &task.limits;
        let spans = &limits.spans;
        macro_rules! limit {
            ($field:ident) => {
                if let (Some(value), Some(ceiling)) = (limits.$field, &ceilings.$field)
                    && value > ceiling.value
                {
                    problems.push(wider(
                        &task.file,
                        spans.$field.unwrap_or(task.span),
                        &format!(
                            "`limits.{}: {}` of task `{}`",
                            stringify!($field),
                            value.show(),
                            task.id
                        ),
                        ceiling,
                    ));
                }
            };
        }
        limit!(max_iterations);
        limit!(timeout);
        limit!(max_total_tokens);
        limit!(max_cost_usd);
        limit!(max_tool_output_chars);
        if let (Some(value), Some(ceiling)) = (task.llm.max_tokens, &ceilings.max_tokens)
            && value > ceiling.value
        {
            let what = format!("`max_output_tokens: {value}` of task `{}`", task.id);
            problems.push(wider(&task.file, task.span, &what, ceiling));
        }
        // A check may not run longer than the operator lets a whole task.
        if let Some(ceiling) = &ceilings.timeout {
            for check in &task.checks {
                if let Some(value) = check.timeout
                    && value > ceiling.value
                {
                    let what = format!(
                        "`timeout: {}` of check `{}` of task `{}`",
                        value.show(),
                        check.name,
                        task.id
                    );
                    problems.push(wider(&task.file, task.span, &what, ceiling));
                }
            }
        }
    }

    /// What a task asks for that the operator has not granted: the
    /// network for a check, a built-in tool the config disables.
    fn check_asks(&self, task: &TaskSpec, problems: &mut Vec<Diagnostic>) {
        // docs/security.md: the network is the operator's to grant; a
        // task file (repository content) only asks for it.
        if self.safety.sandbox_enabled && !self.safety.check_network_granted() {
            for check in task.checks.iter().filter(|check| check.network) {
                problems.push(
                    Diagnostic::new(
                        &task.file,
                        check.network_span.unwrap_or(task.span),
                        format!(
                            "check `{}` of task `{}` asks for the network (`network: true`), which the operator has not granted",
                            check.name, task.id
                        ),
                    )
                    .with_hint(
                        "set `safety.sandbox_check_network: true` in the operator config (~/.config/ybs/config.json or --config), or remove `network: true`",
                    ),
                );
            }
        }
        for name in task.tools.builtin.iter().flatten() {
            if self
                .tools
                .builtin
                .get(name)
                .is_some_and(|tool| !tool.enabled)
            {
                problems.push(
                    Diagnostic::new(
                        &task.file,
                        task.span,
                        format!(
                            "task `{}` asks for the built-in tool `{name}`, which the config disables (`tools.builtin.{name}.enabled: false`)",
                            task.id
                        ),
                    )
                    .with_hint(format!("remove `{name}` from the task's `tools.builtin`")),
                );
            }
        }
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
