//! Subprocesses that always end (docs/security.md S9).
//!
//! Every subprocess ybs starts goes through [`run`]: `run_shell`, checks,
//! external tools. A child gets its own session and process group (so no
//! controlling terminal), a cleared environment plus the scrubbed
//! [`ChildEnv`], `/dev/null` or the given bytes on stdin, pipes (never a
//! terminal) on stdout and stderr, and `PR_SET_PDEATHSIG(SIGKILL)` so it
//! dies with ybs. On timeout the whole group is killed. After the child
//! exits its pipes are drained for a short while only (a background
//! grandchild may hold them open forever), then the group is killed
//! anyway: nothing the child started outlives the call.
//!
//! A command that is one plain program with literal arguments is executed
//! directly, without a shell ([`run_command`]): same argv, a millisecond
//! or two less per call.
//!
//! Captured output is capped per stream: the head and the tail are kept,
//! the middle is read and discarded so the child never blocks on a full
//! pipe.
//!
//! Escapees (`setsid`, double fork) leave the group. [`harden_self`] makes
//! ybs a child subreaper, so such orphans are re-parented to ybs instead of
//! init; after every run ybs kills and reaps any child of its own it did
//! not start itself (see [`reap_escapees`]). Confined children run in
//! their own PID namespace ([`super::sandbox`]), whose PID 1 takes every
//! descendant down with it; this covers `--no-sandbox` and the reduced
//! sandbox without namespaces.
//!
//! `PR_SET_PDEATHSIG` fires when the *thread* that spawned the child exits.
//! Spawns happen on tokio worker threads, which live as long as the
//! runtime; do not spawn from a `spawn_blocking` thread.

use std::ffi::{OsStr, OsString};
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::Ordering;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Command;

use super::ChildEnv;
use super::sandbox::Sandbox;

mod pipes;
mod reaper;
use pipes::{Capture, feed, pump};
use reaper::{SUBREAPER, live_children, spawn_registered};
pub(crate) use reaper::{forget_live, spawn_registered_std};
pub use reaper::{harden_self, reap_escapees};

/// How long pipes may stay open after the child exited before the group
/// is killed.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// How long to keep reading after that kill (an escapee outside the group
/// may still hold a pipe).
const DRAIN_AFTER_KILL: Duration = Duration::from_millis(100);
/// Read buffer per stream.
const CHUNK: usize = 16 * 1024;

/// What to run and under which limits.
#[derive(Debug, Clone)]
pub struct ProcessSpec<'a> {
    /// A program name (looked up in the child's `PATH`) or a path.
    pub program: OsString,
    pub args: Vec<OsString>,
    pub cwd: PathBuf,
    /// The child's whole environment (nothing else is inherited), plus
    /// `PWD` set to `cwd`.
    pub env: &'a ChildEnv,
    /// Written to the child's stdin, which is then closed; `None` means
    /// `/dev/null`.
    pub stdin: Option<Vec<u8>>,
    pub timeout: Duration,
    /// Cap on captured bytes, per stream.
    pub output_cap: usize,
    /// The kernel confinement applied in the child before exec
    /// (docs/security.md S1); `None` runs it unconfined.
    pub sandbox: Option<Arc<Sandbox>>,
}

impl<'a> ProcessSpec<'a> {
    /// `command` run by the shell (see [`shell_command`]).
    pub fn shell(
        command: &str,
        cwd: PathBuf,
        env: &'a ChildEnv,
        timeout: Duration,
        output_cap: usize,
    ) -> Self {
        let (program, args) = shell_command(command);
        Self {
            program,
            args,
            cwd,
            env,
            stdin: None,
            timeout,
            output_cap,
            sandbox: None,
        }
    }

    /// The same, confined by `sandbox` when given.
    #[must_use]
    pub fn confined(mut self, sandbox: Option<&Arc<Sandbox>>) -> Self {
        self.sandbox = sandbox.cloned();
        self
    }
}

