//! Which layers work on this machine: probed once per process by running
//! `ybs __sandbox-probe`, unless an answer kept earlier in this boot says
//! every layer works.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use super::{HELPER, LAYER_LANDLOCK, LAYER_NAMESPACES, LAYER_SECCOMP, SELF_EXE, probe_cache, spec};

/// What the probe found for each layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// User, mount and PID namespaces with a private `/proc`.
    pub namespaces: Result<(), String>,
    /// `fully_enforced` or `partially_enforced`.
    pub landlock: Result<&'static str, String>,
    pub seccomp: Result<(), String>,
    /// The exec guard (a seccomp filter with a listener, and
    /// `SECCOMP_USER_NOTIF_FLAG_CONTINUE`, Linux 5.5): not required by
    /// [`Probe::available`] nor listed by [`Probe::missing`], since only
    /// a sandbox with deny rules needs it.
    pub exec_guard: Result<(), String>,
}

impl Probe {
    /// Landlock and seccomp work (the least any confinement needs).
    pub fn available(&self) -> bool {
        self.landlock.is_ok() && self.seccomp.is_ok()
    }

    /// Every missing layer with why, `layer: reason`.
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if let Err(reason) = &self.namespaces {
            missing.push(format!("{LAYER_NAMESPACES}: {reason}"));
        }
        if let Err(reason) = &self.landlock {
            missing.push(format!("{LAYER_LANDLOCK}: {reason}"));
        }
        if let Err(reason) = &self.seccomp {
            missing.push(format!("{LAYER_SECCOMP}: {reason}"));
        }
        missing
    }
}

/// Where the probe's answer is kept for the boot ([`probe_cache`]):
/// ybs's cache directory, once [`probe_in_background`] named it.
pub(super) static PROBE_CACHE: OnceLock<PathBuf> = OnceLock::new();

/// Probes once per process which layers work, by running
/// `ybs __sandbox-probe` (namespaces cannot be tried in a multi-threaded
/// process), unless an answer kept earlier in this boot for this binary
/// and user says every layer works ([`probe_cache`]).
pub fn probe() -> &'static Probe {
    static PROBE: OnceLock<Probe> = OnceLock::new();
    PROBE.get_or_init(cached_probe)
}

/// Starts [`probe`] on a thread, so it overlaps with whatever the caller
/// does next; the first real use waits for it. `cache`: ybs's cache
/// directory, where a probe that found every layer is kept for the boot.
pub fn probe_in_background(cache: Option<PathBuf>) {
    if let Some(dir) = cache {
        let _ = PROBE_CACHE.set(dir);
    }
    let _ = std::thread::Builder::new()
        .name("ybs-sandbox-probe".to_owned())
        .spawn(|| {
            probe();
        });
}

#[cfg(target_os = "linux")]
pub(super) fn cached_probe() -> Probe {
    let kept = PROBE_CACHE
        .get()
        .filter(|_| HELPER.load(Ordering::Relaxed))
        .and_then(|dir| probe_cache::Key::current().map(|key| (dir, key)));
    if let Some((dir, key)) = &kept
        && let Some(probe) = probe_cache::load(dir, key)
    {
        return probe;
    }
    let probe = run_probe();
    if let Some((dir, key)) = &kept {
        probe_cache::store(dir, key, &probe);
    }
    probe
}

#[cfg(not(target_os = "linux"))]
pub(super) fn cached_probe() -> Probe {
    run_probe()
}

#[cfg(target_os = "linux")]
pub(super) fn run_probe() -> Probe {
    let fail = |reason: String| Probe {
        namespaces: Err(reason.clone()),
        landlock: Err(reason.clone()),
        seccomp: Err(reason.clone()),
        exec_guard: Err(reason),
    };
    if !HELPER.load(Ordering::Relaxed) {
        return fail(
            "the sandbox helper is part of the ybs binary, not of this program".to_owned(),
        );
    }
    let output = std::process::Command::new(SELF_EXE)
        .arg(spec::PROBE_ARG)
        .env_clear()
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    let output = match output {
        Ok(output) => output,
        Err(error) => return fail(format!("cannot run the sandbox probe: {error}")),
    };
    let Ok(report) = serde_json::from_slice::<serde_json::Value>(&output.stdout) else {
        return fail(format!("the sandbox probe failed ({})", output.status));
    };
    // A layer's field: `null` when it works, else why not.
    let error = |key: &str| {
        report[key]
            .as_str()
            .map_or(Ok(()), |reason| Err(reason.to_owned()))
    };
    let landlock = match (
        report["landlock"]["status"].as_str(),
        report["landlock"]["error"].as_str(),
    ) {
        (Some("fully_enforced"), _) => Ok("fully_enforced"),
        (Some("partially_enforced"), _) => Ok("partially_enforced"),
        (_, Some(reason)) => Err(reason.to_owned()),
        _ => Err("Landlock: the probe said nothing".to_owned()),
    };
    Probe {
        namespaces: error("namespaces"),
        landlock,
        seccomp: error("seccomp"),
        exec_guard: error("exec_guard"),
    }
}

#[cfg(not(target_os = "linux"))]
pub(super) fn run_probe() -> Probe {
    let reason = "kernel confinement is implemented for Linux only".to_owned();
    Probe {
        namespaces: Err(reason.clone()),
        landlock: Err(reason.clone()),
        seccomp: Err(reason.clone()),
        exec_guard: Err(reason),
    }
}
