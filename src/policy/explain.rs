//! `ybs policy explain 'CALL'`: the decision, the rule behind it, and for
//! a shell command each simple command with its own verdict.

use serde::Serialize;

use super::decide::{Decision, Layer, Policy, RuleRef, strictness};
use super::examples::{CallParseError, parse_call, view};
use super::guards::SandboxMode;
use super::opaque::Opaque;
use super::rule::Verdict;
use super::shell::{Hazard, HazardKind, ParsedCommand, SimpleCommand};

/// How a call is decided, for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Explanation {
    /// The call as given.
    pub call: String,
    pub decision: Decision,
    /// `run_shell`: every simple command, nested ones included.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub parts: Vec<PartExplanation>,
    /// `run_shell`: what keeps the command from being auto-allowed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub hazards: Vec<Hazard>,
    /// The confinement the decision assumed, and who said so.
    pub sandbox: AssumedSandbox,
}

/// The sandbox mode a decision assumed (docs/policy.md, "The sandbox
/// decides").
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AssumedSandbox {
    pub mode: SandboxMode,
    /// `probed`, or the flag or setting that chose it (`--sandbox full`,
    /// `--no-sandbox`, `safety.sandbox_enabled: false`); `given` when
    /// the caller said nothing.
    pub by: String,
    /// The sandbox's exec guard refuses a program a `deny` rule on
    /// `run_shell` matches at every `execve` (docs/sandbox.md).
    pub exec_guard: bool,
    /// The policy leaves what the parser cannot see to the exec guard
    /// ([`Policy::exec_guard_holds`]); when the guard is there but does
    /// not hold, `exec_guard_gap` says why.
    pub exec_guard_holds: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exec_guard_gap: Option<String>,
}

/// One simple command of a shell call, judged alone.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PartExplanation {
    /// Assignments and argv, joined.
    pub text: String,
    /// The argv alone, as the policy parsed it (quotes removed): what it
    /// believes this part runs (tests/suite/differential.rs compares it
    /// with what bash runs).
    pub argv: Vec<String>,
    /// How a nested command is reached (`$(…)`, `bash -c`, `env` …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    pub verdict: Verdict,
    pub rule: RuleRef,
    /// What the analysis cannot see through in this part, when a `deny`
    /// or `ask` rule on `run_shell` makes it matter (docs/policy.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Opaque>,
    /// The part's unknowns (what the parser cannot see: variables,
    /// substitutions, nested code…) and why they may or may not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unknowns: Option<String>,
}

/// Explains how `policy` decides `call_text` (`run_shell(cargo test)`,
/// `edit_file(src/lib.rs)`, `read_file`).
pub fn explain(policy: &Policy, call_text: &str) -> Result<Explanation, CallParseError> {
    let (tool, arg) = parse_call(call_text)?;
    let call = view(&tool, arg.as_deref());
    let decision = policy.decide(&call);
    let mut explanation = Explanation {
        call: call_text.trim().to_owned(),
        decision,
        parts: Vec::new(),
        hazards: Vec::new(),
        sandbox: AssumedSandbox {
            mode: policy.settings.sandbox,
            by: "given".to_owned(),
            exec_guard: policy.settings.exec_guard
                && policy.settings.sandbox == crate::policy::guards::SandboxMode::Full,
            exec_guard_holds: policy.exec_guard_holds(),
            exec_guard_gap: policy.exec_guard_gap(),
        },
    };
    if let Some(command) = call.command {
        let shell = policy.shell_view(command, None);
        explanation.parts = shell
            .parsed
            .parts
            .iter()
            .enumerate()
            .map(|(index, part)| {
                let hazards: Vec<&Hazard> = shell
                    .hazards
                    .iter()
                    .filter(|h| h.part == Some(index))
                    .collect();
                let (verdict, rule) = match policy.part_guard(part) {
                    Some(name) => (Verdict::Deny, RuleRef::Guard { name }),
                    None => policy.part_verdict(&tool, part, &hazards),
                };
                let guarded = matches!(rule, RuleRef::Guard { .. });
                PartExplanation {
                    text: part.text(),
                    argv: part.argv.clone(),
                    via: part.via.clone(),
                    verdict,
                    rule,
                    opaque: policy.opaque_part(Layer::Task, part, None).or_else(|| {
                        policy
                            .operator
                            .as_ref()
                            .and_then(|_| policy.opaque_part(Layer::Operator, part, None))
                    }),
                    unknowns: if guarded {
                        None
                    } else {
                        let mut all = hazards.clone();
                        all.extend(shell.hazards.iter().filter(|h| h.part.is_none()));
                        policy.unknowns_reasoning(&tool, part, &all)
                    },
                }
            })
            .collect();
        explanation.hazards = shell.hazards;
    }
    Ok(explanation)
}

