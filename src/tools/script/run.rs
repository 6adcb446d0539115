//! One script's run: the interpreter on its own thread, each tool command
//! handed to the caller (the agent) over a channel and answered there.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bashkit::ExecutionLimits;
use bashkit::tool::Tool as _;
use bashkit_scripted_tool::{ScriptedTool, ToolArgs, ToolDef};
use futures_util::{FutureExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc, oneshot};

use super::commands::{self, Command};
use super::{NAME, ScriptLimits};
use crate::tools::ToolError;

/// A tool command the script ran: decide it, run it, then [`InnerCall::reply`].
#[derive(Debug)]
pub struct InnerCall {
    pub name: String,
    /// The tool's arguments (flags, and piped stdin where it fits).
    pub arguments: Value,
    reply: oneshot::Sender<InnerReply>,
}

impl InnerCall {
    pub fn reply(self, reply: InnerReply) {
        // The script may have ended meanwhile; nobody is left to tell.
        let _ = self.reply.send(reply);
    }
}

/// The answer to an [`InnerCall`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InnerReply {
    /// The call's result as the model would see it, redacted: `ok` false
    /// for a refusal or a failure (printed on stderr, exit status 1).
    Done { ok: bool, content: String },
    /// The task is over (a limit, `on_ask: fail`): end the script.
    End(String),
}

/// A running script.
pub struct ScriptRun {
    /// The tool commands, one at a time: the script waits for each reply.
    pub calls: mpsc::Receiver<InnerCall>,
    /// The result, once the script has ended.
    pub done: oneshot::Receiver<ScriptOutput>,
}

/// What a script printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptOutput {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
    /// Set when a limit ended the script: which one.
    pub ended_by: Option<String>,
}

impl ScriptOutput {
    /// `{stdout, stderr, exit_code}`, what the model sees.
    pub fn to_json(&self) -> Value {
        json!({
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
        })
    }
}

/// Shared by the tool commands of one run.
struct Bridge {
    calls: mpsc::Sender<InnerCall>,
    used: AtomicUsize,
    max: usize,
    ended_by: Mutex<Option<String>>,
    end: Notify,
}

/// A tool command of a script that failed: the script's stderr gets
/// `name: what it said`.
#[derive(Debug, thiserror::Error)]
#[error("{command}: {}\n", .content.trim_end())]
struct CommandFailed {
    command: String,
    content: String,
}

impl Bridge {
    fn end(&self, why: String) {
        let mut ended = self.ended_by.lock().unwrap_or_else(|e| e.into_inner());
        if ended.is_none() {
            *ended = Some(why);
        }
        self.end.notify_one();
    }

