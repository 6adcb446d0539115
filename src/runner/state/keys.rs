//! The keys that sign a paused task's state: `$YBS_RESUME_KEY`, or one
//! made for the run and kept in the user's state directory; and the
//! record of states already resumed, so none is resumed twice.

use std::fs;
use std::io::{Read as _, Write as _};
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

use hmac::{Hmac, KeyInit, Mac as _};
use sha2::Sha256;

use crate::core::text::{hex, unhex};

use super::{KEY_VARIABLE, StateError};

/// HMAC-SHA256 (RFC 2104) of `message` under `key`, ready to finish or
/// to verify (the `hmac` crate: its verification compares in constant
/// time).
#[expect(
    clippy::expect_used,
    reason = "HMAC takes a key of any length: `new_from_slice` cannot fail"
)]
fn hmac_of(key: &[u8], message: &[u8]) -> Hmac<Sha256> {
    let mut mac =
        <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC accepts a key of any length");
    mac.update(message);
    mac
}

/// HMAC-SHA256 (RFC 2104).
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    hmac_of(key, message).finalize().into_bytes().into()
}

/// The signing key and where it came from.
pub struct Key {
    pub(super) bytes: Vec<u8>,
    pub source: &'static str,
}

impl Key {
    pub fn sign(&self, state: &[u8]) -> String {
        hex(&hmac_sha256(&self.bytes, state))
    }

    /// True if and only if `mac` (hex) is this key's HMAC of `state`.
    pub fn verify(&self, state: &[u8], mac: &str) -> bool {
        unhex(mac.trim()).is_some_and(|mac| hmac_of(&self.bytes, state).verify_slice(&mac).is_ok())
    }
}

/// Where per-run keys are kept: `$XDG_STATE_HOME/ybs/resume-keys`, else
/// `~/.local/state/ybs/resume-keys`.
pub fn key_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let base = env("XDG_STATE_HOME")
        .filter(|dir| Path::new(dir).is_absolute())
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|home| Path::new(&home).join(".local/state")))?;
    Some(base.join("ybs").join("resume-keys"))
}

/// Where the ids of states already resumed are recorded, beside the
/// keys: `<key dir>/.used/` (a name no run id can take).
fn used_dir(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    key_dir(env).map(|dir| dir.join(".used"))
}

/// The file recording `state_id` (`sha256:<hex>` of a `state.json`) as used.
fn used_name(state_id: &str) -> String {
    state_id
        .strip_prefix("sha256:")
        .unwrap_or(state_id)
        .chars()
        .filter(char::is_ascii_hexdigit)
        .collect()
}

/// Whether the state `state_id` was resumed already on this machine and
/// user (docs/resume.md: a state is single-use).
pub fn was_used(state_id: &str, env: &dyn Fn(&str) -> Option<String>) -> bool {
    used_dir(env).is_some_and(|dir| dir.join(used_name(state_id)).exists())
}

/// Records the state `state_id` as used, once: a second record (a
/// restored copy resumed again, or two resumes at once) is an error.
/// Also with `$YBS_RESUME_KEY`, when no key file is kept.
pub fn mark_used(
    state_id: &str,
    run_id: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), StateError> {
    let dir = used_dir(env).ok_or_else(|| {
        StateError::new(
            "cannot record the paused state as resumed: neither XDG_STATE_HOME nor HOME is set",
            Some("set HOME or XDG_STATE_HOME: a paused state is resumed once, and ybs records it there"),
        )
    })?;
    let failed = |error: std::io::Error| {
        StateError::new(
            format!(
                "cannot record the paused state as resumed in {}: {error}",
                dir.display()
            ),
            Some("make the state directory writable"),
        )
    };
    fs::create_dir_all(&dir).map_err(failed)?;
    if let Some(keys) = dir.parent() {
        let _ = fs::set_permissions(keys, fs::Permissions::from_mode(0o700));
    }
    let path = dir.join(used_name(state_id));
    let mut file = match fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return Err(already_used(state_id));
        }
        Err(error) => return Err(failed(error)),
    };
    file.write_all(format!("{run_id}\n").as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)
}

/// The error for a state resumed before.
pub fn already_used(state_id: &str) -> StateError {
    StateError::new(
        format!(
            "this paused state ({state_id}) was resumed already; a state is resumed once, and a copy of it is refused"
        ),
        Some(
            "resume the state the last resume left (if the task paused again), or run the task again",
        ),
    )
}

