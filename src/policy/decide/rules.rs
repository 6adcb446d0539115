//! Rule sets and compiled rules: merging layers, matching calls and parts.

use std::sync::OnceLock;

use globset::GlobBuilder;

use super::{CallView, CompiledRule, Layer, LazyGlob, PolicyError, RuleRef, RuleSet, ShellView};
use crate::policy::opaque::{self, Opaque};
use crate::policy::rule::{PolicySpec, Rule, Verdict};
use crate::policy::shell::SimpleCommand;

impl RuleSet {
    /// The allow rule that decides the shell part `part`: the first one
    /// that names its opaque program (`opaque`) if any does, wherever it
    /// is listed, else the first that matches it at all. The policy's
    /// meaning does not depend on the order of its rules.
    pub(crate) fn allow_for_part(
        &self,
        tool: &str,
        part: &SimpleCommand,
        opaque: Option<&Opaque>,
    ) -> Option<(usize, &CompiledRule)> {
        let mut matching = self
            .allow
            .iter()
            .enumerate()
            .filter(|(_, rule)| rule.allows(tool, None, Some(part)));
        let first = matching.next()?;
        let Some(opaque) = opaque else {
            return Some(first);
        };
        if !first.1.vouches_not_for(tool, part, opaque) {
            return Some(first);
        }
        Some(
            matching
                .find(|(_, rule)| !rule.vouches_not_for(tool, part, opaque))
                .unwrap_or(first),
        )
    }

    pub(super) fn merge(layers: &[PolicySpec]) -> Result<Self, PolicyError> {
        let mut set = Self::default();
        for layer in layers {
            for (rules, compiled) in [
                (&layer.allow, &mut set.allow),
                (&layer.deny, &mut set.deny),
                (&layer.ask, &mut set.ask),
            ] {
                for rule in rules {
                    compiled.push(CompiledRule::new(rule)?);
                }
            }
            set.default = layer.default.or(set.default);
            set.on_ask = layer.on_ask.or(set.on_ask);
            set.opaque = layer.opaque.or(set.opaque);
        }
        Ok(set)
    }
}

impl CompiledRule {
    pub(super) fn new(rule: &Rule) -> Result<Self, PolicyError> {
        // Path globs keep `*` inside one directory (`src/*` is not
        // `src/a/b`); command globs span the whole command.
        let build = |glob: &String, literal_separator: bool| {
            GlobBuilder::new(glob)
                .literal_separator(literal_separator)
                .build()
                .map(|glob| LazyGlob {
                    glob,
                    matcher: OnceLock::new(),
                })
                .map_err(|error| PolicyError::Glob {
                    rule: rule.to_string(),
                    glob: glob.clone(),
                    message: error.kind().to_string(),
                })
        };
        Ok(Self {
            rule: rule.clone(),
            paths: rule
                .paths
                .iter()
                .map(|g| build(g, true))
                .collect::<Result<_, _>>()?,
            commands: rule
                .commands
                .iter()
                .map(|g| build(g, false))
                .collect::<Result<_, _>>()?,
        })
    }

    pub(super) fn listed(&self, layer: Layer, list: Verdict, index: usize) -> RuleRef {
        RuleRef::Listed {
            layer,
            list,
            index,
            text: self.rule.to_string(),
        }
    }

    pub(super) fn tool_matches(&self, tool: &str) -> bool {
        self.rule.matches_tool(tool)
    }

    /// True if and only if this rule names `run_shell` commands (a glob
    /// on the command, no path glob): what a `deny` or `ask` rule needs
    /// for a shell part to dodge it.
    pub(super) fn names_shell_commands(&self) -> bool {
        self.tool_matches("run_shell") && self.paths.is_empty() && !self.commands.is_empty()
    }

    /// True if and only if this rule allows every command of `tool`: no
    /// path glob, and no command glob or the glob `*`.
    pub(crate) fn full_wildcard(&self, tool: &str) -> bool {
        self.tool_matches(tool)
            && self.paths.is_empty()
            && (self.rule.commands.is_empty()
                || self
                    .rule
                    .commands
                    .iter()
                    .any(|glob| matches!(glob.trim(), "*" | "**")))
    }

    pub(super) fn path_matches(&self, path: Option<&str>) -> bool {
        self.paths.is_empty() || path.is_some_and(|p| self.paths.iter().any(|g| g.is_match(p)))
    }

    /// For deny and ask: the rule hits if any part of the call matches,
    /// in any view (full text, argv alone, command word without its
    /// directory, the raw command).
    pub(crate) fn hits_any(
        &self,
        call: &CallView<'_>,
        path: Option<&str>,
        shell: Option<&ShellView>,
    ) -> bool {
        if !self.tool_matches(call.tool) || !self.path_matches(path) {
            return false;
        }
        if self.commands.is_empty() {
            return true;
        }
        let (Some(view), Some(raw)) = (shell, call.command) else {
            return false;
        };
        self.commands.iter().any(|g| g.is_match(raw.trim()))
            || view.parsed.parts.iter().any(|part| self.hits_part(part))
    }

    /// True if and only if this allow rule matches `part` only as a
    /// wildcard over its opaque word (`run_shell(*)` for `./t x`), not
    /// by naming it (`run_shell(./build.sh*)`).
    pub(crate) fn vouches_not_for(
        &self,
        tool: &str,
        part: &SimpleCommand,
        opaque: &Opaque,
    ) -> bool {
        if !self.tool_matches(tool) {
            return false;
        }
        self.commands.is_empty()
            || opaque::wildcard_over(part, opaque, |text| {
                self.commands.iter().any(|g| g.is_match(text))
            })
    }

    pub(crate) fn hits_part(&self, part: &SimpleCommand) -> bool {
        self.commands.is_empty()
            || part
                .deny_views()
                .iter()
                .any(|view| self.commands.iter().any(|g| g.is_match(view)))
    }

    /// For allow: the rule matches the whole file call, or one simple
    /// command by its full text (assignments included).
    pub(crate) fn allows(
        &self,
        tool: &str,
        path: Option<&str>,
        part: Option<&SimpleCommand>,
    ) -> bool {
        if !self.tool_matches(tool) {
            return false;
        }
        match part {
            None => self.commands.is_empty() && self.path_matches(path),
            Some(part) => {
                self.paths.is_empty()
                    && (self.commands.is_empty() || {
                        let text = part.text();
                        self.commands.iter().any(|g| g.is_match(&text))
                    })
            }
        }
    }
}
