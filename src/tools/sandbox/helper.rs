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
//! 4. fork again: the grandchild execs the program (cwd as given, the
//!    environment ybs passed, which is already the allowlist). PID 1 reaps
//!    every process until the grandchild ends, then exits with its status;
//!    the kernel then kills what is left in the namespace.

use std::ffi::{CString, OsString};
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use nix::libc;

use super::filter::{self, FilterSettings};
use super::spec::HelperSpec;

/// The helper's exit code when the sandbox cannot be set up.
pub const SETUP_FAILED: i32 = 125;

type Result<T> = std::result::Result<T, String>;

fn os_error(what: &str) -> String {
    format!("{what}: {}", std::io::Error::last_os_error())
}

fn cstring(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{}: a NUL byte in the path", path.display()))
}

/// One line on stderr (the program's stderr, which ybs captures).
fn say(text: &str) {
    let _ = writeln!(std::io::stderr(), "{text}");
}

/// Entry point of `ybs __sandbox`: never returns.
pub fn main(args: &[OsString]) -> ! {
    let code = match parse(args) {
        Ok((spec, argv)) => match run(&spec, &argv) {
            Ok(code) => code,
            Err(error) => {
                say(&format!("ybs sandbox: {error}"));
                SETUP_FAILED
            }
        },
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
        .ok_or("no spec")?;
    let spec: HelperSpec = serde_json::from_str(spec).map_err(|e| format!("bad spec: {e}"))?;
    if args.get(3).map(OsString::as_os_str) != Some(std::ffi::OsStr::new("--")) || args.len() < 5 {
        return Err("no program".to_owned());
    }
    Ok((spec, args[4..].to_vec()))
}

/// Confines and runs `argv`; the exit code to end with (a signal that
/// killed the program is raised on this process instead).
fn run(spec: &HelperSpec, argv: &[OsString]) -> Result<i32> {
    let cwd = std::env::current_dir().map_err(|e| format!("current directory: {e}"))?;
    close_inherited_on_exec()?;
    // First, while the host's view is still there: every process of the
    // program is counted in the task's pids cgroup.
    if let Some(dir) = &spec.cgroup {
        super::cgroup::join(dir)?;
    }
    if !spec.namespaces {
        confine_process(spec, false)?;
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
    #[allow(unsafe_code)]
    // SAFETY: this process is single-threaded (the helper never starts a
    // thread), so the child may run any code.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    match fork {
        nix::unistd::ForkResult::Child => {
            drop(status_read);
            drop(alive_write);
            let code = match pid_one(spec, argv, &cwd, alive_read, status_write) {
                Ok(code) => code,
                Err(error) => {
                    say(&format!("ybs sandbox: {error}"));
                    SETUP_FAILED
                }
            };
            std::process::exit(code)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(status_write);
            drop(alive_read);
            let status = wait_for(child.as_raw())?;
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

/// Marks every descriptor but stdin, stdout and stderr close-on-exec.
/// ybs opens its own that way, but what ybs itself inherited from its
/// parent (a socket connected to a daemon, a file outside the workdir
/// open for writing) would otherwise reach the program, past the
/// read-only tree and the socket filter (docs/sandbox.md).
fn close_inherited_on_exec() -> Result<()> {
    let fds: Vec<i32> = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("/proc/self/fd: {e}"))?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        #[allow(unsafe_code)]
        // SAFETY: F_SETFD only sets the flags of descriptor `fd`; the one
        // the listing itself used is closed by now and fails with EBADF,
        // which is harmless.
        let done = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if done == -1 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EBADF) {
            return Err(os_error(&format!("close-on-exec of descriptor {fd}")));
        }
    }
    Ok(())
}

fn no_core_dumps() {
    let limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: a valid rlimit pointer.
    unsafe {
        libc::setrlimit(libc::RLIMIT_CORE, &limit);
    }
}

fn pipe() -> Result<(OwnedFd, OwnedFd)> {
    nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| format!("pipe: {e}"))
}

