//! The `policy:` mapping (docs/policy.md), as written in a task, in `defaults:`
//! or at the top level of a `--policy FILE`.
//!
//! A rule is a string (`read_file`, `"*"`, `run_shell(cargo test*)`,
//! `edit_file(src/**)`) or a one-key mapping
//! `{tool: {path: glob | [globs], command: glob | [globs]}}`. Globs are
//! compiled here once so a bad one is reported at its position.

use std::path::Path;

use crate::policy::{Examples, OnAsk, PolicySpec, Rule, RulePlace, Verdict};

use crate::core::span::Span;

use crate::core::decode::yaml::{Node, NodeKind, parse};
use crate::core::decode::{Decoder, Spanned};
use crate::core::decode::{Diagnostic, Diagnostics};

/// The keys of a policy mapping.
pub const POLICY_FIELDS: &[&str] = &[
    "allow", "deny", "ask", "default", "on_ask", "opaque", "examples",
];

const RULE_SHAPE: &str =
    "a rule like `read_file`, `run_shell(cargo test*)` or `edit_file: { path: \"src/**\" }`";

/// Decodes one policy layer; `context` names it in messages (`` `policy` ``,
/// `the policy file`). `None` when it is not a mapping at all; any other
/// problem is recorded and the rest is still decoded.
pub fn decode_policy(decoder: &mut Decoder<'_>, node: &Node, context: &str) -> Option<PolicySpec> {
    let fields = decoder.fields(node, context, POLICY_FIELDS)?;
    let mut spec = PolicySpec::default();
    for (verdict, list) in [
        (Verdict::Allow, &mut spec.allow),
        (Verdict::Deny, &mut spec.deny),
        (Verdict::Ask, &mut spec.ask),
    ] {
        if let Some(node) = fields.node(verdict.as_str()) {
            for (rule, span) in decode_rules(decoder, node, verdict.as_str()) {
                spec.places.push(RulePlace {
                    verdict,
                    tool: rule.tool.clone(),
                    text: rule.to_string(),
                    span,
                });
                list.push(rule);
            }
        }
    }
    if let Some(node) = fields.node("default") {
        spec.default = decode_default(decoder, node);
    }
    if let Some(node) = fields.node("on_ask") {
        spec.on_ask = decode_on_ask(decoder, node);
    }
    if let Some(node) = fields.node("opaque") {
        spec.opaque = decode_verdict(decoder, node, "opaque");
    }
    if let Some(node) = fields.node("examples") {
        spec.examples = decode_examples(decoder, node);
    }
    Some(spec)
}

/// Reads a standalone policy file (`--policy FILE`): the policy mapping at
/// the top level.
pub fn load_policy_str(path: &Path, text: &str) -> Result<PolicySpec, Diagnostics> {
    let mut decoder = Decoder::new(path);
    let (root, errors) = parse(text);
    decoder.yaml_errors(errors);
    let spec = match root {
        Some(root) => decode_policy(&mut decoder, &root, "the policy file"),
        None if decoder.error_count() == 0 => {
            decoder.push(Diagnostic::whole_file(path, "the policy file is empty"));
            None
        }
        None => None,
    };
    let diagnostics = decoder.finish();
    match spec {
        Some(spec) if diagnostics.is_empty() => Ok(spec),
        _ => Err(Diagnostics(diagnostics)),
    }
}

/// The rules of one list, each with where it is written.
fn decode_rules(decoder: &mut Decoder<'_>, node: &Node, list: &str) -> Vec<(Rule, Span)> {
    match &node.kind {
        NodeKind::Null => Vec::new(),
        NodeKind::Seq(items) => items
            .iter()
            .filter_map(|item| Some((decode_rule(decoder, item, list)?, item.span)))
            .collect(),
        _ => {
            decoder.expected(node, list, "a list of rules");
            Vec::new()
        }
    }
}

fn decode_rule(decoder: &mut Decoder<'_>, node: &Node, list: &str) -> Option<Rule> {
    match &node.kind {
        NodeKind::Str(text) => match Rule::parse(text) {
            Ok(rule) => check_globs(decoder, node, rule)
                .and_then(|rule| check_allowed_commands(decoder, node, list, rule)),
            Err(error) => {
                decoder.error_with_hint(
                    node.span,
                    error.to_string(),
                    "write `tool` or `tool(glob)`, like `run_shell(cargo test*)`",
                );
                None
            }
        },
        NodeKind::Map(entries) if entries.len() == 1 => {
            let (key, value) = &entries[0];
            let rule = match Rule::parse(&key.name) {
                Ok(rule) if rule.paths.is_empty() && rule.commands.is_empty() => rule,
                Ok(_) => {
                    decoder.error(
                        key.span,
                        format!(
                            "invalid rule `{}`: use either `tool(glob)` or a mapping, not both",
                            key.name
                        ),
                    );
                    return None;
                }
                Err(error) => {
                    decoder.error(key.span, error.to_string());
                    return None;
                }
            };
            decode_matchers(decoder, value, rule)
                .and_then(|rule| check_globs(decoder, node, rule))
                .and_then(|rule| check_allowed_commands(decoder, node, list, rule))
        }
        NodeKind::Map(_) => {
            decoder.error_with_hint(
                node.span,
                format!(
                    "invalid rule in `{list}`: a rule mapping has exactly one key, the tool name"
                ),
                "write each rule as its own list item, like `- edit_file: { path: \"src/**\" }`",
            );
            None
        }
        _ => {
            decoder.expected(node, list, RULE_SHAPE);
            None
        }
    }
}

