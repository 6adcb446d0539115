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
            block.file == Path::new("README.md") && block.body.starts_with("# tasks/fix-typos.yaml")
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
    assert!(
        run.stdout.contains("ok: 1 file, 1 task valid"),
        "{}",
        run.stdout
    );
    // What the README says of the same command without a provider.
    let run = ybs.run(["validate", "tasks/"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no model to run with"),
        "{}",
        run.stderr
    );
    assert!(walk.contains("validate says `no model to run with`"));
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

fn git(dir: &Path, args: &[&str]) -> String {
    let output = std::process::Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(output.status.success(), "git {args:?}: {output:?}");
    String::from_utf8(output.stdout).unwrap()
}

/// docs/ci.md's "Example jobs" command, run as written (by `sh`, with
/// this build's `ybs` on `PATH`) in a clone of the checkout's tasks:
/// every example passes and the checkout stays clean (issue 40,
/// mismatch 7).
#[test]
fn the_example_jobs_command_of_ci_md_passes_and_leaves_the_checkout_clean() {
    let ci = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let (_, section) = ci.split_once("## Example jobs").unwrap();
    let command: Vec<&str> = section
        .lines()
        .skip_while(|line| !line.starts_with("    rm -rf"))
        .take_while(|line| line.starts_with("    "))
        .map(str::trim)
        .collect();
    assert!(!command.is_empty(), "no command in ci.md's Example jobs");
    let command = command.join("\n");
    let ybs = Ybs::new();
    copy_tree(&root().join("tasks"), &ybs.path().join("tasks"));
    std::fs::copy(root().join(".gitignore"), ybs.path().join(".gitignore")).unwrap();
    git(ybs.path(), &["init", "-q", "-b", "main"]);
    git(ybs.path(), &["add", "."]);
    git(ybs.path(), &["commit", "-qm", "checkout"]);
    let bin = Path::new(env!("CARGO_BIN_EXE_ybs")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = std::process::Command::new("sh")
        .args(["-c", &command])
        .current_dir(ybs.path())
        .env("HOME", ybs.home())
        .env("PATH", path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GITHUB_ACTIONS")
        .env_remove("GITHUB_OUTPUT")
        .env_remove("GITHUB_STEP_SUMMARY")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{command}\n{stdout}\n{stderr}");
    assert!(
        stdout.contains("7 tasks: 7 passed, 0 failed, 0 errors"),
        "{stdout}"
    );
    assert_eq!(git(ybs.path(), &["status", "--porcelain"]), "", "{stdout}");
}

/// The words of one shell command line, quotes taken off (single and
/// double quotes, backslash escapes; no expansion).
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut started = false;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => word.extend(chars.next()),
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                started = true;
            }
            (None, '\\') => word.extend(chars.next()),
            (None, c) if c.is_whitespace() => {
                if started || !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                started = false;
            }
            (None, c) => word.push(c),
        }
    }
    if started || !word.is_empty() {
        words.push(word);
    }
    words
}

/// The `ybs` commands of a shell block: its lines (continuations joined,
/// comments dropped), each split at `&&`, `||` and `;`, leading
/// `NAME=value` words dropped; the arguments of those that run `ybs`.
fn ybs_commands(body: &str) -> Vec<Vec<String>> {
    let joined = body.replace("\\\n", " ");
    let mut commands = Vec::new();
    for line in joined.lines() {
        let line = match line.find(" #") {
            Some(at) => &line[..at],
            None if line.trim_start().starts_with('#') => "",
            None => line,
        };
        for part in line
            .split("&&")
            .flat_map(|p| p.split("||"))
            .flat_map(|p| p.split(';'))
        {
            let words = words(part);
            let mut rest = words
                .iter()
                .skip_while(|word| {
                    word.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty() && name.chars().all(|c| c.is_ascii_uppercase() || c == '_')
                    })
                })
                .cloned();
            if rest.next().as_deref() == Some("ybs") {
                commands.push(rest.collect());
            }
        }
    }
    commands
}

/// Every `ybs` command in the docs' shell examples (```` ```sh ````,
/// ```` ```bash ````) is one the CLI takes as written: its subcommand and
/// flags parse (`ybs ARGS --help` exits 0; a flag that does not exist, or
/// a bad value, exits 2). Running them needs a model, the network or the
/// reader's machine; the README's first task, its validate command and
/// ci.md's example jobs run for real in the tests above. A block marked
/// `<!-- doc-test: synopsis -->` is a usage line (`[--flag]`), not a
/// command.
#[test]
fn every_ybs_command_of_the_docs_shell_examples_parses() {
    let ybs = Ybs::new();
    let mut checked = 0;
    let mut failures = Vec::new();
    for block in blocks("sh").into_iter().chain(blocks("bash")) {
        if block.marker.as_deref() == Some("synopsis") {
            continue;
        }
        for args in ybs_commands(&block.body) {
            checked += 1;
            let mut all = args.clone();
            all.push("--help".to_owned());
            let run = ybs.run(&all);
            if run.code != 0 {
                failures.push(format!(
                    "{}:{}: `ybs {}`: exit {}\n{}",
                    block.file.display(),
                    block.line,
                    args.join(" "),
                    run.code,
                    run.stderr
                ));
            }
        }
    }
    assert!(checked >= 8, "only {checked} ybs commands found");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    // The check can fail: a flag that does not exist.
    let run = ybs.run(["run", "--no-such-flag", "tasks/", "--help"]);
    assert_eq!(run.code, 2);
}

#[test]
fn shell_words_and_commands_are_read_like_a_shell_does() {
    assert_eq!(
        words(r#"ybs run -p 'Fix it' --allow "edit_file(src/**)" a\ b"#),
        [
            "ybs",
            "run",
            "-p",
            "Fix it",
            "--allow",
            "edit_file(src/**)",
            "a b"
        ]
    );
    assert_eq!(
        ybs_commands("X=1 ybs run tasks/ \\\n  --jobs 2 # note\ncd a && ybs validate t.yaml\n"),
        [
            vec!["run", "tasks/", "--jobs", "2"],
            vec!["validate", "t.yaml"]
        ]
    );
}
