//! The docs' examples are tests (issue 40, "the docs are tests"): every
//! YAML block of README.md and docs/*.md is loaded by the real binary as
//! what it is, unless a marker on the line before its fence says what
//! else it is:
//!
//! - no marker: a whole task file, which `ybs validate` accepts;
//! - `<!-- doc-test: fragment -->`: task fields, valid in a task file
//!   (a `prompt:` is added when the block has none) under an operator
//!   config that grants what a task may only ask for (network checks);
//! - `<!-- doc-test: config -->`: an operator config file (YAML);
//! - `<!-- doc-test: error -->`: a task file `ybs validate` refuses (exit 2);
//! - `<!-- doc-test: workflow -->`: GitHub Actions YAML (not ybs's; the
//!   example workflows under docs/examples/ are linted by actionlint);
//! - `<!-- doc-test: illustration -->`: names things that exist only in
//!   the reader's repository (tools, servers), shown, not run.
//!
//! A doc example that stops working fails here.

use std::path::{Path, PathBuf};

use crate::support::Ybs;

/// One fenced block of a Markdown file.
struct Block {
    file: PathBuf,
    /// The line of its opening fence.
    line: usize,
    marker: Option<String>,
    body: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn markdown_files() -> Vec<PathBuf> {
    let mut files = vec![root().join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);
    files
}

/// The blocks fenced as ```` ```lang ````, with the marker of the line
/// before each.
fn blocks(lang: &str) -> Vec<Block> {
    let fence = format!("```{lang}");
    let mut found = Vec::new();
    for file in markdown_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let mut index = 0;
        while index < lines.len() {
            if lines[index].trim() == fence {
                let end = (index + 1..lines.len())
                    .find(|&at| lines[at].trim() == "```")
                    .unwrap_or_else(|| panic!("{}:{}: unclosed", file.display(), index + 1));
                let marker = index
                    .checked_sub(1)
                    .and_then(|before| lines[before].trim().strip_prefix("<!-- doc-test: "))
                    .and_then(|rest| rest.strip_suffix(" -->"))
                    .map(str::to_owned);
                found.push(Block {
                    file: file.strip_prefix(root()).unwrap().to_owned(),
                    line: index + 1,
                    marker,
                    body: lines[index + 1..end].join("\n") + "\n",
                });
                index = end;
            }
            index += 1;
        }
    }
    found
}

/// What is wrong with `block`, run as its marker says; `None` when it
/// holds.
fn check_yaml(block: &Block) -> Option<String> {
    let ybs = Ybs::new();
    // A model whose price is known (for `max_cost_usd`); nothing is sent.
    let model = ["--provider", "openai", "--model", "gpt-4.1-mini"];
    let (args, expected): (Vec<&str>, i32) = match block.marker.as_deref() {
        None => {
            ybs.file("t.yaml", &block.body);
            (vec!["validate", "t.yaml"], 0)
        }
        Some("fragment") => {
            let has_prompt = block.body.lines().any(|line| line.starts_with("prompt:"));
            let prompt = if has_prompt { "" } else { "prompt: x\n" };
            ybs.file("t.yaml", &format!("{prompt}{}", block.body));
            // Under an operator who grants what a task may only ask for.
            ybs.file("op.json", r#"{"safety": {"sandbox_check_network": true}}"#);
            (vec!["validate", "--config", "op.json", "t.yaml"], 0)
        }
        Some("config") => {
            ybs.file("c.yaml", &block.body);
            ybs.file("t.yaml", "prompt: x\n");
            (vec!["validate", "--config", "c.yaml", "t.yaml"], 0)
        }
        Some("error") => {
            ybs.file("t.yaml", &block.body);
            (vec!["validate", "t.yaml"], 2)
        }
        Some("workflow" | "illustration") => return None,
        Some(other) => return Some(format!("unknown marker `{other}`")),
    };
    let mut all = args;
    all.extend(model);
    let run = ybs.run(all);
    (run.code != expected).then(|| {
        format!(
            "exit {} (expected {expected}):\n{}{}",
            run.code, run.stdout, run.stderr
        )
    })
}

#[test]
fn every_yaml_example_of_the_docs_is_what_it_says() {
    let blocks = blocks("yaml");
    assert!(blocks.len() >= 20, "{} YAML blocks", blocks.len());
    let failures: Vec<String> = blocks
        .iter()
        .filter_map(|block| {
            check_yaml(block).map(|why| {
                format!(
                    "{}:{} ({}): {why}",
                    block.file.display(),
                    block.line,
                    block.marker.as_deref().unwrap_or("task file")
                )
            })
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The README's first task, walked as a new user would: the task file as
/// it is shown, then the validate command as it is given (issue 40,
/// mismatch 1).
#[test]
fn the_readme_first_task_validates_as_the_readme_says() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (_, walk) = readme.split_once("## A first real task").unwrap();
    let task = blocks("yaml")
        .into_iter()
        .find(|block| {
            block.file == Path::new("README.md")
                && block.body.starts_with("# tasks/fix-typos.yaml")
        })
        .expect("the README's first task");
    let (_, command) = walk.split_once("`ybs validate ").unwrap();
    let (command, _) = command.split_once('`').unwrap();
    let ybs = Ybs::new();
    ybs.file("tasks/fix-typos.yaml", &task.body);
    ybs.file("src/lib.rs", "// teh answer\n");
    let mut args = vec!["validate"];
    args.extend(command.split_whitespace());
    let run = ybs.run(&args);
    run.expect_code(0);
    assert!(run.stdout.contains("ok: 1 file, 1 task valid"), "{}", run.stdout);
    // What the README says of the same command without a provider.
    let run = ybs.run(["validate", "tasks/"]);
    run.expect_code(2);
    assert!(run.stderr.contains("no model to run with"), "{}", run.stderr);
    assert!(walk.contains("validate says `no model to run with`"));
}
