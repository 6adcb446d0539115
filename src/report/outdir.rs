//! The output directory, held open (issue 9, item 6; docs/security.md S8).
//!
//! ybs opens the directory once, before any task runs, walking the path
//! one component at a time without following symbolic links, and keeps
//! the handle. Every task directory and file is then created relative to
//! that handle, one plain name at a time, never through a link:
//! `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` where the kernel has
//! it, `openat(O_NOFOLLOW)` otherwise. Files a reader may see half-written
//! are written to a temporary name in the same directory and renamed over
//! the old one, which replaces a planted link instead of following it.
//!
//! Every file written is remembered (device, inode, length, SHA-256);
//! [`OutDir::check`] compares what is at each path now with what ybs
//! wrote, and reports a path replaced, renamed over, turned into a link,
//! removed, or changed by another writer. It also reports the directory's
//! own path no longer leading to the directory held; writing goes on
//! through the handle.
//!
//! `OUT/digests.json` records the SHA-256 of every `transcript.json` ybs
//! wrote; `ybs report merge` refuses a transcript that does not match it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read as _, Write as _};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use super::fsutil::with_path;
use crate::core::beneath::{is_link_error, open_beneath, replace_file, temp_file};

/// The owner of a finding about the output directory itself: it concerns
/// every task running when it is found.
const EVERY_TASK: &str = "*";

/// The file name of the transcript digests inside `OUT/`.
pub const DIGESTS_FILE: &str = "digests.json";

/// `OUT/digests.json`: the SHA-256 of each task's `transcript.json`, as
/// ybs wrote it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Digests {
    /// Task id to `sha256:<hex>` of `OUT/<task>/transcript.json`.
    pub transcripts: BTreeMap<String, String>,
}

impl Digests {
    /// `sha256:<hex>` of `bytes`.
    pub fn of(bytes: &[u8]) -> String {
        format!("sha256:{}", crate::core::text::hex(&Sha256::digest(bytes)))
    }
}

/// Why the output directory cannot be used. Nothing has run yet.
#[derive(Debug, thiserror::Error)]
#[error("output directory `{}`: {message}", path.display())]
pub struct OpenError {
    pub path: PathBuf,
    pub message: String,
}

/// Device and inode: what a path is, whatever its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileId {
    dev: u64,
    ino: u64,
}

impl FileId {
    #[allow(
        clippy::useless_conversion,
        clippy::unnecessary_cast,
        reason = "the field types differ between targets"
    )]
    fn of(stat: &FileStat) -> Self {
        Self {
            dev: stat.st_dev as u64,
            ino: stat.st_ino as u64,
        }
    }
}

/// One file ybs wrote.
#[derive(Debug, Clone)]
struct Written {
    task: Option<String>,
    name: String,
    id: FileId,
    /// The bytes ybs wrote, when it wrote all of them.
    len: Option<u64>,
    /// The digest of the contents, for files written whole.
    sha256: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    /// Task directories, by task id, with what they were when created.
    task_dirs: HashMap<String, (Arc<OwnedFd>, FileId)>,
    /// By `task/name` (or `name`).
    written: BTreeMap<String, Written>,
    digests: Digests,
    /// Every finding, in order, as (task, message); the task is `None`
    /// for a run-level file, [`EVERY_TASK`] for the directory itself.
    findings: Vec<(Option<String>, String)>,
    /// Findings already handed out by [`OutDir::check`].
    reported: HashSet<String>,
}

/// A directory ybs writes its outputs in, held open for the run.
#[derive(Debug)]
pub struct OutDir {
    path: PathBuf,
    /// `path` made absolute against the `cwd` it was opened from.
    absolute: PathBuf,
    fd: OwnedFd,
    id: FileId,
    state: Mutex<State>,
}

