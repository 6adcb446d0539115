//! Hardening of ybs itself, the subreaper and the children it reaps: the
//! live children ybs started, and the escapees it kills and reaps.

use std::io;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tokio::process::Command;

/// True once ybs is a child subreaper and must reap re-parented orphans.
pub(super) static SUBREAPER: AtomicBool = AtomicBool::new(false);

/// Process ids (= process group ids) of children started by [`run`](super::run) that
/// are still running; only maintained while ybs is a subreaper.
pub(super) static LIVE: Mutex<Vec<i32>> = Mutex::new(Vec::new());

pub(super) fn live_children() -> std::sync::MutexGuard<'static, Vec<i32>> {
    LIVE.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A child ybs keeps for a task (a resident sandbox), spawned under the
/// registry lock like [`spawn_registered`]: never taken for an orphan.
/// [`forget_live`] when it is gone.
pub(crate) fn spawn_registered_std(
    command: &mut std::process::Command,
) -> io::Result<std::process::Child> {
    if !SUBREAPER.load(Ordering::Relaxed) {
        return command.spawn();
    }
    let mut live = live_children();
    let child = command.spawn()?;
    if let Ok(pid) = i32::try_from(child.id()) {
        live.push(pid);
    }
    Ok(child)
}

/// Forgets a child registered by [`spawn_registered_std`] once reaped.
pub(crate) fn forget_live(pid: u32) {
    if SUBREAPER.load(Ordering::Relaxed) {
        live_children().retain(|live| i32::try_from(pid).ok() != Some(*live));
    }
}

/// Spawns under the registry lock, so [`reap_escapees`] never mistakes a
/// child being started for an orphan.
pub(super) fn spawn_registered(command: &mut Command) -> io::Result<tokio::process::Child> {
    if !SUBREAPER.load(Ordering::Relaxed) {
        return command.spawn();
    }
    let mut live = live_children();
    let child = command.spawn()?;
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        live.push(pid);
    }
    Ok(child)
}

/// Makes ybs non-dumpable, so no child (same uid) can read
/// `/proc/<ybs>/environ` or attach to it, and a child subreaper, so
/// processes that escape their group are re-parented to ybs and killed
/// after their run. Call once at start-up, before any task runs. A no-op
/// outside Linux.
pub fn harden_self() -> io::Result<()> {
    #[cfg(target_os = "linux")]
    {
        nix::sys::prctl::set_dumpable(false)?;
        nix::sys::prctl::set_child_subreaper(true)?;
        SUBREAPER.store(true, Ordering::Relaxed);
    }
    Ok(())
}

/// Kills and reaps every child of ybs that no live [`run`](super::run) owns: orphans
/// re-parented to ybs (as subreaper) after escaping their process group.
/// Children in ybs's own process group are left alone (they were started
/// by something else in ybs), as are members of a live run's group (its
/// own drain and kill handle them). Repeats until none is left, since
/// killing one may re-parent its own children to ybs.
pub async fn reap_escapees() {
    for _ in 0..32 {
        let strays = stray_children();
        if strays.is_empty() {
            return;
        }
        let reaped = tokio::task::spawn_blocking(move || {
            for pid in strays {
                let _ = nix::sys::signal::kill(pid, Signal::SIGKILL);
                let _ = nix::sys::wait::waitpid(pid, None);
            }
        })
        .await;
        if reaped.is_err() {
            return;
        }
    }
}

pub(super) fn stray_children() -> Vec<Pid> {
    let own_group = nix::unistd::getpgrp();
    let children = direct_children();
    if children.is_empty() {
        return children;
    }
    let live = live_children();
    children
        .into_iter()
        .filter(|pid| !live.contains(&pid.as_raw()))
        .filter(|pid| match nix::unistd::getpgid(Some(*pid)) {
            Ok(group) => group != own_group && !live.contains(&group.as_raw()),
            Err(_) => false,
        })
        .collect()
}

/// ybs's direct children, from `/proc/self/task/*/children`.
pub(super) fn direct_children() -> Vec<Pid> {
    let mut children = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return children;
    };
    for task in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(task.path().join("children")) else {
            continue;
        };
        children.extend(
            list.split_ascii_whitespace()
                .filter_map(|pid| pid.parse().ok())
                .map(Pid::from_raw),
        );
    }
    children
}
