//! Deciding a call: built-in guards, then `deny`, then `ask`, then
//! `allow`, then `default` (docs/policy.md), under the operator ceiling (S5).
//! Every decision names its rule. See the module docs of [`super`] for
//! the exact semantics.

use std::sync::OnceLock;

use globset::{Glob, GlobMatcher};
use serde::Serialize;

use super::guards::{GuardError, GuardHit, GuardSettings, Guards};
use super::opaque::{self, Opaque};
use super::rule::{Examples, OnAsk, PolicySpec, Rule, Verdict};
use super::shell::{self, Hazard, ParsedCommand};

mod rules;
mod sandboxed;

#[cfg(test)]
pub(crate) use sandboxed::enforced_at_exec;

/// What policy sees of a call.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CallView<'a> {
    pub tool: &'a str,
    /// The path argument: as the tool resolved it (relative to the
    /// workdir when inside it, absolute otherwise), or as written.
    pub path: Option<&'a str>,
    /// The shell command of `run_shell`.
    pub command: Option<&'a str>,
    /// `run_shell`'s `working_directory` (relative to the workdir or
    /// absolute); `None` is the workdir.
    pub cwd: Option<&'a str>,
}

impl<'a> CallView<'a> {
    /// A call with no argument policy looks at.
    pub fn tool(tool: &'a str) -> Self {
        Self {
            tool,
            ..Self::default()
        }
    }

    /// A file tool's call on `path`.
    pub fn path(tool: &'a str, path: &'a str) -> Self {
        Self {
            tool,
            path: Some(path),
            ..Self::default()
        }
    }

    /// A `run_shell` call.
    pub fn shell(command: &'a str) -> Self {
        Self {
            tool: "run_shell",
            command: Some(command),
            ..Self::default()
        }
    }
}

/// Where a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Layer {
    /// The task file (its `defaults:` and the task's own `policy:`).
    Task,
    /// `--policy FILE`: the ceiling.
    Operator,
}

/// Which rule made a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleRef {
    /// A built-in guard no rule can loosen.
    Guard { name: String },
    /// `list[index]` of a layer, with the rule's text.
    Listed {
        layer: Layer,
        list: Verdict,
        index: usize,
        text: String,
    },
    /// No rule matched: the layer's `default`.
    Default { layer: Layer },
    /// A wildcard allowed a part the analysis cannot see through while a
    /// `deny` or `ask` rule on `run_shell` exists: the layer's
    /// `policy.opaque` (docs/policy.md).
    Opaque { layer: Layer },
}

impl std::fmt::Display for RuleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let prefix = |layer: &Layer| match layer {
            Layer::Task => "",
            Layer::Operator => "operator ",
        };
        match self {
            Self::Guard { name } => write!(f, "guard:{name}"),
            Self::Listed {
                layer,
                list,
                index,
                text,
            } => write!(f, "{}{list}[{index}] {text}", prefix(layer)),
            Self::Default { layer } => write!(f, "{}default", prefix(layer)),
            Self::Opaque { layer } => write!(f, "{}opaque", prefix(layer)),
        }
    }
}

/// A verdict, the rule behind it, and what it was decided on (S13).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub verdict: Verdict,
    pub rule: RuleRef,
    /// Why, in words the model can act on, when the rule alone does not
    /// say it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// `run_shell`: every simple command as words (assignments first),
    /// nested ones included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parsed: Option<Vec<Vec<String>>>,
    /// File tools: the path the rules matched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

impl std::fmt::Display for Decision {
    /// `deny (deny[0] run_shell(curl*))`, with the detail for guards and
    /// defaults.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}", self.verdict, self.rule)?;
        if let Some(detail) = &self.detail {
            write!(f, ": {detail}")?;
        }
        f.write_str(")")
    }
}

