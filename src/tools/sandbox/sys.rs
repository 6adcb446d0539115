//! Every system call of the sandbox that Rust cannot check, behind a safe
//! wrapper: the one place `unsafe` is allowed in ybs. Each block says why
//! it is sound; each wrapper takes only what keeps it so (a fork checks
//! that the process has one thread, a descriptor received from the kernel
//! becomes owned where it arrives).
#![expect(
    unsafe_code,
    reason = "the sandbox helper's system calls: fork, unshare, mount, capabilities, descriptor passing"
)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::libc;

pub use nix::unistd::ForkResult;

fn check(result: libc::c_int) -> io::Result<libc::c_int> {
    if result == -1 {
        Err(io::Error::last_os_error())
    } else {
        Ok(result)
    }
}

/// The number of threads of this process, from `/proc/self/stat`.
fn threads() -> Option<usize> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // The command name (field 2) may hold spaces: count after its `)`.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_ascii_whitespace().nth(17)?.parse().ok()
}

/// The effective user and group ids.
pub fn ids() -> (libc::uid_t, libc::gid_t) {
    // SAFETY: plain system calls without arguments; they cannot fail.
    unsafe { (libc::geteuid(), libc::getegid()) }
}

/// Set once a helper process found it has a single thread
/// ([`enter_single_threaded`]); a fork's child inherits it.
static SINGLE_THREADED: AtomicBool = AtomicBool::new(false);

/// Called once, at the entry of a helper process (the per-program
/// helper, the probe, the resident sandbox): checks from
/// `/proc/self/stat` that the process has a single thread, and allows
/// [`fork`] from then on. The helpers never start a thread, and neither
/// do the children they fork, so the answer holds for the process and
/// its forks without reading the file again for every fork.
pub fn enter_single_threaded() -> bool {
    let single = threads() == Some(1);
    SINGLE_THREADED.store(single, Ordering::Relaxed);
    single
}

/// `fork(2)`, refused unless this process is a helper that found itself
/// single-threaded at its entry ([`enter_single_threaded`]): then the
/// child may run any code. ybs's own, multi-threaded process never
/// passes that check, so it cannot fork here.
pub fn fork() -> io::Result<ForkResult> {
    if !SINGLE_THREADED.load(Ordering::Relaxed) {
        return Err(io::Error::other("fork refused: more than one thread"));
    }
    // SAFETY: single-threaded, checked at the helper's entry (the helper
    // starts no thread): no lock or allocator state of another thread is
    // copied half-way.
    unsafe { nix::unistd::fork() }.map_err(io::Error::from)
}

