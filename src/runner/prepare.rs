//! Everything about a task that can be wrong is found before anything
//! runs: workdir, provider, cassette, policy, tools. A problem here is a
//! usage error (exit 2) and no task starts.

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::RunContext;
use super::agents_md::{self, AgentsMd};
use super::error::SetupError;
use super::workspace::TaskGit;
use crate::agent::{ContextWindow, Limits};
use crate::config::{Config, GitAuthor, Origin, TaskSettings};
use crate::core::Environ;
use crate::core::event::SandboxInfo;
use crate::core::exit::Failure;
use crate::core::span::Span;
use crate::git::{GitError, TaskWorktree};
use crate::llm::cassette::{Cassette, CassetteError};
use crate::llm::failing::Failing;
use crate::llm::record::Recorder;
use crate::llm::replay::Replay;
use crate::llm::{self, Provider, ProviderConfig, ProviderError};
use crate::policy::{GuardSettings, Policy, PolicySpec, SandboxMode};
use crate::task::TaskSpec;
use crate::tools::sandbox::home as home_view;
use crate::tools::sandbox::{self, Sandbox, SandboxSettings, Unavailable};
use crate::tools::{Registry, ToolCtx, builtin, external};

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
    /// one task: [`super::prepare_all`] drops them otherwise); taken by
    /// the first start.
    pub start_git: std::sync::Mutex<Option<TaskGit>>,
}

/// Why a task cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: task `{task}`: {message}", file.display(), span.map(|span| format!(":{span}")).unwrap_or_default())]
pub struct PrepareError {
    pub file: PathBuf,
    /// Where in `file` the problem is, when one field is to blame.
    pub span: Option<Span>,
    pub task: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Opened cassettes, shared by the tasks that replay them.
#[derive(Default)]
pub struct Cassettes {
    open: HashMap<PathBuf, Arc<Cassette>>,
}

impl Cassettes {
    fn get(&mut self, path: &Path) -> Result<Arc<Cassette>, CassetteError> {
        if let Some(cassette) = self.open.get(path) {
            return Ok(cassette.clone());
        }
        let cassette = Cassette::open(path)?;
        self.open.insert(path.to_owned(), cassette.clone());
        Ok(cassette)
    }

