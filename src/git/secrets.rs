//! No credential in a commit (docs/security.md S7, S12): every file a
//! commit would take is read once ([`super::WorkRoot::read`]), and one
//! whose content has the shape of a credential is never written as a
//! blob and stops the commit (reason `secret_in_commit`), unless the
//! operator allowed its path (`git.allow_secret_paths`). The bytes
//! scanned are the bytes stored. The shapes are the redactor's
//! ([`credential_kind`]).

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::beneath::WorkEntry;
use crate::core::redact::credential_kind;

/// A file that holds a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretFile {
    /// Repository-relative.
    pub path: String,
    /// What it looks like, e.g. `github_token`.
    pub kind: &'static str,
}

/// The operator's `git.allow_secret_paths`: globs of repository-relative
/// paths that may be committed whatever they hold.
pub(crate) fn allowed(patterns: &[String]) -> GlobSet {
    let mut builder = GlobSetBuilder::new();
    for pattern in patterns {
        // Config validation rejects bad globs; one that slips through
        // allows nothing.
        if let Ok(glob) = Glob::new(pattern) {
            builder.add(glob);
        }
    }
    builder.build().unwrap_or_else(|_| GlobSet::empty())
}

/// The kind of credential `entry` (what [`super::WorkRoot::read`] found
/// at the repository-relative `path`) would put into a commit, unless
/// `allow`ed: its path is committed too, and a symlink's target is its
/// blob, so either holding a credential counts the same. The bytes
/// judged are the bytes the caller then stores. Deleted files and
/// directories hold nothing to commit here.
pub(crate) fn credential_in(
    path: &str,
    entry: &WorkEntry,
    allow: &GlobSet,
) -> Option<&'static str> {
    if allow.is_match(path) {
        return None;
    }
    if let Some(kind) = credential_kind(path) {
        return Some(kind);
    }
    match entry {
        WorkEntry::Symlink(target) => credential_kind(&String::from_utf8_lossy(target)),
        WorkEntry::File { bytes, .. } => credential_kind(&String::from_utf8_lossy(bytes)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> WorkEntry {
        WorkEntry::File {
            bytes: text.as_bytes().to_vec(),
            executable: false,
        }
    }

    #[test]
    fn files_are_judged_by_the_shared_detector() {
        let none = allowed(&[]);
        for (text, kind) in [
            (
                "token = ghp_abcdefghijklmnopqrstuvwxyz0123456789",
                Some("github_token"),
            ),
            (
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3Bl\n",
                Some("private_key"),
            ),
            (
                "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
                Some("aws_access_key"),
            ),
            ("fn main() {}\nlet prefix = \"ghp_xxx\";\n", None),
        ] {
            assert_eq!(credential_in("f", &file(text), &none), kind, "{text}");
        }
    }

    #[test]
    fn a_credential_deep_in_a_big_file_is_found() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let mut text = "x".repeat((1 << 20) - 10);
        text.push(' ');
        text.push_str(token);
        text.push('\n');
        text.push_str(&"y".repeat(3 << 20));
        let none = allowed(&[]);
        assert_eq!(
            credential_in("big.txt", &file(&text), &none),
            Some("github_token")
        );
        assert_eq!(
            credential_in("big.txt", &file(&"z".repeat(3 << 20)), &none),
            None
        );
    }

    #[test]
    fn a_credential_in_a_name_or_a_link_target_is_found() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let none = allowed(&[]);
        assert_eq!(
            credential_in(&format!("n-{token}"), &file(""), &none),
            Some("github_token")
        );
        assert_eq!(
            credential_in(
                "link",
                &WorkEntry::Symlink(token.as_bytes().to_vec()),
                &none
            ),
            Some("github_token")
        );
        assert_eq!(
            credential_in("plain", &WorkEntry::Symlink(b"README".to_vec()), &none),
            None
        );
        assert_eq!(credential_in("gone", &WorkEntry::Absent, &none), None);
    }

    #[test]
    fn allowed_globs_skip_files() {
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let allow = allowed(&["fixtures/**".to_owned()]);
        assert_eq!(
            credential_in("fixtures/fake.txt", &file(token), &allow),
            None
        );
        assert_eq!(
            credential_in("real.txt", &file(token), &allow),
            Some("github_token")
        );
    }
}
