//! ybs's side of a task's resident sandbox (`ybs __sandbox-init`, see
//! `helper/init.rs`): started at the task's first confined program, one
//! per distinct view (the spec, and which of the protected, hidden and
//! blocked paths exist, since the view is built from what exists), ended
//! with the task's [`super::Sandbox`].
//!
//! A program is started by sending the resident its [`Request`] and six
//! descriptors; what comes back is a [`Running`]: the program's pipes,
//! its status (a wait status word, or the end of the pipe when it was
//! killed) and a control pipe whose byte, or end, kills it and everything
//! it started. When the resident cannot be started, the caller falls back
//! to the per-program helper, which then says what failed the way it
//! always did.

use std::io::{self, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use nix::fcntl::OFlag;
use nix::sys::socket::{AddressFamily, MsgFlags, SockFlag, SockType, socketpair};
use tokio::io::AsyncReadExt as _;
use tokio::net::unix::pipe;

use super::helper::init::{FDS, send_request};
use super::spec::{HelperSpec, INIT_ARG, Request};

/// How long a resident may take to build the view.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// The residents of one task, by view.
#[derive(Debug, Default)]
pub struct Residents {
    started: Mutex<Vec<(String, Arc<Resident>)>>,
    /// Views whose resident could not be started: the per-program helper
    /// is used for them at once.
    failed: Mutex<Vec<String>>,
}

/// One resident sandbox: the process ybs started and the socket to it.
#[derive(Debug)]
struct Resident {
    socket: OwnedFd,
    child: Mutex<std::process::Child>,
}

impl Drop for Resident {
    fn drop(&mut self) {
        let mut child = self.child.lock().unwrap_or_else(PoisonError::into_inner);
        // Its PID 1 dies with it (`PR_SET_PDEATHSIG`), and every program
        // with that namespace.
        let _ = child.kill();
        let _ = child.wait();
        crate::tools::process::forget_live(child.id());
    }
}

/// A program started in a resident sandbox.
#[derive(Debug)]
pub struct Running {
    pub stdin: Option<pipe::Sender>,
    pub stdout: Option<pipe::Receiver>,
    pub stderr: Option<pipe::Receiver>,
    pub status: Status,
    pub control: Control,
}

/// The program's end: its wait status.
#[derive(Debug)]
pub struct Status {
    pipe: pipe::Receiver,
    word: Vec<u8>,
    ended: Option<ExitStatus>,
    /// Keeps the resident (and so the program) alive while it is awaited.
    _resident: Arc<Resident>,
}

impl Status {
    /// Waits for the program to end. Cancel-safe; once ended, returns the
    /// same status again. A pipe that ends without a status means the
    /// program was killed (by ybs, or with its sandbox).
    pub async fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(status) = self.ended {
            return Ok(status);
        }
        let mut buffer = [0u8; 4];
        while self.word.len() < 4 {
            let want = 4 - self.word.len();
            let read = self.pipe.read(&mut buffer[..want]).await?;
            if read == 0 {
                break;
            }
            self.word.extend_from_slice(&buffer[..read]);
        }
        let status = match <[u8; 4]>::try_from(self.word.as_slice()) {
            Ok(word) => ExitStatus::from_raw(i32::from_ne_bytes(word)),
            Err(_) => ExitStatus::from_raw(nix::libc::SIGKILL),
        };
        self.ended = Some(status);
        Ok(status)
    }
}

/// Kills the program and everything it started: on [`Control::kill`], or
/// when dropped.
#[derive(Debug)]
pub struct Control(OwnedFd);

impl Control {
    pub fn kill(&self) {
        // Non-blocking; a full pipe already holds a kill.
        let _ = nix::unistd::write(&self.0, b"k");
    }
}

