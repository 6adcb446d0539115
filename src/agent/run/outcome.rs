//! Running an admitted call, and recording the result of every call
//! (run, refused or answered) as the model sees it.

use std::time::{Duration, Instant};

use serde_json::json;

use super::{Agent, Emitter, Stop, millis, redact_counted};
use crate::core::event::{Event, ToolCompleted, ToolDecided};
use crate::core::text::truncate_middle;
use crate::core::{Message, Reason, ToolCall};
use crate::policy::{CallView, RuleRef, Verdict};
use crate::tools::{Tool, ToolError};

impl Agent<'_> {
    /// Runs an allowed call (or only records it under `--dry-run`).
    pub(super) async fn execute(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        emitter: &mut Emitter<'_>,
    ) -> Result<Message, Stop> {
        if self.setup.dry_run {
            let text = "[dry-run] allowed by policy, not executed";
            return Ok(self.completed(call, true, false, Duration::ZERO, text, emitter));
        }
        #[cfg(feature = "script")]
        if let Some(script) = tool.as_script() {
            return self.run_script(call, script, emitter).await;
        }
        self.run_tool(call, tool, emitter).await
    }

    /// Runs an allowed call of an ordinary tool.
    pub(super) async fn run_tool(
        &mut self,
        call: &ToolCall,
        tool: &dyn Tool,
        emitter: &mut Emitter<'_>,
    ) -> Result<Message, Stop> {
        let started = Instant::now();
        let run = tool.call(call.arguments.clone(), self.setup.ctx);
        let outcome = match self.budget.remaining() {
            Some(left) => match tokio::time::timeout(left, run).await {
                Ok(outcome) => outcome,
                Err(_) => return Err(self.limit_stop(Reason::Timeout)),
            },
            None => run.await,
        };
        let elapsed = started.elapsed();
        match outcome {
            Ok(output) => {
                self.changed.extend(output.changed);
                Ok(self.completed(call, true, true, elapsed, &output.content, emitter))
            }
            Err(ToolError::Model(message)) => {
                Ok(self.completed(call, false, true, elapsed, &message, emitter))
            }
            Err(ToolError::Fatal(message)) => Err(Stop::Error {
                reason: Reason::InternalError,
                message,
            }),
        }
    }

    /// Records a call whose arguments the tool refused to resolve (a path
    /// outside the roots or through a symlink out of them, a blocked or
    /// protected path, a FIFO, a missing parameter). The policy is still
    /// asked about the arguments as written, so the record names the guard
    /// that forbids them where one does, as `ybs policy explain` would,
    /// and carries the path as far as it resolves (S13); the model gets
    /// the tool's own reason.
    pub(super) fn refuse_unresolved(
        &self,
        call: &ToolCall,
        message: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        let arguments = &call.arguments;
        let text_argument = |name: &str| arguments.get(name).and_then(serde_json::Value::as_str);
        let command = text_argument("command");
        let (path, cwd) = match command {
            Some(_) => (None, text_argument("working_directory")),
            None => (text_argument("path"), None),
        };
        let view = CallView {
            tool: &call.name,
            path,
            command,
            cwd,
        };
        let decision = self.setup.policy.decide(&view);
        let rule = match (decision.verdict, &decision.rule) {
            (Verdict::Deny, RuleRef::Guard { .. }) => decision.rule.to_string(),
            _ => "guard:arguments".to_owned(),
        };
        let text = format!("{}: {message}", not_run(call));
        emitter.emit(Event::ToolDecided(ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: Verdict::Deny.as_str().to_owned(),
            rule,
            detail: Some(text.clone()),
            resolved: Some(json!({
                "path": decision.path.as_deref().or(path),
                "working_directory": cwd,
                "command": command,
                "argv": decision.parsed,
            })),
            parent: self.parent.clone(),
        }));
        self.completed(call, false, false, Duration::ZERO, &text, emitter)
    }

    /// Records a call refused before policy (bad arguments, unknown tool).
    pub(super) fn refuse(
        &self,
        call: &ToolCall,
        verdict: &str,
        rule: &str,
        text: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        emitter.emit(Event::ToolDecided(ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: verdict.to_owned(),
            rule: rule.to_owned(),
            detail: Some(text.to_owned()),
            resolved: None,
            parent: self.parent.clone(),
        }));
        self.completed(call, false, false, Duration::ZERO, text, emitter)
    }

    /// Masks secrets, truncates the output, records `tool.completed`,
    /// builds the message. Masking comes first so a cut cannot leave half
    /// a secret that no longer matches.
    pub(super) fn completed(
        &self,
        call: &ToolCall,
        ok: bool,
        ran: bool,
        elapsed: Duration,
        output: &str,
        emitter: &mut Emitter<'_>,
    ) -> Message {
        let output = redact_counted(self.setup.redactor, output, emitter);
        let (content, truncated) =
            truncate_middle(&output, self.setup.limits.max_tool_output_chars);
        emitter.emit(Event::ToolCompleted(ToolCompleted {
            call_id: call.id.clone(),
            name: call.name.clone(),
            ok,
            ran,
            duration_ms: millis(elapsed),
            truncated,
            output: content.clone(),
        }));
        Message::Tool {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content,
            is_error: !ok,
        }
    }
}

/// How every refusal of a call begins; what follows says why.
pub(super) fn not_run(call: &ToolCall) -> String {
    if call.name.trim().is_empty() {
        "the call was not run".to_owned()
    } else {
        format!("the `{}` call was not run", call.name)
    }
}
