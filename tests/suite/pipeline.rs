//! Into the pipeline (issue 15): the GitHub Action's script, the example
//! jobs under tasks/ replayed offline, shell completions, the man page and
//! `--version`.

use std::path::Path;
use std::process::Command;

use crate::support::Ybs;

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

/// A git command in `dir` with no user or system config.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
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
    let mut command = ybs.command();
    let output = command
        .current_dir(repo_root())
        .args(["validate", "tasks/"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.starts_with("ok: 7 files, 7 tasks valid"), "{stdout}");
    assert_eq!(stderr, "", "validate warned");
}
