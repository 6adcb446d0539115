//! The model sees the contract it is held to (docs/task-files.md, "Output
//! contracts"): an `output:` task offers the final-answer tool whose input
//! schema is the output schema, in the first request, on every provider;
//! the system prompt says how to answer and names the checks; a wrong
//! answer comes back with the schema part it broke; a plain JSON answer
//! still passes; a task without `output:` gets nothing of it.

use serde_json::{Value, json};

use crate::support::server::{Request, Server};
use crate::support::{Run, Ybs, wire};

/// Field names and values that appear nowhere in the prompt.
const REVIEW: &str = "prompt: Review the change in change.diff.\ncommit: false\npolicy:\n  allow: [read_file]\noutput:\n  attempts: 2\n  schema:\n    type: object\n    required: [zorblat_verdict, quintex_risk]\n    additionalProperties: false\n    properties:\n      zorblat_verdict: {enum: [greenlight, sendback]}\n      quintex_risk: {type: integer, minimum: 0, maximum: 9}\nchecks:\n  - name: diff present\n    run: test -s change.diff\n";

fn run_against(ybs: &Ybs, server: &Server, provider: &str) -> Run {
    let endpoint = match provider {
        "anthropic" | "ollama" => server.url.clone(),
        _ => format!("{}/v1", server.url),
    };
    ybs.run([
        "run",
        "t.yaml",
        "--provider",
        provider,
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ])
}

fn review_task() -> Ybs {
    let ybs = Ybs::new()
        .env("OPENAI_API_KEY", "sk-test")
        .env("ANTHROPIC_API_KEY", "sk-ant-test");
    ybs.file("t.yaml", REVIEW)
        .file("change.diff", "-let x = 1;\n+let count = 1;\n");
    ybs
}

/// The final-answer tool's schema in a request of `provider`'s wire.
fn answer_tool(request: &Request, provider: &str) -> Value {
    let body = request.json();
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    let tool = tools
        .iter()
        .find(|tool| tool["name"] == "final_answer" || tool["function"]["name"] == "final_answer")
        .unwrap_or_else(|| panic!("no final_answer tool: {body}"))
        .clone();
    match provider {
        "anthropic" => tool["input_schema"].clone(),
        _ => tool["function"]["parameters"].clone(),
    }
}

fn system_text(request: &Request) -> String {
    let body = request.json();
    match &body["system"] {
        Value::Array(blocks) => blocks[0]["text"].as_str().unwrap().to_owned(),
        Value::String(text) => text.clone(),
        _ => body["messages"][0]["content"].as_str().unwrap().to_owned(),
    }
}

#[test]
fn the_first_request_carries_the_schema_how_to_answer_and_the_checks_on_every_wire() {
    for provider in ["openai", "anthropic", "ollama"] {
        let ybs = review_task();
        let answer = "{\"zorblat_verdict\": \"greenlight\", \"quintex_risk\": 1}";
        let reply = match provider {
            "openai" => wire::openai_sse_answer(answer),
            "anthropic" => wire::anthropic_sse_answer(answer),
            _ => wire::ollama_answer(answer),
        };
        let server = Server::start(vec![reply]);
        let run = run_against(&ybs, &server, provider);
        // A plain JSON text answer still passes.
        run.expect_code(0);
        let first = &server.requests()[0];
        let schema = answer_tool(first, provider);
        let text = schema.to_string();
        for name in ["zorblat_verdict", "quintex_risk", "greenlight", "sendback"] {
            assert!(text.contains(name), "{provider}: {name} not in {text}");
        }
        let system = system_text(first);
        assert!(system.contains("calling `final_answer`"), "{system}");
        assert!(!system.contains("short summary"), "{system}");
        assert!(
            system.contains("- diff present: `test -s change.diff`"),
            "{system}"
        );
        assert_eq!(
            run.json("ybs-out/t/output.json"),
            json!({"zorblat_verdict": "greenlight", "quintex_risk": 1})
        );
    }
}

