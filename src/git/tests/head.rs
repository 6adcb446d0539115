//! HEAD states and repository shapes: detached, unborn, none, bare,
//! linked worktree.

use super::{RUN, Repo, paths, request};
use crate::git::{GitError, Head, Workspace};

#[test]
fn a_detached_head_advances_and_gets_a_ybs_branch() {
    let repo = Repo::new();
    let base = repo.head();
    repo.git(&["checkout", "-q", "--detach"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(snapshot.head, Head::Detached { sha: base.clone() });

    repo.write("a.txt", "detached\n");
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    let sha = outcome.sha.clone().unwrap();
    let branch = format!("ybs/{RUN}");
    assert!(outcome.detached);
    assert_eq!(outcome.branch.as_deref(), Some(branch.as_str()));
    assert!(
        outcome.note.contains(&format!("created branch {branch}")),
        "{}",
        outcome.note
    );
    assert_eq!(repo.head(), sha, "HEAD points at the commit");
    assert!(
        !repo
            .git_output(&["symbolic-ref", "-q", "HEAD"])
            .status
            .success(),
        "still detached"
    );
    assert_eq!(repo.git(&["rev-parse", &branch]).trim(), sha);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]).trim(), base);
    assert_eq!(
        repo.git(&["rev-parse", "main"]).trim(),
        base,
        "main untouched"
    );
    assert_eq!(repo.porcelain(), "");

    // A second task of the same run advances the same branch.
    let snapshot = workspace.snapshot().unwrap();
    repo.write("b.txt", "second\n");
    let reported = paths(&["b.txt"]);
    let second = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    let second_sha = second.sha.unwrap();
    assert_eq!(repo.head(), second_sha);
    assert_eq!(repo.git(&["rev-parse", &branch]).trim(), second_sha);
    assert!(second.note.contains("advanced branch"), "{}", second.note);
    repo.fsck();
}

#[test]
fn an_existing_ybs_branch_elsewhere_is_refused_before_anything_is_written() {
    let repo = Repo::new();
    let base = repo.head();
    repo.git(&["branch", &format!("ybs/{RUN}")]);
    repo.git(&["commit", "-q", "--allow-empty", "-m", "second"]);
    repo.git(&["checkout", "-q", "--detach"]);
    let head = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "x\n");
    let reported = paths(&["a.txt"]);
    let error = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap_err();
    assert!(matches!(error, GitError::BranchConflict { .. }), "{error}");
    assert_eq!(repo.head(), head);
    assert_eq!(repo.git(&["rev-parse", &format!("ybs/{RUN}")]).trim(), base);
    assert_eq!(repo.porcelain(), " M a.txt\n");
    repo.fsck();
}

#[test]
fn an_unborn_branch_gets_its_first_commit() {
    let repo = Repo::empty();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(
        snapshot.head,
        Head::Unborn {
            branch: "main".into()
        }
    );
    assert_eq!(snapshot.base, None);
    assert!(snapshot.is_clean());

    repo.write("README.md", "# hello\n");
    repo.write("src/main.rs", "fn main() {}\n");
    let reported = paths(&["README.md", "src/main.rs"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    let sha = outcome.sha.clone().unwrap();
    assert_eq!(outcome.branch.as_deref(), Some("main"));
    assert!(
        outcome.note.ends_with("on main (its first commit)"),
        "{}",
        outcome.note
    );
    assert_eq!(repo.git(&["rev-parse", "main"]).trim(), sha);
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "1");
    assert_eq!(
        repo.git(&["log", "-1", "--format=%P"]).trim(),
        "",
        "no parent"
    );
    assert_eq!(repo.changed("HEAD"), ["A\tREADME.md", "A\tsrc/main.rs"]);
    assert_eq!(repo.porcelain(), "");
    repo.fsck();
}

#[test]
fn an_unborn_branch_keeps_the_users_staged_files_staged() {
    let repo = Repo::empty();
    repo.write("mine.txt", "user\n");
    repo.git(&["add", "mine.txt"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(snapshot.dirty.len(), 1);
    repo.write("task.txt", "task\n");
    let reported = paths(&["task.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["task.txt"]);
    assert_eq!(repo.changed("HEAD"), ["A\ttask.txt"]);
    assert_eq!(repo.porcelain(), "A  mine.txt\n");
    repo.fsck();
}

#[test]
fn no_repository_is_none() {
    let dir = tempfile::tempdir().unwrap();
    assert!(Workspace::open(dir.path()).unwrap().is_none());
    let report = crate::git::no_repository(dir.path());
    assert!(
        report
            .note
            .ends_with("is not in a git repository: nothing committed")
    );
}

#[test]
fn a_missing_workdir_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let error = Workspace::open(&dir.path().join("missing")).unwrap_err();
    assert!(
        error.to_string().contains("cannot resolve the workdir"),
        "{error}"
    );
}

#[test]
fn a_bare_repository_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let bare = dir.path().join("bare.git");
    let status = std::process::Command::new("git")
        .args(["init", "-q", "--bare"])
        .arg(&bare)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .status()
        .unwrap();
    assert!(status.success());
    let error = Workspace::open(&bare).unwrap_err();
    assert!(matches!(error, GitError::Bare { .. }), "{error}");
    assert!(error.to_string().contains("bare git repository"), "{error}");
}

#[test]
fn a_workdir_inside_the_git_directory_is_refused() {
    let repo = Repo::new();
    let error = Workspace::open(&repo.path(".git/refs")).unwrap_err();
    assert!(
        matches!(
            error,
            GitError::OutsideWorkTree { .. } | GitError::Bare { .. }
        ),
        "{error}"
    );
}

#[test]
fn a_linked_worktree_commits_on_its_own_branch() {
    let repo = Repo::new();
    let base = repo.head();
    let linked = repo.root.parent().unwrap().join("linked");
    repo.git(&[
        "worktree",
        "add",
        "-q",
        "-b",
        "ybs/run/t1",
        linked.to_str().unwrap(),
    ]);
    let workspace = Repo::open(&linked);
    assert_eq!(workspace.root(), linked.canonicalize().unwrap());
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(
        snapshot.head,
        Head::Branch {
            name: "ybs/run/t1".into()
        }
    );
    std::fs::write(linked.join("a.txt"), "in the worktree\n").unwrap();
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    let sha = outcome.sha.unwrap();
    assert_eq!(repo.git(&["rev-parse", "ybs/run/t1"]).trim(), sha);
    assert_eq!(repo.head(), base, "the main work tree's HEAD is untouched");
    assert_eq!(repo.porcelain(), "");
    let status = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(&linked)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&status.stdout), "");
    repo.fsck();
}
