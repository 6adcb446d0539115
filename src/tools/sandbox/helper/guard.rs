//! The exec guard (docs/sandbox.md, "The exec guard"): every `execve` and
//! `execveat` of a confined process is checked against the spec's deny
//! rules ([`HelperSpec::exec_deny`], command globs such as `curl*`), and a
//! match fails with `EPERM`.
//!
//! The seccomp program sends both system calls to a listener
//! ([`FilterSettings::exec_guard`](crate::tools::sandbox::filter::FilterSettings));
//! a *supervisor*, a process that is not under the filter and never
//! execs, answers each one. It reads the path and the argument vector from
//! `/proc/PID/mem`, builds the views ([`views`]) and refuses the call when a
//! rule matches one, with one line on its stderr (the program's):
//! ``ybs sandbox: refused exec of `VIEW`: it matches the deny rule
//! `run_shell(GLOB)` ``. Anything it cannot read, too long an argument
//! vector, or a caller gone while it read, is refused too.
//!
//! Where the supervisor is:
//!
//! - in the namespaces (the per-program helper's PID 1, a resident's
//!   spare): a child forked before the capabilities are dropped and the
//!   filter installed ([`start`]), so it keeps its capabilities in the
//!   task's user namespace (which `/proc/PID/mem` of a program that is not
//!   dumpable, or a Yama `ptrace_scope` of 1, asks for), tied to its
//!   parent by `PR_SET_PDEATHSIG(SIGKILL)`. The listener reaches it over a
//!   socket (`SCM_RIGHTS`) and is closed where it was made, before any
//!   program is forked; a resident's spare sends the program's stderr the
//!   same way once its request arrives ([`Supervisor::stderr`]);
//! - without namespaces: the helper itself, which forks the program and
//!   stays its parent (an ancestor may read its memory under Yama),
//!   serving until the program ends ([`run_guarded`]).
//!
//! The supervisor ends when the listener reports `POLLHUP` (no process is
//! left under the filter), when its parent dies, or (without namespaces)
//! when the program ends. With every copy of the listener closed, the
//! kernel fails each `execve` of a process still under the filter with
//! `ENOSYS`: the guard fails closed.
//!
//! Not a security boundary (the kernel says as much of user
//! notifications): another thread of the caller can change the argument
//! vector between the check and the kernel's own copy. The guard is the
//! policy's approval logic at exec time; the sandbox's other layers stay
//! the boundary.

use std::ffi::OsStr;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::FileExt as _;
use std::path::{Path, PathBuf};

use nix::libc;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};

use super::{Result, SETUP_FAILED, SetupError, end_like, failed, failed_nix, say};
use crate::tools::sandbox::spec::HelperSpec;
use crate::tools::sandbox::sys::{self, notify};
use crate::tools::sandbox::{exec_views, filter};

/// At most this many entries in an argument vector the guard reads.
pub const MAX_ARGS: usize = 4096;
/// At most this many bytes of path, pointers and arguments it reads.
pub const MAX_BYTES: usize = 256 * 1024;
/// A view longer than this is shortened in the refusal's message.
const SHOWN: usize = 200;

/// The deny rules, compiled once: each glob as written, and its matcher
/// (the policy's command globs: `*` spans `/`).
pub struct Rules(
    Vec<(String, globset::GlobMatcher)>,
    Vec<exec_views::DeniedProgram>,
);

impl Rules {
    /// Compiles `globs` the way the policy compiles a command glob.
    #[cfg(test)]
    pub fn compile(globs: &[String]) -> Result<Self> {
        Self::with_programs(globs, &[])
    }

    /// Compiles `globs` the way the policy compiles a command glob, with
    /// the denied programs' files.
    pub fn with_programs(globs: &[String], programs: &[exec_views::DeniedProgram]) -> Result<Self> {
        globs
            .iter()
            .map(|glob| {
                globset::GlobBuilder::new(glob)
                    .literal_separator(false)
                    .build()
                    .map(|compiled| (glob.clone(), compiled.compile_matcher()))
                    .map_err(|error| {
                        SetupError::Guard(format!("deny rule `{glob}`: {}", error.kind()))
                    })
            })
            .collect::<Result<Vec<_>>>()
            .map(|compiled| Self(compiled, programs.to_vec()))
    }

