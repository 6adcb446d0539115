//! docs/security.md S12: dirty trees, locks, identity, and no repository-configured
//! program ever runs.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{Repo, paths, request};
use crate::git::{Change, GitError, SkipReason, SkippedPath, Snapshot, describe_dirty};

#[test]
fn dirty_paths_list_every_uncommitted_path_but_no_ignored_one() {
    let repo = Repo::new();
    repo.write("a.txt", "modified\n");
    repo.write("b.txt", "staged\n");
    repo.git(&["add", "b.txt"]);
    std::fs::remove_file(repo.path("c.txt")).unwrap();
    repo.write("new.txt", "untracked\n");
    repo.write("dir/deep/y.txt", "untracked in a new directory\n");
    repo.write("x.log", "ignored\n");
    repo.write("build/z", "ignored directory\n");
    let workspace = repo.workspace();
    let dirty = workspace.dirty_paths().unwrap();
    let listed: Vec<_> = dirty
        .iter()
        .map(|path| (path.path.as_str(), path.change, path.staged))
        .collect();
    assert_eq!(
        listed,
        [
            ("a.txt", Change::Modified, false),
            ("b.txt", Change::Modified, true),
            ("c.txt", Change::Deleted, false),
            ("dir/deep/y.txt", Change::Untracked, false),
            ("new.txt", Change::Untracked, false),
        ]
    );
    assert_eq!(
        describe_dirty(&dirty),
        "a.txt (modified), b.txt (modified, staged), c.txt (deleted), dir/deep/y.txt (untracked), new.txt (untracked)"
    );
    let snapshot = workspace.snapshot().unwrap();
    assert!(!snapshot.is_clean());
    assert_eq!(snapshot.dirty, dirty);

    // The snapshot survives a pause: it round-trips through JSON.
    let json = serde_json::to_string(&snapshot).unwrap();
    let back: Snapshot = serde_json::from_str(&json).unwrap();
    assert_eq!(back, snapshot);
}

