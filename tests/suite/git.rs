//! Git end to end (issue 5, docs/git.md, docs/security.md S12): the real binary on
//! real repositories in temp dirs, each checked afterwards with `git`
//! itself (`git log`, `git show`, `git status --porcelain`, `git fsck`).
//!
//! Unless a test says otherwise the repository is the directory ybs runs
//! in, with the task file and its cassette committed, and `ybs-out/` is
//! deliberately not ignored: ybs's own outputs must never be part of a
//! dirty check or a commit.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

use crate::support::cassette::{answer, call, calls};
use crate::support::{Run, Ybs};

/// A repository inside a `Ybs` scratch dir, driven with the `git` CLI
/// under the same isolation as the `ybs` under test.
pub(super) struct Repo<'a> {
    ybs: &'a Ybs,
    root: PathBuf,
}

impl<'a> Repo<'a> {
    /// `git init` on `main` in `relative` (`""`: the scratch dir itself)
    /// with a local identity, no commit yet.
    pub(super) fn empty(ybs: &'a Ybs, relative: &str) -> Self {
        let root = ybs.path().join(relative);
        std::fs::create_dir_all(&root).unwrap();
        let repo = Self { ybs, root };
        repo.git(&["init", "-q", "-b", "main"]);
        repo.git(&["config", "user.name", "Test User"]);
        repo.git(&["config", "user.email", "test@example.com"]);
        repo
    }

    /// An empty repository, then one commit of everything in it.
    pub(super) fn init(ybs: &'a Ybs, relative: &str) -> Self {
        let repo = Self::empty(ybs, relative);
        repo.commit_all("initial");
        repo
    }

    pub(super) fn commit_all(&self, message: &str) {
        self.git(&["add", "-A"]);
        self.git(&["commit", "-q", "-m", message]);
    }

    pub(super) fn output(&self, args: &[&str]) -> Output {
        Command::new("git")
            .args(args)
            .current_dir(&self.root)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", self.ybs.home())
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_TERMINAL_PROMPT", "0")
            .output()
            .unwrap()
    }

    /// Runs `git`, panics on failure, returns stdout trimmed.
    pub(super) fn git(&self, args: &[&str]) -> String {
        let output = self.output(args);
        assert!(
            output.status.success(),
            "git {args:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8(output.stdout)
            .unwrap()
            .trim_end()
            .to_owned()
    }

    pub(super) fn head(&self) -> String {
        self.git(&["rev-parse", "HEAD"])
    }

    pub(super) fn commit_count(&self) -> usize {
        self.git(&["rev-list", "--count", "HEAD"]).parse().unwrap()
    }

    /// The paths a commit changed, sorted, as `git show --name-only`.
    pub(super) fn files_of(&self, rev: &str) -> Vec<String> {
        let mut files: Vec<String> = self
            .git(&["show", "--name-only", "--format=", rev])
            .lines()
            .map(str::to_owned)
            .collect();
        files.sort();
        files
    }

    pub(super) fn subject(&self, rev: &str) -> String {
        self.git(&["log", "-1", "--format=%s", rev])
    }

    fn trailer(&self, rev: &str, key: &str) -> String {
        self.git(&[
            "log",
            "-1",
            &format!("--format=%(trailers:key={key},valueonly)"),
            rev,
        ])
    }

    /// `git status --porcelain` lines, ybs's own outputs left out.
    pub(super) fn status(&self) -> Vec<String> {
        self.git(&["status", "--porcelain", "--untracked-files=all"])
            .lines()
            .filter(|line| !line.contains("ybs-out/"))
            .map(str::to_owned)
            .collect()
    }

    /// `git fsck --strict` finds nothing wrong.
    pub(super) fn fsck(&self) {
        let output = self.output(&["fsck", "--strict", "--no-progress"]);
        assert!(
            output.status.success(),
            "git fsck failed: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
    }

    pub(super) fn write(&self, relative: &str, content: &str) {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    pub(super) fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root.join(relative)).unwrap()
    }

    fn index_bytes(&self) -> Vec<u8> {
        std::fs::read(self.root.join(".git/index")).unwrap_or_default()
    }
}

/// A one-task file with a permissive policy and the given extra YAML.
pub(super) fn task_yaml(extra: &str) -> String {
    format!("prompt: do the thing\nmodel: test-model\npolicy:\n  default: allow\n{extra}")
}

/// The model writes `a.txt` and edits `b.txt` in one turn, then answers.
fn edit_two_files() -> Vec<Value> {
    vec![
        calls(&[
            ("write_file", json!({"path": "a.txt", "content": "A\n"})),
            (
                "edit_file",
                json!({"path": "b.txt", "old_text": "b", "new_text": "B"}),
            ),
        ]),
        answer("Edited both files\n\nA longer explanation."),
    ]
}

/// `a.txt`, `b.txt` and `t.yaml` with `extra`, plus `t.cassette.json`,
/// committed in a repository at the scratch dir.
fn two_file_repo<'a>(ybs: &'a Ybs, extra: &str, cassette: Vec<Value>) -> Repo<'a> {
    ybs.file("a.txt", "a\n");
    ybs.file("b.txt", "b\n");
    ybs.file("t.yaml", &task_yaml(extra));
    ybs.cassette("t.cassette.json", cassette);
    Repo::init(ybs, "")
}

