//! `ybs run --shard K/N` and `ybs report merge` end to end.

use std::collections::BTreeSet;

use quick_junit::Report;
use serde_json::{Value, json};

use crate::suite::run::well_formed;
use crate::support::Ybs;
use crate::support::cassette::answer;

const IDS: [&str; 7] = ["t1", "t2", "t3", "t4", "t5", "t6", "t7"];

/// Seven answer-only tasks in one file; `t4`'s check fails.
fn batch(ybs: &Ybs) {
    let mut yaml = String::from("tasks:\n");
    for id in IDS {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
        if id == "t4" {
            yaml.push_str("    checks: [{name: broken, run: \"false\"}]\n");
        }
    }
    ybs.file("tasks/batch.yaml", &yaml);
    let interactions: Vec<Value> = IDS
        .iter()
        .map(|id| {
            let mut turn = answer(&format!("{id} done"));
            turn["task"] = json!(id);
            turn
        })
        .collect();
    ybs.cassette("tasks/batch.cassette.json", interactions);
}

/// The task directories (those with a transcript) under `dir`.
fn task_dirs(ybs: &Ybs, dir: &str) -> BTreeSet<String> {
    std::fs::read_dir(ybs.path().join(dir))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| entry.path().join("transcript.json").is_file())
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect()
}

fn junit(ybs: &Ybs, dir: &str) -> Report {
    let path = ybs.path().join(dir).join("junit.xml");
    well_formed(&path);
    Report::deserialize_from_str(&ybs.read(&format!("{dir}/junit.xml"))).unwrap()
}

fn case_names(report: &Report) -> Vec<String> {
    report
        .test_suites
        .iter()
        .flat_map(|suite| suite.test_cases.iter())
        .map(|case| case.name.to_string())
        .collect()
}

/// Runs the batch as shards 1/3, 2/3, 3/3 into `out-1` … `out-3`.
fn run_three_shards(ybs: &Ybs) -> Vec<BTreeSet<String>> {
    (1..=3)
        .map(|k| {
            let out = format!("out-{k}");
            let shard = format!("{k}/3");
            let run = ybs.run(["run", "tasks", "--shard", &shard, "--out", &out]);
            let tasks = task_dirs(ybs, &out);
            run.expect_code(if tasks.contains("t4") { 1 } else { 0 });
            let report = junit(ybs, &out);
            assert_eq!(report.tests as usize, tasks.len(), "{out}");
            for suite in &report.test_suites {
                let property = suite
                    .properties
                    .iter()
                    .find(|p| p.name.as_str() == "shard")
                    .map(|p| p.value.to_string());
                assert_eq!(property.as_deref(), Some(shard.as_str()), "{out}");
            }
            assert!(
                ybs.read(&format!("{out}/summary.md"))
                    .contains(&format!("Shard {shard}")),
                "{out}"
            );
            let listed = ybs.json(&format!("{out}/shard.json"));
            assert_eq!(listed["shard"], shard.as_str());
            assert_eq!(listed["tasks"].as_array().unwrap().len(), tasks.len());
            tasks
        })
        .collect()
}

