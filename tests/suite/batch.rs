//! `--jobs N` for tasks that do not commit (docs/git.md, "Tasks in
//! parallel"): each runs in its own worktree, so a review batch runs at
//! once; its changes are kept in `OUT/<task>/changes.patch` (and its
//! worktree when it did not pass); the console says when tasks must wait
//! for each other, and why.
//!
//! Concurrency is proven without timing: the fake model server holds the
//! first request of each task until all of them are in (a barrier), and
//! answers 400 when they do not arrive within 20 s.

use std::time::Duration;

use serde_json::{Value, json};

use super::git::{Repo, for_task, git_note, run_id, transcript};
use crate::support::cassette::{answer, call};
use crate::support::server::Server;
use crate::support::{Ybs, wire};

/// A multi-task file with a permissive policy: `(id, extra YAML lines)`.
fn tasks_yaml(tasks: &[(&str, &str)]) -> String {
    let mut yaml =
        "defaults:\n  model: test-model\n  policy:\n    default: allow\ntasks:\n".to_owned();
    for (id, extra) in tasks {
        yaml.push_str(&format!("  - id: {id}\n    prompt: review {id}\n"));
        for line in extra.lines() {
            yaml.push_str(&format!("    {line}\n"));
        }
    }
    yaml
}

#[test]
fn commit_false_tasks_under_jobs_4_run_at_the_same_time() {
    let ybs = Ybs::new();
    ybs.file("src/lib.rs", "pub fn f() {}\n");
    let ids = ["r1", "r2", "r3", "r4"];
    let tasks: Vec<(&str, &str)> = ids.iter().map(|id| (*id, "commit: false\n")).collect();
    ybs.file("t.yaml", &tasks_yaml(&tasks));
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    // Each task's only request is held until all four are in.
    let server = Server::start_gated(
        ids.iter()
            .map(|_| wire::openai_sse_answer("looks fine"))
            .collect(),
        4,
        Duration::from_secs(20),
    );
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--jobs",
        "4",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ]);
    for id in ids {
        let transcript = transcript(&run, id);
        assert_eq!(
            transcript["status"], "passed",
            "{id} did not run at the same time as the others: {}\n{}",
            transcript["message"], run.stderr
        );
    }
    run.expect_code(0);
    assert_eq!(server.requests().len(), 4);
    assert!(!run.stderr.contains("one after another"), "{}", run.stderr);
    // Nothing changed, so nothing is left behind: no branch, no worktree.
    assert_eq!(repo.head(), base);
    assert_eq!(repo.status(), Vec::<String>::new());
    assert_eq!(repo.git(&["branch", "--list", "ybs/*"]), "");
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    assert!(!ybs.exists(&format!(
        ".ybs-worktrees/{}",
        run_id(&transcript(&run, "r1"))
    )));
}