/// Marks an interaction as answering task `task` only.
pub(super) fn for_task(task: &str, mut interaction: Value) -> Value {
    interaction["task"] = json!(task);
    interaction
}

pub(super) fn transcript(run: &Run, task: &str) -> Value {
    run.json(&format!("ybs-out/{task}/transcript.json"))
}

pub(super) fn git_note(transcript: &Value) -> String {
    transcript["git"]["note"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

pub(super) fn run_id(transcript: &Value) -> String {
    transcript["manifest"]["run_id"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[test]
fn a_task_editing_two_files_yields_one_commit_of_exactly_those_files() {
    let ybs = Ybs::new();
    let repo = two_file_repo(
        &ybs,
        "checks:\n  - name: edited\n    run: grep -q A a.txt\n",
        edit_two_files(),
    );
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);

    assert_eq!(repo.commit_count(), 2);
    let head = repo.head();
    assert_eq!(
        repo.git(&["rev-parse", "HEAD^"]),
        base,
        "HEAD advanced by one"
    );
    assert_eq!(repo.files_of("HEAD"), ["a.txt", "b.txt"]);
    assert_eq!(repo.subject("HEAD"), "[ybs] t: Edited both files");
    let body = repo.git(&["log", "-1", "--format=%b", "HEAD"]);
    assert!(body.contains("A longer explanation."), "{body}");
    let transcript = transcript(&run, "t");
    assert_eq!(repo.trailer("HEAD", "Ybs-Task"), "t");
    assert_eq!(repo.trailer("HEAD", "Ybs-Run"), run_id(&transcript));
    assert_eq!(repo.trailer("HEAD", "Ybs-Model"), "test-model");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "Test User <test@example.com>|Test User <test@example.com>"
    );
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(repo.read("a.txt"), "A\n");
    assert_eq!(repo.read("b.txt"), "B\n");
    assert_eq!(repo.status(), Vec::<String>::new(), "work tree clean");
    // ybs's outputs are neither committed nor even untracked noise: the
    // out dir carries a `.gitignore` of `*`.
    assert_eq!(
        repo.git(&["status", "--porcelain", "--ignored", "--", "ybs-out"]),
        "!! ybs-out/"
    );
    repo.fsck();

    assert_eq!(transcript["git"]["commit"], head);
    assert_eq!(transcript["git"]["branch"], "main");
    assert_eq!(transcript["git"]["files"], json!(["a.txt", "b.txt"]));
    assert_eq!(transcript["manifest"]["base_commit"], base);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains(&format!("<property name=\"commit\" value=\"{head}\"/>")),
        "{junit}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains(&head[..12]), "{summary}");
    assert!(
        summary.contains(&format!("committed 2 files as {}", &head[..7])),
        "{summary}"
    );
    let events = run.events("t");
    let git_event = events.iter().find(|e| e["type"] == "git").unwrap();
    assert_eq!(git_event["outcome"]["commit"], head);
}

#[test]
fn a_second_run_is_not_blocked_by_the_outputs_of_the_first() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    ybs.run(["run", "t.yaml"]).expect_code(0);
    let first = repo.head();
    // The same script again: a.txt is rewritten unchanged, the edit of b.txt
    // fails (no `b` left), so there is nothing to commit.
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.head(), first);
    let note = git_note(&transcript(&run, "t"));
    assert!(note.starts_with("nothing to commit"), "{note}");
    assert!(!repo.files_of("HEAD").iter().any(|f| f.contains("ybs-out")));
    repo.fsck();
}

