//! Into the pipeline (issue 15): the GitHub Action's script, the example
//! jobs under tasks/ replayed offline, shell completions, the man page and
//! `--version`.

use std::path::Path;
use std::process::Command;

use crate::support::Ybs;
use crate::support::git;

#[test]
fn version_names_the_build_commit() {
    let run = Ybs::new().run(["--version"]);
    run.expect_code(0);
    let line = run.stdout.trim();
    let rest = line
        .strip_prefix(&format!("ybs {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("unexpected --version: {line}"));
    // Built from this checkout: the short sha of a commit git knows, or
    // `unknown` when the source has no .git (a packaged crate).
    if Path::new(env!("CARGO_MANIFEST_DIR")).join(".git").exists() {
        assert!(
            rest.len() >= 7 && rest.chars().all(|c| c.is_ascii_hexdigit()),
            "{line}"
        );
        let known = Command::new("git")
            .args(["cat-file", "-e", &format!("{rest}^{{commit}}")])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .status()
            .unwrap();
        assert!(known.success(), "{rest} is not a commit of this repository");
    } else {
        assert_eq!(rest, "unknown");
    }
}

#[test]
fn bash_completions_are_a_valid_script() {
    let run = Ybs::new().run(["completions", "bash"]);
    run.expect_code(0);
    assert!(run.stdout.contains("complete -F _ybs"), "{}", run.stdout);
    for sub in [
        "run",
        "validate",
        "completions",
        "man",
        "--shard",
        "--no-commit",
    ] {
        assert!(run.stdout.contains(sub), "{sub} missing from the script");
    }
    let checked = Command::new("bash")
        .arg("-n")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(run.stdout.as_bytes())?;
            child.wait_with_output()
        })
        .unwrap();
    assert!(
        checked.status.success(),
        "bash -n rejected the script: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // Loaded for real, the function completes subcommands.
    let script = Ybs::new();
    script.file("ybs.bash", &run.stdout);
    let output = Command::new("bash")
        .arg("-c")
        .arg(
            "source ./ybs.bash; COMP_WORDS=(ybs compl); COMP_CWORD=1; \
             _ybs ybs compl ybs; printf '%s\\n' \"${COMPREPLY[@]}\"",
        )
        .current_dir(script.path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&output.stdout).trim(),
        "completions"
    );
}

#[test]
fn completions_for_every_shell_and_a_bad_one() {
    let ybs = Ybs::new();
    for (shell, marker) in [
        ("zsh", "#compdef ybs"),
        ("fish", "complete -c ybs"),
        ("powershell", "Register-ArgumentCompleter"),
    ] {
        let run = ybs.run(["completions", shell]);
        run.expect_code(0);
        assert!(run.stdout.contains(marker), "{shell}: {}", run.stdout);
    }
    let run = ybs.run(["completions", "tcsh"]);
    run.expect_code(2);
    assert!(run.stderr.contains("tcsh"), "{}", run.stderr);
}

#[test]
fn man_pages_are_roff() {
    let ybs = Ybs::new();
    let run = ybs.run(["man"]);
    run.expect_code(0);
    assert!(run.stdout.contains(".TH ybs 1"), "{}", run.stdout);
    assert!(run.stdout.contains(".SH SUBCOMMANDS"), "{}", run.stdout);
    let run = ybs.run(["man", "run"]);
    run.expect_code(0);
    assert!(run.stdout.contains(".TH ybs-run 1"), "{}", run.stdout);
    assert!(run.stdout.contains("\\-\\-shard"), "{}", run.stdout);
    let run = ybs.run(["man", "runn"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("no subcommand `runn`"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
}

/// Copies a directory tree (files and directories only).
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

fn repo_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The repository's tasks/ copied into a scratch dir, the fixture
/// repository made by tasks/examples/setup.sh, and a copy of the demo's
/// directory: what `ybs run tasks/` needs, nowhere near the real tree.
fn examples_workspace() -> (Ybs, Vec<String>) {
    let ybs = Ybs::new();
    copy_tree(&repo_root().join("tasks"), &ybs.path().join("tasks"));
    copy_tree(&repo_root().join("tasks/demo"), &ybs.path().join("demo"));
    let setup = Command::new("sh")
        .arg("tasks/examples/setup.sh")
        .arg("fixture")
        .current_dir(ybs.path())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        setup.status.success(),
        "setup.sh: {}",
        String::from_utf8_lossy(&setup.stderr)
    );
    let vars = vec![
        "--var".to_owned(),
        format!("repo={}", ybs.path().join("fixture").display()),
        "--var".to_owned(),
        format!("workdir={}", ybs.path().join("demo").display()),
    ];
    (ybs, vars)
}

/// Every task file under tasks/, relative to the repository root.
fn task_files(dir: &Path, found: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            task_files(&path, found);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            let relative = path.strip_prefix(repo_root()).unwrap();
            found.push(relative.display().to_string());
        }
    }
}

