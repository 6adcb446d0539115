//! A YAML (and so JSON) reader that keeps the location of every node.
//!
//! serde stops at the first error and forgets where values came from, so
//! ybs builds its own small tree from `granit-parser` events and decodes it
//! by hand (see [`super::Decoder`]), collecting every diagnostic on the way.
//!
//! Plain scalars are resolved with the YAML 1.2 core schema (null, bools,
//! integers, floats); quoted and block scalars are always strings. Aliases
//! are expanded by cloning the anchored node (with a budget, so a "billion
//! laughs" file fails instead of eating memory), `<<` merge keys are
//! honoured, and a duplicate key is an error.

use std::collections::HashMap;

use granit_parser::{Event, Marker, Parser, ScalarStyle, Tag};

use crate::core::span::Span;

/// A value with the position where it starts (1-based line and column).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub kind: NodeKind,
    pub span: Span,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(Key, Node)>),
}

/// A mapping key: always text, with its own position.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Key {
    pub name: String,
    pub span: Span,
}

/// A syntax or structure error found while reading.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct YamlError {
    pub span: Span,
    pub message: String,
}

impl Node {
    pub fn new(kind: NodeKind, span: Span) -> Self {
        Self { kind, span }
    }

    /// Words for "found ..." in messages: the value for scalars, the kind
    /// for collections.
    pub fn describe(&self) -> String {
        match &self.kind {
            NodeKind::Null => "nothing".to_owned(),
            NodeKind::Bool(value) => format!("`{value}`"),
            NodeKind::Int(value) => format!("`{value}`"),
            NodeKind::Float(value) => format!("`{value}`"),
            NodeKind::Str(text) => {
                let short: String = text.chars().take(40).collect();
                if short.len() < text.len() {
                    format!("`{short}…`")
                } else {
                    format!("`{short}`")
                }
            }
            NodeKind::Seq(_) => "a list".to_owned(),
            NodeKind::Map(_) => "a mapping".to_owned(),
        }
    }

    /// The node as JSON (inline JSON Schemas in YAML, tool parameters,
    /// fixtures): the one conversion.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(value) => Value::Bool(*value),
            NodeKind::Int(value) => Value::from(*value),
            NodeKind::Float(value) => {
                serde_json::Number::from_f64(*value).map_or(Value::Null, Value::Number)
            }
            NodeKind::Str(text) => Value::String(text.clone()),
            NodeKind::Seq(items) => Value::Array(items.iter().map(Self::to_json).collect()),
            NodeKind::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|(key, value)| (key.name.clone(), value.to_json()))
                    .collect(),
            ),
        }
    }

    /// The entry for `key`, when this node is a mapping that has it.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(entries) => entries
                .iter()
                .find(|(candidate, _)| candidate.name == key)
                .map(|(_, value)| value),
            _ => None,
        }
    }
}

/// Upper bound on nodes created by alias expansion.
const ALIAS_BUDGET: usize = 100_000;

/// Reads one document. Returns `None` for an empty stream. A syntax error
/// ends reading (the parser cannot recover inside a document); structure
/// errors (duplicate keys, non-scalar keys) are collected and reading goes on.
pub fn parse(text: &str) -> (Option<Node>, Vec<YamlError>) {
    let mut builder = Builder::default();
    for item in Parser::new_from_str(text) {
        match item {
            Ok((event, span)) => {
                if builder.event(event, span_of(span.start)).is_break() {
                    break;
                }
            }
            Err(error) => {
                builder.errors.push(YamlError {
                    span: span_of(*error.marker()),
                    message: format!("invalid YAML: {}", error.info()),
                });
                return (None, builder.errors);
            }
        }
    }
    let mut errors = builder.errors;
    for (index, written) in builder.tag_spans {
        if let Some(error) = errors.get_mut(index) {
            error.span = tag_position(text, error.span, &written);
        }
    }
    (builder.root, errors)
}

/// Where `tag` is written last before `span` on its line (`span` itself
/// when it is not there).
fn tag_position(text: &str, span: Span, tag: &str) -> Span {
    let Some(line) = text.lines().nth(span.line as usize - 1) else {
        return span;
    };
    let before: String = line.chars().take(span.col as usize - 1).collect();
    match before.rfind(tag) {
        Some(at) => {
            let col = before[..at].chars().count() + 1;
            Span::new(span.line, u32::try_from(col).unwrap_or(span.col))
        }
        None => span,
    }
}