impl OutDir {
    /// Opens (creating what is missing) the directory at `path`, relative
    /// to `cwd` when relative. The components inside `cwd`, and the
    /// missing ones created, must not be symbolic links: the directory
    /// ybs was started in is the repository, where anyone with a pull
    /// request can plant one. An absolute path elsewhere is the
    /// operator's: its existing part is taken as it resolves, unless it
    /// resolves back into `cwd`.
    pub fn open(path: &Path, cwd: &Path) -> Result<Arc<Self>, OpenError> {
        let fail = |message: String| OpenError {
            path: path.to_owned(),
            message,
        };
        let (anchor, rest) = anchor_of(path, cwd).map_err(|error| fail(error.to_string()))?;
        let mut fd = File::open(&anchor)
            .map(OwnedFd::from)
            .map_err(|err| fail(format!("cannot open `{}`: {err}", anchor.display())))?;
        let mut walked = anchor.clone();
        for name in &rest {
            walked.push(name);
            fd = enter_dir(&fd, name).map_err(|err| match err {
                EnterError::Link => fail(format!(
                    "`{}` is a symbolic link; ybs does not follow links in its output path",
                    walked.display()
                )),
                EnterError::NotDir => fail(format!("`{}` is not a directory", walked.display())),
                EnterError::Io(err) => fail(format!("`{}`: {err}", walked.display())),
            })?;
        }
        let stat = fstat(&fd).map_err(|err| fail(err.to_string()))?;
        let dir = Self {
            path: path.to_owned(),
            absolute: cwd.join(path),
            id: FileId::of(&stat),
            fd,
            state: Mutex::new(State::default()),
        };
        // Digests of transcripts an earlier run left here stay valid,
        // but only of transcripts that are here and match: an entry with
        // no transcript (planted, or left by a task directory since
        // removed) would otherwise be carried into this run's
        // `digests.json` and vouch for whatever is put there later.
        if let Ok(bytes) = dir.read(None, DIGESTS_FILE)
            && let Ok(mut digests) = serde_json::from_slice::<Digests>(&bytes)
        {
            digests
                .transcripts
                .retain(|task, digest| dir.earlier_transcript(task).as_ref() == Some(digest));
            dir.lock().digests = digests;
        }
        Ok(Arc::new(dir))
    }

    /// The path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A path for messages: `OUT/task/name`.
    fn display(&self, task: Option<&str>, name: &str) -> PathBuf {
        let mut path = self.path.clone();
        path.extend(task);
        path.push(name);
        path
    }

    fn finding(&self, task: Option<&str>, message: String) {
        self.lock()
            .findings
            .push((task.map(str::to_owned), message));
    }

