//! The repository's instructions for agents: the `AGENTS.md` files of a
//! task's workdir and of its parents up to the repository root, read when
//! the task is prepared, for the system prompt (docs/task-files.md,
//! `context`). Outermost first, as a reader goes from the general to the
//! particular. Each is masked like every output, never read through a
//! symbolic link (a link could point at any file of the host), and the
//! whole is bounded to [`BUDGET`] bytes, cut with a note.

use std::fs::OpenOptions;
use std::io::Read as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

use crate::core::Redactor;

/// The file name read in each directory.
pub const FILE_NAME: &str = "AGENTS.md";
/// Bytes of `AGENTS.md` text the system prompt takes, all files together.
pub const BUDGET: usize = 8 * 1024;

/// What was read for one task.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AgentsMd {
    /// The files read, relative to the repository root (or to the workdir
    /// outside a repository), outermost first.
    pub files: Vec<String>,
    /// Their text for the system prompt, each under a heading naming it;
    /// `None` when there was none.
    pub text: Option<String>,
    /// What was passed over and why (a link, a file that cannot be read,
    /// the budget spent): notes for the task's log.
    pub notes: Vec<String>,
}

/// The directories to look in, outermost first, and the one names are
/// relative to: from `workdir` up to the first directory holding `.git`
/// (a directory, or a worktree's file); `workdir` alone when none does.
fn directories(workdir: &Path) -> (Vec<PathBuf>, PathBuf) {
    let mut dirs = Vec::new();
    let mut current = Some(workdir);
    while let Some(dir) = current {
        dirs.push(dir.to_path_buf());
        if dir.join(".git").symlink_metadata().is_ok() {
            dirs.reverse();
            return (dirs, dir.to_path_buf());
        }
        current = dir.parent();
    }
    (vec![workdir.to_path_buf()], workdir.to_path_buf())
}

/// Reads the `AGENTS.md` files for a task in `workdir`.
pub fn read(workdir: &Path, redactor: &Redactor) -> AgentsMd {
    let (dirs, root) = directories(workdir);
    let mut found = AgentsMd::default();
    let mut text = String::new();
    let mut left = BUDGET;
    for dir in dirs {
        let path = dir.join(FILE_NAME);
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        let contents = match read_plain(&path) {
            Ok(Some(contents)) => contents,
            Ok(None) => continue,
            Err(why) => {
                found.notes.push(format!("{name} not read: {why}"));
                continue;
            }
        };
        if left == 0 {
            found.notes.push(format!(
                "{name} not read: the {} KB of AGENTS.md text the system prompt takes are spent",
                BUDGET / 1024
            ));
            continue;
        }
        let masked = redactor.redact(&contents);
        let masked = masked.trim();
        if masked.is_empty() {
            continue;
        }
        let (shown, cut) = cut_at(masked, left);
        left -= shown.len();
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&format!("--- {name} ---\n{shown}"));
        if cut {
            let note = format!(
                "[{name} cut: {} of {} bytes shown; ybs reads at most {} KB of AGENTS.md in all]",
                shown.len(),
                masked.len(),
                BUDGET / 1024
            );
            text.push_str(&format!("\n{note}"));
            found.notes.push(note);
            left = 0;
        }
        found.files.push(name);
    }
    if !text.is_empty() {
        found.text = Some(text);
    }
    found
}

/// `text` cut to at most `max` bytes on a character boundary, preferring
/// the end of a line; and whether it was cut.
fn cut_at(text: &str, max: usize) -> (&str, bool) {
    if text.len() <= max {
        return (text, false);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let head = &text[..end];
    let head = head.rfind('\n').map_or(head, |line| &head[..line]);
    (head, true)
}

/// Why an AGENTS.md that is there was not read.
#[derive(Debug, thiserror::Error)]
enum Unread {
    #[error("it is a symbolic link; ybs does not follow links to AGENTS.md")]
    Link,
    #[error("not a regular file")]
    NotAFile,
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// The file's text; `None` when there is no file; `Err` when something
/// other than a regular file is there (a link is not followed) or it
/// cannot be read.
fn read_plain(path: &Path) -> Result<Option<String>, Unread> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_NONBLOCK)
        .open(path);
    let file = match file {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) if error.raw_os_error() == Some(nix::libc::ELOOP) => {
            return Err(Unread::Link);
        }
        Err(error) => return Err(error.into()),
    };
    if !file.metadata()?.is_file() {
        return Err(Unread::NotAFile);
    }
    // More than the budget is never shown; a little over it tells the
    // note how much there was, up to a bound.
    let mut bytes = Vec::new();
    file.take(4 * BUDGET as u64).read_to_end(&mut bytes)?;
    Ok(Some(String::from_utf8_lossy(&bytes).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_from_the_root_down_and_cuts_at_the_budget() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join(".git")).unwrap();
        std::fs::create_dir_all(root.join("crates/app")).unwrap();
        std::fs::write(root.join("AGENTS.md"), "Run cargo test.\n").unwrap();
        std::fs::write(root.join("crates/app/AGENTS.md"), "x\n".repeat(BUDGET)).unwrap();
        let found = read(&root.join("crates/app"), &Redactor::new());
        assert_eq!(found.files, ["AGENTS.md", "crates/app/AGENTS.md"]);
        let text = found.text.unwrap();
        assert!(text.starts_with("--- AGENTS.md ---\nRun cargo test."));
        assert!(text.contains("[crates/app/AGENTS.md cut:"), "{text}");
        assert!(text.len() < BUDGET + 300);
    }

    #[test]
    fn a_link_is_not_followed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("secret"), "s3cret").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), dir.path().join(FILE_NAME)).unwrap();
        let found = read(dir.path(), &Redactor::new());
        assert!(found.text.is_none());
        assert!(
            found.notes[0].contains("symbolic link"),
            "{:?}",
            found.notes
        );
    }
}
