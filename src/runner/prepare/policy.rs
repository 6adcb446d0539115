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
    Policy::build(inputs.operator, inputs.layers, guards).map_err(|e| SetupError::Policy {
        message: e.to_string(),
        hint: None,
    })
}