/// `waitpid(2)` with the raw wait status (retried on `EINTR`): the pid
/// that ended (`pid` or, for -1, any child) and its status.
pub fn wait_raw(pid: libc::pid_t) -> io::Result<(libc::pid_t, libc::c_int)> {
    loop {
        let mut status = 0;
        // SAFETY: a valid pointer to a local status word.
        let waited = unsafe { libc::waitpid(pid, &raw mut status, 0) };
        if waited >= 0 {
            return Ok((waited, status));
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

/// `waitpid(-1, WNOHANG)` (retried on `EINTR`): a child that ended and
/// its raw wait status, `None` when none has ended yet, an error
/// (`ECHILD`) when there is no child left.
pub fn wait_any_now() -> io::Result<Option<(libc::pid_t, libc::c_int)>> {
    loop {
        let mut status = 0;
        // SAFETY: a valid pointer to a local status word.
        let waited = unsafe { libc::waitpid(-1, &raw mut status, libc::WNOHANG) };
        if waited > 0 {
            return Ok(Some((waited, status)));
        }
        if waited == 0 {
            return Ok(None);
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) {
            return Err(error);
        }
    }
}

#[cfg(target_os = "linux")]
/// `setns(2)`: joins the namespace `fd` refers to (`nstype` one
/// `CLONE_NEW*` flag).
pub fn setns(fd: BorrowedFd<'_>, nstype: libc::c_int) -> io::Result<()> {
    // SAFETY: a plain system call on a borrowed, open descriptor.
    check(unsafe { libc::setns(fd.as_raw_fd(), nstype) }).map(drop)
}

#[cfg(target_os = "linux")]
/// `SIGCHLD` blocked and delivered on a descriptor instead (readable
/// once a child ended), close-on-exec. The mask is inherited by children
/// forked after: call it once the last child is forked.
pub fn child_signals() -> io::Result<OwnedFd> {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, sigprocmask};
    let mut set = SigSet::empty();
    set.add(Signal::SIGCHLD);
    sigprocmask(SigmaskHow::SIG_BLOCK, Some(&set), None)?;
    let fd = nix::sys::signalfd::SignalFd::with_flags(
        &set,
        nix::sys::signalfd::SfdFlags::SFD_CLOEXEC | nix::sys::signalfd::SfdFlags::SFD_NONBLOCK,
    )?;
    Ok(OwnedFd::from(fd))
}

#[cfg(target_os = "linux")]
/// Marks every descriptor but stdin, stdout and stderr close-on-exec.
pub fn close_inherited_on_exec() -> io::Result<()> {
    let fds: Vec<RawFd> = std::fs::read_dir("/proc/self/fd")?
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        // SAFETY: F_SETFD only sets the flags of descriptor `fd`; the one
        // the listing itself used is closed by now and fails with EBADF,
        // which is harmless.
        let done = unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        if done == -1 && io::Error::last_os_error().raw_os_error() != Some(libc::EBADF) {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
/// `unshare(2)` with `CLONE_*` flags.
pub fn unshare(flags: libc::c_int) -> io::Result<()> {
    // SAFETY: a plain system call; the caller is single-threaded (a user
    // namespace refuses a multi-threaded caller anyway).
    check(unsafe { libc::unshare(flags) }).map(drop)
}

#[cfg(target_os = "linux")]
/// `sethostname(2)`.
pub fn sethostname(name: &[u8]) -> io::Result<()> {
    // SAFETY: a valid buffer and its length.
    check(unsafe { libc::sethostname(name.as_ptr().cast(), name.len()) }).map(drop)
}

/// `poll(2)` on plain pollfd records (retried on `EINTR` when `timeout`
/// is -1); the number ready.
pub fn poll(fds: &mut [libc::pollfd], timeout: libc::c_int) -> io::Result<usize> {
    let count = libc::nfds_t::try_from(fds.len()).map_err(io::Error::other)?;
    loop {
        // SAFETY: `fds` is a valid array of `count` pollfd records.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), count, timeout) };
        if ready >= 0 {
            return Ok(usize::try_from(ready).unwrap_or(0));
        }
        let error = io::Error::last_os_error();
        if error.raw_os_error() != Some(libc::EINTR) || timeout != -1 {
            return Err(error);
        }
    }
}

/// True when `fd` is readable or closed, without waiting.
pub fn ready_now(fd: BorrowedFd<'_>) -> io::Result<bool> {
    let mut record = [libc::pollfd {
        fd: fd.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    }];
    Ok(poll(&mut record, 0)? != 0)
}

#[cfg(target_os = "linux")]
/// `PR_SET_NO_NEW_PRIVS`.
pub fn no_new_privs() -> io::Result<()> {
    nix::sys::prctl::set_no_new_privs().map_err(io::Error::from)
}

#[cfg(target_os = "linux")]
/// The capability sets: bounding (every capability dropped), ambient
/// (cleared), permitted, effective, inheritable (zeroed).
pub fn drop_capabilities() -> io::Result<()> {
    drop_bounding_set()?;
    clear_capabilities()
}

#[cfg(target_os = "linux")]
/// Every capability dropped from the bounding set (inherited by every
/// child); the other sets stay as they are.
pub fn drop_bounding_set() -> io::Result<()> {
    for cap in 0..64 {
        // SAFETY: plain prctl calls with integer arguments.
        if unsafe { libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) } == 0 {
            continue;
        }
        let error = io::Error::last_os_error();
        // Not dropped: past the last capability (the read fails too:
        // done), or already out of the set, or an error.
        // SAFETY: as above.
        match unsafe { libc::prctl(libc::PR_CAPBSET_READ, cap, 0, 0, 0) } {
            read if read < 0 => break,
            1 => return Err(error),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(target_os = "linux")]
/// The ambient set cleared; the permitted, effective and inheritable
/// sets zeroed.
pub fn clear_capabilities() -> io::Result<()> {
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
    // SAFETY: plain prctl and capset calls with valid pointers to local,
    // correctly laid out records.
    unsafe {
        check(libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ))?;
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
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Ends this process by `signal` with its default action (no core file),
/// the way a program killed by it ended; returns only if the signal did
/// not end it.
pub fn raise_default(signal: libc::c_int) {
    let _ = nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_CORE, 0, 0);
    // SAFETY: plain signal calls with a valid, local signal set.
    unsafe {
        libc::signal(signal, libc::SIG_DFL);
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&raw mut set);
        libc::sigaddset(&raw mut set, signal);
        libc::sigprocmask(libc::SIG_UNBLOCK, &raw const set, std::ptr::null_mut());
        libc::raise(signal);
    }
}

/// `SIGCHLD` ignored (children reaped by the kernel) or back to default.
pub fn reap_children_automatically(yes: bool) {
    let action = if yes { libc::SIG_IGN } else { libc::SIG_DFL };
    // SAFETY: a plain disposition, no handler function.
    unsafe {
        libc::signal(libc::SIGCHLD, action);
    }
}

#[cfg(target_os = "linux")]
/// `mount(2)`; `None` for a null argument.
pub fn mount(
    source: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    // SAFETY: valid NUL-terminated strings or null pointers.
    check(unsafe {
        libc::mount(
            source.map_or(std::ptr::null(), CStr::as_ptr),
            target.as_ptr(),
            fstype.map_or(std::ptr::null(), CStr::as_ptr),
            flags,
            data.map_or(std::ptr::null(), |d| d.as_ptr().cast()),
        )
    })
    .map(drop)
}

/// A path as a C string.
pub fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str()))
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `dup2(2)` of `fd` onto one of the standard descriptors 0, 1, 2.
pub fn dup_onto_standard(fd: BorrowedFd<'_>, standard: RawFd) -> io::Result<()> {
    if !(0..=2).contains(&standard) {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    // SAFETY: `fd` is open (borrowed); replacing 0, 1 or 2 closes no
    // descriptor some Rust object owns in the helper (they are never
    // wrapped there).
    check(unsafe { libc::dup2(fd.as_raw_fd(), standard) }).map(drop)
}

#[cfg(target_os = "linux")]
/// Receives one datagram of up to `N` descriptors on `socket` (retried
/// on `EINTR`), each close-on-exec and owned. `None` at the end (the peer
/// closed); a datagram with another number of descriptors gives them back
/// to be dropped by the caller.
pub fn receive_fds<const N: usize>(socket: BorrowedFd<'_>) -> io::Result<Option<Vec<OwnedFd>>> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    loop {
        let mut byte = [0u8; 1];
        let mut iov = [io::IoSliceMut::new(&mut byte)];
        let mut space = nix::cmsg_space!([RawFd; N]);
        let message = match recvmsg::<()>(
            socket.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        ) {
            Ok(message) => message,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(error) => return Err(error.into()),
        };
        let mut fds = Vec::new();
        for cmsg in message.cmsgs().map_err(io::Error::from)? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                // SAFETY: the kernel just installed these descriptors in
                // this process for this message; nothing else owns them.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        if message.bytes == 0 && fds.is_empty() {
            return Ok(None);
        }
        return Ok(Some(fds));
    }
}

/// In the child of `command`, before exec: a new session (so a new
/// process group with the child's pid as its id, and no controlling
/// terminal) and `PR_SET_PDEATHSIG(SIGKILL)`, refusing to start if the
/// parent already died between fork and that call.
pub fn detach_in_child(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    #[cfg(target_os = "linux")]
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec. It makes
    // only raw system calls (setsid, prctl, getppid), all
    // async-signal-safe; it neither allocates nor takes a lock, and its
    // errors are built from raw errnos, which do not allocate either.
    unsafe {
        command.pre_exec(move || {
            nix::unistd::setsid().map_err(io::Error::from)?;
            #[cfg(target_os = "linux")]
            {
                nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                    .map_err(io::Error::from)?;
                if nix::unistd::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            Ok(())
        });
    }
}

/// The exec guard's system calls: a seccomp filter installed with a
/// listener, and the listener's `ioctl`s (`seccomp_unotify(2)`).
#[cfg(target_os = "linux")]
pub mod notify {
    use super::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, check, io, libc};

    /// Installs `program` on the calling thread (after
    /// `PR_SET_NO_NEW_PRIVS`) with `SECCOMP_FILTER_FLAG_NEW_LISTENER`: the
    /// listener (close-on-exec), which receives the filter's
    /// `SECCOMP_RET_USER_NOTIF` system calls.
    pub fn install_with_listener(program: &[libc::sock_filter]) -> io::Result<OwnedFd> {
        let len =
            u16::try_from(program.len()).map_err(|_| io::Error::from_raw_os_error(libc::E2BIG))?;
        super::no_new_privs()?;
        let fprog = libc::sock_fprog {
            len,
            filter: program.as_ptr().cast_mut(),
        };
        // SAFETY: `fprog` points at `program`, alive for the call; the
        // kernel copies the program and returns a new descriptor or -1.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &raw const fprog,
            )
        };
        let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::last_os_error())?;
        let fd = check(fd)?;
        // SAFETY: the kernel just made this descriptor for this process;
        // nothing else owns it.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `SECCOMP_GET_NOTIF_SIZES`: the sizes of the kernel's structures
    /// (a test checks `libc`'s against them).
    #[cfg(test)]
    pub fn sizes() -> io::Result<libc::seccomp_notif_sizes> {
        let mut sizes = libc::seccomp_notif_sizes {
            seccomp_notif: 0,
            seccomp_notif_resp: 0,
            seccomp_data: 0,
        };
        // SAFETY: the kernel writes one `seccomp_notif_sizes` into `sizes`.
        let done = unsafe {
            libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_GET_NOTIF_SIZES,
                0,
                &raw mut sizes,
            )
        };
        if done == 0 {
            Ok(sizes)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// `SECCOMP_IOCTL_NOTIF_RECV`: the next notification (waits for one).
    /// `ENOENT`: the caller went away before it was read.
    pub fn receive(listener: BorrowedFd<'_>) -> io::Result<libc::seccomp_notif> {
        loop {
            // The kernel wants the buffer zeroed.
            let mut notif = libc::seccomp_notif {
                id: 0,
                pid: 0,
                flags: 0,
                data: libc::seccomp_data {
                    nr: 0,
                    arch: 0,
                    instruction_pointer: 0,
                    args: [0; 6],
                },
            };
            // SAFETY: the kernel writes one `seccomp_notif` into `notif`.
            let done = unsafe {
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_RECV,
                    &raw mut notif,
                )
            };
            match check(done) {
                Ok(_) => return Ok(notif),
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// `SECCOMP_IOCTL_NOTIF_SEND`: the answer to notification `id`, an
    /// error (`-errno`), or with `continue_call` the system call as asked.
    pub fn answer(
        listener: BorrowedFd<'_>,
        id: u64,
        error: libc::c_int,
        continue_call: bool,
    ) -> io::Result<()> {
        let mut response = libc::seccomp_notif_resp {
            id,
            val: 0,
            error,
            flags: if continue_call {
                u32::try_from(libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE).unwrap_or(1)
            } else {
                0
            },
        };
        loop {
            // SAFETY: the kernel reads one `seccomp_notif_resp`.
            let done = unsafe {
                libc::ioctl(
                    listener.as_raw_fd(),
                    libc::SECCOMP_IOCTL_NOTIF_SEND,
                    &raw mut response,
                )
            };
            match check(done) {
                Ok(_) => return Ok(()),
                Err(error) if error.raw_os_error() == Some(libc::EINTR) => {}
                Err(error) => return Err(error),
            }
        }
    }

    /// `SECCOMP_IOCTL_NOTIF_ID_VALID`: notification `id` still waits for
    /// its answer (its caller is still in that system call).
    pub fn still_valid(listener: BorrowedFd<'_>, id: u64) -> bool {
        let mut id = id;
        // SAFETY: the kernel reads one `u64`.
        let done = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_ID_VALID,
                &raw mut id,
            )
        };
        done == 0
    }

    /// `pidfd_open(pid)`: readable once the process has ended.
    pub fn pidfd(pid: libc::pid_t) -> io::Result<OwnedFd> {
        // SAFETY: a plain system call; returns a new descriptor or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let fd = libc::c_int::try_from(fd).map_err(|_| io::Error::last_os_error())?;
        let fd = check(fd)?;
        // SAFETY: the kernel just made this descriptor for this process.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}
