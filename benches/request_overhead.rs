#![allow(
    clippy::unwrap_used,
    clippy::print_stdout,
    reason = "a benchmark: a panic is the failure report, stdout is its output"
)]
//! The fixed part of every request, in tokens: the system prompt and the
//! tool schemas offered, with a policy that allows one tool and with one
//! that allows all six (`cargo bench --bench request_overhead`). Counted
//! with ybs's tokenizer (o200k; bytes / 4 without the `tokenizer`
//! feature); a local model's own tokenizer and chat template count more
//! (docs/local-models.md).

use std::path::Path;
use std::time::Instant;

use ybs::agent::context::fixed_tokens;
use ybs::agent::prompt::system_prompt;
use ybs::llm::tokens;
use ybs::policy::{GuardSettings, Policy, PolicySpec, Rule, Verdict};
use ybs::tools::builtin;

fn overhead(name: &str, spec: &PolicySpec) -> u64 {
    let workdir = "/home/runner/work/repo";
    let policy = Policy::build(
        None,
        std::slice::from_ref(spec),
        GuardSettings::new(workdir, None),
    )
    .unwrap();
    let offered: Vec<String> = builtin::NAMES
        .iter()
        .filter(|tool| policy.may_allow(tool, false))
        .map(|tool| (*tool).to_owned())
        .collect();
    let specs: Vec<_> = offered
        .iter()
        .map(|tool| builtin::get(tool).unwrap().spec().clone())
        .collect();
    let prompt = system_prompt(
        Path::new(workdir),
        &offered,
        &policy.summary(),
        None,
        None,
        ybs::agent::prompt::Contract::default(),
    );
    let total = fixed_tokens(&prompt, &specs);
    let system = tokens::count(&prompt);
    println!(
        "{name:<28} {:>2} tools  system prompt {system:>4}  tool schemas {:>4}  total {total:>4} tokens ({})",
        offered.len(),
        total - system,
        tokens::METHOD
    );
    total
}

fn main() {
    let started = Instant::now();
    tokens::count("warm up");
    println!(
        "counting with {} (first count: {:.0} ms)",
        tokens::METHOD,
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut one = PolicySpec::default();
    one.allow.push(Rule::parse("read_file").unwrap());
    let all = PolicySpec {
        default: Some(Verdict::Allow),
        ..PolicySpec::default()
    };
    let one = overhead("allow: [read_file]", &one);
    let all = overhead("default: allow", &all);
    println!("goal: one tool <= 600 ({one}), all six <= 1000 ({all})");
}
