//! Prompt caching (docs/providers.md, "Prompt caching"): a scripted server
//! that bills like the vendors do — a prefix of at least the minimum
//! cacheable length, seen before, is billed as a cache read — runs
//! multi-step tasks on the Anthropic and OpenAI wires. It checks the
//! breakpoints, the cached counts ybs reads, the cost it reports against
//! the cached-rate arithmetic, the stable prefix of every request, and the
//! OpenAI cache key; and it measures what caching saves on a 20-step task.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use super::{Keys, scratch};
use crate::support::server::{Reply, Request, Server};
use crate::support::wire::{sse_done, sse_events};
use crate::support::{Run, Ybs};

/// Anthropic's and OpenAI's minimum cacheable prompt, in tokens.
const MIN_CACHEABLE: usize = 1024;
/// Tokens per byte of the emulation (the usual rule of thumb).
const BYTES_PER_TOKEN: usize = 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wire {
    Anthropic,
    OpenAi,
}

/// What the server billed one request.
#[derive(Debug, Clone, Copy, Default)]
struct Billed {
    input: u64,
    read: u64,
    written: u64,
    output: u64,
}

/// The server's prompt cache: the prefixes written so far.
struct Cache {
    wire: Wire,
    prefixes: Mutex<Vec<String>>,
    billed: Mutex<Vec<Billed>>,
}

/// `value` without its `cache_control` fields.
fn without_breakpoints(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(key, _)| *key != "cache_control")
                .map(|(key, value)| (key.clone(), without_breakpoints(value)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_breakpoints).collect()),
        other => other.clone(),
    }
}

fn tokens(text: &str) -> u64 {
    u64::try_from(text.len() / BYTES_PER_TOKEN).unwrap()
}

impl Cache {
    fn new(wire: Wire) -> Self {
        Self {
            wire,
            prefixes: Mutex::new(Vec::new()),
            billed: Mutex::new(Vec::new()),
        }
    }

    /// The prompt as the server reads it, in the order it is cached:
    /// tools, system, then each message; the places a cached prefix may
    /// end (every boundary); and where the request asks to write the
    /// cache (Anthropic: the breakpoints; OpenAI: everything).
    fn prompt(&self, body: &Value) -> (String, Vec<usize>, Vec<usize>) {
        let mut text = String::new();
        let mut ends = Vec::new();
        let mut writes = Vec::new();
        // The cache keys on the content, not on where the breakpoints are.
        let mut push = |part: &Value, text: &mut String| {
            let marked = part.to_string().contains("cache_control");
            text.push_str(&without_breakpoints(part).to_string());
            ends.push(text.len());
            if self.wire == Wire::OpenAi || marked {
                writes.push(text.len());
            }
        };
        if let Some(tools) = body.get("tools") {
            push(tools, &mut text);
        }
        if let Some(system) = body.get("system") {
            push(system, &mut text);
        }
        for message in body["messages"].as_array().unwrap() {
            push(message, &mut text);
        }
        (text, ends, writes)
    }

    /// Bills one request: the longest prefix written before is read; the
    /// longest one it asks to write past that is written (both only from
    /// the minimum length up); the rest is plain input.
    fn bill(&self, body: &Value, output: u64) -> Billed {
        let (text, ends, writes) = self.prompt(body);
        let mut prefixes = self.prefixes.lock().unwrap();
        let long_enough = |end: &usize| *end / BYTES_PER_TOKEN >= MIN_CACHEABLE;
        let read_end = ends
            .iter()
            .copied()
            .filter(long_enough)
            .filter(|end| {
                prefixes
                    .iter()
                    .any(|prefix| prefix.as_str() == &text[..*end])
            })
            .max()
            .unwrap_or(0);
        let write_end = writes
            .iter()
            .copied()
            .filter(long_enough)
            .max()
            .unwrap_or(0)
            .max(read_end);
        for end in writes.iter().copied().filter(long_enough) {
            if !prefixes
                .iter()
                .any(|prefix| prefix.as_str() == &text[..end])
            {
                prefixes.push(text[..end].to_owned());
            }
        }
        let total = tokens(&text);
        let read = tokens(&text[..read_end]);
        let written = if self.wire == Wire::Anthropic {
            tokens(&text[..write_end]) - read
        } else {
            0
        };
        let billed = Billed {
            input: total,
            read,
            written,
            output,
        };
        self.billed.lock().unwrap().push(billed);
        billed
    }
}

