//! The answer reaches the next step (issue 23): `OUT/<task>/output.md`,
//! the summary, JUnit and `--print-output` (item 3); an output contract,
//! `output.schema` (item 4); the repository's `AGENTS.md` in the system
//! prompt (item 5).

use serde_json::{Value, json};

use crate::support::cassette::answer;
use crate::support::server::Server;
use crate::support::{Run, Ybs, wire};

/// A credential of GitHub's shape: masked in every output.
const GHP: &str = "ghp_Zq8Tw2Lm5Rx9Vb3Nc7Kd1Hf6Jg4Ps0Ya2Ue8X";

fn run_cassette(ybs: &Ybs, answers: &[&str], extra: &[&str]) -> Run {
    ybs.cassette("c.json", answers.iter().map(|text| answer(text)).collect());
    let mut args = vec!["run", "t.yaml", "--cassette", "c.json"];
    args.extend_from_slice(extra);
    ybs.run(args)
}

fn transcript(run: &Run) -> Value {
    run.json("ybs-out/t/transcript.json")
}

// ---- item 3: the answer reaches the next step ----

#[test]
fn the_answer_is_in_output_md_the_summary_junit_and_on_stdout() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: review the change\ncommit: false\n");
    let review = format!(
        "## Review\n\nThe change is fine.\n\n- nit: `x` could be named `count`\n- the token {GHP} must not be here\n"
    );
    let run = run_cassette(&ybs, &[&review], &["--print-output"]);
    run.expect_code(0);
    // Masked like every output.
    let output = run.read("ybs-out/t/output.md");
    assert!(
        output.starts_with("## Review\n\nThe change is fine."),
        "{output}"
    );
    assert!(
        output.contains("- nit: `x` could be named `count`"),
        "{output}"
    );
    assert!(!output.contains(GHP), "{output}");
    // stdout holds the answer alone; the result line went to stderr.
    assert_eq!(run.stdout, output, "stderr: {}", run.stderr);
    assert!(run.stderr.contains("PASS"), "{}", run.stderr);
    // The summary shows it under the task, fenced.
    let summary = run.read("ybs-out/summary.md");
    assert!(summary.contains("## Answers"), "{summary}");
    assert!(summary.contains("### t\n\n```text\n## Review"), "{summary}");
    assert!(!summary.contains(GHP));
    // JUnit carries it in <system-out>.
    let junit = run.read("ybs-out/junit.xml");
    let system_out = junit
        .split("<system-out>")
        .nth(1)
        .and_then(|rest| rest.split("</system-out>").next())
        .unwrap_or_else(|| panic!("no system-out: {junit}"));
    assert!(system_out.contains("The change is fine."), "{junit}");
    // The event and the transcript have it too.
    assert!(run.events("t").iter().any(|event| {
        event["type"] == "task.output"
            && event["content"]
                .as_str()
                .unwrap()
                .contains("The change is fine.")
    }),);
    assert_eq!(
        transcript(&run)["output"].as_str().unwrap().trim_end(),
        output.trim_end()
    );
}

#[test]
fn a_long_answer_is_folded_in_the_summary_and_a_stale_one_is_removed() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: list things\ncommit: false\n");
    let long: String = (1..=40).map(|n| format!("line {n}\n")).collect();
    run_cassette(&ybs, &[&long], &[]).expect_code(0);
    let summary = ybs.read("ybs-out/summary.md");
    assert!(
        summary.contains("<details><summary>40 lines</summary>"),
        "{summary}"
    );
    // A task that gives no answer this time leaves no answer of the last run.
    ybs.cassette(
        "c.json",
        vec![json!({"error": {"kind": "auth", "status": 401, "message": "bad key"}})],
    );
    let run = ybs.run(["run", "t.yaml", "--cassette", "c.json"]);
    assert_ne!(run.code, 0);
    assert!(!ybs.exists("ybs-out/t/output.md"), "a stale output.md");
    assert!(!run.read("ybs-out/summary.md").contains("## Answers"));
}

#[test]
fn print_output_and_json_together_are_a_usage_error() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: review the change\ncommit: false\n");
    let run = run_cassette(&ybs, &["fine"], &["--print-output", "--json"]);
    run.expect_code(2);
    assert!(run.stderr.contains("--print-output"), "{}", run.stderr);
    assert!(!ybs.exists("ybs-out"), "the run started");
}

