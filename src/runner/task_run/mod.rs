//! One task from start to finish: prompt, loop, checks and fix attempts,
//! `expect`, and the final event. Every stop writes its outputs.

mod paused;
mod settle;
mod start;

use self::settle::{checks_not_run, commit_off};
use self::start::{
    git_failure, not_stopped, output_event, resumed_agent, saved_work, started_event,
    system_prompt, task_git,
};

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RunContext;
use super::checks::{CheckEnv, run_checks};
use super::pause::Resumed;
use super::prepare::PreparedTask;
use super::results::TaskResult;
use super::workspace::TaskGit;
use crate::agent::{Agent, Emitter, Stop};
use crate::core::event::{Event, EventSink, PendingCall, TaskFinished, TaskResumed};
use crate::core::{Reason, Status};
use crate::git::{GitError, SavedWork};
use crate::report::OutDir;
use crate::task::{Expect, TaskSpec};
use crate::tools::mcp::McpServer;

/// Runs one prepared task, or goes on with a paused one (`ybs resume`):
/// then the conversation, budgets and git snapshot come from its state,
/// `task.resumed` replaces `task.started`, and the pending calls are
/// answered before the loop continues. A task that pauses writes its
/// state after `task.finished`.
pub async fn run_or_resume(
    run: &RunContext,
    prepared: &PreparedTask,
    out: &OutDir,
    sink: &mut dyn EventSink,
    resumed: Option<&Resumed>,
) -> TaskResult {
    let task = &prepared.task;
    let mut emitter = Emitter::new(&task.id, sink);
    let this = TaskRun::new(run, prepared, out, resumed);
    let git = task_git(run, prepared, resumed);
    let tools = super::tools::task_tools(run, prepared).await;
    let (mut agent, early) = this
        .begin(&tools, git.as_ref().ok(), resumed, &mut emitter)
        .await;
    let commit_off = commit_off(run, task);
    let saved = match this
        .preflight((&tools, &git), commit_off, &mut agent, &mut emitter)
        .await
    {
        Ok(saved) => saved,
        Err((reason, message)) => return this.finish(&mut emitter, &agent, reason, Some(message)),
    };
    let mut pending = Vec::new();
    let (reason, message, answer) = match early {
        Some(stop) => stopped(stop, &mut pending),
        None => {
            let work = (tools.mcp.as_slice(), &mut emitter, &mut pending);
            this.work_and_follow_up(&mut agent, work).await
        }
    };
    let stuck = stop_processes(prepared, &tools, &mut emitter).await;
    if !pending.is_empty() {
        let pauses = resumed.map_or(1, |resumed| resumed.state.pauses + 1);
        return this.pause(
            (&agent, &tools),
            git.as_ref().ok(),
            pauses,
            pending,
            &mut emitter,
        );
    }
    let (reason, message) = match &git {
        Ok(_) if !stuck.is_empty() && commit_off.is_none() => {
            (Reason::GitError, Some(not_stopped(&stuck)))
        }
        Ok(git) => {
            let settle = Settle {
                git,
                commit_off,
                agent: &agent,
                answer: answer.as_deref(),
                saved: saved.as_ref(),
            };
            this.settle_git(&settle, (reason, message), &mut emitter)
        }
        Err(_) => (reason, message),
    };
    super::tools::finish(&tools, run, &mut emitter);
    this.end(&mut emitter, &agent, (reason, message), answer)
}

/// Nothing of the task runs while its work is read: every MCP server
/// (and its process tree) is stopped before the commit, the salvage or
/// the pause state reads the work tree. `run_shell`, checks and
/// external tools end with their call. Returns the servers that could
/// not be stopped.
async fn stop_processes(
    prepared: &PreparedTask,
    tools: &super::tools::TaskTools,
    emitter: &mut Emitter<'_>,
) -> Vec<String> {
    let stuck = super::tools::stop_mcp(&tools.mcp, emitter).await;
    // And the task's resident sandboxes with them: no process of the task
    // is left (a final check attempt starts a new one).
    for sandbox in [&prepared.tool_ctx.sandbox, &prepared.tool_ctx.shell_sandbox]
        .into_iter()
        .flatten()
    {
        sandbox.stop_residents();
    }
    stuck
}

/// What every step of one task's run knows: the run, the task, its
/// outputs and when it started (a resumed task: as if its earlier halves
/// had run just before).
struct TaskRun<'t> {
    run: &'t RunContext,
    prepared: &'t PreparedTask,
    out: &'t OutDir,
    started: Instant,
}