/// A turn that reads `notes-STEP.txt` (steps before `steps`) or the
/// answer.
fn reply(wire: Wire, step: usize, steps: usize, billed: Billed) -> Reply {
    let call = step < steps;
    let id = format!("call_{step}");
    match wire {
        Wire::Anthropic => {
            let block = if call {
                json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}})
            } else {
                json!({"type": "text", "text": ""})
            };
            let delta = if call {
                json!({"type": "input_json_delta", "partial_json": format!("{{\"path\": \"notes-{step}.txt\"}}")})
            } else {
                json!({"type": "text_delta", "text": "done"})
            };
            Reply::sse(&sse_events(&[
                json!({"type": "message_start", "message": {"id": format!("msg_{step}"), "type": "message",
                    "role": "assistant", "content": [], "model": "m", "stop_reason": null,
                    "usage": {"input_tokens": billed.input - billed.read - billed.written,
                              "cache_read_input_tokens": billed.read,
                              "cache_creation_input_tokens": billed.written,
                              "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": block}),
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta",
                       "delta": {"stop_reason": if call { "tool_use" } else { "end_turn" }},
                       "usage": {"output_tokens": billed.output}}),
                json!({"type": "message_stop"}),
            ]))
        }
        Wire::OpenAi => {
            let delta = if call {
                json!({"role": "assistant", "tool_calls": [{"index": 0, "id": id, "type": "function",
                    "function": {"name": "read_file", "arguments": format!("{{\"path\": \"notes-{step}.txt\"}}")}}]})
            } else {
                json!({"role": "assistant", "content": "done"})
            };
            Reply::sse(&sse_done(&[
                json!({"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
                json!({"id": "c", "choices": [{"index": 0, "delta": {},
                       "finish_reason": if call { "tool_calls" } else { "stop" }}]}),
                json!({"id": "c", "choices": [], "usage": {"prompt_tokens": billed.input,
                       "completion_tokens": billed.output, "total_tokens": billed.input + billed.output,
                       "prompt_tokens_details": {"cached_tokens": billed.read}}}),
            ]))
        }
    }
}

/// A server that bills like `wire`'s vendor and answers a task of
/// `steps` steps (`steps - 1` reads, then the answer).
fn billing_server(wire: Wire, steps: usize) -> (Server, std::sync::Arc<Cache>) {
    let cache = std::sync::Arc::new(Cache::new(wire));
    let count = AtomicUsize::new(0);
    let billing = std::sync::Arc::clone(&cache);
    let server = Server::start_checked(Vec::new(), move |request: &Request| {
        let step = count.fetch_add(1, Ordering::SeqCst) + 1;
        let billed = billing.bill(&request.json(), 20);
        Some(reply(wire, step, steps, billed))
    });
    (server, cache)
}

/// `t.yaml` whose model reads a file a step until told to answer, and
/// the run.
fn run_task(wire: Wire, steps: usize, config: Option<&str>) -> (Ybs, Run, Server, Vec<Billed>) {
    let (ybs, _keys): (Ybs, Keys) =
        scratch("prompt: Read the notes one by one, then say done.\npolicy:\n  default: allow\n");
    for step in 1..steps {
        ybs.file(
            &format!("notes-{step}.txt"),
            &"a line of notes to read\n".repeat(20),
        );
    }
    let (server, cache) = billing_server(wire, steps);
    let (provider, endpoint, model) = match wire {
        Wire::Anthropic => ("anthropic", server.url.clone(), "claude-sonnet-4-5"),
        Wire::OpenAi => ("openai", format!("{}/v1", server.url), "gpt-4.1"),
    };
    let mut args = vec![
        "run",
        "t.yaml",
        "--provider",
        provider,
        "--endpoint",
        &endpoint,
        "--model",
        model,
        "--no-commit",
    ];
    if let Some(config) = config {
        ybs.file("operator.json", config);
        args.extend(["--config", "operator.json"]);
    }
    let run = ybs.run(args);
    let billed = cache.billed.lock().unwrap().clone();
    (ybs, run, server, billed)
}