    /// The cassette `path` beside `task_file`, opened as every file a task
    /// file names is: beneath its repository, through no link, never a
    /// blocked path (docs/security.md S8).
    fn get_beside(
        &mut self,
        run: &RunContext,
        task_file: &Path,
        path: &Path,
    ) -> Result<Arc<Cassette>, CassetteError> {
        if let Some(cassette) = self.open.get(path) {
            return Ok(cassette.clone());
        }
        let named = crate::core::named::NamedFiles::new(
            &run.config.safety.blocked_paths,
            run.home.as_deref(),
        );
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = named
            .read_text(&run.cwd.join(task_file), &name)
            .map_err(|source| CassetteError::Named {
                path: path.to_owned(),
                source,
            })?;
        let cassette = Cassette::from_text(path, &text)?;
        self.open.insert(path.to_owned(), cassette.clone());
        Ok(cassette)
    }
}

/// Prepares one task.
pub fn prepare(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
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
    if commit_enabled {
        let git =
            git_preflight(run, &found, &workdir, &outputs, start_git.take()).map_err(setup)?;
        start_git = Some(git);
        if run.jobs > 1 || run.copies.expanded {
            worktree = isolate(run, task, &found).map_err(setup)?;
            if worktree.is_none() {
                in_place = Some("the workdir is not in a git repository".to_owned());
            }
        }
    } else if (run.jobs > 1 || run.copies.expanded) && !run.resuming {
        match super::parallel::isolate_reader(run, task, &found, &workdir) {
            Ok(made) => worktree = Some(made),
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
    Ok(prepared)
}

/// The task's own worktree when the workdir is in a repository.
pub(super) fn isolate(
    run: &RunContext,
    task: &TaskSpec,
    found: &crate::git::Found,
) -> Result<Option<TaskWorktree>, SetupError> {
    let git = |error: GitError| SetupError::Git {
        message: format!("git: {error}"),
        hint: "pass --no-commit to run without git",
    };
    let workspace = found.workspace().map_err(git)?;
    workspace
        .map(|workspace| workspace.add_worktree(&run.run_id, &task.id))
        .transpose()
        .map_err(git)
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
    let tool_ctx = tool_ctx(run, workdir, guarded, sandbox);
    let limits = Limits {
        max_iterations: settings.max_iterations,
        timeout: settings.timeout,
        max_total_tokens: settings.max_total_tokens,
        max_cost_usd: settings.max_cost_usd,
        max_tool_output_chars: settings.max_tool_output_chars,
        ..Limits::default()
    };
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
    })
}

/// What the task's sandbox shows, protects and hides beyond the workdir.
fn sandbox_paths(run: &RunContext, protected: &[PathBuf]) -> SandboxPaths {
    SandboxPaths {
        protected: protected
            .iter()
            .cloned()
            .chain(
                run.task_files
                    .iter()
                    .map(|file| file.canonicalize().unwrap_or_else(|_| file.clone())),
            )
            .collect(),
        hidden: run.outputs.iter().map(|path| run.cwd.join(path)).collect(),
        // The start directory, the children's `PATH` and the operator's
        // MCP servers' programs: programs installed under the host's
        // `/tmp` stay reachable (read-only) under the private one, with
        // their install prefix (a virtualenv's `lib/` beside its `bin/`).
        // A task file's servers add nothing: the repository does not
        // choose what of the host's `/tmp` its code may read
        // (docs/security.md S1); their programs must be on the `PATH` or
        // inside the run's directory.
        visible: std::iter::once(run.cwd.clone())
            .chain(
                run.child_env
                    .get("PATH")
                    .unwrap_or_default()
                    .split(':')
                    .filter(|entry| entry.starts_with('/'))
                    .flat_map(|entry| {
                        // Under the home the entry alone: its prefix is
                        // shown only when it is a toolchain directory
                        // (docs/sandbox.md, "The home").
                        let entry = Path::new(entry);
                        match &run.home {
                            Some(home) if entry.starts_with(home) => vec![entry.to_path_buf()],
                            _ => with_prefix(entry),
                        }
                    }),
            )
            .chain(
                run.config
                    .tools
                    .mcp
                    .iter()
                    .map(|server| Path::new(&server.command))
                    .filter(|command| command.is_absolute())
                    .filter_map(Path::parent)
                    .flat_map(with_prefix),
            )
            .collect(),
        control: None,
    }
}

/// The context of the task's tool calls: its roots, what they never read
/// or write, the children's environment and the sandbox.
fn tool_ctx(
    run: &RunContext,
    workdir: PathBuf,
    guarded: Vec<PathBuf>,
    sandbox: Option<Arc<Sandbox>>,
) -> ToolCtx {
    let mut env = run.child_env.clone();
    child_env_for(&mut env, sandbox.as_deref(), &workdir, &run.config);
    // `tools.builtin.run_shell.timeout_seconds`: the default, and the
    // longest a call may ask for.
    let shell = &run.config.tools.builtin["run_shell"];
    // ybs's own directories, unless the task works inside one.
    let own: Vec<PathBuf> = own_dirs(run.home.as_deref(), &run.environ)
        .into_iter()
        .filter(|dir| !workdir.starts_with(dir))
        .collect();
    ToolCtx {
        allowed_roots: std::iter::once(workdir.clone())
            .chain(allowed_roots(&run.config, run.home.as_deref()))
            .collect(),
        workdir,
        blocked_paths: run
            .config
            .safety
            .blocked_paths
            .iter()
            .map(|p| expand_home(Path::new(p), run.home.as_deref()))
            .chain(own)
            .map(|p| p.display().to_string())
            .collect(),
        protected_paths: guarded,
        env,
        shell_timeout: shell.timeout.unwrap_or(Duration::from_secs(30)),
        max_shell_timeout: shell.max_timeout.unwrap_or(Duration::from_secs(3600)),
        output_cap_bytes: 1 << 20,
        sandbox,
    }
}

/// The note that a config file or a `YBS_*` variable replaced the
/// provider or model the task file pins: a `hint: ` on the console for the
/// first such task of the run, in every such task's transcript.
fn pin_notes(run: &RunContext, task: &TaskSpec) -> Vec<String> {
    let Some(replaced) = run.config.replaced_pins(task) else {
        return Vec::new();
    };
    let first = !run
        .pins_noted
        .swap(true, std::sync::atomic::Ordering::Relaxed);
    let prefix = if first { crate::core::event::HINT } else { "" };
    vec![format!("{prefix}{replaced}")]
}

/// The per-task part of the children's environment: `PATH` without
/// workdir entries, `TMPDIR` in the sandbox's private temp dir. `HOME`
/// stays the user's (read-only in the sandbox, its credentials hidden, its
/// toolchain caches writable for the task only: docs/sandbox.md); an
/// empty directory in the private temp dir stands in when there is none.
pub fn child_env_for(
    env: &mut crate::tools::ChildEnv,
    sandbox: Option<&Sandbox>,
    workdir: &Path,
    _config: &Config,
) {
    env.confine_path(workdir);
    if let Some(sandbox) = sandbox {
        env.set("TMPDIR", &sandbox.child_tmpdir().display().to_string());
        let home = env.get("HOME").map(Path::new);
        if !home.is_some_and(|home| home.is_absolute() && home.is_dir()) {
            env.set("HOME", &sandbox.child_home().display().to_string());
        }
    }
}

/// A task's sandbox (`None`: unconfined) and what the manifest says of it.
pub type TaskSandbox = (Option<Arc<Sandbox>>, SandboxInfo);

/// Why a sandbox is off when the operator turned it off.
pub const SANDBOX_DISABLED: &str = "disabled by --no-sandbox or safety.sandbox_enabled: false";

/// The confinement [`task_sandbox`] gives a task's programs under
/// `config`, from the probe, for the policy (docs/policy.md, "The sandbox
/// decides"): `None` with `--no-sandbox` or when a required layer is
/// missing (no program runs then), `Reduced` without namespaces when the
/// operator accepts it.
pub fn sandbox_mode(config: &Config) -> SandboxMode {
    if !config.safety.sandbox_enabled {
        return SandboxMode::None;
    }
    let probe = sandbox::probe();
    let require = sandbox::Require::parse(&config.safety.sandbox_require).unwrap_or_default();
    match (probe.available(), &probe.namespaces, require) {
        (false, _, _) => SandboxMode::None,
        (true, Ok(()), _) => SandboxMode::Full,
        (true, Err(_), sandbox::Require::Landlock) => SandboxMode::Reduced,
        (true, Err(_), sandbox::Require::All) => SandboxMode::None,
    }
}

/// A program directory and, for `PREFIX/bin`, its install prefix too (a
/// virtualenv or an install prefix keeps its libraries beside `bin/`).
/// The sandbox binds back only those under the host's `/tmp` (and never
/// `/tmp` itself).
fn with_prefix(dir: &Path) -> Vec<PathBuf> {
    let mut paths = vec![dir.to_path_buf()];
    if let (Some(name), Some(parent)) = (dir.file_name(), dir.parent())
        && name == "bin"
    {
        paths.push(parent.to_path_buf());
    }
    paths
}

/// Paths a task's sandbox protects, hides or keeps visible besides the
/// built-in ones.
#[derive(Debug, Clone, Default)]
pub struct SandboxPaths {
    /// Read-only inside the sandbox (existing or not): the run's task and
    /// policy files, the runner's control files.
    pub protected: Vec<PathBuf>,
    /// Hidden: ybs's outputs.
    pub hidden: Vec<PathBuf>,
    /// Host directories that stay visible under the private `/tmp`: the
    /// run's directory.
    pub visible: Vec<PathBuf>,
    /// The workdir's [`control_paths`], when the caller has them already
    /// (else they are found).
    pub control: Option<Vec<PathBuf>>,
}

/// The kernel confinement of a task's children (docs/security.md S1, S6): off
/// when the operator said so; when a required layer is missing, a task
/// that may run programs (`run_shell`, external tools, checks) is
/// refused, any other runs unconfined, and the manifest says so.
pub fn task_sandbox(
    config: &Config,
    (home, environ): (Option<&Path>, &Environ),
    workdir: &Path,
    may_run_programs: bool,
    paths: &SandboxPaths,
) -> Result<TaskSandbox, SetupError> {
    if !config.safety.sandbox_enabled {
        return Ok((None, sandbox::unconfined(SANDBOX_DISABLED)));
    }
    let read_only = read_only_paths(config, workdir, paths);
    let mut visible = paths.visible.clone();
    if let Some(home) = home {
        // The operator's external tool definitions.
        visible.push(home.join(".ybs/tools"));
    }
    visible.extend(
        config
            .tools
            .search_paths
            .iter()
            .map(|path| expand_home(Path::new(path), home)),
    );
    visible.extend(allowed_roots(config, home));
    let writable: Vec<PathBuf> = allowed_roots(config, home)
        .into_iter()
        .chain(
            config
                .safety
                .sandbox_writable_paths
                .iter()
                .map(|path| expand_home(Path::new(path), home)),
        )
        .collect();
    // The external tools' programs (the MCP servers' are in `visible`).
    let programs: Vec<PathBuf> = config
        .tools
        .external
        .iter()
        .map(|tool| expand_home(&tool.path, home))
        .collect();
    // Their directories stay visible wherever they are, under the host's
    // `/tmp` too (read-only, with an install prefix): the operator put
    // them there, and a `--schema` probe that cannot reach its program
    // would leave the task without the tool.
    visible.extend(
        programs
            .iter()
            .filter_map(|program| program.parent())
            .flat_map(with_prefix),
    );
    // The home by allow-list (docs/sandbox.md, "The home"): an empty
    // directory of the task's own, the toolchains, the `PATH` entries
    // under it and the operator's `safety.sandbox_home_visible` bound
    // back; the blocked paths hidden inside them, and never given up for
    // a path kept beneath one (it is bound back on top).
    if let Some(home) = home {
        visible.extend(home_view::visible(
            home,
            environ,
            &environ.var("PATH").unwrap_or_default(),
        ));
        visible.extend(
            config
                .safety
                .sandbox_home_visible
                .iter()
                .map(|path| expand_home(Path::new(path), Some(home))),
        );
    }
    let mut blocked = sandbox_blocked(config, home, &visible);
    block_own_dirs(&mut blocked, home, environ);
    let near: Vec<&Path> = std::iter::once(workdir)
        .chain(paths.visible.first().map(PathBuf::as_path))
        .collect();
    let settings = SandboxSettings {
        writable,
        network: config.safety.sandbox_network,
        unix_sockets: config.safety.sandbox_unix_sockets,
        require: sandbox::Require::parse(&config.safety.sandbox_require).unwrap_or_default(),
        read_only,
        hidden: paths.hidden.clone(),
        blocked,
        visible,
        scratch: home_view::scratch(home, environ),
        home: home.map(Path::to_path_buf),
        gitconfig: home_view::gitconfig(home, environ),
        masked: home_view::masked(home, environ, &near),
        max_processes: config.safety.max_processes,
    };
    match Sandbox::prepare(workdir, &settings) {
        Ok(sandbox) => {
            let info = sandbox.info();
            Ok((Some(Arc::new(sandbox)), info))
        }
        Err(Unavailable(reason)) if may_run_programs => Err(SetupError::Sandbox {
            message: format!(
                "kernel confinement is unavailable ({reason}), and this task runs programs (run_shell, external tools or checks){}",
                apparmor_cause()
            ),
            hint: "pass --no-sandbox to run them unconfined (every output then says so), set safety.sandbox_require: landlock in operator config to accept Landlock and seccomp without namespaces, or run ybs where user namespaces, Landlock and seccomp work",
        }),
        Err(Unavailable(reason)) => Ok((None, sandbox::unconfined(&reason))),
    }
}

/// The cause and the fix when AppArmor's restriction of user namespaces
/// is why they are refused (docs/sandbox.md, "AppArmor"), after `; `.
fn apparmor_cause() -> String {
    sandbox::apparmor::current(sandbox::probe().namespaces.is_err())
        .map(|restricted| format!("; cause: {}; fix: {}", restricted.cause(), restricted.fix()))
        .unwrap_or_default()
}

/// What the sandbox binds read-only: the workdir's control files, the
/// protected files and the config files read.
fn read_only_paths(config: &Config, workdir: &Path, paths: &SandboxPaths) -> Vec<PathBuf> {
    let mut read_only = paths
        .control
        .clone()
        .unwrap_or_else(|| control_paths(workdir));
    read_only.extend(paths.protected.iter().cloned());
    read_only.extend(
        config
            .files
            .iter()
            .map(|file| file.canonicalize().unwrap_or_else(|_| file.clone())),
    );
    read_only
}

/// ybs's own state (the resume keys) and cache are blocked whatever
/// `safety.blocked_paths` says; made now when missing, so one made during
/// the task (a paused task's key, with `--jobs`) is hidden too.
fn block_own_dirs(blocked: &mut Vec<PathBuf>, home: Option<&Path>, environ: &Environ) {
    for dir in own_dirs(home, environ) {
        if std::fs::symlink_metadata(&dir).is_err() && std::fs::create_dir_all(&dir).is_ok() {
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700));
        }
        if !blocked.contains(&dir) {
            blocked.push(dir);
        }
    }
}

