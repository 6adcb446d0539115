//! The `script` tool (docs/tools.md): the model sends one bash script in which
//! every other enabled tool of the task is a command (`read_file --path
//! a.rs | grep fn`), with pipes, variables, loops and conditionals.
//!
//! The script runs in `bashkit`'s logic-only interpreter: text utilities
//! and shell logic, no filesystem, network or processes of its own. The
//! only way out is a tool command, and this module does not run those:
//! each one becomes an [`InnerCall`] on [`ScriptRun::calls`], which the
//! agent decides with the policy and runs exactly like a direct call,
//! then answers. The interpreter runs on its own thread with its own
//! runtime, so a busy script never blocks the agent's runtime.

mod commands;
mod run;

use std::sync::Arc;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use crate::core::ToolSpec;

use super::{Target, Tool, ToolCtx, ToolError, ToolOutput};

pub use commands::Command;
pub use run::{InnerCall, InnerReply, ScriptOutput, ScriptRun};

/// The tool's name.
pub const NAME: &str = "script";

/// Tools that are never commands inside a script: `run_shell` (the
/// interpreter is no way around the shell policy) and the tool itself.
pub const EXCLUDED: [&str; 2] = ["run_shell", NAME];

/// What one script may do before it is ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScriptLimits {
    /// Tool commands (calls decided by the policy) per script.
    pub max_tool_calls: usize,
    /// Commands of any kind (`echo`, `grep`, tool commands) per script.
    pub max_commands: usize,
    /// Iterations of one loop; all loops together get ten times this.
    pub max_loop_iterations: usize,
    /// Bytes of stdout (stderr gets a quarter).
    pub max_output_bytes: usize,
    /// Wall time, further capped by the task's remaining time.
    pub wall_time: Duration,
}

impl Default for ScriptLimits {
    fn default() -> Self {
        Self {
            max_tool_calls: 100,
            max_commands: 10_000,
            max_loop_iterations: 10_000,
            max_output_bytes: 64 * 1024,
            wall_time: Duration::from_secs(120),
        }
    }
}

/// The `script` tool for one task: its commands are the task's other
/// tools.
pub struct ScriptTool {
    spec: ToolSpec,
    commands: Arc<Vec<Command>>,
    limits: ScriptLimits,
}

impl ScriptTool {
    /// A `script` tool whose commands are `tools` (the task's enabled
    /// tools; `run_shell` and `script` are left out).
    pub fn new(tools: &[ToolSpec], limits: ScriptLimits) -> Self {
        let commands: Vec<Command> = tools
            .iter()
            .filter(|spec| !EXCLUDED.contains(&spec.name.as_str()))
            .map(Command::new)
            .collect();
        let spec = ToolSpec {
            name: NAME.to_owned(),
            description: description(&commands, &limits),
            parameters: json!({
                "type": "object",
                "properties": {
                    "commands": {"type": "string", "description": "The bash script."}
                },
                "required": ["commands"],
                "additionalProperties": false,
            }),
        };
        Self {
            spec,
            commands: Arc::new(commands),
            limits,
        }
    }

    pub fn commands(&self) -> &[Command] {
        &self.commands
    }

    pub fn limits(&self) -> ScriptLimits {
        self.limits
    }

    /// Starts the script in `arguments` on its own thread; `time_left` is
    /// the task's remaining time, which caps the wall-time limit. The
    /// caller answers every [`InnerCall`] on [`ScriptRun::calls`] and then
    /// gets the result on [`ScriptRun::done`].
    pub fn start(
        &self,
        arguments: &Value,
        time_left: Option<Duration>,
    ) -> Result<ScriptRun, ToolError> {
        let script = arguments
            .get("commands")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                ToolError::Model(
                    "`script` needs `commands`: the bash script to run, as a string".to_owned(),
                )
            })?;
        let mut limits = self.limits;
        if let Some(left) = time_left {
            limits.wall_time = limits.wall_time.min(left);
        }
        run::start(script.to_owned(), Arc::clone(&self.commands), limits)
    }
}

impl Tool for ScriptTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn target(&self, args: &Value, _ctx: &ToolCtx) -> Result<Target, ToolError> {
        match args.get("commands") {
            Some(Value::String(_)) => Ok(Target::default()),
            _ => Err(ToolError::Model(
                "`script` needs `commands`: the bash script to run, as a string".to_owned(),
            )),
        }
    }

    fn call<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        // The agent runs scripts itself (see `as_script`): each inner call
        // must be decided by the policy, which this level cannot reach.
        Box::pin(async {
            Err(ToolError::Fatal(
                "the `script` tool runs only through the agent".to_owned(),
            ))
        })
    }

    fn as_script(&self) -> Option<&ScriptTool> {
        Some(self)
    }
}

/// The tool's description: what it is, its commands with their usage
/// lines, and the limits. Kept short: it is in every request.
fn description(commands: &[Command], limits: &ScriptLimits) -> String {
    let mut text = String::from(
        "Run a bash script in which the tools below are commands: batch many tool calls in one turn. \
         Each command is decided by the policy like a direct call; a refused or failed one prints \
         why on stderr and exits non-zero (use `||`). Flags: `--key value` or `--key=value`; piped \
         stdin fills `content`. Results print as text (file lines, one path per line, \
         file:line:text), `--json` prints the JSON. Only shell logic and text tools (grep, sed, \
         awk, sort, uniq, head, tail, wc, cut, tr); no files, network or programs except through the commands.\nCommands:\n",
    );
    for command in commands {
        text.push_str(&format!("- {}: {}\n", command.usage, command.summary));
    }
    text.push_str(&format!(
        "Limits per script: {} tool commands, {} commands, {} iterations per loop, {} KiB output, {}s.\n\
         Returns {{stdout, stderr, exit_code}}.",
        limits.max_tool_calls,
        limits.max_commands,
        limits.max_loop_iterations,
        limits.max_output_bytes / 1024,
        limits.wall_time.as_secs()
    ));
    text
}

#[cfg(test)]
mod tests;
