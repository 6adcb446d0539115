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
use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::CommandExt;
use std::path::Path;

use nix::libc;
use nix::sys::socket::{ControlMessage, ControlMessageOwned, MsgFlags, recvmsg, sendmsg};

use super::{Result, SETUP_FAILED, enter_namespaces, os_error, pipe, say, wait_for};
use crate::tools::sandbox::filter::{self, FilterSettings};
use crate::tools::sandbox::spec::{HelperSpec, Request};

/// Descriptors per request, in this order.
pub const FDS: usize = 6;
/// The socket to ybs.
const SOCKET: RawFd = 0;

/// Entry point of `ybs __sandbox-init`: never returns.
pub fn main(args: &[OsString]) -> ! {
    let spec = args
        .get(2)
        .and_then(|spec| spec.to_str())
        .ok_or_else(|| "no spec".to_owned())
        .and_then(|spec| {
            serde_json::from_str::<HelperSpec>(spec).map_err(|e| format!("bad spec: {e}"))
        });
    let code = match spec.and_then(|spec| outer(&spec)) {
        Ok(code) => code,
        Err(error) => {
            answer(&format!("ybs sandbox: {error}"));
            SETUP_FAILED
        }
    };
    std::process::exit(code)
}

/// One datagram to ybs (`ok`, or what failed).
fn answer(text: &str) {
    // SAFETY: fd 0 is the socket for the whole life of this process.
    #[allow(unsafe_code)]
    let socket = unsafe { std::os::fd::BorrowedFd::borrow_raw(SOCKET) };
    let _ = nix::sys::socket::send(socket.as_raw_fd(), text.as_bytes(), MsgFlags::empty());
}

