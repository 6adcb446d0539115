//! L4 runner: one run of many tasks: selection, preparation, execution
//! with checks, git and outputs, interrupts.

pub mod adhoc;
pub mod agents_md;
mod answer;
pub mod approve;
mod batch;
mod breaker;
pub mod chat;
pub mod checks;
pub mod clean;
mod error;
mod front;
pub mod inspect;
pub mod matrix;
pub mod options;
pub mod parallel;
pub mod pause;
pub mod prepare;
pub mod redacting;
pub mod results;
pub mod resume;
pub mod rule_tools;
pub mod sandbox_check;
pub mod schemas;
pub mod scratch;
pub mod session;
pub mod state;
pub mod subject;
pub mod task_run;
pub mod toolbox;
pub mod tools;
pub mod workspace;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use globset::{Glob, GlobSetBuilder};

use crate::agent::Approver;
use crate::config::Config;
use crate::core::shard::shard_key;
use crate::core::{Redactor, Shard};
use crate::llm::cassette::CassetteWriter;
use crate::llm::pricing::PriceTable;
use crate::llm::retry::RetrySettings;
use crate::policy::PolicySpec;
use crate::task::{TaskFile, TaskSpec};
use crate::tools::ChildEnv;

pub use batch::execute;
pub(crate) use batch::shares_workdir;
pub use error::{RunError, SetupError};
pub use front::run;
pub use options::{
    LoadErrors, Loaded, RunFlags, RunOptions, harden, load, load_selected, load_text, redactor,
    run_context,
};
pub use prepare::{
    Cassettes, PolicyInputs, PrepareError, PreparedTask, SandboxPaths, build_provider,
    check_workdir_root, child_env_for, prepare, protected_files, task_policy, task_sandbox,
    task_workdir,
};
pub use redacting::RedactingSink;
pub use results::{RunReport, TaskResult};
pub use session::{Session, Threads};

/// Everything shared by the tasks of one run.
pub struct RunContext {
    pub config: Config,
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub run_id: String,
    pub dry_run: bool,
    /// `--cassette` (or config): replay every task from this file.
    pub cassette: Option<PathBuf>,
    /// `--policy FILE`, protected from writes.
    pub policy_file: Option<PathBuf>,
    /// The operator policy from `--policy FILE`: a ceiling task files may
    /// narrow, never widen (docs/security.md S5).
    pub operator_policy: Option<PolicySpec>,
    /// The allowlisted environment for every subprocess.
    pub child_env: ChildEnv,
    /// ybs's own environment, read once with the config
    /// (`config::process_environ`): provider keys, `$PATH`, `$XDG_*`.
    pub environ: crate::core::Environ,
    pub pricing: PriceTable,
    pub retry: RetrySettings,
    /// `--no-commit`: no git writes at all.
    pub no_commit: bool,
    /// `--scratch`: the run works in a temporary copy of the directory
    /// ybs was started in.
    pub scratch: bool,
    /// `--allow-dirty`: run on a dirty tree; the user's changes stay out of commits.
    pub allow_dirty: bool,
    /// ybs's own outputs (absolute, or relative to `cwd`): never part of a
    /// dirty check or a commit. See [`report::OutputLayout::own_paths`].
    pub outputs: Vec<PathBuf>,
    /// Masks secrets in commit messages.
    pub redactor: Redactor,
    /// The run's local resume key, made at the start and masked by the
    /// redactor; written to the state directory only if a task pauses
    /// (`None`: `$YBS_RESUME_KEY` signs, docs/resume.md).
    pub resume_key: Option<String>,
    /// Every task file the run loaded: read-only in every task's sandbox.
    pub task_files: Vec<PathBuf>,
    /// `--record FILE`: every provider answer is written here.
    pub recorder: Option<Arc<CassetteWriter>>,
    /// `--shard K/N`: recorded in the reports and `OUT/shard.json`.
    pub shard: Option<Shard>,
    /// Where `--shard auto` found it: the engine and its variables.
    pub shard_source: Option<crate::core::shard::ShardSource>,
    /// `--shard-by durations`: the digest of the durations file.
    pub shard_split: Option<String>,
    /// `--jobs N`: tasks at once (at least 1). Above 1, a task that
    /// commits runs in its own git worktree.
    pub jobs: usize,
    /// `--max-cost-usd`: once the run has spent this much, no new task
    /// starts; the rest are skipped (docs/ci.md).
    pub max_cost_usd: Option<f64>,
    /// `--interactive` on a TTY: answers `ask` decisions (docs/interactive.md).
    pub approver: Option<Arc<dyn Approver>>,
    /// `ybs resume`: the work tree holds the paused task's changes,
    /// checked against its state instead of the dirty check.
    pub resuming: bool,
    /// `ybs resume`: the tasks that paused in their own `--jobs`
    /// worktree, by task id; they go on there (docs/resume.md).
    pub resume_worktrees: std::collections::HashMap<String, workspace::InWorktree>,
    /// `--models`, `--repeat`: each copy's model, and `--min-pass-rate`.
    pub copies: matrix::Copies,
    /// A task's note that the config replaced its pinned provider or
    /// model was shown on the console: the later ones go to the
    /// transcripts only.
    pub pins_noted: std::sync::atomic::AtomicBool,
    /// Task files given as text (`ybs run --prompt`), by path as loaded.
    pub unsaved: HashMap<PathBuf, String>,
}

