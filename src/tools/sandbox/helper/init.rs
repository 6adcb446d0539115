//! `ybs __sandbox-init SPEC`: a task's resident sandbox. The namespaces
//! and the file system view are built once per task instead of once per
//! program; each program then starts from here with its own confinement.
//! Its stdin is a `SOCK_SEQPACKET` socket to ybs.
//!
//! 1. As the per-program helper does ([`super::run`]): join the task's
//!    pids cgroup, enter the namespaces, fork PID 1 (the *resident*), which
//!    builds the view ([`super::mounts`]) and sets the hostname. It
//!    answers `ok` (or the error) on the socket and then serves requests
//!    until ybs closes it; this process waits for it, and dies with ybs.
//! 2. A request is one datagram carrying six descriptors: a memory file
//!    holding the [`Request`], the program's stdin, stdout and stderr, the
//!    write end of a *status* pipe and the read end of a *control* pipe.
//!    The resident forks a *watcher* per request and forgets it (children
//!    are reaped by the kernel).
//! 3. The watcher enters a new PID namespace and a new mount namespace
//!    (a copy of the view) and forks the program's PID 1, which mounts a
//!    `/proc` of that namespace only and forks the program. The program
//!    gets a session of its own, the Landlock ruleset and seccomp program
//!    prepared once by the resident (each program its own Landlock
//!    domain), no capability, `no_new_privs`, the process limit, and is
//!    exec'd in its working directory with its environment.
//! 4. PID 1 reaps every process until the program ends, then reports its
//!    wait status and exits: the kernel kills whatever the program left
//!    in its namespace, as with the per-program helper. The watcher writes
//!    that status to the status pipe. A byte on the control pipe, or its
//!    end (ybs dropped the program), makes the watcher kill the program's
//!    PID 1, and with it the whole namespace.

use std::ffi::OsString;
use std::io::{IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;

use nix::libc;
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

use super::{
    Result, SETUP_FAILED, SetupError, build_view, drop_privileges, enter_namespaces, failed,
    failed_nix, landlock_roots, pipe, say, tie_to_parent,
};
use crate::tools::sandbox::filter::{self, FilterSettings};
use crate::tools::sandbox::spec::{HelperSpec, Request};
use crate::tools::sandbox::sys;

/// Descriptors per request, in this order.
pub const FDS: usize = 6;

/// Entry point of `ybs __sandbox-init`: never returns.
pub fn main(args: &[OsString]) -> ! {
    let spec = args
        .get(2)
        .and_then(|spec| spec.to_str())
        .ok_or(SetupError::Protocol("no spec"))
        .and_then(|spec| Ok(serde_json::from_str::<HelperSpec>(spec)?));
    let code = match spec.and_then(|spec| outer(&spec)) {
        Ok(code) => code,
        Err(error) => {
            answer(&format!("ybs sandbox: {error}"));
            SETUP_FAILED
        }
    };
    std::process::exit(code)
}

/// The socket to ybs: this process's stdin.
fn socket() -> std::io::Stdin {
    std::io::stdin()
}

/// One datagram to ybs (`ok`, or what failed).
fn answer(text: &str) {
    let _ = nix::sys::socket::send(
        socket().as_fd().as_raw_fd(),
        text.as_bytes(),
        MsgFlags::empty(),
    );
}

/// Step 1 outside the namespaces: the exit code of the resident.
fn outer(spec: &HelperSpec) -> Result<i32> {
    sys::close_inherited_on_exec().map_err(failed("close-on-exec of inherited descriptors"))?;
    if let Some(dir) = &spec.cgroup {
        crate::tools::sandbox::cgroup::join(dir)?;
    }
    enter_namespaces(!spec.network && spec.unix_sockets)?;
    let (alive_read, alive_write) = pipe()?;
    match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(alive_write);
            let code = match resident(spec, &alive_read) {
                Ok(()) => 0,
                Err(error) => {
                    answer(&format!("ybs sandbox: {error}"));
                    SETUP_FAILED
                }
            };
            std::process::exit(code)
        }
        sys::ForkResult::Parent { child } => {
            drop(alive_read);
            let (_, status) = sys::wait_raw(child.as_raw()).map_err(failed("waitpid"))?;
            drop(alive_write);
            Ok(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                SETUP_FAILED
            })
        }
    }
}

