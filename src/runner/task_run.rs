//! One task from start to finish: prompt, loop, checks and fix attempts,
//! `expect`, and the final event. Every stop writes its outputs.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::RunContext;
use super::checks::{CheckEnv, run_checks};
use super::pause::{self, Resumed};
use super::prepare::PreparedTask;
use super::results::TaskResult;
use super::state::{CarriedFile, Key};
use super::workspace::{CommitInfo, Finish, TaskGit};
use crate::agent::{Agent, AgentSetup, Emitter, Stop, prompt};
use crate::config::GitAuthor;
use crate::core::event::{
    Event, EventSink, Git, GitOutcome, HINT, PendingCall, TaskFinished, TaskOutput, TaskPaused,
    TaskResumed, TaskStarted,
};
use crate::core::{Reason, Status};
use crate::git::{GitError, SavedWork, Snapshot, TaskWorktree};
use crate::report::OutDir;
use crate::task::{Expect, TaskSpec};
use crate::tools::mcp::McpServer;

impl PreparedTask {
    /// The agent's setup for this task: the one place an [`AgentSetup`] is
    /// built (tasks and chat alike).
    pub fn agent_setup<'a>(
        &'a self,
        run: &'a RunContext,
        tools: &'a crate::tools::Registry,
        system_prompt: String,
    ) -> AgentSetup<'a> {
        AgentSetup {
            provider: self.provider.as_ref(),
            tools,
            ctx: &self.tool_ctx,
            policy: &self.policy,
            pricing: &run.pricing,
            model: self.settings.model.clone(),
            system_prompt,
            temperature: self.settings.temperature,
            max_tokens: Some(self.settings.max_tokens),
            limits: self.limits.clone(),
            context: self.context,
            retry: run.retry,
            dry_run: run.dry_run,
            redactor: &run.redactor,
            approver: run.approver.as_deref(),
            output_schema: self.task.output.as_ref().map(|output| &output.schema),
        }
    }
}

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
    if let Some(sandbox) = &prepared.tool_ctx.sandbox {
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

/// The task's git side: opened now, or from the snapshot a paused task
/// carried; ybs's outputs are never the task's changes.
fn task_git(
    run: &RunContext,
    prepared: &PreparedTask,
    resumed: Option<&Resumed>,
) -> Result<TaskGit, GitError> {
    let outputs: Vec<_> = run.outputs.iter().map(|path| run.cwd.join(path)).collect();
    // What the set-up read, when nothing can have changed it since.
    let kept = prepared
        .start_git
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .take();
    match resumed.and_then(|resumed| resumed.snapshot.clone()) {
        Some(snapshot) => TaskGit::resumed(&prepared.tool_ctx.workdir, &outputs, snapshot),
        None => kept.map_or_else(|| TaskGit::open(&prepared.tool_ctx.workdir, &outputs), Ok),
    }
}

/// `--allow-dirty`: the user's work was saved before the run; the file
/// tools leave those files alone (in a worktree they are not there).
fn saved_work(
    run: &RunContext,
    prepared: &PreparedTask,
    git: &Result<TaskGit, GitError>,
    agent: &mut Agent<'_>,
    emitter: &mut Emitter<'_>,
) -> Option<SavedWork> {
    let Ok(git) = git else {
        return None;
    };
    let saved = if run.allow_dirty {
        git.saved(&run.run_id)?
    } else {
        return None;
    };
    emitter.note(saved.note());
    if prepared.worktree.is_none() {
        agent.protect_user_changes(git.paths_of(&saved));
    }
    Some(saved)
}

/// `task.output`: the final answer, with its JSON value when the task has
/// an output contract and the answer meets it.
fn output_event(task: &TaskSpec, text: String, reason: Reason) -> Event {
    let json = super::answer::valid_value(task, &text, reason);
    Event::TaskOutput(TaskOutput {
        content: text,
        json,
    })
}

/// The task's system prompt, naming its tools, how to answer and the
/// checks that decide it (masked; not with `context: {checks: false}`).
fn system_prompt(run: &RunContext, prepared: &PreparedTask, tool_names: &[String]) -> String {
    let task = &prepared.task;
    let checks: Vec<(String, String)> = task
        .checks
        .iter()
        .filter(|_| task.context.checks)
        .map(|check| (check.name.clone(), run.redactor.redact(&check.run)))
        .collect();
    prompt::system_prompt(
        &prepared.tool_ctx.workdir,
        tool_names,
        &prepared.policy.summary(),
        task.system.as_deref(),
        prepared.agents_md.text.as_deref(),
        prompt::Contract {
            output: task.output.is_some(),
            checks: &checks,
        },
    )
}

/// `task.started`: what the task is, where and how it runs.
fn started_event(
    run: &RunContext,
    prepared: &PreparedTask,
    git: Option<&TaskGit>,
    system_prompt: String,
    tools: Vec<String>,
) -> Event {
    let task = &prepared.task;
    Event::TaskStarted(TaskStarted {
        file: task.file.display().to_string(),
        suite: task.suite.clone(),
        run_id: run.run_id.clone(),
        ybs_version: env!("CARGO_PKG_VERSION").to_owned(),
        provider: prepared.settings.provider.clone(),
        model: prepared.settings.model.clone(),
        temperature: prepared.settings.temperature,
        seed: None,
        workdir: prepared.tool_ctx.workdir.display().to_string(),
        policy_hash: prepared.policy_hash.clone(),
        base_commit: git.and_then(TaskGit::base_commit),
        system_prompt,
        tools,
        dry_run: run.dry_run,
        sandbox: Some(Box::new(prepared.sandbox.clone())),
        context_files: prepared.agents_md.files.clone(),
        shard: run.shard.map(|shard| {
            crate::core::shard::ShardRecord::of(
                shard,
                run.shard_source.as_ref(),
                run.shard_split.as_deref(),
            )
        }),
    })
}

/// The agent of a resumed task: its conversation, what it spent and its
/// guards as the state carries them.
fn resumed_agent<'a>(setup: AgentSetup<'a>, resumed: &Resumed, carried: Duration) -> Agent<'a> {
    let state = &resumed.state;
    let mut agent = Agent::resume(setup, state.messages.clone());
    let spent = state.spent;
    agent.carry(spent.iterations, spent.usage, spent.cost, carried);
    agent.carry_guards(state.loop_guard.clone(), state.wrap_up_warned);
    agent.changed = state.changed.iter().map(PathBuf::from).collect();
    agent
}

