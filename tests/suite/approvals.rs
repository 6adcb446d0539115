//! The approvals view shows what each pending call would do, masked: the
//! paused line, the summary and `ybs resume --approve`'s own output
//! (issue 34, item 5).

use serde_json::json;

use crate::support::Ybs;
use crate::support::cassette::{answer, call};

const SECRET: &str = "otp-7f3a9c1e5b2d4a60";

#[test]
fn a_pending_approval_shows_its_masked_command() {
    let ybs = Ybs::new().env("NPM_TOKEN_API_KEY", SECRET);
    ybs.file(
        "t.yaml",
        "id: t\nprompt: Publish.\ncommit: false\npolicy:\n  allow: [read_file]\n  ask: [\"run_shell(npm publish*)\"]\n  on_ask: pause\n",
    );
    let command = format!("npm publish --dry-run --otp {SECRET} || echo fallback");
    let first = ybs.home().join("c1.json");
    let second = ybs.home().join("c2.json");
    let write = |path: &std::path::Path, interactions| {
        let text = json!({"version": 1, "interactions": interactions}).to_string();
        std::fs::write(path, text).unwrap();
    };
    write(
        &first,
        vec![call("run_shell", json!({ "command": command }))],
    );
    write(&second, vec![answer("done")]);
    let run = ybs.run(["run", "t.yaml", "--cassette", first.to_str().unwrap()]);
    run.expect_code(3);
    let shown = "run_shell `npm publish --dry-run --otp ";
    let printed = format!("{}{}", run.stdout, run.stderr);
    assert!(printed.contains(shown), "{printed}");
    assert!(
        printed.contains("|| echo fallback` (approval)"),
        "{printed}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains(shown), "{summary}");
    assert!(summary.contains("|| echo fallback"), "{summary}");
    for text in [&printed, &summary] {
        assert!(!text.contains(SECRET), "unmasked:\n{text}");
    }
    let run = ybs.run([
        "resume",
        "ybs-out",
        "--approve",
        "all",
        "--cassette",
        second.to_str().unwrap(),
    ]);
    run.expect_code(0);
    let approving = run
        .stderr
        .lines()
        .find(|line| line.starts_with("approving"))
        .unwrap_or_else(|| panic!("{}", run.stderr));
    assert!(
        approving.contains("npm publish --dry-run --otp "),
        "{approving}"
    );
    assert!(approving.contains("|| echo fallback"), "{approving}");
    assert!(!run.stderr.contains(SECRET), "{}", run.stderr);
}
