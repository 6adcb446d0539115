//! Kernel confinement of the programs ybs starts for the model (SECURITY S1).
//!
//! A [`Sandbox`] belongs to one task. It names where children may write
//! (the canonical workdir, a private temp dir ybs creates and removes, a
//! few device files, operator-granted paths) and whether they may use the
//! network. [`Sandbox::prepare`] builds, in the parent, everything that
//! allocates: the Landlock ruleset (an fd, via the `landlock` crate) and
//! the seccomp BPF program (via `seccompiler`). In the forked child,
//! before exec, [`Sandbox::confine_child`] makes only raw, async-signal-
//! safe system calls: `prctl(PR_SET_NO_NEW_PRIVS)`,
//! `landlock_restrict_self(fd)` and `seccomp(SET_MODE_FILTER)`. The tokio
//! process itself is never confined; the children, and everything they
//! start, are.
//!
//! - Landlock (ABI v5, best effort): read and execute everywhere, write
//!   (create, remove, write, truncate, make any node, rename, link) only
//!   under the writable roots.
//! - seccomp, unless the network is granted: `socket(2)` for any family
//!   but `AF_UNIX` fails with `EPERM` (so no IPv4/IPv6, raw packets,
//!   netlink, vsock...), and `io_uring_setup` fails with `EPERM` (io_uring
//!   can create sockets without `socket(2)`).
//!
//! Not done: a PID namespace with a private `/proc`. The child's own
//! process group (killed whole), `PR_SET_PDEATHSIG`, ybs as child
//! subreaper and [`super::process::reap_escapees`] stand in for it, and
//! ybs is non-dumpable, so a child cannot read its memory or environment
//! through `/proc`.
//!
//! Whether confinement works is [`probe`]d once per process: a throwaway
//! thread confines itself with a real ruleset and filter and reports the
//! Landlock `RestrictionStatus`.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::core::event::SandboxInfo;

/// The name of the confinement in outputs.
pub const MECHANISM: &str = "landlock+seccomp";

/// Device files every child may write.
const WRITABLE_DEVICES: &[&str] = &["/dev/null", "/dev/zero", "/dev/full"];

/// Where children may write and whether they may use the network.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SandboxSettings {
    /// Roots besides the workdir and the private temp dir (canonical or
    /// not: missing ones are skipped).
    pub writable: Vec<PathBuf>,
    /// Leave the network open (no seccomp socket filter).
    pub network: bool,
}

/// Why confinement cannot be applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unavailable(pub String);

/// What the probe found: the Landlock status, or why nothing works.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// `fully_enforced` or `partially_enforced`; `Err` with the reason
    /// when confinement cannot be applied.
    pub landlock: Result<&'static str, String>,
}

impl Probe {
    pub fn available(&self) -> bool {
        self.landlock.is_ok()
    }
}

/// One task's confinement, ready for children.
#[derive(Debug)]
pub struct Sandbox {
    temp: PrivateTemp,
    writable: Vec<PathBuf>,
    network: bool,
    landlock: &'static str,
    #[cfg(target_os = "linux")]
    ruleset: std::os::fd::OwnedFd,
    /// `None` when the network is granted.
    #[cfg(target_os = "linux")]
    filter: Option<seccompiler::BpfProgram>,
}

impl Sandbox {
    /// Builds the confinement of a task in `workdir`: creates the private
    /// temp dir, the Landlock ruleset and the seccomp filter. Fails when
    /// the probe found confinement unavailable, or when building fails.
    pub fn prepare(workdir: &Path, settings: &SandboxSettings) -> Result<Self, Unavailable> {
        let landlock = probe().landlock.clone().map_err(Unavailable)?;
        let temp = PrivateTemp::create()
            .map_err(|error| Unavailable(format!("cannot create a private temp dir: {error}")))?;
        let mut writable = vec![workdir.to_owned(), temp.path.clone()];
        for path in &settings.writable {
            if let Ok(path) = path.canonicalize()
                && !writable.contains(&path)
            {
                writable.push(path);
            }
        }
        build(temp, writable, settings.network, landlock)
    }

