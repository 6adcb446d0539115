//! External tools for one task: discovered anew at the start of each task
//! (so a tool added between tasks of a batch is found), their call
//! metrics emitted at the end and added to the persisted totals.

use std::path::Path;

use super::RunContext;
use super::dirs::{cache_dir, discovery_settings};
use super::prepare::PreparedTask;
use crate::agent::Emitter;
use crate::core::event::{Event, ToolMetricsReported};
use crate::policy::{CallView, Policy, RuleRef, Verdict};
use crate::tools::Registry;
use crate::tools::builtin;
use crate::tools::external::{self, Enable, ExternalTool, Metrics, Source, Status, cache};
use crate::tools::mcp::{self, McpServer, ServerSpec};

/// The tools one task is offered, and where their calls are counted.
pub struct TaskTools {
    pub registry: Registry,
    pub metrics: Metrics,
    /// Why tools the task names are not offered; emitted as `task.note`s
    /// once the task has started.
    pub notes: Vec<String>,
    /// The task's running MCP servers, stopped by [`stop_mcp`].
    pub mcp: Vec<std::sync::Arc<McpServer>>,
    /// Declared tools and servers that could not start or be offered:
    /// `(message, required)`. Each is a `warning: ` note (console and
    /// summary); a required one makes the task an error.
    pub unavailable: Vec<(String, bool)>,
}

impl TaskTools {
    /// The first tool or server the task requires that is not there.
    pub fn missing_required(&self) -> Option<&str> {
        self.unavailable
            .iter()
            .find(|(_, required)| *required)
            .map(|(message, _)| message.as_str())
    }
}

/// `ybs validate`'s look at the external tools `task` requires: the
/// message `ybs run` ends the task with (`tool_unavailable`) for each
/// one no discovery finds at all, with where the task file requires it.
/// Nothing is run: the tools' schemas are not asked for.
pub fn required_not_found(
    run: &RunContext,
    task: &crate::task::TaskSpec,
) -> Vec<(String, crate::core::span::Span)> {
    if task.tools.required_external.is_empty() {
        return Vec::new();
    }
    let settings = discovery_settings(
        &run.config.tools,
        &run.cwd,
        (run.home.as_deref(), &run.environ),
    );
    let names = &task.tools.external;
    let enable = Enable {
        names,
        named_by: "task",
        policy: &|_| false,
    };
    let catalog = external::discover::scan(&settings, &enable);
    let mut missing = Vec::new();
    for required in &task.tools.required_external {
        let name = &required.value;
        let found = catalog
            .entries
            .iter()
            .filter(|entry| names_entry(name, entry));
        let mut any = false;
        for entry in found {
            any = true;
            if matches!(
                entry.status,
                Status::MissingBinary | Status::NotExecutable | Status::InvalidSchema
            ) {
                missing.push((not_offered(entry), required.span));
            }
        }
        if !any {
            missing.push((
                format!("external tool `{name}` is not offered to the model: it was not found"),
                required.span,
            ));
        }
    }
    missing
        .into_iter()
        .map(|(message, span)| {
            (
                format!("{message} (the task marks it `required: true`)"),
                span,
            )
        })
        .collect()
}

/// Returns true if and only if an `allow` rule of `policy` names the tool
/// (the default verdict does not count): the policy enables it.
pub fn policy_enables(policy: &Policy, name: &str) -> bool {
    let decision = policy.decide(&CallView {
        tool: name,
        ..CallView::default()
    });
    decision.verdict == Verdict::Allow && matches!(decision.rule, RuleRef::Listed { .. })
}

