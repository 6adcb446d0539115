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
//! 3. The next program's PID 1 and its process are made before its
//!    request (a *spare*), so that their making overlaps the step before:
//!    right after the view is built, and again right after each request
//!    is handed on, the resident makes a new PID namespace for its next
//!    child (`unshare(CLONE_NEWPID)`), forks the spare into it, goes back
//!    to the task's PID namespace (`setns`) and forgets the child (it is
//!    reaped by the kernel). The spare dies with the resident
//!    (`PR_SET_PDEATHSIG`), enters a new mount namespace (a copy of the
//!    view), mounts a `/proc` of its PID namespace only, empties the
//!    capability bounding set (keeping its own capabilities) and installs
//!    the seccomp program prepared once by the resident (with deny rules,
//!    after forking the exec guard's supervisor, which gets the listener
//!    and, once the request arrives, the program's stderr:
//!    [`super::guard`]). It then forks the
//!    program's process, which takes a session of its own, the process
//!    limit, no capability, `no_new_privs` and its own Landlock domain
//!    (the ruleset prepared once) and waits. On a request the resident
//!    passes the six descriptors on to the spare; PID 1 passes the memory
//!    file and the standard streams on to the program, which reads its
//!    request and is exec'd in its working directory with its
//!    environment. A spare that could not be made or prepared refuses the
//!    request it would have served (the reason on its stderr, the setup
//!    failure as its status); one whose socket ends exits quietly.
//! 4. PID 1 reaps every process until the program ends, kills and reaps
//!    whatever the program left in its namespace, and only then writes
//!    the program's wait status to the status pipe and exits: when ybs
//!    hears of the end, nothing of the program runs any more. A byte on
//!    the control pipe, or its end (ybs dropped the program), makes PID 1
//!    kill and reap the whole namespace the same way and exit without a
//!    status (ybs reads a kill). PID 1 dies with the resident, and the
//!    kernel then kills its namespace.

use std::ffi::OsString;
use std::io::{IoSlice, Read, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};

use nix::libc;
use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};

use super::{
    Result, SETUP_FAILED, SetupError, build_view, drop_inherited_privileges, enter_namespaces,
    exec_searched, failed, failed_nix, filter_of, guard, landlock_roots, pipe, say, tie_to_parent,
};
use crate::tools::sandbox::filter;
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
/// seccomp program (with the exec guard's rule when the spec has deny
/// rules).
struct Prepared {
    ruleset: landlock::RulesetCreated,
    seccomp: seccompiler::BpfProgram,
}

/// Step 1 and 2 in PID 1 of the task's namespaces.
fn resident(spec: &HelperSpec, alive: &OwnedFd) -> Result<()> {
    tie_to_parent(alive)?;
    // The task's PID namespace, which the resident goes back to after
    // making each program's own (below).
    let task_pids = std::fs::File::open("/proc/self/ns/pid")
        .map(OwnedFd::from)
        .map_err(failed("the task's PID namespace"))?;
    build_view(spec)?;
    let prepared = Prepared {
        ruleset: filter::landlock_ruleset(&landlock_roots(spec, true))?,
        seccomp: filter_of(spec)?,
    };
    // The programs' PID 1s are reaped by the kernel.
    sys::reap_children_automatically(true);
    answer("ok");
    let (mut task_pids, mut spare) = prepare_spare(spec, &prepared, task_pids)?;
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
        match spare {
            Ok(socket) => {
                if let Err(error) = send_request(socket.as_fd(), fds.each_ref().map(AsFd::as_fd)) {
                    refuse(&fds, &failed("hand the request to its PID 1")(error));
                }
            }
            Err(error) => refuse(&fds, &error),
        }
        drop(fds);
        // The next one at once: its start overlaps this program's run.
        (task_pids, spare) = prepare_spare(spec, &prepared, task_pids)?;
    }
}