/// A new run key, hex (32 random bytes): made when the run starts, so
/// the redactor masks it from the first output on (a confined program
/// never sees the key file, but a `--no-sandbox` one could), and written
/// only if a task pauses ([`signing_key`]). `None` when `$YBS_RESUME_KEY`
/// signs instead (masked as a withheld variable) or no randomness is to
/// be had (the key is then made at the pause).
pub fn fresh_key(env: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if env_key(env).is_some() {
        return None;
    }
    let mut random = [0u8; 32];
    fs::File::open("/dev/urandom")
        .and_then(|mut file| file.read_exact(&mut random))
        .ok()?;
    Some(hex(&random))
}

/// The text of the key that checks a state signed by `signed_by` for
/// `run_id`, when there is one: for the redactor of `ybs resume`.
pub fn key_text(
    run_id: &str,
    signed_by: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Option<String> {
    verifying_key(run_id, signed_by, env)
        .ok()
        .map(|key| String::from_utf8_lossy(&key.bytes).into_owned())
}

/// The key a paused run signs with: `$YBS_RESUME_KEY`, else the run's own
/// key, written now (`fresh`, the one [`fresh_key`] made when the run
/// started, or 32 new random bytes; mode 0600) if it does not exist.
pub fn signing_key(
    run_id: &str,
    env: &dyn Fn(&str) -> Option<String>,
    fresh: Option<&str>,
) -> Result<Key, StateError> {
    if let Some(key) = env_key(env) {
        return Ok(key);
    }
    let dir = key_dir(env).ok_or_else(|| {
        StateError::new(
            "cannot keep the resume key: neither XDG_STATE_HOME nor HOME is set",
            Some("set YBS_RESUME_KEY"),
        )
    })?;
    let path = dir.join(key_name(run_id)?);
    if let Ok(bytes) = read_key_file(&path) {
        return Ok(Key {
            bytes,
            source: "local",
        });
    }
    let failed = |error: std::io::Error| {
        StateError::new(
            format!("cannot write the resume key {}: {error}", path.display()),
            Some("set YBS_RESUME_KEY, or make the state directory writable"),
        )
    };
    fs::create_dir_all(&dir).map_err(failed)?;
    let _ = fs::set_permissions(&dir, fs::Permissions::from_mode(0o700));
    let text = match fresh {
        Some(text) => text.to_owned(),
        None => {
            let mut random = [0u8; 32];
            fs::File::open("/dev/urandom")
                .and_then(|mut file| file.read_exact(&mut random))
                .map_err(failed)?;
            hex(&random)
        }
    };
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(failed)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(failed)?;
    Ok(Key {
        bytes: text.into_bytes(),
        source: "local",
    })
}

/// The key to check a state of `run_id` with: `$YBS_RESUME_KEY`, else
/// the run's key file. A missing key is an error with the way out.
pub fn verifying_key(
    run_id: &str,
    signed_by: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Key, StateError> {
    if let Some(key) = env_key(env) {
        return Ok(key);
    }
    let missing = |detail: String| {
        StateError::new(
            format!("cannot check the paused state: {detail}"),
            Some(if signed_by == "env" {
                "the paused run signed it with YBS_RESUME_KEY: set the same YBS_RESUME_KEY for `ybs resume`"
            } else {
                "resume on the machine and user that paused the run (its key is in the user's state directory), or run both with the same YBS_RESUME_KEY"
            }),
        )
    };
    let dir = key_dir(env)
        .ok_or_else(|| missing("YBS_RESUME_KEY is not set, nor XDG_STATE_HOME or HOME".into()))?;
    let path = dir.join(key_name(run_id)?);
    let bytes = read_key_file(&path).map_err(|error| {
        missing(format!(
            "YBS_RESUME_KEY is not set and the run's key {} cannot be read: {error}",
            path.display()
        ))
    })?;
    Ok(Key {
        bytes,
        source: "local",
    })
}

fn env_key(env: &dyn Fn(&str) -> Option<String>) -> Option<Key> {
    env(KEY_VARIABLE)
        .filter(|key| !key.is_empty())
        .map(|key| Key {
            bytes: key.into_bytes(),
            source: "env",
        })
}

/// The key file's name: the run id, which must be a plain name.
fn key_name(run_id: &str) -> Result<&str, StateError> {
    let plain = !run_id.is_empty()
        && run_id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if plain {
        Ok(run_id)
    } else {
        Err(StateError::new(
            format!("the state names an invalid run id `{run_id}`"),
            None,
        ))
    }
}

fn read_key_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let bytes = fs::read(path)?;
    let text = String::from_utf8_lossy(&bytes).trim().to_owned();
    if text.is_empty() {
        return Err(std::io::Error::other("the key file is empty"));
    }
    Ok(text.into_bytes())
}
