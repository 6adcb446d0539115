//! Everything about a task that can be wrong is found before anything
//! runs: workdir, provider, cassette, policy, tools. A problem here is a
//! usage error (exit 2) and no task starts.
//!
//! Task assembly is a pipeline of stages, each a room that uses only the
//! ones before it (the architecture test holds it):
//!
//! 1. [`workdir`]: the directory the task runs in, and the files no tool
//!    may write;
//! 2. [`worktree`]: the repository ready for the task's commit, and the
//!    task's own worktree;
//! 3. [`sandbox`]: what the task's sandbox shows, protects and hides;
//! 4. [`policy`]: the task's policy under the operator's ceiling;
//! 5. [`provider`]: the provider, a cassette's replay or a recorder;
//! 6. [`tools`]: the built-in tools offered, and the tool calls' context.
//!
//! [`prepare`] runs them in that order; the sandbox itself is made once
//! the tools stage knows whether the task runs programs.
//!
//! Under `--jobs N` (N > 1) [`prepare_all`] checks every task in its
//! workdir and leaves the worktree it would get [`Deferred`]; the
//! batch's feed calls [`materialize`] when the task's slot comes, which
//! makes the worktree and runs the stages after it again there.

pub(super) mod policy;
pub(super) mod provider;
pub(super) mod sandbox;
pub(super) mod tools;
pub(super) mod workdir;
pub(super) mod worktree;

#[cfg(test)]
mod fixture;

use std::path::PathBuf;

use super::RunContext;
use super::agents_md::{self, AgentsMd};
use super::error::{PrepareError, SetupError};
use super::workspace::TaskGit;
use crate::agent::{ContextWindow, Limits};
use crate::config::{GitAuthor, TaskSettings};
use crate::core::event::SandboxInfo;
use crate::git::TaskWorktree;
use crate::llm::Provider;
use crate::policy::Policy;
use crate::task::TaskSpec;
use crate::tools::{Registry, ToolCtx};

use self::policy::{PolicyInputs, task_policy};
use self::provider::{Cassettes, build_provider, pin_notes};
use self::sandbox::{SandboxPaths, sandbox_mode, sandbox_paths, task_sandbox};
use self::tools::{build_registry, shell_sandbox, tool_ctx};
use self::workdir::{
    control_paths, control_paths_with, guarded_paths, protected_paths, task_workdir,
};
use self::worktree::{git_preflight, isolate, isolate_reader, reader_may_isolate};

/// A task ready to run.
pub struct PreparedTask {
    pub task: TaskSpec,
    pub settings: TaskSettings,
    pub limits: Limits,
    /// `context.max_tokens` and `context.compaction_threshold`.
    pub context: ContextWindow,
    pub registry: Registry,
    pub tool_ctx: ToolCtx,
    pub policy: Policy,
    pub policy_hash: String,
    pub provider: Box<dyn Provider>,
    /// How the task's children are confined, for the manifest.
    pub sandbox: SandboxInfo,
    /// A check asking for the network gets it
    /// (`safety.sandbox_check_network`).
    pub check_network: bool,
    /// `--jobs N` (N > 1) and a workdir in a repository with commits on:
    /// the task's own worktree, which `tool_ctx.workdir` is inside.
    pub worktree: Option<TaskWorktree>,
    /// `--jobs N` (N > 1) and no worktree: why the task runs in its
    /// workdir (tasks sharing it then run one after another).
    pub in_place: Option<String>,
    /// The repository's `AGENTS.md` instructions for the system prompt,
    /// read, masked and bounded here (docs/task-files.md, `context`).
    pub agents_md: AgentsMd,
    /// `task.note`s for the start of the task (a provider or model the
    /// config put in place of the task file's).
    pub notes: Vec<String>,
    /// The repository and its snapshot as the set-up read them, for the
    /// task's start when nothing can have changed them since (a run of
    /// one task: [`prepare_all`] drops them otherwise); taken by
    /// the first start.
    pub start_git: std::sync::Mutex<Option<TaskGit>>,
    /// `--jobs N` (N > 1) in a batch: the task gets a worktree of its own
    /// when its slot comes ([`materialize`]); until then it is checked
    /// in its workdir, and this says how to make it.
    pub deferred: Option<Deferred>,
}

/// A task whose worktree is made when its slot comes, not before the run.
#[derive(Debug, Clone)]
pub struct Deferred {
    /// The task commits (a worktree for its commit), or only reads.
    pub commit: bool,
    /// The workdir the worktree is made from.
    pub workdir: PathBuf,
}

