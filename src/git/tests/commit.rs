//! Committing the task's files: contents, message, trailers, index.

use super::{MODEL, RUN, Repo, paths, request};
use crate::core::Redactor;
use crate::git::{SkipReason, SkippedPath};

#[test]
fn a_task_editing_two_files_makes_one_commit_with_exactly_those_files() {
    let repo = Repo::new();
    let base = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert!(snapshot.is_clean());
    assert_eq!(snapshot.base.as_deref(), Some(base.as_str()));

    repo.write("a.txt", "a changed\n");
    repo.write("b.txt", "b changed\n");
    let reported = paths(&["a.txt", "b.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();

    let sha = outcome.sha.clone().expect("a commit");
    assert_eq!(repo.head(), sha, "HEAD advanced to the commit");
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]).trim(), base);
    assert_eq!(repo.git(&["rev-parse", "main"]).trim(), sha);
    assert_eq!(repo.changed("HEAD"), ["M\ta.txt", "M\tb.txt"]);
    assert_eq!(repo.git(&["show", "HEAD:a.txt"]), "a changed\n");
    assert_eq!(repo.porcelain(), "", "work tree and index clean");
    assert_eq!(outcome.files, ["a.txt", "b.txt"]);
    assert!(outcome.unreported.is_empty());
    assert_eq!(outcome.branch.as_deref(), Some("main"));
    assert!(!outcome.detached);
    assert_eq!(outcome.identity, "Test User <test@example.com>");
    assert!(!outcome.identity_fallback);
    assert_eq!(
        outcome.note,
        format!("committed 2 files as {} on main", &sha[..7])
    );

    let message = repo.git(&["log", "-1", "--format=%B"]);
    assert!(
        message.starts_with("[ybs] t1: edit the files\n\n"),
        "{message}"
    );
    let trailers = repo.git(&["log", "-1", "--format=%(trailers:only,unfold)"]);
    assert_eq!(
        trailers.trim_end(),
        format!("Ybs-Task: t1\nYbs-Run: {RUN}\nYbs-Model: {MODEL}")
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"])
            .trim(),
        "Test User <test@example.com>|Test User <test@example.com>"
    );
    let report = outcome.report();
    assert_eq!(report.commit.as_deref(), Some(sha.as_str()));
    assert_eq!(report.files, ["a.txt", "b.txt"]);
    repo.fsck();
}

#[test]
fn two_tasks_in_one_tree_commit_only_their_own_files() {
    let repo = Repo::new();
    let workspace = repo.workspace();

    let first = workspace.snapshot().unwrap();
    repo.write("a.txt", "first task\n");
    let reported = paths(&["a.txt"]);
    let one = workspace.commit_task(&request(&first, &reported)).unwrap();

    let second = workspace.snapshot().unwrap();
    assert!(second.is_clean());
    assert_eq!(second.base, one.sha);
    repo.write("b.txt", "second task\n");
    repo.write("new/d.txt", "new\n");
    let reported = paths(&["b.txt", "new/d.txt"]);
    let mut request_two = request(&second, &reported);
    request_two.task_id = "t2";
    let two = workspace.commit_task(&request_two).unwrap();

    assert_eq!(repo.changed("HEAD~1"), ["M\ta.txt"]);
    assert_eq!(repo.changed("HEAD"), ["M\tb.txt", "A\tnew/d.txt"]);
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]).trim(), one.sha.unwrap());
    assert_eq!(repo.head(), two.sha.unwrap());
    assert!(
        repo.git(&["log", "-1", "--format=%s"])
            .starts_with("[ybs] t2: ")
    );
    assert_eq!(repo.porcelain(), "");
    repo.fsck();
}

