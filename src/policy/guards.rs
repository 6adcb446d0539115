//! Built-in guards (docs/policy.md, docs/security.md S4, S6): checks no rule can loosen.
//! A guard that fires makes the call `deny` with
//! `RuleRef::Guard { name }`, before any rule is looked at.
//!
//! | guard              | fires on                                                        |
//! |--------------------|-----------------------------------------------------------------|
//! | `blocked_commands` | a simple command (nested ones too) matching `safety.blocked_commands` |
//! | `blocked_paths`    | a file tool's path, or any word of a shell command, that may name a blocked path |
//! | `protected_paths`  | a write (file tool, shell redirection, `rm`/`mv`/`cp`/`tee`/`sed -i` … operand) to `.git/`, `.github/workflows/`, `.github/actions/`, `.ybs.json`, the run's task, policy and config files, ybs's outputs, or the GitHub control files; any use of `$GITHUB_ENV`, `$GITHUB_PATH`, `$GITHUB_OUTPUT`, … in a shell command |
//! | `outside_workdir`  | a file tool's path outside the workdir and `safety.allowed_paths` |
//!
//! Besides firing, the shell check adds hazards (never a denial by
//! itself): a redirection outside the workdir, a word naming a directory
//! that contains a blocked path (`ls ~`, `grep -r x /`), a protected path
//! named by a program not known to only read (`git log --output=.git/x`),
//! a `cd` to an unknown place.
//!
//! Matching is lexical ([`super::pathshape`]); `cd` targets in a chain are
//! followed, and every word is checked against every directory the chain
//! may be in.

use std::path::PathBuf;

use serde::Serialize;

use super::pathshape::{self, Base, Comp, Resolved, path_comps, resolve};
use super::shell::{Hazard, HazardKind, Seg, Shape, SimpleCommand};
use blocked_command::BlockedCommand;

/// `safety.blocked_commands` when config says nothing.
pub const DEFAULT_BLOCKED_COMMANDS: &[&str] = &[
    "sudo",
    "su",
    "doas",
    "pkexec",
    "rm -rf /",
    "chmod 777",
    "mkfs",
    "dd of=/dev/",
];

/// `safety.blocked_paths` when config says nothing.
pub const DEFAULT_BLOCKED_PATHS: &[&str] = &[
    "~/.ssh",
    "~/.aws",
    "~/.gnupg",
    "~/.config",
    "~/.git-credentials",
    "~/.netrc",
    "~/.docker/config.json",
    "~/.npmrc",
    "~/.pypirc",
    "~/.kube",
    // Registry, cloud and database credentials a CI runner or a
    // developer's machine holds.
    "~/.cargo/credentials.toml",
    "~/.cargo/credentials",
    "~/.m2/settings.xml",
    "~/.m2/settings-security.xml",
    "~/.gradle/gradle.properties",
    "~/.gem/credentials",
    "~/.yarnrc.yml",
    "~/.terraform.d/credentials.tfrc.json",
    "~/.terraformrc",
    "~/.vault-token",
    "~/.azure",
    "~/.boto",
    "~/.s3cfg",
    "~/.pgpass",
    "~/.my.cnf",
    "~/.password-store",
    "~/.local/share/keyrings",
    "**/.env",
    "/proc/*/environ",
    "/proc/*/root",
    "/proc/*/cwd",
    "/proc/*/mem",
];

/// Always protected from writes, relative to the workdir (S6).
pub const PROTECTED_PATTERNS: &[&str] = &[
    "**/.git",
    ".github/workflows",
    ".github/actions",
    ".ybs.json",
];

/// Variables naming GitHub Actions control files (S6).
pub const PROTECTED_VARIABLES: &[&str] = &[
    "GITHUB_ENV",
    "GITHUB_PATH",
    "GITHUB_OUTPUT",
    "GITHUB_STATE",
    "GITHUB_STEP_SUMMARY",
];

/// Tools that only read their path; every other tool with a path is
/// treated as writing it.
pub const READ_TOOLS: &[&str] = &["read_file", "list_files", "search_files"];

/// Programs whose operands are written (for `protected_paths`).
const WRITERS: &[&str] = &[
    "rm", "rmdir", "mv", "cp", "tee", "truncate", "chmod", "chown", "chgrp", "ln", "install",
    "touch", "mkdir", "shred", "unlink", "rsync", "dd", "patch",
];

/// Programs that only read their operands: they may name a protected path.
const READERS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "less",
    "more",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ls",
    "wc",
    "diff",
    "cmp",
    "file",
    "stat",
    "du",
    "tree",
    "od",
    "xxd",
    "hexdump",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "readlink",
    "realpath",
    "test",
    "[",
    "echo",
    "printf",
];

