//! Admission of one tool call: resolve → decide (policy, approver,
//! resumed answer) → gate (`deny`, `ask` under `on_ask`) → run or pause.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;

use super::outcome::not_run;
use super::{Agent, Emitter, Stop};
use crate::agent::approve::Approval;
use crate::core::event::{Event, PendingCall, PendingKind, ToolDecided};
use crate::core::{Message, Reason, ToolCall};
use crate::policy::{CallView, Decision, OnAsk, Verdict};
use crate::tools::{Target, Tool, ToolError};

/// What deciding a call led to.
pub(super) enum Admission {
    Run(Arc<dyn Tool>),
    /// Refused; recorded and worded for the model.
    Refused(Message),
    /// Waits for the caller; its decision is recorded.
    Pause(PendingCall),
}

impl Agent<'_> {
    /// Decides and (if allowed) runs one call; returns the tool message,
    /// or the call when it waits for the caller.
    pub(super) async fn handle(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Admitted, Stop> {
        match self.admission(call, emitter).await? {
            Admission::Run(tool) => self
                .execute(call, tool.as_ref(), emitter)
                .await
                .map(Admitted::Done),
            Admission::Refused(refused) => Ok(Admitted::Done(refused)),
            Admission::Pause(pending) => Ok(Admitted::Pending(pending)),
        }
    }

    /// Resolves and decides one call: the tool when it may run, or the
    /// refusal, already recorded and worded for the model. Inside a
    /// `script` nothing pauses (see [`Self::admission`]).
    #[cfg(feature = "script")]
    pub(super) async fn admit(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Result<Arc<dyn Tool>, Message>, Stop> {
        Ok(match self.admission(call, emitter).await? {
            Admission::Run(tool) => Ok(tool),
            Admission::Refused(message) => Err(message),
            Admission::Pause(pending) => {
                let text = format!(
                    "`{}` waits for the caller (rule `{}`) and cannot be called from here; the call was not run",
                    call.name, pending.rule
                );
                Err(self.completed(call, false, false, Duration::ZERO, &text, emitter))
            }
        })
    }

    /// [`Self::admit`], with the third way out: a caller tool the policy
    /// allows, or an `ask` under `on_ask: pause`, waits for the caller.
    /// Neither pauses inside a `script` (refused there) or under
    /// `--dry-run` (recorded, not run).
    pub(super) async fn admission(
        &mut self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Admission, Stop> {
        let (tool, target) = match self.resolve(call, emitter)? {
            Resolved::Ready(tool, target) => (tool, target),
            Resolved::Refused(message) => return Ok(Admission::Refused(message)),
        };
        if let Some(path) = self.users_file(tool.as_ref(), &target) {
            let text = format!(
                "`{path}` holds the user's uncommitted changes from before this run; leave it alone: \
                 do not write, edit or delete it, and make your change elsewhere or report that it is needed; \
                 the call was not run"
            );
            return Ok(Admission::Refused(self.refuse(
                call,
                "deny",
                "guard:user_changes",
                &text,
                emitter,
            )));
        }
        let (decision, approval) = self.decide(call, &target, emitter).await;
        let rule = decision.rule.to_string();
        let pausable = self.parent.is_none() && !self.setup.dry_run;
        if decision.verdict == Verdict::Ask
            && approval.is_none()
            && self.setup.policy.on_ask() == OnAsk::Pause
            && pausable
        {
            return Ok(Admission::Pause(pending(call, PendingKind::Approval, rule)));
        }
        if let Some(refused) = self.gate(call, &decision, approval, emitter)? {
            return Ok(Admission::Refused(refused));
        }
        if tool.is_caller() && !self.setup.dry_run {
            if !pausable {
                let text = format!(
                    "`{}` is run by the caller of ybs and cannot be called from a script; call it directly; the call was not run",
                    call.name
                );
                return Ok(Admission::Refused(self.completed(
                    call,
                    false,
                    false,
                    Duration::ZERO,
                    &text,
                    emitter,
                )));
            }
            return Ok(Admission::Pause(pending(call, PendingKind::Caller, rule)));
        }
        Ok(Admission::Run(tool))
    }

    /// Finds the tool and what the call acts on. A call that cannot be
    /// resolved is refused with a result the model sees.
    pub(super) fn resolve(
        &self,
        call: &ToolCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<Resolved, Stop> {
        if let Some(problem) = &call.invalid_arguments {
            let text = format!("{}: {problem}", not_run(call));
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "arguments",
                &text,
                emitter,
            )));
        }
        // A tool withheld from the offer is decided like any other: the
        // policy refuses the call and the record names its rule.
        let found =
            (self.setup.tools.get(&call.name)).or_else(|| self.setup.tools.withheld(&call.name));
        let Some(tool) = found.cloned() else {
            let text = format!(
                "{}: unknown tool `{}`; the tools are {}",
                not_run(call),
                call.name,
                self.setup.tools.names().join(", ")
            );
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "unknown_tool",
                &text,
                emitter,
            )));
        };
        if !call.arguments.is_object() {
            let text = format!(
                "{}: its arguments must be a JSON object (the tool's schema)",
                not_run(call)
            );
            return Ok(Resolved::Refused(self.refuse(
                call,
                "invalid",
                "arguments",
                &text,
                emitter,
            )));
        }
        match tool.target(&call.arguments, self.setup.ctx) {
            Ok(target) => Ok(Resolved::Ready(tool, target)),
            Err(ToolError::Model(message)) => Ok(Resolved::Refused(
                self.refuse_unresolved(call, &message, emitter),
            )),
            Err(ToolError::Fatal(message)) => Err(Stop::Error {
                reason: Reason::InternalError,
                message,
            }),
        }
    }

    /// The path a file-writing call targets when it is one of the user's
    /// changed files (see [`Agent::protect_user_changes`]).
    pub(super) fn users_file<'t>(&self, tool: &dyn Tool, target: &'t Target) -> Option<&'t str> {
        if self.user_changed.is_empty() || !tool.is_mutating() || target.command.is_some() {
            return None;
        }
        let path = target.path.as_deref()?;
        let joined = self.setup.ctx.workdir.join(path);
        // The parent resolved, the name as given: a symlink named by the
        // user's path is the user's path.
        let absolute = match (joined.parent(), joined.file_name()) {
            (Some(parent), Some(name)) => parent
                .canonicalize()
                .map_or_else(|_| joined.clone(), |parent| parent.join(name)),
            _ => joined.clone(),
        };
        (self.user_changed.contains(&absolute) || self.user_changed.contains(&joined))
            .then_some(path)
    }

    /// Asks the policy (and, for `ask` under `--interactive`, the human)
    /// and records the decision (S13). A human's answer is recorded as the
    /// verdict it gave, the rule saying so.
    pub(super) async fn decide(
        &self,
        call: &ToolCall,
        target: &Target,
        emitter: &mut Emitter<'_>,
    ) -> (Decision, Option<Approval>) {
        // For run_shell the resolved path is its working directory.
        let (path, cwd) = match target.command {
            Some(_) => (None, target.path.as_deref()),
            None => (target.path.as_deref(), None),
        };
        let view = CallView {
            tool: &call.name,
            path,
            command: target.command.as_deref(),
            cwd,
        };
        let decision = self.setup.policy.decide(&view);
        // A tool command inside a script is never put to a human: `ask`
        // resolves as in a headless run.
        let approver = self.setup.approver.filter(|_| self.parent.is_none());
        // `ybs resume` answered this call: an approval stands in for a
        // human's only where the policy (read again) still asks; a denial
        // stands wherever the policy would let the call run.
        let resumed = self
            .resumed
            .get(&call.id)
            .copied()
            .filter(|_| self.parent.is_none());
        let approval = match (decision.verdict, resumed, approver) {
            (Verdict::Ask, Some(yes), _) => Some(if yes { Approval::Yes } else { Approval::No }),
            (Verdict::Allow, Some(false), _) => Some(Approval::No),
            (Verdict::Ask, None, Some(approver)) => {
                Some(approver.approve(call, &view, &decision).await)
            }
            _ => None,
        };
        let (verdict, rule) = match approval {
            None if decision.verdict == Verdict::Deny && resumed == Some(true) => (
                Verdict::Deny,
                format!(
                    "{} (approved at resume by {}, but the policy read again denies it)",
                    decision.rule, self.resumed_by
                ),
            ),
            None => (decision.verdict, decision.rule.to_string()),
            Some(approval) => (
                if approval == Approval::No {
                    Verdict::Deny
                } else {
                    Verdict::Allow
                },
                match resumed {
                    Some(yes) => format!(
                        "{} ({} at resume by {})",
                        decision.rule,
                        if yes { "approved" } else { "denied" },
                        self.resumed_by
                    ),
                    None => format!("{} ({})", decision.rule, approval.note()),
                },
            ),
        };
        emitter.emit(Event::ToolDecided(ToolDecided {
            call_id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
            verdict: verdict.as_str().to_owned(),
            rule,
            detail: decision.detail.clone(),
            resolved: Some(json!({
                "path": decision.path.as_deref().or(path),
                "working_directory": cwd,
                "command": target.command,
                "argv": decision.parsed,
            })),
            parent: self.parent.clone(),
        }));
        (decision, approval)
    }

    /// Turns a `deny` or `ask` into the result the model sees, or into a
    /// failed task under `on_ask: fail`. `None` when the call may run.
    pub(super) fn gate(
        &self,
        call: &ToolCall,
        decision: &Decision,
        approval: Option<Approval>,
        emitter: &mut Emitter<'_>,
    ) -> Result<Option<Message>, Stop> {
        let rule = decision.rule.to_string();
        match approval {
            Some(Approval::Yes | Approval::Always) => return Ok(None),
            Some(Approval::No) => {
                let text =
                    if self.resumed.contains_key(&call.id) && decision.verdict == Verdict::Allow {
                        format!(
                            "{} denied this call at resume; the policy read again would allow it \
                         (rule `{rule}`), but the denial stands; the call was not run",
                            self.resumed_by
                        )
                    } else if self.resumed.contains_key(&call.id) {
                        format!(
                            "this call needs approval (rule `{rule}`) and {} denied it; \
                         the call was not run",
                            self.resumed_by
                        )
                    } else {
                        format!(
                            "the user declined this call at the approval prompt (rule `{rule}`); \
                         the call was not run"
                        )
                    };
                return Ok(Some(self.completed(
                    call,
                    false,
                    false,
                    Duration::ZERO,
                    &text,
                    emitter,
                )));
            }
            None => {}
        }
        let why = decision
            .detail
            .as_ref()
            .map(|d| format!(": {d}"))
            .unwrap_or_default();
        let text = match (decision.verdict, self.setup.policy.on_ask()) {
            (Verdict::Allow, _) => return Ok(None),
            (Verdict::Deny, _) if self.resumed.get(&call.id) == Some(&true) => format!(
                "denied by policy (rule `{rule}`){why}; it was approved at resume by {}, but the \
                 policy read again denies it; the call was not run",
                self.resumed_by
            ),
            (Verdict::Deny, _) => {
                format!("denied by policy (rule `{rule}`){why}; the call was not run")
            }
            (Verdict::Ask, OnAsk::Deny) => format!(
                "this call needs approval (rule `{rule}`){why}, and nobody can approve it in this \
                 headless run (policy.on_ask: deny); the call was not run"
            ),
            // `pause` gets here only where nothing can pause: a tool
            // command inside a script, or `--dry-run`.
            (Verdict::Ask, OnAsk::Pause) if self.setup.dry_run => {
                "[dry-run] this call needs approval; the run would pause for it (policy.on_ask: pause)".to_owned()
            }
            (Verdict::Ask, OnAsk::Pause) => format!(
                "this call needs approval (rule `{rule}`){why}, and a tool command inside a script \
                 cannot pause for it (policy.on_ask: pause); call it directly; the call was not run"
            ),
            (Verdict::Ask, OnAsk::Fail) => {
                let text = format!(
                    "`{}` needs approval (rule `{rule}`){why} and policy.on_ask is fail",
                    call.name
                );
                self.completed(call, false, false, Duration::ZERO, &text, emitter);
                return Err(Stop::Failed {
                    reason: Reason::PolicyDenied,
                    message: text,
                });
            }
        };
        Ok(Some(self.completed(
            call,
            false,
            false,
            Duration::ZERO,
            &text,
            emitter,
        )))
    }
}

/// What handling a call gave: its result, or the call waiting for the
/// caller.
pub(super) enum Admitted {
    Done(Message),
    Pending(PendingCall),
}

/// The pending record of `call`.
pub(super) fn pending(call: &ToolCall, kind: PendingKind, rule: String) -> PendingCall {
    PendingCall {
        id: call.id.clone(),
        name: call.name.clone(),
        arguments: call.arguments.clone(),
        kind,
        rule,
    }
}

/// What resolving a call gave: the tool and its target, or a refusal
/// already recorded and worded for the model.
pub(super) enum Resolved {
    Ready(Arc<dyn Tool>, Target),
    Refused(Message),
}
