//! One session for every way into ybs's work: `ybs run`, `ybs resume`,
//! `ybs chat`, `ybs tools`, `ybs validate` and `ybs policy explain` each
//! open a [`Session`] from the loaded inputs and the resolved options. It
//! owns the run context, the task files as loaded, the redactor (set on
//! the console at once), the async runtime (started at its first use: the
//! commands that only look never start it), the output layout, and the
//! sandbox and policy of a command run outside any task.
//!
//! And what every way into a run shares at its start and its end: the
//! unconfined warning before anything runs, the OpenTelemetry export
//! while it runs, and one ending for `ybs run`, `ybs resume` and
//! `ybs report merge` alike: output errors, tampering and warnings, the
//! line of totals, and `$GITHUB_OUTPUT` (docs/progress.md). The step
//! summary is written by the run's report sinks.

use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::context::run_context;
use super::load::Loaded;
use super::options::{Entry, RunOptions};
use super::prepare::policy::{PolicyInputs, task_policy};
use super::prepare::sandbox::{SandboxPaths, child_env_for, sandbox_mode, task_sandbox};
use super::{PreparedTask, RunContext, RunError, RunReport, SetupError, pause};
use crate::core::Redactor;
use crate::core::event::SandboxInfo;
use crate::policy::Policy;
use crate::report::{self, Console, OutputLayout};
use crate::task::{TaskFile, TaskSpec};
use crate::tools::ChildEnv;
use crate::tools::sandbox::Sandbox;

/// `ybs tools serve`'s worker threads at the most.
pub const MAX_WORKERS: usize = 16;

/// The threads of a session's async runtime, started at its first use.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum Threads {
    /// A run or a chat: two worker threads.
    #[default]
    Two,
    /// One call at a time (`ybs tools list|schema|invoke|status`): the
    /// calling thread.
    Current,
    /// `ybs tools serve`: a worker thread a core (at most
    /// [`MAX_WORKERS`]), so concurrent calls use every core. Tool processes
    /// are spawned from the calls' tasks, on worker threads, which live as
    /// long as the runtime: `PR_SET_PDEATHSIG` fires when the spawning
    /// thread ends (`tools::process`), and a worker never ends before the
    /// server.
    EveryCore,
}

impl Threads {
    fn runtime(self) -> Result<tokio::runtime::Runtime, RunError> {
        let built = match self {
            Self::Two => tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build(),
            Self::Current => tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build(),
            Self::EveryCore => {
                let cores =
                    std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
                tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(cores.clamp(1, MAX_WORKERS))
                    .thread_name("ybs-serve")
                    .enable_all()
                    .build()
            }
        };
        built.map_err(|error| RunError::Infra(format!("cannot start the async runtime: {error}")))
    }
}

/// One command's session, opened once from the loaded inputs and the
/// resolved options (docs/architecture.md).
pub struct Session {
    pub context: RunContext,
    /// The task files as loaded: what `ybs validate` and `ybs policy
    /// explain` look at (a running door picks its tasks before it opens
    /// the session).
    pub files: Vec<TaskFile>,
    /// Masks every secret the session holds; the console has it too.
    pub redactor: Redactor,
    pub options: RunOptions,
    /// Where the outputs go.
    pub layout: OutputLayout,
    threads: Threads,
    /// Started by [`Self::runtime`], once.
    runtime: OnceLock<tokio::runtime::Runtime>,
}

impl Session {
    /// Builds the run context from `loaded`, `options` and the door's
    /// `entry` in one piece and masks the console with its redactor. The
    /// runtime `threads` asks for starts at its first use: opening a
    /// session starts no thread and writes nothing.
    pub fn open(
        loaded: Loaded,
        options: RunOptions,
        entry: Entry,
        threads: Threads,
        console: &mut dyn Console,
    ) -> Result<Self, RunError> {
        let (context, redactor, files) = run_context(loaded, &options, entry)?;
        redactor.prepare_in_background();
        console.set_redactor(redactor.clone());
        Ok(Self {
            layout: options.layout(),
            context,
            files,
            redactor,
            options,
            threads,
            runtime: OnceLock::new(),
        })
    }

