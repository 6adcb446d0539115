//! Deciding a call: built-in guards, then `deny`, then `ask`, then
//! `allow`, then `default` (SPEC §4). Every decision names its rule.

use globset::{Glob, GlobMatcher};
use serde::Serialize;

use super::rule::{OnAsk, PolicySpec, Rule, Verdict};

/// What policy sees of a call: the tool, the path argument (relative to
/// the workdir, after resolution) and the shell command, if any.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallView<'a> {
    pub tool: &'a str,
    pub path: Option<&'a str>,
    pub command: Option<&'a str>,
}

/// Which rule made a decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RuleRef {
    /// A built-in guard no rule can loosen.
    Guard { name: String },
    /// `list[index]`, with the rule's text.
    Listed {
        list: Verdict,
        index: usize,
        text: String,
    },
    /// No rule matched.
    Default,
}

impl std::fmt::Display for RuleRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Guard { name } => write!(f, "guard:{name}"),
            Self::Listed { list, index, text } => write!(f, "{list}[{index}] {text}"),
            Self::Default => f.write_str("default"),
        }
    }
}

/// A verdict and the rule behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Decision {
    pub verdict: Verdict,
    pub rule: RuleRef,
    /// Why, in words, when the rule alone does not say it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

#[derive(Debug, Clone)]
struct CompiledRule {
    rule: Rule,
    paths: Vec<GlobMatcher>,
    commands: Vec<GlobMatcher>,
}

/// A merged, compiled policy.
#[derive(Debug, Clone)]
pub struct Policy {
    allow: Vec<CompiledRule>,
    deny: Vec<CompiledRule>,
    ask: Vec<CompiledRule>,
    default: Verdict,
    on_ask: OnAsk,
}

/// A glob in a rule that does not compile.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid glob `{glob}` in rule `{rule}`: {message}")]
pub struct PolicyError {
    pub rule: String,
    pub glob: String,
    pub message: String,
}

impl Policy {
    /// Merges layers in order (later layers add rules; the last `default`
    /// and `on_ask` set win) and compiles the globs.
    pub fn new(layers: &[PolicySpec]) -> Result<Self, PolicyError> {
        let mut policy = Self {
            allow: vec![],
            deny: vec![],
            ask: vec![],
            default: Verdict::Deny,
            on_ask: OnAsk::Deny,
        };
        for layer in layers {
            for rule in &layer.allow {
                policy.allow.push(compile(rule)?);
            }
            for rule in &layer.deny {
                policy.deny.push(compile(rule)?);
            }
            for rule in &layer.ask {
                policy.ask.push(compile(rule)?);
            }
            if let Some(default) = layer.default {
                policy.default = default;
            }
            if let Some(on_ask) = layer.on_ask {
                policy.on_ask = on_ask;
            }
        }
        Ok(policy)
    }

    pub fn on_ask(&self) -> OnAsk {
        self.on_ask
    }

    /// Decides one call.
    pub fn decide(&self, call: &CallView<'_>) -> Decision {
        for (list, rules) in [(Verdict::Deny, &self.deny), (Verdict::Ask, &self.ask)] {
            if let Some((index, rule)) = rules
                .iter()
                .enumerate()
                .find(|(_, rule)| matches_any(rule, call))
            {
                return listed(list, index, rule);
            }
        }
        if let Some((index, rule)) = self
            .allow
            .iter()
            .enumerate()
            .find(|(_, rule)| matches_all(rule, call))
        {
            return listed(Verdict::Allow, index, rule);
        }
        Decision {
            verdict: self.default,
            rule: RuleRef::Default,
            detail: None,
        }
    }

