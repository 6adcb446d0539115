//! L2 tools: the `Tool` trait, the registry, the six built-ins, external
//! tools and subprocess hygiene.
//!
//! A tool failure the model can react to (bad arguments, missing file,
//! path outside the workdir) is `ToolError::Model`: it becomes the tool
//! result and the loop goes on. `ToolError::Fatal` means ybs itself is
//! broken and ends the task with `internal_error`.

pub mod builtin;
pub mod caller;
pub mod env;
pub mod external;
pub mod mcp;
pub mod paths;
pub mod process;
pub mod registry;
pub mod sandbox;
#[cfg(feature = "script")]
pub mod script;
#[cfg(test)]
pub(crate) mod testing;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::Value;

use crate::core::ToolSpec;

pub use env::ChildEnv;
pub use registry::Registry;

/// Everything a tool may know about where and how it runs.
#[derive(Debug, Clone)]
pub struct ToolCtx {
    /// The task's working directory, canonical.
    pub workdir: PathBuf,
    /// Canonical roots a path may resolve into (the workdir first).
    pub allowed_roots: Vec<PathBuf>,
    /// Paths never read or written (already expanded: `~` replaced).
    pub blocked_paths: Vec<String>,
    /// Files no tool may write (the run's task and policy files, GitHub
    /// control files), canonical or absolute.
    pub protected_paths: Vec<PathBuf>,
    /// The scrubbed environment for every subprocess.
    pub env: ChildEnv,
    /// Default `run_shell` timeout when the call gives none.
    pub shell_timeout: Duration,
    /// Upper bound on any `run_shell` timeout the model asks for.
    pub max_shell_timeout: Duration,
    /// Cap on captured bytes of each subprocess stream.
    pub output_cap_bytes: usize,
    /// The kernel confinement of `run_shell` and external tools
    /// (docs/security.md S1); `None`: they run unconfined.
    pub sandbox: Option<Arc<sandbox::Sandbox>>,
    /// `run_shell`'s own confinement when it differs from `sandbox`: the
    /// same with the exec guard of the policy's `deny` rules
    /// (docs/sandbox.md, "The exec guard"), which checks, external tools
    /// and MCP servers do not get. `None`: `sandbox`.
    pub shell_sandbox: Option<Arc<sandbox::Sandbox>>,
}

impl ToolCtx {
    /// The confinement of `run_shell`'s commands.
    pub fn shell_sandbox(&self) -> Option<&Arc<sandbox::Sandbox>> {
        self.shell_sandbox.as_ref().or(self.sandbox.as_ref())
    }
}

/// What a call acts on, found before it runs so policy can decide on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Target {
    /// The resolved path, relative to the workdir when inside it.
    pub path: Option<String>,
    /// The shell command for `run_shell`.
    pub command: Option<String>,
}

/// A successful call.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The result as the model sees it (usually JSON text).
    pub content: String,
    /// Files this call created, modified or deleted, relative to the workdir.
    pub changed: Vec<PathBuf>,
}

impl ToolOutput {
    /// A JSON result.
    pub fn json(value: &Value) -> Self {
        Self {
            content: value.to_string(),
            changed: Vec::new(),
        }
    }
}

/// A failed call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The model sent something that cannot be done; it sees this text.
    #[error("{0}")]
    Model(String),
    /// ybs is broken: stop the task with `internal_error`.
    #[error("internal error: {0}")]
    Fatal(String),
}

/// A tool the model can call.
pub trait Tool: Send + Sync {
    fn spec(&self) -> &ToolSpec;

    /// True if the tool may change files or run programs. Defaults to the
    /// safe assumption.
    fn is_mutating(&self) -> bool {
        true
    }

    /// A caller tool (`tools.caller:`): the caller runs it, the agent
    /// pauses for its result (docs/resume.md).
    fn is_caller(&self) -> bool {
        false
    }

    /// Resolves what the call acts on without doing it, for policy.
    /// Errors here (path outside the workdir, bad arguments) are results
    /// the model sees; the call never runs.
    fn target(&self, args: &Value, ctx: &ToolCtx) -> Result<Target, ToolError>;

    /// The `script` tool, which the agent runs itself so that each tool
    /// command inside a script is decided like a direct call.
    #[cfg(feature = "script")]
    fn as_script(&self) -> Option<&script::ScriptTool> {
        None
    }

    /// Runs the call.
    fn call<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>>;
}
