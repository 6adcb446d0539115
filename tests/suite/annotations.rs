//! Annotations on the failing line (docs/ci.md#annotations-on-the-failing-line):
//! a failing check's output is read for `file:line[:col]` locations; under
//! GitHub Actions each one inside the repository becomes an
//! `::error file=…,line=…,col=…,title=<task>/<check>::…` line, and the
//! summary links it.

use serde_json::Value;

use super::git::Repo;
use crate::support::Ybs;
use crate::support::cassette::answer;

const SHA: &str = "0123456789abcdef0123456789abcdef01234567";
const CANARY: &str = "sk-canary-annotation-0f3a9c1e7b2d4455";

/// A repository whose task works in `sub/` and whose check prints
/// errors in several formats, inside and outside the repository, one
/// with an API key in its message.
fn scratch() -> Ybs {
    let ybs = Ybs::new().env("OPENAI_API_KEY", CANARY);
    ybs.file(
        "sub/check.sh",
        &format!(
            "echo 'warning: unused variable: `x`'\n\
             echo ' --> src/warn.rs:1:1'\n\
             echo 'error[E0308]: mismatched types'\n\
             echo ' --> src/lib.rs:3:5'\n\
             echo \"lib.c:7:2: error: uses {CANARY} here\"\n\
             echo 'web/app.ts(4,9): error TS2322: 50% wrong, really'\n\
             echo 'tests/test_x.py:12: AssertionError'\n\
             echo '../../outside.c:1:1: error: outside the repository'\n\
             echo '/etc/passwd:1: error: an absolute path outside'\n\
             exit 1\n"
        ),
    );
    ybs.file(
        "t.yaml",
        "prompt: do it\nworkdir: sub\ncommit: false\npolicy:\n  default: allow\nchecks:\n  - name: builds\n    run: sh check.sh\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    Repo::init(&ybs, "");
    ybs
}

fn github(ybs: Ybs) -> Ybs {
    ybs.env("GITHUB_ACTIONS", "true")
        .env("GITHUB_SERVER_URL", "https://github.com")
        .env("GITHUB_REPOSITORY", "octo/app")
        .env("GITHUB_SHA", SHA)
}

#[test]
fn under_github_actions_each_location_in_the_repository_is_an_error_annotation() {
    let ybs = github(scratch());
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let annotations: Vec<&str> = run
        .stdout
        .lines()
        .filter(|line| line.starts_with("::error file="))
        .collect();
    assert_eq!(
        annotations,
        [
            "::error file=sub/src/lib.rs,line=3,col=5,title=t/builds::error[E0308]: mismatched types",
            "::error file=sub/lib.c,line=7,col=2,title=t/builds::uses [REDACTED] here",
            "::error file=sub/web/app.ts,line=4,col=9,title=t/builds::error TS2322: 50%25 wrong, really",
            "::error file=sub/tests/test_x.py,line=12,title=t/builds::AssertionError",
        ],
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(CANARY));
    // The events and the transcript carry them, relative to the root.
    let transcript: Value = ybs.json("ybs-out/t/transcript.json");
    let locations = transcript["checks"][0]["locations"].as_array().unwrap();
    assert_eq!(locations.len(), 4);
    assert_eq!(locations[0]["file"], "sub/src/lib.rs");
    assert_eq!(locations[3]["column"], Value::Null);
    // The summary links each line at the commit the workflow checked out.
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains(&format!(
            "- [`sub/src/lib.rs:3:5`](https://github.com/octo/app/blob/{SHA}/sub/src/lib.rs#L3) error\\[E0308\\]: mismatched types (`builds`)"
        )),
        "{summary}"
    );
    assert!(summary.contains("`sub/tests/test_x.py:12`"), "{summary}");
    let listed = &summary[summary.find("Where the failing checks point:").unwrap()..];
    let listed = &listed[..listed.find("\n## ").unwrap_or(listed.len())];
    assert_eq!(listed.matches("\n- ").count(), 4, "{summary}");
    assert!(!listed.contains("outside"), "{summary}");
    assert!(!summary.contains(CANARY), "{summary}");
}

#[test]
fn outside_github_actions_the_summary_names_the_lines_and_nothing_is_annotated() {
    let ybs = scratch();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert!(!run.stdout.contains("::error"), "{}", run.stdout);
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains("- `sub/lib.c:7:2` uses \\[REDACTED\\] here (`builds`)"),
        "{summary}"
    );
    assert!(!summary.contains("https://"), "{summary}");
}
