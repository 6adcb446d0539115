//! `--jobs N` (docs/cli.md, docs/git.md): tasks in parallel, the same outputs as one
//! at a time, each committing task in its own git worktree on branch
//! `ybs/<run-id>/<task-id>`, tasks sharing a non-git workdir one at a time.
//!
//! Nothing here depends on timing: concurrency is proven by two tasks that
//! can only pass if they run at the same time, and serialisation by
//! markers that would interleave if tasks overlapped.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::git::{Repo, for_task, git_note, run_id, transcript};
use crate::support::cassette::{answer, call};
use crate::support::{Run, Ybs};

/// A multi-task file: `(id, extra YAML lines indented for the task)`.
fn tasks_yaml(tasks: &[(&str, &str)]) -> String {
    let mut yaml =
        "defaults:\n  model: test-model\n  policy:\n    default: allow\ntasks:\n".to_owned();
    for (id, extra) in tasks {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
        for line in extra.lines() {
            yaml.push_str(&format!("    {line}\n"));
        }
    }
    yaml
}

/// The JUnit file with timings and the scratch dir taken out.
fn junit_shape(ybs: &Ybs) -> String {
    let junit = ybs.read("ybs-out/junit.xml");
    let junit = junit.replace(&ybs.path().display().to_string(), "ROOT");
    let times = regex::Regex::new(r#"(time|timestamp)="[^"]*"|"duration_ms" value="\d+""#).unwrap();
    times.replace_all(&junit, "").into_owned()
}

fn statuses(run: &Run, ids: &[&str]) -> Vec<(String, String)> {
    ids.iter()
        .map(|id| {
            let transcript = transcript(run, id);
            (
                transcript["status"].as_str().unwrap().to_owned(),
                transcript["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn jobs_3_gives_the_statuses_and_junit_of_jobs_1() {
    let ids = ["one", "two", "three", "four"];
    let tasks = [
        (
            "one",
            "workdir: a\nchecks:\n  - name: ok\n    run: 'true'\n",
        ),
        (
            "two",
            "workdir: b\nchecks:\n  - name: bad\n    run: 'false'\n",
        ),
        (
            "three",
            "workdir: c\nexpect: fail\nchecks:\n  - name: bad\n    run: 'false'\n",
        ),
        ("four", "workdir: d\n"),
    ];
    let mut shapes = Vec::new();
    for jobs in ["1", "3"] {
        let ybs = Ybs::new();
        for dir in ["a", "b", "c", "d"] {
            ybs.file(&format!("{dir}/.keep"), "");
        }
        ybs.file("t.yaml", &tasks_yaml(&tasks));
        ybs.cassette(
            "t.cassette.json",
            ids.iter()
                .map(|id| {
                    for_task(
                        id,
                        call("write_file", json!({"path": "out.txt", "content": *id})),
                    )
                })
                .chain(
                    ids.iter()
                        .map(|id| for_task(id, answer(&format!("did {id}")))),
                )
                .collect(),
        );
        let run = ybs.run(["run", "t.yaml", "--jobs", jobs]);
        for (id, dir) in ids.iter().zip(["a", "b", "c", "d"]) {
            assert_eq!(ybs.read(&format!("{dir}/out.txt")), *id, "jobs {jobs}");
        }
        shapes.push((run.code, statuses(&run, &ids), junit_shape(&ybs)));
    }
    assert_eq!(shapes[0].0, 1, "a failed task: exit 1");
    assert_eq!(
        shapes[0].1,
        [
            ("passed".to_owned(), "completed".to_owned()),
            ("failed".to_owned(), "checks_failed".to_owned()),
            ("passed".to_owned(), "checks_failed".to_owned()),
            ("passed".to_owned(), "completed".to_owned()),
        ]
    );
    assert_eq!(shapes[0], shapes[1], "--jobs 3 reports exactly as --jobs 1");
}

#[test]
fn each_task_commits_on_its_own_branch_from_its_own_worktree() {
    let ybs = Ybs::new();
    ybs.file("sub/keep.txt", "keep\n");
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[
            ("one", "checks:\n  - name: made\n    run: test -f one.txt\n"),
            ("two", "checks:\n  - name: made\n    run: test -f two.txt\n"),
            (
                "three",
                "workdir: sub\nchecks:\n  - name: made\n    run: test -f three.txt\n",
            ),
            ("bad", "checks:\n  - name: never\n    run: 'false'\n"),
        ]),
    );
    let ids = ["one", "two", "three", "bad"];
    ybs.cassette(
        "t.cassette.json",
        ids.iter()
            .map(|id| {
                for_task(
                    id,
                    call(
                        "write_file",
                        json!({"path": format!("{id}.txt"), "content": format!("{id}\n")}),
                    ),
                )
            })
            .chain(
                ids.iter()
                    .map(|id| for_task(id, answer(&format!("made {id}")))),
            )
            .collect(),
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml", "--jobs", "3"]);
    run.expect_code(1);
    let run_id = run_id(&transcript(&run, "one"));

    // The user's side: HEAD, branch and work tree as they were.
    assert_eq!(repo.head(), base);
    assert_eq!(repo.git(&["symbolic-ref", "HEAD"]), "refs/heads/main");
    assert_eq!(repo.status(), Vec::<String>::new(), "work tree clean");
    for id in ids {
        assert!(
            !ybs.exists(&format!("{id}.txt")),
            "{id}.txt in the user's tree"
        );
    }
    assert!(!ybs.exists("sub/three.txt"));

    // One branch per task and no `ybs/<run-id>` beside them.
    let branches = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    let mut expected: Vec<String> = ids.iter().map(|id| format!("ybs/{run_id}/{id}")).collect();
    expected.sort();
    assert_eq!(branches.lines().collect::<Vec<_>>(), expected);
    for (id, file) in [
        ("one", "one.txt"),
        ("two", "two.txt"),
        ("three", "sub/three.txt"),
    ] {
        let branch = format!("ybs/{run_id}/{id}");
        assert_eq!(
            repo.git(&["rev-list", "--count", &format!("{base}..{branch}")]),
            "1",
            "{branch}"
        );
        assert_eq!(repo.git(&["rev-parse", &format!("{branch}^")]), base);
        assert_eq!(repo.files_of(&branch), [file]);
        assert_eq!(repo.subject(&branch), format!("[ybs] {id}: made {id}"));
        let transcript = transcript(&run, id);
        assert_eq!(transcript["status"], "passed");
        assert_eq!(transcript["git"]["branch"], branch.as_str());
        assert_eq!(
            transcript["git"]["commit"],
            repo.git(&["rev-parse", &branch])
        );
        assert!(
            git_note(&transcript).contains("worktree removed"),
            "{transcript}"
        );
    }

    // The failed task: nothing committed, its change in its worktree, and
    // the note says where.
    assert_eq!(repo.git(&["rev-parse", &format!("ybs/{run_id}/bad")]), base);
    let worktree = Path::new(".ybs-worktrees").join(&run_id).join("bad");
    assert_eq!(
        ybs.read(&worktree.join("bad.txt").display().to_string()),
        "bad\n"
    );
    let bad = transcript(&run, "bad");
    assert_eq!(bad["status"], "failed");
    let note = git_note(&bad);
    assert!(note.contains("bad.txt"), "{note}");
    assert!(
        note.contains(&worktree.display().to_string())
            && note.contains(&format!("ybs/{run_id}/bad")),
        "{note}"
    );

    // `git worktree list`: the user's tree and the failed task's only.
    let root = ybs.path().canonicalize().unwrap();
    let listed: Vec<String> = repo
        .git(&["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|line| line.strip_prefix("worktree ").map(str::to_owned))
        .collect();
    assert_eq!(
        listed,
        [
            root.display().to_string(),
            root.join(&worktree).display().to_string()
        ]
    );
    repo.fsck();
}

#[test]
fn tasks_sharing_a_non_git_workdir_do_not_overlap() {
    let ybs = Ybs::new();
    let ids = ["one", "two", "three"];
    let tasks: Vec<(&str, String)> = ids
        .iter()
        .map(|id| {
            (
                *id,
                format!(
                    "checks:\n  - name: markers\n    run: echo start-{id} >> log && sleep 0.3 && echo end-{id} >> log\n"
                ),
            )
        })
        .collect();
    let tasks: Vec<(&str, &str)> = tasks
        .iter()
        .map(|(id, extra)| (*id, extra.as_str()))
        .collect();
    ybs.file("t.yaml", &tasks_yaml(&tasks));
    ybs.cassette(
        "t.cassette.json",
        ids.iter().map(|id| for_task(id, answer("ok"))).collect(),
    );
    let run = ybs.run(["run", "t.yaml", "--jobs", "3", "--no-sandbox"]);
    run.expect_code(0);
    let log = ybs.read("log");
    let lines: Vec<&str> = log.lines().collect();
    assert_eq!(lines.len(), 6, "{log}");
    for pair in lines.chunks(2) {
        let id = pair[0]
            .strip_prefix("start-")
            .unwrap_or_else(|| panic!("{log}"));
        assert_eq!(pair[1], format!("end-{id}"), "tasks overlapped:\n{log}");
    }
}

#[test]
fn tasks_in_separate_workdirs_run_at_the_same_time() {
    let ybs = Ybs::new();
    // Each check marks itself ready, then waits (up to 60 s) for the
    // other's mark: both pass only if they run at the same time.
    let wait = |me: &str, other: &str| {
        format!(
            "workdir: {me}\nchecks:\n  - name: meet\n    timeout: 90s\n    run: touch ../{me}.ready && for i in $(seq 600); do test -e ../{other}.ready && exit 0; sleep 0.1; done; exit 1\n"
        )
    };
    ybs.file("a/.keep", "");
    ybs.file("b/.keep", "");
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[("a", &wait("a", "b")), ("b", &wait("b", "a"))]),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![for_task("a", answer("ok")), for_task("b", answer("ok"))],
    );
    let run = ybs.run(["run", "t.yaml", "--jobs", "2", "--no-sandbox"]);
    run.expect_code(0);
    assert_eq!(
        statuses(&run, &["a", "b"]),
        [
            ("passed".to_owned(), "completed".to_owned()),
            ("passed".to_owned(), "completed".to_owned())
        ]
    );
}

#[test]
fn on_a_detached_head_commits_go_on_the_task_branches_only() {
    let ybs = Ybs::new();
    let ids = ["one", "two"];
    // `two` names `main`: with --jobs its commit stays on its own branch.
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[("one", ""), ("two", "commit:\n  branch: main\n")]),
    );
    ybs.cassette(
        "t.cassette.json",
        ids.iter()
            .map(|id| {
                for_task(
                    id,
                    call(
                        "write_file",
                        json!({"path": format!("{id}.txt"), "content": "x\n"}),
                    ),
                )
            })
            .chain(
                ids.iter()
                    .map(|id| for_task(id, answer(&format!("made {id}")))),
            )
            .collect(),
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    repo.git(&["checkout", "-q", "--detach"]);
    let run = ybs.run(["run", "t.yaml", "--jobs", "2"]);
    run.expect_code(0);
    let run_id = run_id(&transcript(&run, "one"));
    assert_eq!(repo.head(), base, "the detached HEAD did not move");
    let branches = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    assert_eq!(
        branches.lines().collect::<Vec<_>>(),
        [format!("ybs/{run_id}/one"), format!("ybs/{run_id}/two")],
        "no ybs/<run-id> branch beside the task branches"
    );
    for id in ids {
        assert_eq!(
            repo.files_of(&format!("ybs/{run_id}/{id}")),
            [format!("{id}.txt")]
        );
    }
    assert_eq!(repo.git(&["rev-parse", "main"]), base, "main did not move");
    let note = git_note(&transcript(&run, "two"));
    assert!(
        note.contains("commit.branch `main` is not used with --jobs"),
        "{note}"
    );
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 1, "{listed}");
    repo.fsck();
}

#[test]
fn sigint_with_jobs_2_interrupts_every_running_task() {
    let ybs = Ybs::new();
    ybs.file("a/.keep", "");
    ybs.file("b/.keep", "");
    // `a` runs in the user's tree (no commit), `b` in its own worktree,
    // `c` never starts: its worktree and branch go.
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[
            ("a", "workdir: a\ncommit: false\n"),
            ("b", "workdir: b\n"),
            ("c", ""),
        ]),
    );
    let sleep = |seconds: &str| {
        call(
            "run_shell",
            json!({"command": format!("sleep {seconds}"), "timeout_seconds": 60}),
        )
    };
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task("a", sleep("37.25")),
            // b has written a file when it is interrupted: its worktree
            // holds work and stays.
            for_task(
                "b",
                crate::support::cassette::calls(&[
                    ("write_file", json!({"path": "b.txt", "content": "b\n"})),
                    (
                        "run_shell",
                        json!({"command": "sleep 37.75", "timeout_seconds": 60}),
                    ),
                ]),
            ),
            for_task("a", answer("never")),
            for_task("b", answer("never")),
            for_task("c", answer("never")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let mut child = ybs
        .command()
        .args(["run", "t.yaml", "--jobs", "2"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    // Running once its `sleep` was decided.
    let running = |id: &str, seconds: &str| {
        let path = format!("ybs-out/{id}/events.jsonl");
        ybs.exists(&path) && ybs.read(&path).contains(&format!("sleep {seconds}"))
    };
    while !(running("a", "37.25") && running("b", "37.75")) {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the tools never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap()),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    for id in ["a", "b"] {
        let transcript: Value = ybs.json(&format!("ybs-out/{id}/transcript.json"));
        assert_eq!(transcript["reason"], "interrupted", "{id}");
    }
    // `c` never started: it is reported as skipped.
    let c: Value = ybs.json("ybs-out/c/transcript.json");
    assert_eq!(
        (&c["status"], &c["reason"]),
        (&json!("skipped"), &json!("interrupted"))
    );
    let b = ybs.read("ybs-out/b/transcript.json");
    let run_id = run_id(&ybs.json("ybs-out/b/transcript.json"));
    let worktree = format!(".ybs-worktrees/{run_id}/b");
    assert!(
        b.contains(&worktree),
        "the message says where b's work is: {b}"
    );
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.matches("interrupted").count() >= 2, "{junit}");
    let leftover = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|entry| std::fs::read(entry.unwrap().path().join("cmdline")).ok())
        .any(|cmdline| {
            let cmdline = String::from_utf8_lossy(&cmdline);
            cmdline.contains("37.25") || cmdline.contains("37.75")
        });
    assert!(!leftover, "an interrupted tool's `sleep` is still running");
    let branches = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    assert_eq!(branches, format!("ybs/{run_id}/b"));
    let listed = repo.git(&["worktree", "list", "--porcelain"]);
    assert_eq!(listed.matches("worktree ").count(), 2, "{listed}");
    assert!(listed.contains(&worktree), "{listed}");
    assert_eq!(repo.status(), Vec::<String>::new(), "work tree clean");
    repo.fsck();
}

#[test]
fn the_worktree_copy_of_the_task_file_is_protected_too() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", &tasks_yaml(&[("sneaky", ""), ("other", "")]));
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "sneaky",
                call(
                    "write_file",
                    json!({"path": "t.yaml", "content": "tasks: []\n"}),
                ),
            ),
            for_task("sneaky", answer("tried")),
            for_task("other", answer("nothing")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    let base = repo.head();
    let run = ybs.run(["run", "t.yaml", "--jobs", "2"]);
    let run_id = run_id(&transcript(&run, "sneaky"));
    let events = run.events("sneaky");
    let decided = events
        .iter()
        .find(|event| event["type"] == "tool.decided")
        .unwrap();
    assert_eq!(decided["rule"], "guard:protected_paths", "{decided}");
    assert_eq!(repo.head(), base, "nothing committed");
    assert_eq!(
        repo.output(&[
            "rev-parse",
            "--verify",
            "-q",
            &format!("ybs/{run_id}/sneaky")
        ])
        .stdout,
        b"",
        "nothing committed: the task's branch is gone"
    );
    assert_eq!(repo.git(&["branch", "--list", "ybs/*"]), "");
    repo.fsck();
}