/// The tasks of `files` whose id matches any of `filters` (all when none);
/// a filter that is no glob is a usage error.
pub fn select(files: &[TaskFile], filters: &[String]) -> Result<Vec<TaskSpec>, RunError> {
    let mut builder = GlobSetBuilder::new();
    for filter in filters {
        builder.add(Glob::new(filter).map_err(|e| {
            RunError::usage(
                format!("invalid --filter `{filter}`: {}", e.kind()),
                Some("a filter is a glob over task ids, like `fix-*` or `lint-{a,b}`"),
            )
        })?);
    }
    let set = builder
        .build()
        .map_err(|e| RunError::usage(e.to_string(), None))?;
    Ok(files
        .iter()
        .flat_map(|file| file.tasks.iter())
        .filter(|task| filters.is_empty() || set.is_match(&task.id))
        .cloned()
        .collect())
}

/// The tasks of `shard`, in their order. A task belongs to the shard its
/// key `file#id` hashes to ([`Shard::of_key`]), with the file as the run
/// reports it relative to `cwd`: every machine of a split must run from
/// the same directory with the same paths and `--filter`. An empty result
/// is not an error: hashing may leave a shard without tasks.
pub fn shard(tasks: Vec<TaskSpec>, shard: Shard, cwd: &std::path::Path) -> Vec<TaskSpec> {
    tasks
        .into_iter()
        .filter(|task| shard.contains(&task_shard_key(task, cwd)))
        .collect()
}

/// `file#id`, the file relative to `cwd` with `/` separators and no
/// leading `./`, so the key does not depend on where the checkout is.
pub fn task_shard_key(task: &TaskSpec, cwd: &std::path::Path) -> String {
    shard_key(&portable_file(&task.file, cwd), &task.id)
}

fn portable_file(file: &std::path::Path, cwd: &std::path::Path) -> String {
    let relative = file.strip_prefix(cwd).unwrap_or(file);
    if relative.is_absolute() {
        return relative.to_string_lossy().into_owned();
    }
    let parts: Vec<String> = relative
        .components()
        .filter(|part| !matches!(part, std::path::Component::CurDir))
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

/// Prepares every task; returns every problem found.
pub fn prepare_all(
    run: &RunContext,
    tasks: &[TaskSpec],
) -> Result<Vec<PreparedTask>, Vec<PrepareError>> {
    let mut cassettes = Cassettes::default();
    let mut prepared = Vec::new();
    let mut errors = Vec::new();
    for task in tasks {
        match prepare(run, &mut cassettes, task) {
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
        let saved = workspace::TaskGit::open(&task.tool_ctx.workdir, &[])
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

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::portable_file;

    #[test]
    fn shard_keys_do_not_depend_on_the_checkout() {
        let cwd = Path::new("/home/runner/work/repo");
        for file in [
            "tasks/a.yaml",
            "./tasks/a.yaml",
            "/home/runner/work/repo/tasks/a.yaml",
        ] {
            assert_eq!(
                portable_file(Path::new(file), cwd),
                "tasks/a.yaml",
                "{file}"
            );
        }
        assert_eq!(
            portable_file(Path::new("/elsewhere/a.yaml"), cwd),
            "/elsewhere/a.yaml"
        );
    }
}