/// The cost of what the server billed at the model's published rates.
#[expect(clippy::cast_precision_loss, reason = "small token counts")]
fn arithmetic(wire: Wire, billed: &[Billed]) -> f64 {
    // claude-sonnet-4-5: $3 in, $0.30 read, $3.75 write, $15 out;
    // gpt-4.1: $2 in, $0.50 read, $8 out.
    let (input, read, write, output) = match wire {
        Wire::Anthropic => (3.0, 0.3, 3.75, 15.0),
        Wire::OpenAi => (2.0, 0.5, 2.0, 8.0),
    };
    billed
        .iter()
        .map(|b| {
            ((b.input - b.read - b.written) as f64 * input
                + b.read as f64 * read
                + b.written as f64 * write
                + b.output as f64 * output)
                / 1e6
        })
        .sum()
}

/// The cost ybs reported for the task.
fn reported(run: &Run) -> f64 {
    run.json("ybs-out/t/transcript.json")["cost"]
        .as_f64()
        .unwrap_or_else(|| panic!("no cost: {}{}", run.stdout, run.stderr))
}

/// Requests 2..N begin with request 1's bytes up to its conversation:
/// the settings, the tools and the system prompt (OpenAI: the first
/// message).
fn assert_stable_prefix(wire: Wire, requests: &[Request]) {
    let first = String::from_utf8_lossy(&requests[0].body).into_owned();
    let messages = first.find("\"messages\":[").unwrap() + "\"messages\":[".len();
    let end = match wire {
        Wire::Anthropic => messages,
        Wire::OpenAi => {
            let system = requests[0].json()["messages"][0].to_string();
            assert_eq!(requests[0].json()["messages"][0]["role"], "system");
            messages + system.len()
        }
    };
    let prefix = &first[..end];
    assert!(prefix.contains("\"tools\""), "{prefix}");
    for (index, request) in requests.iter().enumerate().skip(1) {
        let body = String::from_utf8_lossy(&request.body);
        assert!(
            body.starts_with(prefix),
            "request {} does not begin with request 1's {} bytes of tools and system prompt",
            index + 1,
            prefix.len()
        );
    }
}

#[test]
fn anthropic_caches_tools_system_and_each_step_and_prices_reads_and_writes() {
    let (_ybs, run, server, billed) = run_task(Wire::Anthropic, 10, None);
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 10);
    for request in &requests {
        let body = request.json();
        let cache = json!({"type": "ephemeral"});
        assert_eq!(body["system"][0]["cache_control"], cache, "{body}");
        let tools = body["tools"].as_array().unwrap();
        assert_eq!(tools.last().unwrap()["cache_control"], cache);
        let last = body["messages"].as_array().unwrap().last().unwrap()["content"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone();
        assert_eq!(last["cache_control"], cache);
        assert!(body.to_string().matches("cache_control").count() <= 4);
    }
    assert_stable_prefix(Wire::Anthropic, &requests);
    // The emulated cache engaged once the request passed the minimum:
    // the first such request wrote, every one after it read the one before.
    let first = billed.iter().position(|b| b.written > 0).unwrap();
    assert!(first <= 3, "{billed:?}");
    assert!(billed[first + 1..].iter().all(|b| b.read > 0), "{billed:?}");
    let transcript = run.json("ybs-out/t/transcript.json");
    let reads: u64 = billed.iter().map(|b| b.read).sum();
    let writes: u64 = billed.iter().map(|b| b.written).sum();
    let inputs: u64 = billed.iter().map(|b| b.input).sum();
    assert_eq!(transcript["usage"]["cache_read_input_tokens"], reads);
    assert_eq!(transcript["usage"]["cache_creation_input_tokens"], writes);
    // Token budgets count every input token, cached or not.
    assert_eq!(transcript["usage"]["input_tokens"], inputs);
    let expected = arithmetic(Wire::Anthropic, &billed);
    let cost = reported(&run);
    assert!(
        (cost - expected).abs() <= expected * 0.01,
        "{cost} against {expected}"
    );
    let response = run
        .events("t")
        .into_iter()
        .find(|e| e["type"] == "llm.response" && e["iteration"] == 10)
        .unwrap();
    assert_eq!(
        response["usage"]["cache_read_input_tokens"], billed[9].read,
        "{response}"
    );
    let summary = run.read("ybs-out/summary.md");
    assert!(summary.contains("% of input cached)"), "{summary}");
}

