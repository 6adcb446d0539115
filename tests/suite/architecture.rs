//! The module levels of STYLE.md (b): imports point only down, and the L2
//! modules never use each other. Scans `src/<module>/**/*.rs` for
//! `crate::<other>` paths and checks them against the "may use" lists.

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
    (
        "cli",
        &[
            "core", "llm", "tools", "policy", "git", "report", "task", "agent", "config", "runner",
        ],
    ),
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
                for (index, _) in line.match_indices("crate::") {
                    let rest = &line[index + "crate::".len()..];
                    let used: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
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