#[test]
fn the_commit_message_comes_from_the_task_file_when_given() {
    let ybs = Ybs::new();
    let repo = two_file_repo(
        &ybs,
        "commit: { message: \"refactor: rename things\" }\n",
        edit_two_files(),
    );
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(repo.subject("HEAD"), "[ybs] t: refactor: rename things");
}

#[test]
fn a_configured_prefix_replaces_ybs_in_the_subject() {
    let ybs = Ybs::new();
    ybs.file(
        ".ybs.json",
        r#"{"git": {"commit_message_prefix": "[bot]"}}"#,
    );
    let repo = two_file_repo(&ybs, "", edit_two_files());
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(repo.subject("HEAD"), "[bot] t: Edited both files");
}

#[test]
fn a_dirty_tree_is_a_usage_error_and_nothing_changes() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let base = repo.head();
    repo.write("a.txt", "the user's work\n");
    repo.write("notes.txt", "untracked\n");
    let index = repo.index_bytes();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("uncommitted changes")
            && run.stderr.contains("a.txt (modified)")
            && run.stderr.contains("notes.txt (untracked)"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint:") && run.stderr.contains("--allow-dirty"));
    assert!(!ybs.exists("ybs-out"), "nothing ran, nothing was written");
    assert_eq!(repo.index_bytes(), index);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.read("a.txt"), "the user's work\n");
    assert_eq!(repo.read("b.txt"), "b\n");
    assert_eq!(repo.status(), [" M a.txt", "?? notes.txt"]);
    repo.fsck();
}

#[test]
fn a_staged_change_counts_as_dirty() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    repo.write("c.txt", "staged\n");
    repo.git(&["add", "c.txt"]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("c.txt (added)"), "{}", run.stderr);
}

#[test]
fn allow_dirty_keeps_the_users_changes_out_of_the_commit() {
    let ybs = Ybs::new();
    ybs.file("c.txt", "c\n");
    let repo = two_file_repo(
        &ybs,
        "",
        vec![
            calls(&[
                ("write_file", json!({"path": "b.txt", "content": "B\n"})),
                ("write_file", json!({"path": "new.txt", "content": "new\n"})),
            ]),
            answer("done"),
        ],
    );
    repo.write("a.txt", "the user's work\n");
    repo.write("c.txt", "staged by the user\n");
    repo.git(&["add", "c.txt"]);
    repo.write("notes.txt", "untracked notes\n");
    let run = ybs.run(["run", "t.yaml", "--allow-dirty"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), ["b.txt", "new.txt"]);
    assert_eq!(repo.read("a.txt"), "the user's work\n");
    assert_eq!(
        repo.status(),
        [" M a.txt", "M  c.txt", "?? notes.txt"],
        "the user's changes stay exactly as they were, staged or not"
    );
    assert_eq!(
        repo.git(&["show", "HEAD:c.txt"]),
        "c",
        "the staged change is not in the commit"
    );
    repo.fsck();
}

#[test]
fn allow_dirty_never_commits_a_file_the_user_had_changed_even_if_the_task_edits_it() {
    let ybs = Ybs::new();
    // The file tools may not touch the user's file (see git_trust.rs); a
    // shell command can, and its change still stays out of the commit.
    let repo = two_file_repo(
        &ybs,
        "",
        vec![
            calls(&[
                ("run_shell", json!({"command": "echo A > a.txt"})),
                (
                    "edit_file",
                    json!({"path": "b.txt", "old_text": "b", "new_text": "B"}),
                ),
            ]),
            answer("Edited both files"),
        ],
    );
    repo.write("a.txt", "the user's work\n");
    let run = ybs.run(["run", "t.yaml", "--allow-dirty"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), ["b.txt"]);
    assert_eq!(repo.read("a.txt"), "A\n", "the task's edit stays in place");
    assert_eq!(repo.status(), [" M a.txt"]);
    let note = git_note(&transcript(&run, "t"));
    assert!(
        note.contains("not committed") && note.contains("a.txt"),
        "{note}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains("not committed because they already had uncommitted changes when the task started: a.txt"),
        "{summary}"
    );
}

