//! The helper: `ybs __sandbox SPEC -- PROGRAM ARGS...`, started by
//! [`crate::tools::process::run`] in place of the program. A fresh,
//! single-threaded process, so the setup is ordinary code.
//!
//! 1. `unshare(CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUTS |
//!    CLONE_NEWIPC)` (plus `CLONE_NEWNET` when named unix sockets are
//!    allowed without the network); the uid and
//!    gid map to themselves (root stays uid 0, with capabilities only in
//!    the new user namespace), `setgroups` denied.
//! 2. fork: the child is PID 1 of the new PID namespace, tied to this
//!    process by `PR_SET_PDEATHSIG(SIGKILL)` (this process is tied to ybs
//!    the same way). This process waits and ends the way the program
//!    ended (same code, or the same signal raised on itself).
//! 3. PID 1 builds the file system view ([`mounts`]): every mount
//!    read-only except the workdir, a private `/tmp` (the task's private
//!    temp dir) and operator-granted paths; `.git`, CI and control files
//!    read-only; ybs's outputs hidden; a private `/proc`; a minimal `/dev`.
//!    Then `sethostname("ybs-sandbox")`, every capability set emptied,
//!    `no_new_privs`, Landlock, seccomp.
//!    With deny rules in the spec, the exec guard's supervisor is forked
//!    first and handed the seccomp listener ([`guard`]).
//! 4. fork again: the grandchild execs the program (cwd as given, the
//!    environment ybs passed, which is already the allowlist). PID 1 reaps
//!    every process until the grandchild ends, then exits with its status;
//!    the kernel then kills what is left in the namespace.

use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::libc;

use super::cgroup::CgroupError;
use super::filter::{self, FilterError, FilterSettings};
use super::spec::HelperSpec;
use crate::tools::sandbox::sys;

/// The helper's exit code when the sandbox cannot be set up.
pub const SETUP_FAILED: i32 = 125;

