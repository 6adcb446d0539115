//! Decoding a [`Node`] tree into typed values by hand, collecting every
//! diagnostic instead of stopping at the first (docs/task-files.md: `ybs validate`
//! reports all errors). Shared by task files, policy files and config files.
//!
//! The pattern: `decoder.fields(node, context, FIELDS)` checks the node is a
//! mapping and reports each unknown key with the closest valid one as a
//! hint; then `fields.get::<T>(decoder, "name")` decodes one field, which
//! reports a wrong type and yields `None`.
//!
//! Below `task` and `config`, which both read their files with it.

pub mod diagnostic;
pub mod duration;
pub mod yaml;

use std::path::Path;
use std::time::Duration;

use crate::core::span::Span;
use crate::core::text::closest;

pub use diagnostic::{Diagnostic, Diagnostics};
use duration::parse_duration;
use yaml::{Key, Node, NodeKind};

/// What usually makes a file unreadable as YAML.
const YAML_SYNTAX_HINT: &str = "check the indentation and the brackets and quotes up to this place; quote a value that holds `: ` or ` #`, or starts with `*`, `&`, `!`, `[`, `{`, `%`, `@` or a backtick";

/// Collects diagnostics for one file.
#[derive(Debug)]
pub struct Decoder<'p> {
    path: &'p Path,
    diagnostics: Vec<Diagnostic>,
    named_files: Option<&'p crate::core::named::NamedFiles>,
}

impl<'p> Decoder<'p> {
    pub fn new(path: &'p Path) -> Self {
        Self {
            path,
            diagnostics: Vec::new(),
            named_files: None,
        }
    }

    /// The rules for the files the document names (none: confined, with
    /// no blocked paths).
    pub fn with_named_files(mut self, files: &'p crate::core::named::NamedFiles) -> Self {
        self.named_files = Some(files);
        self
    }

