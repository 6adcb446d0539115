//! `ybs tools`: the tools outside any task. `list|schema|invoke` here,
//! `serve|status` (an MCP server over the same registry) in [`serve`].
//!
//! The operator at the prompt stands where a task would: naming a tool
//! (`schema NAME`, `invoke NAME`) enables it as a task's `tools.external`
//! would, and `--policy FILE` is the policy (without it, `invoke NAME`
//! is allowed: the operator asked for exactly that call). `invoke` goes
//! the agent's way: check the parameters, decide, run, read the envelope.

use std::io::{IsTerminal, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

pub mod serve;

use super::RunError;
use super::load::Loaded;
use super::options;
use crate::core::Environ;
use crate::core::exit::{self, Failure};
use crate::policy::{CallView, Policy, Verdict};
use crate::report::Console;
use crate::report::log::neutralize;
use crate::runner::dirs::cache_dir;
use crate::runner::dirs::discovery_settings;
use crate::runner::tools::policy_enables;
use crate::runner::{self, RunFlags, RunOptions, Threads};
use crate::tools::external::cache::load_metrics;
use crate::tools::external::{
    Catalog, Enable, Entry, ExternalTool, Metrics, Status, ToolStats, cache,
};
use crate::tools::sandbox::Sandbox;
use crate::tools::{ChildEnv, Tool, ToolCtx};

/// What `ybs tools` was asked.
pub enum ToolsAction {
    /// `list [--json]`.
    List { json: bool },
    /// `schema NAME`.
    Schema { name: String },
    /// `invoke NAME --input JSON` (`-`: stdin).
    Invoke { name: String, input: String },
    /// `serve [--builtin]`: the registry as an MCP server on stdio.
    Serve(serve::ServeOptions),
    /// `status [--json]`: metrics of the running `serve`s.
    Status { json: bool },
}

/// Runs `action` with the loaded config and `--policy`. Every line of
/// its output goes to `console`; what stops it (the session cannot open,
/// bad flags, no such tool) is an error for the CLI to print.
pub fn tools(
    loaded: Loaded,
    action: &ToolsAction,
    console: Box<dyn Console>,
) -> Result<ToolsOutcome, ToolsError> {
    let serving = matches!(action, ToolsAction::Serve(_));
    let session = Toolbox::open(loaded, console, serving)?;
    match action {
        ToolsAction::List { json } => list(&session, *json),
        ToolsAction::Schema { name } => schema(&session, name),
        ToolsAction::Invoke { name, input } => invoke(&session, name, input),
        ToolsAction::Serve(options) => serve::serve(&session, options),
        ToolsAction::Status { json } => Ok(serve::status(&session, *json)),
    }
}

/// How a `ybs tools` command ended when nothing stopped it; the CLI
/// turns it into the exit code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolsOutcome {
    Done,
    /// `invoke`: the call failed, or was refused, and said so on stdout.
    ToolFailed,
}

/// Why a `ybs tools` command stopped (printed by the CLI).
#[derive(Debug, thiserror::Error)]
pub enum ToolsError {
    /// The session, the flags or the tool named: a usage error.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The tool is there but cannot give what was asked (`schema` of a
    /// tool with no usable schema).
    #[error("{0}")]
    Unusable(String),
}

impl Failure for ToolsError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Run(error) => error.exit_code(),
            Self::Unusable(_) => exit::TASK_FAILED,
        }
    }
    fn hint(&self) -> Option<String> {
        match self {
            Self::Run(error) => error.hint(),
            Self::Unusable(_) => None,
        }
    }
}

/// A setup step's error, as the CLI prints it.
fn setup(error: runner::SetupError) -> RunError {
    RunError::Usage {
        message: error.to_string(),
        hint: error.hint_text().map(str::to_owned),
    }
}

/// The session of a `ybs tools` command, with what a command outside
/// any task adds: the operator's policy and the sandbox of the current
/// directory, and the children's environment in it.
pub(super) struct Toolbox {
    pub(super) session: runner::Session,
    pub(super) printer: Box<dyn Console>,
    pub(super) policy: Option<Policy>,
    pub(super) env: ChildEnv,
    /// Confines every tool process (docs/security.md S1); `None`: `--no-sandbox`.
    sandbox: Option<Arc<Sandbox>>,
}