    /// Every view of one exec: the three of [`views`], then what the
    /// kernel runs besides ([`exec_views`]: a `#!` interpreter, the
    /// loader's program, a denied program's copy). `file` opens the file
    /// executed; `open` maps a path as `pid` sees it to one this process
    /// can open.
    fn all_views(&self, pid: u32, file: PathBuf, path: &[u8], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
        let mut all = views(path, argv);
        let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
        let exec = exec_views::Exec {
            file,
            path: text(path),
            argv: argv.iter().map(|a| text(a)).collect(),
        };
        let open = |seen: &str| in_process(pid, None, seen.as_bytes());
        for view in exec_views::views(&exec, &self.1, &open) {
            let view = view.into_bytes();
            if !all.contains(&view) {
                all.push(view);
            }
        }
        all
    }

    /// The first view a rule matches, with that rule.
    pub fn refusal<'a>(&'a self, views: &'a [Vec<u8>]) -> Option<(&'a [u8], &'a str)> {
        views.iter().find_map(|view| {
            let text = Path::new(OsStr::from_bytes(view));
            self.0
                .iter()
                .find(|(_, matcher)| matcher.is_match(text))
                .map(|(glob, _)| (view.as_slice(), glob.as_str()))
        })
    }
}

/// What follows the last `/` (all of it when there is none).
fn basename(path: &[u8]) -> &[u8] {
    path.rsplit(|byte| *byte == b'/').next().unwrap_or(path)
}

/// The views of one exec of `path` with `argv`, each joined with single
/// spaces: (a) `argv` as given; (b) `argv` with `argv[0]` replaced by its
/// basename; (c) the basename of `path` followed by `argv[1..]`.
pub fn views(path: &[u8], argv: &[Vec<u8>]) -> Vec<Vec<u8>> {
    let join = |first: &[u8]| {
        let mut view = first.to_vec();
        for arg in argv.iter().skip(1) {
            view.push(b' ');
            view.extend_from_slice(arg);
        }
        view
    };
    let first = argv.first().map_or(&[][..], Vec::as_slice);
    vec![join(first), join(basename(first)), join(basename(path))]
}

/// The refusal's line for `view` matched by `glob`.
pub fn refusal_message(view: &[u8], glob: &str) -> String {
    let view = String::from_utf8_lossy(view);
    let shown = match view.char_indices().nth(SHOWN) {
        Some((at, _)) => format!("{}…", &view[..at]),
        None => view.into_owned(),
    };
    format!("ybs sandbox: refused exec of `{shown}`: it matches the deny rule `run_shell({glob})`")
}

/// The way to the process that supervises the filter about to be
/// installed: a socket for the listener (and a program's stderr).
pub struct Supervisor {
    socket: OwnedFd,
}

impl Supervisor {
    /// Hands `listener` to the supervisor; it is closed here.
    fn hand(&self, listener: OwnedFd) -> Result<()> {
        super::init::send_request(self.socket.as_fd(), [listener.as_fd()])
            .map_err(failed("hand the exec guard's listener to its supervisor"))
    }

    /// Gives the supervisor the program's stderr, where its refusals go
    /// (a resident's spare, whose stderr is the resident's until its
    /// request arrives).
    pub fn stderr(&self, stderr: BorrowedFd<'_>) -> Result<()> {
        super::init::send_request(self.socket.as_fd(), [stderr])
            .map_err(failed("hand the program's stderr to the exec guard"))
    }
}

fn seqpacket_pair() -> Result<(OwnedFd, OwnedFd)> {
    socketpair(
        AddressFamily::Unix,
        SockType::SeqPacket,
        None,
        SockFlag::SOCK_CLOEXEC,
    )
    .map_err(failed_nix("socketpair (exec guard)"))
}

