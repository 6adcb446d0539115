//! Everything about a task that can be wrong is found before anything
//! runs: workdir, provider, cassette, policy, tools. A problem here is a
//! usage error (exit 2) and no task starts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sha2::{Digest, Sha256};

use super::RunContext;
use super::workspace::TaskGit;
use crate::agent::Limits;
use crate::config::{Origin, TaskSettings};
use crate::llm::cassette::Cassette;
use crate::llm::failing::Failing;
use crate::llm::record::Recorder;
use crate::llm::replay::Replay;
use crate::llm::{self, API_KEY_VARS, Provider, ProviderConfig, ProviderError};
use crate::policy::Policy;
use crate::task::TaskSpec;
use crate::tools::{Registry, ToolCtx, builtin, external};

/// A task ready to run.
pub struct PreparedTask {
    pub task: TaskSpec,
    pub settings: TaskSettings,
    pub limits: Limits,
    pub registry: Registry,
    pub tool_ctx: ToolCtx,
    pub policy: Policy,
    pub policy_hash: String,
    pub provider: Box<dyn Provider>,
}

/// Why a task cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}: task `{task}`: {message}", file.display())]
pub struct PrepareError {
    pub file: PathBuf,
    pub task: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Opened cassettes, shared by the tasks that replay them.
#[derive(Default)]
pub struct Cassettes {
    open: HashMap<PathBuf, Arc<Cassette>>,
}

impl Cassettes {
    fn get(&mut self, path: &Path) -> Result<Arc<Cassette>, String> {
        if let Some(cassette) = self.open.get(path) {
            return Ok(cassette.clone());
        }
        let cassette = Cassette::open(path)?;
        self.open.insert(path.to_owned(), cassette.clone());
        Ok(cassette)
    }
}

/// Prepares one task.
pub fn prepare(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
) -> Result<PreparedTask, PrepareError> {
    let fail = |message: String, hint: Option<&str>| PrepareError {
        file: task.file.clone(),
        task: task.id.clone(),
        message,
        hint: hint.map(str::to_owned),
    };
    let settings = run.config.task_settings(task);
    let workdir = resolve_workdir(&run.cwd, task.workdir.as_deref()).map_err(|m| fail(m, None))?;
    let policy = Policy::new(&task.policy).map_err(|e| fail(e.to_string(), None))?;
    let policy_hash = hash_policy(task);
    let provider = build_provider(run, cassettes, task, &settings).map_err(|(m, h)| fail(m, h))?;
    let registry = build_registry(run, task).map_err(|m| fail(m, None))?;
    let commit_enabled = task.commit.enabled && !run.no_commit && run.config.git.auto_commit;
    if commit_enabled && !run.allow_dirty {
        match TaskGit::open(&workdir) {
            Ok(git) => {
                if let Some(paths) = git.dirty() {
                    return Err(fail(
                        format!("the work tree has uncommitted changes: {paths}"),
                        Some(
                            "commit or stash them first, or pass --allow-dirty (your changes then stay out of the task's commit), or --no-commit",
                        ),
                    ));
                }
            }
            Err(error) => {
                return Err(fail(
                    format!("git: {error}"),
                    Some("pass --no-commit to run without git"),
                ));
            }
        }
    }
    let tool_ctx = ToolCtx {
        allowed_roots: std::iter::once(workdir.clone())
            .chain(run.config.safety.allowed_paths.iter().filter_map(|p| {
                expand_home(Path::new(p), run.home.as_deref())
                    .canonicalize()
                    .ok()
            }))
            .collect(),
        workdir,
        blocked_paths: run
            .config
            .safety
            .blocked_paths
            .iter()
            .map(|p| {
                expand_home(Path::new(p), run.home.as_deref())
                    .display()
                    .to_string()
            })
            .collect(),
        protected_paths: protected_paths(run, task),
        env: run.child_env.clone(),
        shell_timeout: Duration::from_secs(30),
        max_shell_timeout: Duration::from_secs(3600),
        output_cap_bytes: 1 << 20,
    };
    let limits = Limits {
        max_iterations: settings.max_iterations,
        timeout: settings.timeout,
        max_total_tokens: settings.max_total_tokens,
        max_cost_usd: settings.max_cost_usd,
        max_tool_output_chars: settings.max_tool_output_chars,
        ..Limits::default()
    };
    Ok(PreparedTask {
        task: task.clone(),
        settings,
        limits,
        registry,
        tool_ctx,
        policy,
        policy_hash,
        provider,
    })
}

fn resolve_workdir(cwd: &Path, workdir: Option<&Path>) -> Result<PathBuf, String> {
    let path = match workdir {
        Some(dir) if dir.is_absolute() => dir.to_owned(),
        Some(dir) => cwd.join(dir),
        None => cwd.to_owned(),
    };
    let canonical = path
        .canonicalize()
        .map_err(|error| format!("workdir `{}` cannot be used: {error}", path.display()))?;
    if !canonical.is_dir() {
        return Err(format!("workdir `{}` is not a directory", path.display()));
    }
    Ok(canonical)
}

fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_owned(),
    }
}

