//! Issue 10, git's part: commits hold what the task wrote (item 6),
//! `--allow-dirty` never loses work (7), `--dry-run` changes nothing (8),
//! no branch litter (14), interrupted runs report what happened (15).
//! The real binary, a scripted model, real repositories checked with `git`.

use serde_json::{Value, json};

use super::git::{Repo, for_task, git_note, task_yaml, transcript};
use crate::support::Ybs;
use crate::support::cassette::{answer, call, calls};

/// `t.yaml` (permissive policy plus `extra`) and its cassette, committed
/// with `files` in a repository at the scratch dir.
fn repo_with<'a>(
    ybs: &'a Ybs,
    files: &[(&str, &str)],
    extra: &str,
    cassette: Vec<Value>,
) -> Repo<'a> {
    for (path, content) in files {
        ybs.file(path, content);
    }
    ybs.file("t.yaml", &task_yaml(extra));
    ybs.cassette("t.cassette.json", cassette);
    Repo::init(ybs, "")
}

#[test]
fn rewriting_gitignore_commits_only_gitignore_never_the_users_ignored_secrets() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[
            (".gitignore", "ybs-out/\n.npmrc\ncreds.json\n"),
            ("a.txt", "a\n"),
        ],
        "",
        vec![
            call(
                "write_file",
                json!({"path": ".gitignore", "content": "ybs-out/\n"}),
            ),
            answer("tidied .gitignore"),
        ],
    );
    // The user's credentials, ignored, present before the run.
    let npmrc = "//registry.npmjs.org/:_authToken=npm_abcdefghijklmnopqrstuvwxyz0123456789\n";
    let creds = "{\"token\": \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\"}\n";
    repo.write(".npmrc", npmrc);
    repo.write("creds.json", creds);
    assert_eq!(repo.status(), Vec::<String>::new());

    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), [".gitignore"]);
    for path in [".npmrc", "creds.json"] {
        assert!(
            !repo
                .output(&["cat-file", "-e", &format!("HEAD:{path}")])
                .status
                .success(),
            "{path} is in the commit"
        );
    }
    assert_eq!(repo.read(".npmrc"), npmrc);
    assert_eq!(repo.read("creds.json"), creds);
    assert_eq!(repo.status(), ["?? .npmrc", "?? creds.json"]);
    let note = git_note(&transcript(&run, "t"));
    assert!(
        note.contains(".npmrc (ignored when the task started)")
            && note.contains("creds.json (ignored when the task started)"),
        "{note}"
    );
    repo.fsck();
}

#[test]
fn a_shell_command_deleting_gitignore_brings_nothing_old_in() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[(".gitignore", "*.key\n"), ("a.txt", "a\n")],
        "",
        vec![
            calls(&[
                ("run_shell", json!({"command": "rm .gitignore"})),
                ("write_file", json!({"path": "a.txt", "content": "A\n"})),
            ]),
            answer("done"),
        ],
    );
    repo.write("deploy.key", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n");
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), [".gitignore", "a.txt"]);
    assert_eq!(
        repo.git(&["show", "--name-status", "--format=", "HEAD"]),
        "D\t.gitignore\nM\ta.txt"
    );
    assert_eq!(repo.status(), ["?? deploy.key"]);
}

