//! The ignore rules a task started with, so that a change to `.gitignore`
//! never brings old files into a commit (docs/security.md S12).
//!
//! The snapshot keeps the text of every `.gitignore` in the work tree and
//! of `info/exclude`. At commit time, when those differ from what they are
//! now, every path that was not tracked at the start is checked against
//! the old rules as well: a path ignored then, or ignored now, is never
//! committed. Rules the task cannot change (`core.excludesFile`) hold now
//! as they did then, so the current status already covers them.
//!
//! Matching uses the `ignore` crate's gitignore matcher, one per
//! `.gitignore`, with git's precedence: `info/exclude` lowest, then the
//! root `.gitignore`, then deeper ones; the last match wins; a path inside
//! an ignored directory is ignored whatever its own rules say.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use git2::Repository;
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use serde::{Deserialize, Serialize};

use super::status::DirtyPath;
use super::{GitError, Workspace};

/// The most of one ignore file that is kept; git itself reads more, but a
/// multi-megabyte `.gitignore` is not a real case.
const MAX_RULES_BYTES: u64 = 1 << 20;

/// The repository's own ignore rules at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IgnoreRules {
    /// The text of every `.gitignore` in the work tree, keyed by its
    /// repository-relative path (`.gitignore`, `src/.gitignore`).
    pub files: BTreeMap<String, String>,
    /// The text of the repository's `info/exclude`.
    #[serde(default)]
    pub exclude: String,
}

impl IgnoreRules {
    /// Reads the rules as they are now: the `.gitignore` files git tracks,
    /// plus those among `dirty` (new or deleted ones).
    pub(crate) fn read(
        workspace: &Workspace,
        repo: &Repository,
        dirty: &BTreeMap<String, DirtyPath>,
    ) -> Result<Self, GitError> {
        let index = repo
            .index()
            .map_err(GitError::git("cannot read the index"))?;
        let mut paths: Vec<String> = index
            .iter()
            .filter_map(|entry| String::from_utf8(entry.path).ok())
            .filter(|path| is_ignore_file(path))
            .collect();
        paths.extend(dirty.keys().filter(|path| is_ignore_file(path)).cloned());
        paths.sort();
        paths.dedup();
        let mut files = BTreeMap::new();
        for path in paths {
            if let Some(text) = read_text(&workspace.root().join(&path)) {
                files.insert(path, text);
            }
        }
        let exclude = read_text(&repo.commondir().join("info").join("exclude")).unwrap_or_default();
        Ok(Self { files, exclude })
    }

    /// The matcher for these rules.
    pub(crate) fn matcher(&self) -> Matcher {
        let mut levels = vec![(String::new(), build("", &self.exclude))];
        let mut files: Vec<(&String, &String)> = self.files.iter().collect();
        // Shallow before deep: deeper rules win.
        files.sort_by_key(|(path, _)| (path.matches('/').count(), path.as_str()));
        for (path, text) in files {
            let dir = path.strip_suffix(".gitignore").unwrap_or_default();
            levels.push((dir.to_owned(), build(dir, text)));
        }
        Matcher { levels }
    }
}

/// Answers "would git ignore this path under these rules".
pub(crate) struct Matcher {
    /// `(directory prefix ("" or "a/b/"), its rules)`, lowest precedence first.
    levels: Vec<(String, Gitignore)>,
}

impl Matcher {
    /// True if and only if the repository-relative file `path`, or one of
    /// its parent directories, is ignored.
    pub(crate) fn ignores(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').collect();
        (1..=parts.len()).any(|end| {
            let sub = parts[..end].join("/");
            self.ignores_one(&sub, end < parts.len())
        })
    }

    fn ignores_one(&self, sub: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for (dir, rules) in &self.levels {
            if !sub.starts_with(dir.as_str()) || sub.len() == dir.len() {
                continue;
            }
            let matched = rules.matched(fake_root().join(sub), is_dir);
            if matched.is_ignore() {
                ignored = true;
            } else if matched.is_whitelist() {
                ignored = false;
            }
        }
        ignored
    }
}

/// Where the matchers pretend the work tree is: they only compare paths.
fn fake_root() -> PathBuf {
    PathBuf::from("/ybs-work-tree")
}

fn build(dir: &str, text: &str) -> Gitignore {
    let mut builder = GitignoreBuilder::new(fake_root().join(dir));
    for line in text.lines() {
        // A line the matcher cannot parse is one git would not match
        // either; the other lines still count.
        let _ = builder.add_line(None, line);
    }
    builder.build().unwrap_or_else(|_| Gitignore::empty())
}

fn is_ignore_file(path: &str) -> bool {
    path == ".gitignore" || path.ends_with("/.gitignore")
}

/// A regular file's text (lossy), at most [`MAX_RULES_BYTES`]; `None` when
/// there is no regular file there.
fn read_text(path: &Path) -> Option<String> {
    let metadata = std::fs::symlink_metadata(path).ok()?;
    if !metadata.is_file() {
        return None;
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(MAX_RULES_BYTES)
        .read_to_end(&mut bytes)
        .ok()?;
    Some(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(files: &[(&str, &str)], exclude: &str) -> Matcher {
        IgnoreRules {
            files: files
                .iter()
                .map(|(path, text)| ((*path).to_owned(), (*text).to_owned()))
                .collect(),
            exclude: exclude.to_owned(),
        }
        .matcher()
    }

    #[test]
    fn follows_gits_precedence() {
        let matcher = rules(
            &[
                (".gitignore", "*.log\nbuild/\n.npmrc\n!keep.log\n"),
                ("sub/.gitignore", "!*.log\nsecret.txt\n"),
            ],
            "creds.json\n",
        );
        assert!(matcher.ignores(".npmrc"));
        assert!(matcher.ignores("creds.json"));
        assert!(matcher.ignores("a.log"));
        assert!(!matcher.ignores("keep.log"));
        assert!(matcher.ignores("build/out.txt"), "inside an ignored dir");
        assert!(!matcher.ignores("build.txt"));
        assert!(!matcher.ignores("sub/a.log"), "a deeper rule wins");
        assert!(matcher.ignores("sub/secret.txt"));
        assert!(!matcher.ignores("secret.txt"), "sub's rules stay in sub");
        assert!(!matcher.ignores("src/main.rs"));
    }

    #[test]
    fn an_ignored_directory_cannot_be_re_included_from_inside() {
        let matcher = rules(
            &[(".gitignore", "vendor/\n"), ("vendor/.gitignore", "!*\n")],
            "",
        );
        assert!(matcher.ignores("vendor/lib.rs"));
    }
}