/// Forks the supervisor when `spec` has deny rules (`None` without): a
/// child that waits for the listener, then serves it. Called before the
/// capabilities are dropped and the filter installed.
pub fn start(spec: &HelperSpec) -> Result<Option<Supervisor>> {
    if spec.exec_deny.is_empty() {
        return Ok(None);
    }
    let rules = Rules::with_programs(&spec.exec_deny, &spec.exec_deny_programs)?;
    let (ours, theirs) = seqpacket_pair()?;
    match sys::fork().map_err(failed("fork (exec guard)"))? {
        sys::ForkResult::Child => {
            drop(ours);
            supervise(&rules, &theirs)
        }
        sys::ForkResult::Parent { .. } => {
            drop(theirs);
            Ok(Some(Supervisor { socket: ours }))
        }
    }
}

/// The forked supervisor: never returns.
fn supervise(rules: &Rules, socket: &OwnedFd) -> ! {
    let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    let _ = nix::sys::prctl::set_dumpable(false);
    // The parent's end closes without a listener when it failed (or died).
    if let Ok(Some(fds)) = sys::receive_fds::<1>(socket.as_fd())
        && let Some(listener) = fds.into_iter().next()
    {
        serve(&listener, Some(socket), None, rules);
    }
    std::process::exit(0)
}

/// Installs the seccomp `program` on this process: with a listener handed
/// to `supervisor` when there is one (the program then has the guard's
/// rule, [`filter::FilterSettings::exec_guard`]), else plainly.
pub fn apply(program: &seccompiler::BpfProgram, supervisor: Option<&Supervisor>) -> Result<()> {
    match supervisor {
        Some(supervisor) => supervisor.hand(filter::apply_seccomp_listening(program)?),
        None => Ok(filter::apply_seccomp(program)?),
    }
}

/// Without namespaces, with deny rules: the program runs in a child that
/// confines itself (`confine`, given the way to this process, which
/// installs the filter and hands the listener back) and execs `argv` in
/// `cwd`; this process supervises until it ends. The exit code to end with.
pub fn run_guarded(
    spec: &HelperSpec,
    argv: &[std::ffi::OsString],
    cwd: &Path,
    confine: impl FnOnce(Option<&Supervisor>) -> Result<()>,
) -> Result<i32> {
    let rules = Rules::with_programs(&spec.exec_deny, &spec.exec_deny_programs)?;
    let (ours, theirs) = seqpacket_pair()?;
    let parent = nix::unistd::getpid();
    match sys::fork().map_err(failed("fork"))? {
        sys::ForkResult::Child => {
            drop(ours);
            let confined = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(failed_nix("PR_SET_PDEATHSIG"))
                .and_then(|()| {
                    if nix::unistd::getppid() == parent {
                        Ok(())
                    } else {
                        Err(SetupError::Protocol("the helper is gone"))
                    }
                })
                .and_then(|()| confine(Some(&Supervisor { socket: theirs })));
            if let Err(error) = confined {
                say(&format!("ybs sandbox: {error}"));
                std::process::exit(SETUP_FAILED);
            }
            super::exec(argv, cwd)
        }
        sys::ForkResult::Parent { child } => {
            drop(theirs);
            // Nothing of the program's may open this process's memory.
            let _ = nix::sys::prctl::set_dumpable(false);
            let ended = notify::pidfd(child.as_raw()).map_err(failed("pidfd_open"))?;
            // None: the child failed before its filter (it said why).
            if let Ok(Some(fds)) = sys::receive_fds::<1>(ours.as_fd())
                && let Some(listener) = fds.into_iter().next()
            {
                serve(&listener, None, Some(ended.as_fd()), &rules);
            }
            let (_, status) = sys::wait_raw(child.as_raw()).map_err(failed("waitpid"))?;
            Ok(end_like(status))
        }
    }
}