    pub fn named_files(&self) -> Option<&'p crate::core::named::NamedFiles> {
        self.named_files
    }

    pub fn path(&self) -> &'p Path {
        self.path
    }

    pub fn error(&mut self, span: Span, message: impl Into<String>) {
        self.diagnostics
            .push(Diagnostic::new(self.path, span, message));
    }

    pub fn error_with_hint(
        &mut self,
        span: Span,
        message: impl Into<String>,
        hint: impl Into<String>,
    ) {
        self.diagnostics
            .push(Diagnostic::new(self.path, span, message).with_hint(hint));
    }

    /// The errors of reading the YAML, each at its place; a syntax error
    /// with a hint on what usually causes one.
    pub fn yaml_errors(&mut self, errors: Vec<yaml::YamlError>) {
        for error in errors {
            if error.message.starts_with("invalid YAML: ") {
                self.error_with_hint(error.span, error.message, YAML_SYNTAX_HINT);
            } else {
                self.error(error.span, error.message);
            }
        }
    }

    pub fn push(&mut self, diagnostic: Diagnostic) {
        self.diagnostics.push(diagnostic);
    }

    /// How many diagnostics so far; compare before and after a step to
    /// learn whether it failed.
    pub fn error_count(&self) -> usize {
        self.diagnostics.len()
    }

    /// The diagnostics, sorted by position, duplicates removed (a value
    /// from `defaults:` is checked once per task).
    pub fn finish(mut self) -> Vec<Diagnostic> {
        self.diagnostics
            .sort_by(|a, b| a.span.cmp(&b.span).then_with(|| a.message.cmp(&b.message)));
        self.diagnostics.dedup();
        self.diagnostics
    }

    /// `invalid `field`: expected EXPECTED, found FOUND`.
    pub fn expected(&mut self, node: &Node, field: &str, expected: &str) {
        self.error_with_hint(
            node.span,
            format!(
                "invalid `{field}`: expected {expected}, found {}",
                node.describe()
            ),
            format!("write `{field}` as {expected}"),
        );
    }

    /// Reports a value that is not one of `choices`, with a did-you-mean
    /// hint when a string value is close to one of them.
    pub fn expected_one_of(&mut self, node: &Node, field: &str, choices: &[&str]) {
        let expected = match choices {
            [only] => format!("`{only}`"),
            [rest @ .., last] => format!("{} or `{last}`", crate::core::text::list(rest)),
            [] => "nothing".to_owned(),
        };
        let message = format!(
            "invalid `{field}`: expected {expected}, found {}",
            node.describe()
        );
        let close = match &node.kind {
            NodeKind::Str(text) => closest(text, choices.iter().copied()),
            _ => None,
        };
        match close {
            Some(close) => {
                self.error_with_hint(node.span, message, format!("did you mean `{close}`?"))
            }
            None => self.error(node.span, message),
        }
    }

    /// Checks that `node` is a mapping (or empty) and that every key is one
    /// of `allowed`; each unknown key is reported at its own position.
    pub fn fields<'n>(
        &mut self,
        node: &'n Node,
        context: &str,
        allowed: &[&str],
    ) -> Option<Fields<'n>> {
        self.fields_with_hint(node, context, allowed, |_| None)
    }

    /// Like [`Self::fields`], with a hint of the caller's for unknown keys
    /// that have no close match.
    pub fn fields_with_hint<'n>(
        &mut self,
        node: &'n Node,
        context: &str,
        allowed: &[&str],
        hint: impl Fn(&str) -> Option<String>,
    ) -> Option<Fields<'n>> {
        self.fields_accepting(node, context, allowed, &[], hint)
    }

    /// Like [`Self::fields_with_hint`], also letting through the keys in
    /// `unlisted` without naming them among the expected ones: keys the
    /// caller rejects with a message of its own (`api_key`, `prompt` in
    /// `defaults`).
    pub fn fields_accepting<'n>(
        &mut self,
        node: &'n Node,
        context: &str,
        allowed: &[&str],
        unlisted: &[&str],
        hint: impl Fn(&str) -> Option<String>,
    ) -> Option<Fields<'n>> {
        let entries: &'n [(Key, Node)] = match &node.kind {
            NodeKind::Map(entries) => entries,
            NodeKind::Null => &[],
            _ => {
                self.error(
                    node.span,
                    format!(
                        "invalid {context}: expected a mapping, found {}",
                        node.describe()
                    ),
                );
                return None;
            }
        };
        for (key, _) in entries {
            let name = key.name.as_str();
            if !allowed.contains(&name) && !unlisted.contains(&name) {
                self.unknown_field(key, context, allowed, &hint);
            }
        }
        Some(Fields {
            span: node.span,
            entries,
        })
    }

    fn unknown_field(
        &mut self,
        key: &Key,
        context: &str,
        allowed: &[&str],
        hint: &impl Fn(&str) -> Option<String>,
    ) {
        let expected = allowed
            .iter()
            .map(|field| format!("`{field}`"))
            .collect::<Vec<_>>()
            .join(", ");
        let message = format!(
            "unknown field `{}` in {context}, expected one of {expected}",
            key.name
        );
        let hint = closest(&key.name, allowed.iter().copied())
            .map(|field| format!("did you mean `{field}`?"))
            .or_else(|| hint(&key.name))
            .unwrap_or_else(|| {
                format!(
                    "remove `{}` or put it where it belongs: a key ybs does not know is refused, not ignored",
                    key.name
                )
            });
        self.push(Diagnostic::new(self.path, key.span, message).with_hint(hint));
    }

    /// Decodes `node` as `T`, reporting a wrong type against `field`.
    pub fn decode<T: Decode>(&mut self, node: &Node, field: &str) -> Option<T> {
        T::decode(node, field, self)
    }

    /// A string or a list of strings (a glob or globs, say).
    pub fn one_or_many(&mut self, node: &Node, field: &str) -> Option<Vec<Spanned<String>>> {
        match &node.kind {
            NodeKind::Str(text) => Some(vec![Spanned::new(text.clone(), node.span)]),
            NodeKind::Seq(_) => self.decode(node, field),
            _ => {
                self.expected(node, field, "a string or a list of strings");
                None
            }
        }
    }
}

