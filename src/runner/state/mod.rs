//! `OUT/<task>/state.json`: what a paused task needs to go on, and the
//! HMAC that proves ybs wrote it (docs/resume.md).
//!
//! The state carries no trust: policy, config and limits are read again
//! at resume. What it carries (the conversation, the pending calls, the
//! work tree changes) is signed: `OUT/<task>/state.hmac` holds
//! HMAC-SHA256 over the exact bytes of `state.json`, keyed by
//! `$YBS_RESUME_KEY` when set (a CI secret both jobs share), else by a
//! random key made for the run and kept, mode 0600, in the user's state
//! directory (`$XDG_STATE_HOME/ybs/resume-keys/<run-id>`, or
//! `~/.local/state/ybs/resume-keys/<run-id>`), outside the repository and
//! the output directory. An edited state, or one signed by another key,
//! is refused.

mod keys;

pub use keys::{
    Key, already_used, fresh_key, key_dir, key_text, mark_used, signing_key, verifying_key,
    was_used,
};

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::agent::loop_guard::LoopGuard;
use crate::core::event::PendingCall;
use crate::core::text::{hex, unhex};
use crate::core::{Cost, Message, Usage};
use crate::git::{GitError, Snapshot, WorkEntry, WorkRoot, Workspace};

/// The state file inside `OUT/<task>/`.
pub const STATE_FILE: &str = "state.json";
/// Its HMAC, hex, inside `OUT/<task>/`.
pub const MAC_FILE: &str = "state.hmac";
/// The version of the `state.json` format.
pub const STATE_VERSION: u32 = 1;
/// The environment variable holding the signing key.
pub const KEY_VARIABLE: &str = "YBS_RESUME_KEY";
/// At most this many bytes of work tree changes are carried.
const MAX_CARRIED_BYTES: usize = 64 << 20;

/// `OUT/<task>/state.json`. Paths are relative; nothing in it is trusted
/// beyond what its signature proves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct State {
    pub schema_version: u32,
    /// The run that paused (and names the local key).
    pub run_id: String,
    pub task: StateTask,
    /// The policy's hash when the task paused: a different one at resume
    /// is refused unless `--allow-changed`.
    pub policy_hash: String,
    /// The commit the task started from; the checkout must be at it.
    pub base_commit: Option<String>,
    /// The task's workdir, relative to the directory ybs ran in (`.`).
    pub workdir: String,
    /// Which key signed the state: `env` (`$YBS_RESUME_KEY`) or `local`
    /// (the per-run key file).
    pub key: String,
    /// How many times the task paused, this one included.
    pub pauses: u32,
    pub spent: Spent,
    /// The conversation so far; the last assistant turn holds the
    /// pending calls.
    pub messages: Vec<Message>,
    /// What the task waits for: every one must be answered.
    pub pending: Vec<PendingCall>,
    /// Files the task's tools changed, relative to the workdir.
    pub changed: Vec<String>,
    /// The repository at task start and the work tree changes since;
    /// `null` outside a repository.
    pub git: Option<StateGit>,
    /// `sha256:<hex>` of `OUT/<task>/events.jsonl` when the task paused;
    /// the transcript of the resumed task goes on from those events.
    pub events_sha256: String,
    /// The loop guard as the pause left it: the calls after the resume
    /// count on from the ones before (absent in older states: a fresh
    /// count).
    #[serde(default)]
    pub loop_guard: LoopGuard,
    /// Whether the 85% wrap-up warning was given before the pause: it is
    /// given once per task, not once per half.
    #[serde(default)]
    pub wrap_up_warned: bool,
    /// `--jobs`: the task's own worktree, which the task goes on in;
    /// `null` when it ran in the checkout.
    #[serde(default)]
    pub worktree: Option<StateWorktree>,
    /// The run was `--no-commit` (or `--scratch`): `ybs resume` commits
    /// nothing either.
    #[serde(default)]
    pub no_commit: bool,
    /// The run was `--scratch`: `ybs resume` goes on in a new temporary
    /// copy of the directory it runs in, never in the checkout.
    #[serde(default)]
    pub scratch: bool,
}

/// The worktree a task paused in under `--jobs` (docs/git.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateWorktree {
    /// Relative to the repository root: `.ybs-worktrees/<run-id>/<task-id>`.
    pub path: String,
    /// `ybs/<run-id>/<task-id>`: the task's commit goes there.
    pub branch: String,
}

