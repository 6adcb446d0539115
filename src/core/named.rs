//! The files a task file names (`output.schema_file`, the cassette beside
//! it), opened as a confined program would see them (docs/security.md
//! S8): beneath the task file's repository, or its own directory when it
//! is in none, never through a symbolic link, and never a blocked path.
//! A task file comes with a pull request; what it names must not reach
//! `~/.pgpass` through `..`, an absolute path or a planted link.

use std::io;
use std::path::{Component, Path, PathBuf};

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};

use super::beneath;

/// The most a named file may hold.
pub const MAX_NAMED_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// Why a named file cannot be read. No variant holds a byte of the file.
#[derive(Debug, thiserror::Error)]
pub enum NamedFileError {
    #[error("`{named}` is an absolute path")]
    Absolute { named: String },
    #[error("`{named}` leads out of `{}`", root.display())]
    Escapes { named: String, root: PathBuf },
    #[error("`{named}` is under blocked path `{entry}` (safety.blocked_paths)")]
    Blocked { named: String, entry: String },
    #[error("`{named}` is or passes through a symbolic link")]
    Link { named: String },
    #[error("cannot read `{named}`: {source}")]
    Read {
        named: String,
        #[source]
        source: io::Error,
    },
    #[error("`{named}` is not UTF-8 text")]
    NotText { named: String },
}

/// The rules for opening what a task file names: `safety.blocked_paths`
/// (with `~` the operator's home).
#[derive(Debug, Default, Clone)]
pub struct NamedFiles {
    blocked: Vec<String>,
    home: Option<PathBuf>,
}

impl NamedFiles {
    pub fn new(blocked: &[String], home: Option<&Path>) -> Self {
        Self {
            blocked: blocked.to_vec(),
            home: home.map(Path::to_path_buf),
        }
    }

    /// The text of `named`, as `from` (a task file) names it: relative
    /// to `from`'s directory, opened beneath [`confining_root`].
    pub fn read_text(&self, from: &Path, named: &str) -> Result<String, NamedFileError> {
        let bytes = self.read(from, named)?;
        String::from_utf8(bytes).map_err(|_| NamedFileError::NotText {
            named: named.to_owned(),
        })
    }

    /// The bytes of `named`; see [`Self::read_text`].
    pub fn read(&self, from: &Path, named: &str) -> Result<Vec<u8>, NamedFileError> {
        let owned = || named.to_owned();
        if Path::new(named).is_absolute() {
            return Err(NamedFileError::Absolute { named: owned() });
        }
        let from = std::path::absolute(from).map_err(|source| NamedFileError::Read {
            named: owned(),
            source,
        })?;
        let dir = from.parent().unwrap_or(Path::new("/"));
        let root = confining_root(dir);
        let start = dir.strip_prefix(&root).unwrap_or(Path::new(""));
        let relative =
            normal_beneath(&start.join(named)).ok_or_else(|| NamedFileError::Escapes {
                named: owned(),
                root: root.clone(),
            })?;
        if let Some(entry) = self.blocked_entry(&root, &relative) {
            return Err(NamedFileError::Blocked {
                named: owned(),
                entry,
            });
        }
        beneath::read_beneath(&root, &relative, MAX_NAMED_FILE_BYTES).map_err(|source| {
            if beneath::is_link_error(&source) {
                NamedFileError::Link { named: owned() }
            } else {
                NamedFileError::Read {
                    named: owned(),
                    source,
                }
            }
        })
    }

    /// The blocked-paths entry `root/relative` is under: a literal entry
    /// blocks itself and everything below it; a glob matches the path
    /// (absolute, or relative to `root`) or one of its directories.
    fn blocked_entry(&self, root: &Path, relative: &Path) -> Option<String> {
        let absolute = root.join(relative);
        for entry in &self.blocked {
            let expanded = match (entry.strip_prefix("~/"), &self.home) {
                (Some(rest), Some(home)) => home.join(rest).to_string_lossy().into_owned(),
                (Some(_), None) => continue,
                (None, _) if entry == "~" => match &self.home {
                    Some(home) => home.to_string_lossy().into_owned(),
                    None => continue,
                },
                (None, _) => entry.clone(),
            };
            let hit = if expanded.contains(['*', '?', '[', '{']) {
                glob(&expanded).is_some_and(|globs| {
                    absolute
                        .ancestors()
                        .chain(relative.ancestors())
                        .filter(|path| !path.as_os_str().is_empty())
                        .any(|path| globs.is_match_candidate(&Candidate::new(path)))
                })
            } else {
                let literal = Path::new(&expanded);
                let literal = if literal.is_absolute() {
                    literal.to_path_buf()
                } else {
                    root.join(literal)
                };
                absolute.starts_with(&literal)
            };
            if hit {
                return Some(entry.clone());
            }
        }
        None
    }
}

fn glob(pattern: &str) -> Option<GlobSet> {
    let glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .build()
        .ok()?;
    let mut set = GlobSetBuilder::new();
    set.add(glob);
    set.build().ok()
}

/// The directory the files named from `dir` are confined to: the
/// repository holding `dir` (the nearest directory above it with a
/// `.git`), or `dir` itself when there is none.
pub fn confining_root(dir: &Path) -> PathBuf {
    dir.ancestors()
        .find(|ancestor| ancestor.join(".git").symlink_metadata().is_ok())
        .unwrap_or(dir)
        .to_path_buf()
}

/// `path` with `.` dropped and `..` taken back, if it never leaves the
/// directory it is relative to.
fn normal_beneath(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => out.push(name),
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_path_stays_beneath_its_root() {
        assert_eq!(normal_beneath(Path::new("a/./b/../c")), Some("a/c".into()));
        assert_eq!(normal_beneath(Path::new("a/../../c")), None);
        assert_eq!(normal_beneath(Path::new("/etc/passwd")), None);
    }

    #[test]
    fn blocked_entries_match_literals_and_globs() {
        let files = NamedFiles::new(
            &[
                "**/.env".to_owned(),
                "secrets".to_owned(),
                "~/.ssh".to_owned(),
            ],
            Some(Path::new("/home/u")),
        );
        let root = Path::new("/repo");
        assert_eq!(
            files.blocked_entry(root, Path::new("a/.env")).as_deref(),
            Some("**/.env")
        );
        assert_eq!(
            files.blocked_entry(root, Path::new(".env")).as_deref(),
            Some("**/.env")
        );
        assert_eq!(
            files
                .blocked_entry(root, Path::new("secrets/k.json"))
                .as_deref(),
            Some("secrets")
        );
        assert_eq!(files.blocked_entry(root, Path::new("schemas/k.json")), None);
        assert_eq!(
            files
                .blocked_entry(Path::new("/home/u"), Path::new(".ssh/id"))
                .as_deref(),
            Some("~/.ssh")
        );
    }
}