    /// A short human summary for the system prompt.
    pub fn summary(&self) -> String {
        let list = |rules: &[CompiledRule]| {
            if rules.is_empty() {
                "(none)".to_owned()
            } else {
                rules
                    .iter()
                    .map(|r| r.rule.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        };
        format!(
            "allowed: {}; denied: {}; needs approval: {}; anything else: {}",
            list(&self.allow),
            list(&self.deny),
            list(&self.ask),
            self.default
        )
    }
}

fn listed(list: Verdict, index: usize, rule: &CompiledRule) -> Decision {
    Decision {
        verdict: list,
        rule: RuleRef::Listed {
            list,
            index,
            text: rule.rule.to_string(),
        },
        detail: None,
    }
}

fn compile(rule: &Rule) -> Result<CompiledRule, PolicyError> {
    let build = |glob: &String| {
        Glob::new(glob)
            .map(|g| g.compile_matcher())
            .map_err(|error| PolicyError {
                rule: rule.to_string(),
                glob: glob.clone(),
                message: error.kind().to_string(),
            })
    };
    Ok(CompiledRule {
        rule: rule.clone(),
        paths: rule.paths.iter().map(build).collect::<Result<_, _>>()?,
        commands: rule.commands.iter().map(build).collect::<Result<_, _>>()?,
    })
}

fn tool_matches(rule: &CompiledRule, call: &CallView<'_>) -> bool {
    rule.rule.tool == "*" || rule.rule.tool == call.tool
}

/// For deny/ask: the rule hits if any part of the call matches.
fn matches_any(rule: &CompiledRule, call: &CallView<'_>) -> bool {
    if !tool_matches(rule, call) {
        return false;
    }
    let path_ok = rule.paths.is_empty()
        || call
            .path
            .is_some_and(|p| rule.paths.iter().any(|g| g.is_match(p)));
    let command_ok = rule.commands.is_empty()
        || call.command.is_some_and(|c| {
            simple_commands(c)
                .iter()
                .any(|part| rule.commands.iter().any(|g| g.is_match(part)))
        });
    path_ok && command_ok
}

/// For allow: every part of the call must match.
fn matches_all(rule: &CompiledRule, call: &CallView<'_>) -> bool {
    if !tool_matches(rule, call) {
        return false;
    }
    let path_ok = rule.paths.is_empty()
        || call
            .path
            .is_some_and(|p| rule.paths.iter().any(|g| g.is_match(p)));
    let command_ok = rule.commands.is_empty()
        || call.command.is_some_and(|c| {
            !has_substitution(c)
                && simple_commands(c)
                    .iter()
                    .all(|part| rule.commands.iter().any(|g| g.is_match(part)))
        });
    path_ok && command_ok
}

fn has_substitution(command: &str) -> bool {
    command.contains("$(")
        || command.contains('`')
        || command.contains("<(")
        || command.contains(">(")
}

/// Splits on `;`, `&&`, `||`, `|`, `&` and newlines (no quoting awareness yet).
fn simple_commands(command: &str) -> Vec<String> {
    command
        .split(['\n', ';', '&', '|'])
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(yaml_like: &[(&str, Verdict)]) -> Policy {
        let mut spec = PolicySpec::default();
        for (text, verdict) in yaml_like {
            let rule = Rule::parse(text).unwrap();
            match verdict {
                Verdict::Allow => spec.allow.push(rule),
                Verdict::Deny => spec.deny.push(rule),
                Verdict::Ask => spec.ask.push(rule),
            }
        }
        Policy::new(&[spec]).unwrap()
    }

    #[test]
    fn precedence_and_chains() {
        let p = policy(&[
            ("read_file", Verdict::Allow),
            ("run_shell(cargo test*)", Verdict::Allow),
            ("run_shell(git push*)", Verdict::Deny),
            ("edit_file(src/**)", Verdict::Allow),
        ]);
        let shell = |c| CallView {
            tool: "run_shell",
            command: Some(c),
            path: None,
        };
        assert_eq!(
            p.decide(&CallView {
                tool: "read_file",
                ..CallView::default()
            })
            .verdict,
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&shell("cargo test --quiet")).verdict,
            Verdict::Allow
        );
        assert_eq!(
            p.decide(&shell("cargo test && curl x")).verdict,
            Verdict::Deny
        );
        assert_eq!(
            p.decide(&shell("cargo test; git push origin"))
                .rule
                .to_string(),
            "deny[0] run_shell(git push*)"
        );
        assert_eq!(
            p.decide(&shell("cargo test $(rm -rf x)")).verdict,
            Verdict::Deny
        );
        let edit = |path| CallView {
            tool: "edit_file",
            path: Some(path),
            command: None,
        };
        assert_eq!(p.decide(&edit("src/lib.rs")).verdict, Verdict::Allow);
        assert_eq!(p.decide(&edit("README.md")).rule, RuleRef::Default);
    }
}