/// The task, as `ybs resume` finds it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateTask {
    pub id: String,
    /// Relative to the directory ybs ran in, `/`-separated.
    pub file: String,
    /// `sha256:<hex>` of the task file: a different one at resume is
    /// refused unless `--allow-changed`.
    pub file_sha256: String,
}

/// What the paused halves spent; limits count it at resume.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Spent {
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    /// Running time, not the time spent paused.
    pub elapsed_ms: u64,
}

/// The git side of a paused task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StateGit {
    /// The repository at task start (HEAD, base, the user's dirty paths,
    /// the ignore rules), as the commit after resume needs it.
    pub snapshot: serde_json::Value,
    /// The work tree changes made before the pause, re-applied on a clean
    /// checkout of the base commit.
    pub files: Vec<CarriedFile>,
}

/// One path changed before the pause, relative to the repository root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CarriedFile {
    pub path: String,
    pub content: Carried,
}

/// What is at a carried path.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Carried {
    /// A regular file: `text` when it is UTF-8, else `hex`.
    File {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        hex: Option<String>,
        executable: bool,
    },
    Symlink {
        target: String,
    },
    Deleted,
}

/// `ybs schema state`: the JSON Schema of `state.json`.
pub fn schema() -> serde_json::Value {
    let mut schema = crate::report::schema::root::<State>(
        "ybs paused state",
        "OUT/<task-id>/state.json: what a paused task needs to go on with `ybs resume` (docs/resume.md). Signed: OUT/<task-id>/state.hmac holds HMAC-SHA256 of the file's exact bytes; an edited state is refused.",
    );
    if let Some(version) = schema.pointer_mut("/properties/schema_version") {
        *version = serde_json::json!({
            "description": "The version of the state format.",
            "const": STATE_VERSION,
        });
    }
    schema
}

/// Why a state cannot be written or used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateError {
    pub message: String,
    pub hint: Option<String>,
}

impl StateError {
    fn new(message: impl Into<String>, hint: Option<&str>) -> Self {
        Self {
            message: message.into(),
            hint: hint.map(str::to_owned),
        }
    }
}

/// `sha256:<hex>`.
pub fn sha256(bytes: &[u8]) -> String {
    format!("sha256:{}", hex(&Sha256::digest(bytes)))
}

/// `path` relative to `base`, `/`-separated, `.` for `base` itself;
/// `None` when it is not inside.
pub fn relative(path: &Path, base: &Path) -> Option<String> {
    let rest = path.strip_prefix(base).ok()?;
    let parts: Vec<String> = rest
        .components()
        .filter(|part| !matches!(part, Component::CurDir))
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    Some(if parts.is_empty() {
        ".".to_owned()
    } else {
        parts.join("/")
    })
}

/// A relative path from a state: plain components only (no `..`, no
/// root), so nothing it names is outside `base`.
pub fn inside(base: &Path, relative: &str) -> Result<PathBuf, StateError> {
    let path = Path::new(relative);
    let plain = path
        .components()
        .all(|part| matches!(part, Component::Normal(_) | Component::CurDir));
    if !plain || relative.is_empty() {
        return Err(StateError::new(
            format!("the state names a path outside the repository: `{relative}`"),
            None,
        ));
    }
    Ok(base.join(path))
}

/// Why a paused task's work tree changes cannot be carried in its state.
#[derive(Debug, thiserror::Error)]
pub enum CaptureError {
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{0} is an untracked directory; the paused state carries files only")]
    Directory(String),
    #[error("{0} is not a regular file")]
    Special(String),
    #[error(
        "the work tree changes pass {} MiB, more than a paused state carries",
        MAX_CARRIED_BYTES >> 20
    )]
    TooLarge,
}