/// ybs's own directories, hidden from every confined program and blocked
/// for the built-in file tools whatever `safety.blocked_paths` says
/// (docs/sandbox.md): the state directory (`$XDG_STATE_HOME/ybs`, else
/// `~/.local/state/ybs`: the resume keys) and the cache directory
/// (`$XDG_CACHE_HOME/ybs`, else `~/.cache/ybs`: tool schemas, metrics).
pub fn own_dirs(home: Option<&Path>, environ: &Environ) -> Vec<PathBuf> {
    let home = home.map(|home| home.display().to_string());
    let env = |name: &str| match name {
        "HOME" => home.clone(),
        _ => environ.var(name),
    };
    super::state::key_dir(&env)
        .and_then(|keys| keys.parent().map(Path::to_path_buf))
        .into_iter()
        .chain(super::tools::cache_dir(
            home.as_deref().map(Path::new),
            environ,
        ))
        .collect()
}

/// `safety.blocked_paths` to hide from confined programs (docs/sandbox.md):
/// the plain paths (`~/.ssh`, not the `**/.env` or `/proc/*/environ`
/// patterns). One that holds a path the children need stays hidden: the
/// sandbox binds the kept path back on top (and the workdir is checked by
/// the sandbox).
fn sandbox_blocked(config: &Config, home: Option<&Path>, shown: &[PathBuf]) -> Vec<PathBuf> {
    config
        .safety
        .blocked_paths
        .iter()
        .filter(|entry| !entry.contains(['*', '?', '[', '{']))
        .map(|entry| expand_home(Path::new(entry), home))
        .filter(|path| path.is_absolute())
        // The sandbox makes its own `/tmp`, `/proc` and `/dev`; a host
        // path under `/tmp` it shows again (a home there) keeps its
        // blocked paths hidden.
        .filter(|path| {
            ["/tmp", "/proc", "/dev"]
                .iter()
                .all(|own| !path.starts_with(own) && !Path::new(own).starts_with(path))
                || home
                    .into_iter()
                    .chain(shown.iter().map(PathBuf::as_path))
                    .any(|dir| path.starts_with(dir) && path != dir)
        })
        .collect()
}

