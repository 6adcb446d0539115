//! Salvage refs for tasks stopped by a limit.

use super::{RUN, Repo, paths, request};

#[test]
fn salvage_saves_the_changes_on_a_ref_and_leaves_head_index_and_tree_alone() {
    let repo = Repo::new();
    let base = repo.head();
    repo.write("mine.txt", "the user's\n");
    repo.write("b.txt", "user staged\n");
    repo.git(&["add", "b.txt"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();

    repo.write("a.txt", "half done\n");
    repo.write("new/file.rs", "fn half() {}\n");
    std::fs::remove_file(repo.path("c.txt")).unwrap();
    repo.write("mine.txt", "the user's, touched by the task\n");
    let index_before = std::fs::read(repo.path(".git/index")).unwrap();
    let status_before = repo.porcelain();

    let reported = paths(&["a.txt", "new/file.rs", "c.txt", "mine.txt"]);
    let outcome = workspace
        .salvage(&request(&snapshot, &reported), "max_iterations")
        .unwrap()
        .expect("something to save");

    let ref_name = format!("refs/ybs/salvage/{RUN}/t1");
    assert_eq!(outcome.ref_name, ref_name);
    assert_eq!(outcome.files, ["a.txt", "c.txt", "new/file.rs"]);
    assert_eq!(outcome.skipped_user_dirty, ["mine.txt"]);
    assert_eq!(
        outcome.note,
        format!(
            "saved 3 files as {} on {ref_name}; not committed because they already had uncommitted changes when the task started: mine.txt",
            &outcome.sha[..7]
        )
    );
    assert_eq!(repo.git(&["rev-parse", &ref_name]).trim(), outcome.sha);
    assert_eq!(
        repo.git(&["rev-parse", &format!("{ref_name}~1")]).trim(),
        base
    );
    assert_eq!(
        repo.changed(&ref_name),
        ["M\ta.txt", "D\tc.txt", "A\tnew/file.rs"]
    );
    assert_eq!(
        repo.git(&["show", &format!("{ref_name}:b.txt")]),
        "b\n",
        "the user's staged change is not in it"
    );
    let subject = repo.git(&["log", "-1", "--format=%s", &ref_name]);
    assert_eq!(subject.trim(), "[ybs] t1: salvaged after max_iterations");
    assert!(
        repo.git(&["log", "-1", "--format=%(trailers:only)", &ref_name])
            .contains("Ybs-Task: t1")
    );

    assert_eq!(repo.head(), base, "HEAD unchanged");
    assert_eq!(
        repo.git(&["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/main"
    );
    assert_eq!(
        std::fs::read(repo.path(".git/index")).unwrap(),
        index_before,
        "index unchanged"
    );
    assert_eq!(repo.porcelain(), status_before, "work tree unchanged");
    assert_eq!(repo.read("a.txt"), "half done\n");
    assert_eq!(
        outcome.report().salvage_ref.as_deref(),
        Some(ref_name.as_str())
    );
    repo.fsck();
}

#[test]
fn salvage_with_nothing_changed_is_none() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .salvage(&request(&snapshot, &reported), "timeout")
        .unwrap();
    assert!(outcome.is_none());
    assert!(repo.git(&["for-each-ref", "refs/ybs"]).is_empty());
}

#[test]
fn salvage_on_an_unborn_branch_has_no_parent() {
    let repo = Repo::empty();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "first\n");
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .salvage(&request(&snapshot, &reported), "cost_budget")
        .unwrap()
        .unwrap();
    assert_eq!(
        repo.git(&["log", "-1", "--format=%P", &outcome.ref_name])
            .trim(),
        ""
    );
    assert!(
        !repo
            .git_output(&["rev-parse", "--verify", "-q", "HEAD"])
            .status
            .success(),
        "still unborn"
    );
    assert_eq!(repo.porcelain(), "?? a.txt\n");
    repo.fsck();
}
