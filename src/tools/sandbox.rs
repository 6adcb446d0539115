//! Kernel confinement of every program ybs starts once a task has begun
//! (docs/security.md S1, S6, S9): `run_shell`, external tools and their
//! discovery, checks.
//!
//! A [`Sandbox`] belongs to one task. It names where children may write
//! (the canonical workdir, a private temp dir ybs creates and removes,
//! operator-granted paths), what stays read-only inside the workdir
//! (`.git`, `.github/workflows`, `.github/actions`, `./.ybs.json`, the
//! run's task, policy and config files), what is hidden (ybs's outputs),
//! and whether the network and named unix sockets are allowed.
//!
//! The confinement is applied by a helper, like bubblewrap: instead of
//! the program, [`super::process::run`] starts `ybs __sandbox SPEC --
//! PROGRAM ARGS...` (see [`helper`]), a fresh single-threaded process
//! that enters new user, mount, PID, UTS and IPC namespaces (and a network
//! namespace when named unix sockets are allowed without the network),
//! builds the file system view, drops
//! every capability, applies Landlock and seccomp ([`filter`]) and runs
//! the program as the child of the namespace's PID 1, which reaps
//! everything and takes every descendant down with it.
//!
//! With namespaces, that setup is done once per task instead of once per
//! program: a [`resident`] sandbox (`ybs __sandbox-init SPEC`) builds the
//! namespaces and the view at the task's first program and starts each
//! program in a PID and mount namespace of its own, with its own `/proc`,
//! session, Landlock domain and seccomp filter (docs/sandbox.md).
//!
//! Which layers work is [`probe`]d once per process (by running
//! `ybs __sandbox-probe`, or from the answer kept for the boot,
//! [`probe_cache`]). By default all are required; operator config
//! may accept Landlock and seccomp without namespaces
//! (`safety.sandbox_require: landlock`); `--no-sandbox` runs unconfined.
//! A missing required layer is [`Unavailable`].
//!
//! The helper is part of the `ybs` binary: `main` calls [`helper_entry`]
//! first thing. A binary that did not (the library's unit tests) cannot
//! confine, and says so.

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use crate::core::event::SandboxInfo;

pub mod apparmor;
#[cfg(target_os = "linux")]
pub mod cgroup;
pub mod exec_views;
#[cfg(target_os = "linux")]
pub mod filter;
#[cfg(target_os = "linux")]
mod helper;
pub mod home;
mod placeholders;
mod probe_cache;
#[cfg(target_os = "linux")]
pub mod resident;
pub mod spec;
pub(crate) mod sys;

use placeholders::Placeholders;
pub use spec::HelperSpec;

mod private_temp;
use private_temp::PrivateTemp;

mod probe;
pub use probe::{Probe, probe, probe_in_background};

/// The name of the full confinement in outputs.
pub const MECHANISM: &str = "namespaces+landlock+seccomp";
/// The name of the confinement without namespaces.
pub const MECHANISM_REDUCED: &str = "landlock+seccomp";

/// The layers, as outputs name them.
pub const LAYER_NAMESPACES: &str = "namespaces";
pub const LAYER_LANDLOCK: &str = "landlock";
pub const LAYER_SECCOMP: &str = "seccomp";
/// Not a layer the sandbox requires: listed when deny rules are enforced
/// at exec ([`Sandbox::exec_guard`]).
pub const LAYER_EXEC_GUARD: &str = "exec-guard";

/// Where the helper binary is: `/proc/self/exe` of the forked child is
/// the running `ybs`, even when its file was replaced since.
const SELF_EXE: &str = "/proc/self/exe";

static HELPER: AtomicBool = AtomicBool::new(false);