/// Redirection targets outside the workdir that are fine.
const DEVICES: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/zero"];

/// The kernel confinement the run's shell commands get, as the policy
/// is told it (it imports nothing of the sandbox: the runner maps its
/// probe to this, `ybs policy explain` may override it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Namespaces, Landlock and seccomp: the full sandbox. It hides the
    /// blocked paths, keeps the control files read-only, bounds writes
    /// to the workdir and its temp dir, and runs under `no_new_privs`
    /// with a `/proc` of its own; so the policy lets it bound what the
    /// parser cannot see (docs/policy.md, "The sandbox decides").
    Full,
    /// Landlock and seccomp without namespaces
    /// (`safety.sandbox_require: landlock`).
    Reduced,
    /// No confinement (`--no-sandbox`, or none available). The default:
    /// a policy told nothing assumes the least.
    #[default]
    None,
}

impl SandboxMode {
    /// As outputs name it: `namespaces+landlock+seccomp`,
    /// `landlock+seccomp`, `none`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "namespaces+landlock+seccomp",
            Self::Reduced => "landlock+seccomp",
            Self::None => "none",
        }
    }

    /// `full`, `reduced` or `none` (`--sandbox` of `ybs policy explain`).
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "full" | "namespaces+landlock+seccomp" => Some(Self::Full),
            "reduced" | "landlock+seccomp" => Some(Self::Reduced),
            "none" => Some(Self::None),
            _ => None,
        }
    }
}

impl std::fmt::Display for SandboxMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the guards need to know about the run. Built by the runner from
/// `safety.*` config; policy keeps no other state and reads no files.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GuardSettings {
    /// The task's workdir, absolute and canonical.
    pub workdir: PathBuf,
    /// The user's home, for `~` and `$HOME`; `None` if unknown.
    pub home: Option<PathBuf>,
    /// `safety.allowed_paths`: more roots file tools may use.
    pub allowed_roots: Vec<PathBuf>,
    /// `safety.blocked_commands`, as written (`rm -rf /`).
    pub blocked_commands: Vec<String>,
    /// `safety.blocked_paths`, as written (`~/.ssh`, `**/.env`).
    pub blocked_paths: Vec<String>,
    /// The run's task and policy files and the files named by
    /// `GITHUB_ENV`, `GITHUB_PATH`, `GITHUB_OUTPUT`: absolute, or
    /// relative to the workdir.
    pub protected_paths: Vec<PathBuf>,
    /// The `PATH` shell commands run with: a bare program name found on
    /// it that is the same file (device and inode) as a program a `deny`
    /// or `ask` rule names is a renamed program (docs/policy.md, "Opaque
    /// programs"). `None`: names are compared as written, and the policy
    /// reads nothing.
    pub program_path: Option<std::ffi::OsString>,
    /// The confinement the shell commands get ([`SandboxMode::None`]
    /// unless told).
    pub sandbox: SandboxMode,
    /// The sandbox refuses, at every `execve` of a confined process, a
    /// program whose argv a `deny` rule on `run_shell` matches (the exec
    /// guard, docs/sandbox.md). Only with [`SandboxMode::Full`]; false
    /// unless told. With it, the policy leaves what the parser cannot
    /// see to the guard ([`crate::policy::Policy::exec_guard_holds`]).
    pub exec_guard: bool,
}

impl GuardSettings {
    /// Settings with the default blocked lists.
    pub fn new(workdir: impl Into<PathBuf>, home: Option<PathBuf>) -> Self {
        Self {
            workdir: workdir.into(),
            home,
            allowed_roots: Vec::new(),
            blocked_commands: DEFAULT_BLOCKED_COMMANDS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            blocked_paths: DEFAULT_BLOCKED_PATHS
                .iter()
                .map(|s| (*s).to_owned())
                .collect(),
            protected_paths: Vec::new(),
            program_path: None,
            sandbox: SandboxMode::None,
            exec_guard: false,
        }
    }
}

/// A guard entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid guard entry `{entry}` in {list}: {problem}")]
pub struct GuardError {
    pub list: &'static str,
    pub entry: String,
    pub problem: String,
}

/// A guard that fired.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GuardHit {
    pub name: &'static str,
    pub detail: String,
}

impl GuardHit {
    fn new(name: &'static str, detail: String) -> Self {
        Self { name, detail }
    }
}