/// Answers the notifications of `listener` until no process is left under
/// its filter, or `ended` is readable. A descriptor arriving on `handoff`
/// becomes this process's stderr.
fn serve(
    listener: &OwnedFd,
    handoff: Option<&OwnedFd>,
    ended: Option<BorrowedFd<'_>>,
    rules: &Rules,
) {
    let raw = |fd: Option<i32>| fd.unwrap_or(-1);
    let mut fds = [
        libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: raw(handoff.map(AsRawFd::as_raw_fd)),
            events: libc::POLLIN,
            revents: 0,
        },
        libc::pollfd {
            fd: raw(ended.map(|fd| fd.as_raw_fd())),
            events: libc::POLLIN,
            revents: 0,
        },
    ];
    // The last refusal said: a shell or `execvp` tries the name in each
    // directory of `PATH`, and says once is enough.
    let mut said: Option<(u32, Vec<u8>)> = None;
    loop {
        if sys::poll(&mut fds, -1).is_err() {
            return;
        }
        // A new stderr first: it was sent before the program could exec.
        if fds[1].revents != 0 {
            match handoff.map(|socket| sys::receive_fds::<1>(socket.as_fd())) {
                Some(Ok(Some(received))) => {
                    for fd in received {
                        let _ = sys::dup_onto_standard(fd.as_fd(), 2);
                    }
                }
                _ => fds[1].fd = -1,
            }
        }
        if fds[0].revents & libc::POLLIN != 0 {
            answer_one(listener.as_fd(), rules, &mut said);
        } else if fds[0].revents != 0 || fds[2].revents != 0 {
            return;
        }
    }
}

/// Receives one notification and answers it; a refusal is said unless it
/// is the one `said` last, by the same process.
fn answer_one(listener: BorrowedFd<'_>, rules: &Rules, said: &mut Option<(u32, Vec<u8>)>) {
    let Ok(notif) = notify::receive(listener) else {
        // The caller went away (`ENOENT`) or another supervisor took it.
        return;
    };
    let refused = match read_exec(listener, &notif) {
        Some((path, argv, file)) => {
            let views = rules.all_views(notif.pid, file, &path, &argv);
            match rules.refusal(&views) {
                Some((view, glob)) => {
                    let refusal = (notif.pid, view.to_vec());
                    if said.as_ref() != Some(&refusal) {
                        say(&refusal_message(view, glob));
                        *said = Some(refusal);
                    }
                    true
                }
                None => false,
            }
        }
        None => true,
    };
    let _ = if refused {
        notify::answer(listener, notif.id, -libc::EPERM, false)
    } else {
        notify::answer(listener, notif.id, 0, true)
    };
}

/// The path and argument vector of the exec `notif` reports, read from the
/// caller's memory; `None` when anything cannot be read, a cap is
/// exceeded, or the caller left the call meanwhile.
fn read_exec(
    listener: BorrowedFd<'_>,
    notif: &libc::seccomp_notif,
) -> Option<(Vec<u8>, Vec<Vec<u8>>, PathBuf)> {
    let args = notif.data.args;
    let (dirfd, path_at, argv_at) = match i64::from(notif.data.nr) {
        libc::SYS_execve => (None, args[0], args[1]),
        libc::SYS_execveat => (Some(args[0]), args[1], args[2]),
        _ => return None,
    };
    let mem = std::fs::File::open(format!("/proc/{}/mem", notif.pid)).ok()?;
    // The memory is that of the caller, not of a process that took its pid.
    if !notify::still_valid(listener, notif.id) {
        return None;
    }
    let mut budget = MAX_BYTES;
    let mut path = read_string(&mem, path_at, &mut budget)?;
    let mut argv = Vec::new();
    if argv_at != 0 {
        let word = std::mem::size_of::<u64>();
        for index in 0..=MAX_ARGS {
            budget = budget.checked_sub(word)?;
            let mut pointer = [0u8; 8];
            let at = argv_at.checked_add(u64::try_from(index * word).ok()?)?;
            mem.read_exact_at(&mut pointer, at).ok()?;
            let pointer = u64::from_ne_bytes(pointer);
            if pointer == 0 {
                break;
            }
            if index == MAX_ARGS {
                return None;
            }
            argv.push(read_string(&mem, pointer, &mut budget)?);
        }
    }
    let dir = dirfd
        .map(descriptor)
        .filter(|fd| *fd != libc::AT_FDCWD && *fd >= 0);
    let file = in_process(notif.pid, dir, &path);
    // `fexecve`: `execveat(fd, "", …, AT_EMPTY_PATH)` runs what `fd` is.
    if path.is_empty()
        && let Some(fd) = dirfd.map(descriptor)
        && fd >= 0
    {
        let target: PathBuf = std::fs::read_link(format!("/proc/{}/fd/{fd}", notif.pid)).ok()?;
        path = target.as_os_str().as_bytes().to_vec();
    }
    notify::still_valid(listener, notif.id).then_some((path, argv, file))
}