    /// The directory of `task` (or the output directory itself), created
    /// the first time. A link or file planted in its place is reported
    /// and removed, never followed.
    fn dir(&self, task: Option<&str>) -> io::Result<Arc<OwnedFd>> {
        let Some(task) = task else {
            return self.fd.try_clone().map(Arc::new);
        };
        if let Some((fd, _)) = self.lock().task_dirs.get(task) {
            return Ok(Arc::clone(fd));
        }
        plain_name(task)?;
        if task.starts_with('.') || task.contains('\\') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("refusing to write outputs for task {task:?}: not a plain file name"),
            ));
        }
        let shown = self.display(None, task);
        if let Some(stat) = stat_at(self.fd.as_fd(), task)? {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            if kind != SFlag::S_IFDIR {
                self.finding(
                    Some(task),
                    format!(
                        "`{}` was {} before the task started; it was removed, not followed",
                        shown.display(),
                        describe(self.fd.as_fd(), task, kind)
                    ),
                );
                nix::unistd::unlinkat(
                    self.fd.as_fd(),
                    task,
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                )
                .map_err(|err| with_path(err.into(), &shown))?;
            }
        }
        let fd = match enter_dir(&self.fd, OsStr::new(task)) {
            Ok(fd) => fd,
            Err(EnterError::Io(err)) => return Err(with_path(err, &shown)),
            Err(_) => {
                return Err(with_path(
                    io::Error::other("replaced by a symbolic link or file while being created"),
                    &shown,
                ));
            }
        };
        let id = FileId::of(&fstat(&fd).map_err(io::Error::from)?);
        let fd = Arc::new(fd);
        self.lock()
            .task_dirs
            .insert(task.to_owned(), (Arc::clone(&fd), id));
        Ok(fd)
    }

    /// Reports what is at `name` in `dir` before ybs replaces it, when it
    /// is not a regular file: a planted link or device.
    fn note_planted(&self, dir: BorrowedFd<'_>, task: Option<&str>, name: &str) -> io::Result<()> {
        if let Some(stat) = stat_at(dir, name)? {
            let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
            if kind != SFlag::S_IFREG {
                self.finding(
                    task,
                    format!(
                        "`{}` was {}; it was replaced, not followed",
                        self.display(task, name).display(),
                        describe(dir, name, kind)
                    ),
                );
            }
        }
        Ok(())
    }

    /// A new, empty file at `OUT/task/name` (replacing whatever was
    /// there), or with `append`, the existing regular file opened to
    /// append. ybs keeps the file open and reports each write with
    /// [`Self::wrote`].
    pub fn create(&self, task: Option<&str>, name: &str, append: bool) -> io::Result<File> {
        plain_name(name)?;
        let shown = self.display(task, name);
        let dir = self.dir(task)?;
        let file = if append {
            let fd = open_beneath(
                dir.as_fd(),
                name,
                OFlag::O_RDWR | OFlag::O_APPEND | OFlag::O_CREAT,
                Mode::from_bits_truncate(0o644),
            )
            .map_err(|err| with_path(link_error(err), &shown))?;
            File::from(fd)
        } else {
            self.note_planted(dir.as_fd(), task, name)?;
            let (temp, file) =
                temp_file(dir.as_fd(), name).map_err(|err| with_path(err, &shown))?;
            nix::fcntl::renameat(dir.as_fd(), temp.as_str(), dir.as_fd(), name).map_err(|err| {
                let _ = nix::unistd::unlinkat(
                    dir.as_fd(),
                    temp.as_str(),
                    nix::unistd::UnlinkatFlags::NoRemoveDir,
                );
                with_path(err.into(), &shown)
            })?;
            file
        };
        let stat = fstat(&file).map_err(io::Error::from)?;
        #[allow(clippy::unnecessary_cast, reason = "st_size is i64 on Linux")]
        let len = u64::try_from(stat.st_size as i64).unwrap_or(0);
        self.lock().written.insert(
            key(task, name),
            Written {
                task: task.map(str::to_owned),
                name: name.to_owned(),
                id: FileId::of(&stat),
                len: Some(len),
                sha256: None,
            },
        );
        Ok(file)
    }

    /// Records that ybs wrote `bytes` more to the file [`Self::create`]
    /// gave for `task`/`name`.
    pub fn wrote(&self, task: Option<&str>, name: &str, bytes: usize) {
        if let Some(written) = self.lock().written.get_mut(&key(task, name)) {
            written.len = written
                .len
                .map(|len| len.saturating_add(u64::try_from(bytes).unwrap_or(u64::MAX)));
        }
    }

    /// Puts the contents of `file` (from [`Self::create`]) back at
    /// `OUT/task/name` when something else took its place there (a file
    /// renamed over it, a link): what ybs wrote is not lost, and the
    /// impostor is replaced, not written through. Returns whether it did.
    pub fn restore(&self, task: Option<&str>, name: &str, file: &File) -> io::Result<bool> {
        use std::os::unix::fs::FileExt as _;
        let Some(id) = self.lock().written.get(&key(task, name)).map(|w| w.id) else {
            return Ok(false);
        };
        let dir = match task {
            Some(task) => match self.lock().task_dirs.get(task) {
                Some((fd, _)) => Arc::clone(fd),
                None => return Ok(false),
            },
            None => self.dir(None)?,
        };
        if stat_at(dir.as_fd(), name)?.is_some_and(|stat| FileId::of(&stat) == id) {
            return Ok(false);
        }
        let mut bytes = Vec::new();
        let mut chunk = vec![0; 64 * 1024];
        loop {
            let offset = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
            match file.read_at(&mut chunk, offset)? {
                0 => break,
                n => bytes.extend_from_slice(&chunk[..n]),
            }
        }
        self.write_atomic(task, name, &bytes)?;
        self.finding(
            task,
            format!(
                "`{}` was put back as ybs wrote it",
                self.display(task, name).display()
            ),
        );
        Ok(true)
    }

    /// Creates `OUT/name` with `contents` unless something (anything, a
    /// link included) is already there, which is left alone. Not checked
    /// later: for files that are not outputs, like `.gitignore`.
    pub fn create_new(&self, name: &str, contents: &[u8]) -> io::Result<()> {
        plain_name(name)?;
        let shown = self.display(None, name);
        let fd = match open_beneath(
            self.fd.as_fd(),
            name,
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL,
            Mode::from_bits_truncate(0o644),
        ) {
            Ok(fd) => fd,
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => return Ok(()),
            Err(err) => return Err(with_path(err, &shown)),
        };
        File::from(fd)
            .write_all(contents)
            .map_err(|err| with_path(err, &shown))
    }

    /// Writes `OUT/task/name` whole: a temporary file in the same
    /// directory, then a rename over the old one, so readers see the old
    /// file or the new one, and a planted link is replaced, not followed.
    /// Returns the contents' digest.
    pub fn write_atomic(
        &self,
        task: Option<&str>,
        name: &str,
        contents: &[u8],
    ) -> io::Result<String> {
        plain_name(name)?;
        let shown = self.display(task, name);
        let dir = self.dir(task)?;
        self.note_planted(dir.as_fd(), task, name)?;
        let file =
            replace_file(dir.as_fd(), name, contents).map_err(|err| with_path(err, &shown))?;
        let stat = fstat(&file).map_err(io::Error::from)?;
        let sha256 = Digests::of(contents);
        self.lock().written.insert(
            key(task, name),
            Written {
                task: task.map(str::to_owned),
                name: name.to_owned(),
                id: FileId::of(&stat),
                len: Some(u64::try_from(contents.len()).unwrap_or(u64::MAX)),
                sha256: Some(sha256.clone()),
            },
        );
        Ok(sha256)
    }

    /// Writes `task`'s transcript and records its digest in
    /// `OUT/digests.json`.
    pub fn write_transcript(&self, task: &str, name: &str, contents: &[u8]) -> io::Result<()> {
        let sha256 = self.write_atomic(Some(task), name, contents)?;
        let json = {
            let mut state = self.lock();
            state.digests.transcripts.insert(task.to_owned(), sha256);
            serde_json::to_vec_pretty(&state.digests).map_err(io::Error::other)?
        };
        self.write_atomic(None, DIGESTS_FILE, &json).map(drop)
    }

    /// Reads `OUT/task/name` without following links (`ybs resume`).
    pub fn read_file(&self, task: Option<&str>, name: &str) -> io::Result<Vec<u8>> {
        plain_name(name)?;
        self.dir(task)?;
        self.read(task, name)
    }

    /// Removes `OUT/task/name` if it is there (a paused task's state once
    /// the task went on); ybs no longer answers for it.
    pub fn remove(&self, task: &str, name: &str) -> io::Result<()> {
        plain_name(name)?;
        let dir = self.dir(Some(task))?;
        match nix::unistd::unlinkat(dir.as_fd(), name, nix::unistd::UnlinkatFlags::NoRemoveDir) {
            Ok(()) | Err(Errno::ENOENT) => {}
            Err(err) => return Err(with_path(err.into(), &self.display(Some(task), name))),
        }
        self.lock().written.remove(&key(Some(task), name));
        Ok(())
    }

    /// The digest of `OUT/task/transcript.json` as it is now, read without
    /// following links and without opening the task's directory for
    /// writing; `None` when there is none.
    fn earlier_transcript(&self, task: &str) -> Option<String> {
        plain_name(task).ok()?;
        if task.starts_with('.') {
            return None;
        }
        let dir = enter_dir(&self.fd, std::ffi::OsStr::new(task)).ok()?;
        let fd = open_beneath(
            dir.as_fd(),
            super::TRANSCRIPT_FILE,
            OFlag::O_RDONLY,
            Mode::empty(),
        )
        .ok()?;
        let mut bytes = Vec::new();
        File::from(fd).read_to_end(&mut bytes).ok()?;
        Some(Digests::of(&bytes))
    }

    /// Reads `OUT/task/name` without following links.
    fn read(&self, task: Option<&str>, name: &str) -> io::Result<Vec<u8>> {
        let dir = match task {
            Some(task) => match self.lock().task_dirs.get(task) {
                Some((fd, _)) => Arc::clone(fd),
                None => return Err(io::ErrorKind::NotFound.into()),
            },
            None => self.dir(None)?,
        };
        let fd = open_beneath(dir.as_fd(), name, OFlag::O_RDONLY, Mode::empty())?;
        let mut bytes = Vec::new();
        File::from(fd).read_to_end(&mut bytes)?;
        Ok(bytes)
    }

    /// What changed since ybs wrote them, in the files of `task` (every
    /// file when `None`), and whether the directory's own path still
    /// leads to the directory held. Returns only what was not returned
    /// before; [`Self::findings`] has everything.
    pub fn check(&self, task: Option<&str>) -> Vec<String> {
        self.check_owned(task)
            .into_iter()
            .map(|(_, message)| message)
            .collect()
    }

    /// [`Self::check`], each finding with the task whose file it is about
    /// (`None` for the run's own files and the directory itself).
    pub fn check_owned(&self, task: Option<&str>) -> Vec<(Option<String>, String)> {
        let entries: Vec<Written> = self
            .lock()
            .written
            .values()
            .filter(|w| task.is_none() || w.task.as_deref() == task)
            .cloned()
            .collect();
        let mut dirs_checked = HashSet::new();
        for Written {
            task: owner,
            name,
            id,
            len,
            sha256,
        } in entries
        {
            if let Some(owner) = &owner
                && dirs_checked.insert(owner.clone())
            {
                self.check_task_dir(owner);
            }
            if let Some(problem) = self.check_file(owner.as_deref(), &name, id, len, sha256) {
                self.finding(owner.as_deref(), problem);
            }
        }
        self.check_own_path();
        let mut state = self.lock();
        let State {
            findings, reported, ..
        } = &mut *state;
        findings
            .iter()
            .filter(|(owner, _)| {
                task.is_none() || owner.as_deref() == task || owner.as_deref() == Some(EVERY_TASK)
            })
            .filter(|(_, message)| reported.insert(message.clone()))
            .map(|(owner, message)| {
                let owner = owner.clone().filter(|owner| owner != EVERY_TASK);
                (owner, message.clone())
            })
            .collect()
    }

    /// Every finding of the run, in order, each once.
    pub fn findings(&self) -> Vec<String> {
        let mut seen = HashSet::new();
        self.lock()
            .findings
            .iter()
            .filter(|(_, message)| seen.insert(message.clone()))
            .map(|(_, message)| message.clone())
            .collect()
    }

    fn check_task_dir(&self, task: &str) {
        let Some(expected) = self.lock().task_dirs.get(task).map(|(_, id)| *id) else {
            return;
        };
        let shown = self.display(None, task);
        let problem = match stat_at(self.fd.as_fd(), task) {
            Ok(Some(stat)) => {
                let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
                if kind == SFlag::S_IFLNK {
                    Some(format!(
                        "`{}` was replaced by {}",
                        shown.display(),
                        describe(self.fd.as_fd(), task, kind)
                    ))
                } else if FileId::of(&stat) != expected {
                    Some(format!(
                        "`{}` was replaced by another directory",
                        shown.display()
                    ))
                } else {
                    None
                }
            }
            Ok(None) => Some(format!("`{}` was removed or renamed", shown.display())),
            Err(err) => Some(format!("`{}` cannot be checked: {err}", shown.display())),
        };
        if let Some(problem) = problem {
            self.finding(Some(task), problem);
        }
    }

    fn check_file(
        &self,
        task: Option<&str>,
        name: &str,
        id: FileId,
        len: Option<u64>,
        sha256: Option<String>,
    ) -> Option<String> {
        let shown = self.display(task, name);
        let dir = match task {
            Some(task) => Arc::clone(&self.lock().task_dirs.get(task)?.0),
            None => self.dir(None).ok()?,
        };
        let stat = match stat_at(dir.as_fd(), name) {
            Ok(Some(stat)) => stat,
            Ok(None) => return Some(format!("`{}` was removed or renamed", shown.display())),
            Err(err) => return Some(format!("`{}` cannot be checked: {err}", shown.display())),
        };
        let kind = SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT;
        if kind == SFlag::S_IFLNK {
            return Some(format!(
                "`{}` was replaced by {}; ybs did not write through it",
                shown.display(),
                describe(dir.as_fd(), name, kind)
            ));
        }
        if FileId::of(&stat) != id {
            return Some(format!(
                "`{}` was replaced by another file after ybs wrote it",
                shown.display()
            ));
        }
        #[allow(clippy::unnecessary_cast, reason = "st_size is i64 on Linux")]
        let size = u64::try_from(stat.st_size as i64).unwrap_or(0);
        if len.is_some_and(|len| len != size) {
            return Some(format!(
                "`{}` was changed by another writer ({size} bytes; ybs wrote {})",
                shown.display(),
                len.unwrap_or_default()
            ));
        }
        if let Some(sha256) = sha256 {
            match self.read(task, name) {
                Ok(bytes) if Digests::of(&bytes) == sha256 => {}
                Ok(_) => {
                    return Some(format!(
                        "`{}` was changed by another writer after ybs wrote it",
                        shown.display()
                    ));
                }
                Err(err) => {
                    return Some(format!("`{}` cannot be read back: {err}", shown.display()));
                }
            }
        }
        None
    }

    fn check_own_path(&self) {
        let problem = match std::fs::symlink_metadata(&self.absolute) {
            Ok(meta) if meta.file_type().is_symlink() => Some(format!(
                "the output directory `{}` was replaced by a symbolic link (to `{}`); ybs kept writing to the directory it opened",
                self.path.display(),
                std::fs::read_link(&self.absolute)
                    .unwrap_or_default()
                    .display()
            )),
            Ok(meta) => {
                use std::os::unix::fs::MetadataExt as _;
                (FileId {
                    dev: meta.dev(),
                    ino: meta.ino(),
                } != self.id)
                    .then(|| {
                        format!(
                            "the output directory `{}` was replaced; ybs kept writing to the directory it opened",
                            self.path.display()
                        )
                    })
            }
            Err(_) => Some(format!(
                "the output directory `{}` was removed or renamed; ybs kept writing to the directory it opened",
                self.path.display()
            )),
        };
        if let Some(problem) = problem {
            self.finding(Some(EVERY_TASK), problem);
        }
    }
}