/// What every program gets, prepared once: the Landlock ruleset and the
/// seccomp program.
struct Prepared {
    ruleset: landlock::RulesetCreated,
    seccomp: seccompiler::BpfProgram,
}

/// Step 1 and 2 in PID 1 of the task's namespaces.
fn resident(spec: &HelperSpec, alive: &OwnedFd) -> Result<()> {
    tie_to_parent(alive)?;
    build_view(spec)?;
    let prepared = Prepared {
        ruleset: filter::landlock_ruleset(&landlock_roots(spec, true))?,
        seccomp: filter::seccomp_program(FilterSettings {
            network: spec.network,
            unix_sockets: spec.unix_sockets,
        })?,
    };
    // The watchers are reaped by the kernel.
    sys::reap_children_automatically(true);
    answer("ok");
    loop {
        let stdin = socket();
        let Some(fds) =
            sys::receive_fds::<FDS>(stdin.as_fd()).map_err(failed("receive a request"))?
        else {
            return Ok(());
        };
        // A malformed request is dropped; its pipes close, which ybs sees.
        let Ok(fds) = <[OwnedFd; FDS]>::try_from(fds) else {
            continue;
        };
        match sys::fork().map_err(failed("fork"))? {
            sys::ForkResult::Child => std::process::exit(watch(spec, &prepared, fds)),
            sys::ForkResult::Parent { .. } => drop(fds),
        }
    }
}

/// Step 3 and 4 in the watcher: the status word to end the program's
/// status pipe with.
fn watch(spec: &HelperSpec, prepared: &Prepared, fds: [OwnedFd; FDS]) -> i32 {
    let [request, stdin, stdout, stderr, status, control] = fds;
    sys::reap_children_automatically(false);
    // The socket (descriptor 0) is replaced by the program's stdin, so
    // no watcher nor program holds it.
    for (fd, standard) in [(&stdin, 0), (&stdout, 1), (&stderr, 2)] {
        if sys::dup_onto_standard(fd.as_fd(), standard).is_err() {
            return SETUP_FAILED;
        }
    }
    drop((stdin, stdout, stderr));
    let raw = match start(spec, prepared, request, &control) {
        Ok(raw) => raw,
        Err(error) => {
            say(&format!("ybs sandbox: {error}"));
            SETUP_FAILED << 8
        }
    };
    let mut file = std::fs::File::from(status);
    let _ = file.write_all(&raw.to_ne_bytes());
    0
}

/// Reads the request from its memory file.
fn read_request(request: OwnedFd) -> Result<Request> {
    let mut bytes = Vec::new();
    let mut file = std::fs::File::from(request);
    std::io::Seek::rewind(&mut file).map_err(failed("request"))?;
    file.read_to_end(&mut bytes).map_err(failed("request"))?;
    Request::decode(&bytes).ok_or(SetupError::Protocol("a malformed request"))
}

/// The program's own namespaces and PID 1; waits for the program's wait
/// status, or kills it all on a word from ybs.
fn start(
    spec: &HelperSpec,
    prepared: &Prepared,
    request: OwnedFd,
    control: &OwnedFd,
) -> Result<i32> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(failed_nix("PR_SET_PDEATHSIG"))?;
    let request = read_request(request)?;
    sys::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS)
        .map_err(failed("unshare (PID, mount namespaces)"))?;
    let (report_read, report_write) = pipe()?;
    let pid_one = match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(report_read);
            let code = match program_pid_one(spec, prepared, &request, report_write) {
                Ok(()) => 0,
                Err(error) => {
                    say(&format!("ybs sandbox: {error}"));
                    SETUP_FAILED
                }
            };
            std::process::exit(code)
        }
        sys::ForkResult::Parent { child } => child,
    };
    drop(report_write);
    let reported = wait_for_report(&report_read, control, pid_one)?;
    let (_, status) = sys::wait_raw(pid_one.as_raw()).map_err(failed("waitpid"))?;
    Ok(reported.unwrap_or(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) << 8
    } else {
        libc::WTERMSIG(status)
    }))
}