/// Where this process opens `path` as process `pid` sees it: under its
/// root when absolute, else under `dir` (a descriptor of its) or its
/// working directory; the descriptor itself for an empty path.
fn in_process(pid: u32, dir: Option<i32>, path: &[u8]) -> PathBuf {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let path = Path::new(OsStr::from_bytes(path));
    if path.is_absolute() {
        let inside = path.strip_prefix("/").unwrap_or(path);
        return proc.join("root").join(inside);
    }
    let base = match dir {
        Some(fd) => proc.join("fd").join(fd.to_string()),
        None => proc.join("cwd"),
    };
    if path.as_os_str().is_empty() {
        base
    } else {
        base.join(path)
    }
}

/// A descriptor argument: the low 32 bits of its register, signed.
fn descriptor(arg: u64) -> i32 {
    i32::from_ne_bytes(
        u32::try_from(arg & 0xffff_ffff)
            .unwrap_or(u32::MAX)
            .to_ne_bytes(),
    )
}

/// The NUL-terminated string at `at` in `mem`, its bytes counted against
/// `budget`.
fn read_string(mem: &std::fs::File, at: u64, budget: &mut usize) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut text = Vec::new();
    let mut at = at;
    loop {
        // Never across a page: the next one may not be mapped.
        let chunk = usize::try_from(PAGE - at % PAGE).ok()?.min(*budget);
        if chunk == 0 {
            return None;
        }
        let mut buffer = vec![0u8; chunk];
        let read = mem.read_at(&mut buffer, at).ok()?;
        if read == 0 {
            return None;
        }
        if let Some(end) = buffer[..read].iter().position(|byte| *byte == 0) {
            *budget -= end + 1;
            text.extend_from_slice(&buffer[..end]);
            return Some(text);
        }
        *budget -= read;
        text.extend_from_slice(&buffer[..read]);
        at = at.checked_add(u64::try_from(read).ok()?)?;
    }
}