impl Policy {
    /// Which unknowns `part` has and why they may run or not: left to
    /// the sandbox, or kept back and why.
    fn unknowns_reasoning(
        &self,
        tool: &str,
        part: &SimpleCommand,
        hazards: &[&Hazard],
    ) -> Option<String> {
        if hazards.is_empty() {
            return None;
        }
        let mut seen: Vec<String> = Vec::new();
        for hazard in hazards {
            let text = hazard.to_string();
            if !seen.contains(&text) {
                seen.push(text);
            }
        }
        let listed = seen.join("; ");
        let why = if hazards.iter().any(|h| h.kind == HazardKind::Unparseable) {
            "kept back: the command does not parse".to_owned()
        } else if !self
            .layers()
            .all(|(layer, set)| self.wildcard_allows(set, layer, tool, part))
        {
            "kept back: no full wildcard (`run_shell(*)`, `default: allow`) allows this part, \
             and a narrower rule cannot vouch for values it does not see"
                .to_owned()
        } else if self.settings.sandbox != SandboxMode::Full {
            format!(
                "kept back: only the full sandbox ({}) bounds what the parser cannot see, and \
                 the sandbox assumed is `{}`",
                SandboxMode::Full,
                self.settings.sandbox
            )
        } else if self.layers().any(|(layer, _)| self.decides_unknowns(layer)) {
            let globs = self.dodgeable_globs();
            match (
                hazards.iter().find(|h| !super::unknowns::tolerable(h)),
                super::unknowns::problem(part, globs.iter().cloned()),
            ) {
                (Some(hazard), _) => format!(
                    "kept back: a deny or ask rule on run_shell exists, and the parser cannot \
                     read what {hazard} runs"
                ),
                (None, Some(problem)) => format!("kept back: {problem}"),
                (None, None) => "left to the sandbox: no deny or ask rule can match this part \
                                 for any value of its unknowns"
                    .to_owned(),
            }
        } else if self.layers().all(|(layer, _)| self.sandbox_decides(layer)) {
            if self.shell_rules_to_dodge() && self.exec_guard_holds() {
                "left to the sandbox: its exec guard refuses, wherever it is started, a program \
                 whose argv a deny rule matches"
                    .to_owned()
            } else if self.shell_rules_to_dodge() {
                "left to the sandbox: `policy.opaque: allow` trusts it with what the parser \
                 cannot see"
                    .to_owned()
            } else {
                "left to the sandbox: no deny or ask rule on run_shell exists that they could \
                 reach"
                    .to_owned()
            }
        } else {
            "kept back: a deny or ask rule on run_shell exists that they could reach; set \
             `policy.opaque: allow` to leave them to the sandbox"
                .to_owned()
        };
        Some(format!("{listed} — {why}"))
    }

    /// The guard a simple command trips on its own, if any.
    fn part_guard(&self, part: &SimpleCommand) -> Option<String> {
        let alone = ParsedCommand {
            parts: vec![part.clone()],
            hazards: Vec::new(),
        };
        self.guards
            .check_shell(&alone, None)
            .hit
            .map(|hit| hit.name.to_owned())
    }