/// How a subprocess ended and what it printed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProcessOutput {
    /// The exit code, `None` when killed by a signal.
    pub exit_code: Option<i32>,
    /// The signal that killed the child.
    pub signal: Option<i32>,
    /// stdout, lossy UTF-8, capped (head and tail kept).
    pub stdout: String,
    pub stderr: String,
    /// True if the timeout fired and the group was killed.
    pub timed_out: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    /// How many bytes each stream printed in all (kept or not).
    pub stdout_bytes: usize,
    pub stderr_bytes: usize,
    pub duration: Duration,
}

impl ProcessOutput {
    /// The exit code as a shell reports it: the code, or 128 + signal.
    pub fn shell_exit_code(&self) -> i32 {
        match (self.exit_code, self.signal) {
            (Some(code), _) => code,
            (None, Some(signal)) => 128 + signal,
            (None, None) => -1,
        }
    }
}

/// The program and arguments that run `command` in a shell: `/bin/bash -c`
/// when bash is installed, else `/bin/sh -c`.
pub fn shell_command(command: &str) -> (OsString, Vec<OsString>) {
    static SHELL: OnceLock<&'static str> = OnceLock::new();
    let shell = SHELL.get_or_init(|| {
        if Path::new("/bin/bash").exists() {
            "/bin/bash"
        } else {
            "/bin/sh"
        }
    });
    (
        OsString::from(*shell),
        vec![OsString::from("-c"), OsString::from(command)],
    )
}

/// The argument vector of `command` when a shell would run it as one plain
/// program with literal words, so it can be executed without starting a
/// shell (saves a millisecond or two per call). `None` when anything in it
/// needs a shell: quoting, expansion, globbing, redirection, operators,
/// assignments, a builtin or keyword as the program.
pub fn simple_argv(command: &str) -> Option<Vec<OsString>> {
    let plain = |byte: u8| {
        byte.is_ascii_alphanumeric()
            || matches!(
                byte,
                b'_' | b'-' | b'.' | b'/' | b',' | b':' | b'+' | b'=' | b'@' | b'%' | b' ' | b'\t'
            )
    };
    if !command.bytes().all(plain) {
        return None;
    }
    let mut words = command.split([' ', '\t']).filter(|word| !word.is_empty());
    let program = words.next()?;
    if program.contains('=') || SHELL_WORDS.contains(&program) {
        return None;
    }
    let mut argv = vec![OsString::from(program)];
    argv.extend(words.map(OsString::from));
    Some(argv)
}

/// Bash keywords and builtins: a command starting with one of these needs
/// the shell even when it is otherwise plain.
#[rustfmt::skip]
const SHELL_WORDS: &[&str] = &[
    ".", ":", "[", "alias", "bg", "bind", "break", "builtin", "caller", "case", "cd", "command",
    "compgen", "complete", "compopt", "continue", "coproc", "declare", "dirs", "disown", "do",
    "done", "echo", "elif", "else", "enable", "esac", "eval", "exec", "exit", "export", "false",
    "fc", "fg", "fi", "for", "function", "getopts", "hash", "help", "history", "if", "in", "jobs",
    "kill", "let", "local", "logout", "mapfile", "popd", "printf", "pushd", "pwd", "read",
    "readarray", "readonly", "return", "select", "set", "shift", "shopt", "source", "suspend",
    "test", "then", "time", "times", "trap", "true", "type", "typeset", "ulimit", "umask",
    "unalias", "unset", "until", "wait", "while",
];