    /// The private temp dir (`TMPDIR` of the children).
    pub fn temp_dir(&self) -> &Path {
        &self.temp.path
    }

    /// The writable roots, workdir and temp dir first.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    pub fn network(&self) -> bool {
        self.network
    }

    /// What outputs say about this sandbox.
    pub fn info(&self) -> SandboxInfo {
        SandboxInfo {
            mode: MECHANISM.to_owned(),
            landlock: Some(self.landlock.to_owned()),
            network: self.network,
            writable: self
                .writable
                .iter()
                .map(|path| path.display().to_string())
                .collect(),
            reason: None,
        }
    }

    /// Confines the calling thread. Runs in the forked child before exec:
    /// raw system calls only, no allocation, no lock.
    #[cfg(target_os = "linux")]
    #[allow(unsafe_code)]
    pub(crate) fn confine_child(&self) -> io::Result<()> {
        use nix::libc;
        use std::os::fd::AsRawFd;
        // SAFETY: plain system calls with valid arguments.
        unsafe {
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            if libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0,
            ) != 0
            {
                return Err(io::Error::last_os_error());
            }
        }
        if let Some(filter) = &self.filter {
            seccompiler::apply_filter(filter).map_err(seccomp_errno)?;
        }
        Ok(())
    }

    #[cfg(not(target_os = "linux"))]
    pub(crate) fn confine_child(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The info of a run without confinement.
pub fn unconfined(reason: &str) -> SandboxInfo {
    SandboxInfo {
        mode: "none".to_owned(),
        landlock: None,
        network: true,
        writable: Vec::new(),
        reason: Some(reason.to_owned()),
    }
}

/// The raw errno of a seccompiler error, without allocating.
#[cfg(target_os = "linux")]
fn seccomp_errno(error: seccompiler::Error) -> io::Error {
    match error {
        seccompiler::Error::Prctl(error) | seccompiler::Error::Seccomp(error) => {
            io::Error::from_raw_os_error(error.raw_os_error().unwrap_or(nix::libc::EPERM))
        }
        _ => io::Error::from_raw_os_error(nix::libc::EINVAL),
    }
}

/// Probes once per process whether confinement can be applied: a
/// throwaway thread restricts itself with a real ruleset (the system temp
/// dir writable) and loads the seccomp filter.
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(run_probe)
}

#[cfg(target_os = "linux")]
fn run_probe() -> Probe {
    let outcome = std::thread::Builder::new()
        .name("ybs-sandbox-probe".to_owned())
        .spawn(|| -> Result<&'static str, String> {
            let writable = vec![std::env::temp_dir()];
            let ruleset = landlock_ruleset(&writable).map_err(|e| format!("Landlock: {e}"))?;
            let status = ruleset
                .restrict_self()
                .map_err(|error| format!("Landlock: {error}"))?;
            let landlock = match status.ruleset {
                landlock::RulesetStatus::FullyEnforced => "fully_enforced",
                landlock::RulesetStatus::PartiallyEnforced => "partially_enforced",
                landlock::RulesetStatus::NotEnforced => {
                    return Err(
                        "Landlock is not supported or not enabled by this kernel".to_owned()
                    );
                }
            };
            let filter = seccomp_filter().map_err(|e| format!("seccomp: {e}"))?;
            seccompiler::apply_filter(&filter).map_err(|e| format!("seccomp: {e}"))?;
            Ok(landlock)
        });
    let landlock = match outcome.map(std::thread::JoinHandle::join) {
        Ok(Ok(result)) => result,
        Ok(Err(_)) => Err("the probe thread panicked".to_owned()),
        Err(error) => Err(format!("cannot start the probe thread: {error}")),
    };
    Probe { landlock }
}

#[cfg(not(target_os = "linux"))]
fn run_probe() -> Probe {
    Probe {
        landlock: Err("kernel confinement is implemented for Linux only".to_owned()),
    }
}

