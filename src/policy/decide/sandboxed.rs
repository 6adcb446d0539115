//! What the sandbox decides: rules to dodge, hazards that block, unknowns, opaque parts.

use super::{Layer, Policy, RuleSet, ShellView};
use crate::policy::guards::SandboxMode;
use crate::policy::opaque::{self, Opaque};
use crate::policy::rule::Verdict;
use crate::policy::shell::{Hazard, HazardKind, SimpleCommand};

impl Policy {
    /// True if and only if some `deny` or `ask` rule, of any layer,
    /// names `run_shell` commands: a part the analysis cannot see through
    /// could dodge it.
    pub(crate) fn shell_rules_to_dodge(&self) -> bool {
        self.layers().any(|(_, set)| {
            set.deny.iter().chain(&set.ask).any(|rule| {
                rule.tool_matches("run_shell") && rule.paths.is_empty() && !rule.commands.is_empty()
            })
        })
    }

    /// True if and only if, on this side, a full wildcard lets through
    /// what the parser cannot see (substitutions, variables, control
    /// flow, nested shells, inline code, wrappers…), the sandbox bounding
    /// it: the full sandbox is in force, and no `deny` or `ask` rule on
    /// `run_shell` exists to dodge, or the side says `policy.opaque:
    /// allow` (docs/policy.md, "The sandbox decides").
    pub(crate) fn sandbox_decides(&self, layer: Layer) -> bool {
        self.settings.sandbox == SandboxMode::Full
            && (!self.shell_rules_to_dodge() || self.opaque_of(layer) == Verdict::Allow)
    }

    /// The hazards that keep `view` from being allowed on `set`'s side:
    /// all of them, unless the sandbox decides ([`Self::sandbox_decides`]);
    /// then only those of parts no full wildcard allows, and a command
    /// that does not parse.
    pub(crate) fn blocking_hazards(
        &self,
        set: &RuleSet,
        layer: Layer,
        tool: &str,
        view: &ShellView,
    ) -> Vec<Hazard> {
        let trusted = self.sandbox_decides(layer);
        let wild = |part: &SimpleCommand| self.wildcard_allows(set, layer, tool, part);
        if !trusted && self.decides_unknowns(layer) {
            let parts = &view.parsed.parts;
            let readable = view.hazards.iter().all(crate::policy::unknowns::tolerable);
            if parts.iter().all(wild) && readable && self.unknowns_problem(view).is_none() {
                return Vec::new();
            }
            return view.hazards.clone();
        }
        view.hazards
            .iter()
            .filter(|hazard| {
                hazard.kind == HazardKind::Unparseable
                    || !trusted
                    || !match hazard.part {
                        Some(index) => view.parsed.parts.get(index).is_some_and(wild),
                        None => view.parsed.parts.iter().all(wild),
                    }
            })
            .cloned()
            .collect()
    }

    /// True if and only if, on this side, a full wildcard lets through
    /// the unknowns that cannot reach a `deny` or `ask` rule on
    /// `run_shell` ([`super::unknowns`]): the full sandbox is in force,
    /// such a rule exists, and the side's `policy.opaque` is not `allow`
    /// (which lets everything through).
    pub(crate) fn decides_unknowns(&self, layer: Layer) -> bool {
        self.settings.sandbox == SandboxMode::Full
            && self.shell_rules_to_dodge()
            && self.opaque_of(layer) != Verdict::Allow
    }

    /// The command globs of every `deny` and `ask` rule on `run_shell`,
    /// with the rule's text.
    pub(crate) fn dodgeable_globs(&self) -> Vec<(&str, String)> {
        let mut globs = Vec::new();
        for (_, set) in self.layers() {
            for rule in set.deny.iter().chain(&set.ask) {
                if rule.tool_matches("run_shell") && rule.paths.is_empty() {
                    for glob in &rule.rule.commands {
                        globs.push((glob.as_str(), rule.rule.to_string()));
                    }
                }
            }
        }
        globs
    }