/// Why the sandbox could not be set up: said on the program's stderr
/// (`ybs sandbox: …`), and the helper exits [`SETUP_FAILED`].
#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    /// A system call or file operation failed: what was being done.
    #[error("{what}: {source}")]
    Os {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The command line or a request is not what ybs sends.
    #[error("{0}")]
    Protocol(&'static str),
    #[error("bad spec: {0}")]
    Spec(#[from] serde_json::Error),
    #[error(transparent)]
    Filter(#[from] FilterError),
    #[error(transparent)]
    Cgroup(#[from] CgroupError),
    /// The exec guard cannot be set up (a deny rule, its probe).
    #[error("exec guard: {0}")]
    Guard(String),
    /// What a child process of the helper reported.
    #[error("{0}")]
    Reported(String),
}

type Result<T> = std::result::Result<T, SetupError>;

/// Maps an I/O error to [`SetupError::Os`] naming `what` failed.
fn failed(what: impl std::fmt::Display) -> impl FnOnce(std::io::Error) -> SetupError {
    move |source| SetupError::Os {
        what: what.to_string(),
        source,
    }
}

/// The same for a `nix` error.
fn failed_nix(what: impl std::fmt::Display) -> impl FnOnce(nix::errno::Errno) -> SetupError {
    move |errno| failed(what)(std::io::Error::from(errno))
}

/// One line on stderr (the program's stderr, which ybs captures).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Entry point of `ybs __sandbox`: never returns.
pub fn main(args: &[OsString]) -> ! {
    let code = match parse(args).and_then(|(spec, argv)| run(&spec, &argv)) {
        Ok(code) => code,
        Err(error) => {
            say(&format!("ybs sandbox: {error}"));
            SETUP_FAILED
        }
    };
    std::process::exit(code)
}

fn parse(args: &[OsString]) -> Result<(HelperSpec, Vec<OsString>)> {
    // args: [exe, __sandbox, SPEC, --, PROGRAM, ARGS...]
    let spec = args
        .get(2)
        .and_then(|spec| spec.to_str())
        .ok_or(SetupError::Protocol("no spec"))?;
    let spec: HelperSpec = serde_json::from_str(spec)?;
    if args.get(3).map(OsString::as_os_str) != Some(std::ffi::OsStr::new("--")) || args.len() < 5 {
        return Err(SetupError::Protocol("no program"));
    }
    Ok((spec, args[4..].to_vec()))
}

/// Confines and runs `argv`; the exit code to end with (a signal that
/// killed the program is raised on this process instead).
fn run(spec: &HelperSpec, argv: &[OsString]) -> Result<i32> {
    let cwd = std::env::current_dir().map_err(failed("current directory"))?;
    sys::close_inherited_on_exec().map_err(failed("close-on-exec of inherited descriptors"))?;
    // First, while the host's view is still there: every process of the
    // program is counted in the task's pids cgroup.
    if let Some(dir) = &spec.cgroup {
        super::cgroup::join(dir)?;
    }
    if !spec.namespaces {
        if !spec.exec_deny.is_empty() {
            return guard::run_guarded(spec, argv, &cwd, |supervisor| {
                confine_process(spec, false, supervisor)
            });
        }
        confine_process(spec, false, None)?;
        exec(argv, &cwd);
    }
    // A network namespace costs about a millisecond per call. Without
    // the network and without named unix sockets, seccomp refuses every
    // `socket(2)` already; it is added when named unix sockets are
    // allowed, so that abstract sockets outside stay out of reach (Landlock
    // scopes them too, on kernels with ABI v6).
    enter_namespaces(!spec.network && spec.unix_sockets)?;
    let (status_read, status_write) = pipe()?;
    let (alive_read, alive_write) = pipe()?;
    match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(status_read);
            drop(alive_write);
            let code = match pid_one(spec, argv, &cwd, &alive_read, status_write) {
                Ok(code) => code,
                Err(error) => {
                    say(&format!("ybs sandbox: {error}"));
                    SETUP_FAILED
                }
            };
            std::process::exit(code)
        }
        sys::ForkResult::Parent { child } => {
            drop(status_write);
            drop(alive_read);
            let (_, status) = sys::wait_raw(child.as_raw()).map_err(failed("waitpid"))?;
            let mut reported = [0u8; 4];
            let mut file = std::fs::File::from(status_read);
            let status = match file.read_exact(&mut reported) {
                Ok(()) => i32::from_ne_bytes(reported),
                Err(_) => status,
            };
            drop(alive_write);
            Ok(end_like(status))
        }
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(failed_nix("pipe"))
}

/// The exit code for a wait status; a terminating signal is raised on
/// this process so its parent sees the same.
fn end_like(status: i32) -> i32 {
    if libc::WIFEXITED(status) {
        return libc::WEXITSTATUS(status);
    }
    if libc::WIFSIGNALED(status) {
        let signal = libc::WTERMSIG(status);
        // The helper's own death must not leave a core file.
        sys::raise_default(signal);
        return 128 + signal;
    }
    SETUP_FAILED
}

fn write_file(path: &str, content: &str) -> Result<()> {
    std::fs::write(path, content).map_err(failed(path))
}

/// Step 1: the namespaces (a network namespace too when `new_net`) and
/// the id maps.
fn enter_namespaces(new_net: bool) -> Result<()> {
    let (uid, gid) = sys::ids();
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC;
    if new_net {
        flags |= libc::CLONE_NEWNET;
    }
    sys::unshare(flags).map_err(failed("unshare (user, mount, PID namespaces)"))?;
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1\n"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// In a PID 1: dies with its parent, which must still be there (`alive`
/// is the read end of a pipe it holds: readable or closed means gone;
/// `getppid()` is 0 in a new namespace).
fn tie_to_parent(alive: &OwnedFd) -> Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(failed_nix("PR_SET_PDEATHSIG"))?;
    if sys::ready_now(alive.as_fd()).map_err(failed("poll"))? {
        return Err(SetupError::Protocol("the helper's parent is gone"));
    }
    Ok(())
}

/// The view, the hostname and the empty home.
fn build_view(spec: &HelperSpec) -> Result<()> {
    mounts::build(spec)?;
    sys::sethostname(b"ybs-sandbox").map_err(failed("sethostname"))?;
    let home = Path::new("/tmp/.home");
    if !home.exists() {
        let _ = std::fs::create_dir(home);
    }
    Ok(())
}

/// Step 2 to 4, in PID 1 of the new namespace.
fn pid_one(
    spec: &HelperSpec,
    argv: &[OsString],
    cwd: &Path,
    alive: &OwnedFd,
    status: OwnedFd,
) -> Result<i32> {
    tie_to_parent(alive)?;
    build_view(spec)?;
    // Before the filter, and before the capabilities go (see `guard`).
    let supervisor = guard::start(spec)?;
    confine_process(spec, true, supervisor.as_ref())?;
    // The listener went to the supervisor; this socket is not the
    // program's.
    drop(supervisor);
    let program = match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(status);
            exec(argv, cwd)
        }
        sys::ForkResult::Parent { child } => child.as_raw(),
    };
    // Reap everything; end when the program ends.
    loop {
        let (pid, raw) = sys::wait_raw(-1).map_err(failed("waitpid"))?;
        if pid == program {
            let mut file = std::fs::File::from(status);
            let _ = file.write_all(&raw.to_ne_bytes());
            return Ok(if libc::WIFEXITED(raw) {
                libc::WEXITSTATUS(raw)
            } else {
                128 + libc::WTERMSIG(raw)
            });
        }
    }
}

/// The writable roots of Landlock: inside the namespaces the workdir,
/// `/tmp`, `/dev/shm`, the operator's paths, the toolchain scratch
/// overlays and the empty home; without them the host's.
fn landlock_roots(spec: &HelperSpec, namespaces: bool) -> Vec<PathBuf> {
    if !namespaces {
        return spec.landlock_roots();
    }
    let mut roots = vec![
        spec.workdir.clone(),
        PathBuf::from("/tmp"),
        PathBuf::from("/dev/shm"),
    ];
    roots.extend(spec.writable.iter().cloned());
    roots.extend(spec.scratch.iter().cloned());
    // The empty home, the task's own (what is bound back in it is
    // read-only by its mount).
    roots.extend(spec.home.iter().cloned());
    roots
}

/// The process limit, every capability set emptied, `no_new_privs`.
fn drop_privileges(spec: &HelperSpec) -> Result<()> {
    set_process_limit(spec)?;
    sys::drop_capabilities().map_err(failed("drop the capabilities"))?;
    sys::no_new_privs().map_err(failed("PR_SET_NO_NEW_PRIVS"))
}

/// In a program whose PID 1 emptied the capability bounding set already
/// (which the program inherits): the process limit, the other capability
/// sets emptied, `no_new_privs`.
fn drop_inherited_privileges(spec: &HelperSpec) -> Result<()> {
    set_process_limit(spec)?;
    sys::clear_capabilities().map_err(failed("drop the capabilities"))?;
    sys::no_new_privs().map_err(failed("PR_SET_NO_NEW_PRIVS"))
}

/// The process limit (`RLIMIT_NPROC`) when the spec sets one.
fn set_process_limit(spec: &HelperSpec) -> Result<()> {
    if let Some(max) = spec.max_processes {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, max, max)
            .map_err(failed_nix("RLIMIT_NPROC"))?;
    }
    Ok(())
}