#[test]
fn openai_reads_cached_tokens_and_sends_the_tasks_cache_key_when_configured() {
    let (_ybs, run, server, billed) = run_task(
        Wire::OpenAi,
        10,
        Some("{\"llm\": {\"prompt_cache_key\": true}}"),
    );
    run.expect_code(0);
    let requests = server.requests();
    assert_eq!(requests.len(), 10);
    let key = requests[0].json()["prompt_cache_key"].clone();
    let key = key
        .as_str()
        .unwrap_or_else(|| panic!("no key: {}", requests[0].json()));
    assert!(key.starts_with("ybs-") && key.len() == 20, "{key}");
    for request in &requests {
        assert_eq!(request.json()["prompt_cache_key"], key);
    }
    assert_stable_prefix(Wire::OpenAi, &requests);
    let first = billed.iter().position(|b| b.read > 0).unwrap();
    assert!(first <= 4, "{billed:?}");
    assert!(billed[first..].iter().all(|b| b.read > 0), "{billed:?}");
    let transcript = run.json("ybs-out/t/transcript.json");
    let reads: u64 = billed.iter().map(|b| b.read).sum();
    assert_eq!(transcript["usage"]["cache_read_input_tokens"], reads);
    assert!(
        transcript["usage"]
            .get("cache_creation_input_tokens")
            .is_none()
    );
    let expected = arithmetic(Wire::OpenAi, &billed);
    let cost = reported(&run);
    assert!(
        (cost - expected).abs() <= expected * 0.01,
        "{cost} against {expected}"
    );

    // The same task and file: the same key, run after run. Without the
    // setting, a server that is not OpenAI's own gets none.
    let (_ybs, again, server, _) = run_task(
        Wire::OpenAi,
        2,
        Some("{\"llm\": {\"prompt_cache_key\": true}}"),
    );
    again.expect_code(0);
    assert_eq!(server.requests()[0].json()["prompt_cache_key"], key);
    let (_ybs, plain, server, _) = run_task(Wire::OpenAi, 2, None);
    plain.expect_code(0);
    assert!(
        server.requests()[0]
            .json()
            .get("prompt_cache_key")
            .is_none()
    );
}