#[test]
fn detached_head_advances_and_gets_a_run_branch() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let base = repo.head();
    repo.git(&["checkout", "-q", "--detach"]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let transcript = transcript(&run, "t");
    let run_id = run_id(&transcript);
    let head = repo.head();
    assert_ne!(head, base);
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]), base);
    assert!(
        !repo
            .output(&["symbolic-ref", "-q", "HEAD"])
            .status
            .success(),
        "HEAD stays detached"
    );
    let branch = format!("ybs/{run_id}");
    assert_eq!(
        repo.git(&["rev-parse", &format!("refs/heads/{branch}")]),
        head
    );
    assert_eq!(repo.git(&["rev-parse", "main"]), base, "main is untouched");
    assert_eq!(repo.files_of("HEAD"), ["a.txt", "b.txt"]);
    assert_eq!(transcript["git"]["branch"], branch);
    assert_eq!(transcript["git"]["commit"], head);
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn an_unborn_branch_gets_its_first_commit() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml("workdir: repo\n"));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "write_file",
                json!({"path": "hello.txt", "content": "hi\n"}),
            ),
            answer("first file"),
        ],
    );
    let repo = Repo::empty(&ybs, "repo");
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(repo.git(&["log", "-1", "--format=%P"]), "", "a root commit");
    assert_eq!(repo.files_of("HEAD"), ["hello.txt"]);
    assert_eq!(repo.subject("HEAD"), "[ybs] t: first file");
    let transcript = transcript(&run, "t");
    assert!(
        git_note(&transcript).contains("its first commit"),
        "{transcript}"
    );
    assert!(transcript["manifest"]["base_commit"].is_null());
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn an_empty_repository_with_the_task_file_inside_is_dirty() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml(""));
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    let repo = Repo::empty(&ybs, "");
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("t.yaml (untracked)"), "{}", run.stderr);
    assert!(!repo.output(&["rev-parse", "HEAD"]).status.success());
}

#[test]
fn no_repository_commits_nothing_and_the_task_still_passes_or_fails_on_its_checks() {
    let ybs = Ybs::new();
    ybs.file("a.txt", "a\n");
    ybs.file("b.txt", "b\n");
    ybs.file("t.yaml", &task_yaml("checks:\n  - run: grep -q A a.txt\n"));
    ybs.cassette("t.cassette.json", edit_two_files());
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists(".git"));
    assert_eq!(ybs.read("a.txt"), "A\n");
    let transcript = transcript(&run, "t");
    assert_eq!(transcript["status"], "passed");
    assert!(transcript["git"]["commit"].is_null());
    let note = git_note(&transcript);
    assert!(note.contains("not in a git repository"), "{note}");
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains("not in a git repository"), "{summary}");

    let ybs = Ybs::new();
    ybs.file("a.txt", "a\n");
    ybs.file("t.yaml", &task_yaml("checks:\n  - run: grep -q Z a.txt\n"));
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(transcript_of(&run)["reason"], "checks_failed");
}

fn transcript_of(run: &Run) -> Value {
    transcript(run, "t")
}