/// Every capability set emptied, `no_new_privs`, Landlock, seccomp (with
/// the exec guard's listener handed to `supervisor` when there is one).
fn confine_process(
    spec: &HelperSpec,
    namespaces: bool,
    supervisor: Option<&guard::Supervisor>,
) -> Result<()> {
    drop_privileges(spec)?;
    let ruleset = filter::landlock_ruleset(&landlock_roots(spec, namespaces))?;
    filter::restrict(ruleset)?;
    guard::apply(&filter_of(spec)?, supervisor)
}

/// The seccomp program of `spec` (with the exec guard's rule when it has
/// deny rules).
fn filter_of(spec: &HelperSpec) -> Result<seccompiler::BpfProgram> {
    Ok(filter::seccomp_program(FilterSettings {
        network: spec.network,
        unix_sockets: spec.unix_sockets,
        exec_guard: !spec.exec_deny.is_empty(),
    })?)
}

/// Execs the program in `cwd`; on failure says why, like a shell would,
/// and exits 127 (not found) or 126.
fn exec(argv: &[OsString], cwd: &Path) -> ! {
    if let Err(error) = std::env::set_current_dir(cwd) {
        say(&format!("ybs sandbox: {}: {error}", cwd.display()));
        std::process::exit(SETUP_FAILED);
    }
    use std::os::unix::process::CommandExt;
    let error = std::process::Command::new(&argv[0]).args(&argv[1..]).exec();
    exec_failed(&argv[0], &error)
}

/// Execs `argv`, a name without `/` searched in the directories of
/// `path` (the program's `PATH`; the C library's `/bin:/usr/bin` when
/// it has none) the way `execvp` and a shell search it: the first
/// directory where the name is a file that can be executed wins, a
/// directory where it cannot (`EACCES`) is skipped, and the search ends
/// with "not found" (127), or "permission denied" (126) when some
/// candidate was refused (else the last reason, as `execvp` leaves it).
/// Unlike `execvp` it looks before it execs (`stat`, `access`), so a
/// missing entry costs no failing `execve`.
/// `configure` sets the environment of the program. On failure says
/// why and exits like a shell ([`exec_failed`]).
fn exec_searched(
    argv: &[OsString],
    path: Option<&std::ffi::OsStr>,
    configure: impl Fn(&mut std::process::Command),
) -> ! {
    use std::os::unix::ffi::OsStrExt as _;
    use std::os::unix::process::CommandExt as _;
    let name = &argv[0];
    let exec_at = |program: &Path| -> std::io::Error {
        let mut command = std::process::Command::new(program);
        command.arg0(name).args(&argv[1..]);
        configure(&mut command);
        command.exec()
    };
    if name.is_empty() || name.as_bytes().contains(&b'/') {
        exec_failed(name, &exec_at(Path::new(name)));
    }
    let path = path.unwrap_or(std::ffi::OsStr::new("/bin:/usr/bin"));
    let mut refused = false;
    let mut last = std::io::Error::from_raw_os_error(libc::ENOENT);
    for dir in path.as_bytes().split(|byte| *byte == b':') {
        // An empty entry is the working directory.
        let dir = if dir.is_empty() { b"." } else { dir };
        let candidate = Path::new(std::ffi::OsStr::from_bytes(dir)).join(name);
        let error = match look(&candidate) {
            Ok(()) => exec_at(&candidate),
            Err(errno) => std::io::Error::from_raw_os_error(errno),
        };
        match error.raw_os_error() {
            Some(libc::EACCES) => refused = true,
            Some(libc::ENOENT | libc::ENOTDIR | libc::ESTALE | libc::ENODEV | libc::ETIMEDOUT) => {}
            _ => exec_failed(name, &error),
        }
        last = error;
    }
    if refused {
        last = std::io::Error::from_raw_os_error(libc::EACCES);
    }
    exec_failed(name, &last)
}

