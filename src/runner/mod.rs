//! L4 runner: one run of many tasks: selection, preparation, execution
//! with checks, git and outputs, interrupts.

pub mod adhoc;
pub mod agents_md;
mod answer;
pub mod approve;
mod breaker;
pub mod chat;
pub mod checks;
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
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use globset::{Glob, GlobSetBuilder};

use crate::agent::{Approver, Emitter};
use crate::config::Config;
use crate::core::event::{Event, EventRecord, EventSink};
use crate::core::shard::shard_key;
use crate::core::{Cost, Reason, Redactor, Shard, Status, Usage};
use crate::git::TaskWorktree;
use crate::llm::cassette::CassetteWriter;
use crate::llm::pricing::PriceTable;
use crate::llm::retry::RetrySettings;
use crate::policy::PolicySpec;
use crate::report;
use crate::task::{TaskFile, TaskSpec};
use crate::tools::ChildEnv;

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

/// The async runtime of a run or a chat: two worker threads.
pub fn runtime() -> Result<tokio::runtime::Runtime, RunError> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|error| RunError::Infra(format!("cannot start the async runtime: {error}")))
}

/// The tasks of `files` whose id matches any of `filters` (all when none);
/// a filter that is no glob is a usage error.
pub fn select(files: &[TaskFile], filters: &[String]) -> Result<Vec<TaskSpec>, RunError> {
    let mut builder = GlobSetBuilder::new();
    for filter in filters {
        builder.add(Glob::new(filter).map_err(|e| {
            RunError::usage(format!("invalid --filter `{filter}`: {}", e.kind()), None)
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

/// Runs the prepared tasks, up to `run.jobs` at once, writing every
/// output. SIGINT/SIGTERM stop every running task (each gets
/// `task.finished` with reason `interrupted`); outputs are still written.
///
/// Before a task starts, [`breaker::Gate`] may stop it: a quota or
/// authentication error that ended an earlier task against the same
/// provider, or `--max-cost-usd` reached. A task not started (that way,
/// or because of an interrupt) is reported as `skipped`, with the reason
/// (docs/ci.md#when-the-batch-stops). Under `--record`, each task's own
/// interactions are written to `OUT/<task>/cassette.json` at the end.
///
/// Tasks start in their order, so the reports list them as with
/// `--jobs 1`. All of them are polled from this one future and emit
/// through one [`RedactingSink`]; a task's events stay in order. A task
/// that is not in its own worktree waits while an earlier task runs in
/// its workdir (or one containing or inside it): two tasks never share
/// a directory at the same time.
///
/// Outputs go through `outputs`, opened before: at the end of each task
/// and of the run ybs checks that its files are still the ones it wrote
/// (see [`report::OutDir::check`]). What it finds is reported on the
/// console, in the transcript (a note) and the summary, and fails the
/// task (reason `output_tampered`) that would otherwise pass.
///
/// `ybs resume` comes in here too, with [`pause::Resuming`]: each
/// prepared task goes on from its state, its transcript and report primed
/// with its earlier halves (and the run's other tasks as they ended);
/// spans are exported for the resumed halves only, and a task that is
/// answered spends its state.
pub async fn execute(
    run: &RunContext,
    prepared: Vec<PreparedTask>,
    resuming: Option<pause::Resuming<'_>>,
    paths: &report::OutputLayout,
    outputs: &report::OpenOutputs,
    redactor: Redactor,
    console: &mut dyn EventSink,
) -> RunReport {
    let mut report = RunReport::default();
    let out = &outputs.out;
    if let Err(error) = prepare_out_dir(out) {
        report.output_error = Some(format!("{}: {error}", paths.out_dir.display()));
    }
    if let Some(shard) = run.shard {
        let file = report::ShardFile {
            shard: shard.to_string(),
            run_id: run.run_id.clone(),
            tasks: prepared.iter().map(|task| task.task.id.clone()).collect(),
        };
        if let Err(error) = file.write(out) {
            report.output_error.get_or_insert(error.to_string());
        }
    }
    let mut scope = report::RunScope::shard(run.shard);
    scope.min_pass_rate = run.copies.min_pass_rate;
    scope.source_url = report::RunScope::source_url(&|name| run.environ.var(name));
    report.min_pass_rate = run.copies.min_pass_rate;
    // Only with an endpoint set does anything start (docs/observability.md).
    let mut sinks = report::RunSinks::run(paths, outputs, scope);
    let resumed: &[pause::Resumed] = match resuming {
        Some(resuming) => {
            resuming.prime(out, &mut sinks, &mut report);
            resuming.resumed
        }
        None => &[],
    };
    let mut sinks = session::with_otel(sinks, &run.environ, &mut report);
    let sink = Mutex::new(RedactingSink::new(redactor, vec![&mut sinks, console]));
    let mut results: Vec<Option<TaskResult>> = prepared.iter().map(|_| None).collect();
    // What each task has done so far, read from its events: an interrupt
    // drops the task, and its `task.finished` still reports this.
    // A resumed task's earlier halves count too.
    let progress: Vec<Mutex<Progress>> = (0..prepared.len())
        .map(|index| Mutex::new(Progress::carried(resumed.get(index))))
        .collect();
    let mut running = FuturesUnordered::new();
    let mut active: Vec<usize> = Vec::new();
    let mut next = 0;
    let mut interrupt = Box::pin(interrupted());
    // The quota breaker and the run's budget: whether the next task starts.
    let mut gate = breaker::Gate::new(run.max_cost_usd);
    loop {
        while next < prepared.len() && active.len() < run.jobs.max(1) {
            if let Some((reason, message)) = gate.stop(&prepared[next], spent_usd(&progress)) {
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                let result = breaker::skip(run, &prepared[next], reason, message, &mut *sink);
                discard(&prepared[next..=next]);
                results[next] = Some(result);
                next += 1;
                continue;
            }
            if active
                .iter()
                .any(|&other| shares_workdir(&prepared[next], &prepared[other]))
            {
                break;
            }
            let index = next;
            let task = &prepared[index];
            let sink = &sink;
            let progress = &progress[index];
            running.push(async move {
                progress
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .started = Some(std::time::Instant::now());
                let mut shared = SharedSink { sink, progress };
                let item = resumed.get(index);
                let result = task_run::run_or_resume(run, task, out, &mut shared, item).await;
                // Answered: the state is spent and cannot be resumed
                // again (a task that paused again wrote a new one).
                if item.is_some() && result.status != Status::Paused {
                    pause::remove_state(out, &task.task.id);
                }
                (index, result)
            });
            active.push(index);
            next += 1;
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            Some((index, result)) = running.next() => {
                active.retain(|&other| other != index);
                gate.record(&prepared[index], &result);
                results[index] = Some(result);
            }
            signal = &mut interrupt => {
                running.clear();
                let message = format!(
                    "interrupted by {signal}{}",
                    if resumed.is_empty() { "" } else { " after the resume" }
                );
                active.sort_unstable();
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                for index in active {
                    let task = &prepared[index];
                    // Its answers may have been acted on: the state is spent.
                    if resumed.get(index).is_some() {
                        pause::remove_state(out, &task.task.id);
                    }
                    let done = progress[index]
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .clone();
                    let message = format!("{message} {}", done.describe());
                    let message = match &task.worktree {
                        Some(worktree) => interrupted_worktree(worktree, message),
                        None => message,
                    };
                    let mut emitter = Emitter::new(&task.task.id, &mut *sink);
                    emitter.emit(Event::TaskFinished {
                        status: Status::Failed,
                        reason: Reason::Interrupted,
                        message: Some(message.clone()),
                        expect: task.task.expect.as_str().to_owned(),
                        iterations: done.iterations,
                        usage: done.usage,
                        cost: done.cost,
                        duration_ms: done.elapsed_ms(),
                    });
                    results[index] = Some(TaskResult {
                        id: task.task.id.clone(),
                        status: Status::Failed,
                        reason: Reason::Interrupted,
                        message: Some(message),
                    });
                }
                // Tasks that never started leave nothing behind (a
                // reopened worktree holds a paused task's work: it stays),
                // and are reported as skipped.
                discard(&prepared[next..]);
                for index in next..prepared.len() {
                    let message = format!("not started: interrupted by {signal}");
                    let result =
                        breaker::skip(run, &prepared[index], Reason::Interrupted, message, &mut *sink);
                    results[index] = Some(result);
                }
                report.interrupted = true;
                break;
            }
        }
    }
    drop(running);
    if let Err(error) = write_task_cassettes(run, &prepared, out) {
        report.output_error.get_or_insert(error.to_string());
    }
    report.results = results.into_iter().flatten().collect();
    // Files of tasks that already ended (a later task forging an earlier
    // one's transcript): the task fails; the summary lists it.
    for (task, finding) in out.check_owned(None) {
        if let Some(result) = report
            .results
            .iter_mut()
            .find(|result| Some(&result.id) == task.as_ref())
            && result.status == Status::Passed
        {
            result.status = Status::Failed;
            result.reason = Reason::OutputTampered;
            result.message = Some(format!("output tampering: {finding}"));
        }
    }
    let mut sink = sink.into_inner().unwrap_or_else(PoisonError::into_inner);
    if let Err(error) = sink.finish() {
        report.output_error.get_or_insert(error.to_string());
    }
    drop(sink);
    report.warnings.extend(sinks.take_otel_warning());
    // The reports just written, too.
    out.check(None);
    report.tampering = out.findings();
    if !Arc::ptr_eq(out, &outputs.junit_dir) {
        outputs.junit_dir.check(None);
        report.tampering.extend(outputs.junit_dir.findings());
    }
    report
}

/// `--record`: each task's own interactions in `OUT/<task>/cassette.json`,
/// masked, for `ybs report fixture` (docs/outputs.md).
fn write_task_cassettes(
    run: &RunContext,
    prepared: &[PreparedTask],
    out: &report::OutDir,
) -> std::io::Result<()> {
    let Some(recorder) = &run.recorder else {
        return Ok(());
    };
    for task in prepared {
        let id = &task.task.id;
        if let Some(bytes) = recorder.task_cassette(id)? {
            out.write_atomic(Some(id), report::CASSETTE_FILE, &bytes)?;
        }
    }
    Ok(())
}

/// What the run has spent so far, in USD: every task's answers with a
/// known price, the running ones' included.
fn spent_usd(progress: &[Mutex<Progress>]) -> f64 {
    progress
        .iter()
        .map(|task| {
            task.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .spent_usd
        })
        .sum()
}

/// Whether two tasks would work in one directory: neither has its own
/// worktree and one workdir is, or contains, the other.
pub(crate) fn shares_workdir(a: &PreparedTask, b: &PreparedTask) -> bool {
    if a.worktree.is_some() || b.worktree.is_some() {
        return false;
    }
    let (a, b) = (&a.tool_ctx.workdir, &b.tool_ctx.workdir);
    a.starts_with(b) || b.starts_with(a)
}

/// An interrupted task's worktree: kept (and named) when it holds
/// changes, removed with its branch when it holds none.
pub(crate) fn interrupted_worktree(worktree: &TaskWorktree, message: String) -> String {
    if worktree.has_changes().unwrap_or(true) {
        return format!(
            "{message}; its changes stay in worktree {} (branch {})",
            worktree.root().display(),
            worktree.branch
        );
    }
    match worktree.discard() {
        Ok(()) => format!(
            "{message}; its worktree held no change and was removed with branch {}",
            worktree.branch
        ),
        Err(error) => format!(
            "{message}; its worktree {} (branch {}) could not be removed: {error}",
            worktree.root().display(),
            worktree.branch
        ),
    }
}

/// What a running task has done so far, as its events tell it.
#[derive(Debug, Clone)]
struct Progress {
    started: Option<std::time::Instant>,
    /// The running time of a resumed task's earlier halves.
    earlier_ms: u64,
    /// Provider requests answered.
    iterations: u32,
    usage: Usage,
    /// As the agent counts it: unknown once one answer's price is.
    cost: Cost,
    /// The answers with a known price, for the run's budget.
    spent_usd: f64,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            started: None,
            earlier_ms: 0,
            iterations: 0,
            usage: Usage::default(),
            cost: Cost::Usd(0.0),
            spent_usd: 0.0,
        }
    }
}

impl Progress {
    /// A task's progress before it starts: what a resumed one's earlier
    /// halves spent, else nothing.
    fn carried(resumed: Option<&pause::Resumed>) -> Self {
        resumed.map_or_else(Self::default, |item| {
            let spent = item.state.spent;
            Self {
                started: None,
                earlier_ms: spent.elapsed_ms,
                iterations: spent.iterations,
                usage: spent.usage,
                cost: spent.cost,
                spent_usd: spent.cost.usd().unwrap_or(0.0),
            }
        })
    }

    fn record(&mut self, event: &Event) {
        if let Event::LlmResponse {
            iteration,
            usage,
            cost,
            ..
        } = event
        {
            self.iterations = self.iterations.max(*iteration);
            self.usage.add(*usage);
            self.cost = self.cost.plus(*cost);
            self.spent_usd += cost.usd().unwrap_or(0.0);
        }
    }

    fn elapsed_ms(&self) -> u64 {
        self.started
            .map_or(0, |started| {
                u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
            })
            .saturating_add(self.earlier_ms)
    }

    /// `after 2 iterations, 240 tokens, $0.0012, 3.4s`.
    fn describe(&self) -> String {
        format!(
            "after {} iteration{}, {} tokens, cost {}, {:.1}s",
            self.iterations,
            if self.iterations == 1 { "" } else { "s" },
            self.usage.total(),
            self.cost,
            Duration::from_millis(self.elapsed_ms()).as_secs_f64()
        )
    }
}

/// One running task's way into the run's sink. Every task is polled by
/// [`execute`]'s one future and an event is handed over whole, so the
/// lock is never contended and a task's events keep their order. Keeps
/// the task's [`Progress`] as the events pass.
struct SharedSink<'s, 'a> {
    sink: &'s Mutex<RedactingSink<'a>>,
    progress: &'s Mutex<Progress>,
}

impl EventSink for SharedSink<'_, '_> {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(&record.event);
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(record)
    }

    fn text(&mut self, task: &str, line: &str) {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text(task, line);
    }
}

/// Writes a `.gitignore` of `*` in the output directory, so a run inside
/// a repository never sees its own outputs as changes to commit, as a
/// dirty tree, or in `list_files`/`search_files` results.
/// One already there (`--out .` in a repository) is left alone.
fn prepare_out_dir(out: &report::OutDir) -> std::io::Result<()> {
    out.create_new(
        ".gitignore",
        b"# Written by ybs: its outputs are never part of the repository.\n*\n",
    )
}

/// Resolves when SIGINT or SIGTERM arrives; names the signal. The
/// handlers are installed when this is called, not when the future is
/// first polled: a signal that arrives while the first tasks start is
/// not the default action (death without outputs).
pub(crate) fn interrupted() -> impl std::future::Future<Output = &'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = signals else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
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
