//! The policy as others see it: a stable hash for the transcript manifest
//! and a short summary for the system prompt (every request pays for it).

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::decide::{CompiledRule, Layer, Policy};
use super::rule::{PolicySpec, Verdict};

/// The budget of [`Policy::summary`], in characters.
const SUMMARY_BUDGET: usize = 300;

/// The sentence about shell commands when the parser decides.
const SHELL_NOTE: &str = "Shell: every part of a chain must be allowed; no $(…), eval, sh -c or writes outside the workdir.";

/// … when a full wildcard and the full sandbox decide, with nothing to
/// dodge (docs/policy.md, "The sandbox decides").
const SHELL_NOTE_SANDBOX: &str = "Shell: any command runs ($(…), pipes, loops, heredocs, sh -c and inline code included), confined by the sandbox: writes outside the workdir fail.";

/// … when `policy.opaque: allow` leaves to the sandbox what the parser
/// cannot see while deny or ask rules exist.
const SHELL_NOTE_OPAQUE: &str = "Shell: no part of a chain, nested ones included, may match a denied rule; the sandbox confines the rest.";

/// … when a full wildcard and the full sandbox decide while deny rules
/// exist that the sandbox's exec guard enforces (docs/policy.md, "The
/// exec guard").
const SHELL_NOTE_GUARD: &str = "Shell: any command runs ($(…), pipes, loops, heredocs, sh -c, scripts and inline code included), confined by the sandbox; a denied program is refused wherever it is started.";

/// … when a full wildcard and the full sandbox decide while deny or ask
/// rules exist: what the parser reads runs unless a part may match one
/// (docs/policy.md, "Unknowns under deny rules").
const SHELL_NOTE_UNKNOWNS: &str = "Shell: commands run confined by the sandbox ($(…), pipes, loops, heredocs, sh -c included) unless a part may match a denied rule; inline interpreter code, eval and scripts are not auto-allowed.";

#[derive(Serialize)]
struct Hashed<'a> {
    version: u32,
    operator: Option<Rules>,
    task: Vec<Rules>,
    blocked_commands: &'a [String],
    blocked_paths: &'a [String],
    allowed_roots: Vec<String>,
}

#[derive(Serialize)]
struct Rules {
    allow: Vec<String>,
    deny: Vec<String>,
    ask: Vec<String>,
    default: Option<Verdict>,
    on_ask: Option<super::OnAsk>,
}

impl Rules {
    fn of(spec: &PolicySpec) -> Self {
        let texts = |rules: &[super::Rule]| rules.iter().map(ToString::to_string).collect();
        Self {
            allow: texts(&spec.allow),
            deny: texts(&spec.deny),
            ask: texts(&spec.ask),
            default: spec.default,
            on_ask: spec.on_ask,
        }
    }
}

impl Policy {
    /// A SHA-256 hex digest of what decides calls: every layer's rules,
    /// defaults and `on_ask`, the blocked lists and the allowed roots.
    /// The workdir, home and the run's protected files are left out so
    /// the same policy hashes the same on every machine; examples are
    /// left out because they decide nothing.
    pub fn hash(&self) -> String {
        let (operator, task) = &self.specs;
        let hashed = Hashed {
            version: 1,
            operator: operator.as_ref().map(Rules::of),
            task: task.iter().map(Rules::of).collect(),
            blocked_commands: &self.settings.blocked_commands,
            blocked_paths: &self.settings.blocked_paths,
            allowed_roots: self
                .settings
                .allowed_roots
                .iter()
                .map(|p| p.to_string_lossy().into_owned())
                .collect(),
        };
        // Serializing plain strings, options and vectors cannot fail.
        let json = serde_json::to_vec(&hashed).unwrap_or_default();
        crate::core::text::hex(&Sha256::digest(&json))
    }