    /// One simple command judged alone: deny, ask, then allow (unless it
    /// carries a hazard), then the default; the stricter of the task and
    /// the operator ceiling.
    fn part_verdict(
        &self,
        tool: &str,
        part: &SimpleCommand,
        hazards: &[&Hazard],
    ) -> (Verdict, RuleRef) {
        for list in [Verdict::Deny, Verdict::Ask] {
            for (layer, set) in self.layers() {
                let rules = if list == Verdict::Deny {
                    &set.deny
                } else {
                    &set.ask
                };
                if let Some((index, rule)) = rules.iter().enumerate().find(|(_, rule)| {
                    rule.rule.matches_tool(tool)
                        && rule.rule.paths.is_empty()
                        && rule.hits_part(part)
                }) {
                    return (
                        list,
                        RuleRef::Listed {
                            layer,
                            list,
                            index,
                            text: rule.rule.to_string(),
                        },
                    );
                }
            }
        }
        let side = |layer: Layer, set: &super::decide::RuleSet| {
            let opaque = self.opaque_part(layer, part, None);
            // The sandbox bounds what the parser cannot see of a part a
            // full wildcard allows, when it decides (docs/policy.md).
            let globs = self.dodgeable_globs();
            let readable = hazards.iter().all(|h| super::unknowns::tolerable(h))
                && super::unknowns::problem(part, globs.iter().cloned()).is_none();
            let left_to_sandbox = (self.sandbox_decides(layer)
                || (self.decides_unknowns(layer) && readable))
                && hazards.iter().all(|h| h.kind != HazardKind::Unparseable)
                && self.wildcard_allows(set, layer, tool, part);
            let hazardous = !hazards.is_empty() && !left_to_sandbox;
            let allowed = if hazardous {
                None
            } else {
                set.allow_for_part(tool, part, opaque.as_ref())
            };
            match allowed {
                Some((_, rule))
                    if opaque
                        .as_ref()
                        .is_some_and(|o| rule.vouches_not_for(tool, part, o)) =>
                {
                    (self.opaque_of(layer), RuleRef::Opaque { layer })
                }
                Some((index, rule)) => (
                    Verdict::Allow,
                    RuleRef::Listed {
                        layer,
                        list: Verdict::Allow,
                        index,
                        text: rule.rule.to_string(),
                    },
                ),
                None => {
                    let default = self.default_of(layer);
                    let verdict = if hazardous && default == Verdict::Allow {
                        Verdict::Ask
                    } else {
                        default
                    };
                    if verdict == Verdict::Allow && opaque.is_some() {
                        (self.opaque_of(layer), RuleRef::Opaque { layer })
                    } else {
                        (verdict, RuleRef::Default { layer })
                    }
                }
            }
        };
        let task = side(Layer::Task, &self.task);
        match &self.operator {
            Some(operator) => {
                let ceiling = side(Layer::Operator, operator);
                if strictness(ceiling.0) > strictness(task.0) {
                    ceiling
                } else {
                    task
                }
            }
            None => task,
        }
    }
}

impl std::fmt::Display for Explanation {
    /// Several lines a CLI prints as is:
    ///
    /// ```text
    /// run_shell(cargo test && curl x)
    ///   verdict: deny
    ///   rule:    deny[0] run_shell(curl*)
    ///   parts:
    ///     allow  cargo test    allow[0] run_shell(cargo test*)
    ///     deny   curl x        deny[0] run_shell(curl*)
    /// ```
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "{}", self.call)?;
        writeln!(f, "  verdict: {}", self.decision.verdict)?;
        writeln!(f, "  rule:    {}", self.decision.rule)?;
        if let Some(detail) = &self.decision.detail {
            writeln!(f, "  why:     {detail}")?;
        }
        if let Some(path) = &self.decision.path {
            writeln!(f, "  path:    {path}")?;
        }
        if self.decision.parsed.is_some() {
            let guard = if self.sandbox.exec_guard {
                "+exec-guard"
            } else {
                ""
            };
            writeln!(
                f,
                "  sandbox: {}{guard} ({})",
                self.sandbox.mode, self.sandbox.by
            )?;
            if let Some(gap) = &self.sandbox.exec_guard_gap {
                writeln!(f, "  guard:   {gap}")?;
            }
        }
        if !self.parts.is_empty() {
            writeln!(f, "  parts:")?;
            let width = self
                .parts
                .iter()
                .map(|p| {
                    p.text.chars().count() + p.via.as_ref().map_or(0, |v| v.chars().count() + 7)
                })
                .max()
                .unwrap_or(0);
            for part in &self.parts {
                let text = match &part.via {
                    Some(via) => format!("{} (via {via})", part.text),
                    None => part.text.clone(),
                };
                writeln!(
                    f,
                    "    {:<5}  {text:<width$}  {}",
                    part.verdict.as_str(),
                    part.rule
                )?;
                if let Some(unknowns) = &part.unknowns {
                    writeln!(f, "           unknowns: {unknowns}")?;
                }
            }
        }
        let opaque: Vec<&Opaque> = self
            .parts
            .iter()
            .filter_map(|p| p.opaque.as_ref())
            .collect();
        if !opaque.is_empty() {
            writeln!(f, "  opaque:")?;
            for item in opaque {
                writeln!(f, "    - {item}")?;
            }
        }
        if !self.hazards.is_empty() {
            writeln!(f, "  hazards:")?;
            for hazard in &self.hazards {
                writeln!(f, "    - {hazard}")?;
            }
        }
        Ok(())
    }
}
