//! `policy.examples` (docs/policy.md): calls in the string form that a policy
//! must decide as listed, checked at load and by `ybs validate`, so a
//! policy is tested like code.

use serde::Serialize;

use super::decide::{CallView, Decision, Policy};
use super::rule::{Examples, Verdict};

/// The tool whose argument is a command; every other tool's argument is
/// a path.
pub const SHELL_TOOL: &str = "run_shell";

/// A call in the string form that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid call `{text}`: {problem}")]
pub struct CallParseError {
    pub text: String,
    pub problem: String,
}

/// Parses `tool(arg)` or `tool`: the argument is everything between the
/// first `(` and the last `)`, untrimmed inside (`run_shell(echo ")")`
/// works). For [`SHELL_TOOL`] the argument is the command, otherwise a
/// path.
pub fn parse_call(text: &str) -> Result<(String, Option<String>), CallParseError> {
    let text = text.trim();
    let error = |problem: &str| CallParseError {
        text: text.to_owned(),
        problem: problem.to_owned(),
    };
    let (tool, arg) = match text.find('(') {
        None => (text, None),
        Some(open) => {
            let Some(inner) = text[open + 1..].strip_suffix(')') else {
                return Err(error("expected `tool(argument)` with a closing `)`"));
            };
            (text[..open].trim(), Some(inner.to_owned()))
        }
    };
    if tool.is_empty()
        || !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
    {
        return Err(error("a tool name is letters, digits, `_`, `-` or `.`"));
    }
    if arg.as_deref().is_some_and(|a| a.trim().is_empty()) {
        return Err(error("empty argument"));
    }
    Ok((tool.to_owned(), arg))
}

/// The view of a parsed string-form call.
pub(crate) fn view<'a>(tool: &'a str, arg: Option<&'a str>) -> CallView<'a> {
    if tool == SHELL_TOOL {
        CallView {
            tool,
            command: arg,
            ..CallView::default()
        }
    } else {
        CallView {
            tool,
            path: arg,
            ..CallView::default()
        }
    }
}

/// An example the policy does not decide as listed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ExampleFailure {
    /// The example as written.
    pub call: String,
    pub expected: Verdict,
    /// What the policy decided; `None` when the example does not parse.
    pub actual: Option<Decision>,
    /// Why the example does not parse.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl std::fmt::Display for ExampleFailure {
    /// ``example `run_shell(cargo test && curl x)` should be allow but is
    /// deny (deny[0] run_shell(curl*))``
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.actual, &self.error) {
            (Some(decision), _) => write!(
                f,
                "example `{}` should be {} but is {decision}",
                self.call, self.expected
            ),
            (None, error) => write!(
                f,
                "example `{}` (expected {}) is not a call: {}",
                self.call,
                self.expected,
                error.as_deref().unwrap_or("unknown error")
            ),
        }
    }
}

impl Policy {
    /// Decides every example; returns those decided otherwise than
    /// listed, in list order (allow, deny, ask).
    pub fn check_examples(&self, examples: &Examples) -> Vec<ExampleFailure> {
        let lists = [
            (Verdict::Allow, &examples.allow),
            (Verdict::Deny, &examples.deny),
            (Verdict::Ask, &examples.ask),
        ];
        let mut failures = Vec::new();
        for (expected, calls) in lists {
            for call in calls {
                let failure = match parse_call(call) {
                    Err(error) => Some(ExampleFailure {
                        call: call.clone(),
                        expected,
                        actual: None,
                        error: Some(error.problem),
                    }),
                    Ok((tool, arg)) => {
                        let decision = self.decide(&view(&tool, arg.as_deref()));
                        (decision.verdict != expected).then(|| ExampleFailure {
                            call: call.clone(),
                            expected,
                            actual: Some(decision),
                            error: None,
                        })
                    }
                };
                failures.extend(failure);
            }
        }
        failures
    }
}