#[test]
fn report_merge_carries_the_answers() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: review the change\ncommit: false\n");
    ybs.cassette("c.json", vec![answer("The change is fine.")]);
    ybs.run(["run", "t.yaml", "--cassette", "c.json", "--out", "a"])
        .expect_code(0);
    let run = ybs.run(["report", "merge", "a", "--out", "merged"]);
    run.expect_code(0);
    assert_eq!(run.read("merged/t/output.md"), "The change is fine.\n");
    assert!(
        run.read("merged/summary.md")
            .contains("The change is fine.")
    );
    assert!(run.read("merged/junit.xml").contains("The change is fine."));
}

// ---- item 4: an output contract ----

const CONTRACT: &str = "prompt: review the change\ncommit: false\noutput:\n  attempts: 2\n  schema:\n    type: object\n    required: [verdict, issues]\n    additionalProperties: false\n    properties:\n      verdict: {enum: [approve, reject]}\n      issues: {type: array, items: {type: string}}\n";

#[test]
fn a_broken_answer_goes_back_with_the_validators_messages_until_it_is_valid() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", CONTRACT);
    let server = Server::start(vec![
        wire::openai_sse_answer("The change looks fine to me."),
        wire::openai_sse_answer("```json\n{\"verdict\": \"maybe\", \"issues\": []}\n```"),
        wire::openai_sse_answer("{\"verdict\": \"approve\", \"issues\": [\"naming\"]}"),
    ]);
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ]);
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last_user = |index: usize| -> String {
        let body = requests[index].json();
        let messages = body["messages"].as_array().unwrap();
        messages
            .iter()
            .rev()
            .find(|message| message["role"] == "user")
            .unwrap()["content"]
            .to_string()
    };
    assert!(last_user(1).contains("not JSON"), "{}", last_user(1));
    assert!(last_user(2).contains("/verdict"), "{}", last_user(2));
    assert!(last_user(2).contains("maybe"), "{}", last_user(2));
    let value = run.json("ybs-out/t/output.json");
    assert_eq!(value, json!({"verdict": "approve", "issues": ["naming"]}));
    assert_eq!(transcript(&run)["output_json"], value);
    let summary = run.read("ybs-out/summary.md");
    assert!(
        summary.contains("```json\n{\n  \"verdict\": \"approve\""),
        "{summary}"
    );
}

#[test]
fn a_task_that_never_answers_validly_fails_with_output_invalid() {
    let ybs = Ybs::new();
    // No `attempts`: `fix_attempts` (0) bounds it.
    ybs.file(
        "t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema: {type: object, required: [verdict]}\n",
    );
    let run = run_cassette(&ybs, &["{\"verdikt\": \"approve\"}"], &[]);
    run.expect_code(1);
    let transcript = transcript(&run);
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "output_invalid");
    assert!(
        transcript["message"].as_str().unwrap().contains("verdict"),
        "{transcript}"
    );
    assert!(!ybs.exists("ybs-out/t/output.json"));
    // The answer it gave is still the task's output.
    assert_eq!(
        run.read("ybs-out/t/output.md"),
        "{\"verdikt\": \"approve\"}\n"
    );
    let junit = run.read("ybs-out/junit.xml");
    assert!(junit.contains("type=\"output_invalid\""), "{junit}");
}

#[test]
fn the_schema_is_checked_when_the_file_is_loaded() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: review\noutput:\n  schema: {type: objekt}\n",
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("t.yaml:3:"), "{}", run.stderr);
    assert!(run.stderr.contains("invalid JSON Schema"), "{}", run.stderr);
    // A schema is never a way to read a file or fetch a URL.
    ybs.file(
        "t.yaml",
        "prompt: review\noutput:\n  schema: {$ref: 'file:///etc/hostname'}\n",
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("t.yaml:3:"), "{}", run.stderr);
    ybs.file("t.yaml", "prompt: review\noutput:\n  schemas: {}\n");
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("`schemas`"), "{}", run.stderr);
    // `schema_file`, relative to the task file.
    ybs.file(
        "review.schema.json",
        "{\"type\": \"object\", \"required\": [\"verdict\"]}",
    );
    ybs.file(
        "t.yaml",
        "prompt: review\ncommit: false\noutput:\n  schema_file: review.schema.json\n",
    );
    ybs.run(["validate", "t.yaml", "--provider", "ollama"])
        .expect_code(0);
    let run = run_cassette(&ybs, &["{\"verdict\": \"approve\"}"], &[]);
    run.expect_code(0);
    assert_eq!(
        run.json("ybs-out/t/output.json"),
        json!({"verdict": "approve"})
    );
}