/// Called first thing by `main`: runs the helper (never returns) when
/// `argv[1]` asks for it, otherwise records that this binary has it.
pub fn helper_entry() {
    let mut args = std::env::args_os();
    let first = args.nth(1);
    let first = first.as_ref().and_then(|arg| arg.to_str());
    // A helper checks once, here, that it has one thread: its forks
    // rely on it (`sys::fork`).
    #[cfg(target_os = "linux")]
    if matches!(
        first,
        Some(spec::HELPER_ARG | spec::PROBE_ARG | spec::INIT_ARG)
    ) {
        sys::enter_single_threaded();
    }
    match first {
        #[cfg(target_os = "linux")]
        Some(spec::HELPER_ARG) => {
            let args: Vec<OsString> = std::env::args_os().collect();
            helper::main(&args)
        }
        #[cfg(target_os = "linux")]
        Some(spec::PROBE_ARG) => helper::probe_main(),
        #[cfg(target_os = "linux")]
        Some(spec::INIT_ARG) => {
            let args: Vec<OsString> = std::env::args_os().collect();
            helper::init::main(&args)
        }
        _ => HELPER.store(true, Ordering::Relaxed),
    }
}

/// Which layers a task needs before it may run commands.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Require {
    /// Namespaces, Landlock and seccomp.
    #[default]
    All,
    /// Landlock and seccomp are enough.
    Landlock,
}

impl Require {
    /// The config spelling: `all` or `landlock`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "all" => Some(Self::All),
            "landlock" => Some(Self::Landlock),
            _ => None,
        }
    }
}

/// Where children may write and what else the sandbox grants or hides.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Roots besides the workdir and the private temp dir (canonical or
    /// not: missing ones are skipped).
    pub writable: Vec<PathBuf>,
    /// Leave the network open (every socket family).
    pub network: bool,
    /// Allow `socket(AF_UNIX)` (named unix sockets).
    pub unix_sockets: bool,
    pub require: Require,
    /// Paths to keep read-only; missing ones under the workdir get an
    /// empty placeholder directory for the task's lifetime, so they
    /// cannot be created either.
    pub read_only: Vec<PathBuf>,
    /// Paths to hide (directories) or keep read-only (files).
    pub hidden: Vec<PathBuf>,
    /// Paths outside the workdir to hide outright, files too (missing
    /// ones are skipped).
    pub blocked: Vec<PathBuf>,
    /// Host paths that stay visible (read-only) under the private `/tmp`.
    pub visible: Vec<PathBuf>,
    /// Directories outside the workdir that children may write to without
    /// the writes reaching the host (toolchain homes and caches: `~/.cargo`,
    /// `~/.npm`…): an overlay whose upper layer lives in the private temp
    /// dir, so it goes with the task. Missing ones, and ones holding the
    /// workdir or a writable root, are skipped.
    pub scratch: Vec<PathBuf>,
    /// The user's home, shown as an empty directory of the task's own
    /// with the visible paths beneath it bound back (`None`: none).
    pub home: Option<PathBuf>,
    /// The `.gitconfig` of the empty home (the host's identity only).
    pub gitconfig: Option<String>,
    /// Directories shown empty, the visible paths beneath them bound
    /// back (other homes, relocated XDG directories, a self-hosted
    /// runner's install directory).
    pub masked: Vec<PathBuf>,
    /// At most this many processes of the task's confined programs at
    /// once (`safety.max_processes`); 0: no bound.
    pub max_processes: u32,
    /// The exec guard's deny rules ([`HelperSpec::exec_deny`]): command
    /// globs every exec of a confined process is checked against. Empty:
    /// no guard. Not empty: a confined program fails to start (the
    /// helper exits 125) where the guard cannot be installed.
    pub exec_deny: Vec<String>,
}

/// Why confinement cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// One task's confinement, ready for children. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Sandbox {
    /// First, so that it is dropped first: the resident sandboxes end
    /// before the cgroup, the temp dir and the placeholders go.
    #[cfg(target_os = "linux")]
    residents: Arc<resident::Residents>,
    temp: Arc<PrivateTemp>,
    spec: HelperSpec,
    /// `spec` in JSON, made once (every program's view key and every
    /// helper's command line carry it).
    spec_json: Arc<str>,
    landlock: &'static str,
    /// Layers missing but not required, `layer: reason`.
    missing: Vec<String>,
    /// The process bound in force, or why there is none.
    processes: ProcessBound,
    #[cfg(target_os = "linux")]
    _cgroup: Option<Arc<cgroup::TaskCgroup>>,
    /// Made at the task's first confined program (a task that runs none
    /// makes none); removed when the last clone goes.
    placeholders: Arc<LazyPlaceholders>,
}