fn key(task: Option<&str>, name: &str) -> String {
    match task {
        Some(task) => format!("{task}/{name}"),
        None => name.to_owned(),
    }
}

/// Refuses a name that is not one plain path component.
fn plain_name(name: &str) -> io::Result<()> {
    let plain = !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\0'])
        && Path::new(name).components().count() == 1;
    if plain {
        Ok(())
    } else {
        Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to write output {name:?}: not a plain file name"),
        ))
    }
}

/// Why an output path has no place to start from.
#[derive(Debug, thiserror::Error)]
enum Unanchored {
    #[error("`..` inside the path is not supported; give a plain path")]
    Parent,
    #[error("`{}` is a symbolic link; ybs does not follow links in its output path", .0.display())]
    Link(PathBuf),
    #[error("cannot open `{}`: {source}", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("`{}` leads into `{}` through a symbolic link", path.display(), cwd.display())]
    BackInside { path: PathBuf, cwd: PathBuf },
}

/// Where [`OutDir::open`] starts (opened following links: it is the
/// operator's) and the components below it, each entered without
/// following links.
fn anchor_of(path: &Path, cwd: &Path) -> Result<(PathBuf, Vec<std::ffi::OsString>), Unanchored> {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
    let (mut anchor, below) = if path.is_absolute() {
        match path.strip_prefix(&cwd) {
            Ok(rest) => (cwd.clone(), rest.to_owned()),
            Err(_) => (PathBuf::from("/"), path.to_owned()),
        }
    } else {
        (cwd.clone(), path.to_owned())
    };
    let inside_cwd = anchor == cwd;
    let mut rest = Vec::new();
    let mut leading = true;
    for component in below.components() {
        match component {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir if leading => {
                anchor.pop();
            }
            Component::ParentDir => {
                return Err(Unanchored::Parent);
            }
            Component::Normal(name) => {
                leading = false;
                rest.push(name.to_owned());
            }
        }
    }
    if inside_cwd && anchor.starts_with(&cwd) {
        return Ok((anchor, rest));
    }
    // Outside the directory ybs was started in: the part that exists is
    // the operator's, taken as it resolves, unless it leads back inside.
    let mut existing = anchor;
    let mut missing = Vec::new();
    for name in rest {
        let next = existing.join(&name);
        if missing.is_empty() && next.symlink_metadata().is_ok() && next.canonicalize().is_ok() {
            existing = next;
        } else {
            missing.push(name);
        }
    }
    // The last component is ybs's own directory: never a link.
    if missing.is_empty()
        && let Some(name) = existing.file_name().map(OsStr::to_owned)
    {
        if existing
            .symlink_metadata()
            .is_ok_and(|m| m.file_type().is_symlink())
        {
            return Err(Unanchored::Link(existing));
        }
        existing.pop();
        missing.push(name);
    }
    let resolved = match existing.canonicalize() {
        Ok(resolved) => resolved,
        Err(source) => {
            return Err(Unanchored::Open {
                path: existing,
                source,
            });
        }
    };
    if resolved.starts_with(&cwd) && !existing.starts_with(&cwd) {
        return Err(Unanchored::BackInside {
            path: existing,
            cwd,
        });
    }
    Ok((resolved, missing))
}