#[test]
fn every_example_replays_offline_and_passes() {
    let mut files = Vec::new();
    task_files(&repo_root().join("tasks"), &mut files);
    files.sort();
    for file in &files {
        let cassette = repo_root().join(file.replace(".yaml", ".cassette.json"));
        assert!(cassette.is_file(), "{file} has no cassette beside it");
    }
    for example in [
        "tasks/refactor.yaml",
        "tasks/examples/lint-fix.yaml",
        "tasks/examples/dependency-bump.yaml",
        "tasks/examples/changelog.yaml",
        "tasks/examples/add-tests.yaml",
        "tasks/examples/doc-comments.yaml",
    ] {
        assert!(files.iter().any(|f| f == example), "{example} is missing");
    }

    let (ybs, vars) = examples_workspace();
    let fixture = ybs.path().join("fixture");
    let base = git(&fixture, &["rev-parse", "HEAD"]);
    let mut args = vec!["run".to_owned(), "tasks/".to_owned()];
    args.extend(vars);
    let run = ybs.run(&args);
    run.expect_code(0);
    assert!(
        run.stdout.contains("7 tasks: 7 passed, 0 failed, 0 errors"),
        "{}",
        run.stdout
    );
    let junit = run.read("ybs-out/junit.xml");
    assert!(
        junit.contains(r#"tests="7" skipped="0" failures="0" errors="0""#),
        "{junit}"
    );
    // Offline: every task was answered by its cassette.
    assert_eq!(
        junit.matches(r#"name="provider" value="replay""#).count(),
        7
    );

    // Each example committed its own work on the fixture's branch, and the
    // fixture is clean after them: the checks ran against real changes.
    let log = git(
        &fixture,
        &["log", "--format=%s", &format!("{}..HEAD", base.trim())],
    );
    for task in [
        "add-tests",
        "changelog",
        "dependency-bump",
        "doc-comments",
        "lint-fix",
        "rename-helper",
    ] {
        assert!(
            log.contains(&format!("[ybs] {task}: ")),
            "{task} not committed:\n{log}"
        );
        let transcript = run.json(&format!("ybs-out/{task}/transcript.json"));
        assert_eq!(transcript["status"], "passed", "{task}");
        assert!(
            transcript["checks"]
                .as_array()
                .is_some_and(|c| !c.is_empty()),
            "{task} has no checks"
        );
        for call in transcript["tool_calls"].as_array().unwrap() {
            assert_eq!(call["decision"]["verdict"], "allow", "{task}: {call}");
        }
    }
    assert_eq!(git(&fixture, &["status", "--porcelain"]), "");
    let strings = std::fs::read_to_string(fixture.join("lib/strings.sh")).unwrap();
    assert!(strings.contains("fmt_pad_left") && !strings.contains("str_upper"));
    assert!(fixture.join("tests/test_repeat.sh").is_file());
}

#[test]
fn an_example_whose_agent_does_nothing_fails_its_checks() {
    // The checks are real: a model that only claims success fails them.
    let (ybs, vars) = examples_workspace();
    ybs.cassette(
        "lazy.cassette.json",
        // fix_attempts: 1, so the failing checks' output goes back once.
        vec![
            crate::support::cassette::answer("All fixed."),
            crate::support::cassette::answer("Really, all fixed."),
        ],
    );
    let mut args = vec![
        "run".to_owned(),
        "tasks/examples/lint-fix.yaml".to_owned(),
        "--cassette".to_owned(),
        "lazy.cassette.json".to_owned(),
    ];
    args.extend(vars);
    let run = ybs.run(&args);
    run.expect_code(1);
    let transcript = run.json("ybs-out/lint-fix/transcript.json");
    assert_eq!(transcript["reason"], "checks_failed");
    let failed: Vec<&str> = transcript["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["passed"] == false)
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(failed.contains(&"lint is clean"), "{failed:?}");
}

#[test]
fn the_task_files_validate_clean() {
    let ybs = Ybs::new();
    // The examples' workdir (`{{repo}}`, target/ybs-examples) is made by
    // tasks/examples/setup.sh; validate refuses a missing one as run
    // does, so the files are validated against the checkout itself.
    let mut command = ybs.command();
    let output = command
        .current_dir(repo_root())
        .args(["validate", "tasks/", "--var", "repo=."])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("ok: 7 files, 7 tasks valid"), "{stdout}");
    assert_eq!(stderr, "", "validate warned");
}

// ---------------------------------------------------------------------
// The GitHub Action: action.yml's steps run as the runner runs a composite
// action, by a small harness that reads action.yml itself.

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use ybs::core::decode::yaml::{self, NodeKind};

fn yaml_value(node: &yaml::Node) -> Value {
    match &node.kind {
        NodeKind::Null => Value::Null,
        NodeKind::Bool(value) => Value::String(value.to_string()),
        NodeKind::Int(value) => Value::String(value.to_string()),
        NodeKind::Float(value) => Value::String(value.to_string()),
        NodeKind::Str(text) => Value::String(text.clone()),
        NodeKind::Seq(items) => Value::Array(items.iter().map(yaml_value).collect()),
        NodeKind::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, value)| (key.name.clone(), yaml_value(value)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

fn action_yml() -> Value {
    let text = std::fs::read_to_string(repo_root().join("action.yml")).unwrap();
    let (node, errors) = yaml::parse(&text);
    assert!(errors.is_empty(), "action.yml: {errors:?}");
    yaml_value(&node.expect("action.yml is empty"))
}

/// What the expressions of action.yml can see.
#[derive(Default)]
struct Contexts {
    inputs: BTreeMap<String, String>,
    steps: BTreeMap<String, BTreeMap<String, String>>,
    github: BTreeMap<String, String>,
    failed: bool,
}

impl Contexts {
    fn lookup(&self, path: &str) -> String {
        let parts: Vec<&str> = path.trim().split('.').collect();
        let found = match parts.as_slice() {
            ["inputs", name] => self.inputs.get(*name),
            ["github", name] => self.github.get(*name),
            ["steps", id, "outputs", name] => self.steps.get(*id).and_then(|o| o.get(*name)),
            _ => panic!("action.yml uses an expression this harness does not know: {path}"),
        };
        found.cloned().unwrap_or_default()
    }

    /// An `if:` condition: `&&`/`||` of `always()`, `X == 'v'`, `X != 'v'`.
    /// Like the runner, a condition without a status function implies
    /// `success()`.
    fn condition(&self, expression: &str) -> bool {
        let expression = expression.trim();
        let status_function = expression.contains("always()");
        let value = expression.split("||").any(|any| {
            any.split("&&").all(|atom| {
                let atom = atom.trim();
                if atom == "always()" {
                    return true;
                }
                let (left, right, equal) = if let Some((l, r)) = atom.split_once("!=") {
                    (l, r, false)
                } else if let Some((l, r)) = atom.split_once("==") {
                    (l, r, true)
                } else {
                    return !self.lookup(atom).is_empty();
                };
                let literal = right.trim().trim_matches('\'');
                (self.lookup(left).eq_ignore_ascii_case(literal)) == equal
            })
        });
        value && (status_function || !self.failed)
    }

    /// A string with `${{ expr }}` placeholders filled in.
    fn substitute(&self, text: &str) -> String {
        let mut out = String::new();
        let mut rest = text;
        while let Some(start) = rest.find("${{") {
            out.push_str(&rest[..start]);
            let end = rest[start..].find("}}").expect("unclosed ${{") + start;
            out.push_str(&self.lookup(&rest[start + 3..end]));
            rest = &rest[end + 2..];
        }
        out.push_str(rest);
        out
    }
}

/// A `GITHUB_OUTPUT` file: `name=value` lines and `name<<DELIM` blocks.
fn parse_outputs(text: &str) -> BTreeMap<String, String> {
    let mut outputs = BTreeMap::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        if let Some((name, delimiter)) = line.split_once("<<") {
            let value: Vec<&str> = lines.by_ref().take_while(|l| *l != delimiter).collect();
            outputs.insert(name.to_owned(), value.join("\n"));
        } else if let Some((name, value)) = line.split_once('=') {
            outputs.insert(name.to_owned(), value.to_owned());
        }
    }
    outputs
}

/// One run of the action.
struct ActionRun {
    outputs: BTreeMap<String, String>,
    /// `uses:` steps the condition let through, with their `with:`.
    used: Vec<(String, BTreeMap<String, String>)>,
    /// Ids of the `run:` steps that ran, with their exit codes.
    ran: Vec<(String, i32)>,
    log: String,
    succeeded: bool,
    step_summary: String,
    github_path: String,
}

/// Runs action.yml's steps in `workspace` with the given inputs and extra
/// environment, as the runner would: each `run:` step with `sh -e`, its
/// `env:` evaluated, a fresh GITHUB_OUTPUT; `uses:` steps are recorded,
/// not run (their outputs are empty: a cache miss).
fn run_action(workspace: &Path, with: &[(&str, &str)], env: &[(&str, &str)]) -> ActionRun {
    let action = action_yml();
    let mut contexts = Contexts::default();
    for (name, input) in action["inputs"].as_object().unwrap() {
        let default = input["default"].as_str().unwrap_or_default();
        contexts.inputs.insert(name.clone(), default.to_owned());
    }
    for (name, value) in with {
        assert!(
            contexts.inputs.contains_key(*name),
            "action.yml has no input {name}"
        );
        contexts
            .inputs
            .insert((*name).to_owned(), (*value).to_owned());
    }
    let runner = tempfile::TempDir::new().unwrap();
    let summary = runner.path().join("step_summary.md");
    let github_path = runner.path().join("github_path");
    std::fs::write(&summary, "").unwrap();
    std::fs::write(&github_path, "").unwrap();
    let home = runner.path().join("home");
    std::fs::create_dir(&home).unwrap();
    let mut run = ActionRun {
        outputs: BTreeMap::new(),
        used: Vec::new(),
        ran: Vec::new(),
        log: String::new(),
        succeeded: true,
        step_summary: String::new(),
        github_path: String::new(),
    };
    for (index, step) in action["runs"]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
    {
        let id = step["id"]
            .as_str()
            .map_or_else(|| format!("step{index}"), str::to_owned);
        if let Some(condition) = step["if"].as_str() {
            if !contexts.condition(condition) {
                continue;
            }
        } else if contexts.failed {
            continue;
        }
        if let Some(uses) = step["uses"].as_str() {
            let with = step["with"]
                .as_object()
                .map(|w| {
                    w.iter()
                        .map(|(k, v)| {
                            (
                                k.clone(),
                                contexts.substitute(v.as_str().unwrap_or_default()),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            run.used.push((uses.to_owned(), with));
            continue;
        }
        assert_eq!(
            step["shell"], "sh",
            "step {id}: the harness runs `shell: sh` steps"
        );
        let script = runner.path().join(format!("{id}.sh"));
        std::fs::write(&script, step["run"].as_str().unwrap()).unwrap();
        let output_file = runner.path().join(format!("{id}.output"));
        std::fs::write(&output_file, "").unwrap();
        let mut command = Command::new("sh");
        command
            .arg("-e")
            .arg(&script)
            .current_dir(workspace)
            .env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &home)
            .env("GITHUB_ACTIONS", "true")
            .env("GITHUB_ACTION_PATH", repo_root())
            .env("GITHUB_OUTPUT", &output_file)
            .env("GITHUB_STEP_SUMMARY", &summary)
            .env("GITHUB_PATH", &github_path)
            .env("RUNNER_TEMP", runner.path())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1");
        for (key, value) in env {
            command.env(key, value);
        }
        for (key, value) in step["env"].as_object().into_iter().flatten() {
            command.env(key, contexts.substitute(value.as_str().unwrap_or_default()));
        }
        let output = command.output().unwrap();
        run.log.push_str(&format!(
            "--- {id}\n{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
        let code = output.status.code().unwrap_or(-1);
        run.ran.push((id.clone(), code));
        let outputs = parse_outputs(&std::fs::read_to_string(&output_file).unwrap());
        contexts.steps.insert(id, outputs);
        if code != 0 {
            contexts.failed = true;
            run.succeeded = false;
        }
    }
    for (name, output) in action["outputs"].as_object().unwrap() {
        let value = contexts.substitute(output["value"].as_str().unwrap());
        run.outputs.insert(name.clone(), value);
    }
    run.step_summary = std::fs::read_to_string(&summary).unwrap();
    run.github_path = std::fs::read_to_string(&github_path).unwrap();
    run
}

fn ybs_binary() -> String {
    assert_cmd::cargo::cargo_bin("ybs").display().to_string()
}

fn ran(run: &ActionRun) -> Vec<&str> {
    run.ran.iter().map(|(id, _)| id.as_str()).collect()
}

#[test]
fn the_action_runs_every_example_with_a_local_binary() {
    let (ybs, vars) = examples_workspace();
    let binary = ybs_binary();
    let args = vars.join(" ");
    let run = run_action(
        ybs.path(),
        &[
            ("ybs-binary", &binary),
            ("tasks", "tasks/"),
            ("args", &args),
            ("out", "results"),
            ("upload-artifact", "true"),
            ("artifact-name", "examples"),
        ],
        &[],
    );
    assert!(run.succeeded, "{}", run.log);
    assert_eq!(
        ran(&run),
        ["resolve", "sandbox", "run", "finish"],
        "{}",
        run.log
    );
    let expected = [
        ("status", "passed"),
        ("exit-code", "0"),
        ("passed", "7"),
        ("failed", "0"),
        ("errors", "0"),
        ("paused", "0"),
        ("skipped", "0"),
        ("out", "results"),
        ("junit", "results/junit.xml"),
        ("summary", "results/summary.md"),
        // Seven tasks: no one answer to name.
        ("output", ""),
    ];
    for (name, value) in expected {
        assert_eq!(run.outputs[name], value, "output {name}\n{}", run.log);
    }
    assert_eq!(run.outputs.len(), expected.len(), "{:?}", run.outputs);
    assert!(ybs.path().join("results/junit.xml").is_file());
    // No download, no cache; the output directory is uploaded.
    let (uses, with) = &run.used[0];
    assert_eq!(run.used.len(), 1, "{:?}", run.used);
    assert!(uses.starts_with("actions/upload-artifact@"), "{uses}");
    assert_eq!(with["name"], "examples");
    assert_eq!(with["path"], "results");
    // ybs itself wrote the outputs, and each task's lines in a group.
    assert!(run.log.contains("ybs: exit 0"), "{}", run.log);
    assert_eq!(run.log.matches("::group::").count(), 7, "{}", run.log);
    assert_eq!(run.log.matches("::endgroup::").count(), 7, "{}", run.log);
    // ybs itself wrote the step summary.
    assert!(
        run.step_summary.contains("7 tasks: 7 passed"),
        "{}",
        run.step_summary
    );
    assert!(
        run.log.contains(&format!("+ {binary} run --out results")),
        "{}",
        run.log
    );
}

#[test]
fn the_action_reports_a_failing_run_and_fails_after_the_upload() {
    let (ybs, vars) = examples_workspace();
    ybs.cassette(
        "lazy.cassette.json",
        vec![
            crate::support::cassette::answer("All fixed."),
            crate::support::cassette::answer("Really."),
        ],
    );
    let binary = ybs_binary();
    let args = format!("{} --cassette lazy.cassette.json", vars.join(" "));
    let run = run_action(
        ybs.path(),
        &[
            ("ybs-binary", &binary),
            ("tasks", "tasks/examples/lint-fix.yaml"),
            ("args", &args),
            ("provider", "replay"),
            ("model", "scripted-model"),
            ("upload-artifact", "true"),
        ],
        &[],
    );
    // provider: and model: reach `ybs run`.
    let junit = std::fs::read_to_string(ybs.path().join("ybs-out/junit.xml")).unwrap();
    assert!(
        junit.contains(r#"<property name="model" value="scripted-model"/>"#),
        "{junit}"
    );
    assert!(!run.succeeded);
    assert_eq!(
        run.ran.last().unwrap(),
        &("finish".to_owned(), 1),
        "{}",
        run.log
    );
    assert_eq!(run.used.len(), 1, "the upload runs before the step fails");
    // The artifact is the output directory, which holds the HTML report,
    // and the step summary says so.
    assert_eq!(run.used[0].1["path"], "ybs-out");
    assert!(ybs.path().join("ybs-out/report.html").is_file());
    assert!(
        run.step_summary
            .contains("the HTML report is `report.html` in the artifact `"),
        "{}",
        run.step_summary
    );
    for (name, value) in [
        ("status", "failed"),
        ("exit-code", "1"),
        ("passed", "0"),
        ("failed", "1"),
        ("out", "ybs-out"),
    ] {
        assert_eq!(run.outputs[name], value, "output {name}\n{}", run.log);
    }
    // One task: `output` is its answer's file, for the next step.
    let answer = &run.outputs["output"];
    assert!(
        answer.starts_with("ybs-out/") && answer.ends_with("/output.md"),
        "{answer}"
    );
    assert_eq!(
        std::fs::read_to_string(ybs.path().join(answer)).unwrap(),
        "Really.\n"
    );
}

#[test]
fn the_action_says_when_nothing_ran() {
    let ybs = Ybs::new();
    ybs.file("tasks/bad.yaml", "version: 1\npromt: x\n");
    // A junit.xml an earlier step (or an earlier run) left counts for
    // nothing: only one this step wrote does.
    ybs.file(
        "ybs-out/junit.xml",
        "<testsuites><testsuite name=\"old\"><testcase name=\"t\"><properties><property name=\"status\" value=\"passed\"/></properties></testcase></testsuite></testsuites>\n",
    );
    let binary = ybs_binary();
    let run = run_action(ybs.path(), &[("ybs-binary", &binary)], &[]);
    assert!(!run.succeeded);
    assert_eq!(run.outputs["status"], "invalid", "{}", run.log);
    assert_eq!(run.outputs["exit-code"], "2");
    assert_eq!(run.outputs["passed"], "0", "{}", run.log);
    assert_eq!(run.outputs["junit"], "", "{}", run.log);
    assert!(run.log.contains("bad.yaml:2:1:"), "{}", run.log);
    assert!(
        run.step_summary.contains("nothing ran"),
        "{}",
        run.step_summary
    );

    // `--out` belongs in the `out` input; a missing ybs-binary is named.
    let run = run_action(
        ybs.path(),
        &[("ybs-binary", &binary), ("args", "--out elsewhere")],
        &[],
    );
    assert!(!run.succeeded);
    assert!(run.log.contains("as the out: input"), "{}", run.log);
    let run = run_action(ybs.path(), &[("ybs-binary", "/nonexistent/ybs")], &[]);
    assert_eq!(ran(&run), ["resolve"]);
    assert!(
        run.log
            .contains("/nonexistent/ybs is not an executable file"),
        "{}",
        run.log
    );
    // Neither a binary, nor a version, nor a release tag to default to.
    let run = run_action(ybs.path(), &[], &[]);
    assert_eq!(ran(&run), ["resolve"]);
    assert!(run.log.contains("is not a release tag"), "{}", run.log);
    assert!(run.log.contains("hint: "), "{}", run.log);
}

/// A fake release directory (`file://` URLs) holding the test's ybs as
/// the Linux x86_64 binary and a SHA256SUMS, with `sums` as its checksum.
fn fake_release(dir: &Path, version: &str, sums: Option<&str>) -> String {
    use sha2::Digest;
    let release = dir.join("download").join(version);
    std::fs::create_dir_all(&release).unwrap();
    let bytes = std::fs::read(ybs_binary()).unwrap();
    std::fs::write(release.join("ybs-x86_64-unknown-linux-musl"), &bytes).unwrap();
    let sha = sums.map_or_else(
        || {
            sha2::Sha256::digest(&bytes)
                .iter()
                .map(|byte| format!("{byte:02x}"))
                .collect()
        },
        str::to_owned,
    );
    std::fs::write(
        release.join("SHA256SUMS"),
        format!(
            "{}  ybs-aarch64-apple-darwin\n{sha}  ybs-x86_64-unknown-linux-musl\n",
            "0".repeat(64)
        ),
    )
    .unwrap();
    format!("file://{}", dir.join("download").display())
}

#[test]
fn the_action_installs_a_release_binary_only_when_its_checksum_matches() {
    let ybs = Ybs::new();
    copy_tree(&repo_root().join("tasks/demo"), &ybs.path().join("demo"));
    ybs.file(
        "tasks/demo.yaml",
        &std::fs::read_to_string(repo_root().join("tasks/demo.yaml")).unwrap(),
    );
    ybs.file(
        "tasks/demo.cassette.json",
        &std::fs::read_to_string(repo_root().join("tasks/demo.cassette.json")).unwrap(),
    );
    let releases = tempfile::TempDir::new().unwrap();
    let tools = tempfile::TempDir::new().unwrap();
    let url = fake_release(releases.path(), "v9.9.9", None);
    let tool_cache = tools.path().display().to_string();
    let env = [
        ("YBS_DOWNLOAD_URL", url.as_str()),
        ("RUNNER_OS", "Linux"),
        ("RUNNER_ARCH", "X64"),
        ("RUNNER_TOOL_CACHE", tool_cache.as_str()),
        ("GITHUB_REPOSITORY", "example/ybs"),
    ];
    let args = format!("--var workdir={}", ybs.path().join("demo").display());
    let run = run_action(ybs.path(), &[("version", "v9.9.9"), ("args", &args)], &env);
    assert!(run.succeeded, "{}", run.log);
    assert_eq!(
        ran(&run),
        ["resolve", "install", "sandbox", "run", "finish"],
        "{}",
        run.log
    );
    let installed = tools.path().join("ybs/v9.9.9/x86_64-unknown-linux-musl");
    assert!(installed.join("ybs").is_file());
    assert!(
        run.log
            .contains(&format!("+ {}/ybs run", installed.display())),
        "{}",
        run.log
    );
    assert_eq!(run.outputs["status"], "passed");
    assert_eq!(run.outputs["passed"], "1");
    // The cache step was asked for this version and target.
    let (uses, with) = &run.used[0];
    assert!(uses.starts_with("actions/cache@"), "{uses}");
    assert_eq!(with["key"], "ybs-v9.9.9-x86_64-unknown-linux-musl");
    assert_eq!(with["path"], installed.display().to_string());
    // Later steps of the job find it on PATH.
    assert_eq!(run.github_path.trim(), installed.display().to_string());

    // install-only: installs into a fresh tool cache; nothing runs.
    let tools = tempfile::TempDir::new().unwrap();
    let tool_cache = tools.path().display().to_string();
    let mut only = env;
    only[3] = ("RUNNER_TOOL_CACHE", tool_cache.as_str());
    let run = run_action(
        ybs.path(),
        &[("version", "v9.9.9"), ("install-only", "true")],
        &only,
    );
    assert!(run.succeeded, "{}", run.log);
    assert_eq!(ran(&run), ["resolve", "install", "sandbox"], "{}", run.log);
    assert!(
        tools
            .path()
            .join("ybs/v9.9.9/x86_64-unknown-linux-musl/ybs")
            .is_file()
    );
    assert_eq!(run.outputs["status"], "");

    // A checksum that does not match: nothing installed, nothing run.
    let tools = tempfile::TempDir::new().unwrap();
    let url = fake_release(releases.path(), "v9.9.8", Some(&"ab".repeat(32)));
    let tool_cache = tools.path().display().to_string();
    let env = [
        ("YBS_DOWNLOAD_URL", url.as_str()),
        ("RUNNER_OS", "Linux"),
        ("RUNNER_ARCH", "X64"),
        ("RUNNER_TOOL_CACHE", tool_cache.as_str()),
        ("GITHUB_REPOSITORY", "example/ybs"),
    ];
    let run = run_action(ybs.path(), &[("version", "v9.9.8")], &env);
    assert!(!run.succeeded);
    assert_eq!(ran(&run), ["resolve", "install"], "{}", run.log);
    assert!(run.log.contains("checksum mismatch"), "{}", run.log);
    assert!(
        !tools
            .path()
            .join("ybs/v9.9.8/x86_64-unknown-linux-musl/ybs")
            .exists()
    );
    assert_eq!(run.outputs["status"], "");

    // A runner with no release binary is told so.
    let run = run_action(
        ybs.path(),
        &[("version", "v9.9.9")],
        &[
            ("RUNNER_OS", "Windows"),
            ("RUNNER_ARCH", "X64"),
            ("GITHUB_REPOSITORY", "example/ybs"),
        ],
    );
    assert_eq!(ran(&run), ["resolve"]);
    assert!(
        run.log.contains("no ybs release binary for Windows"),
        "{}",
        run.log
    );
}

/// actionlint: `YBS_ACTIONLINT` (set by .ci/run), else one on PATH. Under
/// CI (`CI` set) it must be there; elsewhere the lint is left to .ci/run.
fn actionlint() -> Option<String> {
    if let Ok(path) = std::env::var("YBS_ACTIONLINT") {
        return Some(path);
    }
    let found = Command::new("actionlint")
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("actionlint".to_owned());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but actionlint is not installed (.ci/run installs it)"
    );
    None
}

#[test]
fn action_yml_is_a_composite_action_with_the_promised_interface() {
    let action = action_yml();
    assert_eq!(action["runs"]["using"], "composite");
    assert!(action["name"].is_string() && action["description"].is_string());
    let inputs = action["inputs"].as_object().unwrap();
    for name in [
        "tasks",
        "args",
        "version",
        "provider",
        "model",
        "out",
        "ybs-binary",
        "upload-artifact",
    ] {
        assert!(inputs.contains_key(name), "input {name} missing");
    }
    for (name, input) in inputs {
        assert!(
            input["description"].is_string(),
            "input {name}: no description"
        );
        assert!(input["default"].is_string(), "input {name}: no default");
    }
    let outputs = action["outputs"].as_object().unwrap();
    for name in [
        "status", "passed", "failed", "errors", "paused", "skipped", "junit", "summary", "out",
        "output",
    ] {
        assert!(outputs.contains_key(name), "output {name} missing");
    }
    let steps = action["runs"]["steps"].as_array().unwrap();
    let ids: Vec<&str> = steps.iter().filter_map(|s| s["id"].as_str()).collect();
    let script = std::fs::read_to_string(repo_root().join(".github/action/run.sh")).unwrap();
    let text = std::fs::read_to_string(repo_root().join("action.yml")).unwrap();
    // Every expression names a declared input or an earlier step.
    for expression in text.split("${{").skip(1) {
        let inner = expression.split("}}").next().unwrap().trim();
        if let Some(name) = inner.strip_prefix("inputs.") {
            assert!(
                inputs.contains_key(name),
                "unknown input in ${{{{ {inner} }}}}"
            );
        } else if let Some(rest) = inner.strip_prefix("steps.") {
            let id = rest.split('.').next().unwrap();
            assert!(ids.contains(&id), "unknown step in ${{{{ {inner} }}}}");
        } else {
            assert!(
                inner.starts_with("github.action_"),
                "unexpected ${{{{ {inner} }}}}"
            );
        }
    }
    // Secrets come in through the caller's env:, never through inputs.
    assert!(!text.contains("secrets."));
    for step in steps {
        if let Some(uses) = step["uses"].as_str() {
            assert!(
                uses.starts_with("actions/") && uses.contains("@v"),
                "{uses}"
            );
            continue;
        }
        // Each run step is one phase of run.sh, given inputs through env:.
        let run = step["run"].as_str().unwrap();
        let phase = run
            .strip_prefix("sh \"$GITHUB_ACTION_PATH/.github/action/run.sh\" ")
            .unwrap_or_else(|| panic!("unexpected run: {run}"));
        assert!(
            script.contains(&format!("\n    {phase}) ")),
            "run.sh has no phase {phase}"
        );
        assert!(
            !run.contains("${{"),
            "expressions go through env:, not into the script"
        );
    }
}

#[test]
fn workflows_and_the_action_pass_actionlint() {
    let Some(actionlint) = actionlint() else {
        return;
    };
    let mut files: Vec<String> = ["docs/examples", ".github/workflows"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(repo_root().join(dir)).unwrap())
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "yml"))
        .map(|path| {
            path.strip_prefix(repo_root())
                .unwrap()
                .display()
                .to_string()
        })
        .collect();
    files.sort();
    assert!(files.iter().any(|f| f == ".github/workflows/release.yml"));
    assert!(files.iter().any(|f| f == ".github/workflows/ci.yml"));
    let output = Command::new(&actionlint)
        .arg("-oneline")
        .args(&files)
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "actionlint:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );

    // actionlint reads action.yml for a workflow's `uses: ./` (ci.yml has
    // one): an input the action does not declare is an error.
    let scratch = Ybs::new();
    scratch.file(
        "action.yml",
        &std::fs::read_to_string(repo_root().join("action.yml")).unwrap(),
    );
    scratch.file(
        ".github/workflows/use.yml",
        "on: push\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      \
         - uses: actions/checkout@v5\n      - uses: ./\n        with:\n          ybs-binry: x\n",
    );
    git(scratch.path(), &["init", "-q"]);
    let output = Command::new(&actionlint)
        .arg("-oneline")
        .current_dir(scratch.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(!output.status.success());
    assert!(stdout.contains("ybs-binry"), "{stdout}");
    assert_eq!(stdout.lines().count(), 1, "{stdout}");
}

#[test]
fn the_read_only_example_policy_refuses_writes_and_commands() {
    let ybs = Ybs::new();
    let policy = repo_root().join("docs/examples/read-only-policy.yaml");
    let policy = policy.to_str().unwrap();
    ybs.file("src.txt", "hello\n");
    ybs.file(
        "tasks/review.yaml",
        "version: 1\nprompt: Review src.txt.\npolicy:\n  allow: [read_file, write_file, run_shell]\n",
    );
    ybs.cassette(
        "tasks/review.cassette.json",
        vec![
            crate::support::cassette::calls(&[
                ("read_file", serde_json::json!({"path": "src.txt"})),
                (
                    "write_file",
                    serde_json::json!({"path": "src.txt", "content": "x"}),
                ),
                ("run_shell", serde_json::json!({"command": "ls"})),
            ]),
            crate::support::cassette::answer("Looks fine."),
        ],
    );
    ybs.run(["validate", "--policy", policy, "tasks/"])
        .expect_code(0);
    let run = ybs.run(["run", "--no-commit", "--policy", policy, "tasks/"]);
    run.expect_code(0);
    let transcript = run.json("ybs-out/review/transcript.json");
    let verdicts: Vec<&str> = transcript["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["decision"]["verdict"].as_str().unwrap())
        .collect();
    assert_eq!(verdicts, ["allow", "deny", "deny"]);
    assert_eq!(ybs.read("src.txt"), "hello\n");
}

/// The stand-ins of the Action's sandbox phase, each logging its arguments
/// to `$STANDIN_LOG`: `sysctl` (answers `$STANDIN_RESTRICT`), `sudo`
/// (refuses when `$STANDIN_SUDO` is `password`, else runs the command),
/// `install` (the real one without `-o`/`-g`, which need root),
/// `apparmor_parser`, and a ybs whose `sandbox check` finds namespaces
/// refused (exit 4) unless `$STANDIN_LAYERS` is `ok` or it runs from the
/// path the profile names.
fn sandbox_standins(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let missing = r#"{"ok":false,"layers":[{"layer":"namespaces","ok":false,"detail":"cannot write /proc/self/uid_map: Permission denied"},{"layer":"landlock","ok":true,"detail":"fully_enforced"},{"layer":"seccomp","ok":true,"detail":null}]}"#;
    let scripts = [
        (
            "sysctl",
            "printf 'sysctl %s\\n' \"$*\" >> \"$STANDIN_LOG\"\necho \"$STANDIN_RESTRICT\"\n"
                .to_owned(),
        ),
        (
            "sudo",
            "printf 'sudo %s\\n' \"$*\" >> \"$STANDIN_LOG\"\n[ \"$1\" = -n ] && shift\n\
             [ \"${STANDIN_SUDO-}\" = password ] && exit 1\nexec \"$@\"\n"
                .to_owned(),
        ),
        (
            "install",
            "n=$#\nskip=\nfor a do\n  if [ -n \"$skip\" ]; then skip=; continue; fi\n  \
             case $a in -o|-g) skip=1; continue ;; esac\n  set -- \"$@\" \"$a\"\ndone\n\
             shift \"$n\"\nexec /usr/bin/install \"$@\"\n"
                .to_owned(),
        ),
        (
            "apparmor_parser",
            "printf 'apparmor_parser %s\\n' \"$*\" >> \"$STANDIN_LOG\"\n[ -f \"$2\" ]\n".to_owned(),
        ),
        (
            "ybs",
            format!(
                "printf 'ybs %s\\n' \"$*\" >> \"$STANDIN_LOG\"\n\
                 case $0 in */usr/local/lib/ybs/ybs) echo 'namespaces ok'; exit 0 ;; esac\n\
                 [ \"${{STANDIN_LAYERS-}}\" = ok ] && exit 0\necho '{missing}'\nexit 4\n"
            ),
        ),
    ];
    for (name, body) in scripts {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// What one run of `run.sh sandbox` did.
struct SandboxPhase {
    log: String,
    outputs: BTreeMap<String, String>,
    github_path: String,
    stdout: String,
}

fn sandbox_phase(dir: &Path, env: &[(&str, &str)]) -> SandboxPhase {
    let bin = dir.join("bin");
    let root = dir.join("root");
    let log = dir.join("log");
    let output = dir.join("output");
    let github_path = dir.join("github_path");
    for file in [&log, &output, &github_path] {
        std::fs::write(file, "").unwrap();
    }
    // As on the runner: AppArmor's directory is there, ybs's is not.
    std::fs::create_dir_all(root.join("etc/apparmor.d")).unwrap();
    let mut command = Command::new("sh");
    command
        .arg(repo_root().join(".github/action/run.sh"))
        .arg("sandbox")
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .env("YBS_BINARY", bin.join("ybs"))
        .env("YBS_SANDBOX_ROOT", &root)
        .env("GITHUB_OUTPUT", &output)
        .env("GITHUB_PATH", &github_path)
        .env("STANDIN_LOG", &log)
        .env("STANDIN_RESTRICT", "1");
    for (key, value) in env {
        command.env(key, value);
    }
    let ran = command.output().unwrap();
    let stdout = format!(
        "{}{}",
        String::from_utf8_lossy(&ran.stdout),
        String::from_utf8_lossy(&ran.stderr)
    );
    assert!(ran.status.success(), "{stdout}");
    SandboxPhase {
        log: std::fs::read_to_string(&log).unwrap(),
        outputs: parse_outputs(&std::fs::read_to_string(&output).unwrap()),
        github_path: std::fs::read_to_string(&github_path).unwrap(),
        stdout,
    }
}

/// Issue 38, item 4: on a runner where AppArmor restricts user namespaces
/// and sudo needs no password (GitHub's ubuntu-24.04), the Action installs
/// ybs root-owned, loads a profile for that path alone and probes again;
/// it never turns the restriction off, and does nothing elsewhere.
#[test]
fn the_action_lets_its_own_ybs_make_user_namespaces_where_apparmor_restricts_them() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::TempDir::new().unwrap();
    std::fs::create_dir(dir.path().join("bin")).unwrap();
    sandbox_standins(&dir.path().join("bin"));
    let bin = dir.path().join("bin").display().to_string();
    let root = dir.path().join("root").display().to_string();

    let phase = sandbox_phase(dir.path(), &[]);
    let installed = format!("{root}/usr/local/lib/ybs/ybs");
    let profile = format!("{root}/etc/apparmor.d/ybs");
    assert_eq!(
        phase.log.lines().collect::<Vec<_>>(),
        [
            "ybs sandbox check --json".to_owned(),
            "sysctl -n kernel.apparmor_restrict_unprivileged_userns".to_owned(),
            "sudo -n true".to_owned(),
            format!("sudo -n install -D -o root -g root -m 0755 {bin}/ybs {installed}"),
            format!("sudo -n tee {profile}"),
            format!("sudo -n apparmor_parser -r {profile}"),
            format!("apparmor_parser -r {profile}"),
            "ybs sandbox check".to_owned(),
        ],
        "{}",
        phase.stdout
    );
    assert_eq!(
        std::fs::read_to_string(&profile).unwrap(),
        "abi <abi/4.0>,\ninclude <tunables/global>\n\nprofile ybs /usr/local/lib/ybs/ybs flags=(unconfined) {\n  userns,\n\n  include if exists <local/ybs>\n}\n"
    );
    let mode = std::fs::metadata(&installed).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
    assert_eq!(phase.outputs["binary"], installed);
    assert_eq!(
        phase.github_path.trim(),
        format!("{root}/usr/local/lib/ybs")
    );
    assert!(
        phase
            .stdout
            .contains("loaded the AppArmor profile /etc/apparmor.d/ybs"),
        "{}",
        phase.stdout
    );
    assert!(
        phase.stdout.contains("the sandbox works now"),
        "{}",
        phase.stdout
    );
    assert!(!phase.log.contains("-w"), "{}", phase.log);

    // Not restricted by AppArmor, sudo needs a password, every layer
    // works: nothing is installed and the binary stays what it was.
    for (env, says) in [
        (&[("STANDIN_RESTRICT", "0")][..], "not by AppArmor"),
        (&[("STANDIN_SUDO", "password")][..], "sudo needs a password"),
        (&[("STANDIN_LAYERS", "ok")][..], ""),
    ] {
        std::fs::remove_dir_all(&root).ok();
        let phase = sandbox_phase(dir.path(), env);
        assert_eq!(phase.outputs["binary"], format!("{bin}/ybs"), "{env:?}");
        assert!(phase.stdout.contains(says), "{env:?}: {}", phase.stdout);
        assert!(!phase.log.contains("install"), "{env:?}: {}", phase.log);
        assert!(!phase.log.contains("apparmor_parser"), "{}", phase.log);
        assert!(!phase.log.contains("-w"), "{}", phase.log);
        assert!(phase.github_path.is_empty());
        assert!(!Path::new(&installed).exists());
        assert!(!Path::new(&profile).exists());
    }
}