/// `{path: ..., command: ...}` under a tool name.
fn decode_matchers(decoder: &mut Decoder<'_>, node: &Node, mut rule: Rule) -> Option<Rule> {
    if matches!(node.kind, NodeKind::Null) {
        return Some(rule);
    }
    let context = format!("rule `{}`", rule.tool);
    let fields = decoder.fields(node, &context, &["path", "command"])?;
    let before = decoder.error_count();
    let globs = |decoder: &mut Decoder<'_>, key: &str| -> Vec<String> {
        let Some(node) = fields.node(key) else {
            return Vec::new();
        };
        let start = decoder.error_count();
        let globs = decoder.one_or_many(node, key).unwrap_or_default();
        if globs.is_empty() && decoder.error_count() == start {
            decoder.error(
                node.span,
                format!("invalid `{key}`: the list of globs is empty"),
            );
        }
        globs
            .into_iter()
            .map(|glob: Spanned<String>| glob.value)
            .collect()
    };
    rule.paths = globs(decoder, "path");
    rule.commands = globs(decoder, "command");
    if let Some((key, _)) = fields.entry("command")
        && !matches!(rule.tool.as_str(), "run_shell" | "*")
    {
        decoder.error(
            key.span,
            format!("`command` only applies to `run_shell`, not `{}`", rule.tool),
        );
    }
    if let Some((key, _)) = fields.entry("path")
        && rule.tool == "run_shell"
    {
        decoder.error_with_hint(
            key.span,
            "`run_shell` rules match `command`, not `path`",
            "write `run_shell: { command: \"cargo test*\" }`",
        );
    }
    (decoder.error_count() == before).then_some(rule)
}

/// An `allow` command glob holding `;`, `&&`, `||` or `|` (outside
/// quotes) can never match: `allow` needs every simple command of a call
/// to match, and no simple command holds one of those.
fn check_allowed_commands(
    decoder: &mut Decoder<'_>,
    node: &Node,
    list: &str,
    rule: Rule,
) -> Option<Rule> {
    if list != "allow" {
        return Some(rule);
    }
    for glob in &rule.commands {
        if let Some(operator) = shell_operator(glob) {
            decoder.error_with_hint(
                node.span,
                format!(
                    "`allow` rule `{rule}` can never match: a command is allowed part by part, \
                     split on `;`, `&&`, `||` and `|`, and no part holds `{operator}`"
                ),
                "allow each command on its own, like `run_shell(cargo build*)` and `run_shell(cargo test*)`",
            );
            return None;
        }
    }
    Some(rule)
}

/// The first shell list or pipe operator in `text` outside quotes.
fn shell_operator(text: &str) -> Option<&'static str> {
    let mut quote: Option<char> = None;
    let mut chars = text.chars().peekable();
    let mut escaped = false;
    while let Some(c) = chars.next() {
        if escaped {
            escaped = false;
            continue;
        }
        match (quote, c) {
            (Some('\''), '\'') => quote = None,
            (Some('\''), _) => {}
            (_, '\\') => escaped = true,
            (Some('"'), '"') => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') => quote = Some(c),
            (None, ';') => return Some(";"),
            (None, '&') if chars.peek() == Some(&'&') => return Some("&&"),
            (None, '|') if chars.peek() == Some(&'|') => return Some("||"),
            (None, '|') => return Some("|"),
            _ => {}
        }
    }
    None
}

fn check_globs(decoder: &mut Decoder<'_>, node: &Node, rule: Rule) -> Option<Rule> {
    let mut ok = true;
    for glob in rule.paths.iter().chain(&rule.commands) {
        if let Err(error) = globset::Glob::new(glob) {
            decoder.error(
                node.span,
                format!("invalid glob `{glob}` in rule `{rule}`: {}", error.kind()),
            );
            ok = false;
        }
    }
    ok.then_some(rule)
}

fn decode_default(decoder: &mut Decoder<'_>, node: &Node) -> Option<Verdict> {
    let verdict = match &node.kind {
        NodeKind::Str(text) => Verdict::parse(text),
        _ => None,
    };
    if verdict.is_none() {
        decoder.expected_one_of(node, "default", &["allow", "deny", "ask"]);
    }
    verdict
}

fn decode_verdict(decoder: &mut Decoder<'_>, node: &Node, key: &str) -> Option<Verdict> {
    let verdict = match &node.kind {
        NodeKind::Str(text) => Verdict::parse(text),
        _ => None,
    };
    if verdict.is_none() {
        decoder.expected_one_of(node, key, &["ask", "deny", "allow"]);
    }
    verdict
}

