//! Issue 10, git's part: commits hold what the task wrote (item 6),
//! `--allow-dirty` never loses work (7), `--dry-run` changes nothing (8),
//! no branch litter (14), interrupted runs report what happened (15).
//! The real binary, a scripted model, real repositories checked with `git`.

use serde_json::{Value, json};

use super::git::{Repo, git_note, task_yaml, transcript};
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
