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
