//! Checks: shell commands run in the workdir after the agent stops; all
//! must pass (docs/task-files.md–3). A failing check's output feeds `fix_attempts`.
//!
//! Checks run code the model wrote (that is what tests are), so they run
//! under the task's kernel sandbox like `run_shell`, with the same
//! environment allowlist (docs/security.md S1). A check gets the network only
//! when it asks (`network: true`) and the operator has not forbidden it
//! (`safety.sandbox_check_network: false`).

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::agent::Emitter;
use crate::core::Redactor;
use crate::core::event::{self, CheckCompleted, CheckLocation, Event};
use crate::core::redact::Redactions;
use crate::core::text::tail;
use crate::report::annotations::{self, MAX_PER_CHECK};
use crate::task::CheckSpec;
use crate::tools::ChildEnv;
use crate::tools::process::{self, ProcessSpec};
use crate::tools::sandbox::Sandbox;

/// Default check timeout when the task gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Bytes of output kept per stream while a check runs.
const OUTPUT_CAP: usize = 1 << 20;
/// Characters of output kept in events and reports.
const TAIL_CHARS: usize = 4000;

/// The checks' verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksOutcome {
    pub passed: bool,
    /// The task timeout passed during the checks: the check it cut and
    /// those after it did not finish (docs/agent-loop.md#limits).
    pub out_of_time: bool,
    /// For the failing checks: what ran, how it ended and its output tail.
    pub failures: Vec<String>,
}

/// Where and how checks run: the task's workdir, environment and sandbox
/// (`None`: unconfined, `--no-sandbox`), and whether a check that asks
/// for the network may have it.
pub struct CheckEnv<'a> {
    pub workdir: &'a Path,
    pub env: &'a ChildEnv,
    pub sandbox: Option<&'a Arc<Sandbox>>,
    pub network_allowed: bool,
    /// Masks the output before it is joined and cut: a secret split
    /// between stdout and stderr, or cut in two by the tail, would not be
    /// whole for the masking downstream.
    pub redactor: &'a Redactor,
}

impl CheckEnv<'_> {
    /// The sandbox `check` runs in.
    fn sandbox_for(&self, check: &CheckSpec) -> Option<Arc<Sandbox>> {
        let sandbox = self.sandbox?;
        if check.network && self.network_allowed && !sandbox.network() {
            Some(Arc::new(sandbox.with_network()))
        } else {
            Some(sandbox.clone())
        }
    }
}

/// A check's stdout and then its stderr, masked before they are joined
/// (with a line break, which would split a secret that runs from one
/// into the other) and before the output is cut to its tail (which could
/// cut one in two). What was masked is reported (`task.redactions`).
fn masked_output(
    redactor: &Redactor,
    mut stdout: String,
    mut stderr: String,
    emitter: &mut Emitter<'_>,
) -> String {
    let mut counts = Redactions::new();
    redactor.redact_across(&mut stdout, &mut stderr, &mut counts);
    let mut text = redactor.redact_counting(&stdout, &mut counts);
    if !stderr.is_empty() {
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&redactor.redact_counting(&stderr, &mut counts));
    }
    if !counts.is_empty() {
        emitter.emit(Event::Redactions(event::Redactions { counts }));
    }
    text
}