#[test]
fn every_task_runs_in_exactly_one_shard_and_merges_back() {
    let ybs = Ybs::new();
    batch(&ybs);
    let shards = run_three_shards(&ybs);
    let total: usize = shards.iter().map(BTreeSet::len).sum();
    let union: BTreeSet<String> = shards.iter().flatten().cloned().collect();
    assert_eq!(total, IDS.len(), "a task ran twice: {shards:?}");
    assert_eq!(union, IDS.iter().map(|id| (*id).to_owned()).collect());

    // The split is a function of the tasks, not of the run: again, the same.
    let again = ybs.run(["run", "tasks", "--shard", "2/3", "--out", "again"]);
    assert!(again.code == 0 || again.code == 1, "{again:?}");
    assert_eq!(task_dirs(&ybs, "again"), shards[1]);

    let merge = ybs.run([
        "report", "merge", "out-1", "out-2", "out-3", "--out", "merged",
    ]);
    merge.expect_code(1);
    assert!(
        merge.stdout.contains("7 tasks: 6 passed, 1 failed"),
        "{}",
        merge.stdout
    );
    let report = junit(&ybs, "merged");
    assert_eq!(report.tests, 7);
    assert_eq!(report.failures, 1);
    assert_eq!(report.test_suites.len(), 1, "one suite per task file");
    assert_eq!(case_names(&report), IDS);
    let summary = ybs.read("merged/summary.md");
    assert!(summary.contains("7 tasks: 6 passed, 1 failed"), "{summary}");
    assert!(summary.contains("(shards 1/3, 2/3, 3/3)"), "{summary}");
    for id in IDS {
        assert!(summary.contains(&format!("| {id} | ")), "{id}: {summary}");
        assert_eq!(
            ybs.json(&format!("merged/{id}/transcript.json"))["task"]["id"],
            id
        );
        assert!(ybs.exists(&format!("merged/{id}/events.jsonl")), "{id}");
    }
    assert!(
        summary.contains("### t4: failed (checks_failed)"),
        "{summary}"
    );
}

#[test]
fn merge_passes_when_every_task_passed() {
    let ybs = Ybs::new();
    batch(&ybs);
    for k in 1..=2 {
        ybs.run([
            "run",
            "tasks",
            "--filter",
            "t[1235]",
            "--shard",
            &format!("{k}/2"),
            "--out",
            &format!("out-{k}"),
        ])
        .expect_code(0);
    }
    let merge = ybs.run(["report", "merge", "out-1", "out-2", "--out", "merged"]);
    merge.expect_code(0);
    assert_eq!(junit(&ybs, "merged").tests, 4);
}

#[test]
fn bad_shard_values_are_usage_errors() {
    let ybs = Ybs::new();
    batch(&ybs);
    for bad in ["0/3", "4/3", "1/0", "3", "a/b", "2/3/4", "-1/3"] {
        let run = ybs.run(["run", "tasks", &format!("--shard={bad}")]);
        run.expect_code(2);
        assert!(
            run.stderr.contains("K/N") || run.stderr.contains("between 1 and N"),
            "{bad}: {}",
            run.stderr
        );
        assert!(!ybs.exists("ybs-out"), "{bad}: nothing may run");
    }
}

#[test]
fn an_empty_shard_succeeds_with_empty_outputs_and_merges() {
    let ybs = Ybs::new();
    ybs.file("solo.yaml", "prompt: do it\n");
    ybs.cassette("solo.cassette.json", vec![answer("done")]);
    let mut empty = None;
    for k in 1..=2 {
        let out = format!("out-{k}");
        let run = ybs.run([
            "run",
            "solo.yaml",
            "--shard",
            &format!("{k}/2"),
            "--out",
            &out,
        ]);
        run.expect_code(0);
        if task_dirs(&ybs, &out).is_empty() {
            empty = Some(k);
        }
    }
    let k = empty.expect("one task over two shards leaves one empty");
    let out = format!("out-{k}");
    let report = junit(&ybs, &out);
    assert_eq!(report.tests, 0);
    assert_eq!(
        report.test_suites[0].properties[0].value.as_str(),
        format!("{k}/2")
    );
    let summary = ybs.read(&format!("{out}/summary.md"));
    assert!(
        summary.contains(&format!("Shard {k}/2: no tasks fell in this shard.")),
        "{summary}"
    );
    assert_eq!(ybs.json(&format!("{out}/shard.json"))["tasks"], json!([]));

    let merge = ybs.run(["report", "merge", "out-1", "out-2", "--out", "merged"]);
    merge.expect_code(0);
    assert_eq!(case_names(&junit(&ybs, "merged")), ["solo"]);
}

