//! The probe's answer, kept for the rest of the boot (docs/sandbox.md,
//! "The probe"): running `ybs __sandbox-probe` costs an exec of the
//! binary and two forks on every start, and its answer only changes with
//! the kernel, the binary or the user.
//!
//! Only a probe that found every layer working is kept, in
//! `sandbox-probe.json` in ybs's cache directory (hidden from every
//! confined program), with the key it holds for: the boot id, the kernel
//! release, the binary's device, inode, size and modification time, the
//! effective user and its user namespace. Any difference, a file that is
//! not the user's own or that others may write, or anything unreadable,
//! and the probe runs again. A kept answer can only be stale in the safe
//! direction: if a layer stopped working since, the helper fails to
//! apply it and the command fails; no layer is ever skipped because of
//! this file, and a failed probe is never kept.

use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::Probe;

/// The file, in ybs's cache directory.
pub const FILE: &str = "sandbox-probe.json";

/// Larger than any file this module writes.
const MAX_BYTES: u64 = 4096;

/// What the kept answer holds for (see the module doc).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key(String);

impl Key {
    /// This process's key, or `None` when any part cannot be read (then
    /// nothing is kept or used).
    pub fn current() -> Option<Self> {
        let boot = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
        // The running binary, even if its file was replaced since.
        let exe = std::fs::metadata("/proc/self/exe").ok()?;
        let user_ns = std::fs::metadata("/proc/self/ns/user").ok()?;
        Some(Self::of(
            boot.trim(),
            release.trim(),
            &exe,
            nix::unistd::geteuid().as_raw(),
            user_ns.ino(),
        ))
    }

    fn of(boot: &str, release: &str, exe: &std::fs::Metadata, uid: u32, user_ns: u64) -> Self {
        Self(format!(
            "boot={boot} kernel={release} exe={}:{}:{}:{}.{} uid={uid} userns={user_ns}",
            exe.dev(),
            exe.ino(),
            exe.size(),
            exe.mtime(),
            exe.mtime_nsec(),
        ))
    }
}

/// The kept answer for `key` in `dir`, if there is a sound one.
pub fn load(dir: &Path, key: &Key) -> Option<Probe> {
    let path = dir.join(FILE);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&path)
        .ok()?;
    let metadata = file.metadata().ok()?;
    let own = metadata.uid() == nix::unistd::geteuid().as_raw();
    let others_may_write = metadata.permissions().mode() & 0o022 != 0;
    if !metadata.is_file() || !own || others_may_write || metadata.len() > MAX_BYTES {
        return None;
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::Read::take(file, MAX_BYTES), &mut text).ok()?;
    parse(&text, key)
}

fn parse(text: &str, key: &Key) -> Option<Probe> {
    let value: serde_json::Value = serde_json::from_str(text).ok()?;
    if value["key"].as_str() != Some(key.0.as_str()) {
        return None;
    }
    let landlock = match value["landlock"].as_str()? {
        "fully_enforced" => "fully_enforced",
        "partially_enforced" => "partially_enforced",
        _ => return None,
    };
    // Absent from a file of an older ybs: probe again.
    let exec_guard = match value.as_object()?.get("exec_guard")? {
        serde_json::Value::Null => Ok(()),
        serde_json::Value::String(reason) => Err(reason.clone()),
        _ => return None,
    };
    Some(Probe {
        namespaces: Ok(()),
        landlock: Ok(landlock),
        seccomp: Ok(()),
        exec_guard,
    })
}

fn render(probe: &Probe, key: &Key) -> Option<String> {
    match probe {
        Probe {
            namespaces: Ok(()),
            landlock: Ok(landlock),
            seccomp: Ok(()),
            exec_guard,
        } => Some(
            serde_json::json!({
                "key": key.0,
                "landlock": landlock,
                "exec_guard": exec_guard.as_ref().err(),
            })
            .to_string(),
        ),
        _ => None,
    }
}