enum EnterError {
    Link,
    NotDir,
    Io(io::Error),
}

/// Enters (creating it if missing) the directory `name` below `dir`,
/// refusing a symbolic link.
fn enter_dir(dir: &OwnedFd, name: &OsStr) -> Result<OwnedFd, EnterError> {
    match mkdirat(dir.as_fd(), name, Mode::from_bits_truncate(0o755)) {
        Ok(()) | Err(Errno::EEXIST) => {}
        Err(err) => return Err(EnterError::Io(err.into())),
    }
    match open_beneath(
        dir.as_fd(),
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY,
        Mode::empty(),
    ) {
        Ok(fd) => Ok(fd),
        Err(err) if is_link_error(&err) => Err(EnterError::Link),
        Err(err) if err.raw_os_error() == Some(Errno::ENOTDIR as i32) => {
            // O_DIRECTORY | O_NOFOLLOW on a link fails with ENOTDIR.
            let is_link =
                fstatat(dir.as_fd(), name, AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(|stat| {
                    SFlag::from_bits_truncate(stat.st_mode) & SFlag::S_IFMT == SFlag::S_IFLNK
                });
            Err(if is_link {
                EnterError::Link
            } else {
                EnterError::NotDir
            })
        }
        Err(err) => Err(EnterError::Io(err)),
    }
}

fn link_error(err: io::Error) -> io::Error {
    if is_link_error(&err) {
        io::Error::other("is a symbolic link; ybs does not write through links")
    } else {
        err
    }
}

/// `fstatat(AT_SYMLINK_NOFOLLOW)`; `None` when nothing is there.
fn stat_at(dir: BorrowedFd<'_>, name: &str) -> io::Result<Option<FileStat>> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(stat) => Ok(Some(stat)),
        Err(Errno::ENOENT) => Ok(None),
        Err(err) => Err(err.into()),
    }
}

