//! Calling an external tool: one process per call (docs/tools.md).
//!
//! The parameters are checked against the schema first (defaults
//! applied); then the executable runs with no arguments, the parameters
//! as one JSON object on stdin (then closed), `YBS_TOOL_MODE=subprocess`,
//! and the hygiene of every subprocess ([`process::run`]: own process
//! group killed whole on timeout, scrubbed environment, no terminal,
//! output caps). stdout must hold one JSON envelope:
//! `{"success": true, "result": ..., "metadata": {...}}` or
//! `{"success": false, "error": "..."}`. A non-zero exit, anything else
//! on stdout, or a timeout is a failed call carrying the tail of stderr.

use std::path::PathBuf;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value, json};

use super::discover::MODE_VAR;
use super::entry::{Entry, Status};
use super::metrics::{Metrics, Outcome};
use super::schema::{ArgumentsError, ToolSchema};
use crate::core::text::truncate_middle;
use crate::core::{Redactor, ToolSpec};
use crate::tools::process::{self, ProcessOutput, ProcessSpec};
use crate::tools::{Target, Tool, ToolCtx, ToolError, ToolOutput};

/// Characters of stderr kept in a failure message.
const STDERR_TAIL_CHARS: usize = 2000;
/// Characters of non-JSON stdout quoted in a failure message.
const STDOUT_QUOTE_CHARS: usize = 300;

/// An external tool, ready to call.
pub struct ExternalTool {
    spec: ToolSpec,
    /// `None`: schema unknown, parameters are passed through unchecked.
    schema: Option<ToolSchema>,
    path: PathBuf,
    /// The metrics key: the canonical path.
    key: String,
    timeout: Duration,
    metrics: Metrics,
}

/// How one call went: the envelope (the tool's own, or one made by ybs
/// for a failure) and what the outcome was.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub outcome: Outcome,
    /// `{"success": ..., "result"|"error": ..., "metadata"?: ...}`.
    pub envelope: Value,
    pub duration: Duration,
}

impl Invocation {
    pub fn succeeded(&self) -> bool {
        self.outcome == Outcome::Success
    }

    /// What the model sees of a success: the result, a string as is,
    /// anything else as JSON.
    pub fn result_text(&self) -> String {
        match self.envelope.get("result") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
        }
    }

    /// The failure message (`error` of the envelope).
    pub fn error_text(&self) -> String {
        match self.envelope.get("error") {
            Some(Value::String(text)) => text.clone(),
            Some(other) => other.to_string(),
            None => "the tool failed without saying why".to_owned(),
        }
    }
}

impl ExternalTool {
    /// The tool for a discovered entry that can run (`ready` or
    /// `schema-unknown`); `None` for any other status.
    pub fn new(entry: &Entry, metrics: Metrics) -> Option<Self> {
        if !entry.runnable() {
            return None;
        }
        let schema = match entry.status {
            Status::Ready => entry.schema.clone(),
            _ => None,
        };
        let parameters = schema
            .as_ref()
            .map_or_else(|| json!({"type": "object"}), ToolSchema::json_schema);
        Some(Self {
            spec: ToolSpec {
                name: entry.name.clone(),
                description: entry.description(),
                parameters,
            },
            schema,
            path: entry.path.clone(),
            key: entry.canonical.to_string_lossy().into_owned(),
            timeout: entry.timeout,
            metrics,
        })
    }

    /// Returns true if and only if the schema is known (the tool may be
    /// offered to the model).
    pub fn has_schema(&self) -> bool {
        self.schema.is_some()
    }

    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Checks `args` against the schema and applies defaults.
    pub fn check(&self, args: &Value) -> Result<Map<String, Value>, ArgumentsError> {
        match &self.schema {
            Some(schema) => schema.validate(args),
            None => match args {
                Value::Object(map) => Ok(map.clone()),
                Value::Null => Ok(Map::new()),
                _ => Err(ArgumentsError::NotAnObject),
            },
        }
    }

    /// Runs the tool once with already checked parameters and records the
    /// call in the metrics.
    pub async fn invoke(&self, params: Map<String, Value>, ctx: &ToolCtx) -> Invocation {
        let mut env = ctx.env.clone();
        env.set(MODE_VAR.0, MODE_VAR.1);
        let stdin = Value::Object(params).to_string().into_bytes();
        let spec = ProcessSpec {
            program: self.path.as_os_str().to_owned(),
            args: Vec::new(),
            cwd: ctx.workdir.clone(),
            env: &env,
            stdin: Some(stdin),
            timeout: self.timeout,
            output_cap: ctx.output_cap_bytes,
            sandbox: ctx.sandbox.clone(),
        };
        let started = std::time::Instant::now();
        let (outcome, envelope) = match run_retrying_busy(spec).await {
            Ok(output) => interpret(&self.spec.name, self.timeout, &output),
            Err(error) => (
                Outcome::Failure,
                failure(
                    format!("`{}` could not be started: {error}", self.spec.name),
                    None,
                ),
            ),
        };
        let duration = started.elapsed();
        self.metrics
            .record(&self.spec.name, &self.key, outcome, duration);
        Invocation {
            outcome,
            envelope,
            duration,
        }
    }
}

impl Tool for ExternalTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn target(&self, args: &Value, _ctx: &ToolCtx) -> Result<Target, ToolError> {
        self.check(args)
            .map_err(|error| ToolError::Model(error.to_string()))?;
        Ok(Target::default())
    }

    fn call<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let params = self
                .check(&args)
                .map_err(|error| ToolError::Model(error.to_string()))?;
            let invocation = self.invoke(params, ctx).await;
            if invocation.succeeded() {
                Ok(ToolOutput {
                    content: invocation.result_text(),
                    changed: Vec::new(),
                })
            } else {
                Err(ToolError::Model(invocation.error_text()))
            }
        })
    }
}

