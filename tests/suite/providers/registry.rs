//! The provider and built-in tool registries (`llm::PROVIDERS`,
//! `tools::builtin::NAMES`) against what users see: the `--provider` and
//! `--endpoint` help, the task schema (as `ybs schema task` prints it and
//! as committed), the API-key message, and the redactor: a provider added
//! to the registry without the rest fails here.

use serde_json::Value;
use ybs::llm::{PROVIDER_NAMES, PROVIDERS, api_key_vars};
use ybs::tools::builtin::NAMES as BUILTIN_TOOLS;

use super::{Keys, assert_no_secrets, task_yaml, transcript};
use crate::support::Ybs;
use crate::support::cassette::answer;

#[test]
fn help_names_every_provider_and_default_endpoint() {
    for command in ["run", "chat"] {
        let run = Ybs::new().run([command, "--help"]);
        run.expect_code(0);
        let line = run
            .stdout
            .lines()
            .find(|line| line.trim_start().starts_with("--provider"))
            .unwrap_or_else(|| panic!("no --provider in `{command} --help`"));
        for name in PROVIDER_NAMES {
            assert!(line.contains(name), "`{command} --help`: {line}");
        }
    }
    let help = Ybs::new().run(["run", "--help"]).stdout;
    for info in PROVIDERS {
        if let Some(vendor) = info.vendor {
            assert!(help.contains(vendor.default_endpoint), "{help}");
        }
    }
}

/// Every `enum` in `schema` whose values include `member`.
fn enums_with<'a>(schema: &'a Value, member: &str, found: &mut Vec<&'a Value>) {
    match schema {
        Value::Object(map) => {
            if let Some(values) = map.get("enum").and_then(Value::as_array)
                && values.iter().any(|value| value == member)
            {
                found.push(&map["enum"]);
            }
            map.values()
                .for_each(|value| enums_with(value, member, found));
        }
        Value::Array(items) => items
            .iter()
            .for_each(|item| enums_with(item, member, found)),
        _ => {}
    }
}

#[test]
fn the_task_schema_lists_the_registries() {
    let printed = Ybs::new().run(["schema", "task"]);
    printed.expect_code(0);
    let printed: Value = serde_json::from_str(&printed.stdout).unwrap();
    let committed: Value = serde_json::from_str(
        &std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/schema/task.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    for schema in [&printed, &committed] {
        for (names, member) in [
            (&PROVIDER_NAMES[..], PROVIDER_NAMES[0]),
            (&BUILTIN_TOOLS[..], BUILTIN_TOOLS[0]),
        ] {
            let mut found = Vec::new();
            enums_with(schema, member, &mut found);
            assert!(!found.is_empty(), "no enum with `{member}`");
            for values in found {
                let values: Vec<&str> = values
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                assert_eq!(values, names);
            }
        }
    }
}

#[test]
fn the_api_key_message_names_every_key_variable() {
    let vars: Vec<&str> = api_key_vars().collect();
    assert!(vars.len() >= 2, "{vars:?}");
    for var in vars {
        assert!(ybs::task::API_KEY_MESSAGE.contains(var), "{var}");
    }
}

/// Each key variable the registry names is redacted, whichever provider
/// runs: the replayed model prints the key, the outputs show none of it.
#[test]
fn every_key_variable_is_redacted() {
    for var in api_key_vars() {
        let keys = Keys::new();
        let ybs = Ybs::new().env(var, &keys.openai);
        ybs.file("t.yaml", &task_yaml(""));
        ybs.cassette(
            "c.json",
            vec![answer(&format!("done; the key is {}", keys.openai))],
        );
        let run = ybs.run(["run", "t.yaml", "--no-commit", "--cassette", "c.json"]);
        run.expect_code(0);
        let transcript = transcript(&run).to_string();
        assert!(
            transcript.contains("the key is [REDACTED]"),
            "{var}: {transcript}"
        );
        // The cassette holds the key by design; nothing else may.
        std::fs::remove_file(ybs.path().join("c.json")).unwrap();
        let keys = Keys {
            anthropic: keys.openai.clone(),
            ..keys
        };
        assert_no_secrets(&ybs, &run, &keys);
    }
}
