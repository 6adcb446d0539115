//! Issue 10: a commit holds what the task wrote and nothing the user kept
//! out of git, whatever the task did to `.gitignore`.

use super::{Repo, paths, request};
use crate::git::{SkipReason, SkippedPath};

#[test]
fn rewriting_gitignore_never_brings_the_users_ignored_files_in() {
    let repo = Repo::new();
    repo.write(".gitignore", "*.log\nbuild/\n.npmrc\ncreds.json\n");
    repo.git(&["commit", "-q", "-am", "ignore credentials"]);
    repo.write(".npmrc", "//registry.npmjs.org/:_authToken=npm_secret\n");
    repo.write("creds.json", "{\"token\": \"ghp_secret\"}\n");
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert!(snapshot.is_clean(), "{:?}", snapshot.dirty);

    // The model drops the two lines, and creates a file an old rule matches.
    repo.write(".gitignore", "*.log\nbuild/\n");
    repo.write("build/new.txt", "made by the task\n");
    let reported = paths(&[".gitignore", "build/new.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();

    assert!(outcome.sha.is_some());
    assert_eq!(repo.changed("HEAD"), ["M\t.gitignore"]);
    assert_eq!(outcome.files, [".gitignore"]);
    let skipped: Vec<&SkippedPath> = outcome
        .skipped
        .iter()
        .filter(|skip| skip.reason == SkipReason::IgnoredAtStart)
        .collect();
    assert_eq!(
        skipped.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(),
        [".npmrc", "creds.json"]
    );
    assert!(
        outcome
            .note
            .contains(".npmrc (ignored when the task started)"),
        "{}",
        outcome.note
    );
    // The files are where they were, untouched and uncommitted.
    assert_eq!(
        repo.read(".npmrc"),
        "//registry.npmjs.org/:_authToken=npm_secret\n"
    );
    assert!(repo.porcelain().contains("?? .npmrc"));
    repo.fsck_ok();
}

#[test]
fn a_file_the_task_creates_is_committed_when_no_rule_ignored_it() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write(".gitignore", "*.log\n");
    repo.write("build/kept.txt", "now wanted\n");
    repo.write("src/new.rs", "fn main() {}\n");
    let reported = paths(&[".gitignore", "src/new.rs"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    // `build/` was ignored at the start: the new file there stays out,
    // the one in `src/` is the task's.
    assert_eq!(outcome.files, [".gitignore", "src/new.rs"]);
    assert!(
        outcome
            .skipped
            .iter()
            .any(|s| s.path == "build/kept.txt" && s.reason == SkipReason::IgnoredAtStart),
        "{:?}",
        outcome.skipped
    );
}

#[test]
fn unchanged_rules_need_no_second_look() {
    let repo = Repo::new();
    repo.write("debug.log", "ignored all along\n");
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let outcome = workspace
        .commit_task(&request(&snapshot, &paths(&["a.txt", "debug.log"])))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt"]);
    assert!(
        outcome
            .skipped
            .iter()
            .any(|s| s.path == "debug.log" && s.reason == SkipReason::Ignored)
    );
}

#[test]
fn saving_the_users_work_touches_neither_head_nor_index_nor_tree() {
    let repo = Repo::new();
    let base = repo.head();
    repo.write("a.txt", "user\n");
    repo.write("c.txt", "staged\n");
    repo.git(&["add", "c.txt"]);
    repo.write("new.txt", "untracked\n");
    repo.write("debug.log", "ignored\n");
    let before = repo.porcelain();
    let index = std::fs::read(repo.path(".git/index")).unwrap();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    let saved = workspace
        .save_dirty(&snapshot, super::RUN, None)
        .unwrap()
        .expect("saved");
    assert_eq!(saved.ref_name, format!("refs/ybs/saved/{}", super::RUN));
    assert_eq!(saved.files, ["a.txt", "c.txt", "new.txt"]);
    assert_eq!(repo.head(), base);
    assert_eq!(repo.porcelain(), before);
    assert_eq!(std::fs::read(repo.path(".git/index")).unwrap(), index);
    assert_eq!(
        repo.git(&["show", &format!("{}:a.txt", saved.ref_name)]),
        "user\n"
    );
    assert!(
        !repo
            .git_output(&["cat-file", "-e", &format!("{}:debug.log", saved.ref_name)])
            .status
            .success(),
        "ignored files are never saved"
    );

    // A second save in the same run keeps the first: the state before the run.
    repo.write("a.txt", "changed by a task\n");
    let again = workspace
        .save_dirty(&workspace.snapshot().unwrap(), super::RUN, None)
        .unwrap()
        .unwrap();
    assert_eq!(again.sha, saved.sha);
    assert_eq!(again.files, saved.files);
    assert_eq!(workspace.saved(super::RUN).unwrap(), Some(saved));
    repo.fsck();
}

#[test]
fn a_clean_tree_saves_nothing() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(
        workspace.save_dirty(&snapshot, super::RUN, None).unwrap(),
        None
    );
    assert_eq!(workspace.saved(super::RUN).unwrap(), None);
}