#[test]
fn merge_refuses_duplicates_and_empty_directories() {
    let ybs = Ybs::new();
    batch(&ybs);
    ybs.run(["run", "tasks", "--filter", "t1", "--out", "first"])
        .expect_code(0);
    ybs.run(["run", "tasks", "--filter", "t[12]", "--out", "second"])
        .expect_code(0);
    let merge = ybs.run(["report", "merge", "first", "second", "--out", "merged"]);
    merge.expect_code(2);
    assert!(
        merge
            .stderr
            .contains("task `t1` is in both `first` and `second`"),
        "{}",
        merge.stderr
    );
    assert!(merge.stderr.contains("hint:"), "{}", merge.stderr);
    assert!(!ybs.exists("merged"));

    ybs.file("nothing/readme.txt", "no transcripts here\n");
    let merge = ybs.run(["report", "merge", "first", "nothing", "--out", "merged"]);
    merge.expect_code(2);
    assert!(
        merge.stderr.contains("no task transcripts in `nothing`"),
        "{}",
        merge.stderr
    );

    let merge = ybs.run(["report", "merge", "--out", "merged"]);
    merge.expect_code(2);
}

#[test]
fn a_missing_shard_keeps_the_merge_from_passing() {
    let ybs = Ybs::new();
    batch(&ybs);
    let mut passing = None;
    for k in 1..=3 {
        let out = format!("out-{k}");
        ybs.run([
            "run",
            "tasks",
            "--filter",
            "t[1235]",
            "--shard",
            &format!("{k}/3"),
            "--out",
            &out,
        ])
        .expect_code(0);
        if !task_dirs(&ybs, &out).is_empty() {
            passing = Some(out);
        }
    }
    let merge = ybs.run(["report", "merge", &passing.unwrap(), "--out", "merged"]);
    merge.expect_code(4);
    assert!(merge.stderr.contains("is missing"), "{}", merge.stderr);
    assert!(ybs.read("merged/summary.md").contains("is missing"));
}

/// The issue-9 forgery: a shard's failing transcript edited to `passed`
/// after the run. The merge refuses it, naming the file; a transcript
/// with no recorded digest is refused too.
#[test]
fn merge_refuses_a_transcript_changed_after_the_run() {
    let ybs = Ybs::new();
    batch(&ybs);
    let shards = run_three_shards(&ybs);
    let holder = shards
        .iter()
        .position(|tasks| tasks.contains("t4"))
        .unwrap();
    let forged = format!("out-{}/t4/transcript.json", holder + 1);
    let text = ybs.read(&forged);
    let edited = text.replace("\"failed\"", "\"passed\"");
    assert_ne!(text, edited);
    ybs.file(&forged, &edited);
    let merge = ybs.run([
        "report", "merge", "out-1", "out-2", "out-3", "--out", "merged",
    ]);
    merge.expect_code(2);
    assert!(
        merge.stderr.contains(&forged) && merge.stderr.contains("does not match"),
        "{}",
        merge.stderr
    );
    assert!(!ybs.exists("merged"));

    // Put back as written, it merges again.
    ybs.file(&forged, &text);
    ybs.run([
        "report", "merge", "out-1", "out-2", "out-3", "--out", "merged",
    ])
    .expect_code(1);

    // A digest file that lost the task's entry: no recorded digest.
    let digests = format!("out-{}/digests.json", holder + 1);
    let mut recorded: Value = ybs.json(&digests);
    recorded["transcripts"]
        .as_object_mut()
        .unwrap()
        .remove("t4");
    ybs.file(&digests, &recorded.to_string());
    let merge = ybs.run([
        "report", "merge", "out-1", "out-2", "out-3", "--out", "merged-2",
    ]);
    merge.expect_code(2);
    assert!(
        merge.stderr.contains(&forged) && merge.stderr.contains("no digest"),
        "{}",
        merge.stderr
    );
}