/// Runs `command` like `sh -c` would, executing it directly when it is a
/// plain program with literal arguments (see [`simple_argv`]) and through
/// the shell otherwise, or when the direct start fails (so a missing
/// program gets the shell's usual "command not found" and exit 127).
pub async fn run_command(
    command: &str,
    cwd: PathBuf,
    env: &ChildEnv,
    timeout: Duration,
    output_cap: usize,
    sandbox: Option<&Arc<Sandbox>>,
) -> io::Result<ProcessOutput> {
    if let Some(mut argv) = simple_argv(command)
        && (sandbox.is_none() || on_path(&argv[0], env))
    {
        let program = argv.remove(0);
        let spec = ProcessSpec {
            program,
            args: argv,
            cwd: cwd.clone(),
            env,
            stdin: None,
            timeout,
            output_cap,
            sandbox: sandbox.cloned(),
        };
        match run_inner(spec).await {
            Ok(output) => return Ok(output),
            // It ran: never run it a second time.
            Err(Failure::Wait(error)) => return Err(error),
            Err(Failure::Spawn(_)) => {}
        }
    }
    run(ProcessSpec::shell(command, cwd, env, timeout, output_cap).confined(sandbox)).await
}

/// True if `program` names an executable file, directly (with a `/`) or
/// in the `PATH` of `env`. With a sandbox the spawn itself always
/// succeeds (it starts the helper), so a missing program is found here
/// and left to the shell's "command not found".
fn on_path(program: &OsString, env: &ChildEnv) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |path: &Path| {
        path.metadata()
            .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
    };
    let program = Path::new(program);
    if program.as_os_str().as_encoded_bytes().contains(&b'/') {
        return true;
    }
    env.get("PATH").is_some_and(|path| {
        path.split(':')
            .filter(|dir| !dir.is_empty())
            .any(|dir| executable(&Path::new(dir).join(program)))
    })
}

/// Runs `spec` to the end (its own, its timeout's, or ybs's) and returns
/// what it printed. Errors only when the program cannot be started or
/// waited for; a non-zero exit is a normal result.
pub async fn run(spec: ProcessSpec<'_>) -> io::Result<ProcessOutput> {
    run_inner(spec).await.map_err(|failure| match failure {
        Failure::Spawn(error) | Failure::Wait(error) => error,
    })
}

/// Why [`run_inner`] failed: before the program started, or after.
enum Failure {
    Spawn(io::Error),
    Wait(io::Error),
}

/// A started child: its pipes, its end, and how to kill it with all it
/// started. Either a child of ybs (unconfined, or through the per-program
/// sandbox helper) in a process group of its own, or a program started in
/// the task's resident sandbox.
pub struct Spawned {
    pub stdin: Option<Box<dyn AsyncWrite + Send + Unpin>>,
    pub stdout: Option<Box<dyn AsyncRead + Send + Unpin>>,
    pub stderr: Option<Box<dyn AsyncRead + Send + Unpin>>,
    end: End,
    killer: Killer,
}

/// How a [`Spawned`] child's end is awaited.
enum End {
    Host(tokio::process::Child),
    #[cfg(target_os = "linux")]
    Resident(super::sandbox::resident::Status),
}

impl End {
    async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Self::Host(child) => child.wait().await,
            #[cfg(target_os = "linux")]
            Self::Resident(status) => status.wait().await,
        }
    }
}

/// Kills a [`Spawned`] child and everything it started, on demand and
/// when dropped.
enum Killer {
    Group(GroupGuard),
    #[cfg(target_os = "linux")]
    Resident(super::sandbox::resident::Control),
}

impl Killer {
    fn kill(&self) {
        match self {
            Self::Group(group) => group.kill(),
            #[cfg(target_os = "linux")]
            Self::Resident(control) => control.kill(),
        }
    }
}