/// What the git step of a task that did not pause works with.
struct Settle<'s, 'a> {
    git: &'s TaskGit,
    commit_off: Option<&'static str>,
    agent: &'s Agent<'a>,
    answer: Option<&'s str>,
    saved: Option<&'s SavedWork>,
}

impl<'t> TaskRun<'t> {
    /// The task's agent, after `task.started` and its notes, or, for a
    /// resumed task, after `task.resumed` and its pending calls answered
    /// (and the stop those answers brought, if any).
    async fn begin<'a>(
        &'a self,
        tools: &'a super::tools::TaskTools,
        git: Option<&TaskGit>,
        resumed: Option<&Resumed>,
        emitter: &mut Emitter<'_>,
    ) -> (Agent<'a>, Option<Stop>) {
        let (run, prepared) = (self.run, self.prepared);
        let tool_names = tools.registry.names();
        let system_prompt = system_prompt(run, prepared, &tool_names);
        let setup = prepared.agent_setup(run, &tools.registry, system_prompt.clone());
        let Some(resumed) = resumed else {
            emitter.emit(started_event(run, prepared, git, system_prompt, tool_names));
            let notes = prepared.notes.iter().chain(&tools.notes);
            for note in notes.chain(&prepared.agents_md.notes) {
                emitter.note(note.clone());
            }
            return (Agent::new(setup, &prepared.task.prompt, emitter), None);
        };
        // A resumed task's events go on after its `task.resumed`.
        let carried = Duration::from_millis(resumed.state.spent.elapsed_ms);
        let mut agent = resumed_agent(setup, resumed, carried);
        emitter.emit(Event::TaskResumed(TaskResumed {
            resumed_by: resumed.resumed_by.clone(),
            answers: resumed.summary.clone(),
            provider: Some(prepared.settings.provider.clone()),
            model: Some(prepared.settings.model.clone()),
        }));
        for note in &tools.notes {
            emitter.note(note.clone());
        }
        let early = agent
            .answer(&resumed.answers, &resumed.approver, emitter)
            .await;
        (agent, early)
    }

    fn new(
        run: &'t RunContext,
        prepared: &'t PreparedTask,
        out: &'t OutDir,
        resumed: Option<&Resumed>,
    ) -> Self {
        let carried = resumed.map_or(Duration::ZERO, |resumed| {
            Duration::from_millis(resumed.state.spent.elapsed_ms)
        });
        Self {
            run,
            prepared,
            out,
            started: Instant::now()
                .checked_sub(carried)
                .unwrap_or_else(Instant::now),
        }
    }

    /// Before the agent works: a tool or server the task requires could
    /// not start (an error, not a task run without it: docs/tools.md), or
    /// a task that commits has no repository. Else the user's work saved
    /// under `--allow-dirty`, if any.
    async fn preflight(
        &self,
        (tools, git): (&super::tools::TaskTools, &Result<TaskGit, GitError>),
        commit_off: Option<&'static str>,
        agent: &mut Agent<'_>,
        emitter: &mut Emitter<'_>,
    ) -> Result<Option<SavedWork>, (Reason, String)> {
        if let Some(missing) = tools.missing_required() {
            let message = format!("{missing} (the task marks it `required: true`)");
            super::tools::stop_mcp(&tools.mcp, emitter).await;
            return Err((Reason::ToolUnavailable, message));
        }
        let saved = saved_work(self.run, self.prepared, git, agent, emitter);
        if commit_off.is_none()
            && let Some(message) = git_failure(self.run, git, emitter)
        {
            return Err((Reason::GitError, message));
        }
        Ok(saved)
    }

    /// The end of a task that did not pause: the dry-run note in its
    /// message, `task.output` with its answer, `task.finished`.
    fn end(
        &self,
        emitter: &mut Emitter<'_>,
        agent: &Agent<'_>,
        (reason, message): (Reason, Option<String>),
        answer: Option<String>,
    ) -> TaskResult {
        let task = &self.prepared.task;
        let message = if self.run.dry_run {
            Some(dry_run_message(task, message))
        } else {
            message
        };
        if let Some(text) = answer {
            emitter.emit(output_event(task, text, reason));
        }
        self.finish(emitter, agent, reason, message)
    }

    /// [`finish`] for this task.
    fn finish(
        &self,
        emitter: &mut Emitter<'_>,
        agent: &Agent<'_>,
        reason: Reason,
        message: Option<String>,
    ) -> TaskResult {
        let task = &self.prepared.task;
        finish(
            emitter,
            self.out,
            task,
            agent,
            self.started,
            reason,
            message,
        )
    }
}