    /// One short paragraph for the system prompt (about 300 characters):
    /// what is allowed, denied and asked, and what happens otherwise.
    /// Long lists end with `+N more`.
    pub fn summary(&self) -> String {
        let deny: Vec<&CompiledRule> = self.layers().flat_map(|(_, s)| &s.deny).collect();
        let ask: Vec<&CompiledRule> = self.layers().flat_map(|(_, s)| &s.ask).collect();
        let allow: Vec<&CompiledRule> = self.task.allow.iter().collect();
        let task_default = self.default_of(Layer::Task);
        let otherwise = if self.operator.is_some()
            && super::decide::strictness(self.default_of(Layer::Operator))
                > super::decide::strictness(task_default)
        {
            self.default_of(Layer::Operator)
        } else {
            task_default
        };
        let otherwise = match otherwise {
            Verdict::Allow => "is allowed",
            Verdict::Deny => "is denied",
            Verdict::Ask => "needs approval",
        };
        let tail = format!("; anything else {otherwise}. {}", self.shell_note());
        let lists: Vec<(&str, Vec<String>)> = [
            ("allowed", &allow),
            ("denied", &deny),
            ("needs approval", &ask),
        ]
        .into_iter()
        .filter(|(_, rules)| !rules.is_empty())
        .map(|(label, rules)| (label, rules.iter().map(|r| r.rule.to_string()).collect()))
        .collect();
        // Show every rule, then drop rules until the paragraph fits: from
        // the approval list first and the allow list (what the model may
        // do) last, keeping one rule of each list as long as possible.
        let mut shown: Vec<usize> = lists.iter().map(|(_, items)| items.len()).collect();
        loop {
            let text = render(&lists, &shown, &tail);
            if text.chars().count() <= SUMMARY_BUDGET {
                return text;
            }
            let victim = (0..shown.len())
                .rev()
                .find(|&i| shown[i] > 1)
                .or_else(|| (0..shown.len()).rev().find(|&i| shown[i] > 0));
            match victim {
                Some(index) => shown[index] -= 1,
                None => return text,
            }
        }
    }
}

impl Policy {
    /// What the model is told about shell commands: the truth of the
    /// policy in force (issue 33). Under a full wildcard on every side
    /// with the sandbox deciding, no shell restriction that does not exist.
    fn shell_note(&self) -> &'static str {
        let wild = |layer: Layer, set: &super::decide::RuleSet| {
            self.default_of(layer) == Verdict::Allow
                || set.allow.iter().any(|rule| rule.full_wildcard("run_shell"))
        };
        let open = self
            .layers()
            .all(|(layer, set)| self.sandbox_decides(layer) && wild(layer, set));
        let reading = self
            .layers()
            .all(|(layer, set)| self.decides_unknowns(layer) && wild(layer, set));
        match (open, reading, self.shell_rules_to_dodge()) {
            (true, _, false) => SHELL_NOTE_SANDBOX,
            (true, _, true) if self.exec_guard_holds() => SHELL_NOTE_GUARD,
            (true, _, true) => SHELL_NOTE_OPAQUE,
            (false, true, _) => SHELL_NOTE_UNKNOWNS,
            (false, false, _) => SHELL_NOTE,
        }
    }
}

/// `Policy: allowed: a, b +2 more; denied: 3 rules; anything else …`.
fn render(lists: &[(&str, Vec<String>)], shown: &[usize], tail: &str) -> String {
    let sections: Vec<String> = lists
        .iter()
        .zip(shown)
        .map(|((label, items), &count)| match count {
            0 => format!("{label}: {} rules", items.len()),
            _ if count == items.len() => format!("{label}: {}", items.join(", ")),
            _ => format!(
                "{label}: {} +{} more",
                items[..count].join(", "),
                items.len() - count
            ),
        })
        .collect();
    let body = if sections.is_empty() {
        "no rules".to_owned()
    } else {
        sections.join("; ")
    };
    format!("Policy: {body}{tail}")
}