/// Files no tool may write: the run's task file and the runner's GitHub
/// control files (SECURITY S6).
fn protected_paths(run: &RunContext, task: &TaskSpec) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = vec![run.cwd.join(&task.file)];
    paths.extend(run.policy_file.iter().cloned());
    for var in [
        "GITHUB_ENV",
        "GITHUB_PATH",
        "GITHUB_OUTPUT",
        "GITHUB_STEP_SUMMARY",
    ] {
        if let Some(value) = std::env::var_os(var) {
            paths.push(PathBuf::from(value));
        }
    }
    paths
        .into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

fn hash_policy(task: &TaskSpec) -> String {
    let text = serde_json::to_string(&task.policy).unwrap_or_default();
    let digest = Sha256::digest(text.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// The built-in tools of the task. External tools are discovered when the
/// task starts (`super::tools::task_tools`), so a tool added by an earlier
/// task of the batch is found; here only what can never work is refused.
fn build_registry(run: &RunContext, task: &TaskSpec) -> Result<Registry, String> {
    let mut registry = Registry::new();
    let names: Vec<String> = match &task.tools.builtin {
        Some(names) => names.clone(),
        None => builtin::NAMES.iter().map(|n| (*n).to_owned()).collect(),
    };
    for name in names {
        let tool = builtin::get(&name).ok_or_else(|| format!("unknown built-in tool `{name}`"))?;
        registry.add(tool);
    }
    for name in &task.tools.external {
        if builtin::NAMES.contains(&name.as_str()) {
            return Err(format!(
                "external tool `{name}`: a built-in tool has that name"
            ));
        }
        let disabled = run
            .config
            .tools
            .external
            .iter()
            .any(|tool| &tool.name == name && !tool.enabled);
        if disabled {
            return Err(format!(
                "external tool `{name}` is disabled in the config (`enabled: false`)"
            ));
        }
        if !name.contains('/') && !external::discover::valid_tool_name(name) {
            return Err(format!(
                "external tool `{name}`: not a tool name (letters, digits, `_` and `-`) nor a path (with a `/`)"
            ));
        }
    }
    Ok(registry)
}

type BuildError = (String, Option<&'static str>);

fn build_provider(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
    settings: &TaskSettings,
) -> Result<Box<dyn Provider>, BuildError> {
    if settings.provider == "replay" {
        let path = match &run.cassette {
            Some(path) => path.clone(),
            None => sibling_cassette(&run.cwd, &task.file).ok_or((
                format!("provider `replay` needs a cassette, and `{}` has none beside it", task.file.display()),
                Some("pass --cassette FILE, or put <task-file-stem>.cassette.json next to the task file"),
            ))?,
        };
        let cassette = cassettes.get(&path).map_err(|m| (m, None))?;
        return Ok(Box::new(Replay::new(cassette, task.id.clone())));
    }
    let mut config = ProviderConfig::new(settings.provider.clone(), settings.model.clone());
    config.endpoint = settings.endpoint.clone();
    config.text_tool_calls = settings.text_tool_calls;
    config.request_timeout = settings.llm_timeout;
    // SECURITY S5: an endpoint chosen by the repository (task file or
    // ./.ybs.json) never receives the operator's vendor key, unless it is
    // the vendor's own endpoint.
    let hide_keys = matches!(
        settings.endpoint_origin,
        Origin::TaskFile | Origin::Repository
    ) && settings
        .endpoint
        .as_deref()
        .is_some_and(|endpoint| !is_vendor_endpoint(endpoint));
    let env = |name: &str| {
        if hide_keys && API_KEY_VARS.contains(&name) {
            return None;
        }
        std::env::var(name).ok()
    };
    let provider = match llm::build(&config, &env) {
        Ok(provider) => provider,
        Err(error @ (ProviderError::MissingKey { .. } | ProviderError::Auth { .. })) => {
            Box::new(Failing::new(settings.provider.clone(), error))
        }
        Err(error) => return Err((error.to_string(), None)),
    };
    Ok(match &run.recorder {
        Some(writer) => Box::new(Recorder::new(provider, writer.clone(), task.id.clone())),
        None => provider,
    })
}

fn is_vendor_endpoint(endpoint: &str) -> bool {
    reqwest::Url::parse(endpoint)
        .ok()
        .and_then(|url| url.host_str().map(str::to_owned))
        .is_some_and(|host| host == "api.openai.com" || host == "api.anthropic.com")
}

/// `tasks/x.yaml` → `tasks/x.cassette.json`, if it exists.
fn sibling_cassette(cwd: &Path, task_file: &Path) -> Option<PathBuf> {
    let stem = task_file.file_stem()?.to_string_lossy().to_string();
    let path = cwd
        .join(task_file)
        .with_file_name(format!("{stem}.cassette.json"));
    path.is_file().then_some(path)
}