fn wait_for(pid: i32) -> Result<i32> {
    let mut status = 0;
    loop {
        #[allow(unsafe_code)]
        // SAFETY: a valid status pointer.
        let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if waited == pid {
            return Ok(status);
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_error("waitpid"));
        }
    }
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
        no_core_dumps();
        #[allow(unsafe_code)]
        // SAFETY: plain signal calls with valid arguments.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&raw mut set);
            libc::sigaddset(&raw mut set, signal);
            libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut());
            libc::raise(signal);
        }
        return 128 + signal;
    }
    SETUP_FAILED
}

fn write_file(path: &str, content: &str) -> Result<()> {
    std::fs::write(path, content).map_err(|e| format!("{path}: {e}"))
}

/// Step 1: the namespaces (a network namespace too when `new_net`) and
/// the id maps.
fn enter_namespaces(new_net: bool) -> Result<()> {
    #[allow(unsafe_code)]
    // SAFETY: plain system calls.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWIPC;
    if new_net {
        flags |= libc::CLONE_NEWNET;
    }
    #[allow(unsafe_code)]
    // SAFETY: a plain system call; this process is single-threaded.
    if unsafe { libc::unshare(flags) } != 0 {
        return Err(os_error("unshare (user, mount, PID namespaces)"));
    }
    write_file("/proc/self/setgroups", "deny")?;
    write_file("/proc/self/uid_map", &format!("{uid} {uid} 1\n"))?;
    write_file("/proc/self/gid_map", &format!("{gid} {gid} 1\n"))?;
    Ok(())
}

/// Step 2 to 4, in PID 1 of the new namespace.
fn pid_one(
    spec: &HelperSpec,
    argv: &[OsString],
    cwd: &Path,
    alive: OwnedFd,
    status: OwnedFd,
) -> Result<i32> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    // The parent is outside the namespace (getppid() is 0): the pipe it
    // holds tells whether it is still alive.
    let mut poll = libc::pollfd {
        fd: alive.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: one valid pollfd.
    let ready = unsafe { libc::poll(&raw mut poll, 1, 0) };
    if ready != 0 {
        return Err("the helper's parent is gone".to_owned());
    }
    mounts::build(spec)?;
    let hostname = b"ybs-sandbox";
    #[allow(unsafe_code)]
    // SAFETY: a valid buffer and its length.
    if unsafe { libc::sethostname(hostname.as_ptr().cast(), hostname.len()) } != 0 {
        return Err(os_error("sethostname"));
    }
    let home = Path::new("/tmp/.home");
    if !home.exists() {
        let _ = std::fs::create_dir(home);
    }
    confine_process(spec, true)?;
    #[allow(unsafe_code)]
    // SAFETY: single-threaded, as above.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    let program = match fork {
        nix::unistd::ForkResult::Child => {
            drop(status);
            drop(alive);
            exec(argv, cwd)
        }
        nix::unistd::ForkResult::Parent { child } => child.as_raw(),
    };
    // Reap everything; end when the program ends.
    loop {
        let mut raw = 0;
        #[allow(unsafe_code)]
        // SAFETY: a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &raw mut raw, 0) };
        if pid == program {
            let mut file = std::fs::File::from(status);
            let _ = file.write_all(&raw.to_ne_bytes());
            return Ok(if libc::WIFEXITED(raw) {
                libc::WEXITSTATUS(raw)
            } else {
                128 + libc::WTERMSIG(raw)
            });
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_error("waitpid"));
        }
    }
}

/// Every capability set emptied, `no_new_privs`, Landlock, seccomp.
fn confine_process(spec: &HelperSpec, namespaces: bool) -> Result<()> {
    if let Some(max) = spec.max_processes {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, max, max)
            .map_err(|e| format!("RLIMIT_NPROC: {e}"))?;
    }
    drop_capabilities()?;
    #[allow(unsafe_code)]
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(os_error("PR_SET_NO_NEW_PRIVS"));
    }
    let roots = if namespaces {
        let mut roots = vec![
            spec.workdir.clone(),
            PathBuf::from("/tmp"),
            PathBuf::from("/dev/shm"),
        ];
        roots.extend(spec.writable.iter().cloned());
        roots.extend(spec.scratch.iter().cloned());
        roots
    } else {
        spec.landlock_roots()
    };
    let ruleset = filter::landlock_ruleset(&roots).map_err(|e| format!("Landlock: {e}"))?;
    filter::restrict(ruleset).map_err(|e| format!("Landlock: {e}"))?;
    let program = filter::seccomp_program(FilterSettings {
        network: spec.network,
        unix_sockets: spec.unix_sockets,
    })
    .map_err(|e| format!("seccomp: {e}"))?;
    seccompiler::apply_filter(&program).map_err(|e| format!("seccomp: {e}"))?;
    Ok(())
}