    /// The session's async runtime, started now if it was not yet.
    pub fn runtime(&self) -> Result<&tokio::runtime::Runtime, RunError> {
        if let Some(runtime) = self.runtime.get() {
            return Ok(runtime);
        }
        let runtime = self.threads.runtime()?;
        Ok(self.runtime.get_or_init(|| runtime))
    }

    /// The operator's `--policy FILE` deciding as a task's policy would,
    /// with the built-in guards of a task whose workdir is the current
    /// directory: the policy of a command run outside any task.
    pub fn policy_here(&self) -> Result<Option<Policy>, SetupError> {
        let context = &self.context;
        let Some(spec) = &context.operator_policy else {
            return Ok(None);
        };
        task_policy(&PolicyInputs {
            config: &context.config,
            home: context.home.as_deref(),
            environ: &context.environ,
            operator: None,
            workdir: &context.cwd,
            protected: Vec::new(),
            layers: std::slice::from_ref(spec),
            sandbox: sandbox_mode(&context.config),
        })
        .map(Some)
    }

    /// The sandbox of a command run outside any task, the current
    /// directory its workdir (`None`: `--no-sandbox`, or none could be
    /// made: the info says why), and the children's environment in it.
    pub fn sandbox_here(
        &self,
    ) -> Result<(Option<Arc<Sandbox>>, SandboxInfo, ChildEnv), SetupError> {
        let context = &self.context;
        let cwd = &context.cwd;
        let workdir = cwd.canonicalize().unwrap_or_else(|_| cwd.clone());
        let (sandbox, info) = task_sandbox(
            &context.config,
            (context.home.as_deref(), &context.environ),
            &workdir,
            true,
            &SandboxPaths {
                visible: vec![cwd.clone()],
                ..SandboxPaths::default()
            },
        )?;
        let mut env = context.child_env.clone();
        child_env_for(&mut env, sandbox.as_deref(), &workdir, &context.config);
        Ok((sandbox, info, env))
    }

    /// Starts the runtime, prepares `tasks`, lets the door `check` them,
    /// and opens the outputs, held for the run: a symbolic link where
    /// outputs would go is refused before anything runs (`hint` says what
    /// to do). On any error the tasks' worktrees go.
    pub fn prepare(
        &self,
        tasks: &[TaskSpec],
        check: impl FnOnce(&RunContext, &[PreparedTask]) -> Result<(), RunError>,
        hint: &str,
    ) -> Result<(Vec<PreparedTask>, report::OpenOutputs), RunError> {
        self.runtime()?;
        let context = &self.context;
        let prepared = super::prepare_all(context, tasks).map_err(RunError::Prepare)?;
        let opened = check(context, &prepared).and_then(|()| {
            self.layout
                .open(&context.cwd)
                .map_err(|error| RunError::usage(error.to_string(), Some(hint)))
        });
        match opened {
            Ok(outputs) => Ok((prepared, outputs)),
            Err(error) => {
                super::discard(&prepared);
                Err(error)
            }
        }
    }

    /// Runs the prepared tasks (a resumed run's with `resuming`) through
    /// the one [`super::execute`], into `outputs`. The runtime started
    /// in [`Self::prepare`]; should it not start, the tasks' worktrees go.
    pub fn execute(
        &self,
        prepared: Vec<PreparedTask>,
        resuming: Option<pause::Resuming<'_>>,
        outputs: &report::OpenOutputs,
        console: &mut dyn Console,
    ) -> Result<RunReport, RunError> {
        let runtime = match self.runtime() {
            Ok(runtime) => runtime,
            Err(error) => {
                super::discard(&prepared);
                return Err(error);
            }
        };
        // `--jobs`: the tasks' worktrees are made on a thread of their
        // own as their slots come, overlapped with the tasks running.
        let context = &self.context;
        let feed = super::lazy::Feed::new(&prepared, context.jobs);
        let report = std::thread::scope(|scope| {
            // Stopped however the batch ends, so the thread ends too.
            let _stop = feed.as_ref().map(super::lazy::StopOnDrop);
            if let Some(feed) = &feed {
                let prepared = &prepared;
                scope.spawn(move || feed.work(context, prepared));
            }
            runtime.block_on(super::execute(
                context,
                (&prepared, feed.as_ref()),
                resuming,
                &self.layout,
                outputs,
                self.redactor.clone(),
                console,
            ))
        });
        Ok(report)
    }