#[cfg(target_os = "linux")]
fn build(
    temp: PrivateTemp,
    writable: Vec<PathBuf>,
    network: bool,
    landlock: &'static str,
) -> Result<Sandbox, Unavailable> {
    let ruleset = landlock_ruleset(&writable).map_err(|e| Unavailable(format!("Landlock: {e}")))?;
    let ruleset: Option<std::os::fd::OwnedFd> = ruleset.into();
    let ruleset = ruleset.ok_or_else(|| Unavailable("Landlock: no ruleset".to_owned()))?;
    let filter = if network {
        None
    } else {
        Some(seccomp_filter().map_err(|e| Unavailable(format!("seccomp: {e}")))?)
    };
    Ok(Sandbox {
        temp,
        writable,
        network,
        landlock,
        ruleset,
        filter,
    })
}

#[cfg(not(target_os = "linux"))]
fn build(
    _temp: PrivateTemp,
    _writable: Vec<PathBuf>,
    _network: bool,
    _landlock: &'static str,
) -> Result<Sandbox, Unavailable> {
    Err(Unavailable(
        "kernel confinement is implemented for Linux only".to_owned(),
    ))
}

/// Read and execute everywhere (ioctl on devices too), every write right
/// under `writable`, the device files writable.
#[cfg(target_os = "linux")]
fn landlock_ruleset(writable: &[PathBuf]) -> Result<landlock::RulesetCreated, String> {
    use landlock::{
        ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset, RulesetAttr,
        RulesetCreatedAttr,
    };
    let abi = ABI::V5;
    let read = AccessFs::from_read(abi) | AccessFs::IoctlDev;
    let all = AccessFs::from_all(abi);
    let file_write = AccessFs::WriteFile | AccessFs::Truncate | AccessFs::ReadFile;
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(all)
        .map_err(|e| e.to_string())?
        .create()
        .map_err(|e| e.to_string())?;
    let root = PathFd::new("/").map_err(|e| e.to_string())?;
    ruleset = ruleset
        .add_rule(PathBeneath::new(root, read))
        .map_err(|e| e.to_string())?;
    for path in writable {
        let fd = PathFd::new(path).map_err(|e| format!("{}: {e}", path.display()))?;
        ruleset = ruleset
            .add_rule(PathBeneath::new(fd, all))
            .map_err(|e| e.to_string())?;
    }
    for device in WRITABLE_DEVICES {
        if let Ok(fd) = PathFd::new(device) {
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, file_write | AccessFs::IoctlDev))
                .map_err(|e| e.to_string())?;
        }
    }
    Ok(ruleset)
}

/// `socket(2)` for any family but `AF_UNIX`, and `io_uring_setup`, fail
/// with `EPERM`.
#[cfg(target_os = "linux")]
fn seccomp_filter() -> Result<seccompiler::BpfProgram, String> {
    use std::collections::BTreeMap;

    use nix::libc;
    use seccompiler::{
        SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
        SeccompRule, TargetArch,
    };
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|_| format!("no filter for the {} architecture", std::env::consts::ARCH))?;
    let not_unix = SeccompRule::new(vec![
        SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            u64::try_from(libc::AF_UNIX).unwrap_or(1),
        )
        .map_err(|e| e.to_string())?,
    ])
    .map_err(|e| e.to_string())?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_socket, vec![not_unix]);
    rules.insert(libc::SYS_io_uring_setup, Vec::new());
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(u32::try_from(libc::EPERM).unwrap_or(1)),
        arch,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// A directory only ybs's user can enter, removed (with its content) on
/// drop.
#[derive(Debug)]
struct PrivateTemp {
    path: PathBuf,
}

impl PrivateTemp {
    fn create() -> io::Result<Self> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        let mut last = None;
        for attempt in 0..16u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.subsec_nanos());
            let name = format!("ybs-sandbox-{}-{nanos:08x}{attempt}", std::process::id());
            let path = base.join(name);
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let path = path.canonicalize()?;
                    return Ok(Self { path });
                }
                Err(error) if error.kind() == io::ErrorKind::AlreadyExists => last = Some(error),
                Err(error) => return Err(error),
            }
        }
        Err(last.unwrap_or_else(|| io::Error::other("no free name")))
    }
}

impl Drop for PrivateTemp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests;
