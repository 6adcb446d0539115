//! Building trees from HEAD plus a task's files, and the commit message,
//! identity and note text shared by commits and salvage commits.
//!
//! Blobs are written with `Repository::blob_writer(hint path)`: libgit2
//! applies only the filters registered in this process, which are its
//! built-in `crlf` (`core.autocrlf`, `text`/`eol` attributes) and `ident`.
//! Those keep ybs's blobs identical to what `git add` would store, so the
//! work tree is clean afterwards. No `filter.<driver>.clean`/`process`
//! program from the repository's config is ever run: libgit2 only knows
//! filters registered through `git_filter_register`, and ybs registers
//! none (tested with a marker-writing filter).

use std::io::Write;
use std::path::Path;

use git2::{Index, IndexEntry, IndexTime, Oid, Repository, Signature, Tree};
use globset::GlobSet;

use super::GitError;
use super::beneath::{WorkEntry, WorkRoot};
use super::secrets::{self, SecretFile};
use super::status::MAX_FILE_BYTES;
use crate::core::Redactor;

/// `git`'s file modes.
pub(crate) const MODE_FILE: u32 = 0o100_644;
pub(crate) const MODE_EXECUTABLE: u32 = 0o100_755;
pub(crate) const MODE_SYMLINK: u32 = 0o120_000;

/// One path's new state: a blob with its mode, or deleted.
#[derive(Debug, Clone)]
pub(crate) struct Staged {
    pub path: String,
    pub blob: Option<(Oid, u32)>,
}

/// What [`stage_from_workdir`] made of the paths: their new states, and
/// the files it did not store because they hold a credential.
#[derive(Debug, Default)]
pub(crate) struct StagedFiles {
    pub staged: Vec<Staged>,
    pub secrets: Vec<SecretFile>,
}

/// Writes a blob for each path's current work tree content (or marks it
/// deleted). Writes objects only; the index is not touched. Each file is
/// read once, beneath the root and never through a link
/// ([`WorkRoot::read`]); with `scan`, those bytes are scanned for a
/// credential first, and a file that holds one (its path not allowed by
/// `scan`) is listed in `secrets` and never written.
pub(crate) fn stage_from_workdir(
    repo: &Repository,
    root: &Path,
    paths: &[String],
    head_tree: Option<&Tree<'_>>,
    scan: Option<&GlobSet>,
) -> Result<StagedFiles, GitError> {
    let config = repo
        .config()
        .map_err(GitError::git("cannot read the git config"))?;
    // `core.filemode = false` (set by git on filesystems without an
    // executable bit): keep the mode git already records, as `git add` does.
    let trust_mode = config.get_bool("core.filemode").unwrap_or(true);
    let work = WorkRoot::open(root)?;
    let mut out = StagedFiles::default();
    for path in paths {
        let entry = work.read(path, MAX_FILE_BYTES)?;
        if let Some(allow) = scan
            && let Some(kind) = secrets::credential_in(path, &entry, allow)
        {
            out.secrets.push(SecretFile {
                path: path.clone(),
                kind,
            });
            continue;
        }
        let blob = match entry {
            // A tracked file replaced by a directory: the file is deleted
            // (the directory's files are paths of their own). Below a
            // symlinked directory there is nothing either, as for git.
            WorkEntry::Absent | WorkEntry::Directory => None,
            WorkEntry::Symlink(target) => {
                let oid = repo
                    .blob(&target)
                    .map_err(GitError::git(format!("cannot store {path}")))?;
                Some((oid, MODE_SYMLINK))
            }
            WorkEntry::File { bytes, executable } => {
                // The blob writer applies git's own `crlf`/`ident` filters
                // to these bytes, the ones just scanned.
                let mut writer = repo
                    .blob_writer(Some(Path::new(path)))
                    .map_err(GitError::git(format!("cannot store {path}")))?;
                writer
                    .write_all(&bytes)
                    .map_err(GitError::io("cannot store", root.join(path)))?;
                let oid = writer
                    .commit()
                    .map_err(GitError::git(format!("cannot store {path}")))?;
                let executable = if trust_mode {
                    executable
                } else {
                    head_tree
                        .and_then(|tree| tree.get_path(Path::new(path)).ok())
                        .is_some_and(|entry| entry.filemode() == MODE_EXECUTABLE as i32)
                };
                Some((
                    oid,
                    if executable {
                        MODE_EXECUTABLE
                    } else {
                        MODE_FILE
                    },
                ))
            }
            WorkEntry::TooLarge { .. } | WorkEntry::Special => {
                return Err(GitError::Io {
                    context: "changed into a special or too large file while committing",
                    path: root.join(path),
                    cause: std::io::Error::other("not a regular file ybs stores"),
                });
            }
        };
        out.staged.push(Staged {
            path: path.clone(),
            blob,
        });
    }
    Ok(out)
}