/// The measurement of docs/performance.md ("Prompt caching"): a 20-step
/// task's input cost with caching against without (Anthropic: the
/// breakpoints against `llm.prompt_cache: false`; OpenAI, which caches
/// on its own: priced at the cached rate against every token at the
/// input rate, as ybs priced it before).
#[test]
fn a_twenty_step_task_pays_for_its_prefix_once() {
    let input_cost = |wire: Wire, billed: &[Billed]| {
        let plain: Vec<Billed> = billed.iter().map(|b| Billed { output: 0, ..*b }).collect();
        arithmetic(wire, &plain)
    };
    let (_ybs, run, _server, cached) = run_task(Wire::Anthropic, 20, None);
    run.expect_code(0);
    let (_ybs, run, server, uncached) = run_task(
        Wire::Anthropic,
        20,
        Some("{\"llm\": {\"prompt_cache\": false}}"),
    );
    run.expect_code(0);
    assert!(!String::from_utf8_lossy(&server.requests()[3].body).contains("cache_control"));
    assert!(uncached.iter().all(|b| b.read == 0 && b.written == 0));
    let (anthropic_with, anthropic_without) = (
        input_cost(Wire::Anthropic, &cached),
        input_cost(Wire::Anthropic, &uncached),
    );
    let (_ybs, run, _server, openai) = run_task(Wire::OpenAi, 20, None);
    run.expect_code(0);
    let full: Vec<Billed> = openai.iter().map(|b| Billed { read: 0, ..*b }).collect();
    let (openai_with, openai_without) = (
        input_cost(Wire::OpenAi, &openai),
        input_cost(Wire::OpenAi, &full),
    );
    println!(
        "20-step task, input cost: anthropic (claude-sonnet-4-5) ${anthropic_with:.4} cached vs ${anthropic_without:.4} uncached ({:.1}x); openai (gpt-4.1) ${openai_with:.4} vs ${openai_without:.4} ({:.1}x)",
        anthropic_without / anthropic_with,
        openai_without / openai_with
    );
    assert!(anthropic_with * 2.0 < anthropic_without);
    assert!(openai_with * 1.5 < openai_without);
}

/// The request bodies ybs sends on both wires (caching on, with the
/// one-hour lifetime, off; the OpenAI cache key) are valid requests of
/// the vendors' own SDK types: `tests/fixtures/sdk/check_requests.py`
/// walks each against PyPI `anthropic`'s and `openai`'s request types.
/// `.ci/run` installs them and names the interpreter in
/// `YBS_SDK_PYTHON`; a planted body with an unknown field must be
/// refused.
#[test]
fn request_bodies_are_valid_requests_of_the_vendors_sdks() {
    let Some(python) = std::env::var_os("YBS_SDK_PYTHON") else {
        println!(
            "SKIPPED: YBS_SDK_PYTHON names no Python with `anthropic` and `openai` (.ci/run sets it)"
        );
        return;
    };
    let mut bodies = Vec::new();
    for (wire, config) in [
        (Wire::Anthropic, None),
        (
            Wire::Anthropic,
            Some("{\"llm\": {\"prompt_cache_ttl\": \"1h\"}}"),
        ),
        (
            Wire::Anthropic,
            Some("{\"llm\": {\"prompt_cache\": false}}"),
        ),
        (
            Wire::OpenAi,
            Some("{\"llm\": {\"prompt_cache_key\": true}}"),
        ),
    ] {
        let (_ybs, run, server, _) = run_task(wire, 3, config);
        run.expect_code(0);
        let name = match wire {
            Wire::Anthropic => "anthropic",
            Wire::OpenAi => "openai",
        };
        for request in server.requests() {
            bodies.push(json!({"wire": name, "body": request.json()}));
        }
    }
    let sent = bodies.len();
    bodies.push(
        json!({"wire": "anthropic", "body": {"model": "m", "max_tokens": 1,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "x",
        "cache_control": {"type": "ephemeral", "lifetime": "1h"}}]}]}}),
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bodies.json");
    std::fs::write(&file, serde_json::to_string(&bodies).unwrap()).unwrap();
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/sdk/check_requests.py");
    let output = std::process::Command::new(python)
        .arg(&script)
        .arg(&file)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines.len(),
        sent + 1,
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for line in &lines[..sent] {
        assert!(line.contains(": valid "), "{stdout}");
    }
    assert!(
        lines[sent].contains("REFUSED") && lines[sent].contains("lifetime"),
        "{stdout}"
    );
    assert_eq!(output.status.code(), Some(1));
}