/// `kill -9` in the middle of a committing batch under `--jobs`: nothing
/// of the user's is lost, and the next run names what the killed one left
/// (its worktrees and branches). `ybs clean --dry-run` lists them, `ybs
/// clean` removes what holds no work and keeps the worktree that does
/// (and its branch); `--force` removes that too.
#[test]
fn what_a_killed_run_left_is_named_and_ybs_clean_removes_what_holds_no_work() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &tasks_yaml(&[("a", ""), ("b", ""), ("c", ""), ("d", "")]),
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            for_task(
                "a",
                crate::support::cassette::calls(&[
                    ("write_file", json!({"path": "a.txt", "content": "a\n"})),
                    (
                        "run_shell",
                        json!({"command": "sleep 41.5", "timeout_seconds": 60}),
                    ),
                ]),
            ),
            for_task(
                "b",
                call(
                    "run_shell",
                    json!({"command": "sleep 41.75", "timeout_seconds": 60}),
                ),
            ),
            for_task("a", answer("never")),
            for_task("b", answer("never")),
            for_task("c", answer("never")),
            for_task("d", answer("never")),
        ],
    );
    let repo = Repo::init(&ybs, "");
    std::fs::write(ybs.path().join("mine.txt"), "my uncommitted edit\n").unwrap();
    let mut child = ybs
        .command()
        .args(["run", "t.yaml", "--jobs", "2", "--allow-dirty"])
        .spawn()
        .unwrap();
    let started = Instant::now();
    let running = |id: &str, seconds: &str| {
        let path = format!("ybs-out/{id}/events.jsonl");
        ybs.exists(&path) && ybs.read(&path).contains(&format!("sleep {seconds}"))
    };
    while !(running("a", "41.5") && running("b", "41.75")) {
        assert!(started.elapsed() < Duration::from_secs(30), "never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    child.kill().unwrap();
    child.wait().unwrap();
    // Nothing of the user's is lost.
    assert_eq!(ybs.read("mine.txt"), "my uncommitted edit\n");
    let killed = repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]);
    let run = killed
        .lines()
        .next()
        .unwrap()
        .split('/')
        .nth(1)
        .unwrap()
        .to_owned();
    assert_eq!(killed.lines().count(), 4, "{killed}");

    // The next run (a no-op task) names what the killed one left.
    ybs.file("n.yaml", "prompt: p\ncommit: false\n");
    ybs.cassette("n.cassette.json", vec![answer("done")]);
    let next = ybs.run(["run", "n.yaml", "--allow-dirty"]);
    next.expect_code(0);
    assert!(
        next.stderr.contains(&format!(
            "earlier runs ({run}) left 4 worktrees (1 with uncommitted work), 4 branches"
        )),
        "{}",
        next.stderr
    );
    assert!(
        next.stderr.contains("ybs clean --dry-run"),
        "{}",
        next.stderr
    );

    let dry = ybs.run(["clean", "--dry-run"]);
    dry.expect_code(0);
    assert!(
        dry.stdout.contains(&format!(
            "kept worktree {}",
            ybs.path()
                .canonicalize()
                .unwrap()
                .join(format!(".ybs-worktrees/{run}/a"))
                .display()
        )),
        "{}",
        dry.stdout
    );
    assert!(
        dry.stdout.contains("would remove 6, kept 2"),
        "{}",
        dry.stdout
    );
    assert_eq!(
        repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"])
            .lines()
            .count(),
        4,
        "a dry run removed something"
    );
    let clean = ybs.run(["clean"]);
    clean.expect_code(0);
    assert!(
        clean.stdout.contains("removed 6, kept 2"),
        "{}",
        clean.stdout
    );
    assert_eq!(
        repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]),
        format!("ybs/{run}/a")
    );
    assert!(ybs.exists(&format!(".ybs-worktrees/{run}/a/a.txt")));
    let force = ybs.run(["clean", "--force"]);
    force.expect_code(0);
    assert!(
        force.stdout.contains("removed 2, kept 0"),
        "{}",
        force.stdout
    );
    assert_eq!(
        repo.git(&["branch", "--list", "ybs/*", "--format=%(refname:short)"]),
        ""
    );
    assert_eq!(ybs.read("mine.txt"), "my uncommitted edit\n");
    repo.fsck();
}