    /// [`finish`] with this session's outputs and `$GITHUB_OUTPUT`.
    pub fn finish(&self, console: &dyn Console, report: &RunReport, totals: String) {
        let ending = Ending {
            totals,
            code: report.exit_code(),
            layout: &self.layout,
            github_output: self.options.github_output.as_deref(),
            seed: &self.context.run_id,
        };
        finish(console, report, &ending);
    }
}

/// How a run ends, beyond its report.
pub struct Ending<'a> {
    /// The line of totals (stdout).
    pub totals: String,
    /// The exit code the run ends with, as the step outputs' `status`.
    pub code: u8,
    pub layout: &'a OutputLayout,
    /// `$GITHUB_OUTPUT`, when set.
    pub github_output: Option<&'a Path>,
    /// Seeds the delimiter of multi-line step outputs: the run id.
    pub seed: &'a str,
}

/// The one end of a run: output errors, tampering and warnings (stderr),
/// the totals (stdout), and the step outputs.
pub fn finish(console: &dyn Console, report: &RunReport, ending: &Ending<'_>) {
    if let Some(error) = &report.output_error {
        console.error(&format!("error: could not write all outputs: {error}"));
    }
    for finding in &report.tampering {
        console.error(&format!("warning: output tampering: {finding}"));
    }
    for warning in &report.warnings {
        console.error(warning);
    }
    console.result(&ending.totals);
    if let Some(path) = ending.github_output {
        let outputs = report.github_outputs(ending.code, ending.layout);
        let text = report::github_output_text(&outputs, ending.seed);
        if let Err(error) = report::append_github_output(path, &text) {
            console.error(&format!("error: could not write the step outputs: {error}"));
        }
    }
}

/// One warning line on stderr when children run unconfined (docs/security.md S1).
pub(crate) fn warn_unconfined(console: &dyn Console, prepared: &[PreparedTask]) {
    let (confined, unconfined): (Vec<&PreparedTask>, Vec<&PreparedTask>) =
        prepared.iter().partition(|task| task.sandbox.confined());
    let reasons: Vec<String> = unconfined
        .iter()
        .map(|task| {
            task.sandbox
                .reason
                .as_deref()
                .unwrap_or("unknown reason")
                .to_owned()
        })
        .collect();
    let missing: Vec<String> = confined
        .iter()
        .flat_map(|task| task.sandbox.missing.iter().cloned())
        .collect();
    let unbounded: Vec<String> = confined
        .iter()
        .flat_map(|task| task.sandbox.missing_bounds.iter().cloned())
        .collect();
    let lines = [
        (
            reasons,
            "warning: no sandbox: shell commands and external tools run UNCONFINED (",
            ")",
        ),
        (
            missing,
            "warning: reduced sandbox (safety.sandbox_require: landlock): missing layer: ",
            "",
        ),
        (unbounded, "warning: sandbox without a bound: ", ""),
    ];
    for (mut items, before, after) in lines {
        items.dedup();
        if !items.is_empty() {
            // Not `warn`: shown even with --quiet.
            console.error(&format!("{before}{}{after}", items.join("; ")));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::{Entry, Loaded, RunOptions, Session, Threads};
    use crate::config::Config;
    use crate::core::Environ;
    use crate::report::{Level, Printer};
    use crate::runner::RunFlags;

    #[test]
    fn opening_starts_no_runtime_and_the_first_use_starts_the_one() {
        let environ = Environ::from_pairs([]);
        let mut console = Printer::new(Level::Quiet, false, &environ);
        let loaded = Loaded {
            config: Config::default(),
            files: Vec::new(),
            cwd: std::env::temp_dir(),
            home: None,
            operator_policy: None,
            environ,
            unsaved: HashMap::new(),
        };
        let options = RunOptions::local(RunFlags::default(), &loaded);
        let session = Session::open(
            loaded,
            options,
            Entry::default(),
            Threads::Current,
            &mut console,
        )
        .unwrap();
        assert!(session.runtime.get().is_none(), "open started a runtime");
        let first: *const tokio::runtime::Runtime = session.runtime().unwrap();
        assert!(std::ptr::eq(first, session.runtime().unwrap()));
    }
}