fn span_of(marker: Marker) -> Span {
    let line = u32::try_from(marker.line()).unwrap_or(u32::MAX);
    let col = u32::try_from(marker.col().saturating_add(1)).unwrap_or(u32::MAX);
    Span::new(line.max(1), col)
}

enum Frame {
    Seq {
        items: Vec<Node>,
        span: Span,
        anchor: usize,
    },
    Map {
        entries: Vec<(Key, Node)>,
        merges: Vec<Node>,
        pending: Option<Key>,
        span: Span,
        anchor: usize,
    },
}

#[derive(Default)]
struct Builder {
    stack: Vec<Frame>,
    anchors: HashMap<usize, Node>,
    root: Option<Node>,
    documents: usize,
    alias_nodes: usize,
    errors: Vec<YamlError>,
    /// Errors about a tag, with the tag as written: moved to the tag's
    /// own position once the text is at hand.
    tag_spans: Vec<(usize, String)>,
}

impl Builder {
    fn event(&mut self, event: Event<'_>, span: Span) -> std::ops::ControlFlow<()> {
        use std::ops::ControlFlow::{Break, Continue};
        match event {
            Event::DocumentStart(..) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.error(
                        span,
                        "expected one YAML document, found a second one (`---`)",
                    );
                    return Break(());
                }
            }
            Event::Scalar(value, style, anchor, tag) => {
                let core = self.core_tag(tag.as_deref(), span);
                if self.awaiting_key() {
                    self.key(Key {
                        name: value.into_owned(),
                        span,
                    });
                } else {
                    let kind = match core {
                        Some("str") => NodeKind::Str(value.into_owned()),
                        _ => resolve(&value, style),
                    };
                    self.complete(Node::new(kind, span), anchor);
                }
            }
            Event::SequenceStart(_, anchor, tag) => {
                self.core_tag(tag.as_deref(), span);
                self.stack.push(Frame::Seq {
                    items: Vec::new(),
                    span,
                    anchor,
                });
            }
            Event::MappingStart(_, anchor, tag) => {
                self.core_tag(tag.as_deref(), span);
                self.stack.push(Frame::Map {
                    entries: Vec::new(),
                    merges: Vec::new(),
                    pending: None,
                    span,
                    anchor,
                });
            }
            Event::SequenceEnd | Event::MappingEnd => self.close(),
            Event::Alias(id) => {
                let Some(mut node) = self.anchors.get(&id).cloned() else {
                    self.error(span, "unknown alias");
                    return Continue(());
                };
                self.alias_nodes += count(&node);
                if self.alias_nodes > ALIAS_BUDGET {
                    self.error(span, "too many alias expansions");
                    return Break(());
                }
                node.span = span;
                self.complete(node, 0);
            }
            _ => {}
        }
        Continue(())
    }

    /// The core-schema name of a node's tag (`!!str` is `str`). Any other
    /// tag (`!include`, `!env`, a custom `!tag`) is an error: ybs would
    /// otherwise read the value with the tag dropped.
    fn core_tag<'t>(&mut self, tag: Option<&'t Tag>, span: Span) -> Option<&'t str> {
        let tag = tag?;
        let core = tag.core_suffix();
        if core.is_none() {
            // The event starts at the value; the tag is written before it.
            self.tag_spans.push((
                self.errors.len(),
                format!("{}{}", tag.original_handle(), tag.suffix()),
            ));
            self.error(
                span,
                format!(
                    "unsupported YAML tag `{tag}`: only the core schema's tags (`!!str`, `!!int`, `!!float`, `!!bool`, `!!null`, `!!seq`, `!!map`) are allowed",
                ),
            );
        }
        core
    }

    fn awaiting_key(&self) -> bool {
        matches!(self.stack.last(), Some(Frame::Map { pending: None, .. }))
    }

    fn error(&mut self, span: Span, message: impl Into<String>) {
        self.errors.push(YamlError {
            span,
            message: message.into(),
        });
    }

    fn key(&mut self, key: Key) {
        if let Some(Frame::Map { pending, .. }) = self.stack.last_mut() {
            *pending = Some(key);
        }
    }

    fn close(&mut self) {
        let Some(frame) = self.stack.pop() else {
            return;
        };
        let (node, anchor) = match frame {
            Frame::Seq {
                items,
                span,
                anchor,
            } => (Node::new(NodeKind::Seq(items), span), anchor),
            Frame::Map {
                mut entries,
                merges,
                span,
                anchor,
                ..
            } => {
                for merged in merges {
                    merge_into(&mut entries, merged, &mut self.errors);
                }
                (Node::new(NodeKind::Map(entries), span), anchor)
            }
        };
        self.complete(node, anchor);
    }

    /// A finished node goes into its parent (or becomes the root).
    fn complete(&mut self, node: Node, anchor: usize) {
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        match self.stack.last_mut() {
            None => self.root = Some(node),
            Some(Frame::Seq { items, .. }) => items.push(node),
            Some(Frame::Map {
                entries,
                merges,
                pending,
                ..
            }) => match pending.take() {
                None => {
                    // A key that is an alias or a collection.
                    let name = match &node.kind {
                        NodeKind::Str(text) => Some(text.clone()),
                        NodeKind::Int(value) => Some(value.to_string()),
                        NodeKind::Bool(value) => Some(value.to_string()),
                        NodeKind::Float(value) => Some(value.to_string()),
                        NodeKind::Null => Some(String::new()),
                        NodeKind::Seq(_) | NodeKind::Map(_) => None,
                    };
                    let span = node.span;
                    let name = name.unwrap_or_else(|| {
                        self.errors.push(YamlError {
                            span,
                            message: "a mapping key must be a plain string".to_owned(),
                        });
                        "?".to_owned()
                    });
                    *pending = Some(Key { name, span });
                }
                Some(key) if key.name == "<<" => merges.push(node),
                Some(key) => {
                    if let Some((first, _)) = entries.iter().find(|(k, _)| k.name == key.name) {
                        let message = format!(
                            "duplicate key `{}` (first defined at line {}, column {})",
                            key.name, first.span.line, first.span.col
                        );
                        self.errors.push(YamlError {
                            span: key.span,
                            message,
                        });
                    } else {
                        entries.push((key, node));
                    }
                }
            },
        }
    }
}