/// Discovers the external tools for `prepared` now and builds its
/// registry: the built-ins plus every ready, enabled external tool and
/// every MCP server's tools. A tool the task names that cannot be offered
/// is explained in a note. A tool, built-in, external or MCP, every call
/// of which the policy would refuse is not offered (kept as withheld) and
/// one note names them all.
pub async fn task_tools(run: &RunContext, prepared: &PreparedTask) -> TaskTools {
    let mut registry = prepared.registry.clone();
    let metrics = Metrics::new();
    let mut notes = Vec::new();
    let names = &prepared.task.tools.external;
    let policy = |name: &str| policy_enables(&prepared.policy, name);
    let enable = Enable {
        names,
        named_by: "task",
        policy: &policy,
    };
    if prepared.tool_ctx.sandbox.is_none() && run.config.safety.sandbox_enabled {
        // Kernel confinement is unavailable and was not waived: no
        // external program runs for the model (docs/security.md S1). A task that
        // names external tools never gets here (refused when prepared).
        notes.push(
            "external tools are not offered: kernel confinement is unavailable (pass --no-sandbox to offer them unconfined)"
                .to_owned(),
        );
        if !mcp_specs(run, prepared, &mut Vec::new()).is_empty() {
            notes.push(
                "MCP servers are not started: kernel confinement is unavailable (pass --no-sandbox to run them unconfined)"
                    .to_owned(),
            );
        }
        push_withheld_note(&registry, &mut notes);
        return TaskTools {
            registry: with_script(registry, prepared),
            metrics,
            notes,
            mcp: Vec::new(),
            unavailable: Vec::new(),
        };
    }
    let mut settings = discovery_settings(
        &run.config.tools,
        &run.cwd,
        (run.home.as_deref(), &run.environ),
    );
    settings.sandbox.clone_from(&prepared.tool_ctx.sandbox);
    // `--dry-run` runs no program: only tools whose schema needs no
    // `--schema` call are offered.
    let catalog = if run.dry_run {
        external::discover::scan(&settings, &enable)
    } else {
        external::discover(&settings, &enable, &prepared.tool_ctx.env).await
    };
    let mut unavailable = offer_catalog(run, prepared, &catalog, &mut registry, &metrics);
    let servers = start_mcp(run, prepared, &mut registry, &mut notes, &mut unavailable).await;
    push_withheld_note(&registry, &mut notes);
    // Said on the console and in the summary, not only in the transcript.
    for (message, required) in &unavailable {
        notes.push(format!(
            "{}{message}{}",
            crate::core::event::WARNING,
            if *required {
                " (the task marks it `required: true`)"
            } else {
                ""
            }
        ));
    }
    TaskTools {
        registry: with_script(registry, prepared),
        metrics,
        notes,
        mcp: servers,
        unavailable,
    }
}

/// Whether `name`, as a task names an external tool (a name or a path),
/// is `entry`.
fn names_entry(name: &String, entry: &external::Entry) -> bool {
    name == &entry.name
        || (name.contains('/')
            && external::discover::tool_name(Path::new(name)).as_deref()
                == Some(entry.name.as_str()))
}

/// Offers every ready, enabled tool of `catalog`; returns why each tool
/// the task names (or the operator declared) is not offered, and whether
/// the task requires it.
fn offer_catalog(
    run: &RunContext,
    prepared: &PreparedTask,
    catalog: &external::Catalog,
    registry: &mut Registry,
    metrics: &Metrics,
) -> Vec<(String, bool)> {
    let mut unavailable = Vec::new();
    let names = &prepared.task.tools.external;
    for entry in &catalog.entries {
        let named = names.iter().any(|name| names_entry(name, entry));
        let required = prepared
            .task
            .tools
            .required_external
            .iter()
            .any(|name| names_entry(&name.value, entry));
        // The operator declared it (`tools.external`) and did not turn it
        // off: it is meant to be there.
        let declared = entry.source == Source::Config && entry.enabled_by == Some("operator");
        if builtin::NAMES.contains(&entry.name.as_str()) {
            if named {
                let message = format!(
                    "external tool `{}` is not offered: a built-in tool has that name",
                    entry.name
                );
                unavailable.push((message, required));
            }
            continue;
        }
        let offered = entry.status == Status::Ready && entry.enabled_by.is_some();
        if offered && let Some(tool) = ExternalTool::new(entry, metrics.clone()) {
            offer(run, prepared, registry, std::sync::Arc::new(tool));
        } else if named || declared {
            unavailable.push((not_offered(entry), required));
        }
    }
    // A required tool nothing found at all.
    for name in prepared
        .task
        .tools
        .required_external
        .iter()
        .map(|name| &name.value)
    {
        if !catalog.entries.iter().any(|entry| names_entry(name, entry)) {
            unavailable.push((
                format!("external tool `{name}` is not offered to the model: it was not found"),
                true,
            ));
        }
    }
    unavailable
}

/// Why `entry` is not offered to the model.
fn not_offered(entry: &external::Entry) -> String {
    let why = match entry.status {
        Status::SchemaUnknown => "its schema is unknown (no sidecar, no usable `--schema`)",
        status => status.as_str(),
    };
    let detail = entry
        .detail
        .as_deref()
        .map(|detail| format!(": {detail}"))
        .unwrap_or_default();
    format!(
        "external tool `{}` is not offered to the model: {why}{detail}",
        entry.name
    )
}

/// The task's MCP servers: the operator's (`tools.mcp` in config) for
/// every task, then the task's own. A task's server named like an
/// operator's is not started (the operator's stands).
fn mcp_specs(
    run: &RunContext,
    prepared: &PreparedTask,
    notes: &mut Vec<String>,
) -> Vec<ServerSpec> {
    let mut specs = run.config.tools.mcp.clone();
    for spec in &prepared.task.tools.mcp {
        if specs.iter().any(|known| known.name == spec.name) {
            notes.push(format!(
                "the task's MCP server `{}` is not started: the operator's config declares a server of that name",
                spec.name
            ));
        } else {
            specs.push(spec.clone());
        }
    }
    specs
}