/// The capability sets: bounding (every capability dropped), ambient
/// (cleared), permitted, effective, inheritable (zeroed).
pub fn drop_capabilities() -> Result<()> {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    const VERSION_3: u32 = 0x2008_0522;
    #[allow(unsafe_code)]
    // SAFETY: plain prctl and capset calls with valid pointers.
    unsafe {
        for cap in 0..64 {
            if libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) < 0 {
                break;
            }
            if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0
                && libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) == 1
            {
                return Err(os_error("PR_CAPBSET_DROP"));
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(os_error("PR_CAP_AMBIENT_CLEAR_ALL"));
        }
        let mut header = Header {
            version: VERSION_3,
            pid: 0,
        };
        let data = [Data {
            effective: 0,
            permitted: 0,
            inheritable: 0,
        }; 2];
        if libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) != 0 {
            return Err(os_error("capset"));
        }
    }
    Ok(())
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
    say(&format!("{}: {error}", argv[0].to_string_lossy()));
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
    let namespaces = probe_namespaces();
    report.insert(
        "namespaces".to_owned(),
        namespaces.err().map_or(serde_json::Value::Null, Into::into),
    );
    let landlock = filter::landlock_ruleset(&[std::env::temp_dir()])
        .and_then(filter::restrict)
        .map_err(|e| format!("Landlock: {e}"));
    report.insert(
        "landlock".to_owned(),
        match landlock {
            Ok(status) => serde_json::json!({"status": status}),
            Err(error) => serde_json::json!({"error": error}),
        },
    );
    let seccomp = filter::seccomp_program(FilterSettings {
        network: false,
        unix_sockets: false,
    })
    .and_then(|program| seccompiler::apply_filter(&program).map_err(|e| e.to_string()))
    .map_err(|e| format!("seccomp: {e}"));
    report.insert(
        "seccomp".to_owned(),
        seccomp.err().map_or(serde_json::Value::Null, Into::into),
    );
    let _ = writeln!(std::io::stdout(), "{}", serde_json::Value::Object(report));
    std::process::exit(0)
}

/// Namespaces, id maps, a private `/proc`, a tmpfs: in a child, so this
/// process keeps its own view.
fn probe_namespaces() -> Result<()> {
    let (read, write) = pipe()?;
    #[allow(unsafe_code)]
    // SAFETY: the probe is single-threaded.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    match fork {
        nix::unistd::ForkResult::Child => {
            drop(read);
            let outcome = enter_namespaces(false).and_then(|()| {
                #[allow(unsafe_code)]
                // SAFETY: single-threaded.
                let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
                match fork {
                    nix::unistd::ForkResult::Child => {
                        let code = match mounts::probe() {
                            Ok(()) => 0,
                            Err(error) => {
                                let _ = nix::unistd::write(&write, error.as_bytes());
                                1
                            }
                        };
                        std::process::exit(code)
                    }
                    nix::unistd::ForkResult::Parent { child } => {
                        let status = wait_for(child.as_raw())?;
                        if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                            Ok(())
                        } else {
                            Err(String::new())
                        }
                    }
                }
            });
            let code = match outcome {
                Ok(()) => 0,
                Err(error) => {
                    let _ = nix::unistd::write(&write, error.as_bytes());
                    1
                }
            };
            std::process::exit(code)
        }
        nix::unistd::ForkResult::Parent { child } => {
            drop(write);
            let status = wait_for(child.as_raw())?;
            let mut message = String::new();
            let _ = std::fs::File::from(read).read_to_string(&mut message);
            if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                Ok(())
            } else if message.is_empty() {
                Err("namespaces: the probe failed".to_owned())
            } else {
                Err(message)
            }
        }
    }
}

pub mod init;
mod mounts;
