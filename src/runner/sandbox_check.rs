//! `ybs sandbox check`: which layers of the kernel confinement work on
//! this machine, what is missing and why, and when AppArmor's restriction
//! of user namespaces is the cause, the fix (docs/sandbox.md, "Checking
//! the machine").

use serde::Serialize;

use crate::tools::sandbox::{self, apparmor};

/// One layer and whether it works.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Layer {
    pub layer: &'static str,
    pub ok: bool,
    /// How it works (Landlock's enforcement), or why it does not.
    pub detail: Option<String>,
}

/// What `ybs sandbox check` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SandboxCheck {
    /// Every layer works: tasks run fully confined.
    pub ok: bool,
    pub layers: Vec<Layer>,
    /// The missing layers, `layer: reason`.
    pub missing: Vec<String>,
    /// The exec guard (docs/sandbox.md, "The exec guard"): not a layer
    /// the sandbox needs, so not in `ok`; without it the policy's parser
    /// decides alone under `deny` rules on `run_shell`.
    pub exec_guard: Layer,
    /// Why namespaces are refused, when ybs can tell.
    pub cause: Option<String>,
    /// The commands that fix it, one a line.
    pub fix: Vec<String>,
}

/// Probes this machine now (never from a kept answer).
pub fn check() -> SandboxCheck {
    let probe = sandbox::probe();
    let restricted = apparmor::current(probe.namespaces.is_err());
    from_probe(probe, restricted.as_ref())
}

fn from_probe(probe: &sandbox::Probe, restricted: Option<&apparmor::Restricted>) -> SandboxCheck {
    let layer = |layer, result: Result<Option<String>, &String>| Layer {
        layer,
        ok: result.is_ok(),
        detail: result.unwrap_or_else(|reason| Some(reason.clone())),
    };
    let layers = vec![
        layer(
            sandbox::LAYER_NAMESPACES,
            probe.namespaces.as_ref().map(|()| None),
        ),
        layer(
            sandbox::LAYER_LANDLOCK,
            probe
                .landlock
                .as_ref()
                .map(|status| Some((*status).to_owned())),
        ),
        layer(
            sandbox::LAYER_SECCOMP,
            probe.seccomp.as_ref().map(|()| None),
        ),
    ];
    SandboxCheck {
        ok: layers.iter().all(|layer| layer.ok),
        layers,
        missing: probe.missing(),
        exec_guard: layer(
            sandbox::LAYER_EXEC_GUARD,
            probe
                .exec_guard
                .as_ref()
                .map(|()| Some("deny rules on run_shell hold at exec".to_owned())),
        ),
        cause: restricted.map(apparmor::Restricted::cause),
        fix: restricted
            .map(apparmor::Restricted::commands)
            .unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn an_apparmor_refusal_gives_the_cause_and_the_fix() {
        let probe = sandbox::Probe {
            namespaces: Err("cannot write /proc/self/uid_map: Permission denied".to_owned()),
            landlock: Ok("fully_enforced"),
            seccomp: Ok(()),
            exec_guard: Ok(()),
        };
        let restricted = apparmor::diagnose(
            probe.namespaces.is_err(),
            Some("1\n"),
            Some(Path::new("/home/runner/ybs")),
            false,
        );
        let check = from_probe(&probe, restricted.as_ref());
        assert!(!check.ok);
        assert_eq!(
            check.missing,
            ["namespaces: cannot write /proc/self/uid_map: Permission denied"]
        );
        assert!(check.layers[1].ok);
        assert_eq!(check.layers[1].detail.as_deref(), Some("fully_enforced"));
        assert!(check.cause.unwrap().contains("AppArmor"));
        assert_eq!(check.fix.len(), 4);
        assert!(check.fix[2].starts_with("sudo apparmor_parser -r"));

        // Without the restriction there is nothing to say about AppArmor.
        let restricted = apparmor::diagnose(probe.namespaces.is_err(), Some("0\n"), None, false);
        let check = from_probe(&probe, restricted.as_ref());
        assert_eq!(check.cause, None);
        assert!(check.fix.is_empty());
    }
}