#[test]
fn sigint_reports_the_iterations_tokens_and_time_spent_so_far() {
    use crate::support::server::{Reply, Server};
    use crate::support::wire;
    use std::time::{Duration, Instant};

    let server = Server::start(vec![
        wire::ollama_call(&[(
            "write_file",
            json!({"path": "hello.txt", "content": "hi\n"}),
        )]),
        // The second answer takes a minute: the run is interrupted first.
        Reply::new(200, "application/x-ndjson").pause(Duration::from_secs(60)),
    ]);
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    let mut child = ybs
        .command()
        .args([
            "run",
            "t.yaml",
            "--provider",
            "ollama",
            "--endpoint",
            &server.url,
            "--model",
            "m",
            "--no-commit",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while server.requests().len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "the second request never came"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(child.wait().unwrap().code(), Some(130));
    assert!(started.elapsed() < Duration::from_secs(20));

    let transcript = ybs.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["reason"], "interrupted");
    assert!(
        transcript["iterations"].as_u64().unwrap() >= 1,
        "{transcript}"
    );
    assert_eq!(transcript["usage"]["input_tokens"], 100);
    assert_eq!(transcript["usage"]["output_tokens"], 20);
    assert!(transcript["timings"]["duration_ms"].as_u64().unwrap() >= 200);
    let message = transcript["message"].as_str().unwrap();
    assert!(
        message.starts_with("interrupted by SIGINT after 1 iteration, 120 tokens"),
        "{message}"
    );

    let junit = ybs.read("ybs-out/junit.xml");
    let failure = junit
        .lines()
        .find(|line| line.contains("<failure"))
        .unwrap_or_else(|| panic!("no <failure> in {junit}"));
    assert!(
        failure.contains("message=\"interrupted: interrupted by SIGINT after 1 iteration"),
        "{failure}"
    );
    assert!(
        junit.contains("<property name=\"iterations\" value=\"1\"/>"),
        "{junit}"
    );
    assert!(
        junit.contains("<property name=\"input_tokens\" value=\"100\"/>"),
        "{junit}"
    );
    assert!(
        !junit.contains("<property name=\"duration_ms\" value=\"0\"/>"),
        "{junit}"
    );

    let summary = ybs.read("ybs-out/summary.md");
    let row = summary
        .lines()
        .find(|line| line.starts_with("| t |"))
        .unwrap_or_else(|| panic!("no row for t in {summary}"));
    assert!(row.contains("| interrupted | 1 | 120 |"), "{row}");
}

#[test]
fn jobs_over_tasks_that_change_nothing_leave_no_branch_and_no_worktree() {
    let ybs = Ybs::new();
    let quiet = ["q1", "q2", "q3", "q4", "q5"];
    let mut yaml =
        "defaults:\n  model: test-model\n  policy:\n    default: allow\ntasks:\n".to_owned();
    for id in quiet {
        yaml.push_str(&format!("  - id: {id}\n    prompt: look at {id}\n"));
    }
    yaml.push_str("  - id: writer\n    prompt: write\n");
    yaml.push_str("  - id: failing\n    prompt: fail\n    checks: [{run: \"false\"}]\n");
    ybs.file("t.yaml", &yaml);
    let mut cassette: Vec<Value> = quiet
        .iter()
        .map(|id| for_task(id, answer("nothing to change")))
        .collect();
    cassette.push(for_task(
        "writer",
        call("write_file", json!({"path": "w.txt", "content": "w\n"})),
    ));
    cassette.push(for_task("writer", answer("wrote w.txt")));
    cassette.push(for_task("failing", answer("nothing done")));
    ybs.cassette("t.cassette.json", cassette);
    let repo = Repo::init(&ybs, "");
    let run = ybs.run(["run", "t.yaml", "--jobs", "3"]);
    run.expect_code(1);
    let run_id = super::git::run_id(&transcript(&run, "writer"));

    let branches = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    assert_eq!(
        branches,
        format!("ybs/{run_id}/writer"),
        "only the commit's branch"
    );
    assert_eq!(repo.files_of(&format!("ybs/{run_id}/writer")), ["w.txt"]);
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(
        listed
            .lines()
            .filter(|l| l.starts_with("worktree "))
            .count(),
        1,
        "{listed}"
    );
    assert!(
        !ybs.exists(&format!(".ybs-worktrees/{run_id}")),
        "worktree directories left"
    );
    for id in quiet.iter().chain(&["failing"]) {
        let note = git_note(&transcript(&run, id));
        assert!(
            note.contains(&format!("worktree and branch ybs/{run_id}/{id} removed")),
            "{id}: {note}"
        );
    }
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

/// Every ref with what it points at: `git for-each-ref` output.
fn refs(repo: &Repo<'_>) -> String {
    repo.git(&["for-each-ref", "--format=%(refname) %(objectname)"])
}

#[test]
fn dry_run_runs_no_command_commits_nothing_and_says_so_everywhere() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[("a.txt", "a\n")],
        "checks:\n  - name: rewrite\n    run: echo checked > a.txt && touch check.marker\n",
        vec![
            calls(&[
                ("write_file", json!({"path": "a.txt", "content": "A\n"})),
                ("run_shell", json!({"command": "touch shell.marker"})),
            ]),
            answer("Rewrote a.txt"),
        ],
    );
    // An operator tool without a sidecar: discovery would run `--schema`.
    let marker = ybs.path().join("schema.marker");
    let tool = ybs.home().join(".ybs/tools/probe");
    std::fs::create_dir_all(tool.parent().unwrap()).unwrap();
    std::fs::write(
        &tool,
        format!("#!/bin/sh\ntouch '{}'\necho '{{}}'\n", marker.display()),
    )
    .unwrap();
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    // A dirty tree does not stop a dry run: it changes nothing.
    repo.write("notes.txt", "the user's notes\n");
    let head = repo.head();
    let before = refs(&repo);
    let index = std::fs::read(ybs.path().join(".git/index")).unwrap();

    for jobs in ["1", "2"] {
        let run = ybs.run(["run", "t.yaml", "--dry-run", "--jobs", jobs, "--no-sandbox"]);
        run.expect_code(0);
        for marker in ["check.marker", "shell.marker", "schema.marker"] {
            assert!(!ybs.exists(marker), "{marker}: a command ran");
        }
        assert_eq!(repo.read("a.txt"), "a\n");
        assert_eq!(repo.head(), head);
        assert_eq!(refs(&repo), before, "no ref moved or appeared");
        assert_eq!(std::fs::read(ybs.path().join(".git/index")).unwrap(), index);
        assert_eq!(repo.status(), ["?? notes.txt"]);
        assert!(!ybs.exists(".ybs-worktrees"), "no worktree");

        let transcript = transcript(&run, "t");
        assert_eq!(transcript["manifest"]["dry_run"], true);
        assert!(transcript["git"]["commit"].is_null());
        assert!(
            git_note(&transcript).starts_with("not committed (--dry-run)"),
            "{transcript}"
        );
        let message = transcript["message"].as_str().unwrap();
        assert!(
            message.starts_with("dry run: tool calls were decided and recorded, not executed; the check did not run; nothing was committed"),
            "{message}"
        );
        assert!(transcript["checks"].as_array().unwrap().is_empty());
        assert!(
            transcript["tool_calls"]
                .as_array()
                .unwrap()
                .iter()
                .all(|call| call["result"]["ran"] == false)
        );
        let summary = ybs.read("ybs-out/summary.md");
        assert!(summary.contains("**Dry run**"), "{summary}");
        let junit = ybs.read("ybs-out/junit.xml");
        assert!(
            junit.contains("<property name=\"dry_run\" value=\"true\"/>")
                && junit.contains("dry run: tool calls were decided"),
            "{junit}"
        );
        assert!(run.stdout.contains("dry run"), "{}", run.stdout);
        assert!(
            run.stdout
                .contains("(dry run: nothing was executed or committed)")
                || run
                    .stderr
                    .contains("(dry run: nothing was executed or committed)"),
            "{}{}",
            run.stdout,
            run.stderr
        );
    }
    // Outside a dry run the operator's tool is asked for its schema: the
    // marker above could appear.
    ybs.run(["tools", "list"]).expect_code(0);
    assert!(ybs.exists("schema.marker"));
}