impl Residents {
    /// Starts `request` in the resident sandbox of `spec` (starting that
    /// first when needed); `None` when no resident can be had, and the
    /// caller should use the per-program helper.
    pub fn start(
        &self,
        spec: &HelperSpec,
        spec_json: &str,
        request: &Request,
        stdin: bool,
    ) -> Option<Running> {
        let key = view_key(spec, spec_json);
        for _ in 0..2 {
            let resident = self.resident(spec_json, &key)?;
            match send(&resident, request, stdin) {
                Ok(running) => return Some(running),
                Err(Failure::Sandbox) => {
                    // It died (its parent thread ended, or it was killed):
                    // forget it and start another.
                    self.lock()
                        .retain(|(_, other)| !Arc::ptr_eq(other, &resident));
                }
                Err(Failure::Local) => return None,
            }
        }
        None
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, Arc<Resident>)>> {
        self.started.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn resident(&self, spec_json: &str, key: &str) -> Option<Arc<Resident>> {
        let mut started = self.lock();
        if let Some((_, resident)) = started.iter().find(|(k, _)| k == key) {
            return Some(resident.clone());
        }
        let mut failed = self.failed.lock().unwrap_or_else(PoisonError::into_inner);
        if failed.iter().any(|k| k == key) {
            return None;
        }
        let Ok(resident) = Resident::start(spec_json) else {
            failed.push(key.to_owned());
            return None;
        };
        let resident = Arc::new(resident);
        started.push((key.to_owned(), resident.clone()));
        Some(resident)
    }

    /// Ends every resident (and every program still running in one).
    pub fn stop(&self) {
        self.lock().clear();
    }
}

/// What decides the view: the spec, and which of the paths it protects,
/// hides or blocks exist and as what (`spec_json` is `spec` in JSON).
fn view_key(spec: &HelperSpec, spec_json: &str) -> String {
    let mut key = String::with_capacity(spec_json.len() + 16);
    key.push_str(spec_json);
    for path in spec
        .read_only
        .iter()
        .chain(&spec.hidden)
        .chain(&spec.blocked)
    {
        key.push(match path.symlink_metadata() {
            Err(_) => '-',
            Ok(meta) if meta.is_dir() => 'd',
            Ok(meta) if meta.is_file() => 'f',
            Ok(_) => 'o',
        });
    }
    key
}

enum Failure {
    /// The resident is gone.
    Sandbox,
    /// Something on ybs's side (descriptors, memory).
    Local,
}

impl Resident {
    fn start(spec_json: &str) -> io::Result<Self> {
        let (ours, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )?;
        let mut command = std::process::Command::new(super::SELF_EXE);
        command
            .arg(INIT_ARG)
            .arg(spec_json)
            .env_clear()
            .stdin(std::process::Stdio::from(theirs))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        crate::tools::process::detach_std(&mut command);
        // The resident must not count as a stray child of ybs.
        let child = crate::tools::process::spawn_registered_std(&mut command)?;
        drop(command);
        let resident = Self {
            socket: ours,
            child: Mutex::new(child),
        };
        nix::sys::socket::setsockopt(
            &resident.socket,
            nix::sys::socket::sockopt::ReceiveTimeout,
            &nix::sys::time::TimeVal::new(i64::try_from(READY_TIMEOUT.as_secs()).unwrap_or(10), 0),
        )?;
        let mut answer = [0u8; 4096];
        let read = nix::sys::socket::recv(
            std::os::fd::AsRawFd::as_raw_fd(&resident.socket),
            &mut answer,
            MsgFlags::empty(),
        )?;
        if &answer[..read] != b"ok" {
            return Err(io::Error::other(
                String::from_utf8_lossy(&answer[..read]).into_owned(),
            ));
        }
        Ok(resident)
    }
}

fn pipe_pair() -> io::Result<(OwnedFd, OwnedFd)> {
    Ok(nix::unistd::pipe2(OFlag::O_CLOEXEC)?)
}

/// Sends one request; the program's handles.
fn send(resident: &Arc<Resident>, request: &Request, stdin: bool) -> Result<Running, Failure> {
    let local = |_| Failure::Local;
    let memfd =
        nix::sys::memfd::memfd_create(c"ybs-request", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
            .map_err(|_| Failure::Local)?;
    std::fs::File::from(memfd.try_clone().map_err(local)?)
        .write_all(&request.encode())
        .map_err(local)?;
    let (stdin_theirs, stdin_ours) = if stdin {
        let (read, write) = pipe_pair().map_err(local)?;
        (read, Some(write))
    } else {
        let null = std::fs::File::open("/dev/null").map_err(local)?;
        (OwnedFd::from(null), None)
    };
    let (stdout_ours, stdout_theirs) = pipe_pair().map_err(local)?;
    let (stderr_ours, stderr_theirs) = pipe_pair().map_err(local)?;
    let (status_ours, status_theirs) = pipe_pair().map_err(local)?;
    let (control_theirs, control_ours) = pipe_pair().map_err(local)?;
    // The control pipe never blocks ybs.
    nix::fcntl::fcntl(
        &control_ours,
        nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK),
    )
    .map_err(|_| Failure::Local)?;
    let fds: [_; FDS] = [
        memfd.as_fd(),
        stdin_theirs.as_fd(),
        stdout_theirs.as_fd(),
        stderr_theirs.as_fd(),
        status_theirs.as_fd(),
        control_theirs.as_fd(),
    ];
    send_request(resident.socket.as_fd(), fds).map_err(|_| Failure::Sandbox)?;
    drop((memfd, stdin_theirs, stdout_theirs, stderr_theirs));
    drop((status_theirs, control_theirs));
    let stdin = stdin_ours
        .map(pipe::Sender::from_owned_fd)
        .transpose()
        .map_err(local)?;
    Ok(Running {
        stdin,
        stdout: Some(pipe::Receiver::from_owned_fd(stdout_ours).map_err(local)?),
        stderr: Some(pipe::Receiver::from_owned_fd(stderr_ours).map_err(local)?),
        status: Status {
            pipe: pipe::Receiver::from_owned_fd(status_ours).map_err(local)?,
            word: Vec::new(),
            ended: None,
            _resident: resident.clone(),
        },
        control: Control(control_ours),
    })
}
