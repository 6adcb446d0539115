//! Rule syntax: the map form (`edit_file: { path: "src/**" }`) and the
//! string form (`edit_file(src/**)`, `run_shell(cargo test*)`).

use serde::{Deserialize, Serialize};

/// What policy says about a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Allow,
    Deny,
    Ask,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Allow => "allow",
            Self::Deny => "deny",
            Self::Ask => "ask",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "allow" => Some(Self::Allow),
            "deny" => Some(Self::Deny),
            "ask" => Some(Self::Ask),
            _ => None,
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How `ask` resolves without a human (docs/policy.md).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnAsk {
    /// The model gets a result saying the call needs approval; it did not run.
    #[default]
    Deny,
    /// The task fails with reason `policy_denied`.
    Fail,
    /// The run pauses for approval (`ybs resume`).
    Pause,
}

impl OnAsk {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "deny" => Some(Self::Deny),
            "fail" => Some(Self::Fail),
            "pause" => Some(Self::Pause),
            _ => None,
        }
    }
}

/// One rule: a tool name (or `*`) with optional argument matchers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub tool: String,
    /// Globs on the call's path argument, resolved against the workdir.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Globs on each simple command of a `run_shell` command.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<String>,
}

/// A rule string that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid rule `{text}`: {problem}")]
pub struct RuleParseError {
    pub text: String,
    pub problem: String,
}

impl Rule {
    pub fn tool(name: impl Into<String>) -> Self {
        Self {
            tool: name.into(),
            ..Self::default()
        }
    }

    /// Parses the string form: `tool` or `tool(argument glob)`. For
    /// `run_shell` the argument is a command glob, otherwise a path glob.
    pub fn parse(text: &str) -> Result<Self, RuleParseError> {
        let text = text.trim();
        let error = |problem: &str| RuleParseError {
            text: text.to_owned(),
            problem: problem.to_owned(),
        };
        let (tool, argument) = match text.find('(') {
            None => (text, None),
            Some(open) => {
                let Some(inner) = text[open + 1..].strip_suffix(')') else {
                    return Err(error("expected `tool(glob)` with a closing `)`"));
                };
                (&text[..open], Some(inner.trim()))
            }
        };
        let tool = tool.trim();
        if tool.is_empty() {
            return Err(error("missing tool name"));
        }
        if !tool
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '*'))
        {
            return Err(error(
                "a tool name is letters, digits, `_`, `-` and `.`, with `*` for any characters (`fs__*`: every tool of the MCP server `fs`)",
            ));
        }
        let mut rule = Self::tool(tool);
        if let Some(argument) = argument {
            if argument.is_empty() {
                return Err(error("empty argument glob"));
            }
            if tool == "run_shell" {
                rule.commands.push(argument.to_owned());
            } else {
                rule.paths.push(argument.to_owned());
            }
        }
        Ok(rule)
    }
}

impl Rule {
    /// Whether the rule's tool name (where `*` stands for any characters:
    /// `*` every tool, `fs__*` every tool of the MCP server `fs`) names
    /// `tool`.
    pub fn matches_tool(&self, tool: &str) -> bool {
        tool_pattern_matches(&self.tool, tool)
    }
}

/// `pattern` with `*` for any run of characters, against `name`.
pub fn tool_pattern_matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        // No `*`: the whole name.
        return rest.is_empty();
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args: Vec<&str> = self
            .paths
            .iter()
            .chain(&self.commands)
            .map(String::as_str)
            .collect();
        if args.is_empty() {
            f.write_str(&self.tool)
        } else {
            write!(f, "{}({})", self.tool, args.join(" | "))
        }
    }
}

/// Example calls a policy must decide as listed (docs/policy.md), in string form.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Examples {
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub deny: Vec<String>,
    #[serde(default)]
    pub ask: Vec<String>,
}

/// One policy layer as written in a task file, `defaults:` or `--policy FILE`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicySpec {
    #[serde(default)]
    pub allow: Vec<Rule>,
    #[serde(default)]
    pub deny: Vec<Rule>,
    #[serde(default)]
    pub ask: Vec<Rule>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<Verdict>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_ask: Option<OnAsk>,
    /// What a wildcard allow gives a part the analysis cannot see through
    /// (a renamed program, a script or module) while a `deny` or `ask`
    /// rule on `run_shell` exists: `ask` (unset), `deny`, or `allow` (the
    /// behaviour before; docs/policy.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub opaque: Option<Verdict>,
    #[serde(default)]
    pub examples: Examples,
    /// Where each rule's tool name is written, when the layer was read
    /// from YAML (a task file or `--policy FILE`): for messages that point
    /// at a rule. Not part of the policy itself.
    #[serde(skip)]
    pub places: Vec<RulePlace>,
}

/// Where one rule of a [`PolicySpec`] is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePlace {
    /// The list holding it.
    pub verdict: Verdict,
    /// The rule's tool name (a pattern when it holds `*`).
    pub tool: String,
    /// The rule as written, for messages.
    pub text: String,
    pub span: crate::core::span::Span,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_form() {
        assert_eq!(Rule::parse("read_file").unwrap(), Rule::tool("read_file"));
        let shell = Rule::parse("run_shell(cargo test*)").unwrap();
        assert_eq!(shell.commands, vec!["cargo test*"]);
        let edit = Rule::parse("edit_file(src/**)").unwrap();
        assert_eq!(edit.paths, vec!["src/**"]);
        assert!(Rule::parse("run_shell(cargo").is_err());
        assert!(Rule::parse("(x)").is_err());
        assert!(Rule::parse("bad name").is_err());
        assert_eq!(Rule::parse("fs__*").unwrap(), Rule::tool("fs__*"));
    }

    #[test]
    fn a_star_in_a_tool_name_stands_for_any_characters() {
        for (pattern, name, matches) in [
            ("*", "read_file", true),
            ("read_file", "read_file", true),
            ("read_file", "read_files", false),
            ("fs__*", "fs__read_file", true),
            ("fs__*", "fs__", true),
            ("fs__*", "git__log", false),
            ("*_file", "edit_file", true),
            ("*_file", "run_shell", false),
            ("a*b*c", "abc", true),
            ("a*b*c", "aXbYc", true),
            ("a*b*c", "ac", false),
            ("ab*ba", "aba", false),
        ] {
            assert_eq!(
                tool_pattern_matches(pattern, name),
                matches,
                "{pattern} {name}"
            );
        }
    }
}