#[test]
fn a_deleted_file_is_committed_as_a_deletion() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    std::fs::remove_file(repo.path("c.txt")).unwrap();
    let reported = paths(&["c.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["c.txt"]);
    assert_eq!(repo.changed("HEAD"), ["D\tc.txt"]);
    assert_eq!(repo.porcelain(), "");
    repo.fsck();
}

#[test]
fn ignored_files_are_never_committed() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    repo.write("debug.log", "reported but ignored\n");
    repo.write("build/out.bin", "written by a check\n");
    let reported = paths(&["a.txt", "debug.log"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt"]);
    assert_eq!(
        outcome.skipped,
        [SkippedPath {
            path: "debug.log".into(),
            reason: SkipReason::Ignored
        }]
    );
    assert!(
        outcome.note.contains("not committed: debug.log (ignored)"),
        "{}",
        outcome.note
    );
    assert_eq!(repo.changed("HEAD"), ["M\ta.txt"]);
    assert_eq!(repo.git(&["ls-files"]), ".gitignore\na.txt\nb.txt\nc.txt\n");
    assert!(repo.path("build/out.bin").exists() && repo.path("debug.log").exists());
    repo.fsck();
}

#[test]
fn changes_no_tool_reported_are_committed_and_listed() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "by edit_file\n");
    repo.write("gen/out.rs", "// by run_shell\n");
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt", "gen/out.rs"]);
    assert_eq!(outcome.unreported, ["gen/out.rs"]);
    assert!(
        outcome
            .note
            .contains("1 file changed outside the file tools: gen/out.rs"),
        "{}",
        outcome.note
    );
    assert_eq!(repo.changed("HEAD"), ["M\ta.txt", "A\tgen/out.rs"]);
    assert_eq!(repo.porcelain(), "");
}

#[test]
fn nothing_to_commit_makes_no_commit() {
    let repo = Repo::new();
    let base = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    // Rewritten with the same content: reported, but no change.
    repo.write("a.txt", "a\n");
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.sha, None);
    assert!(outcome.files.is_empty());
    assert_eq!(outcome.note, "nothing to commit: the task changed no files");
    assert_eq!(repo.head(), base);
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "1");
    repo.fsck();
}

#[test]
fn a_workdir_in_a_subdirectory_maps_paths_to_the_repository_root() {
    let repo = Repo::new();
    repo.write("pkg/lib.rs", "old\n");
    repo.write("other/x.txt", "x\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "pkg"]);
    let workspace = Repo::open(&repo.path("pkg"));
    assert_eq!(workspace.root(), repo.root);
    assert_eq!(workspace.workdir(), repo.path("pkg"));

    let snapshot = workspace.snapshot().unwrap();
    repo.write("pkg/lib.rs", "new\n");
    repo.write("pkg/sub/new.rs", "added\n");
    repo.write("pkg/gen.rs", "by run_shell\n");
    // Changed outside the workdir by something else: not the task's.
    repo.write("other/x.txt", "someone else\n");
    let absolute = repo.path("pkg/sub/new.rs");
    let reported = vec!["lib.rs".into(), absolute, "./sub/../lib.rs".into()];
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(
        outcome.files,
        ["pkg/gen.rs", "pkg/lib.rs", "pkg/sub/new.rs"]
    );
    assert_eq!(outcome.unreported, ["pkg/gen.rs"]);
    assert_eq!(
        outcome.skipped,
        [SkippedPath {
            path: "other/x.txt".into(),
            reason: SkipReason::OutsideWorkdir
        }]
    );
    assert_eq!(
        repo.changed("HEAD"),
        ["A\tpkg/gen.rs", "M\tpkg/lib.rs", "A\tpkg/sub/new.rs"]
    );
    assert_eq!(repo.porcelain(), " M other/x.txt\n");
    repo.fsck();
}

#[test]
fn a_reported_path_outside_the_repository_is_skipped() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt", "../elsewhere.txt", ".git/config"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt"]);
    let reasons: Vec<_> = outcome.skipped.iter().map(|skip| skip.reason).collect();
    assert_eq!(
        reasons,
        [SkipReason::OutsideRepository, SkipReason::OutsideRepository]
    );
}