/// The work tree changes since `snapshot` (the user's dirty paths at
/// the start excluded), to carry in the state.
pub fn capture(
    workspace: &Workspace,
    snapshot: &Snapshot,
) -> Result<Vec<CarriedFile>, CaptureError> {
    let dirty = workspace.dirty_paths()?;
    let work = WorkRoot::open(workspace.root())?;
    let mut files = Vec::new();
    let mut total = 0usize;
    for path in dirty {
        if snapshot.dirty.iter().any(|user| user.path == path.path) {
            continue;
        }
        // Read once, beneath the work tree, never through a link.
        let entry = work.read(&path.path, MAX_CARRIED_BYTES as u64)?;
        let content = match entry {
            WorkEntry::Absent => Carried::Deleted,
            WorkEntry::Symlink(target) => Carried::Symlink {
                target: String::from_utf8_lossy(&target).into_owned(),
            },
            WorkEntry::File { bytes, executable } => {
                total += bytes.len();
                match String::from_utf8(bytes) {
                    Ok(text) => Carried::File {
                        text: Some(text),
                        hex: None,
                        executable,
                    },
                    Err(error) => Carried::File {
                        text: None,
                        hex: Some(hex(error.as_bytes())),
                        executable,
                    },
                }
            }
            // A directory (an untracked one is listed whole) or a special file.
            WorkEntry::Directory => return Err(CaptureError::Directory(path.path)),
            WorkEntry::TooLarge { .. } => return Err(CaptureError::TooLarge),
            WorkEntry::Special => return Err(CaptureError::Special(path.path)),
        };
        if total > MAX_CARRIED_BYTES {
            return Err(CaptureError::TooLarge);
        }
        files.push(CarriedFile {
            path: path.path,
            content,
        });
    }
    Ok(files)
}

/// Whether `full` holds what `carried` says.
fn holds(full: &Path, carried: &Carried) -> bool {
    let meta = fs::symlink_metadata(full);
    match carried {
        Carried::Deleted => meta.is_err(),
        Carried::Symlink { target } => {
            meta.is_ok_and(|meta| meta.file_type().is_symlink())
                && fs::read_link(full).is_ok_and(|link| link == Path::new(target))
        }
        Carried::File { text, hex, .. } => {
            let want = match (text, hex) {
                (Some(text), _) => Some(text.as_bytes().to_vec()),
                (None, Some(hex)) => unhex(hex),
                (None, None) => None,
            };
            meta.is_ok_and(|meta| meta.is_file()) && fs::read(full).ok() == want
        }
    }
}

/// Brings the work tree to the paused task's: HEAD must be the base
/// commit; each carried path must hold its content already (the same
/// checkout) or be unchanged from HEAD (a fresh one), and nothing else
/// may have changed but the user's paths of the start.
pub fn restore(
    workspace: &Workspace,
    snapshot: &Snapshot,
    files: &[CarriedFile],
) -> Result<(), StateError> {
    let now = workspace
        .snapshot()
        .map_err(|error| StateError::new(format!("git: {error}"), None))?;
    if now.base != snapshot.base {
        return Err(StateError::new(
            format!(
                "the checkout is at commit {}, the paused task started from {}",
                now.base.as_deref().unwrap_or("(none)"),
                snapshot.base.as_deref().unwrap_or("(none)")
            ),
            Some("check out the commit the paused run started from, then resume"),
        ));
    }
    let carried = |path: &str| files.iter().find(|file| file.path == path);
    let users = |path: &str| snapshot.dirty.iter().any(|user| user.path == path);
    let mut apply = Vec::new();
    for file in files {
        let full = inside(workspace.root(), &file.path)?;
        if holds(&full, &file.content) {
            continue;
        }
        if now.dirty.iter().any(|dirty| dirty.path == file.path) {
            return Err(StateError::new(
                format!("`{}` has changes that are not the paused task's", file.path),
                Some(
                    "resume from a clean checkout of the base commit, or from the work tree the run paused in",
                ),
            ));
        }
        apply.push((full, &file.content));
    }
    let stray: Vec<&str> = now
        .dirty
        .iter()
        .map(|dirty| dirty.path.as_str())
        .filter(|path| carried(path).is_none() && !users(path))
        .collect();
    if !stray.is_empty() {
        return Err(StateError::new(
            format!(
                "the work tree has changes the paused task did not make: {}",
                stray.join(", ")
            ),
            Some("commit or stash them first, or resume from a clean checkout"),
        ));
    }
    for (full, content) in apply {
        write_carried(&full, content).map_err(|error| {
            StateError::new(format!("cannot restore {}: {error}", full.display()), None)
        })?;
    }
    Ok(())
}