/// The control files of a workdir no child may change, existing or not
/// (docs/security.md S6): `.git` (and, for a worktree's gitfile, the git
/// directory it names), `.github/workflows`, `.github/actions`,
/// `.ybs.json`, each submodule's `.git`.
pub fn control_paths(workdir: &Path) -> Vec<PathBuf> {
    control_paths_with(workdir, crate::git::submodule_paths(workdir))
}

/// [`control_paths`] with the repository's submodules already read.
fn control_paths_with(workdir: &Path, submodules: Vec<PathBuf>) -> Vec<PathBuf> {
    let git = workdir.join(".git");
    let mut paths = vec![git.clone()];
    if git.is_file()
        && let Ok(text) = std::fs::read_to_string(&git)
        && let Some(dir) = text.trim().strip_prefix("gitdir:")
    {
        let dir = workdir.join(dir.trim());
        if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
            paths.push(dir.join(common.trim()));
        }
        paths.push(dir);
    }
    paths.extend([
        workdir.join(".github/workflows"),
        workdir.join(".github/actions"),
        workdir.join(".ybs.json"),
    ]);
    // A submodule's `.git` (or, not checked out, its whole directory: a
    // `.git` made there would be one).
    for submodule in submodules {
        if submodule.starts_with(workdir) {
            let git = submodule.join(".git");
            paths.push(if git.symlink_metadata().is_ok() {
                git
            } else {
                submodule
            });
        }
    }
    paths
        .into_iter()
        .map(|path| path.canonicalize().unwrap_or(path))
        .collect()
}

