//! The example pipelines for other CI engines (issue 38, item 3):
//! docs/examples/gitlab/.gitlab-ci.yml, docs/examples/buildkite/pipeline.yml
//! and docs/examples/kubernetes/indexed-job.yaml. Each is parsed, validated
//! against the engine's published schema (PyPI `check-jsonschema`'s
//! vendored GitLab CI and Buildkite schemas, `kubernetes-validate`'s
//! Kubernetes schemas; .ci/run passes their paths in
//! `YBS_CHECK_JSONSCHEMA` and `YBS_KUBERNETES_VALIDATE`), and its `ybs`
//! commands are run as the engine would run them: every shard with the
//! engine's variables in one scratch repository, then the merge, which
//! must see every task exactly once.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Map, Value, json};
use ybs::core::decode::yaml::{self, NodeKind};

use crate::support::Ybs;
use crate::support::cassette::answer;

const IDS: [&str; 5] = ["a", "b", "c", "d", "e"];

fn example(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples")
        .join(relative)
}

fn value(node: &yaml::Node) -> Value {
    match &node.kind {
        NodeKind::Null => Value::Null,
        NodeKind::Bool(value) => Value::Bool(*value),
        NodeKind::Int(value) => json!(value),
        NodeKind::Float(value) => json!(value),
        NodeKind::Str(text) => Value::String(text.clone()),
        NodeKind::Seq(items) => Value::Array(items.iter().map(value).collect()),
        NodeKind::Map(entries) => Value::Object(
            entries
                .iter()
                .map(|(key, node)| (key.name.clone(), value(node)))
                .collect::<Map<String, Value>>(),
        ),
    }
}

/// The YAML documents of an example file.
fn documents(relative: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(example(relative)).unwrap();
    text.split("\n---\n")
        .map(|document| {
            let (node, errors) = yaml::parse(document);
            assert!(errors.is_empty(), "{relative}: {errors:?}");
            value(&node.unwrap_or_else(|| panic!("{relative}: an empty document")))
        })
        .collect()
}

/// The lines of a script (a string, or a list of strings) that run ybs.
fn ybs_lines(script: &Value) -> Vec<String> {
    let texts: Vec<&str> = match script {
        Value::String(text) => vec![text],
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        other => panic!("not a script: {other}"),
    };
    texts
        .iter()
        .flat_map(|text| text.lines())
        .map(str::trim)
        .filter(|line| line.starts_with("ybs "))
        .map(str::to_owned)
        .collect()
}

/// A scratch repository with a replayed batch of five passing tasks.
fn scratch() -> Ybs {
    let ybs = Ybs::new();
    let mut tasks = String::from("tasks:\n");
    let mut turns = Vec::new();
    for id in IDS {
        tasks.push_str(&format!("  - id: {id}\n    prompt: do {id}\n"));
        let mut turn = answer(&format!("{id} done"));
        turn["task"] = json!(id);
        turns.push(turn);
    }
    ybs.file("tasks/batch.yaml", &tasks);
    ybs.cassette("tasks/batch.cassette.json", turns);
    ybs
}