fn write_carried(full: &Path, content: &Carried) -> std::io::Result<()> {
    if let Some(parent) = full.parent() {
        fs::create_dir_all(parent)?;
    }
    match content {
        Carried::Deleted => match fs::remove_file(full) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(error),
            _ => Ok(()),
        },
        Carried::Symlink { target } => {
            let _ = fs::remove_file(full);
            std::os::unix::fs::symlink(target, full)
        }
        Carried::File {
            text,
            hex,
            executable,
        } => {
            let bytes = match (text, hex) {
                (Some(text), _) => text.as_bytes().to_vec(),
                (None, Some(hex)) => {
                    unhex(hex).ok_or_else(|| std::io::Error::other("bad hex content"))?
                }
                (None, None) => Vec::new(),
            };
            // Never through a link planted at the path.
            if fs::symlink_metadata(full).is_ok_and(|meta| meta.file_type().is_symlink()) {
                fs::remove_file(full)?;
            }
            fs::write(full, bytes)?;
            let mode = if *executable { 0o755 } else { 0o644 };
            fs::set_permissions(full, fs::Permissions::from_mode(mode))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::keys::hmac_sha256;
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        // Test case 2.
        let mac = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&mac),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        // Test case 6: a key longer than the block.
        let mac = hmac_sha256(
            &[0xaa; 131],
            b"Test Using Larger Than Block-Size Key - Hash Key First",
        );
        assert_eq!(
            hex(&mac),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn a_key_verifies_its_own_mac_only() {
        let key = Key {
            bytes: b"k1".to_vec(),
            source: "env",
        };
        let other = Key {
            bytes: b"k2".to_vec(),
            source: "env",
        };
        let mac = key.sign(b"state");
        assert!(key.verify(b"state", &mac));
        assert!(!key.verify(b"state!", &mac));
        assert!(!other.verify(b"state", &mac));
        assert!(!key.verify(b"state", "zz"));
    }

    #[test]
    fn local_keys_are_private_and_reused() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().display().to_string();
        let env = move |name: &str| (name == "HOME").then(|| home.clone());
        let key = signing_key("run-1", &env, None).unwrap();
        let path = dir.path().join(".local/state/ybs/resume-keys/run-1");
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let again = verifying_key("run-1", "local", &env).unwrap();
        assert!(again.verify(b"x", &key.sign(b"x")));
        let missing = verifying_key("run-2", "local", &env).err().unwrap();
        assert!(missing.message.contains("cannot be read"), "{missing:?}");
        assert!(signing_key("../x", &env, None).is_err());
        // A key made when the run started is the one written.
        let fresh = fresh_key(&env).unwrap();
        assert_eq!(fresh.len(), 64);
        let key = signing_key("run-3", &env, Some(&fresh)).unwrap();
        assert_eq!(key.bytes, fresh.as_bytes());
        assert_eq!(key_text("run-3", "local", &env), Some(fresh));
    }

    #[test]
    fn a_state_without_the_later_fields_still_loads() {
        let state = State {
            schema_version: STATE_VERSION,
            run_id: "run-1".into(),
            task: StateTask {
                id: "t".into(),
                file: "t.yaml".into(),
                file_sha256: sha256(b"x"),
            },
            policy_hash: "p".into(),
            base_commit: None,
            workdir: ".".into(),
            key: "local".into(),
            pauses: 1,
            spent: Spent {
                iterations: 2,
                usage: Usage::default(),
                cost: Cost::Unknown,
                elapsed_ms: 5,
            },
            messages: Vec::new(),
            pending: Vec::new(),
            changed: Vec::new(),
            git: None,
            events_sha256: sha256(b""),
            loop_guard: LoopGuard {
                last: Some(sha256(b"read_file({})")),
                count: 2,
            },
            wrap_up_warned: true,
            worktree: None,
            no_commit: false,
            scratch: false,
        };
        let mut value = serde_json::to_value(&state).unwrap();
        let back: State = serde_json::from_value(value.clone()).unwrap();
        assert_eq!(back, state);
        for field in ["loop_guard", "wrap_up_warned", "worktree"] {
            value.as_object_mut().unwrap().remove(field);
        }
        let old: State = serde_json::from_value(value).unwrap();
        assert_eq!(old.loop_guard, LoopGuard::default());
        assert!(!old.wrap_up_warned);
        assert_eq!(old.spent, state.spent);
    }

    #[test]
    fn state_paths_stay_inside() {
        let base = Path::new("/repo");
        assert_eq!(inside(base, "a/b").unwrap(), Path::new("/repo/a/b"));
        assert!(inside(base, "../x").is_err());
        assert!(inside(base, "/etc/passwd").is_err());
        assert_eq!(relative(Path::new("/repo/a/b"), base).unwrap(), "a/b");
        assert_eq!(relative(base, base).unwrap(), ".");
    }
}