/// The exec guard works here: a filter installed with a listener hands
/// it back, and a notification answered with
/// `SECCOMP_USER_NOTIF_FLAG_CONTINUE` (Linux 5.5) lets the call go on.
/// Tried in a child, on `getppid`, so this process stays as it was.
pub fn probe() -> Result<()> {
    super::in_child("exec guard: the probe failed", || {
        let (ours, theirs) = seqpacket_pair()?;
        let parent = nix::unistd::getpid().as_raw();
        match sys::fork().map_err(failed("fork"))? {
            sys::ForkResult::Child => {
                drop(ours);
                let program = vec![
                    seccompiler::sock_filter {
                        code: 0x20,
                        jt: 0,
                        jf: 0,
                        k: 0,
                    },
                    seccompiler::sock_filter {
                        code: 0x15,
                        jt: 0,
                        jf: 1,
                        k: u32::try_from(libc::SYS_getppid).unwrap_or(u32::MAX),
                    },
                    seccompiler::sock_filter {
                        code: 0x06,
                        jt: 0,
                        jf: 0,
                        k: libc::SECCOMP_RET_USER_NOTIF,
                    },
                    seccompiler::sock_filter {
                        code: 0x06,
                        jt: 0,
                        jf: 0,
                        k: libc::SECCOMP_RET_ALLOW,
                    },
                ];
                let supervisor = Supervisor { socket: theirs };
                let code = match apply(&program, Some(&supervisor)) {
                    Ok(()) if nix::unistd::getppid().as_raw() == parent => 0,
                    _ => 1,
                };
                std::process::exit(code)
            }
            sys::ForkResult::Parent { child } => {
                drop(theirs);
                let listener = sys::receive_fds::<1>(ours.as_fd())
                    .ok()
                    .flatten()
                    .and_then(|fds| fds.into_iter().next())
                    .ok_or(SetupError::Guard("no listener came back".to_owned()))?;
                let notif = notify::receive(listener.as_fd())
                    .map_err(failed("SECCOMP_IOCTL_NOTIF_RECV"))?;
                notify::answer(listener.as_fd(), notif.id, 0, true)
                    .map_err(failed("SECCOMP_USER_NOTIF_FLAG_CONTINUE"))?;
                let (_, status) = sys::wait_raw(child.as_raw()).map_err(failed("waitpid"))?;
                if libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0 {
                    Ok(())
                } else {
                    Err(SetupError::Guard(
                        "the continued call went wrong".to_owned(),
                    ))
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(words: &[&str]) -> Vec<Vec<u8>> {
        words.iter().map(|word| word.as_bytes().to_vec()).collect()
    }

    fn refused(rules: &Rules, path: &str, words: &[&str]) -> Option<String> {
        let views = views(path.as_bytes(), &argv(words));
        rules
            .refusal(&views)
            .map(|(view, glob)| refusal_message(view, glob))
    }

    #[test]
    fn the_three_views() {
        let views = views(b"/usr/bin/curl", &argv(&["/bin/sh-alias", "-x", "y"]));
        assert_eq!(
            views,
            [
                b"/bin/sh-alias -x y".to_vec(),
                b"sh-alias -x y".to_vec(),
                b"curl -x y".to_vec()
            ]
        );
        assert_eq!(
            views_of_nothing(),
            [b"".to_vec(), b"".to_vec(), b"ls".to_vec()]
        );
    }

    fn views_of_nothing() -> Vec<Vec<u8>> {
        views(b"/bin/ls", &[])
    }

    #[test]
    fn rules_match_like_the_policy_command_globs() {
        let globs = ["curl*", "git push*", "rm -rf*"].map(str::to_owned);
        let rules = Rules::compile(&globs).unwrap();
        assert_eq!(
            refused(&rules, "/usr/bin/curl", &["curl", "--version"]).as_deref(),
            Some(
                "ybs sandbox: refused exec of `curl --version`: it matches the deny rule `run_shell(curl*)`"
            )
        );
        // By the path's basename, whatever argv[0] says.
        assert!(refused(&rules, "/usr/bin/curl", &["innocent", "x"]).is_some());
        // By argv[0]'s basename, whatever the path.
        assert!(refused(&rules, "/tmp/zz", &["/usr/bin/git", "push", "origin"]).is_some());
        assert!(refused(&rules, "/usr/bin/git", &["git", "--version"]).is_none());
        assert!(refused(&rules, "/bin/rm", &["rm", "-r", "-f", "x"]).is_none());
        // A renamed copy is seen only by its name.
        assert!(refused(&rules, "/tmp/zz", &["/tmp/zz", "-rf", "x"]).is_none());
        // `*` spans `/`.
        let rules = Rules::compile(&["*/secret*".to_owned()]).unwrap();
        assert!(refused(&rules, "/bin/cat", &["cat", "a/b/secret"]).is_some());
        assert!(Rules::compile(&["a[".to_owned()]).is_err());
    }

    #[test]
    fn a_descriptor_argument_is_its_low_half() {
        assert_eq!(descriptor(3), 3);
        // AT_FDCWD, sign-extended or not.
        assert_eq!(descriptor(0xffff_ffff_ffff_ff9c), -100);
        assert_eq!(descriptor(0xffff_ff9c), -100);
    }

    #[test]
    fn a_long_view_is_shortened_in_the_message() {
        let long = "x".repeat(500);
        let message = refusal_message(long.as_bytes(), "x*");
        assert!(
            message.contains(&format!("`{}…`", "x".repeat(SHOWN))),
            "{message}"
        );
    }

    #[test]
    fn the_kernel_structures_are_the_sizes_libc_has() {
        let sizes = notify::sizes().unwrap();
        assert_eq!(
            usize::from(sizes.seccomp_notif),
            std::mem::size_of::<libc::seccomp_notif>()
        );
        assert_eq!(
            usize::from(sizes.seccomp_notif_resp),
            std::mem::size_of::<libc::seccomp_notif_resp>()
        );
        assert_eq!(
            usize::from(sizes.seccomp_data),
            std::mem::size_of::<libc::seccomp_data>()
        );
    }
}