/// docs/git.md: a repository that cannot take the task's commit stops the run
/// before anything runs (exit 2): the user's uncommitted changes (unless
/// `--allow-dirty`), a locked index, a merge or rebase under way, a
/// repository ybs cannot use. Read-only.
/// `read`: the workspace and snapshot read already (`--allow-dirty`).
/// Returns them, for the task's start.
fn git_preflight(
    run: &RunContext,
    found: &crate::git::Found,
    workdir: &Path,
    outputs: &[PathBuf],
    read: Option<TaskGit>,
) -> Result<TaskGit, SetupError> {
    let git = match read {
        Some(git) => git,
        None => TaskGit::found(found, workdir, outputs).map_err(|error| SetupError::Git {
            message: format!("git: {error}"),
            hint: "pass --no-commit to run without git",
        })?,
    };
    if !run.allow_dirty
        && !run.resuming
        && let Some(paths) = git.dirty()
    {
        return Err(SetupError::Git {
            message: format!("the work tree has uncommitted changes: {paths}"),
            hint: "commit or stash them first, or pass --allow-dirty (your changes then stay out of the task's commit), or --no-commit",
        });
    }
    git.ready_in(found).map_err(|error| match error {
        GitError::IndexLocked { lock } => SetupError::Git {
            message: format!(
                "the git index is locked: {} exists, so another git process is running or one crashed",
                lock.display()
            ),
            hint: "remove that file once no git process is running, or pass --no-commit",
        },
        GitError::InProgress { state } => SetupError::Git {
            message: format!("the repository is in the middle of a {state}"),
            hint: "finish or abort it first, or pass --no-commit",
        },
        error => SetupError::Git {
            message: format!("git: {error}"),
            hint: "pass --no-commit to run without git",
        },
    })?;
    Ok(git)
}

/// The directory `task` runs in, canonical. It must lie inside the
/// repository the task file belongs to (the git work tree holding it, or
/// the directory ybs was started in when there is none) or inside a root
/// the operator lists in `safety.allowed_workdirs`: a task file cannot
/// move the run's root to `/` or the home directory (docs/security.md S5).
pub fn task_workdir(
    config: &Config,
    cwd: &Path,
    home: Option<&Path>,
    task: &TaskSpec,
) -> Result<PathBuf, PrepareError> {
    let workdir = resolve_workdir(cwd, task.workdir.as_deref()).map_err(|error| PrepareError {
        file: task.file.clone(),
        span: task.workdir_span,
        task: task.id.clone(),
        message: error.to_string(),
        hint: error.hint(),
    })?;
    check_workdir_root(config, cwd, home, task, &workdir)?;
    Ok(workdir)
}

/// The check of [`task_workdir`] on an already canonical `workdir`.
pub fn check_workdir_root(
    config: &Config,
    cwd: &Path,
    home: Option<&Path>,
    task: &TaskSpec,
    workdir: &Path,
) -> Result<(), PrepareError> {
    let repository = task_repository(cwd, &task.file);
    let allowed: Vec<PathBuf> = config
        .safety
        .allowed_workdirs
        .iter()
        .filter_map(|root| {
            cwd.join(expand_home(Path::new(root), home))
                .canonicalize()
                .ok()
        })
        .collect();
    if workdir.starts_with(&repository) || allowed.iter().any(|root| workdir.starts_with(root)) {
        return Ok(());
    }
    let written = task
        .workdir
        .as_deref()
        .map_or_else(|| ".".to_owned(), |dir| dir.display().to_string());
    Err(PrepareError {
        file: task.file.clone(),
        span: task.workdir_span,
        task: task.id.clone(),
        message: format!(
            "`workdir` `{written}` resolves to `{}`, outside `{}`, the repository the task file belongs to",
            workdir.display(),
            repository.display()
        ),
        hint: Some(
            "use a directory inside the repository, or list the root in `safety.allowed_workdirs` in the operator config (~/.config/ybs/config.json or --config)"
                .to_owned(),
        ),
    })
}

/// The git work tree holding `file` (the nearest directory above it with
/// a `.git` entry), or `cwd` when there is none; canonical.
fn task_repository(cwd: &Path, file: &Path) -> PathBuf {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
    let Ok(file) = cwd.join(file).canonicalize() else {
        return cwd;
    };
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map_or(cwd, Path::to_owned)
}

fn resolve_workdir(cwd: &Path, workdir: Option<&Path>) -> Result<PathBuf, SetupError> {
    let path = match workdir {
        Some(dir) if dir.is_absolute() => dir.to_owned(),
        Some(dir) => cwd.join(dir),
        None => cwd.to_owned(),
    };
    let canonical = path.canonicalize().map_err(|error| SetupError::Workdir {
        message: format!("workdir `{}` cannot be used: {error}", path.display()),
    })?;
    if !canonical.is_dir() {
        return Err(SetupError::Workdir {
            message: format!("workdir `{}` is not a directory", path.display()),
        });
    }
    Ok(canonical)
}