/// The outcome of a stop; a pause hands over its calls.
fn stopped(stop: Stop, pending: &mut Vec<PendingCall>) -> (Reason, Option<String>, Option<String>) {
    match stop {
        Stop::Answered { content } => (Reason::Completed, None, Some(content)),
        Stop::Limit { reason, message }
        | Stop::Failed { reason, message }
        | Stop::Error { reason, message } => (reason, Some(message), None),
        Stop::Paused { pending: calls } => {
            *pending = calls;
            (Reason::AwaitingInput, None, None)
        }
    }
}

/// `--dry-run` says so in the task's message, and so in every output.
fn dry_run_message(task: &TaskSpec, message: Option<String>) -> String {
    let checks = match task.checks.len() {
        0 => String::new(),
        1 => "the check did not run; ".to_owned(),
        n => format!("the {n} checks did not run; "),
    };
    let text = format!(
        "dry run: tool calls were decided and recorded, not executed; {checks}nothing was committed"
    );
    match message {
        Some(message) => format!("{text}; {message}"),
        None => text,
    }
}

/// How a task's work ended: the reason, a message, and the model's final
/// answer when it gave one.
type Ended = (Reason, Option<String>, Option<String>);

/// What the agent's work goes on with: the task's MCP servers, its
/// emitter, and where a pause hands over its calls.
type Work<'w, 'e> = (
    &'w [Arc<McpServer>],
    &'w mut Emitter<'e>,
    &'w mut Vec<PendingCall>,
);

impl TaskRun<'_> {
    /// [`Self::work_and_check`], then, under `--interactive`, as long as the user
    /// continues the conversation: their message, the agent, the checks again.
    /// A limit or an error ends the task without asking.
    async fn work_and_follow_up(
        &self,
        agent: &mut Agent<'_>,
        (mcp, emitter, pending): Work<'_, '_>,
    ) -> Ended {
        loop {
            let work = (mcp, &mut *emitter, &mut *pending);
            let (reason, message, answer) = self.work_and_check(agent, work).await;
            let Some(human) = self.run.approver.as_deref() else {
                return (reason, message, answer);
            };
            let outcome = match (reason, &answer, &message) {
                (Reason::Completed, Some(answer), _) => answer.clone(),
                (Reason::ChecksFailed, _, message) => format!(
                    "the checks failed: {}",
                    message.as_deref().unwrap_or("see the transcript")
                ),
                _ => return (reason, message, answer),
            };
            match human.follow_up(&outcome).await {
                Some(text) => agent.push_user(&text, emitter),
                None => return (reason, message, answer),
            }
        }
    }

    /// Runs the agent until it answers, then the checks; feeds failing checks
    /// back while `fix_attempts` last. Returns the reason, a message, and the
    /// model's final answer when it gave one.
    async fn work_and_check(
        &self,
        agent: &mut Agent<'_>,
        (mcp, emitter, pending): Work<'_, '_>,
    ) -> Ended {
        let (run, prepared) = (self.run, self.prepared);
        let task = &prepared.task;
        let mut attempt = 0;
        let mut output_attempt = 0;
        loop {
            let stop = agent.run(emitter).await;
            // An output contract is checked before the checks run: a broken
            // answer goes back like a failing check (`output.attempts`, else
            // `fix_attempts`), and ends the task when none are left.
            if let (Stop::Answered { content }, Some(spec)) = (&stop, &task.output)
                && let Err(messages) = super::answer::check(spec, content)
            {
                let allowed = super::answer::attempts(task);
                if output_attempt < allowed {
                    output_attempt += 1;
                    emitter.note(format!(
                        "the answer does not match the output schema; attempt {output_attempt} of {allowed}: {}",
                        messages.join("; ")
                    ));
                    agent.push_user(&super::answer::feedback(spec, content, &messages), emitter);
                    continue;
                }
                return (
                    Reason::OutputInvalid,
                    Some(format!(
                        "the answer does not match the output schema: {}",
                        messages.join("; ")
                    )),
                    Some(content.clone()),
                );
            }
            match stop {
                Stop::Answered { content } if task.checks.is_empty() => {
                    return (Reason::Completed, None, Some(content));
                }
                // `--dry-run` runs no command: the checks are not run either.
                Stop::Answered { content } if run.dry_run => {
                    emitter.note(checks_not_run(task));
                    return (Reason::Completed, None, Some(content));
                }
                Stop::Answered { content } => {
                    // Any check attempt may be the one whose result decides
                    // the commit: the task's MCP servers are stopped first,
                    // so nothing of the task changes the tree while the
                    // checks judge it. A fix attempt's first call of a
                    // server's tool starts it again. A server that cannot be
                    // stopped keeps the task from committing (after the loop).
                    super::tools::stop_mcp(mcp, emitter).await;
                    let setting = CheckEnv {
                        workdir: &prepared.tool_ctx.workdir,
                        env: &prepared.tool_ctx.env,
                        sandbox: prepared.tool_ctx.sandbox.as_ref(),
                        network_allowed: prepared.check_network,
                        redactor: &run.redactor,
                    };
                    let outcome =
                        run_checks(&task.checks, &setting, attempt, agent.time_left(), emitter)
                            .await;
                    if outcome.out_of_time {
                        // `limits.timeout` bounds the checks too.
                        return stopped(agent.timeout_stop(), pending);
                    }
                    if outcome.passed {
                        return (Reason::Completed, None, Some(content));
                    }
                    if attempt < task.fix_attempts {
                        attempt += 1;
                        emitter.note(format!(
                            "checks failed; fix attempt {attempt} of {}",
                            task.fix_attempts
                        ));
                        let feedback = format!(
                            "The checks failed. Fix the problem, then answer again.\n\n{}",
                            outcome.failures.join("\n\n")
                        );
                        agent.push_user(&feedback, emitter);
                        continue;
                    }
                    let summary = outcome
                        .failures
                        .first()
                        .map(|f| f.lines().next().unwrap_or_default().to_owned());
                    // The answer stays the task's output, failed or not.
                    return (Reason::ChecksFailed, summary, Some(content));
                }
                stop @ (Stop::Limit { .. }
                | Stop::Failed { .. }
                | Stop::Error { .. }
                | Stop::Paused { .. }) => return stopped(stop, pending),
            }
        }
    }
}