/// Before a task that commits works: the repository must open (else the
/// message the task ends with). Changes found now were made during
/// the run (the preflight found the tree clean, or `--allow-dirty`): left
/// by an earlier task that did not commit, or by another process. Like
/// the user's changes under `--allow-dirty` they stay where they are and
/// out of this task's commit.
fn git_failure(
    run: &RunContext,
    git: &Result<TaskGit, GitError>,
    emitter: &mut Emitter<'_>,
) -> Option<String> {
    match git {
        Err(error) => return Some(format!("git: {error}")),
        Ok(git) if !run.allow_dirty => {
            if let Some(paths) = git.dirty() {
                emitter.note(format!(
                    "the work tree has uncommitted changes made since the run started (by an earlier task or another process): {paths}; they stay out of this task's commit"
                ));
            }
        }
        Ok(_) => {}
    }
    None
}

/// Why nothing is committed when MCP servers could not be stopped.
fn not_stopped(stuck: &[String]) -> String {
    format!(
        "git: nothing committed: MCP server {} could not be stopped, so the work tree could still change",
        stuck
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

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
    fn pause(
        &self,
        (agent, tools): (&Agent<'_>, &super::tools::TaskTools),
        git: Option<&TaskGit>,
        pauses: u32,
        pending: Vec<PendingCall>,
        emitter: &mut Emitter<'_>,
    ) -> TaskResult {
        let inputs = match self.state_inputs(git) {
            Ok(inputs) => inputs,
            Err((reason, message)) => {
                super::tools::finish(tools, self.run, emitter);
                return self.finish(emitter, agent, reason, Some(message));
            }
        };
        emitter.emit(Event::TaskPaused(TaskPaused {
            pending: pending.clone(),
        }));
        super::tools::finish(tools, self.run, emitter);
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
        let key = super::state::signing_key(&run.run_id, &env, run.resume_key.as_deref()).map_err(
            |error| {
                let hint = error
                    .hint
                    .map(|hint| format!(" ({hint})"))
                    .unwrap_or_default();
                let message = error.message;
                let text = format!("the task paused but cannot sign its state: {message}{hint}");
                (Reason::InternalError, text)
            },
        )?;
        let carried = git
            .and_then(TaskGit::parts)
            .map(|(workspace, snapshot)| {
                super::state::capture(workspace, snapshot).map(|files| (snapshot.clone(), files))
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

/// The note of a `--dry-run` task with checks: they are not run.
fn checks_not_run(task: &TaskSpec) -> String {
    format!(
        "dry run: {} not run: {}",
        if task.checks.len() == 1 {
            "check"
        } else {
            "checks"
        },
        task.checks
            .iter()
            .map(|check| check.run.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    )
}

/// Why commits are off for `task`, if they are: no git writes then.
fn commit_off(run: &RunContext, task: &TaskSpec) -> Option<&'static str> {
    if run.dry_run {
        Some("--dry-run")
    } else if run.no_commit {
        Some("--no-commit")
    } else if !task.commit.enabled {
        Some("commit: false")
    } else if !run.config.git.auto_commit {
        Some("git.auto_commit: false")
    } else {
        None
    }
}

impl TaskRun<'_> {
    /// Commits, salvages or reports the changes left in place, and records
    /// it. A git failure after passing checks makes the task an error.
    fn settle_git(
        &self,
        settle: &Settle<'_, '_>,
        (reason, message): (Reason, Option<String>),
        emitter: &mut Emitter<'_>,
    ) -> (Reason, Option<String>) {
        let task = &self.prepared.task;
        let saved_note = settle
            .saved
            .map(|saved| format!("; {}", saved.note()))
            .unwrap_or_default();
        let action = match (settle.commit_off, reason, task.expect) {
            (Some(why), _, _) => Finish::Disabled(why),
            (None, Reason::Completed, Expect::Pass) => Finish::Commit,
            (None, reason, _) if reason.is_limit() => Finish::Salvage(reason),
            _ => Finish::LeaveInPlace,
        };
        let config = &self.run.config.git;
        let author = config.author.as_ref().map(GitAuthor::signature);
        let changed: Vec<_> = settle.agent.changed.iter().cloned().collect();
        let summary =
            super::subject::commit_message(task.commit.message.as_deref(), settle.answer, &changed);
        let info = self.commit_info(&summary, author.as_deref());
        let (text, ended) = match settle.git.finish(action, &changed, &info) {
            Ok(mut outcome) => {
                // A `--scratch` copy is gone when the run ends: name it
                // by what it was, not by a path that no longer exists.
                if self.run.scratch && !settle.git.in_repository() {
                    outcome.note = "the --scratch copy is no git repository: nothing committed \
                                    (the changes went with the copy; the transcript says what they were)"
                        .to_owned();
                }
                if let Some(sha) = outcome.commit.as_deref()
                    && let Err(error) =
                        settle
                            .git
                            .write_commit_patch(sha, self.out, &task.id, &self.run.redactor)
                {
                    outcome.note = format!("{}; commit.patch not written: {error}", outcome.note);
                }
                self.worktree_outcome(&mut outcome, settle.commit_off, reason, emitter);
                outcome.note.push_str(&saved_note);
                emitter.emit(Event::Git(Git { outcome }));
                return (reason, message);
            }
            Err(error @ GitError::SecretInCommit { .. }) => {
                let text = format!("{error}; they are left in {}", self.left_in());
                (text.clone(), (Reason::SecretInCommit, Some(text)))
            }
            Err(error) => {
                let text = format!(
                    "git: {error}; the task's changes are left in {}",
                    self.left_in()
                );
                match action {
                    Finish::Commit => (text.clone(), (Reason::GitError, Some(text))),
                    _ => (text, (reason, message)),
                }
            }
        };
        emitter.emit(Event::Git(Git {
            outcome: GitOutcome {
                note: format!("{text}{saved_note}"),
                ..GitOutcome::default()
            },
        }));
        ended
    }

    /// What the commit says and where it goes.
    fn commit_info<'i>(&'i self, message: &'i str, author: Option<&'i str>) -> CommitInfo<'i> {
        let (run, prepared) = (self.run, self.prepared);
        let task = &prepared.task;
        CommitInfo {
            task_id: &task.id,
            run_id: &run.run_id,
            model: &prepared.settings.model,
            message,
            prefix: &run.config.git.commit_message_prefix,
            author,
            // With `--jobs` the commit stays on the task's own branch: moving
            // `commit.branch` from a worktree could move a branch checked out
            // elsewhere (the user's) under its work tree.
            branch: if prepared.worktree.is_some() {
                None
            } else {
                task.commit.branch.as_deref()
            },
            redactor: &run.redactor,
            allow_secret_paths: &run.config.git.allow_secret_paths,
        }
    }

    /// Where the task's uncommitted changes are.
    fn left_in(&self) -> String {
        self.prepared.worktree.as_ref().map_or_else(
            || "the work tree".to_owned(),
            |worktree| format!("worktree {}", worktree.root().display()),
        )
    }

    /// `--jobs`: what became of the task's worktree, in the git note (a
    /// task that does not commit hands its changes to the reader).
    fn worktree_outcome(
        &self,
        outcome: &mut GitOutcome,
        commit_off: Option<&'static str>,
        reason: Reason,
        emitter: &mut Emitter<'_>,
    ) {
        let task = &self.prepared.task;
        let Some(worktree) = &self.prepared.worktree else {
            return;
        };
        if commit_off.is_some() {
            let status = apply_expect(task.expect, reason, None).0;
            let redactor = &self.run.redactor;
            let (note, kept) = super::parallel::settle_reader(
                worktree, outcome, self.out, &task.id, status, redactor,
            );
            outcome.note = note;
            if let Some(kept) = kept {
                emitter.note(format!("{HINT}{kept}"));
            }
            return;
        }
        outcome.note = worktree_note(worktree, outcome);
        if let Some(branch) = &task.commit.branch {
            outcome.note = format!(
                "{}; commit.branch `{branch}` is not used with --jobs: the task's branch is {}",
                outcome.note, worktree.branch
            );
        }
    }
}

/// `--jobs`: a committed task's worktree is removed (its branch stays);
/// one that committed nothing and holds no change goes with its branch,
/// so a batch of no-op tasks leaves no litter; any other keeps both, and
/// the note says where.
fn worktree_note(worktree: &TaskWorktree, outcome: &GitOutcome) -> String {
    let note = &outcome.note;
    if outcome.commit.is_some() {
        return match worktree.remove() {
            Ok(()) => format!("{note}; worktree removed, branch {} kept", worktree.branch),
            Err(error) => format!(
                "{note}; worktree {} could not be removed: {error}",
                worktree.root().display()
            ),
        };
    }
    let keeps_work = !outcome.files.is_empty() || worktree.has_changes().unwrap_or(true);
    if keeps_work {
        return format!(
            "{note} (worktree {} on branch {})",
            worktree.root().display(),
            worktree.branch
        );
    }
    match worktree.discard() {
        Ok(()) => format!(
            "{note}; worktree and branch {} removed (nothing to keep)",
            worktree.branch
        ),
        Err(error) => format!(
            "{note}; worktree {} on branch {} could not be removed: {error}",
            worktree.root().display(),
            worktree.branch
        ),
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
