//! Build script: records the commit ybs is built from, for `ybs --version`.
//!
//! `YBS_BUILD_COMMIT` wins when set (a release build that knows its sha);
//! otherwise `git rev-parse --short HEAD`, and `unknown` outside git or
//! without git. Reruns only when HEAD, the branch it points to or the
//! packed refs change, not on every build.

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=YBS_BUILD_COMMIT");
    let commit = match std::env::var("YBS_BUILD_COMMIT") {
        Ok(commit) if !commit.trim().is_empty() => commit.trim().to_owned(),
        // Only this crate's own checkout counts: a source tree unpacked
        // inside some other repository is "unknown", not that repo's HEAD.
        _ if !Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists() => "unknown".to_owned(),
        _ => {
            watch_git();
            git(&["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "unknown".to_owned())
        }
    };
    println!("cargo:rustc-env=YBS_COMMIT={commit}");
}

/// Asks cargo to rerun this script when the checked-out commit moves.
fn watch_git() {
    let Some(git_dir) = git(&["rev-parse", "--git-dir"]).map(PathBuf::from) else {
        return;
    };
    let common =
        git(&["rev-parse", "--git-common-dir"]).map_or_else(|| git_dir.clone(), PathBuf::from);
    let mut watched = vec![git_dir.join("HEAD"), common.join("packed-refs")];
    if let Some(reference) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(common.join(&reference));
        watched.push(git_dir.join(&reference));
    }
    // A path that does not exist would make cargo rerun on every build.
    for path in watched.iter().filter(|path| path.is_file()) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
}

fn git(args: &[&str]) -> Option<String> {
    let output = Command::new("git")
        .args(args)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")))
        .output()
        .ok()?;
    let text = String::from_utf8(output.stdout).ok()?;
    let text = text.trim();
    (output.status.success() && !text.is_empty()).then(|| text.to_owned())
}