    /// The first part whose unknowns could reach a `deny` or `ask` rule,
    /// or name a program, or become an executing option: why.
    pub(crate) fn unknowns_problem(&self, view: &ShellView) -> Option<String> {
        let globs = self.dodgeable_globs();
        view.parsed
            .parts
            .iter()
            .find_map(|part| crate::policy::unknowns::problem(part, globs.iter().cloned()))
    }

    /// True if and only if a full wildcard of the side allows `part`: an
    /// allow rule for the tool with no glob or the glob `*`, or `default:
    /// allow`.
    pub(crate) fn wildcard_allows(
        &self,
        set: &RuleSet,
        layer: Layer,
        tool: &str,
        part: &SimpleCommand,
    ) -> bool {
        self.default_of(layer) == Verdict::Allow
            || set
                .allow
                .iter()
                .any(|rule| rule.full_wildcard(tool) && rule.allows(tool, None, Some(part)))
    }

    /// Why a full wildcard did not let the hazards through, when the
    /// sandbox would have decided otherwise: appended to the refusal.
    pub(super) fn undecided_by_sandbox(
        &self,
        layer: Layer,
        blocking: &[Hazard],
        view: &ShellView,
    ) -> String {
        if blocking.iter().any(|h| h.kind == HazardKind::Unparseable) {
            return String::new();
        }
        if self.decides_unknowns(layer) {
            return match blocking
                .iter()
                .find(|h| !crate::policy::unknowns::tolerable(h))
            {
                Some(hazard) => format!(
                    "; a deny or ask rule on run_shell exists, and the parser cannot read what \
                     {hazard} runs: run the inner command directly, or set `policy.opaque: \
                     allow` to let the sandbox bound it"
                ),
                None => self
                    .unknowns_problem(view)
                    .map(|problem| format!("; {problem}"))
                    .unwrap_or_default(),
            };
        }
        if self.settings.sandbox != SandboxMode::Full {
            format!(
                "; a wildcard lets these run only under the full sandbox ({}), and this run's \
                 sandbox is `{}`",
                SandboxMode::Full,
                self.settings.sandbox
            )
        } else if self.shell_rules_to_dodge() && self.opaque_of(layer) != Verdict::Allow {
            "; a deny or ask rule on run_shell exists that they could dodge: run the inner \
             command directly, or set `policy.opaque: allow` to let the sandbox bound them"
                .to_owned()
        } else {
            String::new()
        }
    }

    /// The part's opaque word, if a `deny`/`ask` rule exists it could
    /// dodge and the side does not say `opaque: allow`.
    pub(crate) fn opaque_part(
        &self,
        layer: Layer,
        part: &SimpleCommand,
        cwd: Option<&str>,
    ) -> Option<Opaque> {
        if self.opaque_of(layer) == Verdict::Allow || !self.shell_rules_to_dodge() {
            return None;
        }
        opaque::find(part, &self.settings.workdir, cwd).or_else(|| self.same_file(part))
    }

    /// A bare program name that is, on `PATH`, the same file as a program
    /// a `deny` or `ask` rule names under another name (`cc` for `gcc`, a
    /// busybox applet).
    pub(super) fn same_file(&self, part: &SimpleCommand) -> Option<Opaque> {
        if self.denied_programs.is_empty() {
            return None;
        }
        let path = self.settings.program_path.as_deref()?;
        let name = part.argv.first()?;
        if self
            .denied_programs
            .iter()
            .any(|(denied, _)| denied == name)
        {
            return None;
        }
        let identity = opaque::identity_on_path(name, path)?;
        let (denied, _) = self
            .denied_programs
            .iter()
            .find(|(_, id)| *id == identity)?;
        Some(Opaque {
            kind: opaque::OpaqueKind::RenamedProgram,
            word: 0,
            text: name.clone(),
            same_as: Some(denied.clone()),
        })
    }
}
