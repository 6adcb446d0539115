//! A task's start: the agent's setup, the system prompt, `task.started`,
//! the repository opened, the user's work saved under `--allow-dirty`.

use std::path::PathBuf;
use std::time::Duration;

use super::super::RunContext;
use super::super::pause::Resumed;
use super::super::prepare::PreparedTask;
use super::super::workspace::TaskGit;
use crate::agent::{Agent, AgentSetup, Emitter, prompt};
use crate::core::Reason;
use crate::core::event::{Event, TaskOutput, TaskStarted};
use crate::git::{GitError, SavedWork};
use crate::task::TaskSpec;

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

/// The task's git side: opened now, or from the snapshot a paused task
/// carried; ybs's outputs are never the task's changes.
pub(super) fn task_git(
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
pub(super) fn saved_work(
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
pub(super) fn output_event(task: &TaskSpec, text: String, reason: Reason) -> Event {
    let json = super::super::answer::valid_value(task, &text, reason);
    Event::TaskOutput(TaskOutput {
        content: text,
        json,
    })
}

/// The task's system prompt, naming its tools, how to answer and the
/// checks that decide it (masked; not with `context: {checks: false}`).
pub(super) fn system_prompt(
    run: &RunContext,
    prepared: &PreparedTask,
    tool_names: &[String],
) -> String {
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
pub(super) fn started_event(
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
pub(super) fn resumed_agent<'a>(
    setup: AgentSetup<'a>,
    resumed: &Resumed,
    carried: Duration,
) -> Agent<'a> {
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
pub(super) fn git_failure(
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
pub(super) fn not_stopped(stuck: &[String]) -> String {
    format!(
        "git: nothing committed: MCP server {} could not be stopped, so the work tree could still change",
        stuck
            .iter()
            .map(|name| format!("`{name}`"))
            .collect::<Vec<_>>()
            .join(", ")
    )
}