/// Runs every check (not stopping at the first failure) and records each.
/// `time_left` is what is left of the task timeout: no check runs past
/// it, and once it has passed no further check starts.
pub async fn run_checks(
    checks: &[CheckSpec],
    setting: &CheckEnv<'_>,
    attempt: u32,
    time_left: Option<Duration>,
    emitter: &mut Emitter<'_>,
) -> ChecksOutcome {
    let deadline = time_left.map(|left| std::time::Instant::now() + left);
    let mut failures = Vec::new();
    let mut out_of_time = false;
    // Found when a check first fails: the workdir (canonical) and the
    // root of its repository.
    let mut repository_root: Option<Option<(PathBuf, PathBuf)>> = None;
    for check in checks {
        let own = check.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let left = deadline.map(|at| at.saturating_duration_since(std::time::Instant::now()));
        if left.is_some_and(|left| left.is_zero()) {
            out_of_time = true;
            break;
        }
        let timeout = left.map_or(own, |left| own.min(left));
        let cut_by_deadline = timeout < own;
        let sandbox = setting.sandbox_for(check);
        let spec = ProcessSpec::shell(
            &check.run,
            setting.workdir.to_owned(),
            setting.env,
            timeout,
            OUTPUT_CAP,
        )
        .confined(sandbox.as_ref());
        let started = std::time::Instant::now();
        let (exit_code, timed_out, output) = match process::run(spec).await {
            Ok(out) => {
                let text = masked_output(setting.redactor, out.stdout, out.stderr, emitter);
                (out.exit_code, out.timed_out, text)
            }
            Err(error) => (None, false, format!("cannot start check: {error}")),
        };
        let passed = !timed_out && exit_code == Some(check.expect_exit);
        out_of_time |= timed_out && cut_by_deadline;
        let output_tail = tail(&output, TAIL_CHARS).to_owned();
        let locations = if passed {
            Vec::new()
        } else {
            let root = repository_root.get_or_insert_with(|| repository_root_of(setting.workdir));
            locations(&output, root.as_ref())
        };
        emitter.emit(Event::CheckCompleted(CheckCompleted {
            name: check.name.clone(),
            command: check.run.clone(),
            exit_code,
            expected_exit: check.expect_exit,
            passed,
            timed_out,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output_tail: output_tail.clone(),
            attempt,
            locations,
        }));
        if !passed {
            let how = if timed_out {
                format!(
                    "timed out after {}s",
                    check.timeout.unwrap_or(DEFAULT_TIMEOUT).as_secs()
                )
            } else {
                match exit_code {
                    Some(code) => format!("exited {code} (expected {})", check.expect_exit),
                    None => "was killed by a signal".to_owned(),
                }
            };
            let hint = toolchain_hint(&output)
                .map(|hint| format!("; hint: {hint}"))
                .unwrap_or_default();
            failures.push(format!(
                "check `{}` {how}{hint}\n$ {}\n{}",
                check.name,
                check.run,
                output_tail.trim_end()
            ));
        }
        if out_of_time {
            break;
        }
    }
    ChecksOutcome {
        passed: failures.is_empty() && !out_of_time,
        out_of_time,
        failures,
    }
}

/// The canonical workdir and the root of its repository (the workdir
/// itself outside one); `None` when the workdir cannot be resolved.
fn repository_root_of(workdir: &Path) -> Option<(PathBuf, PathBuf)> {
    let workdir = workdir.canonicalize().ok()?;
    let root = match crate::git::Workspace::open(&workdir) {
        Ok(Some(workspace)) => workspace.root().to_owned(),
        _ => workdir.clone(),
    };
    Some((workdir, root))
}

/// The locations a failing check's output points to that are inside the
/// repository, relative to its root (a path relative to the check's
/// directory, the workdir, or absolute; never above the root): at most
/// [`MAX_PER_CHECK`] (docs/ci.md#annotations-on-the-failing-line).
fn locations(output: &str, dirs: Option<&(PathBuf, PathBuf)>) -> Vec<CheckLocation> {
    let Some((workdir, root)) = dirs else {
        return Vec::new();
    };
    annotations::scan(output)
        .into_iter()
        .filter_map(|found| {
            let path = Path::new(&found.path);
            let joined = if path.is_absolute() {
                path.to_owned()
            } else {
                workdir.join(path)
            };
            let file = inside(&joined, root)?;
            Some(CheckLocation {
                file,
                line: found.line,
                column: found.column,
                message: found.message,
            })
        })
        .take(MAX_PER_CHECK)
        .collect()
}

/// `path` (absolute) relative to `root`, `/`-separated, with `.` and
/// `..` resolved as written; `None` when it is not below `root`.
fn inside(path: &Path, root: &Path) -> Option<String> {
    let mut normal = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                if !normal.pop() {
                    return None;
                }
            }
            other => normal.push(other),
        }
    }
    let relative = normal.strip_prefix(root).ok()?;
    let parts: Vec<&str> = relative
        .components()
        .map(|part| part.as_os_str().to_str())
        .collect::<Option<_>>()?;
    (!parts.is_empty()).then(|| parts.join("/"))
}

/// Where the toolchain sections of the docs are, for the hints below.
const TOOLCHAIN_DOCS: &str = "docs/sandbox.md#toolchains-and-caches";

