//! Policy rules that name no tool the task can have (docs/policy.md,
//! "Rules that name no tool"). A `deny` rule on a misspelt tool denies
//! nothing and an `allow` rule on one allows nothing, both silently; so
//! `ybs validate` and `ybs run` refuse a task file holding one (exit 2),
//! at the rule's `file:line:col`, with the closest name as a hint.
//!
//! A tool is known when it is built in (or `script`), a caller tool of
//! the task, an external tool found where `ybs tools list` looks (or one
//! the task names under `tools.external`), or a tool of an MCP server the
//! task or the config declares (`NAME__tool`: the server's tools are only
//! known once it runs, so any tool name after a declared prefix passes).
//! Only the rules written in task files are checked: an operator's
//! `--policy FILE` is shared by repositories whose tools differ.

use std::path::Path;

use crate::config::Config;
use crate::core::text::closest;
use crate::policy::rule::tool_pattern_matches;
use crate::task::{Diagnostic, TaskSpec};
use crate::tools::builtin;
use crate::tools::external::{self, Enable};

use super::dirs::discovery_settings;

/// The tools every task of a run can name: built-ins, the external tools
/// found, the config's MCP servers.
#[derive(Debug, Clone, Default)]
pub struct KnownTools {
    names: Vec<String>,
    servers: Vec<String>,
}

impl KnownTools {
    /// What the config and the directories ybs looks in offer (no program
    /// runs: external tools are only listed).
    pub fn find(
        config: &Config,
        cwd: &Path,
        (home, environ): (Option<&Path>, &crate::core::Environ),
    ) -> Self {
        let settings = discovery_settings(&config.tools, cwd, (home, environ));
        let catalog = external::discover::scan(&settings, &Enable::none());
        let mut names: Vec<String> = builtin::NAMES
            .iter()
            .map(|name| (*name).to_owned())
            .collect();
        names.push("script".to_owned());
        names.extend(
            catalog
                .entries
                .iter()
                .chain(&catalog.shadowed)
                .map(|entry| entry.name.clone()),
        );
        names.extend(config.tools.external.iter().map(|tool| tool.name.clone()));
        let servers = config
            .tools
            .mcp
            .iter()
            .map(|server| server.name.clone())
            .collect();
        Self { names, servers }
    }

    /// With the tools `task` adds: its caller tools, the external tools
    /// it names, its MCP servers.
    fn with_task(&self, task: &TaskSpec) -> Self {
        let mut known = self.clone();
        known
            .names
            .extend(task.tools.caller.iter().map(|tool| tool.name.clone()));
        known
            .names
            .extend(task.tools.external.iter().filter_map(|name| {
                if name.contains('/') {
                    external::discover::tool_name(Path::new(name))
                } else {
                    Some(name.clone())
                }
            }));
        known
            .servers
            .extend(task.tools.mcp.iter().map(|server| server.name.clone()));
        known
    }

    /// Returns true if and only if `pattern` (`*` for any characters) can
    /// name one of these tools.
    fn names(&self, pattern: &str) -> bool {
        if self
            .names
            .iter()
            .any(|name| tool_pattern_matches(pattern, name))
        {
            return true;
        }
        self.servers.iter().any(|server| {
            let prefix = format!("{server}__");
            match pattern.split_once('*') {
                // `fs__read_file`: some tool after the prefix.
                None => pattern.len() > prefix.len() && pattern.starts_with(&prefix),
                // `fs__*`, `fs*`, `*`: the part before the first `*` and
                // the prefix agree as far as both go.
                Some((literal, _)) => literal.starts_with(&prefix) || prefix.starts_with(literal),
            }
        })
    }
}

/// Every rule of `task`'s policy layers that names no tool it can have.
pub fn unknown_rule_tools(known: &KnownTools, task: &TaskSpec) -> Vec<Diagnostic> {
    let known = known.with_task(task);
    let mut problems = Vec::new();
    for place in task.policy.iter().flat_map(|layer| &layer.places) {
        if known.names(&place.tool) {
            continue;
        }
        let list = place.verdict.as_str();
        let (message, hint) = match place.tool.split_once("__") {
            Some((server, _)) if !server.is_empty() && !server.contains('*') => {
                let near = closest(server, known.servers.iter().map(String::as_str));
                (
                    format!(
                        "`{list}` rule `{}` of task `{}` names the MCP server `{server}`, which neither the task nor the config declares, so it matches no tool",
                        place.text, task.id
                    ),
                    match near {
                        Some(near) => {
                            format!("did you mean `{}`?", place.tool.replacen(server, near, 1))
                        }
                        None => {
                            "declare the server under `tools.mcp` (docs/mcp.md), or remove the rule"
                                .to_owned()
                        }
                    },
                )
            }
            _ => {
                let near = closest(
                    &place.tool,
                    known
                        .names
                        .iter()
                        .map(String::as_str)
                        .filter(|name| *name != "script"),
                );
                (
                    format!(
                        "`{list}` rule `{}` of task `{}` names no tool: `{}` is not a built-in, external, caller or MCP tool",
                        place.text, task.id, place.tool
                    ),
                    match near {
                        Some(near) => format!("did you mean `{near}`?"),
                        None => "name a tool `ybs tools list` shows, or one the task declares under `tools.external` or `tools.mcp`".to_owned(),
                    },
                )
            }
        };
        problems.push(Diagnostic::new(&task.file, place.span, message).with_hint(hint));
    }
    problems
}