/// Prepares one task.
pub fn prepare(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
) -> Result<PreparedTask, PrepareError> {
    prepare_as(run, cassettes, task, false)
}

/// [`prepare`]; with `defer`, a worktree the task would get is left for
/// [`materialize`] when its slot comes: everything else is checked now.
fn prepare_as(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
    defer: bool,
) -> Result<PreparedTask, PrepareError> {
    let fail = |message: String, hint: Option<&str>| PrepareError {
        file: task.file.clone(),
        span: None,
        task: task.id.clone(),
        message,
        hint: hint.map(str::to_owned),
    };
    // Checked when the task files load (with positions); again here for
    // callers that prepare a task of their own (`ybs chat`).
    if let Some(problem) = run.config.check_task(task).into_iter().next() {
        return Err(fail(problem.message, problem.hint.as_deref()));
    }
    let mut settings = run.config.task_settings(task);
    // `--models`: the copy's model, over the task's and the config's.
    if let Some(model) = run.copies.model(&task.id) {
        model.clone_into(&mut settings.model);
    }
    if run.cassette.is_some() {
        // `--cassette FILE` (or YBS_CASSETTE) means the replay provider,
        // whatever the task file names: a recorded run reproduces offline
        // (docs/providers.md) and the task's endpoint is never contacted.
        settings.provider = "replay".to_owned();
    }
    let mut workdir = task_workdir(&run.config, &run.cwd, run.home.as_deref(), task)?;
    // `--dry-run` commits nothing, so it needs no clean tree and no worktree.
    let commit_enabled =
        task.commit.enabled && !run.no_commit && !run.dry_run && run.config.git.auto_commit;
    let mut worktree = None;
    // The repository around the workdir, opened once for the whole
    // set-up (docs/performance.md): the lock, the dirty check and the
    // snapshot, a worktree, the submodules the sandbox protects.
    let found = crate::git::Found::open(&workdir);
    let outputs: Vec<PathBuf> = run.outputs.iter().map(|path| run.cwd.join(path)).collect();
    // The workspace and its snapshot, read once for `--allow-dirty`'s
    // save, the dirty check and, kept, the task's start.
    let mut start_git = None;
    if !run.dry_run {
        // docs/git.md: one committing run per repository at a time.
        found.lock(commit_enabled).map_err(|error| {
            fail(
                error.to_string(),
                Some("wait for the other run to finish, or run the tasks in one `ybs run` (with --jobs each gets its own worktree)"),
            )
        })?;
    }
    if run.allow_dirty && !run.dry_run {
        let author = run.config.git.author.as_ref().map(GitAuthor::signature);
        let git = TaskGit::found(&found, &workdir, &outputs);
        super::workspace::save_users_work(git.as_ref(), &run.run_id, author.as_deref())
            .map_err(|(message, hint)| fail(message, Some(hint)))?;
        start_git = git.ok();
    }
    let setup = |error: SetupError| fail(error.to_string(), error.hint_text());
    // `--jobs`: why the task runs in its workdir rather than a worktree
    // of its own, when it does (the console says it). The copies of
    // `--repeat` and `--models` get worktrees with `--jobs 1` too: each
    // starts from the same tree, and none commits on the user's branch.
    let mut in_place = None;
    let mut deferred = None;
    let defer = defer && !run.resume_worktrees.contains_key(&task.id);
    if commit_enabled {
        let git =
            git_preflight(run, &found, &workdir, &outputs, start_git.take()).map_err(setup)?;
        start_git = Some(git);
        if run.jobs > 1 || run.copies.expanded {
            let repository = found.workspace().ok().flatten().is_some();
            if defer && repository {
                deferred = Some(Deferred {
                    commit: true,
                    workdir: workdir.clone(),
                });
            } else {
                worktree = isolate(run, task, &found).map_err(setup)?;
            }
            if worktree.is_none() && deferred.is_none() {
                in_place = Some("the workdir is not in a git repository".to_owned());
            }
        }
    } else if (run.jobs > 1 || run.copies.expanded) && !run.resuming {
        let made = if defer {
            reader_may_isolate(run, &found, &workdir).map(|()| None)
        } else {
            isolate_reader(run, task, &found, &workdir).map(Some)
        };
        match made {
            Ok(Some(made)) => worktree = Some(made),
            Ok(None) => {
                deferred = Some(Deferred {
                    commit: false,
                    workdir: workdir.clone(),
                });
            }
            Err(why) => in_place = Some(why.to_string()),
        }
    }
    if let Some(place) = run.resume_worktrees.get(&task.id) {
        worktree =
            Some(super::workspace::reopen_worktree(&workdir, &task.id, place).map_err(setup)?);
    }
    // From here on a failure must discard the worktree: no task will run
    // in it (one reopened by `ybs resume` holds the paused task's work).
    let discard = |error: PrepareError| {
        if let Some(worktree) = worktree.as_ref().filter(|w| !w.reopened) {
            let _ = worktree.discard();
        }
        error
    };
    // In a worktree of its own the task sees another checkout: its
    // snapshot and submodules are read there. A resumed task carries the
    // snapshot of its start.
    if deferred.is_some() {
        start_git = None;
    }
    let submodules = if worktree.is_none() {
        Some(found.submodule_paths())
    } else {
        start_git = None;
        None
    };
    if run.resuming {
        start_git = None;
    }
    drop(found);
    if let Some(worktree) = &worktree {
        workdir.clone_from(&worktree.workdir);
    }
    let mut prepared = prepare_in(
        run,
        cassettes,
        task,
        settings,
        (workdir, worktree.clone(), submodules),
    )
    .map_err(discard)?;
    prepared.in_place = in_place;
    prepared.start_git = std::sync::Mutex::new(start_git);
    prepared.deferred = deferred;
    Ok(prepared)
}