/// "a symbolic link (to `…`)", "a directory", …
fn describe(dir: BorrowedFd<'_>, name: &str, kind: SFlag) -> String {
    if kind == SFlag::S_IFLNK {
        let target = nix::fcntl::readlinkat(dir, name)
            .map(|target| target.to_string_lossy().into_owned())
            .unwrap_or_default();
        format!("a symbolic link (to `{target}`)")
    } else if kind == SFlag::S_IFDIR {
        "a directory".to_owned()
    } else if kind == SFlag::S_IFREG {
        "a regular file".to_owned()
    } else {
        "a special file".to_owned()
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn creates_the_path_and_writes_beneath_it() {
        let root = tempfile::tempdir().unwrap();
        let out = OutDir::open(Path::new("a/b/out"), root.path()).unwrap();
        out.write_atomic(Some("t"), "x.json", b"one").unwrap();
        out.write_atomic(Some("t"), "x.json", b"two").unwrap();
        let path = root.path().join("a/b/out/t/x.json");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        let leftovers = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
        assert_eq!(leftovers, 1);
        assert!(out.check(None).is_empty());
        let absolute = root.path().join("abs/out");
        let out = OutDir::open(&absolute, Path::new("/nonexistent")).unwrap();
        out.write_atomic(None, "y", b"y").unwrap();
        assert!(absolute.join("y").is_file());
    }

    #[test]
    fn refuses_links_in_the_output_path() {
        let root = tempfile::tempdir().unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), root.path().join("out")).unwrap();
        symlink(elsewhere.path(), root.path().join("mid")).unwrap();
        for path in ["out", "mid/out"] {
            let err = OutDir::open(Path::new(path), root.path()).unwrap_err();
            assert!(err.to_string().contains("symbolic link"), "{err}");
        }
        let absolute = root.path().join("out");
        let err = OutDir::open(&absolute, Path::new("/nonexistent")).unwrap_err();
        assert!(err.to_string().contains("symbolic link"), "{err}");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn replaces_planted_links_without_following_them() {
        let root = tempfile::tempdir().unwrap();
        let victim = root.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::create_dir_all(root.path().join("out/t")).unwrap();
        symlink(&victim, root.path().join("out/t/events.jsonl")).unwrap();
        symlink(&victim, root.path().join("out/summary.md")).unwrap();
        symlink(root.path(), root.path().join("out/u")).unwrap();
        let out = OutDir::open(Path::new("out"), root.path()).unwrap();
        let mut file = out.create(Some("t"), "events.jsonl", false).unwrap();
        file.write_all(b"line\n").unwrap();
        out.wrote(Some("t"), "events.jsonl", 5);
        out.write_atomic(None, "summary.md", b"s").unwrap();
        out.write_atomic(Some("u"), "transcript.json", b"{}")
            .unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(!root.path().join("transcript.json").exists());
        let found = out.check(Some("t"));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].contains("symbolic link"), "{found:?}");
        let found = out.check(None);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(out.check(None).is_empty());
        assert_eq!(out.findings().len(), 3);
    }

    #[test]
    fn finds_files_replaced_changed_or_linked_after_writing() {
        let root = tempfile::tempdir().unwrap();
        let out = OutDir::open(Path::new("out"), root.path()).unwrap();
        let dir = root.path().join("out");
        let mut events = out.create(Some("t"), "events.jsonl", false).unwrap();
        events.write_all(b"one\n").unwrap();
        out.wrote(Some("t"), "events.jsonl", 4);
        out.write_transcript("t", "transcript.json", b"{}").unwrap();
        out.write_atomic(None, "summary.md", b"sum").unwrap();
        assert!(out.check(None).is_empty());
        // Renamed over, appended to, rewritten in place.
        std::fs::write(dir.join("t/new"), "forged").unwrap();
        std::fs::rename(dir.join("t/new"), dir.join("t/events.jsonl")).unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join("t/transcript.json"))
            .unwrap()
            .write_all(b"[]")
            .unwrap();
        std::fs::remove_file(dir.join("summary.md")).unwrap();
        symlink("/etc/passwd", dir.join("summary.md")).unwrap();
        let found = out.check(Some("t")).join("\n");
        assert!(found.contains("events.jsonl` was replaced"), "{found}");
        assert!(found.contains("transcript.json` was changed"), "{found}");
        let found = out.check(None).join("\n");
        assert!(
            found.contains("summary.md` was replaced by a symbolic link"),
            "{found}"
        );
        // The directory itself moved away: writing goes on through the handle.
        std::fs::rename(&dir, root.path().join("moved")).unwrap();
        symlink(root.path().join("elsewhere"), &dir).unwrap();
        let found = out.check(None).join("\n");
        assert!(found.contains("replaced by a symbolic link"), "{found}");
        out.write_atomic(None, "late.md", b"x").unwrap();
        assert!(root.path().join("moved/late.md").is_file());
        let digests: Digests =
            serde_json::from_slice(&std::fs::read(root.path().join("moved/digests.json")).unwrap())
                .unwrap();
        assert_eq!(digests.transcripts["t"], Digests::of(b"{}"));
    }
}