/// Starts the task's MCP servers (docs/mcp.md) and adds their tools to
/// `registry`; a server or tool that cannot be offered gets a note. A
/// tool named like one already offered is not offered.
async fn start_mcp(
    run: &RunContext,
    prepared: &PreparedTask,
    registry: &mut Registry,
    notes: &mut Vec<String>,
    unavailable: &mut Vec<(String, bool)>,
) -> Vec<std::sync::Arc<McpServer>> {
    let specs = mcp_specs(run, prepared, notes);
    if specs.is_empty() {
        return Vec::new();
    }
    if run.dry_run {
        notes.push("MCP servers are not started under --dry-run".to_owned());
        return Vec::new();
    }
    let mcp::Started {
        servers,
        tools,
        notes: mut started_notes,
        failed,
    } = mcp::start_all(&specs, &prepared.tool_ctx).await;
    notes.append(&mut started_notes);
    for (spec, message) in failed {
        unavailable.push((message, spec.required));
    }
    for tool in tools {
        let name = crate::tools::Tool::spec(&tool).name.clone();
        if registry.get(&name).is_some() || registry.withheld(&name).is_some() {
            notes.push(format!(
                "MCP tool `{name}` is not offered: another tool has that name"
            ));
            continue;
        }
        offer(run, prepared, registry, std::sync::Arc::new(tool));
    }
    servers
}

/// Stops the task's MCP servers (each whole process tree) and emits what
/// they noted during the task (failures, restarts).
/// Stops every MCP server of the task and its process tree (a later call
/// of one of its tools starts it again). The names of the servers that
/// could not be seen stopped: nothing may be committed then.
pub async fn stop_mcp(
    servers: &[std::sync::Arc<McpServer>],
    emitter: &mut Emitter<'_>,
) -> Vec<String> {
    let mut stuck = Vec::new();
    for server in servers {
        if !server.stop().await {
            stuck.push(server.name().to_owned());
        }
        for note in server.take_notes() {
            emitter.note(note);
        }
    }
    stuck
}

/// Adds `tool` to the offer when the policy may allow a call of it, else
/// keeps it as withheld: its schema would only cost tokens and invite
/// calls that are refused (a call to it is still decided by the policy,
/// and refused, like any other).
fn offer(
    run: &RunContext,
    prepared: &PreparedTask,
    registry: &mut Registry,
    tool: std::sync::Arc<dyn crate::tools::Tool>,
) {
    let name = crate::tools::Tool::spec(tool.as_ref()).name.clone();
    if prepared.policy.may_allow(&name, run.approver.is_some()) {
        registry.add(tool);
    } else {
        registry.withhold(tool);
    }
}

/// Adds the note naming every tool of the task not offered, when any is.
fn push_withheld_note(registry: &Registry, notes: &mut Vec<String>) {
    let withheld = registry.withheld_names();
    if !withheld.is_empty() {
        notes.push(withheld_note(&withheld));
    }
}

/// The note naming the tools not offered because the policy can allow
/// none of their calls.
pub fn withheld_note(withheld: &[String]) -> String {
    let names: Vec<String> = withheld.iter().map(|name| format!("`{name}`")).collect();
    format!(
        "not offered to the model, as the policy allows none of their calls: {}",
        names.join(", ")
    )
}

/// Adds the `script` tool when the task asks for it (`tools.script:
/// true`); its commands are the tools offered so far, so a disabled tool
/// is no command either.
fn with_script(registry: Registry, prepared: &PreparedTask) -> Registry {
    #[cfg(feature = "script")]
    if prepared.task.tools.script {
        use crate::tools::script::{ScriptLimits, ScriptTool};
        let mut registry = registry;
        // Caller tools wait for the caller: no command inside a script.
        let caller = |name: &str| prepared.task.tools.caller.iter().any(|c| c.name == name);
        let specs: Vec<_> = registry
            .specs()
            .into_iter()
            .filter(|spec| !caller(&spec.name))
            .collect();
        let tool = ScriptTool::new(&specs, ScriptLimits::default());
        registry.add(std::sync::Arc::new(tool));
        return registry;
    }
    #[cfg(not(feature = "script"))]
    let _ = prepared;
    registry
}

/// Emits `tool.metrics` for the external tools the task called, and adds
/// them to the persisted totals `ybs tools list` shows.
pub fn finish(tools: &TaskTools, run: &RunContext, emitter: &mut Emitter<'_>) {
    let summaries = tools.metrics.summaries();
    if summaries.is_empty() {
        return;
    }
    emitter.emit(Event::ToolMetricsReported(ToolMetricsReported {
        tools: summaries,
    }));
    if let Some(dir) = cache_dir(run.home.as_deref(), &run.environ)
        && let Err(error) = cache::record_metrics(&dir, &tools.metrics.snapshot())
    {
        emitter.note(format!(
            "could not save external tool metrics in {}: {error}",
            dir.display()
        ));
    }
}