/// Starts `spec`: in the task's resident sandbox when it has one, else
/// (through the per-program sandbox helper when confined) in a process
/// group of its own, with the scrubbed environment and piped stdout and
/// stderr; stdin piped or `/dev/null`. The killer kills the child and
/// all it started on every way out, cancellation included. An error says
/// whether the child had been spawned.
fn spawn_grouped(spec: &ProcessSpec<'_>, stdin: bool) -> Result<Spawned, (bool, io::Error)> {
    if let Some(sandbox) = &spec.sandbox {
        sandbox.ready().map_err(|error| (false, error))?;
    }
    #[cfg(target_os = "linux")]
    if let Some(sandbox) = &spec.sandbox
        && let Some(running) = sandbox.start(&resident_request(spec), stdin)
    {
        let super::sandbox::resident::Running {
            stdin,
            stdout,
            stderr,
            status,
            control,
        } = running;
        return Ok(Spawned {
            stdin: stdin.map(|pipe| Box::new(pipe) as Box<dyn AsyncWrite + Send + Unpin>),
            stdout: stdout.map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
            stderr: stderr.map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
            end: End::Resident(status),
            killer: Killer::Resident(control),
        });
    }
    let (program, args) = match &spec.sandbox {
        Some(sandbox) => sandbox.command(&spec.program, &spec.args),
        None => (spec.program.clone(), spec.args.clone()),
    };
    let mut command = Command::new(&program);
    command
        .args(&args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(child_env(spec))
        .stdin(if stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    detach_std(command.as_std_mut());
    let mut child = spawn_registered(&mut command).map_err(|error| (false, error))?;
    let pid = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .ok_or_else(|| {
            (
                true,
                io::Error::other("child exited before its id was read"),
            )
        })?;
    Ok(Spawned {
        stdin: child
            .stdin
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn AsyncWrite + Send + Unpin>),
        stdout: child
            .stdout
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
        stderr: child
            .stderr
            .take()
            .map(|pipe| Box::new(pipe) as Box<dyn AsyncRead + Send + Unpin>),
        end: End::Host(child),
        killer: Killer::Group(GroupGuard(Pid::from_raw(pid))),
    })
}

/// The whole environment of a child, in order (a later one wins): the
/// scrubbed variables, the [`super::env::NON_INTERACTIVE`] settings,
/// `PWD`. A child of ybs and a program of the resident sandbox get the
/// same.
fn child_env<'s>(spec: &'s ProcessSpec<'_>) -> impl Iterator<Item = (&'s OsStr, &'s OsStr)> {
    spec.env
        .vars
        .iter()
        .map(|(name, value)| (OsStr::new(name), OsStr::new(value)))
        .chain(
            super::env::NON_INTERACTIVE
                .iter()
                .map(|(name, value)| (OsStr::new(*name), OsStr::new(*value))),
        )
        .chain(std::iter::once((OsStr::new("PWD"), spec.cwd.as_os_str())))
}

/// What the resident sandbox runs for `spec`: the same argument vector,
/// working directory and environment a child of ybs gets.
#[cfg(target_os = "linux")]
fn resident_request(spec: &ProcessSpec<'_>) -> super::sandbox::spec::Request {
    let mut argv = vec![spec.program.clone()];
    argv.extend(spec.args.iter().cloned());
    super::sandbox::spec::Request {
        argv,
        cwd: spec.cwd.clone(),
        env: child_env(spec)
            .map(|(name, value)| (name.to_owned(), value.to_owned()))
            .collect(),
    }
}