#[test]
fn a_non_committing_tasks_changes_are_kept_as_a_patch_and_a_failed_ones_worktree_stays() {
    let ybs = Ybs::new();
    ybs.file("notes.txt", "one\n");
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[
            ("good", "commit: false\n"),
            (
                "bad",
                "commit: false\nchecks:\n  - name: never\n    run: 'false'\n",
            ),
        ]),
    );
    let edit = |id: &str| {
        for_task(
            id,
            call(
                "write_file",
                json!({"path": format!("{id}.txt"), "content": format!("made by {id}\n")}),
            ),
        )
    };
    ybs.cassette(
        "t.cassette.json",
        vec![
            edit("good"),
            edit("bad"),
            for_task("good", answer("done")),
            for_task("bad", answer("done")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let run = ybs.run(["run", "t.yaml", "--jobs", "2", "--no-sandbox"]);
    run.expect_code(1);
    let run_id = run_id(&transcript(&run, "good"));
    // The user's checkout is as it was.
    assert_eq!(repo.status(), Vec::<String>::new());
    assert!(!ybs.exists("good.txt") && !ybs.exists("bad.txt"));
    // The passing task's changes are a patch that applies to the checkout;
    // its worktree and branch are gone.
    let patch = ybs.read("ybs-out/good/changes.patch");
    assert!(patch.contains("+made by good"), "{patch}");
    let note = git_note(&transcript(&run, "good"));
    assert!(note.contains("good/changes.patch"), "{note}");
    assert!(!ybs.exists(&format!(".ybs-worktrees/{run_id}/good")));
    repo.git(&["apply", "--check", "ybs-out/good/changes.patch"]);
    // The failed task's worktree stays, with its work, and the console
    // says where.
    let kept = format!(".ybs-worktrees/{run_id}/bad");
    assert_eq!(ybs.read(&format!("{kept}/bad.txt")), "made by bad\n");
    assert!(
        ybs.read("ybs-out/bad/changes.patch")
            .contains("+made by bad")
    );
    let console = format!("{}{}", run.stdout, run.stderr);
    assert!(
        console.contains(&kept) && console.contains("bad/changes.patch"),
        "{console}"
    );
    let branches = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    assert_eq!(branches, format!("ybs/{run_id}/bad"));
    repo.fsck();
}

#[test]
fn tasks_that_must_wait_for_each_other_are_named_with_the_reason() {
    // Not in a repository: no worktree can be made.
    let ybs = Ybs::new();
    ybs.file("t.yaml", &tasks_yaml(&[("a", ""), ("b", "")]));
    ybs.cassette(
        "t.cassette.json",
        vec![for_task("a", answer("ok")), for_task("b", answer("ok"))],
    );
    let run = ybs.run(["run", "t.yaml", "--jobs", "2", "--no-sandbox"]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("tasks a, b share workdir")
            && run.stderr.contains("run one after another")
            && run.stderr.contains("not in a git repository"),
        "{}",
        run.stderr
    );
    // In a repository, `--no-commit` makes no worktree: said as well.
    let ybs = Ybs::new();
    ybs.file("t.yaml", &tasks_yaml(&[("a", ""), ("b", "")]));
    ybs.cassette(
        "t.cassette.json",
        vec![for_task("a", answer("ok")), for_task("b", answer("ok"))],
    );
    Repo::init(&ybs, "");
    let run = ybs.run([
        "run",
        "t.yaml",
        "--jobs",
        "2",
        "--no-commit",
        "--no-sandbox",
    ]);
    run.expect_code(0);
    assert!(
        run.stderr.contains("--no-commit makes no git worktree"),
        "{}",
        run.stderr
    );
    let value: Value = run.json("ybs-out/a/transcript.json");
    assert_eq!(value["status"], "passed");
}

#[test]
fn a_secret_the_task_wrote_is_masked_in_its_patch() {
    let secret = "tok-batch-patch-0123456789abcdef";
    let ybs = Ybs::new().env("DEPLOY_TOKEN", secret);
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[("a", "commit: false\n"), ("b", "commit: false\n")]),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "a",
                call(
                    "write_file",
                    json!({"path": "env.txt", "content": format!("TOKEN={secret}\n")}),
                ),
            ),
            for_task("a", answer("done")),
            for_task("b", answer("done")),
        ],
    );
    Repo::init(&ybs, "");
    let run = ybs.run(["run", "t.yaml", "--jobs", "2", "--no-sandbox"]);
    run.expect_code(0);
    let patch = ybs.read("ybs-out/a/changes.patch");
    assert!(!patch.contains(secret), "{patch}");
    assert!(patch.contains("+TOKEN=[REDACTED]"), "{patch}");
    let note = git_note(&transcript(&run, "a"));
    assert!(note.contains("secrets masked"), "{note}");
}

/// The worktrees of every run on disk now under `root/.ybs-worktrees`.
fn worktrees_on_disk(root: &std::path::Path) -> usize {
    let Ok(runs) = std::fs::read_dir(root.join(".ybs-worktrees")) else {
        return 0;
    };
    runs.flatten()
        .filter_map(|run| std::fs::read_dir(run.path()).ok())
        .map(|tasks| tasks.flatten().count())
        .sum()
}