#[test]
fn a_locked_index_at_start_is_a_usage_error_and_nothing_changes() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let base = repo.head();
    repo.write(".git/index.lock", "");
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("index.lock"), "{}", run.stderr);
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
    assert!(!ybs.exists("ybs-out"));
    assert_eq!(repo.read("a.txt"), "a\n");
    std::fs::remove_file(repo.root.join(".git/index.lock")).unwrap();
    assert_eq!(repo.head(), base);
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn an_index_locked_during_the_task_is_a_git_error_and_the_changes_stay() {
    let ybs = Ybs::new();
    // The check takes the lock after the agent has edited the files, as a
    // concurrent git process would.
    let repo = two_file_repo(
        &ybs,
        "checks:\n  - name: lock\n    run: touch .git/index.lock\n",
        edit_two_files(),
    );
    let base = repo.head();
    let index = repo.index_bytes();
    // The check plays a concurrent git process, which a sandboxed check
    // cannot be (`.git` is read-only inside): the sandbox is lifted.
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(4);
    let transcript = transcript(&run, "t");
    assert_eq!(transcript["status"], "error");
    assert_eq!(transcript["reason"], "git_error");
    let message = transcript["message"].as_str().unwrap();
    assert!(
        message.contains("index.lock") && message.contains("left in the work tree"),
        "{message}"
    );
    assert!(transcript["git"]["commit"].is_null());
    assert_eq!(repo.index_bytes(), index, "the index was not written");
    assert!(ybs.read("ybs-out/junit.xml").contains("git_error"));
    std::fs::remove_file(repo.root.join(".git/index.lock")).unwrap();
    assert_eq!(repo.head(), base, "no half-made commit");
    assert_eq!(repo.status(), [" M a.txt", " M b.txt"]);
    assert_eq!(repo.read("a.txt"), "A\n");
    repo.fsck();
}

#[test]
fn a_missing_identity_commits_as_ybs_and_says_so() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    repo.git(&["config", "--unset", "user.name"]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "ybs <ybs@localhost>|ybs <ybs@localhost>"
    );
    let note = git_note(&transcript(&run, "t"));
    assert!(
        note.contains("ybs <ybs@localhost>") && note.contains("YBS_GIT_AUTHOR"),
        "{note}"
    );
    let summary = ybs.read("ybs-out/summary.md");
    assert!(summary.contains(r"YBS\_GIT\_AUTHOR"), "{summary}");
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn ybs_git_author_names_the_author_and_committer() {
    let ybs = Ybs::new().env("YBS_GIT_AUTHOR", "CI Bot <ci@example.com>");
    let repo = two_file_repo(&ybs, "", edit_two_files());
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"]),
        "CI Bot <ci@example.com>|CI Bot <ci@example.com>"
    );
}

#[test]
fn a_failing_check_commits_nothing_and_leaves_the_changes_in_place() {
    let ybs = Ybs::new();
    let repo = two_file_repo(
        &ybs,
        "checks:\n  - name: never\n    run: \"false\"\n",
        edit_two_files(),
    );
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = transcript(&run, "t");
    assert_eq!(transcript["reason"], "checks_failed");
    assert_eq!(repo.head(), base);
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(repo.status(), [" M a.txt", " M b.txt"]);
    assert_eq!(repo.read("a.txt"), "A\n");
    assert!(transcript["git"]["commit"].is_null());
    let note = git_note(&transcript);
    assert!(
        note.contains("left 2 files uncommitted") && note.contains("a.txt, b.txt"),
        "{note}"
    );
    assert!(
        ybs.read("ybs-out/summary.md")
            .contains("left 2 files uncommitted")
    );
    assert!(
        repo.git(&["for-each-ref", "refs/ybs"]).is_empty(),
        "no salvage for a failed check"
    );
    repo.fsck();
}

