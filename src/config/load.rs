//! Reading every layer (docs/configuration.md) and resolving them once.
//!
//! Lowest first: `/etc/ybs/config.json`, `~/.config/ybs/config.json`,
//! `~/.ybs.json`, `./.ybs.json`, `--config FILE` (or `YBS_CONFIG`), then
//! `YBS_*` variables, then flags. Missing optional files are skipped; a
//! missing `--config` file is an error. Every diagnostic of every file is
//! reported.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::core::Environ;
use crate::core::decode::Decoder;
use crate::core::decode::yaml::{Node, parse};
use crate::core::exit;
use crate::policy::PolicySpec;
use crate::task::{BUILTIN_TOOLS, Diagnostic, Diagnostics, PROVIDERS, load_policy_str};

use super::ceiling::{OperatorLayers, RepositoryConfig, apply};
use super::env::{EnvError, config_file, env_layer};
use super::file::decode_config;
use super::layer::{Combine, ConfigLayer};
use super::settings::{Config, Origin, OverTasks, TaskCeilings};

/// The system-wide config file.
pub const SYSTEM_CONFIG: &str = "/etc/ybs/config.json";

/// Where settings come from; injectable so tests need no real home or env.
pub struct Sources<'a> {
    /// The directory ybs runs in (`./.ybs.json`, relative `--config`).
    pub cwd: &'a Path,
    /// `None` when there is no home directory: the user files are skipped.
    pub home: Option<&'a Path>,
    /// Normally [`SYSTEM_CONFIG`].
    pub system_config: &'a Path,
    /// Looks up an environment variable; normally in the [`Environ`] the
    /// CLI read at its entry ([`process_environ`]).
    pub env: &'a dyn Fn(&str) -> Option<String>,
}

/// The process environment, read once for a command by the CLI's entry
/// (`cli::main`, its one caller) and handed down from there. Everything
/// under `config` (the runner, the agent, tools, reports) gets its
/// variables from the [`Environ`] this returns, never from the process
/// (`tests/suite/architecture.rs` checks both).
pub fn process_environ() -> Environ {
    Environ::new(std::env::vars_os())
}

/// The directory ybs runs in.
pub fn process_cwd() -> std::io::Result<PathBuf> {
    std::env::current_dir()
}

/// What flags say: the top layer. `None` (or `false`) means "not given".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Overrides {
    /// `--config FILE`: read last of the files; must exist.
    pub config_file: Option<PathBuf>,
    pub provider: Option<String>,
    pub model: Option<String>,
    pub endpoint: Option<String>,
    pub temperature: Option<f64>,
    pub max_iterations: Option<u32>,
    /// Every task's time limit.
    pub timeout: Option<Duration>,
    pub out: Option<PathBuf>,
    pub cassette: Option<PathBuf>,
    /// `--no-sandbox` (docs/security.md S1).
    pub no_sandbox: bool,
}

/// A configuration that cannot be used. Every variant is a usage error
/// (exit 2, docs/cli.md).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// Problems in config or policy files, each with `file:line:col`.
    #[error("{0}")]
    Files(Diagnostics),
    #[error("invalid value `{}` for environment variable {}: expected {}", .0.value, .0.name, .0.expected)]
    Env(EnvError),
    #[error("invalid value `{value}` for `--{flag}`: expected {expected}")]
    Flag {
        flag: String,
        value: String,
        expected: String,
    },
}

impl ConfigError {
    /// The hint for an environment or flag error. File diagnostics carry
    /// their own hints, one per diagnostic (and their Display includes them).
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::Files(_) => None,
            Self::Env(error) => error.hint.clone(),
            Self::Flag { flag, .. } => {
                Some(format!("the command's `--help` says what --{flag} takes"))
            }
        }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Files(_) | Self::Env(_) | Self::Flag { .. } => exit::USAGE,
        }
    }
}

/// One config file to read.
struct Candidate {
    /// Where to read it.
    path: PathBuf,
    /// How messages name it: `--config` as the user wrote it.
    shown: PathBuf,
    required: bool,
    origin: Origin,
}