/// What `execve` would make of one candidate of the path search: `Ok`
/// when it is worth an `execve` (an executable file, or an error the
/// exec itself should report), else the error `execve` would give
/// (`EACCES` for a directory or a file without the right, which the
/// search remembers, or why it is not there, which it skips).
fn look(candidate: &Path) -> std::result::Result<(), i32> {
    match std::fs::metadata(candidate) {
        Ok(meta) if !meta.is_file() => Err(libc::EACCES),
        Ok(_) => match nix::unistd::access(candidate, nix::unistd::AccessFlags::X_OK) {
            Err(nix::errno::Errno::EACCES) => Err(libc::EACCES),
            _ => Ok(()),
        },
        Err(error) => match error.raw_os_error() {
            Some(
                errno @ (libc::EACCES
                | libc::ENOENT
                | libc::ENOTDIR
                | libc::ESTALE
                | libc::ENODEV
                | libc::ETIMEDOUT),
            ) => Err(errno),
            _ => Ok(()),
        },
    }
}

/// Says why `program` could not be exec'd and exits like a shell.
fn exec_failed(program: &OsString, error: &std::io::Error) -> ! {
    say(&format!("{}: {error}", program.to_string_lossy()));
    std::process::exit(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// Entry point of `ybs __sandbox-probe`: tries each layer in turn and
/// prints what works as one JSON line. Never returns.
pub fn probe_main() -> ! {
    let mut report = serde_json::Map::new();
    let namespaces = probe_namespaces().map_err(|error| error.to_string());
    report.insert(
        "namespaces".to_owned(),
        namespaces.err().map_or(serde_json::Value::Null, Into::into),
    );
    let landlock = filter::landlock_ruleset(&[std::env::temp_dir()]).and_then(filter::restrict);
    report.insert(
        "landlock".to_owned(),
        match landlock {
            Ok(status) => serde_json::json!({"status": status}),
            Err(error) => serde_json::json!({"error": error.to_string()}),
        },
    );
    let exec_guard = guard::probe().map_err(|error| error.to_string());
    report.insert(
        "exec_guard".to_owned(),
        exec_guard.err().map_or(serde_json::Value::Null, Into::into),
    );
    let seccomp = filter::seccomp_program(FilterSettings {
        network: false,
        unix_sockets: false,
        exec_guard: false,
    })
    .and_then(|program| filter::apply_seccomp(&program));
    report.insert(
        "seccomp".to_owned(),
        seccomp
            .err()
            .map_or(serde_json::Value::Null, |error| error.to_string().into()),
    );
    let _ = writeln!(std::io::stdout(), "{}", serde_json::Value::Object(report));
    std::process::exit(0)
}

/// Runs `work` in a child; `Ok` when it succeeded, else what it wrote on
/// the pipe it is given (or `failure` when it wrote nothing).
fn in_child(failure: &'static str, work: impl FnOnce() -> Result<()>) -> Result<()> {
    let (read, write) = pipe()?;
    match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(read);
            let code = match work() {
                Ok(()) => 0,
                Err(error) => {
                    let _ = nix::unistd::write(&write, error.to_string().as_bytes());
                    1
                }
            };
            std::process::exit(code)
        }
        sys::ForkResult::Parent { child } => {
            drop(write);
            let (_, status) = sys::wait_raw(child.as_raw()).map_err(failed("waitpid"))?;
            let mut message = String::new();
            let _ = std::fs::File::from(read).read_to_string(&mut message);
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else if message.is_empty() {
                Err(SetupError::Protocol(failure))
            } else {
                Err(SetupError::Reported(message))
            }
        }
    }
}

/// Namespaces, id maps, a private `/proc`, a tmpfs: in a child, so this
/// process keeps its own view (and its PID 1 in a grandchild).
fn probe_namespaces() -> Result<()> {
    in_child("namespaces: the probe failed", || {
        enter_namespaces(false)?;
        in_child("namespaces: the probe failed", mounts::probe)
    })
}

mod guard;
pub mod init;
mod mounts;
