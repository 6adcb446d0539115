//! `tools:`: `builtin`, `external`, `caller` and `script`.

use super::TOOLS_FIELDS;
use crate::core::decode::yaml::{Node, NodeKind};
use crate::core::decode::{Decoder, Fields, Spanned, non_empty};
use crate::core::span::Span;
use crate::core::text::{closest, list};
use crate::task::model::{BUILTIN_TOOLS, CallerToolSpec};

/// `builtin:`, `external:` and `script:` (`caller:` and `mcp:` are
/// decoded on their own).
pub(super) fn decode_tools(
    decoder: &mut Decoder<'_>,
    node: &Node,
) -> (Option<Vec<String>>, Option<Vec<String>>, Option<bool>) {
    let Some(fields) = decoder.fields(node, "`tools`", TOOLS_FIELDS) else {
        return (None, None, None);
    };
    let script = decode_script_tool(decoder, &fields);
    let builtin: Option<Vec<Spanned<String>>> = fields.get(decoder, "builtin");
    let builtin = builtin.map(|names| {
        names
            .into_iter()
            .filter_map(|name| check_builtin_tool(decoder, name))
            .collect()
    });
    let external = fields.node("external").and_then(|node| match &node.kind {
        NodeKind::Null => Some(Vec::new()),
        NodeKind::Seq(items) => Some(
            items
                .iter()
                .filter_map(|item| external_entry(decoder, item))
                .map(|(name, _)| name)
                .collect(),
        ),
        _ => {
            decoder.expected(node, "external", "a list of tool names or paths");
            None
        }
    });
    (builtin, external, script)
}

pub(super) const EXTERNAL_FIELDS: &[&str] = &["name", "required"];

/// One `tools.external` entry: a name or path, or `{name, required}`.
/// Reports its errors; `(name, required)`.
pub(super) fn external_entry(decoder: &mut Decoder<'_>, item: &Node) -> Option<(String, bool)> {
    if let NodeKind::Str(name) = &item.kind {
        return non_empty(decoder, Spanned::new(name.clone(), item.span), "external")
            .filter(|name| repository_tool_path(decoder, name, item.span))
            .map(|name| (name, false));
    }
    let fields = decoder.fields(item, "a `tools.external` entry", EXTERNAL_FIELDS)?;
    let name: Option<Spanned<String>> = fields.get(decoder, "name");
    let required: Option<bool> = fields.get(decoder, "required");
    if name.is_none() && !fields.has("name") {
        decoder.error(
            fields.span,
            "missing required field `name` in a `tools.external` entry",
        );
    }
    let span = name.as_ref().map(|name| name.span)?;
    let name = non_empty(decoder, name?, "name")?;
    repository_tool_path(decoder, &name, span).then_some((name, required.unwrap_or(false)))
}

/// A tool a task file names by path (`./scripts/my-tool`) lies in the
/// repository, as every file a task file names (docs/security.md S8): no
/// absolute path, no `~`, no `..`. Reports the error; true when it holds.
pub(super) fn repository_tool_path(decoder: &mut Decoder<'_>, name: &str, span: Span) -> bool {
    use std::path::{Component, Path};
    if !name.contains('/') && !name.starts_with('~') {
        return true;
    }
    let path = Path::new(name);
    let outside = name.starts_with('~')
        || path.is_absolute()
        || path.components().any(|c| matches!(c, Component::ParentDir));
    if outside {
        decoder.error_with_hint(
            span,
            format!("`tools.external` path `{name}` is not a path in the repository: a task file names tools beneath the directory ybs runs in"),
            "name the tool (found in ./tools, ~/.ybs/tools or the operator's tools.search_paths), give a relative path without `..`, or have the operator declare it under `tools.external` in the operator config",
        );
    }
    !outside
}

/// The `tools.external` entries marked `required: true` (their errors
/// are reported by [`decode_tools`]).
pub(super) fn decode_required_external(
    decoder: &mut Decoder<'_>,
    node: &Node,
) -> Vec<Spanned<String>> {
    let Some(NodeKind::Seq(items)) = node.get("external").map(|node| &node.kind) else {
        return Vec::new();
    };
    let mut quiet = Decoder::new(decoder.path());
    items
        .iter()
        .filter_map(|item| Some((external_entry(&mut quiet, item)?, item.span)))
        .filter(|((_, required), _)| *required)
        .map(|((name, _), span)| Spanned::new(name, span))
        .collect()
}