/// The staged paths whose new state differs from HEAD's (content or mode):
/// a file git normalises back to HEAD's blob (line endings) is no change.
pub(crate) fn changed_paths(head_tree: Option<&Tree<'_>>, staged: &[Staged]) -> Vec<String> {
    staged
        .iter()
        .filter(|item| {
            let before = head_tree
                .and_then(|tree| tree.get_path(Path::new(&item.path)).ok())
                .map(|entry| (entry.id(), u32::try_from(entry.filemode()).unwrap_or(0)));
            before != item.blob
        })
        .map(|item| item.path.clone())
        .collect()
}

/// A bare index entry (no stat data) for a blob.
pub(crate) fn entry(path: &str, oid: Oid, mode: u32) -> IndexEntry {
    IndexEntry {
        ctime: IndexTime::new(0, 0),
        mtime: IndexTime::new(0, 0),
        dev: 0,
        ino: 0,
        mode,
        uid: 0,
        gid: 0,
        file_size: 0,
        id: oid,
        flags: 0,
        flags_extended: 0,
        path: path.as_bytes().to_vec(),
    }
}

/// HEAD's tree with `staged` applied, built in a fresh in-memory index (never
/// the repository's index) and written to the object database.
pub(crate) fn write_tree(
    repo: &Repository,
    head_tree: Option<&Tree<'_>>,
    staged: &[Staged],
) -> Result<Oid, GitError> {
    let context = "cannot build the commit's tree";
    let mut index = Index::new().map_err(GitError::git(context))?;
    if let Some(tree) = head_tree {
        index.read_tree(tree).map_err(GitError::git(context))?;
    }
    // Deletions first, so a file replaced by a directory of the same name
    // (or the reverse) never collides.
    for item in staged.iter().filter(|item| item.blob.is_none()) {
        index
            .remove_path(Path::new(&item.path))
            .map_err(GitError::git(format!(
                "cannot remove {} from the tree",
                item.path
            )))?;
    }
    for item in staged {
        if let Some((oid, mode)) = item.blob {
            index
                .add(&entry(&item.path, oid, mode))
                .map_err(GitError::git(format!(
                    "cannot add {} to the tree",
                    item.path
                )))?;
        }
    }
    index.write_tree_to(repo).map_err(GitError::git(context))
}

/// Who a commit is by.
#[derive(Debug, Clone)]
pub(crate) struct Identity {
    pub name: String,
    pub email: String,
    /// True if and only if neither the request nor the git config named
    /// anyone and `ybs <ybs@localhost>` is used.
    pub fallback: bool,
}

impl Identity {
    pub fn signature(&self) -> Result<Signature<'static>, GitError> {
        Signature::now(&self.name, &self.email).map_err(GitError::git(format!(
            "cannot use `{} <{}>` as the commit identity",
            self.name, self.email
        )))
    }

    pub fn display(&self) -> String {
        format!("{} <{}>", self.name, self.email)
    }
}

/// `author` ("Name <email>", from `YBS_GIT_AUTHOR`) if given, else the
/// repository config's `user.name`/`user.email`, else `ybs <ybs@localhost>`
/// (CI machines often have no identity; the outcome says so).
pub(crate) fn identity(repo: &Repository, author: Option<&str>) -> Result<Identity, GitError> {
    if let Some(value) = author.map(str::trim).filter(|value| !value.is_empty()) {
        let (name, email) = parse_author(value).ok_or_else(|| GitError::InvalidAuthor {
            value: value.to_owned(),
        })?;
        return Ok(Identity {
            name,
            email,
            fallback: false,
        });
    }
    let config = repo
        .config()
        .map_err(GitError::git("cannot read the git config"))?;
    let read = |key: &str| {
        config
            .get_string(key)
            .ok()
            .map(|value| value.trim().to_owned())
            .filter(|value| !value.is_empty() && !value.contains(['<', '>', '\n']))
    };
    match (read("user.name"), read("user.email")) {
        (Some(name), Some(email)) => Ok(Identity {
            name,
            email,
            fallback: false,
        }),
        _ => Ok(Identity {
            name: "ybs".into(),
            email: "ybs@localhost".into(),
            fallback: true,
        }),
    }
}

/// Parses `Name <email>`.
pub(crate) fn parse_author(value: &str) -> Option<(String, String)> {
    let rest = value.trim().strip_suffix('>')?;
    let (name, email) = rest.rsplit_once('<')?;
    let name = name.trim();
    let email = email.trim();
    let bad = |text: &str| text.is_empty() || text.contains(['<', '>', '\n', '\r']);
    if bad(name) || bad(email) {
        return None;
    }
    Some((name.to_owned(), email.to_owned()))
}

