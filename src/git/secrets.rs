//! No credential in a commit (docs/security.md S7, S12): every file a commit would
//! take is read before anything is written, and one whose content has the
//! shape of a credential stops the commit (reason `secret_in_commit`),
//! unless the operator allowed its path (`git.allow_secret_paths`). The
//! shapes are the redactor's ([`credential_kind`]).

use std::io::Read;
use std::path::Path;

use globset::{Glob, GlobSet, GlobSetBuilder};

use super::GitError;
use crate::core::redact::credential_kind;

/// How much of a file is read at once; chunks overlap by [`OVERLAP`] so a
/// credential across a chunk boundary is still seen whole.
const CHUNK: usize = 1 << 20;
const OVERLAP: usize = 4096;

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

/// The files among `paths` (repository-relative, under `root`) whose
/// content looks like a credential, `allow`ed paths aside. A path is
/// committed too, and a symlink's target is its blob: either holding a
/// credential counts the same. Deleted files and directories hold
/// nothing else to commit here.
pub(crate) fn scan(
    root: &Path,
    paths: &[String],
    allow: &GlobSet,
) -> Result<Vec<SecretFile>, GitError> {
    let mut found = Vec::new();
    for path in paths {
        if allow.is_match(path) {
            continue;
        }
        let absolute = root.join(path);
        let meta = std::fs::symlink_metadata(&absolute).ok();
        let target = meta
            .as_ref()
            .filter(|meta| meta.file_type().is_symlink())
            .and_then(|_| std::fs::read_link(&absolute).ok());
        let named = credential_kind(path).or_else(|| {
            target
                .as_ref()
                .and_then(|target| credential_kind(&target.to_string_lossy()))
        });
        if let Some(kind) = named {
            found.push(SecretFile {
                path: path.clone(),
                kind,
            });
            continue;
        }
        if !meta.is_some_and(|meta| meta.is_file()) {
            continue;
        }
        if let Some(kind) = file_credential(&absolute)? {
            found.push(SecretFile {
                path: path.clone(),
                kind,
            });
        }
    }
    Ok(found)
}

/// The kind of the first credential in the file, read in bounded chunks.
fn file_credential(path: &Path) -> Result<Option<&'static str>, GitError> {
    let mut file = std::fs::File::open(path).map_err(GitError::io("cannot read", path))?;
    let mut buffer = vec![0u8; CHUNK];
    let mut kept = 0;
    loop {
        let read = file
            .read(&mut buffer[kept..])
            .map_err(GitError::io("cannot read", path))?;
        if read == 0 {
            return Ok(None);
        }
        let filled = kept + read;
        let text = String::from_utf8_lossy(&buffer[..filled]);
        if let Some(kind) = credential_kind(&text) {
            return Ok(Some(kind));
        }
        if filled == buffer.len() {
            buffer.copy_within(filled - OVERLAP..filled, 0);
            kept = OVERLAP;
        } else {
            kept = filled;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_judged_by_the_shared_detector() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
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
            std::fs::write(&path, text).unwrap();
            assert_eq!(file_credential(&path).unwrap(), kind, "{text}");
        }
    }

    #[test]
    fn a_credential_across_a_chunk_boundary_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.txt");
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        let mut text = "x".repeat(CHUNK - 10);
        text.push(' ');
        text.push_str(token);
        text.push('\n');
        text.push_str(&"y".repeat(3 * CHUNK));
        std::fs::write(&path, text).unwrap();
        assert_eq!(file_credential(&path).unwrap(), Some("github_token"));
        std::fs::write(&path, "z".repeat(3 * CHUNK)).unwrap();
        assert_eq!(file_credential(&path).unwrap(), None);
    }

    #[test]
    fn a_credential_in_a_name_or_a_link_target_is_found() {
        let dir = tempfile::tempdir().unwrap();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        std::fs::write(dir.path().join(format!("n-{token}")), "").unwrap();
        std::os::unix::fs::symlink(token, dir.path().join("link")).unwrap();
        std::os::unix::fs::symlink("README", dir.path().join("plain")).unwrap();
        let paths = [format!("n-{token}"), "link".to_owned(), "plain".to_owned()];
        let found = scan(dir.path(), &paths, &allowed(&[])).unwrap();
        let kinds: Vec<(&str, &str)> = found
            .iter()
            .map(|file| (file.path.as_str(), file.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                (format!("n-{token}").as_str(), "github_token"),
                ("link", "github_token")
            ]
        );
    }

    #[test]
    fn allowed_globs_skip_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("fixtures")).unwrap();
        let token = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
        std::fs::write(dir.path().join("fixtures/fake.txt"), token).unwrap();
        std::fs::write(dir.path().join("real.txt"), token).unwrap();
        let paths = [
            "fixtures/fake.txt".to_owned(),
            "real.txt".to_owned(),
            "gone".to_owned(),
        ];
        let found = scan(dir.path(), &paths, &allowed(&["fixtures/**".to_owned()])).unwrap();
        assert_eq!(
            found,
            [SecretFile {
                path: "real.txt".into(),
                kind: "github_token"
            }]
        );
    }
}