/// docs/performance.md: under `--jobs`, every task is checked before the
/// run and its worktree made when its slot comes, so the first task
/// starts before the batch's worktrees are all made, and no more than
/// `--jobs` + 4 exist at once. Counted at every model request (a task
/// running) and sampled by the test throughout the run.
#[test]
fn a_batch_of_readers_starts_at_once_with_at_most_jobs_plus_4_worktrees() {
    const TASKS: usize = 40;
    const JOBS: usize = 4;
    let ybs = Ybs::new();
    ybs.file("src/lib.rs", "pub fn f() {}\n");
    let ids: Vec<String> = (0..TASKS).map(|n| format!("r{n:02}")).collect();
    let tasks: Vec<(&str, &str)> = ids
        .iter()
        .map(|id| (id.as_str(), "commit: false\n"))
        .collect();
    ybs.file("t.yaml", &tasks_yaml(&tasks));
    Repo::init(&ybs, "");
    let root = ybs.path().to_owned();
    // The worktrees on disk as each request arrives; each answer waits
    // a little, so tasks overlap.
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let at_requests = std::sync::Arc::clone(&seen);
    let server = Server::start_checked(
        ids.iter()
            .map(|_| wire::openai_sse_answer("looks fine"))
            .collect(),
        move |_| {
            at_requests.lock().unwrap().push(worktrees_on_disk(&root));
            std::thread::sleep(Duration::from_millis(150));
            None
        },
    );
    let endpoint = format!("{}/v1", server.url);
    let mut child = ybs
        .command()
        .args(["run", "t.yaml", "--jobs", "4", "--provider", "openai"])
        .args(["--endpoint", &endpoint, "--model", "m"])
        .stdout(std::process::Stdio::null())
        .stderr(std::fs::File::create(ybs.outside().join("stderr.txt")).unwrap())
        .spawn()
        .unwrap();
    let began = std::time::Instant::now();
    let mut peak = 0;
    let code = loop {
        peak = peak.max(worktrees_on_disk(ybs.path()));
        if let Some(status) = child.try_wait().unwrap() {
            break status.code();
        }
        assert!(
            began.elapsed() < Duration::from_secs(120),
            "the run never ended"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let stderr = std::fs::read_to_string(ybs.outside().join("stderr.txt")).unwrap_or_default();
    let failed: Vec<String> = ids
        .iter()
        .map(|id| ybs.json(&format!("ybs-out/{id}/transcript.json")))
        .filter(|transcript| transcript["status"] != "passed")
        .map(|transcript| format!("{}: {}", transcript["task_id"], transcript["message"]))
        .collect();
    assert_eq!(code, Some(0), "{stderr}\n{failed:#?}");
    let at_requests = seen.lock().unwrap().clone();
    assert_eq!(at_requests.len(), TASKS, "every task asked the model once");
    // The old way made all 40 before the first request.
    assert!(
        at_requests[0] <= JOBS + 4,
        "the first task started with {} worktrees made",
        at_requests[0]
    );
    let most = at_requests.iter().copied().max().unwrap_or(0).max(peak);
    assert!(
        most <= JOBS + 4,
        "{most} worktrees at once under --jobs {JOBS}"
    );
    assert!(
        most >= 2,
        "the tasks never ran in worktrees of their own ({most})"
    );
    for id in &ids {
        assert_eq!(transcript_status(&ybs, id), "passed", "{id}");
    }
    // Read-only tasks that changed nothing leave no worktree behind.
    assert_eq!(worktrees_on_disk(ybs.path()), 0);
}

fn transcript_status(ybs: &Ybs, id: &str) -> String {
    ybs.json(&format!("ybs-out/{id}/transcript.json"))["status"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}