#[test]
fn executable_bits_and_symlinks_are_committed_as_git_would() {
    use std::os::unix::fs::PermissionsExt;
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("run.sh", "#!/bin/sh\n");
    std::fs::set_permissions(repo.path("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("a.txt", repo.path("link")).unwrap();
    std::fs::set_permissions(repo.path("b.txt"), std::fs::Permissions::from_mode(0o755)).unwrap();
    let reported = paths(&["run.sh", "link", "b.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["b.txt", "link", "run.sh"]);
    let tree = repo.git(&["ls-tree", "HEAD"]);
    assert!(tree.contains("100755 blob"), "{tree}");
    assert!(
        tree.lines()
            .any(|line| line.starts_with("120000 blob") && line.ends_with("\tlink")),
        "{tree}"
    );
    assert!(
        tree.lines()
            .any(|line| line.starts_with("100755") && line.ends_with("\tb.txt")),
        "{tree}"
    );
    assert_eq!(repo.git(&["cat-file", "-p", "HEAD:link"]), "a.txt");
    assert_eq!(repo.porcelain(), "");
    repo.fsck();
}

#[test]
fn line_ending_attributes_are_applied_like_git_add() {
    let repo = Repo::new();
    repo.write(".gitattributes", "*.txt text eol=lf\n");
    repo.git(&["add", ".gitattributes"]);
    repo.git(&["commit", "-q", "-m", "attributes"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "one\r\ntwo\r\n");
    let reported = paths(&["a.txt"]);
    workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(repo.git(&["show", "HEAD:a.txt"]), "one\ntwo\n");
    assert_eq!(repo.porcelain(), "");
}

#[test]
fn a_file_replaced_by_a_directory_is_committed() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    std::fs::remove_file(repo.path("c.txt")).unwrap();
    repo.write("c.txt/inner.txt", "now a directory\n");
    let reported = paths(&["c.txt/inner.txt", "c.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["c.txt", "c.txt/inner.txt"]);
    assert_eq!(repo.changed("HEAD"), ["D\tc.txt", "A\tc.txt/inner.txt"]);
    assert_eq!(repo.porcelain(), "");
    repo.fsck();
}

#[test]
fn the_message_takes_the_first_line_as_subject_and_masks_secrets() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt"]);
    let mut redactor = Redactor::new();
    redactor.add("sk-secret-value");
    let mut commit = request(&snapshot, &reported);
    commit.message = "  Rename parse_cfg\n\nUsed key sk-secret-value to test.\nDone.";
    commit.redactor = Some(&redactor);
    commit.model = "model\nwith newline";
    workspace.commit_task(&commit).unwrap();
    let message = repo.git(&["log", "-1", "--format=%B"]);
    assert_eq!(
        message.trim_end(),
        format!(
            "[ybs] t1: Rename parse_cfg\n\nUsed key [REDACTED] to test.\nDone.\n\nYbs-Task: t1\nYbs-Run: {RUN}\nYbs-Model: model with newline"
        )
    );
}

#[test]
fn a_long_or_empty_summary_still_makes_a_one_line_subject() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt"]);
    let long = "word ".repeat(60);
    let mut commit = request(&snapshot, &reported);
    commit.message = &long;
    workspace.commit_task(&commit).unwrap();
    let subject = repo.git(&["log", "-1", "--format=%s"]);
    assert!(
        subject.trim_end().ends_with('…') && subject.chars().count() < 130,
        "{subject}"
    );
    assert!(
        repo.git(&["log", "-1", "--format=%b"])
            .contains(long.trim())
    );

    let snapshot = workspace.snapshot().unwrap();
    repo.write("b.txt", "changed\n");
    let reported = paths(&["b.txt"]);
    let mut commit = request(&snapshot, &reported);
    commit.message = " \n ";
    workspace.commit_task(&commit).unwrap();
    assert_eq!(
        repo.git(&["log", "-1", "--format=%s"]).trim(),
        "[ybs] t1: no summary"
    );
}

#[test]
fn a_requested_branch_is_created_at_head_and_checked_out_without_touching_files() {
    let repo = Repo::new();
    let base = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "on a branch\n");
    let reported = paths(&["a.txt"]);
    let mut commit = request(&snapshot, &reported);
    commit.branch = Some("feature/x");
    let outcome = workspace.commit_task(&commit).unwrap();
    let sha = outcome.sha.clone().unwrap();
    assert_eq!(outcome.branch.as_deref(), Some("feature/x"));
    assert!(
        outcome.note.contains("on new branch feature/x"),
        "{}",
        outcome.note
    );
    assert_eq!(
        repo.git(&["symbolic-ref", "HEAD"]).trim(),
        "refs/heads/feature/x"
    );
    assert_eq!(repo.git(&["rev-parse", "feature/x"]).trim(), sha);
    assert_eq!(
        repo.git(&["rev-parse", "main"]).trim(),
        base,
        "main untouched"
    );
    assert_eq!(repo.porcelain(), "");

    // The branch now exists elsewhere than HEAD once HEAD is back on main.
    repo.git(&["checkout", "-q", "main"]);
    let snapshot = workspace.snapshot().unwrap();
    repo.write("b.txt", "changed\n");
    let reported = paths(&["b.txt"]);
    let mut commit = request(&snapshot, &reported);
    commit.branch = Some("feature/x");
    let error = workspace.commit_task(&commit).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("branch `feature/x` already exists"),
        "{error}"
    );
    assert_eq!(repo.head(), base);
    assert_eq!(repo.porcelain(), " M b.txt\n");
    repo.fsck();

    for name in [
        "bad..name",
        "HEAD",
        "-f",
        "--force",
        "@",
        "refs/heads/main",
        "FETCH_HEAD",
        "ORIG_HEAD",
    ] {
        commit.branch = Some(name);
        let error = workspace.commit_task(&commit).unwrap_err();
        assert!(
            error.to_string().contains("not a valid git branch name"),
            "{name}: {error}"
        );
    }
    assert_eq!(repo.head(), base);
}

#[test]
fn task_changes_lists_what_a_failed_task_leaves_in_place() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "left in place\n");
    let reported = paths(&["a.txt"]);
    let changes = workspace.task_changes(&reported, &snapshot).unwrap();
    assert_eq!(changes.files, ["a.txt"]);
    let report = changes.left_in_place(workspace.workdir());
    assert_eq!(
        report.note,
        format!("left 1 file uncommitted in {}: a.txt", repo.root.display())
    );
    assert_eq!(report.commit, None);
    assert_eq!(
        repo.porcelain(),
        " M a.txt\n",
        "nothing was staged or committed"
    );
}

/// The second `path` was last modified.
fn mtime_second(path: &std::path::Path) -> u64 {
    std::fs::metadata(path)
        .unwrap()
        .modified()
        .unwrap()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Racy git: a file changed to the same size in the second its index entry
/// was recorded, then the index rewritten by the commit a second later,
/// must still show as modified to `git status` (git compares whole
/// seconds; libgit2 alone would have written the entry as clean).
#[test]
fn a_file_changed_in_the_second_of_its_index_entry_stays_modified_for_git() {
    let mut attempts = 0;
    let (repo, second) = loop {
        attempts += 1;
        assert!(attempts <= 20, "could not stay within one second");
        let repo = Repo::new();
        let second = mtime_second(&repo.path("a.txt"));
        repo.write("a.txt", "A\n");
        if mtime_second(&repo.path("a.txt")) == second
            && mtime_second(&repo.path(".git/index")) == second
        {
            break (repo, second);
        }
    };
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        <= second
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    repo.write("b.txt", "b changed\n");
    let reported = paths(&["b.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["b.txt"]);
    assert_eq!(repo.porcelain(), " M a.txt\n");
    assert_eq!(repo.read("a.txt"), "A\n");
}