#[test]
fn a_wrong_answer_comes_back_with_the_path_and_the_allowed_values_and_a_call_is_the_answer() {
    let ybs = review_task();
    let server = Server::start(vec![
        wire::openai_sse_answer("Looks good to me, ship it."),
        wire::openai_sse_call(
            "a1",
            "final_answer",
            &json!({"zorblat_verdict": "maybe", "quintex_risk": 1}),
        ),
        wire::openai_sse_call(
            "a2",
            "final_answer",
            &json!({"zorblat_verdict": "sendback", "quintex_risk": 7}),
        ),
    ]);
    let run = run_against(&ybs, &server, "openai");
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let last_user = |index: usize| -> String {
        let body = requests[index].json();
        body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .find(|message| message["role"] == "user")
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    // Prose: the whole schema and how to answer.
    let told = last_user(1);
    assert!(told.contains("call `final_answer`"), "{told}");
    assert!(told.contains("quintex_risk"), "{told}");
    // A call that breaks the schema: the path and the allowed values.
    let told = last_user(2);
    assert!(told.contains("`/zorblat_verdict`"), "{told}");
    assert!(told.contains("\"greenlight\",\"sendback\""), "{told}");
    // The call's result says it was taken; it is no step's tool call.
    let body = requests[2].json();
    let results: Vec<&Value> = body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 1, "{body}");
    assert!(
        results[0]["content"]
            .as_str()
            .unwrap()
            .contains("answer was received")
    );
    let transcript = run.json("ybs-out/t/transcript.json");
    assert!(
        transcript["tool_calls"].as_array().unwrap().is_empty(),
        "{transcript}"
    );
    assert_eq!(
        run.json("ybs-out/t/output.json"),
        json!({"zorblat_verdict": "sendback", "quintex_risk": 7})
    );
    // The answer as the call gave it, pretty-printed.
    assert_eq!(
        run.read("ybs-out/t/output.md"),
        "{\n  \"zorblat_verdict\": \"sendback\",\n  \"quintex_risk\": 7\n}\n"
    );
}

#[test]
fn a_task_without_output_gets_no_answer_tool_and_checks_can_be_left_out() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    ybs.file(
        "t.yaml",
        "prompt: Say hi.\ncommit: false\ncontext: {checks: false}\nchecks:\n  - name: always\n    run: \"true\"\n",
    );
    let server = Server::start(vec![wire::openai_sse_answer("hi")]);
    let run = run_against(&ybs, &server, "openai");
    run.expect_code(0);
    let body = server.requests()[0].json();
    assert!(!body.to_string().contains("final_answer"), "{body}");
    let system = system_text(&server.requests()[0]);
    assert!(system.contains("short summary"), "{system}");
    assert!(!system.contains("`true`"), "{system}");
}

#[test]
fn a_schema_larger_than_a_quarter_of_the_window_is_an_error_at_load() {
    let ybs = Ybs::new();
    let enum_values: Vec<String> = (0..400).map(|n| format!("value-{n}")).collect();
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\noutput:\n  schema: {{type: object, properties: {{v: {{enum: [{}]}}}}}}\n",
            enum_values.join(", ")
        ),
    );
    ybs.file(".ybs.json", "{\"context\": {\"max_tokens\": 4000}}");
    let run = ybs.run(["validate", "t.yaml"]);
    assert_eq!(run.code, 2, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stderr
            .contains("more than a quarter of the 4000-token context window"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("t.yaml:1:1"), "{}", run.stderr);
}

/// The schema survives a pause: after `ybs resume`, the next request
/// still offers the final-answer tool, and a call to it is the answer.
#[test]
fn the_answer_tool_comes_back_after_a_pause() {
    let ybs = review_task();
    ybs.file(
        "t.yaml",
        &format!(
            "{REVIEW}tools:\n  caller:\n    - name: ask_owner\n      description: Ask the code owner\n      parameters: {{type: object, properties: {{q: {{type: string}}}}}}\n"
        )
        .replace("allow: [read_file]", "allow: [read_file, ask_owner]"),
    );
    let server = Server::start(vec![
        wire::openai_sse_call("c1", "ask_owner", &json!({"q": "ok?"})),
        wire::openai_sse_call(
            "c2",
            "final_answer",
            &json!({"zorblat_verdict": "greenlight", "quintex_risk": 0}),
        ),
    ]);
    let endpoint = format!("{}/v1", server.url);
    let provider = [
        "--provider",
        "openai",
        "--endpoint",
        &endpoint,
        "--model",
        "m",
    ];
    let mut args = vec!["run", "t.yaml"];
    args.extend_from_slice(&provider);
    ybs.run(args).expect_code(3);
    ybs.file(
        "r.json",
        "{\"results\": [{\"id\": \"c1\", \"output\": \"fine by me\"}]}",
    );
    let mut args = vec!["resume", "ybs-out", "--results", "r.json"];
    args.extend_from_slice(&provider);
    let resumed = ybs.run(args);
    resumed.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let schema = answer_tool(&requests[1], "openai").to_string();
    assert!(schema.contains("zorblat_verdict"), "{schema}");
    assert_eq!(
        resumed.json("ybs-out/t/output.json"),
        json!({"zorblat_verdict": "greenlight", "quintex_risk": 0})
    );
}