#[test]
fn allow_dirty_saves_the_users_work_and_the_file_tools_leave_it_alone() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[("a.txt", "a\n"), ("b.txt", "b\n"), ("gone.txt", "g\n")],
        "",
        vec![
            calls(&[
                (
                    "write_file",
                    json!({"path": "a.txt", "content": "the model's version\n"}),
                ),
                (
                    "edit_file",
                    json!({"path": "./notes.txt", "old_text": "notes", "new_text": "NOTES"}),
                ),
                ("write_file", json!({"path": "b.txt", "content": "B\n"})),
            ]),
            answer("done"),
        ],
    );
    let base = repo.head();
    repo.write("a.txt", "the user's work\n");
    repo.write("notes.txt", "the user's notes\n");
    std::fs::remove_file(ybs.path().join("gone.txt")).unwrap();
    let run = ybs.run(["run", "t.yaml", "--allow-dirty"]);
    run.expect_code(0);

    // The user's files are as the user left them.
    assert_eq!(repo.read("a.txt"), "the user's work\n");
    assert_eq!(repo.read("notes.txt"), "the user's notes\n");
    // The model was told to leave them alone; its other write went through.
    let transcript = transcript(&run, "t");
    let calls = transcript["tool_calls"].as_array().unwrap();
    for call in &calls[..2] {
        assert_eq!(call["decision"]["rule"], "guard:user_changes", "{call}");
        assert_eq!(call["result"]["ran"], false);
        let output = call["result"]["output"].as_str().unwrap();
        assert!(
            output.contains("the user's uncommitted changes") && output.contains("leave it alone"),
            "{output}"
        );
    }
    assert_eq!(repo.files_of("HEAD"), ["b.txt"]);
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]), base);

    // The saved ref: HEAD's tree plus the user's work, HEAD as parent.
    let run_id = super::git::run_id(&transcript);
    let saved = format!("refs/ybs/saved/{run_id}");
    assert_eq!(repo.git(&["rev-parse", &format!("{saved}^")]), base);
    assert_eq!(
        repo.git(&["show", &format!("{saved}:a.txt")]),
        "the user's work"
    );
    assert_eq!(
        repo.git(&["show", &format!("{saved}:notes.txt")]),
        "the user's notes"
    );
    assert_eq!(
        repo.git(&["show", "--name-status", "--format=", &saved]),
        "M\ta.txt\nD\tgone.txt\nA\tnotes.txt"
    );
    let sha = repo.git(&["rev-parse", &saved]);
    // Named in the console, the summary and the transcript.
    let named = format!("saved as {} on {saved}", &sha[..7]);
    assert!(run.stderr.contains(&named), "{}", run.stderr);
    assert!(ybs.read("ybs-out/summary.md").contains(&named));
    assert!(git_note(&transcript).contains(&named));
    // HEAD, index and work tree untouched by the save.
    assert_eq!(repo.status(), [" M a.txt", " D gone.txt", "?? notes.txt"]);
    repo.fsck();
}