#[test]
fn max_iterations_saves_a_salvage_ref_and_leaves_head_and_index_alone() {
    let ybs = Ybs::new();
    let repo = two_file_repo(
        &ybs,
        "limits: { max_iterations: 2 }\n",
        vec![
            call("write_file", json!({"path": "a.txt", "content": "A\n"})),
            call("write_file", json!({"path": "new.txt", "content": "new\n"})),
            call("read_file", json!({"path": "a.txt"})),
            answer("never reached"),
        ],
    );
    let base = repo.head();
    let index = repo.index_bytes();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(repo.index_bytes(), index, "the index file is untouched");
    let transcript = transcript(&run, "t");
    assert_eq!(transcript["reason"], "max_iterations");
    assert_eq!(repo.head(), base);
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(repo.git(&["rev-parse", "main"]), base);
    assert_eq!(repo.git(&["diff", "--cached", "--name-only"]), "");
    let salvage = format!("refs/ybs/salvage/{}/t", run_id(&transcript));
    assert_eq!(
        repo.git(&["for-each-ref", "--format=%(refname)"])
            .lines()
            .filter(|r| r.starts_with("refs/ybs/"))
            .collect::<Vec<_>>(),
        [salvage.as_str()]
    );
    assert_eq!(repo.git(&["rev-parse", &format!("{salvage}^")]), base);
    assert_eq!(repo.files_of(&salvage), ["a.txt", "new.txt"]);
    assert_eq!(repo.git(&["show", &format!("{salvage}:new.txt")]), "new");
    assert!(
        repo.subject(&salvage)
            .starts_with("[ybs] t: salvaged after max_iterations"),
        "{}",
        repo.subject(&salvage)
    );
    assert_eq!(repo.trailer(&salvage, "Ybs-Run"), run_id(&transcript));
    // The changes are kept in place too.
    assert_eq!(repo.status(), [" M a.txt", "?? new.txt"]);
    assert_eq!(transcript["git"]["salvage_ref"], salvage);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(
        junit.contains(&format!(
            "<property name=\"salvage_ref\" value=\"{salvage}\"/>"
        )),
        "{junit}"
    );
    assert!(ybs.read("ybs-out/summary.md").contains(&salvage));
    repo.fsck();
}

/// Writes an executable shell script that creates `marker` when run.
fn marker_script(path: &Path, marker: &Path) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}'\nexit 0\n", marker.display()),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn no_hook_and_no_fsmonitor_runs() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let markers = ybs.home().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    let hooks = [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
    ];
    for hook in hooks {
        marker_script(
            &repo.root.join(".git/hooks").join(hook),
            &markers.join(hook),
        );
    }
    let fsmonitor = ybs.home().join("fsmonitor.sh");
    marker_script(&fsmonitor, &markers.join("fsmonitor"));
    repo.git(&["config", "core.fsmonitor", fsmonitor.to_str().unwrap()]);
    let run = ybs.run(["run", "t.yaml"]);
    // Before any `git` command of this test, which would run them itself.
    let ran: Vec<_> = std::fs::read_dir(&markers)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    run.expect_code(0);
    assert!(ran.is_empty(), "repository programs ran: {ran:?}");
    assert_eq!(repo.commit_count(), 2);
    assert_eq!(repo.files_of("HEAD"), ["a.txt", "b.txt"]);
    repo.fsck();
}

#[test]
fn two_tasks_in_one_file_make_two_commits_each_with_its_own_files() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "defaults:\n  model: test-model\n  policy: { default: allow }\ntasks:\n  - id: one\n    prompt: p\n  - id: two\n    prompt: p\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "one",
                call("write_file", json!({"path": "x.txt", "content": "x\n"})),
            ),
            for_task("one", answer("wrote x")),
            for_task(
                "two",
                call("write_file", json!({"path": "y.txt", "content": "y\n"})),
            ),
            for_task("two", answer("wrote y")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.commit_count(), 3);
    assert_eq!(repo.git(&["rev-parse", "HEAD~2"]), base);
    assert_eq!(repo.files_of("HEAD~1"), ["x.txt"]);
    assert_eq!(repo.subject("HEAD~1"), "[ybs] one: wrote x");
    assert_eq!(repo.files_of("HEAD"), ["y.txt"]);
    assert_eq!(repo.subject("HEAD"), "[ybs] two: wrote y");
    let one = transcript(&run, "one");
    let two = transcript(&run, "two");
    assert_eq!(one["git"]["commit"], repo.git(&["rev-parse", "HEAD~1"]));
    assert_eq!(two["git"]["commit"], repo.head());
    assert_eq!(two["manifest"]["base_commit"], one["git"]["commit"]);
    assert_eq!(run_id(&one), run_id(&two));
    assert_eq!(repo.trailer("HEAD~1", "Ybs-Run"), run_id(&two));
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn a_task_after_a_failed_one_commits_only_its_own_files() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "defaults:\n  model: test-model\n  policy: { default: allow }\ntasks:\n  - id: one\n    prompt: p\n    checks: [{run: \"false\"}]\n  - id: two\n    prompt: p\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "one",
                call("write_file", json!({"path": "x.txt", "content": "x\n"})),
            ),
            for_task("one", answer("wrote x")),
            for_task(
                "two",
                calls(&[
                    ("write_file", json!({"path": "y.txt", "content": "y\n"})),
                    ("write_file", json!({"path": "x.txt", "content": "x2\n"})),
                ]),
            ),
            for_task("two", answer("wrote y")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    assert_eq!(transcript(&run, "one")["reason"], "checks_failed");
    let two = transcript(&run, "two");
    assert_eq!(two["status"], "passed", "{two}");
    assert_eq!(repo.commit_count(), 2);
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]), base);
    assert_eq!(
        repo.files_of("HEAD"),
        ["y.txt"],
        "x.txt, left by the failed task, is not the second task's"
    );
    assert_eq!(repo.status(), ["?? x.txt"]);
    assert_eq!(repo.read("x.txt"), "x2\n");
    let note = git_note(&two);
    assert!(note.contains("x.txt"), "{note}");
    let notes = two["notes"].to_string();
    assert!(notes.contains("x.txt"), "{notes}");
    repo.fsck();
}