/// The setting that helps when a check's output shows a toolchain that
/// could not find itself in the sandbox (a version manager's shim with no
/// version, a program not on the `PATH`, a write outside the writable
/// roots): the first known message wins.
fn toolchain_hint(output: &str) -> Option<String> {
    let has = |needle: &str| output.contains(needle);
    let hint = if has("no default is configured")
        || has("rustup could not choose a version")
        || has("no default toolchain configured")
        || (has("toolchain '") && has("is not installed"))
    {
        "rustup found no toolchain: run ybs with the HOME (or RUSTUP_HOME and CARGO_HOME) of your rustup install; a toolchain chosen by another variable needs it passed: `safety.env_passthrough: [RUSTUP_TOOLCHAIN]` in the operator config"
    } else if has("pyenv: ") {
        "a pyenv shim found no Python: pass what selects it with `safety.env_passthrough: [PYENV_ROOT, PYENV_VERSION]` in the operator config"
    } else if has("No version is set for command")
        || has("asdf: ")
        || has("mise ") && has("not installed")
    {
        "a version manager's shim found no version: pass its settings with `safety.env_passthrough` (asdf: ASDF_DIR, ASDF_DATA_DIR; mise: MISE_DATA_DIR) in the operator config, or put a `.tool-versions` in the repository"
    } else if has("nvm: command not found") || has("nvm: not found") {
        "nvm is a function of your interactive shell, which checks do not load: put the node directory (`~/.nvm/versions/node/VERSION/bin`) on the PATH ybs runs with"
    } else if not_found(output).is_some() {
        "a program of the check is not on the children's PATH, which is the PATH ybs runs with (entries inside the workdir dropped): run ybs with the toolchain's `bin` directory on its PATH"
    } else if has("Read-only file system") {
        "outside the workdir and `/tmp` the sandbox is read-only (toolchain caches under your home are writable for the task only): a path that must stay writable needs `safety.sandbox_writable_paths` in the operator config"
    } else {
        return None;
    };
    Some(format!("{hint} ({TOOLCHAIN_DOCS})"))
}

/// The name of a toolchain program the shell could not find
/// (`sh: 1: cargo: not found`, `bash: node: command not found`).
fn not_found(output: &str) -> Option<&str> {
    const PROGRAMS: &[&str] = &[
        "cargo", "rustc", "rustup", "node", "npm", "npx", "pnpm", "yarn", "python", "python3",
        "pip", "pip3", "uv", "poetry", "go", "java", "mvn", "gradle", "ruby", "bundle", "make",
        "cmake", "gcc", "cc", "deno", "bun", "dotnet",
    ];
    output.lines().find_map(|line| {
        let line = line
            .strip_suffix(": command not found")
            .or_else(|| line.strip_suffix(": not found"))?;
        let name = line.rsplit(": ").next()?.trim();
        PROGRAMS.contains(&name).then_some(name)
    })
}

#[cfg(test)]
mod tests {
    use super::{not_found, toolchain_hint};

    #[test]
    fn known_toolchain_messages_get_the_setting_that_helps() {
        let rustup = "error: rustup could not choose a version of cargo to run, because one wasn't specified explicitly, and no default is configured.";
        assert!(toolchain_hint(rustup).is_some_and(|hint| hint.contains("RUSTUP_TOOLCHAIN")));
        let pyenv = "pyenv: version `3.12.1' is not installed (set by /w/.python-version)";
        assert!(toolchain_hint(pyenv).is_some_and(|hint| hint.contains("PYENV_ROOT")));
        assert!(
            toolchain_hint("No version is set for command node")
                .is_some_and(|hint| hint.contains("ASDF_DIR"))
        );
        assert!(toolchain_hint("sh: 1: nvm: not found").is_some_and(|hint| hint.contains(".nvm")));
        assert!(
            toolchain_hint("touch: cannot touch '/home/u/x': Read-only file system")
                .is_some_and(|hint| hint.contains("sandbox_writable_paths"))
        );
        assert_eq!(toolchain_hint("test tests::two ... FAILED"), None);
    }

    #[test]
    fn only_locations_inside_the_repository_are_kept() {
        use std::path::{Path, PathBuf};
        let dirs = (PathBuf::from("/r/sub"), PathBuf::from("/r"));
        let output = "lib.rs:1:1: error: a\n../top.rs:2:1: error: b\n../../etc/x.c:3:1: error: c\n/r/abs.py:4: error: d\n/elsewhere/y.py:5: error: e\n./d/../z.go:6:2: f\n";
        let files: Vec<(String, u32)> = super::locations(output, Some(&dirs))
            .into_iter()
            .map(|found| (found.file, found.line))
            .collect();
        assert_eq!(
            files,
            [
                ("sub/lib.rs".to_owned(), 1),
                ("top.rs".to_owned(), 2),
                ("abs.py".to_owned(), 4),
                ("sub/z.go".to_owned(), 6),
            ]
        );
        assert_eq!(super::inside(Path::new("/r"), Path::new("/r")), None);
        let many: String = (1..=15).map(|n| format!("a.c:{n}:1: error: x\n")).collect();
        assert_eq!(super::locations(&many, Some(&dirs)).len(), 10);
    }

    #[test]
    fn a_missing_toolchain_program_is_named() {
        assert_eq!(not_found("sh: 1: cargo: not found"), Some("cargo"));
        assert_eq!(
            not_found("bash: line 1: node: command not found"),
            Some("node")
        );
        assert_eq!(not_found("sh: 1: frobnicate: not found"), None);
        assert!(
            toolchain_hint("sh: 1: cargo: not found").is_some_and(|hint| hint.contains("PATH"))
        );
    }
}