#[test]
fn without_allow_dirty_or_in_a_dry_run_nothing_is_saved() {
    let ybs = Ybs::new();
    let repo = repo_with(&ybs, &[("a.txt", "a\n")], "", vec![answer("ok")]);
    repo.write("a.txt", "the user's work\n");
    ybs.run(["run", "t.yaml", "--allow-dirty", "--dry-run"])
        .expect_code(0);
    ybs.run(["run", "t.yaml", "--no-commit"]).expect_code(0);
    assert_eq!(repo.git(&["for-each-ref", "refs/ybs"]), "");
}

const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

#[test]
fn a_credential_in_a_file_to_commit_fails_the_task_and_commits_nothing() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[("a.txt", "a\n")],
        "",
        vec![
            calls(&[
                ("write_file", json!({"path": "a.txt", "content": "A\n"})),
                (
                    "write_file",
                    json!({"path": "config/token.txt", "content": format!("token={TOKEN}\n")}),
                ),
            ]),
            answer("configured the token"),
        ],
    );
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(repo.head(), base, "nothing committed");
    assert_eq!(repo.read("config/token.txt"), format!("token={TOKEN}\n"));
    assert_eq!(repo.status(), [" M a.txt", "?? config/token.txt"]);
    let transcript = transcript(&run, "t");
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "secret_in_commit");
    let message = transcript["message"].as_str().unwrap();
    assert!(
        message.contains("config/token.txt (github_token)")
            && message.contains("git.allow_secret_paths"),
        "{message}"
    );
    assert!(!message.contains(TOKEN));
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains("type=\"secret_in_commit\"") && junit.contains("config/token.txt"),
        "{junit}"
    );
    assert!(ybs.read("ybs-out/summary.md").contains("secret_in_commit"));
    repo.fsck();
}

#[test]
fn the_operator_may_allow_paths_and_the_repository_may_not() {
    let ybs = Ybs::new();
    let repo = repo_with(
        &ybs,
        &[("a.txt", "a\n")],
        "",
        vec![
            call(
                "write_file",
                json!({"path": "fixtures/fake-token.txt", "content": format!("{TOKEN}\n")}),
            ),
            answer("added a test fixture"),
        ],
    );
    let operator = ybs.home().join("operator.json");
    std::fs::write(
        &operator,
        r#"{"git": {"allow_secret_paths": ["fixtures/**"]}}"#,
    )
    .unwrap();
    let run = ybs.run(["run", "t.yaml", "--config", operator.to_str().unwrap()]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), ["fixtures/fake-token.txt"]);

    ybs.file(
        ".ybs.json",
        "{\n  \"git\": {\"allow_secret_paths\": [\"**\"]}\n}\n",
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains(".ybs.json:2:")
            && run
                .stderr
                .contains("`git.allow_secret_paths` cannot be set in the repository's config"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();
    std::fs::write(&operator, r#"{"git": {"allow_secret_paths": ["a["]}}"#).unwrap();
    let run = ybs.run(["validate", "t.yaml", "--config", operator.to_str().unwrap()]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("operator.json:1:") && run.stderr.contains("`a[` is not a valid glob"),
        "{}",
        run.stderr
    );
}