/// A policy that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("invalid glob `{glob}` in rule `{rule}`: {message}")]
    Glob {
        rule: String,
        glob: String,
        message: String,
    },
    #[error(transparent)]
    Guard(#[from] GuardError),
}

#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub rule: Rule,
    paths: Vec<LazyGlob>,
    commands: Vec<LazyGlob>,
}

/// A glob parsed when its policy is built (a bad one is an error then)
/// and compiled to its matcher when first matched: a run's first request
/// waits for no rule that no call has asked about yet
/// (docs/performance.md).
#[derive(Debug, Clone)]
struct LazyGlob {
    glob: Glob,
    matcher: OnceLock<GlobMatcher>,
}

impl LazyGlob {
    fn is_match(&self, path: impl AsRef<std::path::Path>) -> bool {
        self.matcher
            .get_or_init(|| self.glob.compile_matcher())
            .is_match(path)
    }
}

/// One side of the ceiling: merged rules of some layers.
#[derive(Debug, Clone, Default)]
pub(crate) struct RuleSet {
    pub allow: Vec<CompiledRule>,
    pub deny: Vec<CompiledRule>,
    pub ask: Vec<CompiledRule>,
    pub default: Option<Verdict>,
    pub on_ask: Option<OnAsk>,
    pub opaque: Option<Verdict>,
}

/// A merged, compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    pub(crate) task: RuleSet,
    pub(crate) operator: Option<RuleSet>,
    pub(crate) guards: Guards,
    pub(crate) settings: GuardSettings,
    pub(crate) specs: (Option<PolicySpec>, Vec<PolicySpec>),
    examples: Examples,
    /// The programs `deny` and `ask` rules on `run_shell` name, with their
    /// identity on `GuardSettings::program_path` (empty without one).
    denied_programs: Vec<(String, opaque::Identity)>,
}

/// A `run_shell` command as the rules see it.
pub(crate) struct ShellView {
    pub parsed: ParsedCommand,
    /// The parser's hazards and the guards'.
    pub hazards: Vec<Hazard>,
    pub hit: Option<GuardHit>,
}

impl Policy {
    /// Builds the effective policy: `task_layers` merged in order (rules
    /// add up; the last `default` and `on_ask` set win), bounded by
    /// `operator` when given, with the guards of `guards`.
    pub fn build(
        operator: Option<&PolicySpec>,
        task_layers: &[PolicySpec],
        guards: GuardSettings,
    ) -> Result<Self, PolicyError> {
        let task = RuleSet::merge(task_layers)?;
        let operator_set = operator
            .map(|spec| RuleSet::merge(std::slice::from_ref(spec)))
            .transpose()?;
        let mut examples = Examples::default();
        for spec in operator.into_iter().chain(task_layers) {
            examples.allow.extend(spec.examples.allow.iter().cloned());
            examples.deny.extend(spec.examples.deny.iter().cloned());
            examples.ask.extend(spec.examples.ask.iter().cloned());
        }
        let mut denied_programs: Vec<(String, opaque::Identity)> = Vec::new();
        if let Some(path) = guards.program_path.as_deref() {
            for set in operator_set.iter().chain(std::iter::once(&task)) {
                for rule in set.deny.iter().chain(&set.ask) {
                    if !rule.tool_matches("run_shell") {
                        continue;
                    }
                    for glob in &rule.rule.commands {
                        if let Some(name) = opaque::glob_program(glob)
                            && !denied_programs.iter().any(|(known, _)| known == name)
                            && let Some(identity) = opaque::identity_on_path(name, path)
                        {
                            denied_programs.push((name.to_owned(), identity));
                        }
                    }
                }
            }
        }
        Ok(Self {
            denied_programs,
            task,
            operator: operator_set,
            guards: Guards::new(&guards)?,
            settings: guards,
            specs: (operator.cloned(), task_layers.to_vec()),
            examples,
        })
    }