/// A task checked with a [`Deferred`] worktree, ready to run: its
/// worktree made now, and its policy, provider, tools and sandbox set up
/// in it. A failure leaves no worktree behind.
pub fn materialize(
    run: &RunContext,
    cassettes: &mut Cassettes,
    checked: &PreparedTask,
) -> Result<PreparedTask, PrepareError> {
    let task = &checked.task;
    let fail = |error: SetupError| PrepareError {
        file: task.file.clone(),
        span: None,
        task: task.id.clone(),
        message: error.to_string(),
        hint: error.hint_text().map(str::to_owned),
    };
    let Some(deferred) = &checked.deferred else {
        return Err(fail(SetupError::Git {
            message: "the task has no worktree to make".to_owned(),
            hint: "this is a bug in ybs: please report it",
        }));
    };
    let found = crate::git::Found::open(&deferred.workdir);
    // What allows the worktree was checked with the task.
    let made = isolate(run, task, &found).map_err(fail)?;
    drop(found);
    let Some(worktree) = made else {
        return Err(fail(SetupError::Git {
            message: "its worktree could not be made: the workdir is no longer in a git repository"
                .to_owned(),
            hint: "the repository changed while the run went on",
        }));
    };
    let workdir = worktree.workdir.clone();
    let inputs = (workdir, Some(worktree.clone()), None);
    prepare_in(run, cassettes, task, checked.settings.clone(), inputs).inspect_err(|_| {
        let _ = worktree.discard();
    })
}