async fn run_inner(spec: ProcessSpec<'_>) -> Result<ProcessOutput, Failure> {
    let started = Instant::now();
    let Spawned {
        stdin,
        stdout,
        stderr,
        mut end,
        killer,
    } = spawn_grouped(&spec, spec.stdin.is_some()).map_err(|(spawned, error)| {
        if spawned {
            Failure::Wait(error)
        } else {
            Failure::Spawn(error)
        }
    })?;

    let mut out = Capture::new(spec.output_cap);
    let mut err = Capture::new(spec.output_cap);
    let mut timed_out = false;
    let status: ExitStatus;
    {
        let io = async {
            tokio::join!(
                feed(stdin, spec.stdin),
                pump(stdout, &mut out),
                pump(stderr, &mut err)
            );
        };
        tokio::pin!(io);
        let deadline = tokio::time::sleep(spec.timeout);
        tokio::pin!(deadline);
        let mut io_done = false;
        status = loop {
            tokio::select! {
                biased;
                result = end.wait() => break result.map_err(Failure::Wait)?,
                () = &mut io, if !io_done => io_done = true,
                () = &mut deadline, if !timed_out => {
                    timed_out = true;
                    killer.kill();
                }
            }
        };
        if !io_done && tokio::time::timeout(DRAIN_GRACE, &mut io).await.is_err() {
            killer.kill();
            let _ = tokio::time::timeout(DRAIN_AFTER_KILL, &mut io).await;
        }
    }
    drop(killer);
    if SUBREAPER.load(Ordering::Relaxed) {
        reap_escapees().await;
    }

    let (stdout_bytes, stderr_bytes) = (out.total, err.total);
    let (stdout, stdout_truncated) = out.finish();
    let (stderr, stderr_truncated) = err.finish();
    Ok(ProcessOutput {
        exit_code: status.code(),
        signal: status.signal(),
        stdout,
        stderr,
        timed_out,
        stdout_truncated,
        stderr_truncated,
        stdout_bytes,
        stderr_bytes,
        duration: started.elapsed(),
    })
}

/// A long-lived child speaking on its stdin and stdout (an MCP server):
/// started like every subprocess (own session and group or the resident
/// sandbox, scrubbed environment, death signal, the sandbox), with all
/// three streams piped. Dropping it kills it and all it started.
pub struct Service(Spawned);

/// The pipes: `stdin`, `stdout`, `stderr` (each taken once by its user).
impl std::ops::Deref for Service {
    type Target = Spawned;
    fn deref(&self) -> &Spawned {
        &self.0
    }
}

impl std::ops::DerefMut for Service {
    fn deref_mut(&mut self) -> &mut Spawned {
        &mut self.0
    }
}

impl Service {
    /// Starts `program` with `args`; `spec.stdin`, `spec.timeout` and
    /// `spec.output_cap` are not used (the caller owns the pipes and
    /// bounds each exchange).
    pub fn spawn(spec: &ProcessSpec<'_>) -> io::Result<Self> {
        spawn_grouped(spec, true)
            .map(Self)
            .map_err(|(_, error)| error)
    }

    /// Waits for the child to end (cancel-safe).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        self.0.end.wait().await
    }

    /// Kills the child and all it started now, waits for the child, and
    /// reaps anything of it that escaped the group. `false` when the child was
    /// still not gone after the wait (a process in uninterruptible sleep):
    /// then nothing says its tree is stopped.
    pub async fn stop(mut self) -> bool {
        self.0.killer.kill();
        let gone = matches!(
            tokio::time::timeout(Duration::from_secs(2), self.0.end.wait()).await,
            Ok(Ok(_))
        );
        drop(self);
        if SUBREAPER.load(Ordering::Relaxed) {
            reap_escapees().await;
        }
        gone
    }
}

/// Kills a child's process group when dropped.
struct GroupGuard(Pid);

impl GroupGuard {
    fn kill(&self) {
        // ESRCH (the group is already empty) is the normal case.
        let _ = killpg(self.0, Signal::SIGKILL);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.kill();
        if SUBREAPER.load(Ordering::Relaxed) {
            live_children().retain(|pid| *pid != self.0.as_raw());
        }
    }
}

/// In the child, before exec: a new session (so a new process group with
/// the child's pid as its id, and no controlling terminal: opening
/// `/dev/tty` fails instead of stopping on SIGTTIN), and on Linux
/// `PR_SET_PDEATHSIG(SIGKILL)`, refusing to start if ybs already died
/// between fork and that call. The kernel confinement is applied by the
/// sandbox helper the child then becomes ([`Sandbox::command`]).
pub(crate) fn detach_std(command: &mut std::process::Command) {
    super::sandbox::sys::detach_in_child(command);
}

#[cfg(test)]
mod tests;