/// A number that must be at least 1 (not the type's zero).
pub fn positive<T: PartialEq + Default>(
    decoder: &mut Decoder<'_>,
    value: Spanned<T>,
    field: &str,
) -> Option<T> {
    if value.value == T::default() {
        decoder.error(value.span, format!("invalid `{field}`: must be at least 1"));
        None
    } else {
        Some(value.value)
    }
}

/// A duration that must be longer than zero.
pub fn positive_duration(
    decoder: &mut Decoder<'_>,
    value: Spanned<Duration>,
    field: &str,
) -> Option<Duration> {
    if value.value.is_zero() {
        decoder.error(
            value.span,
            format!("invalid `{field}`: must be longer than 0"),
        );
        None
    } else {
        Some(value.value)
    }
}

/// A string with something other than whitespace in it.
pub fn non_empty(decoder: &mut Decoder<'_>, value: Spanned<String>, field: &str) -> Option<String> {
    if value.value.trim().is_empty() {
        decoder.error(value.span, format!("invalid `{field}`: must not be empty"));
        None
    } else {
        Some(value.value)
    }
}

/// The entries of a checked mapping.
#[derive(Debug, Clone, Copy)]
pub struct Fields<'n> {
    pub span: Span,
    pub entries: &'n [(Key, Node)],
}

impl<'n> Fields<'n> {
    pub fn node(&self, key: &str) -> Option<&'n Node> {
        self.entry(key).map(|(_, node)| node)
    }

    pub fn entry(&self, key: &str) -> Option<(&'n Key, &'n Node)> {
        self.entries
            .iter()
            .find(|(candidate, _)| candidate.name == key)
            .map(|(key, node)| (key, node))
    }

    pub fn has(&self, key: &str) -> bool {
        self.entry(key).is_some()
    }

    /// True if and only if an unknown key looks like a typo of `wanted`
    /// (it was reported with "did you mean `wanted`?"), so a missing
    /// `wanted` need not be reported again.
    pub fn has_typo_of(&self, wanted: &str, allowed: &[&str]) -> bool {
        self.entries.iter().any(|(key, _)| {
            !allowed.contains(&key.name.as_str())
                && closest(&key.name, allowed.iter().copied()) == Some(wanted)
        })
    }

    /// Decodes the field when present; `None` when absent or invalid (then
    /// a diagnostic was recorded).
    pub fn get<T: Decode>(&self, decoder: &mut Decoder<'_>, key: &str) -> Option<T> {
        self.node(key)
            .and_then(|node| T::decode(node, key, decoder))
    }
}

/// A value that knows where it was written.
#[derive(Debug, Clone, PartialEq)]
pub struct Spanned<T> {
    pub value: T,
    pub span: Span,
}

impl<T> Spanned<T> {
    pub fn new(value: T, span: Span) -> Self {
        Self { value, span }
    }
}

/// Decoding one value from a node.
pub trait Decode: Sized {
    /// Returns `None` after recording a diagnostic.
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self>;
}

impl Decode for String {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        match &node.kind {
            NodeKind::Str(text) => Some(text.clone()),
            _ => {
                decoder.expected(node, field, "a string");
                None
            }
        }
    }
}

impl Decode for bool {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        match node.kind {
            NodeKind::Bool(value) => Some(value),
            _ => {
                decoder.expected(node, field, "`true` or `false`");
                None
            }
        }
    }
}

macro_rules! decode_integer {
    ($($ty:ty => $expected:literal),* $(,)?) => {$(
        impl Decode for $ty {
            fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
                if let NodeKind::Int(value) = node.kind
                    && let Ok(value) = <$ty>::try_from(value)
                {
                    return Some(value);
                }
                decoder.expected(node, field, $expected);
                None
            }
        }
    )*};
}

decode_integer! {
    u32 => "a whole number (0 or more)",
    u64 => "a whole number (0 or more)",
    usize => "a whole number (0 or more)",
    i32 => "an integer",
}