/// Reads and resolves the whole configuration.
pub fn load(overrides: &Overrides, sources: &Sources<'_>) -> Result<Config, ConfigError> {
    let mut diagnostics = Vec::new();
    let mut layers: Vec<Read> = Vec::new();
    let mut files = Vec::new();
    for candidate in candidates(overrides, sources) {
        let Some(text) = read_candidate(&candidate, &mut diagnostics) else {
            continue;
        };
        let repository = candidate.origin == Origin::Repository;
        // A file with errors still takes part, so a widening in it is
        // reported with the rest.
        let (layer, errors) = decode_file(&candidate.shown, &text, repository);
        diagnostics.extend(errors);
        layers.push(Read {
            layer,
            origin: candidate.origin,
            // The repository's tree, for the positions of values it may
            // not widen.
            root: if repository { parse(&text).0 } else { None },
            shown: candidate.shown,
        });
        files.push(candidate.path);
    }
    shadow_repository_tools(&mut layers);
    let env = env_layer(sources.env);
    let flags = flag_layer(overrides);
    let (env, flags) = match (env, flags) {
        (Ok(env), Ok(flags)) => (env, flags),
        _ if !diagnostics.is_empty() => {
            return Err(ConfigError::Files(Diagnostics(diagnostics)));
        }
        (Err(error), _) => return Err(ConfigError::Env(error)),
        (_, Err(error)) => return Err(error),
    };
    let endpoint_origin = [(&flags, Origin::Operator), (&env, Origin::Operator)]
        .into_iter()
        .chain(layers.iter().rev().map(|read| (&read.layer, read.origin)))
        .find(|(layer, _)| layer.llm.endpoint.is_some())
        .map(|(_, origin)| origin);
    // Where the provider and the model that beat a task's own come from
    // (a flag is the user's choice in this very command: not named).
    let source_of = |set: fn(&ConfigLayer) -> bool| {
        if set(&flags) {
            return None;
        }
        if set(&env) {
            return Some("a YBS_* variable".to_owned());
        }
        layers
            .iter()
            .rev()
            .find(|read| set(&read.layer))
            .map(|read| read.shown.display().to_string())
    };
    let provider_from = source_of(|layer| layer.llm.provider.is_some());
    let model_from = source_of(|layer| layer.llm.model.is_some());
    let from_files = layers
        .iter()
        .rev()
        .map(|read| read.layer.clone())
        .reduce(Combine::combine)
        .unwrap_or_default();
    let mut merged = flags.clone().combine(env.clone()).combine(from_files);
    let operator = OperatorLayers {
        layers: [
            (&flags, "a command-line flag".to_owned()),
            (&env, "a YBS_* variable".to_owned()),
        ]
        .into_iter()
        .chain(
            layers
                .iter()
                .rev()
                .filter(|read| read.origin == Origin::Operator)
                .map(|read| (&read.layer, read.shown.display().to_string())),
        )
        .collect(),
    };
    let repository = layers.iter().find_map(|read| {
        Some(RepositoryConfig {
            layer: &read.layer,
            root: read.root.as_ref()?,
            path: &read.shown,
        })
    });
    apply_ceilings(
        &mut merged,
        &operator,
        repository.as_ref(),
        &mut diagnostics,
    );
    if !diagnostics.is_empty() {
        return Err(ConfigError::Files(Diagnostics(diagnostics)));
    }
    let mut over_tasks = over_tasks(&merged, endpoint_origin, &operator);
    over_tasks.provider_from = provider_from;
    over_tasks.model_from = model_from;
    Ok(Config::resolve(merged, over_tasks, files))
}

/// What the operator's settings hold over every task: the defaults a
/// task may narrow, and the ceilings it may not pass.
fn over_tasks(
    merged: &ConfigLayer,
    endpoint_origin: Option<Origin>,
    operator: &OperatorLayers<'_>,
) -> OverTasks {
    OverTasks {
        llm: merged.llm.clone(),
        endpoint_origin,
        provider_from: None,
        model_from: None,
        max_iterations: merged.agent.max_iterations,
        timeout: merged.run.timeout,
        max_total_tokens: merged.agent.max_total_tokens,
        max_cost_usd: merged.agent.max_cost_usd,
        max_tool_output_chars: merged.context.max_tool_output_chars,
        ceilings: TaskCeilings {
            max_iterations: operator.ceiling(|l| l.agent.max_iterations),
            timeout: operator.ceiling(|l| l.run.timeout),
            max_total_tokens: operator.ceiling(|l| l.agent.max_total_tokens),
            max_cost_usd: operator.ceiling(|l| l.agent.max_cost_usd),
            max_tool_output_chars: operator.ceiling(|l| l.context.max_tool_output_chars),
            max_tokens: operator.ceiling(|l| l.llm.max_tokens),
        },
    }
}

