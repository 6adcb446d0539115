//! The module levels of docs/architecture.md: imports point only down, and
//! the L2 modules never use each other. Scans `src/<module>/**/*.rs` for
//! `crate::<other>` paths (and `crate::{a, b}` groups) and checks them
//! against the "may use" lists.
//!
//! The CLI parses argv, builds options and maps errors to exit codes: it
//! reaches the agent, the providers, the tools, task files, policies and
//! git only through the runner (`runner::run`, `runner::chat::Session`,
//! `runner::inspect`, `runner::external::tools` for `ybs tools invoke`),
//! and prints through `report::terminal`.

use std::collections::BTreeMap;
use std::path::Path;

/// module → modules it may use.
const MAY_USE: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("llm", &["core"]),
    ("tools", &["core"]),
    ("policy", &["core"]),
    ("git", &["core"]),
    ("report", &["core"]),
    ("task", &["core", "policy", "llm", "tools"]),
    ("agent", &["core", "llm", "tools", "policy"]),
    ("config", &["core", "task", "policy", "llm", "tools"]),
    (
        "runner",
        &[
            "core", "llm", "tools", "policy", "git", "report", "task", "agent", "config",
        ],
    ),
    ("cli", &["core", "report", "config", "runner"]),
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The top-level modules a line names after `crate::`, including each
/// member of a `crate::{a, b::c}` group.
fn crate_paths(line: &str) -> Vec<String> {
    let ident = |text: &str| -> String {
        text.trim_start()
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut used = Vec::new();
    for (index, _) in line.match_indices("crate::") {
        let rest = &line[index + "crate::".len()..];
        match rest.strip_prefix('{') {
            Some(group) => {
                let group = group.split('}').next().unwrap_or_default();
                used.extend(group.split(',').map(ident));
            }
            None => used.push(ident(rest)),
        }
    }
    used
}

#[test]
fn crate_paths_see_groups() {
    assert_eq!(crate_paths("use crate::agent::Agent;"), ["agent"]);
    assert_eq!(
        crate_paths("use crate::{agent::Agent, llm, core::exit};"),
        ["agent", "llm", "core"]
    );
}

#[test]
fn the_cli_reaches_agents_providers_and_tools_only_through_the_runner() {
    let cli = MAY_USE.iter().find(|(m, _)| *m == "cli").unwrap().1;
    for below in ["agent", "llm", "tools", "task", "policy", "git"] {
        assert!(!cli.contains(&below), "cli may not use `{below}`");
    }
}

#[test]
fn imports_point_only_down() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let allowed: BTreeMap<&str, &[&str]> = MAY_USE.iter().copied().collect();
    let mut violations = Vec::new();
    for (module, may_use) in &allowed {
        let dir = src.join(module);
        assert!(dir.is_dir(), "missing module directory src/{module}");
        let mut files = Vec::new();
        rust_files(&dir, &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for (line_number, line) in text.lines().enumerate() {
                for used in crate_paths(line) {
                    if used.is_empty() || used == *module || !allowed.contains_key(used.as_str()) {
                        continue;
                    }
                    if !may_use.contains(&used.as_str()) {
                        violations.push(format!(
                            "{}:{}: `{module}` uses `crate::{used}`",
                            file.strip_prefix(&src).unwrap().display(),
                            line_number + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        violations.is_empty(),
        "imports against the module levels:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_top_level_module_is_classified() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                MAY_USE.iter().any(|(m, _)| *m == name),
                "src/{name} has no level in MAY_USE"
            );
        }
    }
}
