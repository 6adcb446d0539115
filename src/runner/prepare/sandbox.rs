//! Stage 3 of task assembly: what a task's sandbox shows, protects and
//! hides (the home by allow-list, ybs's own directories, the blocked
//! paths), and the kernel confinement made from it.

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::Config;
use crate::core::Environ;
use crate::core::event::SandboxInfo;
use crate::policy::SandboxMode;
use crate::tools::sandbox::home as home_view;
use crate::tools::sandbox::{self, Sandbox, SandboxSettings, Unavailable};

use super::super::RunContext;
use super::super::dirs::own_dirs;
use super::super::error::SetupError;
use super::workdir::{allowed_roots, control_paths, expand_home};

/// What the task's sandbox shows, protects and hides beyond the workdir.
pub(super) fn sandbox_paths(run: &RunContext, protected: &[PathBuf]) -> SandboxPaths {
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
        // The exec guard's deny rules: not wired to the policy yet.
        exec_deny: Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::prepare::fixture::{Site, TASK_FILE};

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

    #[test]
    fn the_sandbox_shows_the_run_and_its_program_directories_and_hides_the_outputs() {
        let mut site = Site::new();
        let cargo = site.home.join(".cargo/bin");
        site.run.child_env.set(
            "PATH",
            &format!("/tmp/ci/venv/bin:{}:relative/bin:/usr/bin", cargo.display()),
        );
        let protected = vec![site.repo.join("policy.yaml")];
        let paths = sandbox_paths(&site.run, &protected);
        // A `PATH` entry under the home comes alone; elsewhere with its
        // install prefix; a relative one not at all.
        assert_eq!(
            paths.visible,
            [
                site.repo.clone(),
                PathBuf::from("/tmp/ci/venv/bin"),
                PathBuf::from("/tmp/ci/venv"),
                cargo,
                PathBuf::from("/usr/bin"),
                PathBuf::from("/usr"),
            ]
        );
        assert_eq!(paths.hidden, [site.repo.join("ybs-out")]);
        assert_eq!(
            paths.protected,
            [site.repo.join("policy.yaml"), site.repo.join(TASK_FILE)]
        );
        assert_eq!(paths.control, None);
    }

    #[test]
    fn ybs_own_directories_are_made_private_and_blocked_once() {
        let site = Site::new();
        let state = site.home.join(".local/state/ybs");
        let cache = site.home.join(".cache/ybs");
        let mut blocked = vec![site.home.join(".ssh"), cache.clone()];
        block_own_dirs(&mut blocked, Some(&site.home), &site.run.environ);
        assert_eq!(
            blocked,
            [site.home.join(".ssh"), cache.clone(), state.clone()]
        );
        for dir in [state, cache] {
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", dir.display());
        }
    }

    #[test]
    fn a_sandbox_turned_off_confines_nothing_and_says_why() {
        let mut site = Site::new();
        site.run.config.safety.sandbox_enabled = false;
        assert_eq!(sandbox_mode(&site.run.config), SandboxMode::None);
        let (sandbox, info) = task_sandbox(
            &site.run.config,
            (Some(&site.home), &site.run.environ),
            &site.repo,
            true,
            &SandboxPaths::default(),
        )
        .unwrap();
        assert!(sandbox.is_none());
        assert_eq!(info.mode, "none");
        assert_eq!(info.reason.as_deref(), Some(SANDBOX_DISABLED));
    }

    #[test]
    fn unconfined_children_lose_the_workdirs_path_entries_and_keep_their_home() {
        let mut site = Site::new();
        let mut env = site.run.child_env.clone();
        env.set(
            "PATH",
            &format!("{}:/usr/bin", site.repo.join("bin").display()),
        );
        site.run.config.safety.sandbox_enabled = false;
        child_env_for(&mut env, None, &site.repo, &site.run.config);
        assert_eq!(env.get("PATH"), Some("/usr/bin"));
        assert_eq!(env.get("HOME"), site.home.to_str());
    }
}