/// The rest of [`prepare`], with the workdir the task runs in.
fn prepare_in(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
    settings: TaskSettings,
    (workdir, worktree, submodules): (PathBuf, Option<TaskWorktree>, Option<Vec<PathBuf>>),
) -> Result<PreparedTask, PrepareError> {
    let fail = |message: String, hint: Option<&str>| PrepareError {
        file: task.file.clone(),
        span: None,
        task: task.id.clone(),
        message,
        hint: hint.map(str::to_owned),
    };
    let setup = |error: SetupError| fail(error.to_string(), error.hint_text());
    // Before the sandbox is set up: it may place a `.git` of its own in
    // the workdir, which would end the walk to the repository root there.
    let agents_md = if task.context.agents_md {
        agents_md::read(&workdir, &run.redactor)
    } else {
        AgentsMd::default()
    };
    let mut protected = protected_paths(run, task);
    if let Some(worktree) = &worktree {
        // The worktree's copies of the task and policy files are as
        // protected as the originals.
        let copies: Vec<PathBuf> = protected.iter().filter_map(|p| worktree.map(p)).collect();
        protected.extend(copies);
    }
    // Read once: the file tools guard them and the sandbox binds them.
    let control = match submodules {
        Some(submodules) => control_paths_with(&workdir, submodules),
        None => control_paths(&workdir),
    };
    let guarded = guarded_paths(run, &workdir, &protected, &control);
    let policy = task_policy(&PolicyInputs {
        config: &run.config,
        home: run.home.as_deref(),
        environ: &run.environ,
        operator: run.operator_policy.as_ref(),
        workdir: &workdir,
        protected: guarded.clone(),
        layers: &task.policy,
        sandbox: sandbox_mode(&run.config),
    })
    .map_err(setup)?;
    let policy_hash = policy.hash();
    let provider = build_provider(run, cassettes, task, &settings).map_err(setup)?;
    let registry = build_registry(run, task, &policy).map_err(setup)?;
    let may_run_programs = registry.names().iter().any(|name| name == "run_shell")
        || !task.tools.external.is_empty()
        || !task.tools.mcp.is_empty()
        || !run.config.tools.mcp.is_empty()
        || !task.checks.is_empty();
    let sandbox_paths = SandboxPaths {
        control: Some(control),
        ..sandbox_paths(run, &protected)
    };
    let (sandbox, sandbox_info) = task_sandbox(
        &run.config,
        (run.home.as_deref(), &run.environ),
        &workdir,
        may_run_programs,
        &sandbox_paths,
    )
    .map_err(setup)?;
    let mut tool_ctx = tool_ctx(run, workdir, guarded, sandbox);
    tool_ctx.shell_sandbox = shell_sandbox(&policy, tool_ctx.sandbox.as_ref());
    let sandbox_info = match &tool_ctx.shell_sandbox {
        Some(shell) => shell.info(),
        None => sandbox_info,
    };
    let limits = limits_of(&settings);
    let context = ContextWindow::new(
        run.config.context.max_tokens,
        run.config.context.compaction_threshold,
    );
    Ok(PreparedTask {
        task: task.clone(),
        settings,
        limits,
        context,
        registry,
        tool_ctx,
        policy,
        policy_hash,
        provider,
        sandbox: sandbox_info,
        check_network: run.config.safety.sandbox_check_network,
        worktree,
        in_place: None,
        agents_md,
        notes: pin_notes(run, task),
        start_git: std::sync::Mutex::new(None),
        deferred: None,
    })
}

/// The agent loop's limits of a task's settings.
fn limits_of(settings: &TaskSettings) -> Limits {
    Limits {
        max_iterations: settings.max_iterations,
        timeout: settings.timeout,
        max_total_tokens: settings.max_total_tokens,
        max_cost_usd: settings.max_cost_usd,
        max_tool_output_chars: settings.max_tool_output_chars,
        ..Limits::default()
    }
}

/// Prepares every task; returns every problem found.
pub fn prepare_all(
    run: &RunContext,
    tasks: &[TaskSpec],
) -> Result<Vec<PreparedTask>, Vec<PrepareError>> {
    let mut cassettes = Cassettes::default();
    let mut prepared = Vec::new();
    let mut errors = Vec::new();
    // docs/performance.md: under `--jobs`, every task is checked now and
    // its worktree made when its slot comes, overlapped with the tasks
    // running; `--jobs 1` prepares as it always did.
    let defer = run.jobs > 1 && tasks.len() > 1;
    for task in tasks {
        match prepare_as(run, &mut cassettes, task, defer) {
            Ok(task) => prepared.push(task),
            Err(error) => errors.push(error),
        }
    }
    if errors.is_empty() {
        // A task's start reads its repository afresh when other tasks of
        // the run prepare or run before it: only the one task of a run
        // keeps what its set-up read.
        if prepared.len() > 1 {
            for task in &prepared {
                *task
                    .start_git
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner) = None;
            }
        }
        Ok(prepared)
    } else {
        discard(&prepared);
        Err(errors)
    }
}

/// `--allow-dirty`: one line per repository whose uncommitted work was
/// saved before the run, naming the ref (for the console).
pub fn saved_work_notes(run: &RunContext, prepared: &[PreparedTask]) -> Vec<String> {
    if !run.allow_dirty {
        return Vec::new();
    }
    let mut notes: Vec<String> = Vec::new();
    for task in prepared {
        let saved = super::workspace::TaskGit::open(&task.tool_ctx.workdir, &[])
            .ok()
            .and_then(|git| git.saved(&run.run_id));
        if let Some(saved) = saved {
            let note = saved.note();
            if !notes.contains(&note) {
                notes.push(note);
            }
        }
    }
    notes
}

/// No task runs: the worktrees made for `--jobs` go, with their branches.
pub fn discard(prepared: &[PreparedTask]) {
    for task in prepared {
        // A paused task's worktree, reopened by `ybs resume`, holds its work.
        if let Some(worktree) = task.worktree.as_ref().filter(|w| !w.reopened) {
            let _ = worktree.discard();
        }
    }
}