/// Forks the *spare*: the next program's PID 1, ready before its request
/// arrives ([`spare`]). `task_pids` (the task's PID namespace, given
/// back) and the socket to the spare, or why there is none (for the
/// request it would have served); an error only when the resident cannot
/// go back to the task's PID namespace.
fn prepare_spare(
    spec: &HelperSpec,
    prepared: &Prepared,
    task_pids: OwnedFd,
) -> Result<(OwnedFd, std::result::Result<OwnedFd, SetupError>)> {
    let (ours, theirs) = match socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    ) {
        Ok(pair) => pair,
        Err(error) => return Ok((task_pids, Err(failed_nix("socketpair")(error)))),
    };
    // The next child is PID 1 of a PID namespace of its own.
    if let Err(error) = sys::unshare(libc::CLONE_NEWPID) {
        return Ok((task_pids, Err(failed("unshare (PID namespace)")(error))));
    }
    let forked = sys::fork();
    if let Ok(sys::ForkResult::Child) = forked {
        drop(task_pids);
        std::process::exit(spare(spec, prepared, ours, theirs));
    }
    // Back in the task's namespace for the children after: a new one
    // can only be made from there.
    sys::setns(task_pids.as_fd(), libc::CLONE_NEWPID)
        .map_err(failed("setns (the task's PID namespace)"))?;
    drop(theirs);
    let spare = match forked {
        Ok(_) => Ok(ours),
        Err(error) => Err(failed("fork")(error)),
    };
    Ok((task_pids, spare))
}

/// A request that could not be started: the reason on its stderr, and
/// the helper's setup failure as its wait status.
fn refuse(fds: &[OwnedFd; FDS], error: &SetupError) {
    let _ = nix::unistd::write(&fds[3], format!("ybs sandbox: {error}\n").as_bytes());
    let _ = nix::unistd::write(&fds[4], &(SETUP_FAILED << 8).to_ne_bytes());
}

/// The spare: a PID 1 that prepares what does not depend on the request
/// ([`get_ready`]), then waits for its request on `socket`. Its exit code
/// (which nobody reads). A spare whose socket ends without a request
/// exits quietly; one whose preparation failed refuses its request with
/// the reason, as the resident does.
fn spare(spec: &HelperSpec, prepared: &Prepared, ours: OwnedFd, socket: OwnedFd) -> i32 {
    drop(ours);
    // Its children are its to reap.
    sys::reap_children_automatically(false);
    let ready = get_ready(spec, prepared);
    serve(ready, &socket, pid_one)
}

/// Waits for one request on `socket`; refuses it when the spare is not
/// `ready`, else runs it with `run`. The exit code of the spare.
fn serve<T>(ready: Result<T>, socket: &OwnedFd, run: impl FnOnce(T, [OwnedFd; FDS]) -> i32) -> i32 {
    let Ok(Some(fds)) = sys::receive_fds::<FDS>(socket.as_fd()) else {
        // The resident is gone, or let go of this spare.
        return 0;
    };
    let Ok(fds) = <[OwnedFd; FDS]>::try_from(fds) else {
        return 0;
    };
    match ready {
        Ok(ready) => run(ready, fds),
        Err(error) => {
            refuse(&fds, &error);
            SETUP_FAILED
        }
    }
}

/// A spare that is ready: its program, forked and confined, waiting for
/// its descriptors on `program_socket`, and `SIGCHLD` on `signals`.
struct Ready {
    program: libc::pid_t,
    program_socket: OwnedFd,
    signals: OwnedFd,
    /// The exec guard's supervisor, told the program's stderr.
    guard: Option<guard::Supervisor>,
}

/// Descriptors PID 1 hands its program: the request's memory file and
/// the program's stdin, stdout and stderr.
const PROGRAM_FDS: usize = 4;

/// In the spare, before its request: it dies with the resident, lets go
/// of the resident's socket (its stdin becomes `/dev/null`), enters a
/// mount namespace of its own (a copy of the view) with a `/proc` of its
/// PID namespace, empties the capability bounding set (which every child
/// inherits; PID 1 keeps its own capabilities, so a program cannot trace
/// it or open its memory) and installs the seccomp filter. What PID 1
/// still does after it (fork, wait, poll, a signal descriptor, read and
/// write, `sendmsg`, `dup2`, `kill`) the filter allows. Then it forks its
/// program, which confines itself and waits for its descriptors
/// ([`program`]).
fn get_ready(spec: &HelperSpec, prepared: &Prepared) -> Result<Ready> {
    nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
        .map_err(failed_nix("PR_SET_PDEATHSIG"))?;
    let null = std::fs::File::open("/dev/null").map_err(failed("/dev/null"))?;
    sys::dup_onto_standard(null.as_fd(), 0).map_err(failed("dup2 (stdin)"))?;
    drop(null);
    sys::unshare(libc::CLONE_NEWNS).map_err(failed("unshare (mount namespace)"))?;
    super::mounts::private_proc()?;
    sys::drop_bounding_set().map_err(failed("drop the capabilities"))?;
    // The exec guard's supervisor keeps PID 1's capabilities (`guard`).
    let guard = guard::start(spec)?;
    guard::apply(&prepared.seccomp, guard.as_ref())?;
    let (program_socket, socket) = socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(failed_nix("socketpair"))?;
    let program = match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(program_socket);
            std::process::exit(program(spec, prepared, &socket))
        }
        sys::ForkResult::Parent { child } => child.as_raw(),
    };
    drop(socket);
    // After the last fork: the mask is inherited.
    let signals = sys::child_signals().map_err(failed("signalfd"))?;
    Ok(Ready {
        program,
        program_socket,
        signals,
        guard,
    })
}