/// Keeps `probe` for `key` in `dir` when every layer worked; a best
/// effort: a failure only means the next start probes again.
pub fn store(dir: &Path, key: &Key, probe: &Probe) {
    let Some(text) = render(probe, key) else {
        return;
    };
    let _ = write(dir, &text);
}

/// Writes a private temp file next to the target and renames it over,
/// so a reader sees the old file or the new one, never half of one.
fn write(dir: &Path, text: &str) -> std::io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let temp: PathBuf = dir.join(format!(".{FILE}.{}.tmp", std::process::id()));
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(nix::libc::O_NOFOLLOW)
        .open(&temp)?;
    let written = file
        .write_all(text.as_bytes())
        .and_then(|()| std::fs::rename(&temp, dir.join(FILE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    written
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(boot: &str) -> Key {
        let exe = std::fs::metadata("/").unwrap();
        Key::of(boot, "6.1.0", &exe, 1000, 4_026_531_837)
    }

    fn working(landlock: &'static str) -> Probe {
        Probe {
            namespaces: Ok(()),
            landlock: Ok(landlock),
            seccomp: Ok(()),
            exec_guard: Ok(()),
        }
    }

    #[test]
    fn a_kept_answer_is_used_for_the_same_key_only() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path(), &key("a"), &working("partially_enforced"));
        assert_eq!(
            load(dir.path(), &key("a")),
            Some(working("partially_enforced"))
        );
        assert_eq!(load(dir.path(), &key("b")), None);
    }

    #[test]
    fn a_failed_probe_is_never_kept() {
        let dir = tempfile::tempdir().unwrap();
        let failed = Probe {
            namespaces: Err("no user namespaces".to_owned()),
            landlock: Ok("fully_enforced"),
            seccomp: Ok(()),
            exec_guard: Ok(()),
        };
        store(dir.path(), &key("a"), &failed);
        assert!(!dir.path().join(FILE).exists());
        store(dir.path(), &key("a"), &working("fully_enforced"));
        store(dir.path(), &key("a"), &failed);
        assert_eq!(load(dir.path(), &key("a")), Some(working("fully_enforced")));
    }

    #[test]
    fn a_file_others_may_write_or_a_link_is_not_trusted() {
        let dir = tempfile::tempdir().unwrap();
        store(dir.path(), &key("a"), &working("fully_enforced"));
        let path = dir.path().join(FILE);
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert_eq!(load(dir.path(), &key("a")), None);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::rename(&path, dir.path().join("real")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("real"), &path).unwrap();
        assert_eq!(load(dir.path(), &key("a")), None);
    }

    #[test]
    fn garbage_and_unknown_statuses_are_ignored() {
        let k = key("a");
        assert_eq!(parse("not json", &k), None);
        let unknown = serde_json::json!({"key": k.0, "landlock": "off"}).to_string();
        assert_eq!(parse(&unknown, &k), None);
        // A file of an older ybs, without the exec guard: probe again.
        let old = serde_json::json!({"key": k.0, "landlock": "fully_enforced"}).to_string();
        assert_eq!(parse(&old, &k), None);
        let fine =
            serde_json::json!({"key": k.0, "landlock": "fully_enforced", "exec_guard": null})
                .to_string();
        assert_eq!(parse(&fine, &k), Some(working("fully_enforced")));
        let without_guard = Probe {
            exec_guard: Err("Linux 5.4".to_owned()),
            ..working("fully_enforced")
        };
        let dir = tempfile::tempdir().unwrap();
        store(dir.path(), &k, &without_guard);
        assert_eq!(load(dir.path(), &k), Some(without_guard));
    }

    #[test]
    fn the_current_key_names_this_binary() {
        let key = Key::current().unwrap();
        let exe = std::fs::metadata("/proc/self/exe").unwrap();
        assert!(key.0.contains(&format!(":{}:", exe.ino())), "{key:?}");
    }
}