/// `~` at the start of `path` as the home directory.
pub(super) fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_owned(),
    }
}

/// Files no tool may write: the run's task file, the policy file and the
/// runner's GitHub control files (docs/security.md S6).
fn protected_paths(run: &RunContext, task: &TaskSpec) -> Vec<PathBuf> {
    protected_files(
        &run.cwd,
        &task.file,
        run.policy_file.as_deref(),
        &run.environ,
    )
}

/// What the file tools and the shell guard never write
/// (docs/security.md S6): `protected`, the workdir's control files and
/// `./.ybs.json` (the sandbox binds these read-only on its own), every
/// task and config file the run read, and ybs's outputs (hidden in the
/// sandbox, but the built-in tools run outside it).
fn guarded_paths(
    run: &RunContext,
    workdir: &Path,
    protected: &[PathBuf],
    control: &[PathBuf],
) -> Vec<PathBuf> {
    let canonical = |path: PathBuf| path.canonicalize().unwrap_or(path);
    let mut paths = protected.to_vec();
    paths.extend(control.iter().cloned());
    paths.push(canonical(run.cwd.join(".ybs.json")));
    paths.extend(
        run.task_files
            .iter()
            .map(|file| canonical(run.cwd.join(file))),
    );
    paths.extend(
        run.config
            .files
            .iter()
            .map(|file| canonical(run.cwd.join(file))),
    );
    // An output directory holding the workdir (`--out .`) would refuse
    // every write.
    paths.extend(
        run.outputs
            .iter()
            .map(|path| canonical(run.cwd.join(path)))
            .filter(|path| !workdir.starts_with(path)),
    );
    paths.sort();
    paths.dedup();
    paths
}

/// The protected files for a task file and an optional policy file.
pub fn protected_files(
    cwd: &Path,
    task_file: &Path,
    policy_file: Option<&Path>,
    environ: &Environ,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = vec![cwd.join(task_file)];
    paths.extend(policy_file.map(|p| cwd.join(p)));
    for var in crate::policy::guards::PROTECTED_VARIABLES {
        if let Some(value) = environ.var_os(var) {
            paths.push(PathBuf::from(value));
        }
    }
    paths
        .into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

/// What a task's policy is built from.
pub struct PolicyInputs<'a> {
    pub config: &'a Config,
    pub home: Option<&'a Path>,
    /// ybs's environment: the guards read `$PATH` from it.
    pub environ: &'a Environ,
    pub operator: Option<&'a PolicySpec>,
    pub workdir: &'a Path,
    pub protected: Vec<PathBuf>,
    pub layers: &'a [PolicySpec],
    /// The confinement the task's shell commands get ([`sandbox_mode`]).
    pub sandbox: SandboxMode,
}

/// Builds a task's policy (guards from `safety.*`, the operator ceiling,
/// the task's layers) and checks its `examples`. Shared by `run`,
/// `validate` and `policy explain`.
pub fn task_policy(inputs: &PolicyInputs<'_>) -> Result<Policy, SetupError> {
    let policy = build_policy(inputs)?;
    let failures = policy.check_examples(policy.examples());
    if !failures.is_empty() {
        let listed: Vec<String> = failures.iter().map(ToString::to_string).collect();
        return Err(SetupError::Policy {
            message: format!("policy examples fail: {}", listed.join("; ")),
            hint: Some(EXAMPLES_HINT),
        });
    }
    Ok(policy)
}

/// Said with failing policy examples.
pub const EXAMPLES_HINT: &str =
    "fix the rules or the examples; `ybs policy explain 'CALL'` shows how a call is decided";

/// [`task_policy`] without checking the examples.
pub fn build_policy(inputs: &PolicyInputs<'_>) -> Result<Policy, SetupError> {
    let mut guards = GuardSettings::new(inputs.workdir.to_owned(), inputs.home.map(Path::to_owned));
    guards.allowed_roots = allowed_roots(inputs.config, inputs.home);
    guards
        .blocked_commands
        .clone_from(&inputs.config.safety.blocked_commands);
    guards
        .blocked_paths
        .clone_from(&inputs.config.safety.blocked_paths);
    guards.protected_paths.clone_from(&inputs.protected);
    guards.program_path = inputs.environ.var_os("PATH").map(ToOwned::to_owned);
    guards.sandbox = inputs.sandbox;
    Policy::build(inputs.operator, inputs.layers, guards).map_err(|e| SetupError::Policy {
        message: e.to_string(),
        hint: None,
    })
}

/// `safety.allowed_paths`, expanded and canonical; missing ones dropped.
fn allowed_roots(config: &Config, home: Option<&Path>) -> Vec<PathBuf> {
    config
        .safety
        .allowed_paths
        .iter()
        .filter_map(|p| expand_home(Path::new(p), home).canonicalize().ok())
        .collect()
}

