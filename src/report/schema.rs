//! The JSON Schemas of the output formats (`ybs schema transcript|events`),
//! generated from the Rust types that write them, so they cannot drift.
//!
//! The schemas describe what ybs *writes* (schemars' serialize contract):
//! a field skipped when empty is optional, every other field is required,
//! and `null` is allowed only where the type is an `Option`. Draft 2020-12;
//! keys in a stable order (the order of the Rust fields). The committed
//! copies live in `docs/schema/`.

use schemars::generate::SchemaSettings;
use schemars::{JsonSchema, Schema};
use serde_json::{Value, json};

use crate::core::event::{EventRecord, SCHEMA_VERSION};

use super::transcript::Transcript;

/// The schema of `OUT/<task>/transcript.json`.
pub fn transcript() -> Value {
    let mut schema = root::<Transcript>(
        "ybs transcript",
        "The whole run of one task: OUT/<task-id>/transcript.json.",
    );
    // `schema_version` is a `u32` in Rust; the schema pins the value this
    // version writes, so a consumer can dispatch on it.
    if let Some(version) = schema.pointer_mut("/properties/schema_version") {
        *version = json!({
            "description": "The version of the transcript and events formats. Changes within a version are additive; a breaking change bumps it.",
            "const": SCHEMA_VERSION,
        });
    }
    schema
}

/// The schema of one line of `OUT/<task>/events.jsonl` (and of `--json`
/// stdout).
pub fn events() -> Value {
    root::<EventRecord>(
        "ybs event",
        &format!(
            "One line of OUT/<task-id>/events.jsonl (and of `ybs run --json` on stdout): a JSON object with `ts_ms`, `task` and a `type` naming the event. schema_version {SCHEMA_VERSION}: new event types and new optional fields may appear; consumers should ignore what they do not know."
        ),
    )
}

/// A draft 2020-12 root schema for `T` with a title and description of
/// ours in front.
pub fn root<T: JsonSchema>(title: &str, description: &str) -> Value {
    let schema: Schema = SchemaSettings::draft2020_12()
        .for_serialize()
        .into_generator()
        .into_root_schema_for::<T>();
    let generated = schema.to_value();
    let mut out = serde_json::Map::new();
    if let Some(meta) = generated.get("$schema") {
        out.insert("$schema".to_owned(), meta.clone());
    }
    out.insert("title".to_owned(), json!(title));
    out.insert("description".to_owned(), json!(description));
    if let Value::Object(fields) = generated {
        for (key, value) in fields {
            if !matches!(key.as_str(), "$schema" | "title" | "description") {
                out.insert(key, value);
            }
        }
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transcript_schema_pins_the_version_and_requires_every_field() {
        let schema = transcript();
        assert_eq!(
            schema["$schema"],
            "https://json-schema.org/draft/2020-12/schema"
        );
        assert_eq!(
            schema["properties"]["schema_version"]["const"],
            SCHEMA_VERSION
        );
        let required = schema["required"].as_array().unwrap();
        assert!(required.contains(&json!("status")));
        assert!(required.contains(&json!("git")));
    }

    #[test]
    fn events_schema_names_every_type_tag() {
        let text = events().to_string();
        for tag in [
            "task.started",
            "tool.decided",
            "check.completed",
            "task.finished",
        ] {
            assert!(text.contains(&format!("\"const\":\"{tag}\"")), "{tag}");
        }
    }
}