impl Decode for f64 {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        #[expect(clippy::cast_precision_loss, reason = "config numbers are small")]
        match node.kind {
            NodeKind::Int(value) => Some(value as f64),
            NodeKind::Float(value) if value.is_finite() => Some(value),
            _ => {
                decoder.expected(node, field, "a number");
                None
            }
        }
    }
}

/// `15m`, `30s`, `2h`, `1h30m`, `500ms`, or a whole number of seconds.
impl Decode for Duration {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        let parsed = match &node.kind {
            NodeKind::Int(seconds) => u64::try_from(*seconds).ok().map(Duration::from_secs),
            NodeKind::Str(text) => parse_duration(text),
            _ => None,
        };
        if parsed.is_none() {
            decoder.expected(node, field, "a duration like 15m, 30s or 90");
        }
        parsed
    }
}

impl<T: Decode> Decode for Spanned<T> {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        T::decode(node, field, decoder).map(|value| Spanned::new(value, node.span))
    }
}

/// A list; an empty value (`field:` with nothing) is an empty list. Every
/// bad item is reported; the list is `None` when any item was bad.
impl<T: Decode> Decode for Vec<T> {
    fn decode(node: &Node, field: &str, decoder: &mut Decoder<'_>) -> Option<Self> {
        match &node.kind {
            NodeKind::Null => Some(Vec::new()),
            NodeKind::Seq(items) => {
                let decoded: Vec<Option<T>> = items
                    .iter()
                    .map(|item| T::decode(item, field, decoder))
                    .collect();
                decoded.into_iter().collect()
            }
            _ => {
                decoder.expected(node, field, "a list");
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::yaml::parse;
    use super::*;

    fn with_node<R>(
        text: &str,
        f: impl FnOnce(&Node, &mut Decoder<'_>) -> R,
    ) -> (R, Vec<Diagnostic>) {
        let node = parse(text).0.unwrap();
        let mut decoder = Decoder::new(Path::new("f.yaml"));
        let result = f(&node, &mut decoder);
        (result, decoder.finish())
    }

    #[test]
    fn unknown_fields_are_all_reported_with_suggestions() {
        let (_, diagnostics) = with_node("naem: 1\nzzz: 2\nname: 3\n", |node, decoder| {
            decoder
                .fields(node, "the section", &["name", "size"])
                .map(|_| ())
        });
        assert_eq!(diagnostics.len(), 2);
        assert_eq!(
            diagnostics[0].to_string(),
            "f.yaml:1:1: unknown field `naem` in the section, expected one of `name`, `size`"
        );
        assert_eq!(diagnostics[0].hint.as_deref(), Some("did you mean `name`?"));
        assert_eq!(diagnostics[1].span, Span::new(2, 1));
        // No close match: a hint all the same, that the key is refused.
        assert!(
            diagnostics[1]
                .hint
                .as_deref()
                .unwrap()
                .starts_with("remove `zzz`")
        );
    }

    #[test]
    fn wrong_types_say_what_was_expected() {
        let (values, diagnostics) =
            with_node("a: [1]\nb: -3\nc: 2.5\nd: fast\n", |node, decoder| {
                let fields = decoder.fields(node, "x", &["a", "b", "c", "d"]).unwrap();
                (
                    fields.get::<String>(decoder, "a"),
                    fields.get::<u32>(decoder, "b"),
                    fields.get::<f64>(decoder, "c"),
                    fields.get::<Duration>(decoder, "d"),
                )
            });
        assert_eq!(values, (None, None, Some(2.5), None));
        let messages: Vec<String> = diagnostics.iter().map(ToString::to_string).collect();
        assert_eq!(
            messages,
            [
                "f.yaml:1:4: invalid `a`: expected a string, found a list",
                "f.yaml:2:4: invalid `b`: expected a whole number (0 or more), found `-3`",
                "f.yaml:4:4: invalid `d`: expected a duration like 15m, 30s or 90, found `fast`",
            ]
        );
    }
}