/// Issue 21 item 12: a `digests.json` entry planted in the output
/// directory before a run, naming a task that has no transcript, is not
/// carried into the run's `digests.json`; a transcript put there after
/// the run is then refused by the merge, never counted.
#[test]
fn a_planted_digest_without_a_transcript_is_never_counted() {
    let ybs = Ybs::new();
    batch(&ybs);
    // A passing transcript, forged from a real one of another run.
    ybs.run(["run", "tasks", "--filter", "t1", "--out", "model"])
        .expect_code(0);
    let forged = ybs
        .read("model/t1/transcript.json")
        .replace("\"t1\"", "\"ghost\"");
    let digest = {
        use sha2::Digest as _;
        let hash = sha2::Sha256::digest(forged.as_bytes());
        let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
        format!("sha256:{hex}")
    };
    ybs.file(
        "out/digests.json",
        &json!({"transcripts": {"ghost": digest}}).to_string(),
    );
    ybs.run(["run", "tasks", "--filter", "t2", "--out", "out"])
        .expect_code(0);
    let recorded: Value = ybs.json("out/digests.json");
    assert!(recorded["transcripts"].get("ghost").is_none(), "{recorded}");
    assert!(recorded["transcripts"].get("t2").is_some(), "{recorded}");

    ybs.file("out/ghost/transcript.json", &forged);
    let merge = ybs.run(["report", "merge", "out", "--out", "merged"]);
    merge.expect_code(2);
    assert!(
        merge.stderr.contains("ghost/transcript.json") && merge.stderr.contains("no digest"),
        "{}",
        merge.stderr
    );
    assert!(!ybs.exists("merged"));
}