impl Toolbox {
    /// With `serving`, the runtime is a multi-thread one, a worker a core:
    /// `ybs tools serve` runs concurrent calls on every core.
    fn open(
        loaded: Loaded,
        mut printer: Box<dyn Console>,
        serving: bool,
    ) -> Result<Self, RunError> {
        let threads = if serving {
            Threads::EveryCore
        } else {
            Threads::Current
        };
        let options = RunOptions::local(RunFlags::default(), &loaded);
        let entry = options::Entry::default();
        let session = runner::Session::open(loaded, options, entry, threads, printer.as_mut())?;
        let policy = session.policy_here().map_err(setup)?;
        let (sandbox, info, env) = session.sandbox_here().map_err(setup)?;
        if sandbox.is_none() {
            // Not `warn`: shown even with --quiet.
            printer.error(&format!(
                "warning: no sandbox: external tools run UNCONFINED ({})",
                info.reason.as_deref().unwrap_or("unknown reason")
            ));
        }
        Ok(Self {
            session,
            printer,
            policy,
            env,
            sandbox,
        })
    }

    /// ybs's environment, read once with the config.
    pub(super) fn environ(&self) -> &Environ {
        &self.session.context.environ
    }

    /// Every tool, with `names` enabled by the operator's naming them.
    fn discover(&self, names: &[String]) -> Result<Catalog, RunError> {
        Ok(self.session.runtime()?.block_on(self.discover_async(names)))
    }

    /// [`Self::discover`], inside the runtime.
    pub(super) async fn discover_async(&self, names: &[String]) -> Catalog {
        let context = &self.session.context;
        let mut settings = discovery_settings(
            &context.config.tools,
            &context.cwd,
            (context.home.as_deref(), &context.environ),
        );
        settings.sandbox.clone_from(&self.sandbox);
        let policy = |name: &str| {
            self.policy
                .as_ref()
                .is_some_and(|policy| policy_enables(policy, name))
        };
        let enable = Enable {
            names,
            named_by: "cli",
            policy: &policy,
        };
        crate::tools::external::discover(&settings, &enable, &self.env).await
    }

    pub(super) fn cache_dir(&self) -> Option<PathBuf> {
        let context = &self.session.context;
        cache_dir(context.home.as_deref(), &context.environ)
    }

    /// The entry called `name`, or the usage error saying it does not exist.
    fn find<'c>(&self, catalog: &'c Catalog, name: &str) -> Result<&'c Entry, RunError> {
        catalog.get(name).filter(|entry| entry.source != crate::tools::external::Source::Task || entry.status != Status::MissingBinary).ok_or_else(|| {
            let known: Vec<&str> = catalog
                .entries
                .iter()
                .map(|entry| entry.name.as_str())
                .filter(|known| *known != name)
                .collect();
            let hint = crate::core::text::closest(name, known.iter().copied())
                .map(|close| format!("did you mean `{close}`?"))
                .unwrap_or_else(|| "see `ybs tools list`".to_owned());
            RunError::Usage {
                message: format!(
                    "no external tool named `{name}` in ./tools, ~/.ybs/tools, tools.search_paths or tools.external"
                ),
                hint: Some(hint),
            }
        })
    }
}