/// The built-in tools of the task. External tools are discovered when the
/// task starts (`super::tools::task_tools`), so a tool added by an earlier
/// task of the batch is found; here only what can never work is refused.
/// A built-in tool every call of which the policy would refuse is not
/// offered (its schema only costs tokens and invites denied calls): the
/// registry keeps it as withheld.
fn build_registry(
    run: &RunContext,
    task: &TaskSpec,
    policy: &Policy,
) -> Result<Registry, SetupError> {
    let tools = |message: String| SetupError::Tools { message };
    let mut registry = Registry::new();
    let names: Vec<String> = match &task.tools.builtin {
        Some(names) => names.clone(),
        None => builtin::NAMES.iter().map(|n| (*n).to_owned()).collect(),
    };
    let disabled = |name: &str| {
        run.config
            .tools
            .builtin
            .get(name)
            .is_some_and(|tool| !tool.enabled)
    };
    for name in names {
        if disabled(&name) {
            // `tools.builtin.NAME.enabled: false`: not offered, so a call
            // to it is refused as unknown (a task naming it was refused
            // by `Config::check_task` already).
            if task.tools.builtin.is_some() {
                return Err(tools(format!(
                    "built-in tool `{name}` is disabled in the config (`enabled: false`)"
                )));
            }
            continue;
        }
        let tool =
            builtin::get(&name).ok_or_else(|| tools(format!("unknown built-in tool `{name}`")))?;
        if policy.may_allow(&name, run.approver.is_some()) {
            registry.add(tool);
        } else {
            registry.withhold(tool);
        }
    }
    // `tools.caller`: offered like any tool; a call pauses the task.
    for caller in &task.tools.caller {
        registry.add(std::sync::Arc::new(crate::tools::caller::CallerTool::new(
            &caller.name,
            &caller.description,
            caller.parameters.clone(),
        )));
    }
    for name in &task.tools.external {
        if builtin::NAMES.contains(&name.as_str()) {
            return Err(tools(format!(
                "external tool `{name}`: a built-in tool has that name"
            )));
        }
        let disabled = run
            .config
            .tools
            .external
            .iter()
            // The first of a name: a shadowed repository entry says nothing.
            .find(|tool| &tool.name == name)
            .is_some_and(|tool| !tool.enabled);
        if disabled {
            return Err(tools(format!(
                "external tool `{name}` is disabled in the config (`enabled: false`)"
            )));
        }
        if !name.contains('/') && !external::discover::valid_tool_name(name) {
            return Err(tools(format!(
                "external tool `{name}`: not a tool name (letters, digits, `_` and `-`) nor a path (with a `/`)"
            )));
        }
    }
    Ok(registry)
}

/// The provider `settings` name (the replay provider reads the cassette).
pub fn build_provider(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
    settings: &TaskSettings,
) -> Result<Box<dyn Provider>, SetupError> {
    if settings.provider == "replay" {
        let cassette = match &run.cassette {
            Some(path) => cassettes.get(path),
            None => {
                // In `ybs validate`'s words: "no model to run with" unless
                // the replay provider was chosen.
                let path = sibling_cassette(&run.cwd, &task.file).ok_or_else(|| {
                    let (message, _) = missing_model(
                        &run.config,
                        &run.cwd,
                        task,
                        None,
                    )
                    .unwrap_or_else(|| {
                        (
                            format!(
                                "provider `replay` needs a cassette, and `{}` has none beside it",
                                task.file.display()
                            ),
                            String::new(),
                        )
                    });
                    SetupError::Provider {
                        message,
                        hint: Some(NO_MODEL_HINT),
                    }
                })?;
                cassettes.get_beside(run, &task.file, &path)
            }
        };
        let cassette = cassette.map_err(|error| SetupError::Provider {
            message: error.to_string(),
            hint: None,
        })?;
        return Ok(Box::new(Replay::new(cassette, task.id.clone())));
    }
    let mut config = ProviderConfig::new(settings.provider.clone(), settings.model.clone());
    config.endpoint = settings.endpoint.clone();
    config.text_tool_calls = settings.text_tool_calls;
    config.streaming = settings.stream;
    config.request_timeout = settings.llm_timeout;
    config.idle_timeout = settings.llm_idle_timeout;
    config.total_timeout = settings.llm_total_timeout;
    config.max_response_bytes = run.config.llm.max_response_bytes;
    config.prompt_cache = llm::PromptCache {
        enabled: run.config.llm.prompt_cache,
        one_hour: run.config.llm.prompt_cache_1h,
        key: Some(llm::PromptCache::task_key(
            task.file.strip_prefix(&run.cwd).unwrap_or(&task.file),
            &task.id,
        )),
        key_anywhere: run.config.llm.prompt_cache_key,
    };
    // docs/security.md S5: an endpoint chosen by the repository (task file or
    // ./.ybs.json) never receives the operator's key.
    config.endpoint_from_repository = matches!(
        settings.endpoint_origin,
        Origin::TaskFile | Origin::Repository
    );
    let env = |name: &str| run.environ.var(name);
    let provider = match llm::build(&config, &env) {
        Ok(provider) => provider,
        Err(
            error @ (ProviderError::MissingKey { .. }
            | ProviderError::KeyWithheld { .. }
            | ProviderError::Auth { .. }),
        ) => Box::new(Failing::new(settings.provider.clone(), error)),
        Err(error) => {
            return Err(SetupError::Provider {
                message: error.to_string(),
                hint: None,
            });
        }
    };
    Ok(match &run.recorder {
        Some(writer) => Box::new(Recorder::new(provider, writer.clone(), task.id.clone())),
        None => provider,
    })
}