fn decode_on_ask(decoder: &mut Decoder<'_>, node: &Node) -> Option<OnAsk> {
    let on_ask = match &node.kind {
        NodeKind::Str(text) => OnAsk::parse(text),
        _ => None,
    };
    if on_ask.is_none() {
        decoder.expected_one_of(node, "on_ask", &["deny", "fail", "pause"]);
    }
    on_ask
}

fn decode_examples(decoder: &mut Decoder<'_>, node: &Node) -> Examples {
    let mut examples = Examples::default();
    let Some(fields) = decoder.fields(node, "`examples`", &["allow", "deny", "ask"]) else {
        return examples;
    };
    for (key, list) in [
        ("allow", &mut examples.allow),
        ("deny", &mut examples.deny),
        ("ask", &mut examples.ask),
    ] {
        let calls: Vec<Spanned<String>> = fields.get(decoder, key).unwrap_or_default();
        for call in calls {
            // A call, as `ybs policy explain` reads one (no `*` in its
            // tool name, whatever its argument holds).
            match crate::policy::parse_call(&call.value) {
                Ok(_) => list.push(call.value),
                Err(error) => decoder.error(
                    call.span,
                    format!("invalid example call `{}`: {}", call.value, error.problem),
                ),
            }
        }
    }
    examples
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(text: &str) -> Result<PolicySpec, Diagnostics> {
        load_policy_str(Path::new("p.yaml"), text)
    }

    fn messages(text: &str) -> Vec<String> {
        load(text)
            .unwrap_err()
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    #[test]
    fn both_rule_forms() {
        let spec = load(concat!(
            "allow:\n",
            "  - read_file\n",
            "  - \"*\"\n",
            "  - run_shell(cargo test*)\n",
            "  - edit_file: { path: \"src/**\" }\n",
            "  - run_shell: { command: [\"cargo build*\", \"cargo test*\"] }\n",
            "  - list_files:\n",
            "deny:\n",
            "  - run_shell: { command: \"git push*\" }\n",
            "default: ask\n",
            "on_ask: fail\n",
            "examples:\n",
            "  allow: [\"run_shell(cargo test --quiet)\"]\n",
            "  deny: [\"run_shell(git push origin main)\"]\n",
        ))
        .unwrap();
        assert_eq!(spec.allow.len(), 6);
        assert_eq!(spec.allow[0], Rule::tool("read_file"));
        assert_eq!(spec.allow[1], Rule::tool("*"));
        assert_eq!(spec.allow[2].commands, ["cargo test*"]);
        assert_eq!(spec.allow[3].paths, ["src/**"]);
        assert_eq!(spec.allow[4].commands, ["cargo build*", "cargo test*"]);
        assert_eq!(spec.allow[5], Rule::tool("list_files"));
        assert_eq!(spec.deny[0].commands, ["git push*"]);
        assert_eq!(spec.default, Some(Verdict::Ask));
        assert_eq!(spec.on_ask, Some(OnAsk::Fail));
        assert_eq!(spec.examples.allow, ["run_shell(cargo test --quiet)"]);
        assert_eq!(spec.examples.deny, ["run_shell(git push origin main)"]);
    }

    #[test]
    fn pause_is_accepted_and_typos_name_it() {
        assert_eq!(load("on_ask: pause\n").unwrap().on_ask, Some(OnAsk::Pause));
        let diagnostics = load("on_ask: later\n").unwrap_err();
        assert!(
            diagnostics.0[0].message.contains("`pause`"),
            "{:?}",
            diagnostics.0[0]
        );
    }

    #[test]
    fn bad_rules_are_all_reported() {
        let got = messages(concat!(
            "allow:\n",
            "  - run_shell(cargo\n",
            "  - edit_file: { paht: \"src/**\" }\n",
            "  - read_file: { command: ls }\n",
            "  - run_shell: { path: x }\n",
            "  - { a: 1, b: 2 }\n",
            "  - 42\n",
            "  - \"edit_file(src/[)\"\n",
            "default: maybe\n",
        ));
        assert_eq!(got.len(), 8, "{got:#?}");
        assert!(got[0].starts_with("p.yaml:2:5: invalid rule `run_shell(cargo`"));
        assert!(got[1].starts_with("p.yaml:3:18: unknown field `paht` in rule `edit_file`"));
        assert!(got[2].contains("`command` only applies to `run_shell`"));
        assert!(got[3].contains("match `command`, not `path`"));
        assert!(got[4].contains("exactly one key"));
        assert!(got[5].contains("expected a rule like"));
        assert!(got[6].contains("invalid glob `src/[`"));
        assert!(got[7].contains("expected `allow`, `deny` or `ask`, found `maybe`"));
    }

    #[test]
    fn empty_policy_file_is_an_error() {
        assert!(load("").is_err());
        assert_eq!(load("{}\n").unwrap(), PolicySpec::default());
    }
}
