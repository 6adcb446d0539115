//! A task that pauses: `task.paused`, then its signed state, and the
//! message that says what each pending call would do.

use super::super::pause;
use super::super::results::TaskResult;
use super::super::state::{CarriedFile, Key};
use super::super::workspace::TaskGit;
use super::TaskRun;
use crate::agent::{Agent, Emitter};
use crate::core::Reason;
use crate::core::event::{Event, PendingCall, TaskPaused};
use crate::git::Snapshot;

/// What a paused task's state is made of, besides the agent and its calls.
struct StateInputs {
    key: Key,
    carried: Option<(Snapshot, Vec<CarriedFile>)>,
    named: (pause::StateFile, String),
}

impl TaskRun<'_> {
    /// The task paused: `task.paused`, `task.finished` with status `paused`,
    /// then the signed state. Nothing is committed or salvaged: the changes
    /// stay in the work tree and travel in the state.
    pub(super) fn pause(
        &self,
        (agent, tools): (&Agent<'_>, &super::super::tools::TaskTools),
        git: Option<&TaskGit>,
        pauses: u32,
        pending: Vec<PendingCall>,
        emitter: &mut Emitter<'_>,
    ) -> TaskResult {
        let inputs = match self.state_inputs(git) {
            Ok(inputs) => inputs,
            Err((reason, message)) => {
                super::super::tools::finish(tools, self.run, emitter);
                return self.finish(emitter, agent, reason, Some(message));
            }
        };
        emitter.emit(Event::TaskPaused(TaskPaused {
            pending: pending.clone(),
        }));
        super::super::tools::finish(tools, self.run, emitter);
        let message = paused_message(&pending, &self.run.redactor);
        let elapsed = self.started.elapsed();
        let mut result = self.finish(emitter, agent, Reason::AwaitingInput, Some(message));
        let paused = pause::Paused {
            agent,
            pending,
            carried: inputs.carried,
            elapsed,
            pauses,
        };
        let (run, prepared, out) = (self.run, self.prepared, self.out);
        let written = pause::write_state(run, prepared, out, &inputs.key, inputs.named, paused);
        if let Err(error) = written {
            result.status = crate::core::Status::Error;
            result.reason = Reason::InternalError;
            result.message = Some(format!(
                "the task paused but its state was not written: {error}"
            ));
        }
        result
    }

    /// The key, the work tree's changes and the names of a paused task's
    /// state, each checked before the task looks paused: without a key
    /// the state could not be trusted, and a task `ybs resume` could not
    /// find again ends as an error saying why.
    fn state_inputs(&self, git: Option<&TaskGit>) -> Result<StateInputs, (Reason, String)> {
        let run = self.run;
        let env = |name: &str| run.environ.var(name);
        let key = super::super::state::signing_key(&run.run_id, &env, run.resume_key.as_deref())
            .map_err(|error| {
                let hint = error
                    .hint
                    .map(|hint| format!(" ({hint})"))
                    .unwrap_or_default();
                let message = error.message;
                let text = format!("the task paused but cannot sign its state: {message}{hint}");
                (Reason::InternalError, text)
            })?;
        let carried = git
            .and_then(TaskGit::parts)
            .map(|(workspace, snapshot)| {
                super::super::state::capture(workspace, snapshot)
                    .map(|files| (snapshot.clone(), files))
            })
            .transpose()
            .map_err(|error| {
                let text =
                    format!("the task paused but its work tree changes cannot be carried: {error}");
                (Reason::GitError, text)
            })?;
        let named = pause::name_for_state(run, self.prepared, self.out)
            .map_err(|message| (Reason::InternalError, message.to_string()))?;
        Ok(StateInputs {
            key,
            carried,
            named,
        })
    }
}

/// `2 pending calls: call_1 deploy_preview {"service":"web"} (caller),
/// call_2 run_shell `npm publish` (approval)`: what each call would do,
/// masked, on one line and cut to 300 characters, so that an approval
/// is never given blind from the summary.
fn paused_message(pending: &[PendingCall], redactor: &crate::core::Redactor) -> String {
    let calls: Vec<String> = pending
        .iter()
        .map(|call| {
            format!(
                "{} {} {} ({})",
                call.id,
                call.name,
                shown_arguments(call, redactor),
                call.kind.as_str()
            )
        })
        .collect();
    format!(
        "{} pending call{}: {}",
        pending.len(),
        if pending.len() == 1 { "" } else { "s" },
        calls.join(", ")
    )
}

/// A pending call's arguments as the approvals view shows them: a shell
/// command as written, in backticks; anything else as compact JSON.
pub(super) fn shown_arguments(call: &PendingCall, redactor: &crate::core::Redactor) -> String {
    let mut arguments = call.arguments.clone();
    redactor.redact_value(&mut arguments);
    let text = match arguments.get("command").and_then(serde_json::Value::as_str) {
        Some(command) if call.name == "run_shell" => {
            format!("`{}`", command.replace('\n', "\\n"))
        }
        _ => arguments.to_string(),
    };
    let text = crate::core::text::truncate_middle(&text, 300).0;
    redactor.redact(&text)
}