    /// How `ask` resolves headless: the task's choice, else the
    /// operator's, else `deny`; a task cannot choose `pause` (which lets a
    /// human approve) when the operator chose `deny` or `fail`.
    pub fn on_ask(&self) -> OnAsk {
        let operator = self.operator.as_ref().and_then(|o| o.on_ask);
        match (self.task.on_ask, operator) {
            (Some(OnAsk::Pause), Some(ceiling)) => ceiling,
            (Some(task), _) => task,
            (None, operator) => operator.unwrap_or_default(),
        }
    }

    /// Returns false if and only if every call of `tool` would be refused,
    /// whatever its arguments: a `deny` rule (or an `ask` rule nobody can
    /// approve) names the tool with no path or command glob, or a side of
    /// the ceiling has no `allow` rule for the tool and a default that
    /// cannot let a call through. `ask` counts as denied unless someone
    /// may approve: `on_ask: pause`, or `approver` (`--interactive` on a
    /// terminal). A tool this says no to is not offered to the model
    /// (docs/policy.md).
    pub fn may_allow(&self, tool: &str, approver: bool) -> bool {
        let pause = approver || self.on_ask() == OnAsk::Pause;
        let blanket = |rules: &[CompiledRule]| {
            rules.iter().any(|rule| {
                rule.tool_matches(tool) && rule.paths.is_empty() && rule.commands.is_empty()
            })
        };
        if self.layers().any(|(_, set)| blanket(&set.deny)) {
            return false;
        }
        if self.layers().any(|(_, set)| blanket(&set.ask)) {
            return pause;
        }
        self.layers().all(|(layer, set)| {
            let default = self.default_of(layer);
            set.allow.iter().any(|rule| rule.tool_matches(tool))
                || default == Verdict::Allow
                || (default == Verdict::Ask && pause)
        })
    }

    /// The examples of every layer (operator first), to check at load.
    pub fn examples(&self) -> &Examples {
        &self.examples
    }

    /// The guard settings this policy was built with.
    pub fn guard_settings(&self) -> &GuardSettings {
        &self.settings
    }

    pub(crate) fn shell_view(&self, command: &str, cwd: Option<&str>) -> ShellView {
        let parsed = shell::parse(command);
        let check = self.guards.check_shell(&parsed, cwd);
        let mut hazards = parsed.hazards.clone();
        hazards.extend(check.hazards);
        ShellView {
            parsed,
            hazards,
            hit: check.hit,
        }
    }

    /// Decides one call.
    pub fn decide(&self, call: &CallView<'_>) -> Decision {
        let shell = call.command.map(|c| self.shell_view(c, call.cwd));
        let path = call.path.map(|p| self.guards.rule_path(p));
        let mut decision = self.decide_viewed(call, path.as_deref(), shell.as_ref());
        if decision.verdict == Verdict::Allow
            && let Some(named) = self.named_where_unread(call)
        {
            decision = named;
        }
        decision.parsed = shell.map(|view| {
            view.parsed
                .parts
                .iter()
                .map(|part| part.assignments.iter().chain(&part.argv).cloned().collect())
                .collect()
        });
        decision.path = path;
        decision
    }

