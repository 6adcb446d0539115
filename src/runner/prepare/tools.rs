//! Stage 6 of task assembly: the task's built-in tools, offered or
//! withheld by its policy, and the context its tool calls run in.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::policy::Policy;
use crate::task::TaskSpec;
use crate::tools::sandbox::Sandbox;
use crate::tools::sandbox::exec_views::DeniedProgram;
use crate::tools::{Registry, ToolCtx, builtin, external};

use super::super::RunContext;
use super::super::dirs::own_dirs;
use super::super::error::SetupError;
use super::sandbox::child_env_for;
use super::workdir::{allowed_roots, expand_home};

/// The built-in tools of the task. External tools are discovered when the
/// task starts (`super::tools::task_tools`), so a tool added by an earlier
/// task of the batch is found; here only what can never work is refused.
/// A built-in tool every call of which the policy would refuse is not
/// offered (its schema only costs tokens and invites denied calls): the
/// registry keeps it as withheld.
pub(super) fn build_registry(
    run: &RunContext,
    task: &TaskSpec,
    policy: &Policy,
) -> Result<Registry, SetupError> {
    let tools = |message: String| SetupError::Tools { message };
    let mut registry = Registry::new();
    let names: Vec<String> = match &task.tools.builtin {
        Some(names) => names.clone(),
        None => builtin::NAMES.iter().map(|n| (*n).to_owned()).collect(),
    };
    let disabled = |name: &str| {
        run.config
            .tools
            .builtin
            .get(name)
            .is_some_and(|tool| !tool.enabled)
    };
    for name in names {
        if disabled(&name) {
            // `tools.builtin.NAME.enabled: false`: not offered, so a call
            // to it is refused as unknown (a task naming it was refused
            // by `Config::check_task` already).
            if task.tools.builtin.is_some() {
                return Err(tools(format!(
                    "built-in tool `{name}` is disabled in the config (`enabled: false`)"
                )));
            }
            continue;
        }
        let tool =
            builtin::get(&name).ok_or_else(|| tools(format!("unknown built-in tool `{name}`")))?;
        if policy.may_allow(&name, run.approver.is_some()) {
            registry.add(tool);
        } else {
            registry.withhold(tool);
        }
    }
    // `tools.caller`: offered like any tool; a call pauses the task.
    for caller in &task.tools.caller {
        registry.add(std::sync::Arc::new(crate::tools::caller::CallerTool::new(
            &caller.name,
            &caller.description,
            caller.parameters.clone(),
        )));
    }
    for name in &task.tools.external {
        if builtin::NAMES.contains(&name.as_str()) {
            return Err(tools(format!(
                "external tool `{name}`: a built-in tool has that name"
            )));
        }
        let disabled = run
            .config
            .tools
            .external
            .iter()
            // The first of a name: a shadowed repository entry says nothing.
            .find(|tool| &tool.name == name)
            .is_some_and(|tool| !tool.enabled);
        if disabled {
            return Err(tools(format!(
                "external tool `{name}` is disabled in the config (`enabled: false`)"
            )));
        }
        if !name.contains('/') && !external::discover::valid_tool_name(name) {
            return Err(tools(format!(
                "external tool `{name}`: not a tool name (letters, digits, `_` and `-`) nor a path (with a `/`)"
            )));
        }
    }
    Ok(registry)
}

/// The context of the task's tool calls: its roots, what they never read
/// or write, the children's environment and the sandbox.
pub(super) fn tool_ctx(
    run: &RunContext,
    workdir: PathBuf,
    guarded: Vec<PathBuf>,
    sandbox: Option<Arc<Sandbox>>,
) -> ToolCtx {
    let mut env = run.child_env.clone();
    child_env_for(&mut env, sandbox.as_deref(), &workdir, &run.config);
    // `tools.builtin.run_shell.timeout_seconds`: the default, and the
    // longest a call may ask for.
    let shell = &run.config.tools.builtin["run_shell"];
    // ybs's own directories, unless the task works inside one.
    let own: Vec<PathBuf> = own_dirs(run.home.as_deref(), &run.environ)
        .into_iter()
        .filter(|dir| !workdir.starts_with(dir))
        .collect();
    ToolCtx {
        allowed_roots: std::iter::once(workdir.clone())
            .chain(allowed_roots(&run.config, run.home.as_deref()))
            .collect(),
        workdir,
        blocked_paths: run
            .config
            .safety
            .blocked_paths
            .iter()
            .map(|p| expand_home(Path::new(p), run.home.as_deref()))
            .chain(own)
            .map(|p| p.display().to_string())
            .collect(),
        protected_paths: guarded,
        env,
        shell_timeout: shell.timeout.unwrap_or(Duration::from_secs(30)),
        max_shell_timeout: shell.max_timeout.unwrap_or(Duration::from_secs(3600)),
        output_cap_bytes: 1 << 20,
        sandbox,
        shell_sandbox: None,
    }
}