impl Sandbox {
    /// Builds the confinement of a task in `workdir`: names the private
    /// temp dir and lists the placeholders of missing read-only paths,
    /// both made at the task's first confined program ([`Sandbox::ready`]).
    /// Fails when a required layer is unavailable.
    pub fn prepare(workdir: &Path, settings: &SandboxSettings) -> Result<Self, Unavailable> {
        let probe = probe();
        let landlock = probe.landlock.clone().map_err(Unavailable)?;
        probe.seccomp.clone().map_err(Unavailable)?;
        let namespaces = match (&probe.namespaces, settings.require) {
            (Ok(()), _) => true,
            (Err(reason), Require::All) => {
                return Err(Unavailable(format!(
                    "{LAYER_NAMESPACES}: {reason} (operator config may accept Landlock and seccomp alone: safety.sandbox_require: landlock)"
                )));
            }
            (Err(_), Require::Landlock) => false,
        };
        let missing = probe
            .missing()
            .into_iter()
            .filter(|_| !namespaces)
            .collect();
        let temp = PrivateTemp::name()
            .map_err(|error| Unavailable(format!("cannot name a private temp dir: {error}")))?;
        let mut writable: Vec<PathBuf> = Vec::new();
        for path in &settings.writable {
            if let Ok(path) = path.canonicalize()
                && path != workdir
                && !writable.contains(&path)
            {
                writable.push(path);
            }
        }
        let mut read_only: Vec<PathBuf> = Vec::new();
        for path in &settings.read_only {
            let inside =
                path.starts_with(workdir) || writable.iter().any(|root| path.starts_with(root));
            if inside && !read_only.contains(path) {
                read_only.push(path.clone());
            }
        }
        let placeholders = LazyPlaceholders {
            workdir: workdir.to_owned(),
            paths: if namespaces {
                // What an earlier run killed with `kill -9` left goes now,
                // whether or not this task runs a program.
                placeholders::sweep_stale();
                read_only.clone()
            } else {
                Vec::new()
            },
            made: OnceLock::new(),
        };
        let visible = settings
            .visible
            .iter()
            .filter_map(|path| path.canonicalize().ok())
            .filter(|path| {
                !path.starts_with(workdir) && !writable.iter().any(|root| path.starts_with(root))
            })
            .collect();
        let mut scratch: Vec<PathBuf> = Vec::new();
        for path in &settings.scratch {
            if let Ok(path) = path.canonicalize()
                && path.is_dir()
                && !path.starts_with(workdir)
                && !workdir.starts_with(&path)
                && !writable
                    .iter()
                    .any(|root| path.starts_with(root) || root.starts_with(&path))
                && !scratch.contains(&path)
            {
                scratch.push(path);
            }
        }
        let spec = HelperSpec {
            namespaces,
            scratch,
            workdir: workdir.to_owned(),
            temp: temp.path.clone(),
            writable,
            visible,
            read_only,
            hidden: settings
                .hidden
                .iter()
                .map(|path| path.canonicalize().unwrap_or_else(|_| path.clone()))
                .filter(|path| path.starts_with(workdir))
                .collect(),
            // A blocked directory holding the workdir (or another kept
            // path) is shown empty with the kept path bound back.
            blocked: settings
                .blocked
                .iter()
                .filter_map(|path| path.canonicalize().ok())
                .filter(|path| !path.starts_with(workdir))
                .collect(),
            home: settings
                .home
                .as_ref()
                .and_then(|home| home.canonicalize().ok())
                .filter(|home| home.is_dir() && home.parent().is_some()),
            gitconfig: settings.gitconfig.clone(),
            masked: settings
                .masked
                .iter()
                .filter_map(|path| path.canonicalize().ok())
                .filter(|path| path.is_dir() && path.parent().is_some())
                .filter(|path| !path.starts_with(workdir))
                .collect(),
            network: settings.network,
            unix_sockets: settings.unix_sockets,
            cgroup: None,
            max_processes: None,
            exec_deny: settings.exec_deny.clone(),
            exec_deny_programs: Vec::new(),
        };
        let mut spec = spec;
        let (processes, task_cgroup) = process_bound(settings.max_processes, &mut spec);
        Ok(Self {
            #[cfg(target_os = "linux")]
            residents: Arc::default(),
            temp: Arc::new(temp),
            spec_json: spec.to_json().into(),
            spec,
            landlock,
            missing,
            processes,
            #[cfg(target_os = "linux")]
            _cgroup: task_cgroup,
            placeholders: Arc::new(placeholders),
        })
    }