/// `--shard auto` under each engine's variables (GitLab from 1, CircleCI,
/// Buildkite, a Kubernetes Indexed Job with `auto/N`, `YBS_SHARD_*` from
/// 0): the shards merge back with every task exactly once, and each
/// shard says where it came from.
#[test]
fn shard_auto_takes_the_engines_index_and_total_and_merges_back() {
    // (engine, its variables (`K1`: the shard from 1, `K0`: from 0), flag)
    type Engine<'a> = (&'a str, [(&'a str, String); 2], &'a str);
    let engines: [Engine<'_>; 5] = [
        (
            "GitLab CI",
            [
                ("CI_NODE_INDEX", "K1".into()),
                ("CI_NODE_TOTAL", "3".into()),
            ],
            "auto",
        ),
        (
            "CircleCI",
            [
                ("CIRCLE_NODE_INDEX", "K0".into()),
                ("CIRCLE_NODE_TOTAL", "3".into()),
            ],
            "auto",
        ),
        (
            "Buildkite",
            [
                ("BUILDKITE_PARALLEL_JOB", "K0".into()),
                ("BUILDKITE_PARALLEL_JOB_COUNT", "3".into()),
            ],
            "auto",
        ),
        (
            "a Kubernetes Indexed Job",
            [
                ("JOB_COMPLETION_INDEX", "K0".into()),
                ("UNUSED", String::new()),
            ],
            "auto/3",
        ),
        (
            "ybs",
            [
                ("YBS_SHARD_INDEX", "K0".into()),
                ("YBS_SHARD_TOTAL", "3".into()),
            ],
            "auto",
        ),
    ];
    for (engine, variables, flag) in engines {
        let ybs = Ybs::new();
        batch(&ybs);
        let mut outs = Vec::new();
        let mut seen = Vec::new();
        for k in 1..=3_u32 {
            let out = format!("out-{k}");
            let mut command = ybs.command();
            for (name, value) in &variables {
                let value = match value.as_str() {
                    "K1" => k.to_string(),
                    "K0" => (k - 1).to_string(),
                    other => other.to_owned(),
                };
                command.env(name, value);
            }
            let output = command
                .args(["run", "tasks", "--shard", flag, "--out", &out])
                .output()
                .unwrap();
            let code = output.status.code().unwrap();
            assert!(code == 0 || code == 1, "{engine}: {output:?}");
            let listed = ybs.json(&format!("{out}/shard.json"));
            assert_eq!(listed["shard"], format!("{k}/3"), "{engine}");
            assert_eq!(listed["source"]["engine"], engine, "{listed}");
            let summary = ybs.read(&format!("{out}/summary.md"));
            assert!(
                summary.contains(&format!("Shard {k}/3 ({engine}: ")),
                "{summary}"
            );
            // Each task's manifest says so too.
            for task in task_dirs(&ybs, &out) {
                let manifest = &ybs.json(&format!("{out}/{task}/transcript.json"))["manifest"];
                assert_eq!(manifest["shard"]["shard"], format!("{k}/3"), "{manifest}");
                assert_eq!(manifest["shard"]["engine"], engine, "{manifest}");
            }
            seen.extend(task_dirs(&ybs, &out));
            outs.push(out);
        }
        seen.sort();
        assert_eq!(seen, IDS, "{engine}: every task exactly once");
        let mut args = vec!["report", "merge"];
        args.extend(outs.iter().map(String::as_str));
        args.extend(["--out", "merged"]);
        let merge = ybs.run(args);
        merge.expect_code(1);
        assert!(
            merge.stdout.contains("7 tasks: 6 passed, 1 failed"),
            "{}",
            merge.stdout
        );
    }
}

/// `--shard auto` with no engine's variables, or two engines that
/// disagree, is a usage error that lists what it looked for or found.
#[test]
fn shard_auto_without_or_with_disagreeing_engines_is_a_usage_error() {
    let ybs = Ybs::new();
    batch(&ybs);
    let run = ybs.run(["run", "tasks", "--shard", "auto"]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("CI_NODE_INDEX/CI_NODE_TOTAL"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
    let output = ybs
        .command()
        .env("CI_NODE_INDEX", "1")
        .env("CI_NODE_TOTAL", "2")
        .env("CIRCLE_NODE_INDEX", "1")
        .env("CIRCLE_NODE_TOTAL", "2")
        .args(["run", "tasks", "--shard", "auto"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("disagree"), "{stderr}");
    assert!(stderr.contains("CIRCLE_NODE_INDEX=1"), "{stderr}");
    assert!(!ybs.exists("ybs-out"), "outputs were made");
}

/// Twenty tasks with skewed past durations (one long, a few medium, many
/// short), answered by a cassette; `durations.json` written by hand as a
/// run writes it.
fn skewed(ybs: &Ybs) -> (Vec<String>, std::collections::BTreeMap<String, u64>) {
    let ids: Vec<String> = (0..20).map(|n| format!("job-{n:02}")).collect();
    let ms = |n: usize| match n {
        0 => 900_000,
        1..=4 => 300_000,
        _ => 20_000 + 5_000 * u64::try_from(n).unwrap(),
    };
    let durations: std::collections::BTreeMap<String, u64> = ids
        .iter()
        .enumerate()
        .map(|(n, id)| (id.clone(), ms(n)))
        .collect();
    let mut yaml = String::from("tasks:\n");
    for id in &ids {
        yaml.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
    }
    ybs.file("tasks/batch.yaml", &yaml);
    let interactions: Vec<Value> = ids
        .iter()
        .map(|id| {
            let mut turn = answer("done");
            turn["task"] = json!(id);
            turn
        })
        .collect();
    ybs.cassette("tasks/batch.cassette.json", interactions);
    ybs.file(
        "durations.json",
        &serde_json::to_string(&json!({"version": 1, "tasks": durations})).unwrap(),
    );
    (ids, durations)
}

/// The longest of `shards`' predicted times.
fn longest(
    shards: &[BTreeSet<String>],
    durations: &std::collections::BTreeMap<String, u64>,
) -> u64 {
    shards
        .iter()
        .map(|tasks| tasks.iter().map(|id| durations[id]).sum::<u64>())
        .max()
        .unwrap()
}

/// `--shard-by durations`: with a durations file from a skewed earlier
/// run, the longest of 4 shards is within 1.25× of max(mean shard,
/// longest task), a bound the hash split of the same tasks misses; every
/// task runs exactly once; every run writes `durations.json`; the console
/// predicts the shards' times; merge refuses shards of different splits.
#[test]
fn shards_balanced_by_past_durations() {
    let ybs = Ybs::new();
    let (ids, durations) = skewed(&ybs);
    let total: u64 = durations.values().sum();
    let bound = (total / 4).max(*durations.values().max().unwrap()) * 5 / 4;
    let mut by_durations = Vec::new();
    let mut by_hash = Vec::new();
    for k in 1..=4 {
        let shard = format!("{k}/4");
        let out = format!("d-{k}");
        let run = ybs.run([
            "run",
            "tasks",
            "--shard",
            &shard,
            "--shard-by",
            "durations",
            "--durations",
            "durations.json",
            "--out",
            &out,
        ]);
        run.expect_code(0);
        assert!(
            run.stderr.contains(&format!(
                "shard {shard} by durations: predicted longest shard"
            )),
            "{}",
            run.stderr
        );
        let listed = ybs.json(&format!("{out}/shard.json"));
        assert!(
            listed["durations"].as_str().unwrap().starts_with("sha256:"),
            "{listed}"
        );
        by_durations.push(task_dirs(&ybs, &out));
        let out = format!("h-{k}");
        ybs.run(["run", "tasks", "--shard", &shard, "--out", &out])
            .expect_code(0);
        by_hash.push(task_dirs(&ybs, &out));
        // Every run writes the next run's durations.
        let written = ybs.json(&format!("{out}/durations.json"));
        assert_eq!(written["version"], 1);
    }
    let mut all: Vec<String> = by_durations.iter().flatten().cloned().collect();
    all.sort();
    assert_eq!(all, ids, "every task exactly once");
    let balanced = longest(&by_durations, &durations);
    let hashed = longest(&by_hash, &durations);
    assert!(balanced <= bound, "{balanced} > {bound}");
    assert!(
        hashed > bound,
        "hashing met the bound too: {hashed} <= {bound}"
    );
    // Shards of different splits do not merge.
    let merge = ybs.run(["report", "merge", "d-1", "h-2", "--out", "mixed"]);
    assert_eq!(merge.code, 2, "{merge:?}");
    assert!(
        merge.stderr.contains("different splits"),
        "{}",
        merge.stderr
    );
    let merge = ybs.run([
        "report", "merge", "d-1", "d-2", "d-3", "d-4", "--out", "merged",
    ]);
    merge.expect_code(0);
    let merged = ybs.json("merged/durations.json");
    assert_eq!(merged["tasks"].as_object().unwrap().len(), 20);
    // A file that is no durations file is an error, not a fallback.
    ybs.file("bogus.json", "{\"hello\": 1}");
    let run = ybs.run([
        "run",
        "tasks",
        "--shard",
        "1/4",
        "--shard-by",
        "durations",
        "--durations",
        "bogus.json",
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(run.stderr.contains("bogus.json"), "{}", run.stderr);
}

/// The task directories under `dir` and each one's status.
fn statuses(ybs: &Ybs, dir: &str) -> std::collections::BTreeMap<String, String> {
    task_dirs(ybs, dir)
        .into_iter()
        .map(|task| {
            let status = ybs.json(&format!("{dir}/{task}/transcript.json"))["status"]
                .as_str()
                .unwrap()
                .to_owned();
            (task, status)
        })
        .collect()
}

/// Four simulated machines at once (a small `tools/bench/shard-sim.py`):
/// sixteen tasks whose checks sleep a skewed time (one long, a few
/// medium, many short; one fails), run once unsharded, then as four
/// `--shard auto` processes with four engines' variables, split by
/// hashing and by the first run's durations.json, and merged. Each split
/// runs every task exactly once and merges to the single run's ids and
/// statuses; by durations the longest machine is within 1.25× of
/// max(mean machine, longest task), in the first run's measured times.
#[test]
fn four_machines_at_once_run_each_task_once_and_merge_to_a_single_runs_result() {
    let ybs = Ybs::new();
    let sleeps = |n: usize| match n {
        0 => "1.2",
        1..=3 => "0.4",
        4..=6 => "0.2",
        _ => "0.05",
    };
    let ids: Vec<String> = (0..16).map(|n| format!("sim-{n:02}")).collect();
    let mut yaml = String::from("tasks:\n");
    for (n, id) in ids.iter().enumerate() {
        let fail = if n == 9 { "; false" } else { "" };
        yaml.push_str(&format!(
            "  - id: {id}\n    prompt: do {id}\n    checks: [{{name: work, run: \"sleep {}{fail}\"}}]\n",
            sleeps(n)
        ));
    }
    ybs.file("tasks/batch.yaml", &yaml);
    ybs.cassette(
        "tasks/batch.cassette.json",
        ids.iter()
            .map(|id| {
                let mut turn = answer("done");
                turn["task"] = json!(id);
                turn
            })
            .collect(),
    );
    ybs.run(["run", "tasks", "--jobs", "8", "--out", "single"])
        .expect_code(1);
    let expected = statuses(&ybs, "single");
    assert_eq!(expected.len(), 16);
    assert_eq!(expected["sim-09"], "failed");
    let measured: std::collections::BTreeMap<String, u64> =
        serde_json::from_value(ybs.json("single/durations.json")["tasks"].clone()).unwrap();
    // (variables, --shard) of machine k (1..=4).
    let machine = |k: u32| -> (Vec<(&str, String)>, &str) {
        match k {
            1 => (
                vec![("CI_NODE_INDEX", "1".into()), ("CI_NODE_TOTAL", "4".into())],
                "auto",
            ),
            2 => (
                vec![
                    ("CIRCLE_NODE_INDEX", "1".into()),
                    ("CIRCLE_NODE_TOTAL", "4".into()),
                ],
                "auto",
            ),
            3 => (
                vec![
                    ("BUILDKITE_PARALLEL_JOB", "2".into()),
                    ("BUILDKITE_PARALLEL_JOB_COUNT", "4".into()),
                ],
                "auto",
            ),
            _ => (vec![("JOB_COMPLETION_INDEX", "3".into())], "auto/4"),
        }
    };
    for split in ["hash", "durations"] {
        let children: Vec<_> = (1..=4)
            .map(|k| {
                let (variables, flag) = machine(k);
                let mut command = ybs.command();
                command.envs(variables).args([
                    "run",
                    "tasks",
                    "--jobs",
                    "1",
                    "--shard",
                    flag,
                    "--out",
                    &format!("{split}-{k}"),
                ]);
                if split == "durations" {
                    command.args([
                        "--shard-by",
                        "durations",
                        "--durations",
                        "single/durations.json",
                    ]);
                }
                command
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut shards = Vec::new();
        for (k, child) in (1..=4).zip(children) {
            let output = child.wait_with_output().unwrap();
            let code = output.status.code();
            assert!(
                code == Some(0) || code == Some(1),
                "{split} {k}: {code:?} {}",
                String::from_utf8_lossy(&output.stderr)
            );
            let out = format!("{split}-{k}");
            assert_eq!(
                ybs.json(&format!("{out}/shard.json"))["shard"],
                format!("{k}/4")
            );
            shards.push(task_dirs(&ybs, &out));
        }
        let mut all: Vec<String> = shards.iter().flatten().cloned().collect();
        all.sort();
        assert_eq!(all, ids, "{split}: every task exactly once");
        let merged = format!("{split}-merged");
        let merge = ybs.run([
            "report",
            "merge",
            &format!("{split}-1"),
            &format!("{split}-2"),
            &format!("{split}-3"),
            &format!("{split}-4"),
            "--out",
            &merged,
        ]);
        merge.expect_code(1);
        assert_eq!(
            statuses(&ybs, &merged),
            expected,
            "{split}: merged = single"
        );
        if split == "durations" {
            let total: u64 = measured.values().sum();
            let bound = (total / 4).max(*measured.values().max().unwrap()) * 5 / 4;
            let balanced = longest(&shards, &measured);
            assert!(balanced <= bound, "{balanced} ms > {bound} ms: {shards:?}");
        }
    }
}
