//! Stage 4 of task assembly: the task's policy, from the guards of
//! `safety.*`, the operator's ceiling and the task's layers.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::core::Environ;
use crate::policy::{GuardSettings, Policy, PolicySpec, SandboxMode};

use super::super::error::SetupError;
use super::workdir::allowed_roots;

/// What a task's policy is built from.
pub struct PolicyInputs<'a> {
    pub config: &'a Config,
    pub home: Option<&'a Path>,
    /// ybs's environment: the guards read `$PATH` from it.
    pub environ: &'a Environ,
    pub operator: Option<&'a PolicySpec>,
    pub workdir: &'a Path,
    pub protected: Vec<PathBuf>,
    pub layers: &'a [PolicySpec],
    /// The confinement the task's shell commands get ([`sandbox_mode`]).
    pub sandbox: SandboxMode,
}

/// Builds a task's policy (guards from `safety.*`, the operator ceiling,
/// the task's layers) and checks its `examples`. Shared by `run`,
/// `validate` and `policy explain`.
pub fn task_policy(inputs: &PolicyInputs<'_>) -> Result<Policy, SetupError> {
    let policy = build_policy(inputs)?;
    let failures = policy.check_examples(policy.examples());
    if !failures.is_empty() {
        let listed: Vec<String> = failures.iter().map(ToString::to_string).collect();
        return Err(SetupError::Policy {
            message: format!("policy examples fail: {}", listed.join("; ")),
            hint: Some(EXAMPLES_HINT),
        });
    }
    Ok(policy)
}

/// True if and only if a task's shell commands run under the sandbox's
/// exec guard: the full sandbox, the guard found by the probe, and not
/// turned off (`safety.sandbox_exec_guard: false`).
pub fn exec_guard(config: &Config, sandbox: SandboxMode) -> bool {
    sandbox == SandboxMode::Full
        && config.safety.sandbox_exec_guard
        && crate::tools::sandbox::probe().exec_guard.is_ok()
}

/// Said with failing policy examples.
pub const EXAMPLES_HINT: &str =
    "fix the rules or the examples; `ybs policy explain 'CALL'` shows how a call is decided";

/// [`task_policy`] without checking the examples.
pub fn build_policy(inputs: &PolicyInputs<'_>) -> Result<Policy, SetupError> {
    let mut guards = GuardSettings::new(inputs.workdir.to_owned(), inputs.home.map(Path::to_owned));
    guards.allowed_roots = allowed_roots(inputs.config, inputs.home);
    guards
        .blocked_commands
        .clone_from(&inputs.config.safety.blocked_commands);
    guards
        .blocked_paths
        .clone_from(&inputs.config.safety.blocked_paths);
    guards.protected_paths.clone_from(&inputs.protected);
    guards.program_path = inputs.environ.var_os("PATH").map(ToOwned::to_owned);
    guards.sandbox = inputs.sandbox;
    guards.exec_guard = exec_guard(inputs.config, inputs.sandbox);
    Policy::build(inputs.operator, inputs.layers, guards).map_err(|e| SetupError::Policy {
        message: e.to_string(),
        hint: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::prepare::fixture::Site;

    fn inputs<'a>(
        site: &'a Site,
        operator: Option<&'a PolicySpec>,
        layers: &'a [PolicySpec],
    ) -> PolicyInputs<'a> {
        PolicyInputs {
            config: &site.run.config,
            home: Some(&site.home),
            environ: &site.run.environ,
            operator,
            workdir: &site.repo,
            protected: Vec::new(),
            layers,
            sandbox: SandboxMode::Full,
        }
    }

    #[test]
    fn the_operators_policy_is_a_ceiling_the_task_cannot_raise() {
        let site = Site::new();
        let task = site.task("id: t\nprompt: p\npolicy: { allow: [read_file, write_file] }\n");
        let alone = task_policy(&inputs(&site, None, &task.policy)).unwrap();
        assert!(alone.may_allow("write_file", false));
        let ceiling = site
            .task("id: o\nprompt: p\npolicy: { allow: [read_file] }\n")
            .policy
            .remove(0);
        let merged = task_policy(&inputs(&site, Some(&ceiling), &task.policy)).unwrap();
        assert!(merged.may_allow("read_file", false));
        assert!(!merged.may_allow("write_file", false));
        assert_ne!(alone.hash(), merged.hash());
    }

    #[test]
    fn failing_examples_refuse_the_task_with_the_hint() {
        let site = Site::new();
        let task = site.task(
            "id: t\nprompt: p\npolicy:\n  allow: [read_file]\n  examples:\n    allow: ['write_file(a.txt)']\n",
        );
        let error = task_policy(&inputs(&site, None, &task.policy)).unwrap_err();
        assert!(
            error.to_string().starts_with("policy examples fail: ")
                && error.to_string().contains("write_file(a.txt)"),
            "{error}"
        );
        assert_eq!(error.hint_text(), Some(EXAMPLES_HINT));
        // Without the examples' check the policy builds.
        assert!(build_policy(&inputs(&site, None, &task.policy)).is_ok());
    }
}