/// The text of one candidate config file; `None` (with a diagnostic
/// when it matters) when it is missing, too large, or not a file.
fn read_candidate(candidate: &Candidate, diagnostics: &mut Vec<Diagnostic>) -> Option<String> {
    // A FIFO found in place of a config file nobody named (a task's
    // `mkfifo .ybs.json`) would block the read forever; `--config`
    // may be a pipe on purpose (`<(...)`).
    if !candidate.required
        && std::fs::metadata(&candidate.path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir())
    {
        diagnostics.push(Diagnostic::whole_file(
            &candidate.shown,
            "the config file is not a regular file (a FIFO, socket or device)",
        ));
        return None;
    }
    match read_bounded(&candidate.path) {
        Ok(Some(text)) => Some(text),
        Ok(None) => {
            diagnostics.push(Diagnostic::whole_file(
                &candidate.shown,
                format!("the config file is larger than {MAX_CONFIG_BYTES} bytes"),
            ));
            None
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound && !candidate.required => None,
        // An empty directory is the sandbox's placeholder for a
        // missing `./.ybs.json` left by a crash: absent.
        Err(_)
            if !candidate.required
                && std::fs::read_dir(&candidate.path)
                    .is_ok_and(|mut entries| entries.next().is_none()) =>
        {
            None
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
            diagnostics.push(
                Diagnostic::whole_file(&candidate.shown, "config file not found").with_hint(
                    "give `--config` a path from the directory ybs runs in (or absolute)",
                ),
            );
            None
        }
        Err(error) => {
            let message = format!("cannot read the config file: {error}");
            diagnostics.push(
                Diagnostic::whole_file(&candidate.shown, message)
                    .with_hint("make it a readable file, or pass another with `--config`"),
            );
            None
        }
    }
}

/// The largest config file read: `./.ybs.json` is repository content, and
/// memory stays bounded whatever its size.
const MAX_CONFIG_BYTES: u64 = 1 << 20;

/// A file's text, or `None` when it is over [`MAX_CONFIG_BYTES`] (having
/// read one byte more than that at most).
fn read_bounded(path: &Path) -> std::io::Result<Option<String>> {
    use std::io::Read as _;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_CONFIG_BYTES + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_CONFIG_BYTES {
        return Ok(None);
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|error| std::io::Error::new(std::io::ErrorKind::InvalidData, error))
}

/// One config file, read and decoded.
struct Read {
    layer: ConfigLayer,
    origin: Origin,
    /// How messages name the file.
    shown: PathBuf,
    /// The repository's config as a tree (`None` for operator files).
    root: Option<Node>,
}

/// An operator's `tools.external` entry wins over the repository's of the
/// same name, whatever the files' order; the repository's is kept as
/// shadowed (docs/security.md S5).
fn shadow_repository_tools(layers: &mut [Read]) {
    let operator: Vec<String> = layers
        .iter()
        .filter(|read| read.origin == Origin::Operator)
        .flat_map(|read| read.layer.tools.external.keys().cloned())
        .collect();
    for read in layers
        .iter_mut()
        .filter(|read| read.origin == Origin::Repository)
    {
        for name in &operator {
            if let Some(tool) = read.layer.tools.external.remove(name) {
                read.layer.tools.shadowed.push(tool);
            }
        }
    }
}

/// Every key that bounds trust or spend: the repository's value applies
/// only when narrower than the operator's (docs/security.md S5).
fn apply_ceilings(
    merged: &mut ConfigLayer,
    operator: &OperatorLayers<'_>,
    repository: Option<&RepositoryConfig<'_>>,
    diagnostics: &mut Vec<Diagnostic>,
) {
    macro_rules! ceiling {
        ($key:expr, $($field:ident).+) => {
            apply(
                merged,
                operator,
                repository,
                $key,
                |layer| layer.$($field).+,
                |layer, value| layer.$($field).+ = value,
                diagnostics,
            )
        };
    }
    ceiling!("agent.max_iterations", agent.max_iterations);
    ceiling!("agent.max_total_tokens", agent.max_total_tokens);
    ceiling!("agent.max_cost_usd", agent.max_cost_usd);
    ceiling!("agent.timeout", run.timeout);
    ceiling!("agent.retry_attempts", agent.retry_attempts);
    ceiling!(
        "context.max_tool_output_chars",
        context.max_tool_output_chars
    );
    // The size of every request, so of what each step costs.
    ceiling!("context.max_tokens", context.max_tokens);
    ceiling!("context.compaction_threshold", context.compaction_threshold);
    ceiling!("llm.max_tokens", llm.max_tokens);
    ceiling!("llm.timeout_seconds", llm.timeout);
    ceiling!("llm.stream_idle_timeout_seconds", llm.idle_timeout);
    ceiling!("llm.total_timeout_seconds", llm.total_timeout);
    ceiling!("llm.max_response_bytes", llm.max_response_bytes);
    ceiling!("git.auto_commit", git.auto_commit);
    ceiling!("safety.max_task_file_bytes", safety.max_task_file_bytes);
    ceiling!("safety.max_processes", safety.max_processes);
    for name in BUILTIN_TOOLS {
        let tool = |layer: &ConfigLayer| layer.tools.builtin.get(name).cloned();
        apply(
            merged,
            operator,
            repository,
            &format!("tools.builtin.{name}.enabled"),
            |layer| tool(layer).and_then(|t| t.enabled),
            |layer, value| {
                layer
                    .tools
                    .builtin
                    .entry(name.to_owned())
                    .or_default()
                    .enabled = value;
            },
            diagnostics,
        );
        apply(
            merged,
            operator,
            repository,
            &format!("tools.builtin.{name}.timeout_seconds"),
            |layer| tool(layer).and_then(|t| t.timeout),
            |layer, value| {
                layer
                    .tools
                    .builtin
                    .entry(name.to_owned())
                    .or_default()
                    .timeout = value;
            },
            diagnostics,
        );
    }
}

/// Decodes one config file's text (JSON or YAML).
pub fn parse_config(
    path: &Path,
    text: &str,
    repository: bool,
) -> Result<ConfigLayer, Vec<Diagnostic>> {
    let (layer, diagnostics) = decode_file(path, text, repository);
    if diagnostics.is_empty() {
        Ok(layer)
    } else {
        Err(diagnostics)
    }
}

/// What a config file says, as far as it can be read, and its errors.
fn decode_file(path: &Path, text: &str, repository: bool) -> (ConfigLayer, Vec<Diagnostic>) {
    let mut decoder = Decoder::new(path);
    let (root, errors) = parse(text);
    decoder.yaml_errors(errors);
    let layer = root
        .map(|root| decode_config(&mut decoder, &root, repository))
        .unwrap_or_default();
    (layer, decoder.finish())
}

fn candidates(overrides: &Overrides, sources: &Sources<'_>) -> Vec<Candidate> {
    let optional = |path: PathBuf, origin| Candidate {
        shown: path.clone(),
        path,
        required: false,
        origin,
    };
    let mut list = vec![optional(
        sources.system_config.to_path_buf(),
        Origin::Operator,
    )];
    if let Some(home) = sources.home {
        list.push(optional(
            home.join(".config/ybs/config.json"),
            Origin::Operator,
        ));
        list.push(optional(home.join(".ybs.json"), Origin::Operator));
    }
    let local = sources.cwd.join(".ybs.json");
    let same_as_home = sources
        .home
        .is_some_and(|home| same_file(&home.join(".ybs.json"), &local));
    if !same_as_home {
        list.push(optional(local, Origin::Repository));
    }
    let explicit = overrides
        .config_file
        .clone()
        .or_else(|| config_file(sources.env));
    if let Some(path) = explicit {
        list.push(Candidate {
            path: sources.cwd.join(&path),
            shown: path,
            required: true,
            origin: Origin::Operator,
        });
    }
    list
}

fn same_file(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

fn flag_layer(overrides: &Overrides) -> Result<ConfigLayer, ConfigError> {
    let flag_error = |flag: &str, value: &str, expected: &str| ConfigError::Flag {
        flag: flag.to_owned(),
        value: value.to_owned(),
        expected: expected.to_owned(),
    };
    if let Some(provider) = &overrides.provider
        && !PROVIDERS.contains(&provider.as_str())
    {
        return Err(flag_error(
            "provider",
            provider,
            &format!("one of {}", PROVIDERS.join(", ")),
        ));
    }
    if let Some(endpoint) = &overrides.endpoint
        && !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
    {
        return Err(flag_error(
            "endpoint",
            endpoint,
            "a URL starting with http:// or https://",
        ));
    }
    if let Some(temperature) = overrides.temperature
        && !(temperature.is_finite() && temperature >= 0.0)
    {
        return Err(flag_error(
            "temperature",
            &temperature.to_string(),
            "a number of 0 or more",
        ));
    }
    if overrides.max_iterations == Some(0) {
        return Err(flag_error(
            "max-iterations",
            "0",
            "a whole number of 1 or more",
        ));
    }
    let mut layer = ConfigLayer::default();
    layer.llm.provider.clone_from(&overrides.provider);
    layer.llm.model.clone_from(&overrides.model);
    layer.llm.endpoint.clone_from(&overrides.endpoint);
    layer.llm.temperature = overrides.temperature;
    layer.agent.max_iterations = overrides.max_iterations;
    layer.run.timeout = overrides.timeout;
    layer.run.out.clone_from(&overrides.out);
    layer.run.cassette.clone_from(&overrides.cassette);
    if overrides.no_sandbox {
        layer.safety.sandbox_enabled = Some(false);
    }
    Ok(layer)
}

/// Reads a `--policy FILE`: the policy mapping (docs/policy.md) at the top level.
pub fn load_policy_file(path: &Path) -> Result<PolicySpec, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| {
        let message = if error.kind() == std::io::ErrorKind::NotFound {
            "policy file not found".to_owned()
        } else {
            format!("cannot read the policy file: {error}")
        };
        ConfigError::Files(Diagnostics(vec![
            Diagnostic::whole_file(path, message).with_hint(
                "give `--policy` a path from the directory ybs runs in (or absolute); docs/policy.md shows the file's form",
            ),
        ]))
    })?;
    load_policy_str(path, &text).map_err(ConfigError::Files)
}