    fn decide_viewed(
        &self,
        call: &CallView<'_>,
        path: Option<&str>,
        shell: Option<&ShellView>,
    ) -> Decision {
        let guard = call
            .path
            .and_then(|p| self.guards.check_path(call.tool, p))
            .or_else(|| shell.and_then(|view| view.hit.clone()));
        if let Some(hit) = guard {
            return Decision::new(
                Verdict::Deny,
                RuleRef::Guard {
                    name: hit.name.to_owned(),
                },
                Some(hit.detail),
            );
        }
        for list in [Verdict::Deny, Verdict::Ask] {
            for (layer, set) in self.layers() {
                let rules = if list == Verdict::Deny {
                    &set.deny
                } else {
                    &set.ask
                };
                if let Some((index, rule)) = rules
                    .iter()
                    .enumerate()
                    .find(|(_, rule)| rule.hits_any(call, path, shell))
                {
                    return Decision::new(list, rule.listed(layer, list, index), None);
                }
            }
        }
        let task = self.allow_or_default(&self.task, Layer::Task, call, path, shell);
        let Some(operator) = &self.operator else {
            return task;
        };
        let ceiling = self.allow_or_default(operator, Layer::Operator, call, path, shell);
        if strictness(ceiling.verdict) > strictness(task.verdict) {
            let mut decision = ceiling;
            if task.verdict == Verdict::Allow {
                let note = format!(
                    "the task allows this ({}) but the operator policy does not",
                    task.rule
                );
                decision.detail = Some(match decision.detail {
                    Some(detail) => format!("{note}; {detail}"),
                    None => note,
                });
            }
            decision
        } else {
            task
        }
    }

    /// Operator rules first: on a tie the ceiling is named.
    pub(crate) fn layers(&self) -> impl Iterator<Item = (Layer, &RuleSet)> {
        self.operator
            .iter()
            .map(|set| (Layer::Operator, set))
            .chain(std::iter::once((Layer::Task, &self.task)))
    }

    /// `policy.opaque` of a side, like [`Self::default_of`]; `ask` unless set.
    pub(crate) fn opaque_of(&self, layer: Layer) -> Verdict {
        let operator = self.operator.as_ref().and_then(|o| o.opaque);
        match layer {
            Layer::Task => self.task.opaque.or(operator).unwrap_or(Verdict::Ask),
            Layer::Operator => operator.unwrap_or(Verdict::Ask),
        }
    }

    /// The default of a side: the task's own, else the operator's, else
    /// `deny`; the operator's, else `deny`.
    pub(crate) fn default_of(&self, layer: Layer) -> Verdict {
        let operator = self.operator.as_ref().and_then(|o| o.default);
        match layer {
            Layer::Task => self.task.default.or(operator).unwrap_or(Verdict::Deny),
            Layer::Operator => operator.unwrap_or(Verdict::Deny),
        }
    }

    /// `allow`, else `default`, of one side.
    fn allow_or_default(
        &self,
        set: &RuleSet,
        layer: Layer,
        call: &CallView<'_>,
        path: Option<&str>,
        shell: Option<&ShellView>,
    ) -> Decision {
        let default = self.default_of(layer);
        let blocking = shell
            .map(|view| self.blocking_hazards(set, layer, call.tool, view))
            .unwrap_or_default();
        let fallback = |detail: String| {
            // A default of `allow` never lets a hazardous command through
            // unseen, unless the sandbox decides: it becomes `ask` (S3, S4).
            let hazardous = !blocking.is_empty();
            let verdict = if hazardous && default == Verdict::Allow {
                Verdict::Ask
            } else {
                default
            };
            Decision::new(verdict, RuleRef::Default { layer }, Some(detail))
        };
        let Some(view) = shell else {
            return match set
                .allow
                .iter()
                .enumerate()
                .find(|(_, rule)| rule.allows(call.tool, path, None))
            {
                Some((index, rule)) => Decision::new(
                    Verdict::Allow,
                    rule.listed(layer, Verdict::Allow, index),
                    None,
                ),
                None => fallback(format!("no allow rule matches `{}`", call_text(call))),
            };
        };
        if !blocking.is_empty() {
            let wild = view
                .parsed
                .parts
                .iter()
                .all(|part| self.wildcard_allows(set, layer, call.tool, part));
            let why = if wild {
                self.undecided_by_sandbox(layer, &blocking, view)
            } else {
                String::new()
            };
            return fallback(format!("{}{why}", hazard_detail(&blocking)));
        }
        let mut first = None;
        let mut unseen = None;
        let mut unmatched = None;
        for part in &view.parsed.parts {
            let opaque = self.opaque_part(layer, part, call.cwd);
            match set.allow_for_part(call.tool, part, opaque.as_ref()) {
                Some((index, rule)) => {
                    first.get_or_insert_with(|| rule.listed(layer, Verdict::Allow, index));
                    if let Some(opaque) = opaque
                        && rule.vouches_not_for(call.tool, part, &opaque)
                    {
                        unseen.get_or_insert((opaque, rule.rule.to_string(), part.text()));
                    }
                }
                None => {
                    let detail = format!("`{}` matches no allow rule", part.text());
                    if default != Verdict::Allow {
                        return fallback(detail);
                    }
                    // `default: allow` is the widest wildcard of all.
                    unmatched.get_or_insert(detail);
                    if let Some(opaque) = opaque {
                        unseen.get_or_insert((opaque, "default: allow".to_owned(), part.text()));
                    }
                }
            }
        }
        if let Some((opaque, rule, text)) = unseen {
            return self.opaque_decision(layer, &opaque, &rule, &text);
        }
        match (unmatched, first) {
            (Some(detail), _) => fallback(detail),
            (None, Some(rule)) => Decision::new(Verdict::Allow, rule, None),
            (None, None) => fallback("empty command".to_owned()),
        }
    }

