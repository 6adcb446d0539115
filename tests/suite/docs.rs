//! The repository documents itself: the README's commands are what CI
//! runs, every relative link in the docs resolves, and nothing cites a
//! document that lives outside the repository.

use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// README.md and every Markdown file under docs/.
fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// Every text file of the given trees (source, tests, docs, tasks, ...).
fn text_files(trees: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending: Vec<PathBuf> = trees.iter().map(|t| root().join(t)).collect();
    while let Some(path) = pending.pop() {
        if path.is_dir() {
            for entry in std::fs::read_dir(&path).unwrap() {
                pending.push(entry.unwrap().path());
            }
        } else if std::fs::read_to_string(&path).is_ok() {
            files.push(path);
        }
    }
    files.sort();
    files
}

#[test]
fn nothing_cites_a_document_outside_the_repository() {
    let needles = [
        "../shared",
        "shared/SPEC",
        "SPEC §",
        "SECURITY S",
        "SPEC.md",
        "SECURITY.md",
    ];
    let mut found = Vec::new();
    for file in text_files(&[
        "README.md",
        "docs",
        "src",
        "tests",
        "benches",
        "tasks",
        "tools",
        ".github",
        "action.yml",
        ".ci",
        "Cargo.toml",
        "build.rs",
    ]) {
        // This file names the needles it looks for.
        if file.ends_with("tests/suite/docs.rs") {
            continue;
        }
        for (number, line) in read(&file).lines().enumerate() {
            if needles.iter().any(|needle| line.contains(needle)) {
                let relative = file.strip_prefix(root()).unwrap().display().to_string();
                found.push(format!("{relative}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "cite the repository's docs instead:\n{}",
        found.join("\n")
    );
}

/// The `src/…` paths a text names that are ybs's own: a Rust file
/// (`src/runner/load.rs`) or a folder (`src/runner/prepare/`). Other
/// names under `src/` (a user's `src/tools/utils.py` in an example) are
/// not ybs's.
fn source_paths(text: &str) -> Vec<&str> {
    let is_path = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut out = Vec::new();
    for (at, _) in text.match_indices("src/") {
        if text[..at].chars().next_back().is_some_and(is_path) {
            continue;
        }
        let end = text[at..]
            .find(|c: char| !is_path(c))
            .map_or(text.len(), |n| at + n);
        let path = text[at..end].trim_end_matches('.');
        if path.ends_with(".rs") || path.ends_with('/') {
            out.push(path);
        }
    }
    out
}

#[test]
fn source_paths_are_found_as_written() {
    let text = "`src/runner/load.rs`, the stages in src/runner/prepare/, then\n\
                src/cli/mod.rs. Not `tests/src/x.rs`, `src/tools/utils.py` \
                or src/report/html/report.{css,js}.";
    assert_eq!(
        source_paths(text),
        [
            "src/runner/load.rs",
            "src/runner/prepare/",
            "src/cli/mod.rs"
        ]
    );
}

/// A moved or renamed file leaves no stale path in the docs.
#[test]
fn every_source_path_in_the_docs_exists() {
    let mut missing = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        for path in source_paths(&text) {
            if !root().join(path).exists() {
                let relative = file.strip_prefix(root()).unwrap().display().to_string();
                missing.push(format!("{relative}: {path}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "source paths in the docs that do not exist (name the file where it now lies):\n{}",
        missing.join("\n")
    );
}

#[test]
fn every_relative_link_in_the_docs_resolves() {
    let mut broken = Vec::new();
    for file in markdown_files() {
        let text = read(&file);
        let mut rest = text.as_str();
        while let Some(start) = rest.find("](") {
            rest = &rest[start + 2..];
            let Some(end) = rest.find(')') else { break };
            let target = &rest[..end];
            rest = &rest[end..];
            if target.contains("://") || target.starts_with('#') || target.starts_with("mailto:") {
                continue;
            }
            let path = target.split('#').next().unwrap_or_default();
            if path.is_empty() || path.contains(' ') {
                continue;
            }
            if !file.parent().unwrap().join(path).exists() {
                let relative = file.strip_prefix(root()).unwrap().display().to_string();
                broken.push(format!("{relative}: {target}"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_readme_opens_with_the_demo_and_the_test_command_ci_runs() {
    let readme = read(&root().join("README.md"));
    // The line after each ```` ```sh ```` fence of the top.
    let top: Vec<&str> = readme.lines().take(25).collect();
    let commands: Vec<&str> = top
        .windows(2)
        .filter(|pair| pair[0] == "```sh")
        .map(|pair| pair[1])
        .collect();
    assert_eq!(
        commands.len(),
        2,
        "two one-line commands at the top: {commands:?}"
    );
    assert!(commands[0].contains("cargo run") && commands[0].contains("tasks/demo.yaml"));
    // One command a newcomer runs as is: no setup chain in front.
    assert!(
        !["&&", ";", "rm ", "mkdir ", "cp "]
            .iter()
            .any(|part| commands[0].contains(part)),
        "{}",
        commands[0]
    );
    let ci = read(&root().join(".ci/run"));
    for part in commands[1].split(" && ") {
        assert!(
            ci.lines().any(|line| line.trim() == part.trim()),
            "`.ci/run` does not run `{part}` from the README"
        );
    }
}

/// The release binaries (which the Action downloads) carry the `script`
/// tool; the tokenizer stays opt-in.
#[test]
fn release_binaries_are_built_with_the_script_tool() {
    let workflow = read(&root().join(".github/workflows/release.yml"));
    let builds: Vec<&str> = workflow
        .lines()
        .map(str::trim)
        .filter(|line| line.starts_with("cargo build") || line.starts_with("cargo zigbuild"))
        .collect();
    assert_eq!(builds.len(), 2, "{builds:?}");
    for line in builds {
        assert!(line.contains("--features script "), "{line}");
        assert!(!line.contains("tokenizer"), "{line}");
    }
    let readme = read(&root().join("README.md"));
    let install = readme
        .split("## Install")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap();
    assert!(install.contains("`script` tool"), "{install}");
}