/// Why `task` has no model to run with, when that is so: its provider is
/// `replay` (the built-in default when nothing names one) and there is no
/// cassette (`--cassette`, config `cassette`, or `<stem>.cassette.json`
/// beside its file). The message and its hint.
pub fn missing_model(
    config: &Config,
    cwd: &Path,
    task: &TaskSpec,
    cassette: Option<&Path>,
) -> Option<(String, String)> {
    let settings = config.task_settings(task);
    if settings.provider != "replay"
        || cassette.is_some()
        || config.cassette.is_some()
        || sibling_cassette(cwd, &task.file).is_some()
    {
        return None;
    }
    let chosen = task.llm.provider.is_some() || config.provider_override().is_some();
    let message = if chosen {
        format!(
            "provider `replay` needs a cassette, and `{}` has none beside it",
            task.file.display()
        )
    } else {
        "no model to run with: no provider is set (by `--provider`, `YBS_PROVIDER`, \
         the config's `llm.provider` or the task's `provider:`)"
            .to_owned()
    };
    Some((message, NO_MODEL_HINT.to_owned()))
}

/// The hint of [`missing_model`], in `ybs run` and `ybs validate` alike.
pub const NO_MODEL_HINT: &str = "pass --provider openai|anthropic|ollama --model NAME (or set \
     `llm.provider` and `llm.model` in ~/.config/ybs/config.json); to answer from a recording, \
     pass --cassette FILE or put <task-file-stem>.cassette.json beside the task file";

/// `tasks/x.yaml` → `tasks/x.cassette.json`, if there is an entry of
/// that name (a link there is refused when it is opened, not skipped).
pub(super) fn sibling_cassette(cwd: &Path, task_file: &Path) -> Option<PathBuf> {
    let stem = task_file.file_stem()?.to_string_lossy().to_string();
    let path = cwd
        .join(task_file)
        .with_file_name(format!("{stem}.cassette.json"));
    path.symlink_metadata().is_ok().then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::exit;

    #[test]
    fn an_unusable_workdir_is_a_usage_error_with_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let error = resolve_workdir(dir.path(), Some(Path::new("file"))).unwrap_err();
        assert_eq!(
            error,
            SetupError::Workdir {
                message: format!("workdir `{}` is not a directory", file.display())
            }
        );
        assert_eq!(error.exit_code(), exit::USAGE);
        assert!(error.hint().unwrap().contains("fix the task's `workdir`"));
        let missing = resolve_workdir(dir.path(), Some(Path::new("missing"))).unwrap_err();
        assert!(
            missing.to_string().starts_with(&format!(
                "workdir `{}` cannot be used: ",
                dir.path().join("missing").display()
            )),
            "{missing}"
        );
    }

    #[test]
    fn a_blocked_path_holding_a_kept_one_stays_blocked() {
        let home = tempfile::tempdir().unwrap();
        let home = home.path().canonicalize().unwrap();
        std::fs::create_dir_all(home.join("tools/bin")).unwrap();
        std::fs::create_dir_all(home.join(".ssh")).unwrap();
        std::os::unix::fs::symlink(home.join("tools"), home.join(".tools-link")).unwrap();
        let mut config = Config::default();
        config.safety.blocked_paths = ["~/.ssh", "~/tools", "~/.tools-link", "~/tools/bin/x"]
            .iter()
            .map(|path| (*path).to_owned())
            .collect();
        // `~/tools/bin` is kept (a `PATH` entry): the sandbox binds it back
        // on top of the hidden `~/tools`, which is never given up.
        let shown = vec![home.join("tools/bin")];
        let blocked = sandbox_blocked(&config, Some(&home), &shown);
        assert_eq!(
            blocked,
            vec![
                home.join(".ssh"),
                home.join("tools"),
                home.join(".tools-link"),
                home.join("tools/bin/x")
            ]
        );
    }

    #[test]
    fn a_setup_hint_is_the_one_the_user_sees() {
        let error = SetupError::Git {
            message: "git: broken".to_owned(),
            hint: "pass --no-commit to run without git",
        };
        assert_eq!(error.to_string(), "git: broken");
        assert_eq!(error.exit_code(), exit::USAGE);
        assert_eq!(
            error.hint().as_deref(),
            Some("pass --no-commit to run without git")
        );
        let tools = SetupError::Tools {
            message: "unknown built-in tool `x`".to_owned(),
        };
        assert_eq!(tools.hint(), None);
    }

    #[test]
    fn a_bin_directory_brings_its_install_prefix() {
        assert_eq!(
            with_prefix(Path::new("/tmp/ci/venv/bin")),
            [
                PathBuf::from("/tmp/ci/venv/bin"),
                PathBuf::from("/tmp/ci/venv")
            ]
        );
        assert_eq!(
            with_prefix(Path::new("/tmp/tools")),
            [PathBuf::from("/tmp/tools")]
        );
    }
}