#[test]
fn with_allow_dirty_the_users_changes_stay_and_are_never_committed() {
    let repo = Repo::new();
    repo.write("a.txt", "user a\n");
    repo.write("b.txt", "user b staged\n");
    repo.git(&["add", "b.txt"]);
    repo.write("u.txt", "user untracked\n");
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    assert_eq!(snapshot.dirty.len(), 3);

    // The task edits its own files, and touches two of the user's.
    repo.write("c.txt", "task c\n");
    repo.write("t.txt", "task new\n");
    repo.write("a.txt", "user a\ntask a\n");
    repo.write("u.txt", "rewritten by run_shell\n");
    let reported = paths(&["c.txt", "t.txt", "a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();

    assert_eq!(outcome.files, ["c.txt", "t.txt"]);
    assert_eq!(outcome.skipped_user_dirty, ["a.txt", "u.txt"]);
    assert!(
        outcome
            .note
            .contains("not committed because they already had uncommitted changes when the task started: a.txt, u.txt"),
        "{}",
        outcome.note
    );
    assert_eq!(repo.changed("HEAD"), ["M\tc.txt", "A\tt.txt"]);
    assert_eq!(repo.porcelain(), " M a.txt\nM  b.txt\n?? u.txt\n");
    assert_eq!(
        repo.git(&["show", ":b.txt"]),
        "user b staged\n",
        "the user's staged content is still staged"
    );
    assert_eq!(repo.git(&["show", "HEAD:b.txt"]), "b\n");
    assert_eq!(
        repo.read("a.txt"),
        "user a\ntask a\n",
        "the work tree is never reset"
    );
    repo.fsck();
}

#[test]
fn a_locked_index_is_a_clear_error_and_nothing_changes() {
    let repo = Repo::new();
    let base = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let lock = repo.path(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let before = repo.porcelain();

    let reported = paths(&["a.txt"]);
    let error = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap_err();
    assert!(matches!(error, GitError::IndexLocked { .. }), "{error}");
    let text = error.to_string();
    assert!(
        text.contains("index.lock exists") && text.contains("nothing was committed"),
        "{text}"
    );
    assert_eq!(repo.head(), base);
    assert_eq!(repo.porcelain(), before);
    assert!(lock.exists(), "ybs never removes someone else's lock");
    repo.fsck();

    // Salvage needs no index: it works with the lock in place.
    let saved = workspace
        .salvage(&request(&snapshot, &reported), "timeout")
        .unwrap();
    assert!(saved.is_some());
    assert_eq!(repo.head(), base);

    std::fs::remove_file(&lock).unwrap();
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert!(outcome.sha.is_some());
    repo.fsck_ok();
}

#[test]
fn a_merge_in_progress_is_refused() {
    let repo = Repo::new();
    let base = repo.head();
    std::fs::write(repo.path(".git/MERGE_HEAD"), format!("{base}\n")).unwrap();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt"]);
    let error = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap_err();
    assert!(error.to_string().contains("middle of a merge"), "{error}");
    assert_eq!(repo.head(), base);
}

#[test]
fn ready_to_commit_reports_a_lock_or_a_merge_before_anything_runs() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    workspace.ready_to_commit().unwrap();
    let lock = repo.path(".git/index.lock");
    std::fs::write(&lock, "").unwrap();
    let error = workspace.ready_to_commit().unwrap_err();
    assert!(matches!(error, GitError::IndexLocked { .. }), "{error}");
    std::fs::remove_file(&lock).unwrap();
    std::fs::write(repo.path(".git/MERGE_HEAD"), format!("{}\n", repo.head())).unwrap();
    let error = workspace.ready_to_commit().unwrap_err();
    assert!(
        matches!(error, GitError::InProgress { state: "merge" }),
        "{error}"
    );
}

#[test]
fn excluded_outputs_are_never_dirty_and_never_committed() {
    let repo = Repo::new();
    // Tracked outputs too: an earlier run's transcript someone committed.
    repo.write("out/old/transcript.json", "{}\n");
    repo.git(&["add", "-A"]);
    repo.git(&["commit", "-q", "-m", "outputs"]);
    let workspace = repo
        .workspace()
        .excluding(&paths(&["out", "reports/junit.xml"]));
    repo.write("out/old/transcript.json", "{\"changed\": true}\n");
    repo.write("out/summary.md", "# run\n");
    repo.write("reports/junit.xml", "<testsuites/>\n");
    let snapshot = workspace.snapshot().unwrap();
    assert!(snapshot.is_clean(), "{:?}", snapshot.dirty);

    repo.write("a.txt", "changed\n");
    repo.write("out/t/events.jsonl", "{}\n");
    repo.write("reports/other.xml", "not an output\n");
    let reported = paths(&["a.txt", "out/t/written-by-a-tool.txt"]);
    repo.write("out/t/written-by-a-tool.txt", "x\n");
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt", "reports/other.xml"]);
    assert_eq!(
        outcome.skipped,
        [SkippedPath {
            path: "out/t/written-by-a-tool.txt".into(),
            reason: SkipReason::YbsOutput,
        }]
    );
    assert_eq!(repo.changed("HEAD"), ["M\ta.txt", "A\treports/other.xml"]);
    repo.fsck();
}

#[test]
fn an_exclusion_that_holds_the_workdir_or_lies_outside_is_dropped() {
    let repo = Repo::new();
    let outside = tempfile::tempdir().unwrap();
    let sub = repo.path("sub");
    std::fs::create_dir(&sub).unwrap();
    let workspace = Repo::open(&sub).excluding(&[
        repo.root.clone(),
        sub.clone(),
        outside.path().join("ybs-out"),
        // Relative to the workdir, and not there yet.
        "ybs-out".into(),
    ]);
    repo.write("sub/new.txt", "new\n");
    repo.write("sub/ybs-out/t/events.jsonl", "{}\n");
    let dirty: Vec<String> = workspace
        .dirty_paths()
        .unwrap()
        .into_iter()
        .map(|dirty| dirty.path)
        .collect();
    assert_eq!(dirty, ["sub/new.txt"]);
}

#[test]
fn a_missing_identity_falls_back_to_ybs() {
    let repo = Repo::new();
    repo.git(&["config", "--unset", "user.name"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert!(outcome.identity_fallback);
    assert_eq!(outcome.identity, "ybs <ybs@localhost>");
    assert!(
        outcome
            .note
            .contains("as ybs <ybs@localhost> (no user.name/user.email"),
        "{}",
        outcome.note
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>|%cn <%ce>"])
            .trim(),
        "ybs <ybs@localhost>|ybs <ybs@localhost>"
    );
    repo.fsck();
}

#[test]
fn ybs_git_author_wins_over_config_and_must_parse() {
    let repo = Repo::new();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    let reported = paths(&["a.txt"]);

    let mut commit = request(&snapshot, &reported);
    commit.author = Some("no email here");
    let error = workspace.commit_task(&commit).unwrap_err();
    assert_eq!(
        error.to_string(),
        "YBS_GIT_AUTHOR must look like `Name <email>`, got `no email here`"
    );
    assert_eq!(repo.git(&["rev-list", "--count", "HEAD"]).trim(), "1");

    commit.author = Some(" CI Bot <ci@example.org> ");
    let outcome = workspace.commit_task(&commit).unwrap();
    assert!(!outcome.identity_fallback);
    assert_eq!(
        repo.git(&["log", "-1", "--format=%an <%ae>"]).trim(),
        "CI Bot <ci@example.org>"
    );
}

/// A script that records that it ran by creating `markers/<name>`.
fn marker_script(repo: &Repo, path: &Path, name: &str, tail: &str) {
    let markers = repo.root.parent().unwrap().join("markers");
    std::fs::create_dir_all(&markers).unwrap();
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        path,
        format!("#!/bin/sh\ntouch '{}/{name}'\n{tail}\n", markers.display()),
    )
    .unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn markers(repo: &Repo) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(repo.root.parent().unwrap().join("markers"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn no_hook_fsmonitor_filter_or_signing_program_runs() {
    let repo = Repo::new();
    repo.write(".gitattributes", "*.dat filter=evil\n");
    repo.git(&["add", ".gitattributes"]);
    repo.git(&["commit", "-q", "-m", "attributes"]);
    let base = repo.head();

    let hooks = [
        "pre-commit",
        "prepare-commit-msg",
        "commit-msg",
        "post-commit",
        "reference-transaction",
        "post-index-change",
        "post-checkout",
    ];
    for hook in hooks {
        marker_script(
            &repo,
            &repo.path(&format!(".git/hooks/{hook}")),
            hook,
            "exit 0",
        );
    }
    let tools = repo.root.parent().unwrap().join("tools");
    marker_script(&repo, &tools.join("fsmonitor"), "fsmonitor", "exit 1");
    marker_script(&repo, &tools.join("clean"), "filter-clean", "cat");
    marker_script(&repo, &tools.join("smudge"), "filter-smudge", "cat");
    marker_script(&repo, &tools.join("gpg"), "gpg", "exit 1");
    let tool = |name: &str| tools.join(name).display().to_string();
    repo.git(&["config", "core.fsmonitor", &tool("fsmonitor")]);
    repo.git(&["config", "filter.evil.clean", &tool("clean")]);
    repo.git(&["config", "filter.evil.smudge", &tool("smudge")]);
    repo.git(&["config", "filter.evil.required", "true"]);
    repo.git(&["config", "commit.gpgSign", "true"]);
    repo.git(&["config", "gpg.program", &tool("gpg")]);
    assert!(markers(&repo).is_empty());

    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "task\n");
    repo.write("new.txt", "task\n");
    repo.write("big.dat", "would go through the filter\n");
    let reported = paths(&["a.txt", "new.txt", "big.dat"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt", "new.txt"]);
    assert_eq!(
        outcome.skipped,
        [SkippedPath {
            path: "big.dat".into(),
            reason: SkipReason::NeedsFilter
        }]
    );
    let snapshot = workspace.snapshot().unwrap();
    repo.write("b.txt", "stopped task\n");
    let reported = paths(&["b.txt"]);
    workspace
        .salvage(&request(&snapshot, &reported), "max_iterations")
        .unwrap();
    workspace.dirty_paths().unwrap();
    workspace.task_changes(&reported, &snapshot).unwrap();

    assert_eq!(
        markers(&repo),
        Vec::<String>::new(),
        "ybs ran a repository-configured program"
    );
    assert_eq!(repo.git(&["rev-parse", "HEAD~1"]).trim(), base);
    assert_eq!(
        repo.git(&["rev-parse", "HEAD"]).trim(),
        outcome.sha.unwrap()
    );
    assert_eq!(
        repo.git(&["log", "-1", "--format=%G?"]).trim(),
        "N",
        "not signed"
    );

    // The trap is real: git itself runs these programs.
    repo.git_output(&["status"]);
    repo.git_output(&["add", "big.dat"]);
    repo.git_output(&["commit", "-m", "by git"]);
    let ran = markers(&repo);
    for expected in ["filter-clean", "fsmonitor", "gpg", "pre-commit"] {
        assert!(
            ran.iter().any(|name| name == expected),
            "git did not run {expected}: {ran:?}"
        );
    }
}

#[test]
fn working_tree_encodings_and_paths_inside_a_git_directory_are_skipped() {
    let repo = Repo::new();
    repo.write(".gitattributes", "*.u16 working-tree-encoding=UTF-16\n");
    repo.git(&["add", ".gitattributes"]);
    repo.git(&["commit", "-q", "-m", "attributes"]);
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    repo.write("text.u16", "not really utf-16\n");
    repo.write("sub/.git/config", "not a repository\n");
    let reported = paths(&["a.txt", "text.u16", "sub/.git/config"]);
    let outcome = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap();
    assert_eq!(outcome.files, ["a.txt"]);
    assert_eq!(repo.changed("HEAD"), ["M\ta.txt"]);
    let skipped: Vec<_> = outcome
        .skipped
        .iter()
        .map(|skip| (skip.path.as_str(), skip.reason))
        .collect();
    assert!(
        skipped.contains(&("text.u16", SkipReason::NeedsFilter)),
        "{skipped:?}"
    );
    repo.fsck();
}

#[test]
fn a_failed_branch_update_puts_the_index_back() {
    let repo = Repo::new();
    let base = repo.head();
    let workspace = repo.workspace();
    let snapshot = workspace.snapshot().unwrap();
    repo.write("a.txt", "changed\n");
    repo.write("new.txt", "new\n");
    let before = repo.porcelain();
    // Another git process holds the branch: the ref update fails after the
    // index was written.
    let lock = repo.path(".git/refs/heads/main.lock");
    std::fs::write(&lock, "").unwrap();
    let reported = paths(&["a.txt", "new.txt"]);
    let error = workspace
        .commit_task(&request(&snapshot, &reported))
        .unwrap_err();
    assert!(error.to_string().contains("refs/heads/main"), "{error}");
    assert_eq!(repo.head(), base);
    assert_eq!(repo.porcelain(), before, "the index matches HEAD again");
    std::fs::remove_file(&lock).unwrap();
    repo.fsck_ok();
}