/// Step 1 outside the namespaces: the exit code of the resident.
fn outer(spec: &HelperSpec) -> Result<i32> {
    super::close_inherited_on_exec()?;
    if let Some(dir) = &spec.cgroup {
        crate::tools::sandbox::cgroup::join(dir)?;
    }
    enter_namespaces(!spec.network && spec.unix_sockets)?;
    let (alive_read, alive_write) = pipe()?;
    #[allow(unsafe_code)]
    // SAFETY: this process is single-threaded.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    match fork {
        nix::unistd::ForkResult::Child => {
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
        nix::unistd::ForkResult::Parent { child } => {
            drop(alive_read);
            let status = wait_for(child.as_raw())?;
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
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    let mut poll = libc::pollfd {
        fd: alive.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    #[allow(unsafe_code)]
    // SAFETY: one valid pollfd.
    if unsafe { libc::poll(&raw mut poll, 1, 0) } != 0 {
        return Err("the helper's parent is gone".to_owned());
    }
    super::mounts::build(spec)?;
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
    let mut roots = vec![
        spec.workdir.clone(),
        std::path::PathBuf::from("/tmp"),
        std::path::PathBuf::from("/dev/shm"),
    ];
    roots.extend(spec.writable.iter().cloned());
    roots.extend(spec.scratch.iter().cloned());
    let prepared = Prepared {
        ruleset: filter::landlock_ruleset(&roots).map_err(|e| format!("Landlock: {e}"))?,
        seccomp: filter::seccomp_program(FilterSettings {
            network: spec.network,
            unix_sockets: spec.unix_sockets,
        })
        .map_err(|e| format!("seccomp: {e}"))?,
    };
    // The watchers are reaped by the kernel.
    #[allow(unsafe_code)]
    // SAFETY: a plain signal disposition.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_IGN);
    }
    answer("ok");
    loop {
        let Some(fds) = receive()? else {
            return Ok(());
        };
        #[allow(unsafe_code)]
        // SAFETY: single-threaded.
        let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
        match fork {
            nix::unistd::ForkResult::Child => std::process::exit(watch(spec, &prepared, fds)),
            nix::unistd::ForkResult::Parent { .. } => drop(fds),
        }
    }
}

/// The next request's descriptors; `None` when ybs closed the socket.
fn receive() -> Result<Option<[OwnedFd; FDS]>> {
    loop {
        let mut byte = [0u8; 1];
        let mut iov = [IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; FDS]);
        let message = match recvmsg::<()>(
            SOCKET,
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => return Err(format!("receive a request: {error}")),
        };
        if message.bytes == 0 {
            return Ok(None);
        }
        let mut fds: Vec<OwnedFd> = Vec::new();
        for cmsg in message
            .cmsgs()
            .map_err(|e| format!("receive a request: {e}"))?
        {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                #[allow(unsafe_code)]
                // SAFETY: the kernel just installed these descriptors for us.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        // A malformed request is dropped; its pipes close, which ybs sees.
        if let Ok(fds) = <[OwnedFd; FDS]>::try_from(fds) {
            return Ok(Some(fds));
        }
    }
}

/// Step 3 and 4 in the watcher: the status word to end the program's
/// status pipe with.
fn watch(spec: &HelperSpec, prepared: &Prepared, fds: [OwnedFd; FDS]) -> i32 {
    let [request, stdin, stdout, stderr, status, control] = fds;
    #[allow(unsafe_code)]
    // SAFETY: plain calls; the socket (fd 0) is replaced by the program's
    // stdin, so no watcher nor program holds it.
    unsafe {
        libc::signal(libc::SIGCHLD, libc::SIG_DFL);
        libc::dup2(stdin.as_raw_fd(), 0);
        libc::dup2(stdout.as_raw_fd(), 1);
        libc::dup2(stderr.as_raw_fd(), 2);
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

/// The program's own namespaces and PID 1; waits for the program's wait
/// status, or kills it all on a word from ybs.
fn start(
    spec: &HelperSpec,
    prepared: &Prepared,
    request: OwnedFd,
    control: &OwnedFd,
) -> Result<i32> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    let mut bytes = Vec::new();
    let mut file = std::fs::File::from(request);
    std::io::Seek::rewind(&mut file).map_err(|e| format!("request: {e}"))?;
    file.read_to_end(&mut bytes)
        .map_err(|e| format!("request: {e}"))?;
    drop(file);
    let request = Request::decode(&bytes).ok_or("a malformed request")?;
    #[allow(unsafe_code)]
    // SAFETY: a plain system call; this process is single-threaded.
    if unsafe { libc::unshare(libc::CLONE_NEWPID | libc::CLONE_NEWNS) } != 0 {
        return Err(os_error("unshare (PID, mount namespaces)"));
    }
    let (report_read, report_write) = pipe()?;
    #[allow(unsafe_code)]
    // SAFETY: single-threaded.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    let pid_one = match fork {
        nix::unistd::ForkResult::Child => {
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
        nix::unistd::ForkResult::Parent { child } => child,
    };
    drop(report_write);
    let mut fds = [
        libc::pollfd {
            fd: report_read.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    let mut reported = None;
    loop {
        #[allow(unsafe_code)]
        // SAFETY: two valid pollfds.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if ready < 0 {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(os_error("poll"));
        }
        if fds[1].revents != 0 {
            // Killed on request (a byte) or because ybs let go (the end).
            let _ = nix::sys::signal::kill(pid_one, nix::sys::signal::Signal::SIGKILL);
            fds[1].fd = -1;
        }
        if fds[0].revents != 0 {
            let mut word = [0u8; 4];
            if matches!(nix::unistd::read(&report_read, &mut word), Ok(4)) {
                reported = Some(i32::from_ne_bytes(word));
            }
            break;
        }
    }
    let status = wait_for(pid_one.as_raw())?;
    Ok(reported.unwrap_or(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status) << 8
    } else {
        libc::WTERMSIG(status)
    }))
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
        .map_err(|e| format!("PR_SET_PDEATHSIG: {e}"))?;
    super::mounts::private_proc()?;
    #[allow(unsafe_code)]
    // SAFETY: single-threaded.
    let fork = unsafe { nix::unistd::fork() }.map_err(|e| format!("fork: {e}"))?;
    let program = match fork {
        nix::unistd::ForkResult::Child => {
            drop(report);
            let Err(error) = exec_confined(spec, prepared, request);
            say(&format!("ybs sandbox: {error}"));
            std::process::exit(SETUP_FAILED)
        }
        nix::unistd::ForkResult::Parent { child } => child.as_raw(),
    };
    loop {
        let mut raw = 0;
        #[allow(unsafe_code)]
        // SAFETY: a valid status pointer.
        let pid = unsafe { libc::waitpid(-1, &raw mut raw, 0) };
        if pid == program {
            let mut file = std::fs::File::from(report);
            let _ = file.write_all(&raw.to_ne_bytes());
            return Ok(());
        }
        if pid < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Err(os_error("waitpid"));
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
    nix::unistd::setsid().map_err(|e| format!("setsid: {e}"))?;
    if let Some(max) = spec.max_processes {
        nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NPROC, max, max)
            .map_err(|e| format!("RLIMIT_NPROC: {e}"))?;
    }
    super::drop_capabilities()?;
    #[allow(unsafe_code)]
    // SAFETY: a plain prctl.
    if unsafe { libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) } != 0 {
        return Err(os_error("PR_SET_NO_NEW_PRIVS"));
    }
    // This process is a fork: consuming its copy of the ruleset leaves the
    // resident's for the next program.
    let ruleset = prepared
        .ruleset
        .try_clone()
        .map_err(|e| format!("Landlock: {e}"))?;
    filter::restrict(ruleset).map_err(|e| format!("Landlock: {e}"))?;
    seccompiler::apply_filter(&prepared.seccomp).map_err(|e| format!("seccomp: {e}"))?;
    if let Err(error) = std::env::set_current_dir(&request.cwd) {
        return Err(format!("{}: {error}", request.cwd.display()));
    }
    let error = std::process::Command::new(&request.argv[0])
        .args(&request.argv[1..])
        .env_clear()
        .envs(request.env.iter().map(|(name, value)| (name, value)))
        .exec();
    say(&format!(
        "{}: {error}",
        String::from_utf8_lossy(request.argv[0].as_bytes())
    ));
    std::process::exit(if error.kind() == std::io::ErrorKind::NotFound {
        127
    } else {
        126
    })
}

/// ybs's side of one request (see the module documentation): the
/// descriptors in [`FDS`] order.
pub fn send_request(
    socket: std::os::fd::BorrowedFd<'_>,
    fds: [std::os::fd::BorrowedFd<'_>; FDS],
) -> std::io::Result<()> {
    let raw: Vec<RawFd> = fds.iter().map(AsRawFd::as_raw_fd).collect();
    let iov = [IoSlice::new(b"r")];
    let cmsg = [ControlMessage::ScmRights(&raw)];
    loop {
        match sendmsg::<()>(
            socket.as_fd().as_raw_fd(),
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