/// `<<: *base` or `<<: [*a, *b]`: keys not already present are copied in.
fn merge_into(entries: &mut Vec<(Key, Node)>, merged: Node, errors: &mut Vec<YamlError>) {
    let sources = match merged.kind {
        NodeKind::Map(_) => vec![merged],
        NodeKind::Seq(items) => items,
        _ => {
            errors.push(YamlError {
                span: merged.span,
                message: "a `<<` merge key takes a mapping or a list of mappings".to_owned(),
            });
            return;
        }
    };
    for source in sources {
        let NodeKind::Map(source_entries) = source.kind else {
            errors.push(YamlError {
                span: source.span,
                message: "a `<<` merge key takes a mapping or a list of mappings".to_owned(),
            });
            continue;
        };
        for (key, value) in source_entries {
            if !entries.iter().any(|(k, _)| k.name == key.name) {
                entries.push((key, value));
            }
        }
    }
}

fn count(node: &Node) -> usize {
    1 + match &node.kind {
        NodeKind::Seq(items) => items.iter().map(count).sum(),
        NodeKind::Map(entries) => entries.iter().map(|(_, value)| 1 + count(value)).sum(),
        _ => 0,
    }
}

/// YAML 1.2 core schema for plain scalars; every other style is a string.
fn resolve(text: &str, style: ScalarStyle) -> NodeKind {
    if style != ScalarStyle::Plain {
        return NodeKind::Str(text.to_owned());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return NodeKind::Null,
        "true" | "True" | "TRUE" => return NodeKind::Bool(true),
        "false" | "False" | "FALSE" => return NodeKind::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return NodeKind::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return NodeKind::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return NodeKind::Float(f64::NAN),
        _ => {}
    }
    if let Some(int) = parse_int(text) {
        return NodeKind::Int(int);
    }
    if is_float(text)
        && let Ok(float) = text.parse::<f64>()
    {
        return NodeKind::Float(float);
    }
    NodeKind::Str(text.to_owned())
}