    fn ended_by(&self) -> Option<String> {
        self.ended_by
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn call(&self, command: &Command, args: ToolArgs) -> Result<String, CommandFailed> {
        // Let the run look at the output streamed so far first: a script
        // already over its output limit may end here.
        tokio::task::yield_now().await;
        if self.used.fetch_add(1, Ordering::SeqCst) >= self.max {
            let why = format!("more than {} tool commands in one script (limit)", self.max);
            self.end(why);
            // Wait to be dropped: the run ends the script here.
            return std::future::pending().await;
        }
        let ToolArgs { params, stdin, .. } = args;
        let (arguments, raw) = command.arguments(params, stdin);
        let (reply, answer) = oneshot::channel();
        let call = InnerCall {
            name: command.name.clone(),
            arguments,
            reply,
        };
        if self.calls.send(call).await.is_err() {
            self.end("the script was ended".to_owned());
            return std::future::pending().await;
        }
        match answer.await {
            Ok(InnerReply::Done { ok: true, content }) => Ok(commands::render(&content, raw)),
            Ok(InnerReply::Done { ok: false, content }) => Err(CommandFailed {
                command: command.name.clone(),
                content,
            }),
            Ok(InnerReply::End(why)) => {
                self.end(why);
                std::future::pending().await
            }
            Err(_) => {
                self.end("the script was ended".to_owned());
                std::future::pending().await
            }
        }
    }
}

/// Starts `script` on a thread of its own.
pub fn start(
    script: String,
    commands: Arc<Vec<Command>>,
    limits: ScriptLimits,
) -> Result<ScriptRun, ToolError> {
    let (calls_tx, calls) = mpsc::channel(1);
    let (done_tx, done) = oneshot::channel();
    let bridge = Arc::new(Bridge {
        calls: calls_tx,
        used: AtomicUsize::new(0),
        max: limits.max_tool_calls,
        ended_by: Mutex::new(None),
        end: Notify::new(),
    });
    let tool = build(&commands, &bridge, &limits);
    std::thread::Builder::new()
        .name("ybs-script".to_owned())
        .spawn(move || {
            let output = run(&tool, &script, &bridge, &limits);
            let _ = done_tx.send(output);
        })
        .map_err(|error| ToolError::Fatal(format!("cannot start the script's thread: {error}")))?;
    Ok(ScriptRun { calls, done })
}

/// The interpreter with one async command per tool.
fn build(commands: &[Command], bridge: &Arc<Bridge>, limits: &ScriptLimits) -> ScriptedTool {
    let loops = limits.max_loop_iterations;
    let execution = ExecutionLimits::new()
        .max_commands(limits.max_commands)
        .max_loop_iterations(loops)
        .max_total_loop_iterations(loops.saturating_mul(10))
        .max_stdout_bytes(limits.max_output_bytes)
        .max_stderr_bytes(limits.max_output_bytes / 4)
        .timeout(limits.wall_time);
    let mut builder = ScriptedTool::builder(NAME)
        .sanitize_errors(false)
        .limits(execution);
    for command in commands {
        let def = ToolDef::new(command.name.clone(), command.summary.clone())
            .with_schema(command.flags_schema.clone());
        let command = Arc::new(command.clone());
        let bridge = Arc::clone(bridge);
        builder = builder.async_tool_fn(def, move |args: ToolArgs| {
            let command = Arc::clone(&command);
            let bridge = Arc::clone(&bridge);
            // The interpreter takes the failure as the command's stderr.
            async move {
                bridge
                    .call(&command, args)
                    .await
                    .map_err(|failed| failed.to_string())
            }
        });
    }
    builder.build()
}

/// Runs the script to its end (or until a limit ends it).
fn run(tool: &ScriptedTool, script: &str, bridge: &Bridge, limits: &ScriptLimits) -> ScriptOutput {
    let failed = |why: String| ScriptOutput {
        stdout: String::new(),
        stderr: format!("ybs: {why}\n"),
        exit_code: 1,
        ended_by: None,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return failed(format!("cannot start the interpreter: {error}")),
    };
    let wall_ms = u64::try_from(limits.wall_time.as_millis()).unwrap_or(u64::MAX);
    let execution = match tool.execution(json!({"commands": script, "timeout_ms": wall_ms.max(1)}))
    {
        Ok(execution) => execution,
        Err(error) => return failed(error.to_string()),
    };
    let mut stream = execution.output_stream();
    let too_much = format!(
        "more than {} KiB of output (limit)",
        limits.max_output_bytes / 1024
    );
    let mut output = runtime.block_on(async {
        // What the script printed so far, from the stream: kept when the
        // script is ended before it finishes.
        let mut partial = ScriptOutput {
            stdout: String::new(),
            stderr: String::new(),
            exit_code: 1,
            ended_by: None,
        };
        let run = execution.execute();
        tokio::pin!(run);
        loop {
            tokio::select! {
                result = &mut run => break match result {
                    Ok(output) => from_result(&output.result, &too_much),
                    Err(error) => failed(error.to_string()),
                },
                // Ended by the tool-command limit or by the agent.
                () = bridge.end.notified() => {
                    if let Some(stream) = stream.as_mut() {
                        while let Some(Some(chunk)) = stream.next().now_or_never() {
                            partial.push(&chunk.kind, chunk.data.as_str().unwrap_or_default());
                        }
                    }
                    break partial;
                }
                chunk = next_chunk(&mut stream) => match chunk {
                    Some(chunk) => {
                        partial.push(&chunk.kind, chunk.data.as_str().unwrap_or_default());
                        if partial.stdout.len() > limits.max_output_bytes
                            || partial.stderr.len() > limits.max_output_bytes / 4
                        {
                            partial.stdout.truncate(floor(&partial.stdout, limits.max_output_bytes));
                            partial.stderr.truncate(floor(&partial.stderr, limits.max_output_bytes / 4));
                            partial.ended_by = Some(too_much.clone());
                            break partial;
                        }
                    }
                    None => stream = None,
                },
            }
        }
    });
    output.ended_by = output.ended_by.take().or_else(|| bridge.ended_by());
    if output.ended_by.is_none() {
        output.ended_by = limit_hit(&output, limits);
    }
    if let Some(why) = &output.ended_by {
        if !output.stderr.is_empty() && !output.stderr.ends_with('\n') {
            output.stderr.push('\n');
        }
        let line = if *why == too_much {
            // Cut by the interpreter, which may have gone on past the
            // cut: say only what is sure.
            format!("ybs: {why}: the output was cut there\n")
        } else if output.stderr.contains(why.as_str()) {
            "ybs: the script was ended by that limit\n".to_owned()
        } else {
            format!("ybs: the script was ended: {why}\n")
        };
        output.stderr.push_str(&line);
        if output.exit_code == 0 {
            output.exit_code = 1;
        }
    }
    output
}

/// The next chunk of streamed output; never, once the stream is gone.
async fn next_chunk(
    stream: &mut Option<bashkit::tool::ToolOutputStream>,
) -> Option<bashkit::tool::ToolOutputChunk> {
    match stream {
        Some(stream) => stream.next().await,
        None => std::future::pending().await,
    }
}

/// The largest char boundary of `text` at or below `at`.
fn floor(text: &str, at: usize) -> usize {
    (0..=at.min(text.len()))
        .rev()
        .find(|&index| text.is_char_boundary(index))
        .unwrap_or(0)
}

impl ScriptOutput {
    fn push(&mut self, kind: &str, text: &str) {
        match kind {
            "stdout" => self.stdout.push_str(text),
            _ => self.stderr.push_str(text),
        }
    }
}

fn from_result(result: &Value, too_much: &str) -> ScriptOutput {
    let truncated = |key: &str| result.get(key).and_then(Value::as_bool) == Some(true);
    let text = |key: &str| {
        result
            .get(key)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    ScriptOutput {
        stdout: text("stdout"),
        stderr: text("stderr"),
        exit_code: result
            .get("exit_code")
            .and_then(Value::as_i64)
            .and_then(|code| i32::try_from(code).ok())
            .unwrap_or(1),
        ended_by: result
            .get("error")
            .and_then(Value::as_str)
            .filter(|error| !error.is_empty())
            .map(str::to_owned)
            .or_else(|| {
                (truncated("stdout_truncated") || truncated("stderr_truncated"))
                    .then(|| too_much.to_owned())
            }),
    }
}

/// Which of the interpreter's own limits ended the script, from what it
/// printed, in words the model can act on.
fn limit_hit(output: &ScriptOutput, limits: &ScriptLimits) -> Option<String> {
    let stderr = output.stderr.to_lowercase();
    let named = [
        (
            "loop",
            format!(
                "a loop ran more than {} iterations (limit)",
                limits.max_loop_iterations
            ),
        ),
        (
            "command",
            format!("more than {} commands (limit)", limits.max_commands),
        ),
        (
            "timeout",
            format!("it ran longer than {}s (limit)", limits.wall_time.as_secs()),
        ),
        (
            "timed out",
            format!("it ran longer than {}s (limit)", limits.wall_time.as_secs()),
        ),
        (
            "output",
            format!(
                "more than {} KiB of output (limit)",
                limits.max_output_bytes / 1024
            ),
        ),
    ];
    if !stderr.contains("limit") && !stderr.contains("timed out") && !stderr.contains("timeout") {
        return None;
    }
    named
        .into_iter()
        .find(|(word, _)| stderr.contains(word))
        .map(|(_, why)| why)
}
