//! What ybs tells the helper: one JSON document on its command line
//! (paths and flags only, never a secret).

use std::ffi::OsString;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The first argument that makes `ybs` the sandbox helper.
pub const HELPER_ARG: &str = "__sandbox";
/// The first argument that makes `ybs` probe the layers.
pub const PROBE_ARG: &str = "__sandbox-probe";
/// The first argument that makes `ybs` a task's resident sandbox: the
/// namespaces and the file system view built once, one program started
/// in them per request ([`Request`]).
pub const INIT_ARG: &str = "__sandbox-init";

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
    /// Host paths that stay visible (read-only) where the private `/tmp`,
    /// the empty home or a masked directory hides what holds them: the
    /// run's directory, tool directories, the home's toolchains.
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
    /// The user's home (canonical): an empty directory of the task's own
    /// (a tmpfs, writable, gone with the task), the kept paths beneath it
    /// bound back (docs/sandbox.md, "The home").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub home: Option<PathBuf>,
    /// The `~/.gitconfig` the confined programs read in the empty home:
    /// the host's identity only (`user.name`, `user.email`,
    /// `init.defaultBranch`), never its credential helpers, extra headers
    /// or URL rewrites.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gitconfig: Option<String>,
    /// Directories shown empty (read-only), the kept paths beneath them
    /// bound back: other homes, relocated XDG directories, a self-hosted
    /// runner's install directory. A blocked directory holding a kept path
    /// is shown the same way.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub masked: Vec<PathBuf>,
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
    /// The exec guard's deny rules: command globs (`curl*`, `git push*`)
    /// that every `execve`/`execveat` of a confined process is checked
    /// against, a match refused with `EPERM` (docs/sandbox.md, "The exec
    /// guard"). Empty: no guard.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec_deny: Vec<String>,
    /// The programs the deny rules name by their first word, and their
    /// files: the guard knows a copy or link of one by its file
    /// ([`super::exec_views`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exec_deny_programs: Vec<super::exec_views::DeniedProgram>,
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
        argv_of(&self.to_json(), program, args)
    }

    /// The spec as the helper and the resident read it.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }
}

/// The helper's argument vector for the spec already in JSON (`json`).
pub fn argv_of(json: &str, program: &OsString, args: &[OsString]) -> Vec<OsString> {
    let mut argv = vec![
        OsString::from(HELPER_ARG),
        OsString::from(json),
        OsString::from("--"),
        program.clone(),
    ];
    argv.extend(args.iter().cloned());
    argv
}

/// One program for the resident sandbox to start: its argument vector
/// (`argv[0]` looked up in the `PATH` of `env`), working directory and
/// whole environment. Sent in a sealed memory file beside the program's
/// descriptors, never on a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Request {
    pub argv: Vec<OsString>,
    pub cwd: PathBuf,
    /// `NAME`, `VALUE` pairs, applied in order (a later one wins).
    pub env: Vec<(OsString, OsString)>,
}

impl Request {
    /// Length-prefixed byte strings: argc, argv, envc, the env pairs, cwd.
    pub fn encode(&self) -> Vec<u8> {
        use std::os::unix::ffi::OsStrExt;
        fn put(out: &mut Vec<u8>, bytes: &[u8]) {
            out.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(bytes);
        }
        let mut out = Vec::new();
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX).to_le_bytes();
        out.extend_from_slice(&count(self.argv.len()));
        for arg in &self.argv {
            put(&mut out, arg.as_bytes());
        }
        out.extend_from_slice(&count(self.env.len()));
        for (name, value) in &self.env {
            put(&mut out, name.as_bytes());
            put(&mut out, value.as_bytes());
        }
        put(&mut out, self.cwd.as_os_str().as_bytes());
        out
    }

    /// The inverse of [`Request::encode`]; `None` for anything malformed.
    pub fn decode(mut bytes: &[u8]) -> Option<Self> {
        use std::os::unix::ffi::OsStringExt;
        fn number(bytes: &mut &[u8]) -> Option<usize> {
            let (head, rest) = bytes.split_first_chunk::<4>()?;
            *bytes = rest;
            usize::try_from(u32::from_le_bytes(*head)).ok()
        }
        fn take(bytes: &mut &[u8]) -> Option<OsString> {
            let length = number(bytes)?;
            if bytes.len() < length {
                return None;
            }
            let (head, rest) = bytes.split_at(length);
            *bytes = rest;
            Some(OsString::from_vec(head.to_vec()))
        }
        let argc = number(&mut bytes)?;
        let argv = (0..argc)
            .map(|_| take(&mut bytes))
            .collect::<Option<Vec<_>>>()?;
        let envc = number(&mut bytes)?;
        let env = (0..envc)
            .map(|_| Some((take(&mut bytes)?, take(&mut bytes)?)))
            .collect::<Option<Vec<_>>>()?;
        let cwd = PathBuf::from(take(&mut bytes)?);
        (bytes.is_empty() && !argv.is_empty()).then_some(Self { argv, cwd, env })
    }
}
