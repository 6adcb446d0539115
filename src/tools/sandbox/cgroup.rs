//! The process bound of a task (`safety.max_processes`, docs/sandbox.md):
//! a pids cgroup ybs makes for the task under its own cgroup (v2 where
//! the pids controller is there, else the v1 pids hierarchy), which each
//! sandbox helper joins before it confines its program, so every process
//! of the task's confined programs counts against one `pids.max`. When
//! the task ends, whatever is left in it is killed and the cgroup
//! removed.
//!
//! Without one (an unprivileged ybs with no delegated cgroup), the
//! helper sets `RLIMIT_NPROC` instead: inside the sandbox's user
//! namespace it counts the processes of that namespace only. As root it
//! would bind nothing (the kernel exempts root), so none is set and the
//! outputs say the bound is missing.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a cgroup could not be made or joined.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// A file of the cgroup hierarchy could not be read or written.
    #[error("{}: {source}", path.display())]
    File {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// No candidate worked: each one's kind and why.
    #[error("{}", reasons.join("; "))]
    Unavailable { reasons: Vec<String> },
    #[error("join the task's pids cgroup {}: {source}", dir.display())]
    Join {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

fn file_error(path: &Path) -> impl FnOnce(std::io::Error) -> CgroupError + '_ {
    move |source| CgroupError::File {
        path: path.to_owned(),
        source,
    }
}

/// A pids cgroup made for one task, removed (its processes killed) when
/// dropped.
#[derive(Debug)]
pub struct TaskCgroup {
    pub dir: PathBuf,
    /// `pids cgroup v2` or `pids cgroup v1`.
    pub kind: &'static str,
}

impl TaskCgroup {
    /// A new cgroup bounding its processes to `max`, or why there is none.
    pub fn create(max: u32) -> Result<Self, CgroupError> {
        let cgroups = std::fs::read_to_string("/proc/self/cgroup")
            .map_err(file_error(Path::new("/proc/self/cgroup")))?;
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo")
            .map_err(file_error(Path::new("/proc/self/mountinfo")))?;
        let mut reasons = Vec::new();
        for (kind, parent) in candidates(&cgroups, &mountinfo) {
            match Self::make(&parent, kind, max) {
                Ok(cgroup) => return Ok(cgroup),
                Err(error) => reasons.push(format!("{kind}: {error}")),
            }
        }
        if reasons.is_empty() {
            reasons.push("no pids cgroup controller is mounted".to_owned());
        }
        Err(CgroupError::Unavailable { reasons })
    }

    fn make(parent: &Path, kind: &'static str, max: u32) -> Result<Self, CgroupError> {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        remove_stale(parent);
        let dir = parent.join(format!(
            "ybs-{}-{}",
            std::process::id(),
            COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir(&dir).map_err(file_error(&dir))?;
        let cgroup = Self { dir, kind };
        let limit = cgroup.dir.join("pids.max");
        if !limit.exists() && kind == KIND_V2 {
            // The controller must be enabled for the children of the
            // parent; refused when the parent holds processes itself.
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+pids");
        }
        std::fs::write(&limit, max.to_string()).map_err(file_error(&limit))?;
        Ok(cgroup)
    }

    /// Kills every process in the cgroup, until it is empty.
    fn kill_all(&self) {
        for _ in 0..100 {
            let procs = std::fs::read_to_string(self.dir.join("cgroup.procs")).unwrap_or_default();
            let pids: Vec<i32> = procs
                .lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect();
            if pids.is_empty() {
                return;
            }
            for pid in pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Drop for TaskCgroup {
    fn drop(&mut self) {
        self.kill_all();
        for _ in 0..100 {
            match std::fs::remove_dir(&self.dir) {
                Err(error) if error.raw_os_error() == Some(nix::libc::EBUSY) => {
                    std::thread::sleep(std::time::Duration::from_millis(5));
                }
                _ => return,
            }
        }
    }
}

/// Removes the empty cgroups an earlier ybs left under `parent` (killed
/// with `kill -9`, it could not remove them): `ybs-<pid>-<n>` whose
/// process is gone. One still holding processes is left alone.
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix("ybs-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new("/proc").join(pid.to_string()).exists() {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

const KIND_V2: &str = "pids cgroup v2";
const KIND_V1: &str = "pids cgroup v1";

/// Where a task's cgroup may go, best first: this process's own cgroup
/// in the v2 hierarchy, then in the v1 pids hierarchy.
fn candidates(cgroups: &str, mountinfo: &str) -> Vec<(&'static str, PathBuf)> {
    let mut found = Vec::new();
    for line in cgroups.lines() {
        let mut fields = line.splitn(3, ':');
        let (Some(_), Some(controllers), Some(path)) =
            (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let relative = path.trim_start_matches('/');
        if controllers.is_empty() {
            if let Some(mount) = mount_of(mountinfo, "cgroup2", None) {
                let dir = mount.join(relative);
                let has_pids = std::fs::read_to_string(dir.join("cgroup.controllers"))
                    .is_ok_and(|text| text.split_whitespace().any(|c| c == "pids"));
                if has_pids {
                    found.insert(0, (KIND_V2, dir));
                }
            }
        } else if controllers.split(',').any(|c| c == "pids")
            && let Some(mount) = mount_of(mountinfo, "cgroup", Some("pids"))
        {
            found.push((KIND_V1, mount.join(relative)));
        }
    }
    found
}

/// The mount point of a file system of type `fstype` (with `option` among
/// its super options), from `/proc/self/mountinfo`.
fn mount_of(mountinfo: &str, fstype: &str, option: Option<&str>) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        let mut after = after.split_whitespace();
        let kind = after.next()?;
        let _source = after.next()?;
        let options = after.next().unwrap_or_default();
        let point = before.split_whitespace().nth(4)?;
        let wanted =
            kind == fstype && option.is_none_or(|option| options.split(',').any(|o| o == option));
        wanted.then(|| PathBuf::from(point.replace("\\040", " ")))
    })
}

/// Moves this process into the cgroup `dir` (the helper, before it
/// confines its program: every descendant is counted there).
pub fn join(dir: &Path) -> Result<(), CgroupError> {
    std::fs::write(dir.join("cgroup.procs"), std::process::id().to_string()).map_err(|source| {
        CgroupError::Join {
            dir: dir.to_owned(),
            source,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_pids_hierarchy() {
        let mountinfo = "\
30 25 0:26 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:27 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
";
        let cgroups = "8:pids:/a/b\n4:memory:/x\n0::/\n";
        assert_eq!(
            candidates(cgroups, mountinfo),
            [(KIND_V1, PathBuf::from("/sys/fs/cgroup/pids/a/b"))]
        );
        assert_eq!(mount_of(mountinfo, "cgroup2", None), None);
    }
}