/// The longest subject text kept after `[ybs] <task-id>: `; a longer first
/// line is cut there and repeated whole in the body.
const SUBJECT_CHARS: usize = 100;
/// The longest body kept.
const BODY_CHARS: usize = 8_000;

/// A commit message: `<prefix> <task-id>: <first line of text>` (prefix
/// `[ybs]` unless configured; an empty one is left out), the rest of the
/// text as the body, then the trailers. Returns (subject, message).
/// Secrets known to `redactor` are masked everywhere (docs/security.md S7).
pub(crate) fn commit_message(
    prefix: &str,
    task_id: &str,
    text: &str,
    trailers: &[(&str, &str)],
    redactor: Option<&Redactor>,
) -> (String, String) {
    let redact = |text: &str| match redactor {
        Some(redactor) => redactor.redact(text),
        None => text.to_owned(),
    };
    let text = redact(text);
    let text = text.trim();
    let (first, rest) = text.split_once('\n').unwrap_or((text, ""));
    let first = first.trim();
    let first = if first.is_empty() {
        "no summary"
    } else {
        first
    };
    let mut body = rest.trim().to_owned();
    let subject_text = if first.chars().count() > SUBJECT_CHARS {
        body = format!("{first}\n\n{body}").trim().to_owned();
        let cut: String = first.chars().take(SUBJECT_CHARS).collect();
        format!("{}…", cut.trim_end())
    } else {
        first.to_owned()
    };
    if body.chars().count() > BODY_CHARS {
        body = body.chars().take(BODY_CHARS).collect::<String>() + "\n[…]";
    }
    let prefix = one_line(prefix);
    let subject = if prefix.is_empty() {
        format!("{}: {subject_text}", one_line(task_id))
    } else {
        format!("{prefix} {}: {subject_text}", one_line(task_id))
    };
    let mut message = subject.clone();
    message.push_str("\n\n");
    if !body.is_empty() {
        message.push_str(&body.replace("\r\n", "\n"));
        message.push_str("\n\n");
    }
    for (key, value) in trailers {
        message.push_str(&format!("{key}: {}\n", one_line(&redact(value))));
    }
    (subject, message)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `a, b, c and 4 more`.
pub(crate) fn list(paths: &[String]) -> String {
    const SHOWN: usize = 5;
    let mut text = paths
        .iter()
        .take(SHOWN)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if paths.len() > SHOWN {
        text.push_str(&format!(" and {} more", paths.len() - SHOWN));
    }
    text
}

/// "1 file" / "2 files".
pub(crate) fn files(count: usize) -> String {
    if count == 1 {
        "1 file".into()
    } else {
        format!("{count} files")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use git2::ObjectType;

    const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

    #[test]
    fn the_bytes_scanned_are_the_bytes_stored_and_a_secret_is_never_stored() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        std::fs::write(dir.path().join("clean.txt"), "hello\n").unwrap();
        std::fs::write(dir.path().join("secret.txt"), format!("{TOKEN}\n")).unwrap();
        std::os::unix::fs::symlink("clean.txt", dir.path().join("link")).unwrap();
        let paths = [
            "clean.txt".to_owned(),
            "secret.txt".to_owned(),
            "link".to_owned(),
        ];
        let allow = secrets::allowed(&[]);
        let read = stage_from_workdir(&repo, dir.path(), &paths, None, Some(&allow)).unwrap();
        assert_eq!(
            read.secrets,
            [SecretFile {
                path: "secret.txt".into(),
                kind: "github_token"
            }]
        );
        let stored: Vec<(String, Vec<u8>, u32)> = read
            .staged
            .iter()
            .map(|item| {
                let (oid, mode) = item.blob.unwrap();
                let blob = repo.find_blob(oid).unwrap();
                (item.path.clone(), blob.content().to_vec(), mode)
            })
            .collect();
        assert_eq!(
            stored,
            [
                ("clean.txt".to_owned(), b"hello\n".to_vec(), MODE_FILE),
                ("link".to_owned(), b"clean.txt".to_vec(), MODE_SYMLINK),
            ]
        );
        let secret = Oid::hash_object(ObjectType::Blob, format!("{TOKEN}\n").as_bytes()).unwrap();
        assert!(repo.find_blob(secret).is_err(), "the secret's blob exists");
    }

    #[test]
    fn a_fifo_to_commit_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let repo = Repository::init(dir.path()).unwrap();
        nix::unistd::mkfifo(
            &dir.path().join("pipe"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        let error =
            stage_from_workdir(&repo, dir.path(), &["pipe".to_owned()], None, None).unwrap_err();
        assert!(error.to_string().contains("pipe"), "{error}");
    }
}