/// [`process::run`], retried a few times when the executable is "text
/// file busy" (ETXTBSY): another thread forked while the file was still
/// open for writing, or the tool is being rewritten right now.
pub(super) async fn run_retrying_busy(spec: ProcessSpec<'_>) -> std::io::Result<ProcessOutput> {
    let mut attempts = 0;
    loop {
        match process::run(spec.clone()).await {
            Err(error) if error.raw_os_error() == Some(nix::libc::ETXTBSY) && attempts < 5 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            result => return result,
        }
    }
}

/// Turns a finished process into an outcome and an envelope.
fn interpret(name: &str, timeout: Duration, output: &ProcessOutput) -> (Outcome, Value) {
    let stderr = stderr_tail(&output.stderr);
    if output.timed_out {
        let message = format!(
            "`{name}` timed out after {}s and was killed",
            timeout.as_secs_f64()
        );
        return (Outcome::Timeout, failure(message, stderr));
    }
    if output.exit_code != Some(0) {
        let how = match (output.exit_code, output.signal) {
            (Some(code), _) => format!("exited with code {code}"),
            (None, Some(signal)) => format!("was killed by signal {signal}"),
            (None, None) => "ended abnormally".to_owned(),
        };
        // A tool may explain its own failure in an envelope and exit 1.
        if let Some(Value::String(error)) = parse_envelope(&output.stdout)
            .as_ref()
            .filter(|envelope| envelope["success"] == json!(false))
            .map(|envelope| &envelope["error"])
        {
            return (
                Outcome::Failure,
                failure(format!("`{name}` {how}: {error}"), stderr),
            );
        }
        return (Outcome::Failure, failure(format!("`{name}` {how}"), stderr));
    }
    if output.stdout_truncated {
        let message =
            format!("`{name}` printed more output than the cap allows; its output was discarded");
        return (Outcome::Failure, failure(message, stderr));
    }
    let Some(envelope) = parse_envelope(&output.stdout) else {
        let stdout = Redactor::new().redact(&output.stdout);
        let quoted = truncate_middle(stdout.trim(), STDOUT_QUOTE_CHARS).0;
        let message = if quoted.is_empty() {
            format!("`{name}` printed nothing on stdout (expected one JSON envelope)")
        } else {
            format!("`{name}` printed something that is not a JSON envelope: {quoted}")
        };
        return (Outcome::Failure, failure(message, stderr));
    };
    match envelope.get("success") {
        Some(Value::Bool(true)) => (Outcome::Success, envelope),
        Some(Value::Bool(false)) => {
            let mut envelope = envelope;
            if !envelope.get("error").is_some_and(Value::is_string) {
                let error = envelope
                    .get("error")
                    .filter(|error| !error.is_null())
                    .map_or_else(
                        || "the tool reported a failure without a message".to_owned(),
                        Value::to_string,
                    );
                envelope["error"] = json!(error);
            }
            (Outcome::Failure, envelope)
        }
        _ => (
            Outcome::Failure,
            failure(
                format!("`{name}` printed JSON without a boolean `success`"),
                stderr,
            ),
        ),
    }
}

/// One JSON object on stdout (surrounding whitespace allowed).
fn parse_envelope(stdout: &str) -> Option<Value> {
    serde_json::from_str::<Value>(stdout.trim())
        .ok()
        .filter(Value::is_object)
}

/// The last [`STDERR_TAIL_CHARS`] characters of stderr, if any.
fn stderr_tail(stderr: &str) -> Option<String> {
    // Credentials are masked before the cut, which could leave a part
    // of one that no shape matches (known values are masked downstream,
    // whole; docs/security.md S7).
    let stderr = Redactor::new().redact(stderr);
    let trimmed = stderr.trim_end();
    if trimmed.is_empty() {
        return None;
    }
    let count = trimmed.chars().count();
    Some(if count > STDERR_TAIL_CHARS {
        let tail: String = trimmed.chars().skip(count - STDERR_TAIL_CHARS).collect();
        format!(
            "[... {} of {count} characters cut ...]{tail}",
            count - STDERR_TAIL_CHARS
        )
    } else {
        trimmed.to_owned()
    })
}

/// A failure envelope made by ybs; the stderr tail goes into the error
/// text (what the model sees) and into `metadata.stderr_tail`.
fn failure(message: String, stderr: Option<String>) -> Value {
    match stderr {
        Some(tail) => json!({
            "success": false,
            "error": format!("{message}\nstderr (tail):\n{tail}"),
            "metadata": {"stderr_tail": tail},
        }),
        None => json!({"success": false, "error": message}),
    }
}

#[cfg(test)]
mod cut_tests {
    use super::*;

    /// A credential the tail would cut in two is masked before the cut:
    /// no part of it is left for the model or an output.
    #[test]
    fn the_stderr_tail_never_holds_part_of_a_credential() {
        let token = "ghp_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8X";
        for keep in [5, 20, 30] {
            let stderr = format!("{token}\n{}", "-".repeat(STDERR_TAIL_CHARS - keep - 1));
            let tail = stderr_tail(&stderr).unwrap_or_default();
            assert!(
                !tail.contains(&token[token.len() - keep..]),
                "{keep}: {tail}"
            );
        }
    }
}