    /// `ask` (the side's `policy.opaque`) for a part a wildcard allowed:
    /// says which case applied and what rule to write.
    fn opaque_decision(&self, layer: Layer, opaque: &Opaque, by: &str, part: &str) -> Decision {
        // The operator's ceiling is loosened in the operator's policy
        // only: a hint never points a task at what it cannot change.
        let operator_opaque =
            self.task.opaque.is_none() && self.operator.as_ref().and_then(|o| o.opaque).is_some();
        let fix = match layer {
            Layer::Task if operator_opaque => format!(
                "to allow it, name it in an allow rule (`run_shell({part})`); `opaque: {}` is the \
                 operator's (--policy), which a task file cannot loosen",
                self.opaque_of(layer)
            ),
            Layer::Operator => format!(
                "only the operator's policy (--policy) can allow it: name it in an allow rule \
                 there (`run_shell({part})`) or set its `opaque: allow`; a task file cannot"
            ),
            _ => format!(
                "to allow it, name it in an allow rule (`run_shell({part})`) or set \
                 `policy.opaque: allow`"
            ),
        };
        let detail = format!(
            "not auto-allowed: {opaque}; `{by}` allows it only as a wildcard while a deny or ask \
             rule on run_shell exists; {fix}"
        );
        Decision::new(
            self.opaque_of(layer),
            RuleRef::Opaque { layer },
            Some(detail),
        )
    }
}

fn call_text(call: &CallView<'_>) -> String {
    match call.path.or(call.command) {
        Some(arg) => format!("{}({arg})", call.tool),
        None => call.tool.to_owned(),
    }
}

/// "not auto-allowed: command substitution `$(id)`; eval `eval x`".
pub(crate) fn hazard_detail(hazards: &[Hazard]) -> String {
    let mut shown: Vec<String> = Vec::new();
    for hazard in hazards {
        let text = hazard.to_string();
        if !shown.contains(&text) {
            shown.push(text);
        }
    }
    let more = shown.len().saturating_sub(3);
    shown.truncate(3);
    let mut detail = format!("not auto-allowed: {}", shown.join("; "));
    if more > 0 {
        detail.push_str(&format!(" (+{more} more)"));
    }
    detail
}

/// Allow < ask < deny.
pub(crate) fn strictness(verdict: Verdict) -> u8 {
    match verdict {
        Verdict::Allow => 0,
        Verdict::Ask => 1,
        Verdict::Deny => 2,
    }
}

impl Decision {
    pub(crate) fn new(verdict: Verdict, rule: RuleRef, detail: Option<String>) -> Self {
        Self {
            verdict,
            rule,
            detail,
            parsed: None,
            path: None,
        }
    }
}