/// The guards, compiled.
#[derive(Debug, Clone)]
pub(crate) struct Guards {
    workdir: Vec<Comp>,
    home: Option<Vec<Comp>>,
    roots: Vec<Vec<Comp>>,
    commands: Vec<BlockedCommand>,
    blocked: Vec<(String, Vec<Comp>)>,
    /// Per `blocked` entry: the full sandbox hides it, so a word naming a
    /// directory that holds it is no hazard.
    hidden: Vec<bool>,
    protected: Vec<(String, Vec<Comp>)>,
}

/// The result of the shell guard.
#[derive(Debug, Default)]
pub(crate) struct ShellCheck {
    pub hit: Option<GuardHit>,
    pub hazards: Vec<Hazard>,
}

impl Guards {
    pub fn new(settings: &GuardSettings) -> Result<Self, GuardError> {
        let workdir = path_comps(&settings.workdir);
        let home = settings.home.as_deref().map(path_comps);
        let base = Base {
            cwd: &workdir,
            home: home.as_deref(),
            floating_cwd: false,
        };
        let pattern = |text: &str| {
            let mut comps = pathshape::resolve_text(text, base, true).comps;
            comps.push(Comp::Any);
            comps
        };
        let mut roots = vec![workdir.clone()];
        roots.extend(settings.allowed_roots.iter().map(|root| path_comps(root)));
        let full_sandbox = settings.sandbox == SandboxMode::Full;
        let mut blocked = Vec::new();
        let mut hidden = Vec::new();
        for entry in &settings.blocked_paths {
            if entry.trim().is_empty() {
                return Err(GuardError {
                    list: "safety.blocked_paths",
                    entry: entry.clone(),
                    problem: "empty path".to_owned(),
                });
            }
            if entry.starts_with('~') && home.is_none() {
                continue; // No home: nothing can expand to it either.
            }
            blocked.push((entry.clone(), pattern(entry)));
            hidden.push(full_sandbox && sandbox_hides(entry));
        }
        let mut protected: Vec<(String, Vec<Comp>)> = PROTECTED_PATTERNS
            .iter()
            .map(|entry| {
                // `**/.git` means anywhere under the workdir here.
                let mut comps = if entry.starts_with("**") {
                    workdir.clone()
                } else {
                    Vec::new()
                };
                comps.extend(pattern(entry));
                ((*entry).to_owned(), comps)
            })
            .collect();
        for path in &settings.protected_paths {
            let text = path.to_string_lossy();
            protected.push((text.clone().into_owned(), pattern(&text)));
        }
        let commands = settings
            .blocked_commands
            .iter()
            .map(|entry| BlockedCommand::parse(entry))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            workdir,
            home,
            roots,
            commands,
            blocked,
            hidden,
            protected,
        })
    }

    fn base<'a>(&'a self, cwd: &'a [Comp]) -> Base<'a> {
        Base {
            cwd,
            home: self.home.as_deref(),
            floating_cwd: false,
        }
    }

    /// Resolves a file tool's path argument against the workdir.
    pub fn resolve_path(&self, path: &str) -> Resolved {
        pathshape::resolve_text(path, self.base(&self.workdir), false)
    }

    /// The path rules match: relative to the workdir when inside it
    /// (`src/lib.rs`, `.` for the workdir), absolute otherwise.
    pub fn rule_path(&self, path: &str) -> String {
        let resolved = self.resolve_path(path);
        if resolved.is_under(&self.workdir) {
            let relative: Vec<&str> = resolved.comps[self.workdir.len()..]
                .iter()
                .filter_map(|c| match c {
                    Comp::Lit(name) => Some(name.as_str()),
                    Comp::Pat(_) | Comp::Any | Comp::Deep => None,
                })
                .collect();
            if relative.is_empty() {
                ".".to_owned()
            } else {
                relative.join("/")
            }
        } else {
            resolved.display()
        }
    }

    /// The guards for a file tool's path.
    pub fn check_path(&self, tool: &str, path: &str) -> Option<GuardHit> {
        let resolved = self.resolve_path(path);
        if let Some(entry) = self.blocked_entry(&resolved) {
            return Some(GuardHit::new(
                "blocked_paths",
                format!("`{path}` is under blocked path `{entry}`"),
            ));
        }
        if !READ_TOOLS.contains(&tool)
            && let Some(entry) = self.protected_entry(&resolved)
        {
            return Some(GuardHit::new(
                "protected_paths",
                format!("`{path}` is protected (`{entry}`): no tool writes it"),
            ));
        }
        if !self.roots.iter().any(|root| resolved.is_under(root)) {
            return Some(GuardHit::new(
                "outside_workdir",
                format!(
                    "`{path}` resolves to `{}`, outside the workdir",
                    resolved.display()
                ),
            ));
        }
        None
    }

    fn blocked_entry(&self, resolved: &Resolved) -> Option<&str> {
        self.blocked
            .iter()
            .find(|(_, pattern)| resolved.may_match(pattern))
            .map(|(entry, _)| entry.as_str())
    }

    fn protected_entry(&self, resolved: &Resolved) -> Option<&str> {
        self.protected
            .iter()
            .find(|(_, pattern)| resolved.may_match(pattern))
            .map(|(entry, _)| entry.as_str())
    }

    fn dir_base<'a>(&'a self, dir: &'a Option<Vec<Comp>>) -> Base<'a> {
        match dir {
            Some(cwd) => self.base(cwd),
            None => Base {
                cwd: &[],
                home: self.home.as_deref(),
                floating_cwd: true,
            },
        }
    }

    /// A word as a path, and the value after its first `=` (`of=/dev/x`,
    /// `--file=~/.ssh/k`, `X=~/.aws`).
    fn word_paths(&self, shape: &Shape, dir: &Option<Vec<Comp>>) -> Vec<Resolved> {
        let base = self.dir_base(dir);
        let mut paths = vec![resolve(shape, base)];
        if let Some(after) = after_equals(shape) {
            paths.push(resolve(&after, base));
        }
        paths
    }

    fn follow_cd(
        &self,
        part: &SimpleCommand,
        index: usize,
        dirs: &mut Vec<Option<Vec<Comp>>>,
        check: &mut ShellCheck,
    ) {
        let offset = part.assignments.len();
        let target = part
            .argv
            .iter()
            .enumerate()
            .skip(1)
            .find(|(_, word)| !word.starts_with('-') || *word == "-");
        let mut new_dirs = Vec::new();
        match target {
            Some((_, word)) if word == "-" => new_dirs.push(None),
            Some((word_index, _)) => match part.shapes.get(offset + word_index) {
                Some(shape) => {
                    for dir in dirs.iter() {
                        let resolved = resolve(shape, self.dir_base(dir));
                        new_dirs.push(resolved.is_exact().then_some(resolved.comps));
                    }
                }
                None => new_dirs.push(None),
            },
            None => new_dirs.push(self.home.clone()),
        }
        for dir in new_dirs {
            let inside = dir.as_ref().is_some_and(|comps| {
                self.roots
                    .iter()
                    .any(|root| comps.len() >= root.len() && comps[..root.len()] == **root)
            });
            if !inside {
                check.hazard(HazardKind::UnknownDirectory, Some(index), &part.argv_text());
            }
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
}

impl ShellCheck {
    fn hazard(&mut self, kind: HazardKind, part: Option<usize>, text: &str) {
        let hazard = Hazard {
            kind,
            part,
            text: text.to_owned(),
        };
        if !self.hazards.contains(&hazard) {
            self.hazards.push(hazard);
        }
    }
}

/// True if and only if the full sandbox hides `entry` from every confined
/// program: a literal path under the home or absolute (it binds an empty
/// file or directory over it), or one under `/proc` (its `/proc` is its
/// own). A pattern (`**/.env`) it cannot hide.
fn sandbox_hides(entry: &str) -> bool {
    entry.starts_with("/proc/")
        || ((entry.starts_with('/') || entry.starts_with("~/"))
            && !entry.contains(['*', '?', '[', '{']))
}

fn after_equals(shape: &Shape) -> Option<Shape> {
    let position = shape
        .iter()
        .position(|seg| matches!(seg, Seg::Lit(text) if text.contains('=')))?;
    let Seg::Lit(text) = &shape[position] else {
        return None;
    };
    let (_, rest) = text.split_once('=')?;
    let mut after = Vec::new();
    if !rest.is_empty() {
        after.push(Seg::Lit(rest.to_owned()));
    }
    after.extend(shape[position + 1..].iter().cloned());
    (!after.is_empty()).then_some(after)
}

/// True if and only if the part's operands are written by its program.
fn writes_operands(part: &SimpleCommand) -> bool {
    let Some(program) = part.program() else {
        return false;
    };
    let args = &part.argv[1..];
    WRITERS.contains(&program)
        || (matches!(program, "sed" | "gsed")
            && args
                .iter()
                .any(|w| w.starts_with("-i") || w.starts_with("--in-place")))
        || (program == "perl" && args.iter().any(|w| w.starts_with('-') && w.contains('i')))
}

mod blocked_command;
mod shell;
#[cfg(test)]
mod tests;