/// `tools.caller`: a list of `{name, description, parameters}`; names are
/// tool names, unique, and not those of built-in tools.
pub(super) fn decode_caller_tools(
    decoder: &mut Decoder<'_>,
    tools: &Node,
) -> Option<Vec<CallerToolSpec>> {
    let node = tools.get("caller")?;
    let NodeKind::Seq(items) = &node.kind else {
        decoder.expected(
            node,
            "tools.caller",
            "a list of `{name, description, parameters}`",
        );
        return None;
    };
    let before = decoder.error_count();
    let mut declared: Vec<CallerToolSpec> = Vec::new();
    for item in items {
        let Some(fields) = decoder.fields(item, "a caller tool", CALLER_FIELDS) else {
            continue;
        };
        let name: Option<Spanned<String>> = fields.get(decoder, "name");
        let description: Option<Spanned<String>> = fields.get(decoder, "description");
        let parameters = fields.node("parameters");
        if let Some(parameters) = parameters
            && !matches!(parameters.kind, NodeKind::Map(_))
        {
            decoder.expected(parameters, "parameters", "a JSON Schema of `type: object`");
        }
        let Some(name) = name else {
            decoder.error(item.span, "missing required field `name` in a caller tool");
            continue;
        };
        let valid = !name.value.is_empty()
            && name.value.len() <= 64
            && name
                .value
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid {
            decoder.error_with_hint(
                name.span,
                format!("invalid caller tool name `{}`", name.value),
                "use letters, digits, `_` and `-` (at most 64)",
            );
        } else if BUILTIN_TOOLS.contains(&name.value.as_str()) || name.value == "script" {
            decoder.error(
                name.span,
                format!(
                    "caller tool `{}`: a built-in tool has that name",
                    name.value
                ),
            );
        } else if declared.iter().any(|tool| tool.name == name.value) {
            decoder.error(name.span, format!("duplicate caller tool `{}`", name.value));
        }
        if description.is_none() {
            decoder.error(
                item.span,
                format!(
                    "missing required field `description` in caller tool `{}`",
                    name.value
                ),
            );
        }
        declared.push(CallerToolSpec {
            name: name.value,
            description: description.map(|d| d.value).unwrap_or_default(),
            parameters: parameters.map(Node::to_json),
        });
    }
    (decoder.error_count() == before).then_some(declared)
}

/// The fields of one `tools.caller` entry.
pub(super) const CALLER_FIELDS: &[&str] = &["name", "description", "parameters"];

/// `tools.script: true|false`. A build without the `script` feature
/// refuses `true`.
pub(super) fn decode_script_tool(decoder: &mut Decoder<'_>, fields: &Fields<'_>) -> Option<bool> {
    let (key, _) = fields.entry("script")?;
    let span = key.span;
    let enabled: bool = fields.get(decoder, "script")?;
    if enabled && !cfg!(feature = "script") {
        decoder.error_with_hint(
            span,
            "`tools.script` is not available in this build of ybs",
            "the `script` tool needs a build that has it: the release binaries (and so the GitHub \
             Action's download) have it, or build one with `cargo build --release --features \
             script` and give it to the Action with `ybs-binary: target/release/ybs`",
        );
        return None;
    }
    Some(enabled)
}

/// One of the six built-in tool names, with a suggestion for a typo.
pub fn check_builtin_tool(decoder: &mut Decoder<'_>, name: Spanned<String>) -> Option<String> {
    if BUILTIN_TOOLS.contains(&name.value.as_str()) {
        return Some(name.value);
    }
    let message = format!(
        "unknown built-in tool `{}`, expected one of {}",
        name.value,
        list(&BUILTIN_TOOLS)
    );
    match closest(&name.value, BUILTIN_TOOLS) {
        Some(near) => {
            decoder.error_with_hint(name.span, message, format!("did you mean `{near}`?"))
        }
        None => decoder.error_with_hint(
            name.span,
            message,
            "external tools go under `tools.external`",
        ),
    }
    None
}
