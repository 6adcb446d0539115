//! `context:` and `output:`, with the schema an `output.schema_file` names.

use crate::core::decode::yaml::{Node, NodeKind};
use crate::core::decode::{Decoder, Spanned, non_empty};
use crate::core::span::Span;
use crate::task::model::{ContextSpec, OutputSpec};

pub(super) const CONTEXT_FIELDS: &[&str] = &["agents_md", "checks"];
pub const OUTPUT_FIELDS: &[&str] = &["schema", "schema_file", "attempts"];

/// `context: {agents_md, checks}`.
pub(super) fn decode_context(decoder: &mut Decoder<'_>, node: &Node) -> Option<ContextSpec> {
    let fields = decoder.fields(node, "`context`", CONTEXT_FIELDS)?;
    let agents_md: Option<bool> = fields.get(decoder, "agents_md");
    let checks: Option<bool> = fields.get(decoder, "checks");
    Some(ContextSpec {
        agents_md: agents_md.unwrap_or(true),
        checks: checks.unwrap_or(true),
    })
}

/// `output: {schema | schema_file, attempts}`: exactly one schema, which
/// must be a valid JSON Schema (draft 2020-12 unless it names another).
pub(super) fn decode_output(decoder: &mut Decoder<'_>, node: &Node) -> Option<OutputSpec> {
    let fields = decoder.fields(node, "`output`", OUTPUT_FIELDS)?;
    let attempts: Option<u32> = fields.get(decoder, "attempts");
    let file: Option<Spanned<String>> = fields.get(decoder, "schema_file");
    let (schema, span, schema_file) = match (fields.entry("schema"), file) {
        (Some((key, _)), Some(_)) => {
            decoder.error_with_hint(
                key.span,
                "`output` has both `schema` and `schema_file`",
                "keep one of them",
            );
            return None;
        }
        (Some((key, schema)), None) => {
            if !matches!(schema.kind, NodeKind::Map(_) | NodeKind::Bool(_)) {
                decoder.expected(schema, "schema", "a JSON Schema (a mapping)");
                return None;
            }
            (schema.to_json(), key.span, None)
        }
        (None, Some(file)) => {
            let path = non_empty(decoder, file.clone(), "schema_file")?;
            let schema = read_schema_file(decoder, &path, file.span)?;
            return Some(OutputSpec {
                schema,
                schema_file: Some(std::path::PathBuf::from(path)),
                attempts,
            });
        }
        (None, None) => {
            decoder.error_with_hint(
                fields.span,
                "`output` needs a JSON Schema",
                "add `schema:` (inline) or `schema_file:` (a JSON or YAML file, relative to the task file)",
            );
            return None;
        }
    };
    if let Err(error) = jsonschema::validator_for(&schema) {
        decoder.error_with_hint(
            span,
            format!("invalid JSON Schema in `output`: {error}"),
            "see https://json-schema.org/understanding-json-schema",
        );
        return None;
    }
    Some(OutputSpec {
        schema,
        schema_file,
        attempts,
    })
}

/// Reads `output.schema_file`, relative to the task file's directory and
/// beneath its repository (docs/security.md S8): a JSON file, or YAML
/// when it is not JSON, which must be a valid JSON Schema. No error says
/// a value read from the file: only the keyword and where it is.
pub(super) fn read_schema_file(
    decoder: &mut Decoder<'_>,
    path: &str,
    span: Span,
) -> Option<serde_json::Value> {
    let unconfined = crate::core::named::NamedFiles::default();
    let files = decoder.named_files().unwrap_or(&unconfined);
    let text = match files.read_text(decoder.path(), path) {
        Ok(text) => text,
        Err(error) => {
            decoder.error_with_hint(
                span,
                format!("`schema_file`: {error}"),
                "name a file beneath the task file's repository, relative to the task file's directory",
            );
            return None;
        }
    };
    let schema = match serde_json::from_str(&text) {
        Ok(value) => value,
        Err(_) => match crate::core::decode::yaml::parse(&text) {
            (Some(node), errors) if errors.is_empty() => node.to_json(),
            _ => {
                decoder.error(
                    span,
                    format!("`schema_file` `{path}` is neither JSON nor YAML"),
                );
                return None;
            }
        },
    };
    if let Err(error) = jsonschema::validator_for(&schema) {
        let at = error.instance_path().to_string();
        decoder.error_with_hint(
            span,
            format!(
                "`schema_file` `{path}` is not a valid JSON Schema: keyword `{}` at `{}`",
                error.kind().keyword(),
                if at.is_empty() { "/" } else { &at }
            ),
            "see https://json-schema.org/understanding-json-schema",
        );
        return None;
    }
    Some(schema)
}