fn list(session: &Toolbox, json: bool) -> Result<ToolsOutcome, ToolsError> {
    let catalog = session.discover(&[])?;
    let persisted = session
        .cache_dir()
        .map(|dir| load_metrics(&dir))
        .unwrap_or_default();
    let stats_of = |entry: &Entry| {
        let key = entry.canonical.to_string_lossy();
        let mut stats = ToolStats::default();
        for persisted in persisted.iter().filter(|p| p.path == key) {
            stats.merge(&persisted.stats);
        }
        stats.summary(&entry.name)
    };
    if json {
        let tools: Vec<Value> = catalog
            .entries
            .iter()
            .map(|entry| (entry, false))
            .chain(catalog.shadowed.iter().map(|entry| (entry, true)))
            .map(|(entry, shadowed)| entry_json(entry, shadowed, &stats_of(entry)))
            .collect();
        session
            .printer
            .result(&safe_json(&json!({ "tools": tools }), false));
        return Ok(ToolsOutcome::Done);
    }
    if catalog.entries.is_empty() {
        session.printer.result(
            "no external tools: put executables in ./tools or ~/.ybs/tools, or list them under tools.external",
        );
        return Ok(ToolsOutcome::Done);
    }
    let mut rows = vec![
        [
            "NAME", "STATUS", "SOURCE", "CALLS", "FAILED", "TIMEOUTS", "P50", "P95", "DETAIL",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    let listed = catalog
        .entries
        .iter()
        .map(|entry| (entry, false))
        .chain(catalog.shadowed.iter().map(|entry| (entry, true)));
    for (entry, shadowed) in listed {
        let metrics = stats_of(entry);
        let detail = match entry.status {
            Status::Ready if !shadowed => entry.description(),
            _ => entry.detail.clone().unwrap_or_default(),
        };
        let detail = neutralize(&one_line(&detail, 100));
        let millis = |value: u64| {
            if metrics.calls == 0 {
                "-".to_owned()
            } else {
                format!("{value}ms")
            }
        };
        rows.push(vec![
            neutralize(&entry.name),
            if shadowed {
                "shadowed".to_owned()
            } else {
                entry.status.as_str().to_owned()
            },
            entry.source.as_str().to_owned(),
            metrics.calls.to_string(),
            metrics.failures.to_string(),
            metrics.timeouts.to_string(),
            millis(metrics.p50_ms),
            millis(metrics.p95_ms),
            detail,
        ]);
    }
    session.printer.result(&table(&rows));
    Ok(ToolsOutcome::Done)
}

/// One entry of `ybs tools list --json`.
fn entry_json(entry: &Entry, shadowed: bool, metrics: &crate::core::event::ToolMetrics) -> Value {
    json!({
        "name": entry.name,
        "status": if shadowed { "shadowed" } else { entry.status.as_str() },
        "reason": entry.detail,
        "source": entry.source.as_str(),
        "path": entry.path,
        "enabled_by": entry.enabled_by,
        "schema_from": entry.schema_from,
        "description": entry.description(),
        "timeout_seconds": entry.timeout.as_secs_f64(),
        "offered": !shadowed && entry.status == Status::Ready && entry.enabled_by.is_some(),
        "metrics": {
            "calls": metrics.calls,
            "successes": metrics.successes,
            "failures": metrics.failures,
            "timeouts": metrics.timeouts,
            "total_ms": metrics.total_ms,
            "p50_ms": metrics.p50_ms,
            "p95_ms": metrics.p95_ms,
        },
    })
}

/// Left-aligned columns separated by two spaces; the last is not padded.
fn table(rows: &[Vec<String>]) -> String {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column + 1 == columns {
                    line.push_str(cell);
                } else {
                    line.push_str(cell);
                    line.push_str(&" ".repeat(widths[column] - cell.chars().count() + 2));
                }
            }
            line.trim_end().to_owned()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn one_line(text: &str, max: usize) -> String {
    let line = text.lines().next().unwrap_or_default();
    if line.chars().count() > max {
        line.chars().take(max - 1).collect::<String>() + "…"
    } else {
        line.to_owned()
    }
}

fn schema(session: &Toolbox, name: &str) -> Result<ToolsOutcome, ToolsError> {
    // A built-in tool, as the model is offered it (no external tool may
    // take a built-in's name).
    if let Some(tool) = crate::tools::builtin::get(name) {
        let spec = tool.spec();
        let spec = json!({
            "name": spec.name,
            "description": spec.description,
            "parameters": spec.parameters,
        });
        session.printer.result(&safe_json(&spec, true));
        return Ok(ToolsOutcome::Done);
    }
    let catalog = session.discover(&[name.to_owned()])?;
    let entry = session.find(&catalog, name)?;
    match (&entry.schema, entry.status) {
        (Some(schema), Status::Ready | Status::Disabled) => {
            let spec = json!({
                "name": entry.name,
                "description": entry.description(),
                "parameters": schema.json_schema(),
            });
            session.printer.result(&safe_json(&spec, true));
            Ok(ToolsOutcome::Done)
        }
        _ => Err(ToolsError::Unusable(format!(
            "`{}` has no usable schema: {}",
            entry.name,
            status_text(entry)
        ))),
    }
}

/// An entry's status, and its detail after a colon when it has one.
fn status_text(entry: &Entry) -> String {
    match entry.detail.as_deref() {
        Some(detail) => format!("{}: {detail}", entry.status.as_str()),
        None => entry.status.as_str().to_owned(),
    }
}

fn invoke(session: &Toolbox, name: &str, input: &str) -> Result<ToolsOutcome, ToolsError> {
    let pretty = std::io::stdout().is_terminal();
    let input = if input == "-" {
        let mut text = String::new();
        if let Err(error) = std::io::stdin().read_to_string(&mut text) {
            return Err(RunError::usage(
                format!("cannot read --input from stdin: {error}"),
                Some("pass the arguments as --input '{…}' or pipe a JSON object"),
            )
            .into());
        }
        text
    } else {
        input.to_owned()
    };
    let arguments: Value = match serde_json::from_str(&input) {
        Ok(value @ Value::Object(_)) => value,
        Ok(_) => {
            return Err(RunError::usage(
                "--input must be one JSON object, like '{\"path\": \"src\"}'",
                None,
            )
            .into());
        }
        Err(error) => {
            return Err(RunError::usage(
                format!("--input is not valid JSON: {error}"),
                Some("`ybs tools schema NAME` shows the arguments the tool takes"),
            )
            .into());
        }
    };
    let catalog = session.discover(&[name.to_owned()])?;
    let entry = session.find(&catalog, name)?;
    let metrics = Metrics::new();
    let Some(tool) = ExternalTool::new(entry, metrics.clone()) else {
        let message = format!("`{}` cannot run: {}", entry.name, status_text(entry));
        session.printer.result(&safe_json(
            &json!({"success": false, "error": message}),
            pretty,
        ));
        return Ok(ToolsOutcome::ToolFailed);
    };
    let ctx = tool_ctx(session);
    if let Err(error) = tool.target(&arguments, &ctx) {
        return Err(RunError::usage(error.to_string(), None).into());
    }
    if let Some(policy) = &session.policy {
        let decision = policy.decide(&CallView {
            tool: &entry.name,
            ..CallView::default()
        });
        if decision.verdict != Verdict::Allow {
            let error = format!(
                "{} by policy (rule `{}`); the call was not run",
                if decision.verdict == Verdict::Deny {
                    "denied"
                } else {
                    "needs approval, which nobody can give here,"
                },
                decision.rule
            );
            session.printer.result(&safe_json(
                &json!({"success": false, "error": error}),
                pretty,
            ));
            return Ok(ToolsOutcome::ToolFailed);
        }
    }
    let params = match tool.check(&arguments) {
        Ok(params) => params,
        Err(message) => {
            return Err(RunError::usage(message.to_string(), None).into());
        }
    };
    let invocation = session
        .session
        .runtime()?
        .block_on(tool.invoke(params, &ctx));
    session
        .printer
        .result(&safe_json(&invocation.envelope, pretty));
    if let Some(dir) = session.cache_dir() {
        let _ = cache::record_metrics(&dir, &metrics.snapshot());
    }
    Ok(if invocation.succeeded() {
        ToolsOutcome::Done
    } else {
        ToolsOutcome::ToolFailed
    })
}

/// The context of a call made from the command line: the current
/// directory as workdir, the scrubbed environment, 1 MiB output cap.
pub(super) fn tool_ctx(session: &Toolbox) -> ToolCtx {
    let context = &session.session.context;
    let workdir = context
        .cwd
        .canonicalize()
        .unwrap_or_else(|_| context.cwd.clone());
    ToolCtx {
        allowed_roots: vec![workdir.clone()],
        workdir,
        blocked_paths: context
            .config
            .safety
            .blocked_paths
            .iter()
            .map(|path| {
                runner::prepare::workdir::expand_home(Path::new(path), context.home.as_deref())
                    .display()
                    .to_string()
            })
            .collect(),
        protected_paths: Vec::new(),
        env: session.env.clone(),
        shell_timeout: std::time::Duration::from_secs(30),
        max_shell_timeout: std::time::Duration::from_secs(3600),
        output_cap_bytes: 1 << 20,
        sandbox: session.sandbox.clone(),
        // `run_shell` is not served here (`serve::SERVED_BUILTINS`).
        shell_sandbox: None,
    }
}

/// JSON text with the characters a terminal or CI log could be tricked
/// by (bidi controls, line separators) written as `\uXXXX` escapes, which
/// is still the same JSON (docs/security.md S8). serde_json already escapes
/// control characters.
fn safe_json(value: &Value, pretty: bool) -> String {
    let text = if pretty {
        serde_json::to_string_pretty(value).unwrap_or_default()
    } else {
        value.to_string()
    };
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{FEFF}')
        {
            out.push_str(&format!("\\u{:04x}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_output_escapes_bidi_and_stays_json() {
        let value = json!({"result": "a\u{202E}b\u{2028}c"});
        let text = safe_json(&value, false);
        assert_eq!(text, r#"{"result":"a\u202eb\u2028c"}"#);
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    #[test]
    fn table_aligns_columns() {
        let rows = vec![
            vec!["NAME".to_owned(), "STATUS".to_owned(), "DETAIL".to_owned()],
            vec!["a".to_owned(), "ready".to_owned(), "x".to_owned()],
        ];
        assert_eq!(table(&rows), "NAME  STATUS  DETAIL\na     ready   x");
    }
}