/// The end of step 3 and step 4 in the program's PID 1 (a spare that
/// got its request):
/// the exit code of that process (which nobody reads: the status goes on
/// the status pipe).
fn pid_one(ready: Ready, fds: [OwnedFd; FDS]) -> i32 {
    let [request, stdin, stdout, stderr, status, control] = fds;
    // PID 1's own word goes where the program's stderr goes.
    if sys::dup_onto_standard(stderr.as_fd(), 2).is_err() {
        let _ = nix::unistd::write(&status, &(SETUP_FAILED << 8).to_ne_bytes());
        return SETUP_FAILED;
    }
    // Before the program can exec: its refusals go there too.
    if let Some(guard) = &ready.guard {
        let _ = guard.stderr(stderr.as_fd());
    }
    let handed = send_request(
        ready.program_socket.as_fd(),
        [
            request.as_fd(),
            stdin.as_fd(),
            stdout.as_fd(),
            stderr.as_fd(),
        ],
    );
    drop((request, stdin, stdout, stderr, ready.program_socket));
    let ended = match handed {
        Ok(()) => wait_for(ready.program, &ready.signals, &control),
        Err(error) => Err(failed("hand the request to the program")(error)),
    };
    // Whatever the program left behind goes before its status is told:
    // when ybs hears of the end, nothing of it runs any more.
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(-1),
        nix::sys::signal::Signal::SIGKILL,
    );
    while sys::wait_raw(-1).is_ok() {}
    let word = match ended {
        Ok(Some(raw)) => raw,
        // Killed: the status pipe ends without a word.
        Ok(None) => return 0,
        Err(error) => {
            say(&format!("ybs sandbox: {error}"));
            SETUP_FAILED << 8
        }
    };
    let mut file = std::fs::File::from(status);
    let _ = file.write_all(&word.to_ne_bytes());
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