    /// The same sandbox with the network granted (a check that asks).
    #[must_use]
    pub fn with_network(&self) -> Self {
        let mut sandbox = self.clone();
        sandbox.spec.network = true;
        sandbox.spec_json = sandbox.spec.to_json().into();
        sandbox
    }

    /// The same sandbox with the exec guard's deny rules set to `globs`
    /// (command globs, as `run_shell(…)` deny rules have them; empty: no
    /// guard), for a runner that learns them after [`Sandbox::prepare`].
    /// Its resident sandboxes are its own: the spec differs.
    #[must_use]
    pub fn with_exec_deny(&self, globs: &[String], programs: &[exec_views::DeniedProgram]) -> Self {
        let mut sandbox = self.clone();
        sandbox.spec.exec_deny = globs.to_vec();
        sandbox.spec.exec_deny_programs = programs.to_vec();
        sandbox.spec_json = sandbox.spec.to_json().into();
        sandbox
    }

    /// True when the exec guard is in force: this sandbox has deny rules
    /// and the probe found the guard works (else its programs fail to
    /// start). `probe().exec_guard` says whether it could be.
    pub fn exec_guard(&self) -> bool {
        !self.spec.exec_deny.is_empty() && probe().exec_guard.is_ok()
    }

    /// Makes what the task's confined programs need on the host, once, at
    /// the first: the private temp dir (with an empty `.home`) and the
    /// placeholders. A task that runs no program makes neither. An error
    /// (the temp dir cannot be made) refuses the program.
    pub fn ready(&self) -> io::Result<()> {
        self.temp.ensure()?;
        self.placeholders.ensure();
        Ok(())
    }

    /// The private temp dir on the host (made by [`Sandbox::ready`]).
    pub fn temp_dir(&self) -> &Path {
        &self.temp.path
    }

    /// `TMPDIR` as the children see it: `/tmp` inside the namespaces, the
    /// private temp dir without them.
    pub fn child_tmpdir(&self) -> PathBuf {
        if self.spec.namespaces {
            PathBuf::from("/tmp")
        } else {
            self.temp.path.clone()
        }
    }

    /// `HOME` as the children see it: an empty directory in the private
    /// temp dir.
    pub fn child_home(&self) -> PathBuf {
        self.child_tmpdir().join(".home")
    }

    /// The writable roots, workdir and temp dir first.
    pub fn writable(&self) -> Vec<PathBuf> {
        self.spec.landlock_roots()
    }

    pub fn network(&self) -> bool {
        self.spec.network
    }

    /// True when the namespaces layer is in use.
    pub fn namespaces(&self) -> bool {
        self.spec.namespaces
    }

    pub fn spec(&self) -> &HelperSpec {
        &self.spec
    }

    /// The program and arguments that run `program args` confined.
    pub fn command(&self, program: &OsString, args: &[OsString]) -> (OsString, Vec<OsString>) {
        self.placeholders.ensure();
        (
            OsString::from(SELF_EXE),
            spec::argv_of(&self.spec_json, program, args),
        )
    }

    /// Starts `request` in the task's resident sandbox (namespaces and
    /// view built once per task, see [`resident`]); `None` when there is
    /// none to be had (no namespaces, or it could not be started): then
    /// [`Sandbox::command`] runs the program through the per-program
    /// helper.
    #[cfg(target_os = "linux")]
    pub fn start(&self, request: &spec::Request, stdin: bool) -> Option<resident::Running> {
        if !self.spec.namespaces || !HELPER.load(Ordering::Relaxed) {
            return None;
        }
        self.placeholders.ensure();
        self.residents
            .start(&self.spec, &self.spec_json, request, stdin)
    }

    /// Ends the task's resident sandboxes and everything running in them.
    pub fn stop_residents(&self) {
        #[cfg(target_os = "linux")]
        self.residents.stop();
    }

