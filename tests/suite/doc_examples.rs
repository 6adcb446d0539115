//! The docs' examples are tests (issue 40, "the docs are tests"): every
//! YAML block and every shell block of README.md and docs/*.md is what
//! the marker on the line before its fence says it is, checked by the
//! real binary. A doc example that stops working fails here.
//!
//! YAML blocks (```` ```yaml ````):
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
//! Shell blocks (```` ```sh ````, ```` ```bash ````) must carry one of
//! these markers; an unmarked one fails the test:
//!
//! - `<!-- doc-test: run in=PLACE [exit=N] [expect="TEXT"]... -->`: run as
//!   written by `sh -e`, with this build's `ybs` first on `PATH`, in a
//!   fresh git repository PLACE names (so the checkout is never touched):
//!   `checkout`, the repository's `tasks/` and `.gitignore` committed (the
//!   demo and the example jobs replay their shipped cassettes); or
//!   `first-task`, the README's first task (`tasks/fix-typos.yaml` as the
//!   README shows it) in a small crate whose comment has a typo, with
//!   `OPENAI_BASE_URL` pointing at the scripted server, which fixes the
//!   typo with `edit_file` and answers. The block must exit N (0 unless
//!   given), print every TEXT (stdout or stderr), and leave the work tree
//!   clean (a passing task is committed; outputs are ignored); with
//!   `file=PATH` (repeatable), leave that file; with `head="TEXT"`, end
//!   with a commit whose subject starts with TEXT.
//!   `cargo run -q --` in a block is this build's `ybs` (the suite does
//!   not build again). The home is empty; `RUSTUP_HOME` and `CARGO_HOME`
//!   are the test's own, so a check's `cargo` finds its toolchain.
//! - `<!-- doc-test: synopsis -->`: usage lines (`[--flag]`), not commands:
//!   each names a command that exists, and flags its `--help` lists;
//! - `<!-- doc-test: illustration -->`: needs the reader's things (an API
//!   key and the vendor's network, a local model server, a CI engine, a
//!   release download, root) or is this suite itself; its `ybs` commands
//!   are still parse-checked against the CLI.

use std::path::{Path, PathBuf};

use crate::support::Ybs;
use crate::support::server::Server;
use crate::support::wire::{openai_sse_answer, openai_sse_call};

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

/// The README's first task file, as the README shows it.
fn readme_first_task() -> String {
    blocks("yaml")
        .into_iter()
        .find(|block| {
            block.file == Path::new("README.md") && block.body.starts_with("# tasks/fix-typos.yaml")
        })
        .expect("the README's first task")
        .body
}