/// Reaps every child until `program` ends (its wait status) or a byte
/// arrives on `control`, or its end (`None`).
fn wait_for(program: libc::pid_t, signals: &OwnedFd, control: &OwnedFd) -> Result<Option<i32>> {
    let mut fds = [
        libc::pollfd {
            fd: control.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: signals.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    loop {
        // Children that ended before the signal descriptor existed, or
        // since it was last read.
        while let Some((pid, raw)) = sys::wait_any_now().map_err(failed("waitpid"))? {
            if pid == program {
                return Ok(Some(raw));
            }
        }
        sys::poll(&mut fds, -1).map_err(failed("poll"))?;
        if fds[0].revents != 0 {
            // Killed on request (a byte) or because ybs let go (the end).
            return Ok(None);
        }
        let mut drain = [0u8; 512];
        while matches!(nix::unistd::read(signals, &mut drain), Ok(read) if read > 0) {}
    }
}

/// The program's process, forked by its PID 1 ahead of the request: a
/// session of its own and the confinement (its PID 1 emptied the
/// capability bounding set and installed the seccomp filter already,
/// which it inherits), then it waits on `socket` for its descriptors
/// ([`PROGRAM_FDS`]), takes its standard streams and execs the request in
/// its working directory with its environment. Returns (its exit code)
/// only when it cannot: it says why on the program's stderr. An exec
/// failure exits 127 or 126 like a shell; a socket that ends without
/// descriptors (its PID 1 is gone) exits quietly.
fn program(spec: &HelperSpec, prepared: &Prepared, socket: &OwnedFd) -> i32 {
    let confined = confine(spec, prepared);
    let Ok(Some(fds)) = sys::receive_fds::<PROGRAM_FDS>(socket.as_fd()) else {
        return 0;
    };
    let Ok([request, stdin, stdout, stderr]) = <[OwnedFd; PROGRAM_FDS]>::try_from(fds) else {
        return SETUP_FAILED;
    };
    for (fd, standard) in [(&stdin, 0), (&stdout, 1), (&stderr, 2)] {
        if sys::dup_onto_standard(fd.as_fd(), standard).is_err() {
            return SETUP_FAILED;
        }
    }
    drop((stdin, stdout, stderr));
    let Err(error) = confined
        .and_then(|()| read_request(request))
        .and_then(|request| exec_request(&request));
    say(&format!("ybs sandbox: {error}"));
    SETUP_FAILED
}

/// The program's confinement before its request: a session of its own,
/// the process limit, no capability, `no_new_privs`, its own Landlock
/// domain (from the ruleset prepared once).
fn confine(spec: &HelperSpec, prepared: &Prepared) -> Result<()> {
    nix::unistd::setsid().map_err(failed_nix("setsid"))?;
    drop_inherited_privileges(spec)?;
    // This process is a fork: consuming its copy of the ruleset leaves the
    // resident's for the next program.
    let ruleset = prepared
        .ruleset
        .try_clone()
        .map_err(failed("Landlock: the prepared ruleset"))?;
    filter::restrict(ruleset)?;
    Ok(())
}

/// The exec of a confined program. Returns only on a failure before the
/// exec (an exec failure exits 127 or 126 like a shell).
fn exec_request(request: &Request) -> Result<std::convert::Infallible> {
    std::env::set_current_dir(&request.cwd).map_err(failed(request.cwd.display()))?;
    // The program's own `PATH` (the last one set wins).
    let path = request
        .env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| value.as_os_str());
    exec_searched(&request.argv, path, |command| {
        command
            .env_clear()
            .envs(request.env.iter().map(|(name, value)| (name, value)));
    })
}

/// ybs's side of one request (see the module documentation): the
/// descriptors in [`FDS`] order. (The resident hands a request on to its
/// spare, and PID 1 its program's share of it to the program, the same
/// way.)
pub fn send_request<const N: usize>(
    socket: BorrowedFd<'_>,
    fds: [BorrowedFd<'_>; N],
) -> std::io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A request as ybs sends it, and ybs's ends of its stderr and status
    /// pipes.
    fn request(socket: &OwnedFd) -> (OwnedFd, OwnedFd) {
        let memfd =
            nix::sys::memfd::memfd_create(c"t", nix::sys::memfd::MFdFlags::MFD_CLOEXEC).unwrap();
        let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let (_stdout_ours, stdout) = pipe().unwrap();
        let (stderr_ours, stderr) = pipe().unwrap();
        let (status_ours, status) = pipe().unwrap();
        let (control, _control_ours) = pipe().unwrap();
        send_request(
            socket.as_fd(),
            [
                memfd.as_fd(),
                null.as_fd(),
                stdout.as_fd(),
                stderr.as_fd(),
                status.as_fd(),
                control.as_fd(),
            ],
        )
        .unwrap();
        (stderr_ours, status_ours)
    }

    fn pair() -> (OwnedFd, OwnedFd) {
        socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap()
    }

    fn read_all(fd: OwnedFd) -> Vec<u8> {
        let mut bytes = Vec::new();
        std::fs::File::from(fd).read_to_end(&mut bytes).unwrap();
        bytes
    }

    #[test]
    fn a_spare_that_could_not_get_ready_refuses_its_request_with_the_reason() {
        let (resident, spare) = pair();
        let (stderr, status) = request(&resident);
        let error =
            failed("unshare (mount namespace)")(std::io::Error::from_raw_os_error(libc::EPERM));
        let code = serve(Err::<(), _>(error), &spare, |(), _| {
            panic!("a spare that is not ready ran")
        });
        assert_eq!(code, SETUP_FAILED);
        assert_eq!(
            String::from_utf8(read_all(stderr)).unwrap(),
            "ybs sandbox: unshare (mount namespace): Operation not permitted (os error 1)\n"
        );
        assert_eq!(read_all(status), (SETUP_FAILED << 8).to_ne_bytes());
    }

    #[test]
    fn a_ready_spare_runs_its_request_and_a_spare_let_go_exits_quietly() {
        let (resident, spare) = pair();
        let _ends = request(&resident);
        assert_eq!(
            serve(Ok(()), &spare, |(), fds| i32::try_from(fds.len()).unwrap()),
            6
        );
        drop(resident);
        assert_eq!(
            serve(Ok(()), &spare, |(), _| panic!("no request was sent")),
            0
        );
        let (resident, spare) = pair();
        drop(resident);
        let error = SetupError::Protocol("not ready");
        assert_eq!(
            serve(Err::<(), _>(error), &spare, |(), _| panic!(
                "no request was sent"
            )),
            0
        );
    }
}