    /// What outputs say about this sandbox.
    pub fn info(&self) -> SandboxInfo {
        let mut layers = Vec::new();
        if self.spec.namespaces {
            layers.push(LAYER_NAMESPACES.to_owned());
        }
        layers.push(LAYER_LANDLOCK.to_owned());
        layers.push(LAYER_SECCOMP.to_owned());
        if self.exec_guard() {
            layers.push(LAYER_EXEC_GUARD.to_owned());
        }
        SandboxInfo {
            mode: if self.spec.namespaces {
                MECHANISM
            } else {
                MECHANISM_REDUCED
            }
            .to_owned(),
            landlock: Some(self.landlock.to_owned()),
            network: self.spec.network,
            writable: self
                .writable()
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
            reason: None,
            layers,
            missing: self.missing.clone(),
            processes: match &self.processes {
                ProcessBound::Bound(bound) => Some(bound.clone()),
                ProcessBound::Unasked | ProcessBound::Missing(_) => None,
            },
            missing_bounds: match &self.processes {
                ProcessBound::Missing(why) => vec![format!("max_processes: {why}")],
                ProcessBound::Unasked | ProcessBound::Bound(_) => Vec::new(),
            },
        }
    }
}

/// The bound on a task's processes, as outputs say it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ProcessBound {
    /// `safety.max_processes: 0`.
    Unasked,
    /// In force: `pids cgroup: 64`, `RLIMIT_NPROC: 64`.
    Bound(String),
    /// Asked for, but none could be set: why.
    Missing(String),
}

/// The bound of `safety.max_processes` (docs/sandbox.md): a pids cgroup
/// for the task when ybs can make one, else `RLIMIT_NPROC` when ybs does
/// not run as root (root is exempt from it), else none, and why.
#[cfg(target_os = "linux")]
fn process_bound(
    max: u32,
    spec: &mut HelperSpec,
) -> (ProcessBound, Option<Arc<cgroup::TaskCgroup>>) {
    if max == 0 {
        return (ProcessBound::Unasked, None);
    }
    match cgroup::TaskCgroup::create(max) {
        Ok(task_cgroup) => {
            spec.cgroup = Some(task_cgroup.dir.clone());
            (
                ProcessBound::Bound(format!("{}: {max}", task_cgroup.kind)),
                Some(Arc::new(task_cgroup)),
            )
        }
        Err(_) if !runs_as_root() => {
            spec.max_processes = Some(u64::from(max));
            (ProcessBound::Bound(format!("RLIMIT_NPROC: {max}")), None)
        }
        Err(why) => (
            ProcessBound::Missing(format!(
                "no pids cgroup ({why}), and RLIMIT_NPROC does not bind root"
            )),
            None,
        ),
    }
}

/// The effective uid is 0 (`/proc/self` belongs to it).
#[cfg(target_os = "linux")]
fn runs_as_root() -> bool {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").is_ok_and(|meta| meta.uid() == 0)
}

#[cfg(not(target_os = "linux"))]
fn process_bound(_max: u32, _spec: &mut HelperSpec) -> (ProcessBound, Option<()>) {
    (ProcessBound::Unasked, None)
}

/// The info of a run without confinement.
pub fn unconfined(reason: &str) -> SandboxInfo {
    SandboxInfo {
        mode: "none".to_owned(),
        landlock: None,
        network: true,
        writable: Vec::new(),
        reason: Some(reason.to_owned()),
        layers: Vec::new(),
        missing: Vec::new(),
        processes: None,
        missing_bounds: Vec::new(),
    }
}

/// The placeholders of a task's missing read-only paths, made once, at
/// its first confined program ([`Placeholders`]).
#[derive(Debug)]
struct LazyPlaceholders {
    workdir: PathBuf,
    /// Empty without namespaces: nothing is mounted on them then.
    paths: Vec<PathBuf>,
    made: OnceLock<Placeholders>,
}

impl LazyPlaceholders {
    fn ensure(&self) {
        if !self.paths.is_empty() {
            self.made
                .get_or_init(|| Placeholders::create(&self.workdir, &self.paths));
        }
    }
}

#[cfg(test)]
mod tests;
