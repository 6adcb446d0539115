//! The task model after loading: `defaults:` merged into each task, vars
//! substituted, every field checked. What the runner and agent consume.

use std::path::PathBuf;
use std::time::Duration;

use serde::Serialize;

use crate::core::span::Span;
use crate::policy::PolicySpec;

/// The built-in tools (docs/tools.md), the names `tools.builtin` accepts.
pub use crate::tools::builtin::NAMES as BUILTIN_TOOLS;

/// Provider names ybs knows (docs/providers.md), so `ybs validate` can catch a
/// misspelt provider without constructing one.
pub use crate::llm::PROVIDER_NAMES as PROVIDERS;

/// One task file: a suite of tasks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskFile {
    /// The path as given (relative paths stay relative, for messages).
    pub path: PathBuf,
    /// `name:`, or the file stem.
    pub suite: String,
    pub tasks: Vec<TaskSpec>,
}

/// One task, fully merged.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TaskSpec {
    pub id: String,
    /// The task file it came from.
    pub file: PathBuf,
    pub suite: String,
    /// Where the task starts in its file.
    pub span: Span,
    pub prompt: String,
    pub system: Option<String>,
    /// As written; relative paths are relative to the directory ybs runs in.
    pub workdir: Option<PathBuf>,
    /// Where `workdir` is written (in the task or under `defaults:`).
    pub workdir_span: Option<Span>,
    /// Task-level LLM settings (the task's own fields over `defaults:`).
    pub llm: LlmSpec,
    pub tools: ToolsSpec,
    /// Policy layers, lowest first: `defaults:` then the task's own.
    pub policy: Vec<PolicySpec>,
    pub limits: LimitsSpec,
    pub checks: Vec<CheckSpec>,
    pub fix_attempts: u32,
    pub commit: CommitSpec,
    pub expect: Expect,
    /// `context:`: what ybs adds to the system prompt from the repository.
    pub context: ContextSpec,
    /// `output:`: the JSON answer the task asks for, if any.
    pub output: Option<OutputSpec>,
}

/// `context:`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ContextSpec {
    /// `agents_md`: the `AGENTS.md` files of the workdir and its parents
    /// up to the repository root go into the system prompt (default).
    pub agents_md: bool,
    /// `checks`: the system prompt names the checks that decide the task
    /// (default), so the model can run them before it answers.
    pub checks: bool,
}

impl Default for ContextSpec {
    fn default() -> Self {
        Self {
            agents_md: true,
            checks: true,
        }
    }
}

/// `output:`: an output contract. The final answer must be a JSON value
/// (bare or in one fenced block) that `schema` accepts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OutputSpec {
    /// The JSON Schema, inline or read from `schema_file`.
    pub schema: serde_json::Value,
    /// `schema_file:` as written, relative to the task file's directory.
    pub schema_file: Option<PathBuf>,
    /// How many times an invalid answer goes back to the model; `None`:
    /// the task's `fix_attempts`.
    pub attempts: Option<u32>,
}

/// `provider`, `model`, `endpoint`, `temperature`, `max_tokens`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LlmSpec {
    pub provider: Option<String>,
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub temperature: Option<f64>,
    pub max_tokens: Option<u32>,
}

/// `tools:`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ToolsSpec {
    /// `builtin:`; `None` means all six.
    pub builtin: Option<Vec<String>>,
    /// `external:` names or paths.
    pub external: Vec<String>,
    /// The `external` entries marked `required: true`, each where it is
    /// written: one that cannot be offered makes the task an error.
    #[serde(serialize_with = "names_only")]
    pub required_external: Vec<crate::core::decode::Spanned<String>>,
    /// `script: true`: the `script` tool is offered too (docs/tools.md).
    pub script: bool,
    /// `caller:`: tools the caller runs; calling one pauses the task
    /// (docs/resume.md).
    pub caller: Vec<CallerToolSpec>,
    /// `mcp:` servers whose tools join the registry (docs/mcp.md).
    pub mcp: Vec<crate::tools::mcp::ServerSpec>,
}

/// One `tools.caller` entry.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerToolSpec {
    pub name: String,
    pub description: String,
    /// The JSON Schema of the arguments (an `object` schema); `None`:
    /// any object.
    pub parameters: Option<serde_json::Value>,
}

/// `limits:`. `None` means "not set here".
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LimitsSpec {
    pub max_iterations: Option<u32>,
    pub timeout: Option<Duration>,
    pub max_total_tokens: Option<u64>,
    pub max_cost_usd: Option<f64>,
    pub max_tool_output_chars: Option<usize>,
    /// Where each limit was written, for messages that name it.
    #[serde(skip)]
    pub spans: LimitSpans,
}

/// Where each of [`LimitsSpec`]'s values was written (`None`: not set).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LimitSpans {
    pub max_iterations: Option<Span>,
    pub timeout: Option<Span>,
    pub max_total_tokens: Option<Span>,
    pub max_cost_usd: Option<Span>,
    pub max_tool_output_chars: Option<Span>,
}

/// One check: a shell command that must exit with `expect_exit`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckSpec {
    pub name: String,
    pub run: String,
    pub timeout: Option<Duration>,
    pub expect_exit: i32,
    /// The check runs with the network (sandboxed children have none
    /// otherwise) when the operator grants it (docs/security.md).
    pub network: bool,
    /// Where `network` was written, for the message when the operator
    /// has not granted it.
    #[serde(skip)]
    pub network_span: Option<Span>,
}

/// `commit:` — `true`, `false` or `{message, branch}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommitSpec {
    pub enabled: bool,
    pub message: Option<String>,
    pub branch: Option<String>,
}

impl Default for CommitSpec {
    fn default() -> Self {
        Self {
            enabled: true,
            message: None,
            branch: None,
        }
    }
}

/// `expect:`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expect {
    #[default]
    Pass,
    Fail,
}

impl Expect {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pass => "pass",
            Self::Fail => "fail",
        }
    }
}

/// `required_external` as the names it holds (their places are for errors).
fn names_only<S: serde::Serializer>(
    names: &[crate::core::decode::Spanned<String>],
    serializer: S,
) -> Result<S::Ok, S::Error> {
    serializer.collect_seq(names.iter().map(|name| &name.value))
}