/// What the README says of its validate command without a provider
/// (issue 40, mismatch 1); the command itself, with one, runs in
/// `every_shell_example_is_classified_and_the_runnable_ones_run`.
#[test]
fn the_readme_first_task_without_a_provider_is_refused_as_the_readme_says() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let (_, walk) = readme.split_once("## A first real task").unwrap();
    assert!(walk.contains("validate says `no model to run with`"));
    let ybs = Ybs::new();
    ybs.file("tasks/fix-typos.yaml", &readme_first_task());
    let run = ybs.run(["validate", "tasks/"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no model to run with"),
        "{}",
        run.stderr
    );
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

/// How a `run` block is run: its marker's `in=`, `exit=` and `expect=`.
#[derive(Debug, PartialEq)]
struct RunMarker {
    place: String,
    exit: i32,
    expect: Vec<String>,
    /// Files the block leaves (outputs).
    files: Vec<String>,
    /// How the subject of the last commit starts.
    head: Option<String>,
}

/// The marker of a shell block: `Ok(None)` for `synopsis` and
/// `illustration`, the run for `run …`, an error for anything else
/// (no marker included).
fn shell_marker(marker: Option<&str>) -> Result<Option<RunMarker>, String> {
    let Some(marker) = marker else {
        return Err(
            "no `<!-- doc-test: run|synopsis|illustration -->` marker: say what the block is"
                .to_owned(),
        );
    };
    let parts = words(marker);
    match parts.first().map(String::as_str) {
        Some("synopsis" | "illustration") if parts.len() == 1 => Ok(None),
        Some("run") => {
            let mut run = RunMarker {
                place: String::new(),
                exit: 0,
                expect: Vec::new(),
                files: Vec::new(),
                head: None,
            };
            for part in &parts[1..] {
                match part.split_once('=') {
                    Some(("in", place)) => place.clone_into(&mut run.place),
                    Some(("exit", code)) => {
                        run.exit = code.parse().map_err(|_| format!("bad `exit={code}`"))?;
                    }
                    Some(("expect", text)) => run.expect.push(text.to_owned()),
                    Some(("file", path)) => run.files.push(path.to_owned()),
                    Some(("head", subject)) => run.head = Some(subject.to_owned()),
                    _ => return Err(format!("unknown `{part}` in `{marker}`")),
                }
            }
            if !["checkout", "first-task"].contains(&run.place.as_str()) {
                return Err(format!(
                    "`{marker}`: `in=` must be `checkout` or `first-task`"
                ));
            }
            Ok(Some(run))
        }
        _ => Err(format!("unknown marker `{marker}`")),
    }
}

/// A fresh git repository with `files`, committed.
fn repository(ybs: &Ybs) {
    git(ybs.path(), &["init", "-q", "-b", "main"]);
    git(ybs.path(), &["add", "-A"]);
    git(ybs.path(), &["commit", "-qm", "checkout"]);
}

/// Runs `body` as `run` says, in a fresh place; what went wrong, if
/// anything.
fn run_shell_block(body: &str, run: &RunMarker) -> Option<String> {
    let ybs = Ybs::new();
    let mut server = None;
    match run.place.as_str() {
        "checkout" => {
            copy_tree(&root().join("tasks"), &ybs.path().join("tasks"));
            std::fs::copy(root().join(".gitignore"), ybs.path().join(".gitignore")).unwrap();
        }
        _ => {
            ybs.file("tasks/fix-typos.yaml", &readme_first_task());
            ybs.file(
                "Cargo.toml",
                "[package]\nname = \"typos\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            );
            ybs.file(
                "src/lib.rs",
                "// teh answer\npub fn answer() -> u32 {\n    42\n}\n",
            );
            ybs.file(".gitignore", "target/\nybs-out/\n");
            server = Some(Server::start(vec![
                openai_sse_call(
                    "call_1",
                    "edit_file",
                    &serde_json::json!({"path": "src/lib.rs", "old_text": "teh", "new_text": "the"}),
                ),
                openai_sse_answer("Fixed the spelling of the comment in src/lib.rs."),
            ]));
        }
    }
    repository(&ybs);
    let bin = Path::new(env!("CARGO_BIN_EXE_ybs")).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let home = PathBuf::from(std::env::var("HOME").unwrap_or_default());
    // The test's rustup and cargo homes, where they exist (a rustup
    // install under the real home); a system cargo needs neither.
    let toolchain = |name: &str, default: &str| {
        std::env::var_os(name)
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(default))
    };
    let script = body.replace("cargo run -q --", "ybs");
    let mut command = std::process::Command::new("sh");
    command
        .args(["-ec", &script])
        .current_dir(ybs.path())
        .env("HOME", ybs.home())
        .env("PATH", path)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .stdin(std::process::Stdio::null());
    for (key, _) in std::env::vars() {
        if key.starts_with("YBS_")
            || key.ends_with("_API_KEY")
            || key.starts_with("GITHUB_")
            || key.starts_with("OTEL_")
            || key == "OPENAI_BASE_URL"
            || key == "OLLAMA_HOST"
            || key == "CARGO_TARGET_DIR"
        {
            command.env_remove(key);
        }
    }
    for (name, default) in [("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")] {
        let dir = toolchain(name, default);
        if dir.is_dir() {
            command.env(name, dir);
        }
    }
    if let Some(server) = &server {
        command
            .env("OPENAI_BASE_URL", format!("{}/v1", server.url))
            // The reader's key; the scripted server takes any.
            .env("OPENAI_API_KEY", "sk-doc-example");
    }
    let output = command.output().unwrap();
    let printed = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let mut wrong = Vec::new();
    let code = output.status.code().unwrap_or(-1);
    if code != run.exit {
        wrong.push(format!("exit {code} (expected {})", run.exit));
    }
    for text in &run.expect {
        if !printed.contains(text.as_str()) {
            wrong.push(format!("no `{text}` in what it printed"));
        }
    }
    for file in &run.files {
        if !ybs.path().join(file).is_file() {
            wrong.push(format!("no file `{file}`"));
        }
    }
    if let Some(head) = &run.head {
        let subject = git(ybs.path(), &["log", "-1", "--format=%s"]);
        if !subject.starts_with(head.as_str()) {
            wrong.push(format!(
                "the last commit is `{}`, not `{head}…`",
                subject.trim()
            ));
        }
    }
    let status = git(ybs.path(), &["status", "--porcelain"]);
    if !status.is_empty() {
        wrong.push(format!("the work tree is not clean:\n{status}"));
    }
    (!wrong.is_empty()).then(|| format!("{}\n{printed}", wrong.join("; ")))
}

/// Every shell block of the docs says what it is, and each that is meant
/// to run runs as written: its exit code, its key lines, a clean tree.
#[test]
fn every_shell_example_is_classified_and_the_runnable_ones_run() {
    let mut ran = 0;
    let mut failures = Vec::new();
    for block in blocks("sh").into_iter().chain(blocks("bash")) {
        let place = format!("{}:{}", block.file.display(), block.line);
        match shell_marker(block.marker.as_deref()) {
            Err(why) => failures.push(format!("{place}: {why}")),
            Ok(None) => {}
            Ok(Some(run)) => {
                ran += 1;
                if let Some(why) = run_shell_block(&block.body, &run) {
                    failures.push(format!("{place}: `{}`: {why}", block.body.trim()));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    // The README's demo, validate, run, ad-hoc run and policy explain;
    // ci.md's example jobs; task-files.md's ad-hoc run.
    assert!(ran >= 7, "only {ran} shell examples ran");
}

#[test]
fn shell_markers_are_read_strictly() {
    assert_eq!(shell_marker(Some("illustration")), Ok(None));
    assert_eq!(shell_marker(Some("synopsis")), Ok(None));
    assert_eq!(
        shell_marker(Some(
            r#"run in=checkout exit=1 expect="1 failed" expect="x y""#
        )),
        Ok(Some(RunMarker {
            place: "checkout".to_owned(),
            exit: 1,
            expect: vec!["1 failed".to_owned(), "x y".to_owned()],
            files: Vec::new(),
            head: None,
        }))
    );
    assert!(shell_marker(None).is_err());
    assert!(shell_marker(Some("illustrative")).is_err());
    assert!(shell_marker(Some("run")).is_err());
    assert!(shell_marker(Some("run in=home")).is_err());
    assert!(shell_marker(Some("run in=checkout exit=x")).is_err());
    assert!(shell_marker(Some("run in=checkout expected=x")).is_err());
    // A run block that does not do what its marker says fails.
    let run = shell_marker(Some(r#"run in=checkout expect="1 task: 1 passed""#))
        .unwrap()
        .unwrap();
    assert!(
        run_shell_block(
            "ybs validate --provider ollama --model m tasks/demo.yaml\n",
            &run
        )
        .is_some()
    );
    assert!(run_shell_block("ybs run --scratch tasks/demo.yaml\n", &run).is_none());
    let exits = shell_marker(Some("run in=checkout exit=0"))
        .unwrap()
        .unwrap();
    assert!(run_shell_block("ybs run --no-such-flag tasks/\n", &exits).is_some());
    // A file not left, a commit not made.
    let file = shell_marker(Some("run in=checkout file=ybs-out/summary.md"))
        .unwrap()
        .unwrap();
    assert!(
        run_shell_block(
            "ybs validate --provider ollama --model m tasks/demo.yaml\n",
            &file
        )
        .is_some()
    );
    let head = shell_marker(Some(r#"run in=checkout head="[ybs] ""#))
        .unwrap()
        .unwrap();
    assert!(run_shell_block("ybs run --scratch tasks/demo.yaml\n", &head).is_some());
    // A block that dirties the checkout fails.
    assert!(run_shell_block("echo x > tasks/demo/hello.sh\n", &exits).is_some());
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
/// a bad value, exits 2). This covers the illustrations, which do not
/// run here; a `synopsis` block is usage lines (`[--flag]`), not commands.
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

/// The commands of a synopsis block: its `ybs` lines, an indented line
/// joined to the one before, what follows two blanks (a description, a
/// `# comment`) dropped.
fn synopsis_lines(body: &str) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for line in body.lines() {
        let text = line.trim_start();
        let text = text.split("  ").next().unwrap_or_default();
        match lines.last_mut() {
            Some(last) if line.starts_with(' ') => {
                last.push(' ');
                last.push_str(text);
            }
            _ if line.starts_with("ybs ") => lines.push(text.to_owned()),
            _ => {}
        }
    }
    lines
}

/// A synopsis line's subcommand path (its lowercase words after `ybs`,
/// up to the first argument), whether an alternative (`list|schema`)
/// ended it, and the `--flags` it names.
fn synopsis_parts(line: &str) -> (Vec<String>, bool, Vec<String>) {
    let mut words = line.split_whitespace().skip(1).peekable();
    let mut path = Vec::new();
    while let Some(word) = words.peek() {
        if !word.chars().all(|c| c.is_ascii_lowercase() || c == '-') || word.starts_with('-') {
            break;
        }
        path.push((*word).to_owned());
        words.next();
    }
    let alternatives = words.peek().is_some_and(|word| {
        word.contains('|') && word.chars().all(|c| c.is_ascii_lowercase() || c == '|')
    });
    let flags = line
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'))
        .filter(|token| token.starts_with("--") && token.len() > 2)
        .map(str::to_owned)
        .collect();
    (path, alternatives, flags)
}

/// Every usage line of a `synopsis` block names a command that exists,
/// with flags that command has (its `--help` lists them).
#[test]
fn every_synopsis_names_commands_and_flags_that_exist() {
    let ybs = Ybs::new();
    let mut checked = 0;
    let mut failures = Vec::new();
    for block in blocks("sh") {
        if block.marker.as_deref() != Some("synopsis") {
            continue;
        }
        for line in synopsis_lines(&block.body) {
            checked += 1;
            let (path, alternatives, flags) = synopsis_parts(&line);
            let mut args = path.clone();
            args.push("--help".to_owned());
            let help = ybs.run(&args);
            if help.code != 0 {
                failures.push(format!(
                    "{}:{}: `ybs {}` is no command",
                    block.file.display(),
                    block.line,
                    path.join(" ")
                ));
                continue;
            }
            if alternatives {
                continue;
            }
            for flag in flags {
                let named = help
                    .stdout
                    .split(|c: char| !(c.is_ascii_alphanumeric() || c == '-'));
                if !named.into_iter().any(|word| word == flag) {
                    failures.push(format!(
                        "{}:{}: `ybs {}` has no `{flag}`",
                        block.file.display(),
                        block.line,
                        path.join(" ")
                    ));
                }
            }
        }
    }
    assert!(checked >= 20, "only {checked} synopsis lines");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        synopsis_parts("ybs tools invoke NAME --input '{}' [--provider/--model]"),
        (
            vec!["tools".to_owned(), "invoke".to_owned()],
            false,
            vec![
                "--input".to_owned(),
                "--provider".to_owned(),
                "--model".to_owned()
            ]
        )
    );
    assert_eq!(
        synopsis_lines("ybs a [--x]  # note #1\n    [--y]\nybs b FILE#ID   what it does\n"),
        ["ybs a [--x] [--y]", "ybs b FILE#ID"]
    );
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