/// `run_shell`'s own sandbox: the task's with the exec guard of the
/// policy's `deny` rules (docs/policy.md, "The exec guard"), when the
/// policy was built with the guard and has rules it can enforce; `None`
/// (the task's sandbox) otherwise. Checks, external tools and MCP
/// servers keep the task's.
pub(super) fn shell_sandbox(
    policy: &Policy,
    sandbox: Option<&Arc<Sandbox>>,
) -> Option<Arc<Sandbox>> {
    let sandbox = sandbox?;
    if !policy.guard_settings().exec_guard {
        return None;
    }
    let globs = policy.exec_deny_globs();
    if globs.is_empty() {
        return None;
    }
    let programs: Vec<DeniedProgram> = policy
        .exec_deny_programs()
        .into_iter()
        .map(|(name, path)| DeniedProgram { name, path })
        .collect();
    Some(Arc::new(sandbox.with_exec_deny(&globs, &programs)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::prepare::fixture::Site;
    use crate::runner::prepare::policy::{PolicyInputs, task_policy};

    fn policy(site: &Site, task: &TaskSpec) -> Policy {
        task_policy(&PolicyInputs {
            config: &site.run.config,
            home: Some(&site.home),
            environ: &site.run.environ,
            operator: None,
            workdir: &site.repo,
            protected: Vec::new(),
            layers: &task.policy,
            sandbox: crate::policy::SandboxMode::Full,
        })
        .unwrap()
    }

    #[test]
    fn the_registry_offers_the_named_tools_the_policy_may_allow() {
        let site = Site::new();
        let task = site.task(
            "id: t\nprompt: p\ntools: { builtin: [read_file, write_file] }\npolicy: { allow: [read_file], deny: [write_file] }\n",
        );
        let registry = build_registry(&site.run, &task, &policy(&site, &task)).unwrap();
        assert_eq!(registry.names(), ["read_file"]);
        assert_eq!(registry.withheld_names(), ["write_file"]);
    }

    #[test]
    fn tools_that_can_never_work_are_refused() {
        let mut site = Site::new();
        let refused = |site: &Site, yaml: &str| {
            let task = site.task(yaml);
            match build_registry(&site.run, &task, &policy(site, &task)) {
                Ok(_) => panic!("{yaml}: a registry"),
                Err(error) => error.to_string(),
            }
        };
        // The task file's loader refuses the name first; a task built
        // otherwise (`ybs chat`) meets this check.
        let mut task = site.task("id: t\nprompt: p\n");
        task.tools.builtin = Some(vec!["read_fil".to_owned()]);
        let Err(error) = build_registry(&site.run, &task, &policy(&site, &task)) else {
            panic!("an unknown built-in tool offered");
        };
        assert_eq!(error.to_string(), "unknown built-in tool `read_fil`");
        assert_eq!(
            refused(
                &site,
                "id: t\nprompt: p\ntools: { external: [read_file] }\n"
            ),
            "external tool `read_file`: a built-in tool has that name"
        );
        assert!(
            refused(
                &site,
                "id: t\nprompt: p\ntools: { external: ['bad name'] }\n"
            )
            .contains("not a tool name"),
        );
        site.run
            .config
            .tools
            .builtin
            .get_mut("write_file")
            .unwrap()
            .enabled = false;
        assert_eq!(
            refused(
                &site,
                "id: t\nprompt: p\ntools: { builtin: [write_file] }\n"
            ),
            "built-in tool `write_file` is disabled in the config (`enabled: false`)"
        );
        // Not named: not offered, and no error.
        let task = site.task("id: t\nprompt: p\n");
        let registry = build_registry(&site.run, &task, &policy(&site, &task)).unwrap();
        assert!(!registry.names().contains(&"write_file".to_owned()));
    }

    #[test]
    fn tool_calls_work_in_the_workdir_and_never_in_ybs_own_directories() {
        let mut site = Site::new();
        site.run.config.safety.blocked_paths = vec!["~/.ssh".to_owned()];
        let guarded = vec![site.repo.join(".git")];
        let ctx = tool_ctx(&site.run, site.repo.clone(), guarded.clone(), None);
        assert_eq!(ctx.workdir, site.repo);
        assert_eq!(ctx.allowed_roots, [site.repo.clone()]);
        assert_eq!(ctx.protected_paths, guarded);
        assert_eq!(
            ctx.blocked_paths,
            [
                site.home.join(".ssh").display().to_string(),
                site.home.join(".local/state/ybs").display().to_string(),
                site.home.join(".cache/ybs").display().to_string(),
            ]
        );
        assert_eq!(ctx.shell_timeout, Duration::from_secs(30));
        assert!(ctx.sandbox.is_none());
    }
}