fn parse_int(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(octal) = text.strip_prefix("0o") {
        return i64::from_str_radix(octal, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        text.parse().ok()
    } else {
        None
    }
}

/// `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`
fn is_float(text: &str) -> bool {
    let text = text.strip_prefix(['-', '+']).unwrap_or(text);
    let (mantissa, exponent) = match text.find(['e', 'E']) {
        Some(at) => (&text[..at], Some(&text[at + 1..])),
        None => (text, None),
    };
    let (whole, fraction) = match mantissa.split_once('.') {
        Some((whole, fraction)) => (whole, Some(fraction)),
        None => (mantissa, None),
    };
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match fraction {
        None => !whole.is_empty() && digits(whole),
        Some(fraction) => {
            digits(whole) && digits(fraction) && !(whole.is_empty() && fraction.is_empty())
        }
    };
    let exponent_ok = exponent.is_none_or(|e| {
        let e = e.strip_prefix(['-', '+']).unwrap_or(e);
        !e.is_empty() && digits(e)
    });
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        let (node, errors) = parse(text);
        assert!(errors.is_empty(), "{errors:?}");
        node.unwrap()
    }

    #[test]
    fn scalars_resolve_by_core_schema() {
        let node = root("a: ~\nb: true\nc: 42\nd: -1.5e3\ne: '42'\nf: hello\ng: 0x1f\nh: 1.\n");
        let kind = |key: &str| node.get(key).unwrap().kind.clone();
        assert_eq!(kind("a"), NodeKind::Null);
        assert_eq!(kind("b"), NodeKind::Bool(true));
        assert_eq!(kind("c"), NodeKind::Int(42));
        assert_eq!(kind("d"), NodeKind::Float(-1500.0));
        assert_eq!(kind("e"), NodeKind::Str("42".into()));
        assert_eq!(kind("f"), NodeKind::Str("hello".into()));
        assert_eq!(kind("g"), NodeKind::Int(31));
        assert_eq!(kind("h"), NodeKind::Float(1.0));
        assert_eq!(node.get("c").unwrap().span, Span::new(3, 4));
    }

    #[test]
    fn spans_are_one_based() {
        let node = root("version: 1\ntasks:\n  - id: a\n");
        let NodeKind::Map(entries) = &node.kind else {
            panic!()
        };
        assert_eq!(entries[1].0.span, Span::new(2, 1));
        let NodeKind::Seq(items) = &entries[1].1.kind else {
            panic!()
        };
        assert_eq!(items[0].span, Span::new(3, 5));
    }

    #[test]
    fn aliases_and_merge_keys() {
        let node = root("base: &b {x: 1, y: 2}\ncopy: *b\nmerged:\n  <<: *b\n  y: 3\n");
        assert_eq!(
            node.get("copy").unwrap().get("x").unwrap().kind,
            NodeKind::Int(1)
        );
        let merged = node.get("merged").unwrap();
        assert_eq!(merged.get("x").unwrap().kind, NodeKind::Int(1));
        assert_eq!(merged.get("y").unwrap().kind, NodeKind::Int(3));
    }

    #[test]
    fn duplicate_key_is_an_error_with_both_positions() {
        let (_, errors) = parse("a: 1\nb: 2\na: 3\n");
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].span, Span::new(3, 1));
        assert!(errors[0].message.contains("duplicate key `a`"));
        assert!(errors[0].message.contains("line 1, column 1"));
    }

    #[test]
    fn syntax_error_has_a_location() {
        let (node, errors) = parse("a: [1, 2\nb: 3\n");
        assert!(node.is_none());
        assert_eq!(errors.len(), 1);
        assert_eq!(errors[0].span.line, 2);
        assert!(errors[0].message.starts_with("invalid YAML: "));
    }

    #[test]
    fn json_with_tabs_reads() {
        let node = root("{\n\t\"llm\": {\"model\": \"x\", \"n\": 3}\n}\n");
        let llm = node.get("llm").unwrap();
        assert_eq!(llm.get("n").unwrap().kind, NodeKind::Int(3));
        assert_eq!(llm.span, Span::new(2, 9));
    }

    #[test]
    fn empty_and_multi_document() {
        assert_eq!(parse(""), (None, vec![]));
        let (_, errors) = parse("a: 1\n---\nb: 2\n");
        assert_eq!(errors[0].span, Span::new(2, 1));
    }

    #[test]
    fn alias_bombs_are_stopped() {
        let mut text = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n".to_owned();
        for level in 1..8 {
            let previous = level - 1;
            text.push_str(&format!(
                "a{level}: &a{level} [*a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}, *a{previous}]\n"
            ));
        }
        let (_, errors) = parse(&text);
        assert!(errors.iter().any(|e| e.message.contains("too many alias")));
    }
}