/// Runs `line` with `sh -c` in `dir`, the test's ybs first on `PATH` and
/// `env` set, as the engine's shell would; returns its exit code.
fn shell(ybs: &Ybs, dir: &Path, line: &str, env: &[(&str, String)]) -> i32 {
    let binary = assert_cmd::cargo::cargo_bin("ybs");
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(line)
        .current_dir(dir)
        .env_clear()
        .env(
            "PATH",
            format!("{}:/usr/bin:/bin", binary.parent().unwrap().display()),
        )
        .env("HOME", ybs.home())
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1");
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().unwrap();
    let code = output.status.code().unwrap_or(-1);
    assert!(
        code == 0,
        "`{line}` with {env:?}: exit {code}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    code
}

/// Runs the shard job's `ybs` lines once per shard (`env_of(k)`: the
/// engine's variables of shard k, from 0), then the merge job's in
/// `merge_dir`, and checks that the merge saw every task exactly once.
fn run_pipeline(
    ybs: &Ybs,
    shard_lines: &[String],
    shards: u32,
    env_of: &dyn Fn(u32) -> Vec<(&'static str, String)>,
    merge_lines: &[String],
    merge_dir: &Path,
    merged: &str,
) {
    assert!(
        shard_lines.iter().any(|line| line.starts_with("ybs run ")),
        "{shard_lines:?}"
    );
    assert!(
        merge_lines
            .iter()
            .any(|line| line.starts_with("ybs report merge ")),
        "{merge_lines:?}"
    );
    for k in 0..shards {
        for line in shard_lines {
            shell(ybs, ybs.path(), line, &env_of(k));
        }
    }
    for line in merge_lines {
        shell(ybs, merge_dir, line, &[]);
    }
    let junit = std::fs::read_to_string(merge_dir.join(merged).join("junit.xml")).unwrap();
    for id in IDS {
        assert_eq!(
            junit.matches(&format!("name=\"{id}\"")).count(),
            1,
            "{id} once in {junit}"
        );
    }
    let summary = std::fs::read_to_string(merge_dir.join(merged).join("summary.md")).unwrap();
    assert!(summary.contains("5 tasks: 5 passed"), "{summary}");
}

#[test]
fn the_gitlab_example_shards_with_parallel_and_merges() {
    let pipeline = documents("gitlab/.gitlab-ci.yml").remove(0);
    let agents = &pipeline["agents"];
    let report = &pipeline["report"];
    let total = agents["parallel"].as_u64().expect("agents: parallel: N") as u32;
    assert!(total > 1);
    assert_eq!(agents["artifacts"]["when"], "always", "{agents}");
    assert_eq!(report["needs"][0]["job"], "agents", "{report}");
    assert_eq!(report["when"], "always", "{report}");
    let shard_lines = ybs_lines(&agents["script"]);
    assert!(
        shard_lines
            .iter()
            .any(|line| line.contains("--shard auto ")),
        "{shard_lines:?}"
    );
    let ybs = scratch();
    run_pipeline(
        &ybs,
        &shard_lines,
        total,
        &|k| {
            vec![
                ("CI_NODE_INDEX", (k + 1).to_string()),
                ("CI_NODE_TOTAL", total.to_string()),
            ]
        },
        &ybs_lines(&report["script"]),
        ybs.path(),
        "ybs-out",
    );
}

#[test]
fn the_buildkite_example_shards_with_parallelism_and_merges() {
    let pipeline = documents("buildkite/pipeline.yml").remove(0);
    let steps = pipeline["steps"].as_array().unwrap();
    let step = |key: &str| {
        steps
            .iter()
            .find(|step| step["key"] == key)
            .unwrap_or_else(|| panic!("no step {key}"))
    };
    let agents = step("agents");
    let report = step("report");
    let total = agents["parallelism"].as_u64().expect("parallelism: N") as u32;
    assert!(total > 1);
    assert_eq!(report["depends_on"][0]["step"], "agents", "{report}");
    assert_eq!(report["depends_on"][0]["allow_failure"], true, "{report}");
    let ybs = scratch();
    run_pipeline(
        &ybs,
        &ybs_lines(&agents["command"]),
        total,
        &|k| {
            vec![
                ("BUILDKITE_PARALLEL_JOB", k.to_string()),
                ("BUILDKITE_PARALLEL_JOB_COUNT", total.to_string()),
            ]
        },
        &ybs_lines(&report["command"]),
        ybs.path(),
        "ybs-out",
    );
}

#[test]
fn the_kubernetes_example_is_an_indexed_job_then_a_merge_job() {
    let documents = documents("kubernetes/indexed-job.yaml");
    let job = |name: &str| {
        documents
            .iter()
            .find(|document| document["kind"] == "Job" && document["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Job {name}"))
    };
    let shards = job("ybs-shards");
    let merge = job("ybs-merge");
    assert_eq!(shards["spec"]["completionMode"], "Indexed");
    let completions = shards["spec"]["completions"].as_u64().unwrap() as u32;
    let container = &shards["spec"]["template"]["spec"]["containers"][0];
    let shard_lines = ybs_lines(&container["args"]);
    assert!(
        shard_lines
            .iter()
            .any(|line| line.contains(&format!("--shard auto/{completions} "))),
        "--shard auto/N with N = completions: {shard_lines:?}"
    );
    // The outputs go to the volume the merge Job reads.
    let mount = |container: &Value, name: &str| {
        container["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|mount| mount["name"] == name)
            .map(|mount| mount["mountPath"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let results = mount(container, "results");
    let merger = &merge["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(mount(merger, "results"), results);
    assert_eq!(merger["workingDir"], results.as_str());
    let claim = |job: &Value| {
        job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|volume| volume["name"] == "results")
            .unwrap()["persistentVolumeClaim"]["claimName"]
            .clone()
    };
    assert_eq!(claim(shards), claim(merge));
    assert!(documents.iter().any(|document| {
        document["kind"] == "PersistentVolumeClaim" && document["metadata"]["name"] == claim(shards)
    }));

    // The volume is a directory of the scratch repository here.
    let ybs = scratch();
    let volume = ybs.path().join("volume");
    std::fs::create_dir(&volume).unwrap();
    let local = |lines: Vec<String>| -> Vec<String> {
        lines
            .iter()
            .map(|line| line.replace(&format!("{results}/"), &format!("{}/", volume.display())))
            .collect()
    };
    run_pipeline(
        &ybs,
        &local(shard_lines),
        completions,
        &|k| vec![("JOB_COMPLETION_INDEX", k.to_string())],
        &local(ybs_lines(&merger["args"])),
        &volume,
        "merged",
    );
}

/// A validator from .ci/run's venv, or `None` (and a `SKIPPED:` line).
fn validator(variable: &str) -> Option<String> {
    let found = std::env::var(variable).ok();
    if found.is_none() {
        println!("SKIPPED: {variable} is unset (.ci/run sets it)");
    }
    found
}

/// Runs `program args... file` on `file` and on a copy of it with `from`
/// replaced by `to`: the first must pass, the broken copy must not.
fn validates(program: &str, args: &[&str], file: &Path, from: &str, to: &str) {
    let run = |path: &Path| Command::new(program).args(args).arg(path).output().unwrap();
    let output = run(file);
    assert!(
        output.status.success(),
        "{program} {}:\n{}{}",
        file.display(),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let text = std::fs::read_to_string(file).unwrap();
    assert!(text.contains(from), "{from}");
    let dir = tempfile::TempDir::new().unwrap();
    let broken = dir.path().join(file.file_name().unwrap());
    std::fs::write(&broken, text.replacen(from, to, 1)).unwrap();
    let output = run(&broken);
    assert!(
        !output.status.success(),
        "{program} accepted {to:?}:\n{}",
        String::from_utf8_lossy(&output.stdout)
    );
}

#[test]
fn the_examples_pass_their_engines_schemas() {
    if let Some(check) = validator("YBS_CHECK_JSONSCHEMA") {
        validates(
            &check,
            &["--builtin-schema", "vendor.gitlab-ci"],
            &example("gitlab/.gitlab-ci.yml"),
            "  parallel: 4",
            "  parallel: four",
        );
        validates(
            &check,
            &["--builtin-schema", "vendor.buildkite"],
            &example("buildkite/pipeline.yml"),
            "    parallelism: 4",
            "    parallelism: four",
        );
    }
    if let Some(validate) = validator("YBS_KUBERNETES_VALIDATE") {
        validates(
            &validate,
            &["--strict", "--quiet"],
            &example("kubernetes/indexed-job.yaml"),
            "  completionMode: Indexed",
            "  completionMod: Indexed",
        );
    }
}