// ---- item 5: AGENTS.md ----

fn git_init(dir: &std::path::Path) {
    std::fs::create_dir_all(dir).unwrap();
    let status = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success());
}

/// Runs `t.yaml` (workdir `repo/app`) against a server that answers once;
/// the system prompt sent and the transcript.
fn system_prompt_of(ybs: &Ybs) -> (String, Value) {
    let server = Server::start(vec![wire::openai_sse_answer("done")]);
    let endpoint = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ]);
    run.expect_code(0);
    let body = server.requests()[0].json();
    let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
    (system, transcript(&run))
}

#[test]
fn agents_md_of_the_workdir_and_its_parents_goes_into_the_system_prompt() {
    let ybs = Ybs::new();
    git_init(&ybs.path().join("repo"));
    ybs.file(
        "repo/AGENTS.md",
        &format!("Run `make lint` before you answer.\nToken: {GHP}\n"),
    );
    ybs.file("repo/app/AGENTS.md", "In app/, tests live in spec/.\n");
    // Above the repository root: not read.
    ybs.file("AGENTS.md", "OUTSIDE THE REPOSITORY\n");
    let task = "prompt: do it\ncommit: false\nworkdir: repo/app\n";
    ybs.file("t.yaml", task);
    let (system, transcript) = system_prompt_of(&ybs);
    let root = system
        .find("Run `make lint` before you answer.")
        .expect(&system);
    let app = system.find("In app/, tests live in spec/.").expect(&system);
    assert!(root < app, "outermost first: {system}");
    assert!(system.contains("--- app/AGENTS.md ---"), "{system}");
    assert!(!system.contains("OUTSIDE THE REPOSITORY"), "{system}");
    assert!(!system.contains(GHP), "not masked: {system}");
    assert_eq!(
        transcript["manifest"]["context_files"],
        json!(["AGENTS.md", "app/AGENTS.md"])
    );
    let with = transcript["llm_calls"][0]["request_tokens_estimate"]
        .as_u64()
        .unwrap();

    // `context: {agents_md: false}` leaves them out, and the request is
    // smaller by about their size.
    ybs.file(
        "repo/app/AGENTS.md",
        &"In app/, tests live in spec/.\n".repeat(100),
    );
    let (system, transcript) = system_prompt_of(&ybs);
    let bigger = transcript["llm_calls"][0]["request_tokens_estimate"]
        .as_u64()
        .unwrap();
    assert!(bigger > with + 500, "{bigger} vs {with}: {system}");
    ybs.file("t.yaml", &format!("{task}context: {{agents_md: false}}\n"));
    let (system, transcript) = system_prompt_of(&ybs);
    assert!(!system.contains("make lint"), "{system}");
    assert!(transcript["manifest"].get("context_files").is_none());
    let without = transcript["llm_calls"][0]["request_tokens_estimate"]
        .as_u64()
        .unwrap();
    assert!(without < with, "{without} vs {with}");
}

#[test]
fn agents_md_is_bounded_and_never_read_through_a_link() {
    let ybs = Ybs::new();
    git_init(&ybs.path().join("repo"));
    ybs.file("secret.txt", "THE HOST'S SECRET FILE\n");
    std::os::unix::fs::symlink(
        ybs.path().join("secret.txt"),
        ybs.path().join("repo/AGENTS.md"),
    )
    .unwrap();
    ybs.file(
        "repo/app/AGENTS.md",
        &"A long instruction line.\n".repeat(1000),
    );
    ybs.file(
        "t.yaml",
        "prompt: do it\ncommit: false\nworkdir: repo/app\n",
    );
    let (system, transcript) = system_prompt_of(&ybs);
    assert!(!system.contains("THE HOST'S SECRET FILE"), "{system}");
    assert!(system.contains("[app/AGENTS.md cut:"), "{system}");
    assert!(system.len() < 8 * 1024 + 2000, "{}", system.len());
    let notes = transcript["notes"].to_string();
    assert!(notes.contains("AGENTS.md not read"), "{notes}");
    assert!(notes.contains("symbolic link"), "{notes}");
}