/// Waits until the program's PID 1 reports the program's wait status
/// (`Some`) or ends without one (`None`); a byte on `control`, or its
/// end, kills that PID 1 meanwhile.
fn wait_for_report(
    report: &OwnedFd,
    control: &OwnedFd,
    pid_one: nix::unistd::Pid,
) -> Result<Option<i32>> {
    let mut fds = [
        libc::pollfd {
            fd: report.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        sys::poll(&mut fds, -1).map_err(failed("poll"))?;
        if fds[1].revents != 0 {
            // Killed on request (a byte) or because ybs let go (the end).
            let _ = nix::sys::signal::kill(pid_one, nix::sys::signal::Signal::SIGKILL);
            fds[1].fd = -1;
        }
        if fds[0].revents != 0 {
            let mut word = [0u8; 4];
            return Ok(matches!(nix::unistd::read(report, &mut word), Ok(4))
                .then(|| i32::from_ne_bytes(word)));
        }
    }
}

/// PID 1 of the program's namespace: a `/proc` of its own, the program
/// started and every process reaped until it ends; its wait status is
/// written to `report`.
fn program_pid_one(
    spec: &HelperSpec,
    prepared: &Prepared,
    request: &Request,
    report: OwnedFd,
) -> Result<()> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(failed_nix("PR_SET_PDEATHSIG"))?;
    super::mounts::private_proc()?;
    let program = match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(report);
            let Err(error) = exec_confined(spec, prepared, request);
            say(&format!("ybs sandbox: {error}"));
            std::process::exit(SETUP_FAILED)
        }
        sys::ForkResult::Parent { child } => child.as_raw(),
    };
    loop {
        let (pid, raw) = sys::wait_raw(-1).map_err(failed("waitpid"))?;
        if pid == program {
            let mut file = std::fs::File::from(report);
            let _ = file.write_all(&raw.to_ne_bytes());
            return Ok(());
        }
    }
}

/// In the program's process: a session of its own, the confinement, the
/// exec. Returns only on a failure before the exec (an exec failure
/// exits 127 or 126 like a shell).
fn exec_confined(
    spec: &HelperSpec,
    prepared: &Prepared,
    request: &Request,
) -> Result<std::convert::Infallible> {
    nix::unistd::setsid().map_err(failed_nix("setsid"))?;
    drop_privileges(spec)?;
    // This process is a fork: consuming its copy of the ruleset leaves the
    // resident's for the next program.
    let ruleset = prepared
        .ruleset
        .try_clone()
        .map_err(failed("Landlock: the prepared ruleset"))?;
    filter::restrict(ruleset)?;
    filter::apply_seccomp(&prepared.seccomp)?;
    std::env::set_current_dir(&request.cwd).map_err(failed(request.cwd.display()))?;
    let error = std::process::Command::new(&request.argv[0])
        .args(&request.argv[1..])
        .env_clear()
        .envs(request.env.iter().map(|(name, value)| (name, value)))
        .exec();
    super::exec_failed(&request.argv[0], &error)
}

/// ybs's side of one request (see the module documentation): the
/// descriptors in [`FDS`] order.
pub fn send_request(socket: BorrowedFd<'_>, fds: [BorrowedFd<'_>; FDS]) -> std::io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let iov = [IoSlice::new(b"r")];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    loop {
        match sendmsg::<()>(
            socket.as_raw_fd(),
            &iov,
            &cmsg,
            MsgFlags::MSG_NOSIGNAL,
            None,
        ) {
            Ok(_) => return Ok(()),
            Err(nix::errno::Errno::EINTR) => {}
            Err(error) => return Err(error.into()),
        }
    }
}