#[test]
fn no_commit_and_commit_false_leave_the_changes_uncommitted() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml", "--no-commit"]);
    run.expect_code(0);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.status(), [" M a.txt", " M b.txt"]);
    let note = git_note(&transcript(&run, "t"));
    assert!(
        note.contains("--no-commit") && note.contains("a.txt"),
        "{note}"
    );

    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "commit: false\n", edit_two_files());
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.status(), [" M a.txt", " M b.txt"]);
    let note = git_note(&transcript(&run, "t"));
    assert!(note.contains("commit: false"), "{note}");
    assert!(repo.git(&["for-each-ref", "refs/ybs"]).is_empty());
}

#[test]
fn no_commit_runs_on_a_dirty_tree() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    repo.write("c.txt", "mine\n");
    ybs.run(["run", "t.yaml", "--no-commit"]).expect_code(0);
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(repo.read("c.txt"), "mine\n");
}

#[test]
fn auto_commit_false_in_config_turns_commits_off() {
    let ybs = Ybs::new();
    ybs.file(".ybs.json", r#"{"git": {"auto_commit": false}}"#);
    let repo = two_file_repo(&ybs, "", edit_two_files());
    ybs.run(["run", "t.yaml"]).expect_code(0);
    assert_eq!(repo.commit_count(), 1);
    assert_eq!(repo.status(), [" M a.txt", " M b.txt"]);
}

#[test]
fn ignored_files_are_never_committed() {
    let ybs = Ybs::new();
    ybs.file(".gitignore", "build/\n*.log\n");
    let repo = two_file_repo(
        &ybs,
        "checks:\n  - run: mkdir -p build && echo obj > build/out.o\n",
        vec![
            calls(&[
                ("write_file", json!({"path": "a.txt", "content": "A\n"})),
                (
                    "write_file",
                    json!({"path": "debug.log", "content": "log\n"}),
                ),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), ["a.txt"]);
    assert!(ybs.exists("debug.log") && ybs.exists("build/out.o"));
    let note = git_note(&transcript(&run, "t"));
    assert!(note.contains("debug.log (ignored)"), "{note}");
}

#[test]
fn a_workdir_in_a_subdirectory_commits_its_changes_and_not_the_rest() {
    let ybs = Ybs::new();
    ybs.file("sub/keep.txt", "k\n");
    ybs.file("top.txt", "t\n");
    let repo = two_file_repo(
        &ybs,
        "workdir: sub\nchecks:\n  - run: echo changed > ../top.txt\n",
        vec![
            call("write_file", json!({"path": "made.txt", "content": "m\n"})),
            answer("made it"),
        ],
    );
    // The check plays an outside writer, which a sandboxed check cannot
    // be (tests/suite/confinement.rs): the sandbox is lifted.
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(0);
    assert_eq!(repo.files_of("HEAD"), ["sub/made.txt"]);
    assert_eq!(repo.status(), [" M top.txt"]);
    let note = git_note(&transcript(&run, "t"));
    assert!(note.contains("top.txt (outside the workdir)"), "{note}");
    repo.fsck();
}

#[test]
fn on_a_detached_head_the_run_branch_follows_every_task() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "defaults:\n  model: test-model\n  policy: { default: allow }\ntasks:\n  - id: one\n    prompt: p\n  - id: two\n    prompt: p\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "one",
                call("write_file", json!({"path": "x.txt", "content": "x\n"})),
            ),
            for_task("one", answer("wrote x")),
            for_task(
                "two",
                call("write_file", json!({"path": "y.txt", "content": "y\n"})),
            ),
            for_task("two", answer("wrote y")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    repo.git(&["checkout", "-q", "--detach"]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let branch = format!("refs/heads/ybs/{}", run_id(&transcript(&run, "one")));
    assert_eq!(repo.git(&["rev-parse", &branch]), repo.head());
    assert_eq!(repo.git(&["rev-parse", "HEAD~2"]), base);
    assert_eq!(repo.files_of("HEAD~1"), ["x.txt"]);
    assert_eq!(repo.files_of("HEAD"), ["y.txt"]);
    assert!(git_note(&transcript(&run, "two")).contains("advanced branch"));
    repo.fsck();
}

#[test]
fn commit_branch_commits_on_that_branch_and_switches_head_to_it() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "commit: { branch: ybs/feature }\n", edit_two_files());
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(
        repo.git(&["symbolic-ref", "HEAD"]),
        "refs/heads/ybs/feature"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD^"]), base);
    assert_eq!(repo.git(&["rev-parse", "main"]), base, "main is untouched");
    assert_eq!(repo.files_of("HEAD"), ["a.txt", "b.txt"]);
    assert_eq!(transcript(&run, "t")["git"]["branch"], "ybs/feature");
    assert_eq!(repo.status(), Vec::<String>::new());
    repo.fsck();
}

#[test]
fn a_file_deleted_by_a_shell_command_is_committed_as_deleted() {
    let ybs = Ybs::new();
    let repo = two_file_repo(
        &ybs,
        "",
        vec![
            call("run_shell", json!({"command": "rm b.txt"})),
            answer("removed b"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(
        repo.git(&["show", "--name-status", "--format=", "HEAD"]),
        "D\tb.txt"
    );
    let note = git_note(&transcript(&run, "t"));
    assert!(
        note.contains("changed outside the file tools: b.txt"),
        "{note}"
    );
    assert_eq!(repo.status(), Vec::<String>::new());
}

#[test]
fn an_api_key_in_the_models_summary_never_reaches_the_commit() {
    let key = "sk-test-0123456789abcdefghijklmnop";
    let ybs = Ybs::new().env("OPENAI_API_KEY", key);
    let repo = two_file_repo(
        &ybs,
        "",
        vec![
            call("write_file", json!({"path": "a.txt", "content": "A\n"})),
            answer(&format!("Done, using key {key}\n\nthe key was {key}")),
        ],
    );
    ybs.run(["run", "t.yaml"]).expect_code(0);
    let message = repo.git(&["log", "-1", "--format=%B"]);
    assert!(!message.contains(key), "{message}");
    assert!(
        message.starts_with("[ybs] t: Done, using key "),
        "{message}"
    );
}

#[test]
fn a_junit_file_inside_the_repository_is_not_committed_nor_dirty_next_time() {
    let ybs = Ybs::new();
    let repo = two_file_repo(&ybs, "", edit_two_files());
    let args = ["run", "t.yaml", "--junit", "reports/junit.xml"];
    ybs.run(args).expect_code(0);
    assert!(ybs.exists("reports/junit.xml"));
    assert_eq!(repo.files_of("HEAD"), ["a.txt", "b.txt"]);
    ybs.run(args).expect_code(0);
    assert_eq!(repo.commit_count(), 2);
}

#[test]
fn a_bare_repository_is_a_usage_error_unless_commits_are_off() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &task_yaml("workdir: repo.git\n"));
    ybs.cassette("t.cassette.json", vec![answer("nothing to do")]);
    let repo = Repo {
        ybs: &ybs,
        root: ybs.path().to_owned(),
    };
    repo.git(&["init", "-q", "--bare", "repo.git"]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("bare git repository") && run.stderr.contains("--no-commit"),
        "{}",
        run.stderr
    );
    assert!(!ybs.exists("ybs-out"));
    ybs.run(["run", "t.yaml", "--no-commit"]).expect_code(0);
}
