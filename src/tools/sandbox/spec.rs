//! What ybs tells the helper: one JSON document on its command line
//! (paths and flags only, never a secret).

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The first argument that makes `ybs` the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox";
/// The first argument that makes `ybs` probe the layers.
pub const PROBE_ARG: &str = "__sandbox-probe";

/// Everything the helper needs to confine one program.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HelperSpec {
    /// User, mount, PID, UTS and IPC namespaces (and a network namespace
    /// unless the network is granted); false: Landlock and seccomp only.
    pub namespaces: bool,
    /// Canonical; read-write.
    pub workdir: PathBuf,
    /// The private temp dir on the host: `/tmp` inside the namespaces.
    pub temp: PathBuf,
    /// Operator-granted writable roots (canonical, existing).
    pub writable: Vec<PathBuf>,
    /// Host paths under `/tmp` that stay visible (read-only) once the
    /// private `/tmp` hides the host's: the run's directory, tool
    /// directories.
    pub visible: Vec<PathBuf>,
    /// Paths inside the workdir mounted read-only (existing, or made to
    /// exist as empty placeholder directories by ybs).
    pub read_only: Vec<PathBuf>,
    /// Paths hidden behind an empty read-only tmpfs (directories) or
    /// made read-only (files): ybs's outputs.
    pub hidden: Vec<PathBuf>,
    /// Paths outside the workdir hidden outright: directories behind an
    /// empty read-only tmpfs, files behind a read-only `/dev/null`. The
    /// operator's `safety.blocked_paths` (`~/.ssh`, `~/.aws`…).
    #[serde(default)]
    pub blocked: Vec<PathBuf>,
    /// Directories outside the workdir made writable for the task only:
    /// an overlay each, its upper layer under the private `/tmp`
    /// (toolchain homes and caches).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub scratch: Vec<PathBuf>,
    pub network: bool,
    pub unix_sockets: bool,
    /// The task's pids cgroup, which the helper joins first
    /// (`safety.max_processes`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<PathBuf>,
    /// `RLIMIT_NPROC` for the confined processes, when there is no cgroup
    /// and ybs does not run as root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_processes: Option<u64>,
}

impl HelperSpec {
    /// Where children may write with Landlock alone (no namespaces).
    pub fn landlock_roots(&self) -> Vec<PathBuf> {
        let mut roots = vec![self.workdir.clone(), self.temp.clone()];
        roots.extend(self.writable.iter().cloned());
        roots
    }

    /// The helper's argument vector: `__sandbox SPEC -- PROGRAM ARGS...`.
    pub fn argv(&self, program: &OsString, args: &[OsString]) -> Vec<OsString> {
        let mut argv = vec![
            OsString::from(HELPER_ARG),
            OsString::from(serde_json::to_string(self).unwrap_or_default()),
            OsString::from("--"),
            program.clone(),
        ];
        argv.extend(args.iter().cloned());
        argv
    }
}