/// Applies `expect`, checks the task's output files, and emits
/// `task.finished`. Output tampering is noted and fails a task that would
/// otherwise pass (reason `output_tampered`), `expect: fail` or not.
fn finish(
    emitter: &mut Emitter<'_>,
    out: &OutDir,
    task: &TaskSpec,
    agent: &Agent<'_>,
    started: Instant,
    reason: Reason,
    message: Option<String>,
) -> TaskResult {
    let (status, reason, message) = apply_expect(task.expect, reason, message);
    let tampered = out.check(Some(&task.id));
    for finding in &tampered {
        emitter.note(format!("output tampering: {finding}"));
    }
    let (status, reason, message) = match tampered.first() {
        Some(first) if status == Status::Passed => (
            Status::Failed,
            Reason::OutputTampered,
            Some(format!("output tampering: {first}")),
        ),
        _ => (status, reason, message),
    };
    emitter.emit(Event::TaskFinished(TaskFinished {
        status,
        reason,
        message: message.clone(),
        expect: task.expect.as_str().to_owned(),
        iterations: agent.iterations(),
        usage: agent.usage(),
        cost: agent.cost(),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    }));
    TaskResult {
        id: task.id.clone(),
        status,
        reason,
        message,
    }
}

/// `expect: fail` turns a failed task into a pass and a pass into
/// `expectation_not_met`; errors stay errors.
fn apply_expect(
    expect: Expect,
    reason: Reason,
    message: Option<String>,
) -> (Status, Reason, Option<String>) {
    let natural = reason.status();
    match (expect, natural) {
        (Expect::Fail, Status::Failed) => {
            let note = message.map_or_else(
                || format!("failed as expected ({reason})"),
                |m| format!("failed as expected ({reason}): {m}"),
            );
            (Status::Passed, reason, Some(note))
        }
        (Expect::Fail, Status::Passed) => (
            Status::Failed,
            Reason::ExpectationNotMet,
            Some("the task was expected to fail (`expect: fail`) but it passed".to_owned()),
        ),
        _ => (natural, reason, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_fail_inverts_failures_only() {
        assert_eq!(
            apply_expect(Expect::Fail, Reason::PolicyDenied, None).0,
            Status::Passed
        );
        assert_eq!(
            apply_expect(Expect::Fail, Reason::Completed, None).1,
            Reason::ExpectationNotMet
        );
        assert_eq!(
            apply_expect(Expect::Fail, Reason::ProviderError, None).0,
            Status::Error
        );
        assert_eq!(
            apply_expect(Expect::Pass, Reason::ChecksFailed, None).0,
            Status::Failed
        );
    }
}
