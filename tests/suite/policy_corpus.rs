//! Issue 33 item 9: how much of what people and agents type runs, on a
//! corpus of our own (tests/fixtures/policy-corpus/commands.jsonl: coding
//! agents' idioms and everyday one-liners), explained by the real binary
//! under the full sandbox with `allow: [run_shell(*)]` alone, and with
//! deny rules on `git push*`, `curl*` and `rm -rf*` added. The shares and
//! the reasons for the rest are printed (`--nocapture`) and recorded in
//! docs/policy.md.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::Stdio;

use serde_json::Value;

use crate::support::Ybs;

const CORPUS: &str = include_str!("../fixtures/policy-corpus/commands.jsonl");

/// (command, kind) of every corpus line.
fn corpus() -> Vec<(String, String)> {
    CORPUS
        .lines()
        .map(|line| {
            let row: Value = serde_json::from_str(line).unwrap();
            (
                row["command"].as_str().unwrap().to_owned(),
                row["kind"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

fn explain_all(ybs: &Ybs, task: &str, config: Option<&str>, commands: &[String]) -> Vec<Value> {
    let mut command = ybs.command();
    command.args([
        "policy",
        "explain",
        "--json",
        "--sandbox",
        "full",
        "--task",
        task,
    ]);
    if let Some(config) = config {
        command.args(["--config", config]);
    }
    let mut child = command
        .arg("-")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input: String = commands
        .iter()
        .map(|c| format!("{}\n", Value::String(format!("run_shell({c})"))))
        .collect();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let output = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(output.status.success());
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// What one policy made of the corpus.
struct Share {
    allowed: usize,
    guarded: usize,
    agent_refused: Vec<String>,
    /// Reason (rule, and the first hazard or case) → commands.
    reasons: BTreeMap<String, Vec<String>>,
}

impl Share {
    fn of(rows: &[(String, String)], explained: &[Value]) -> Self {
        let mut share = Self {
            allowed: 0,
            guarded: 0,
            agent_refused: Vec::new(),
            reasons: BTreeMap::new(),
        };
        for ((command, kind), explanation) in rows.iter().zip(explained) {
            let decision = &explanation["decision"];
            if decision["verdict"] == "allow" {
                share.allowed += 1;
                continue;
            }
            if decision["rule"]["kind"] == "guard" {
                share.guarded += 1;
                continue;
            }
            if kind == "agent" {
                share.agent_refused.push(command.clone());
            }
            let rule = decision["rule"]["text"]
                .as_str()
                .or(decision["rule"]["kind"].as_str())
                .unwrap_or_default()
                .to_owned();
            let why = explanation["hazards"][0]["kind"]
                .as_str()
                .or(explanation["parts"]
                    .as_array()
                    .and_then(|parts| parts.iter().find_map(|p| p["opaque"]["kind"].as_str())))
                .unwrap_or_default();
            share
                .reasons
                .entry(format!("{rule} {why}").trim().to_owned())
                .or_default()
                .push(command.replace('\n', "⏎"));
        }
        share
    }

    /// Allowed, of what no built-in guard refuses.
    fn percent(&self, total: usize) -> f64 {
        100.0 * self.allowed as f64 / (total - self.guarded) as f64
    }

    fn report(&self, name: &str, total: usize) -> String {
        let mut text = format!(
            "{name}: {} of {} allowed ({:.1} % of the {} no guard refuses; {} guard hits)",
            self.allowed,
            total,
            self.percent(total),
            total - self.guarded,
            self.guarded
        );
        for (reason, commands) in &self.reasons {
            text.push_str(&format!(
                "\n  {:>3}  {reason}: {}",
                commands.len(),
                commands.join(" | ")
            ));
        }
        text
    }
}

#[test]
fn the_corpus_runs_under_a_wildcard_and_deny_rules_hold() {
    let rows = corpus();
    assert!(rows.len() >= 200, "{}", rows.len());
    let ybs = Ybs::new();
    ybs.file(
        "wild.yaml",
        "prompt: p\npolicy:\n  allow: [\"run_shell(*)\"]\n",
    );
    ybs.file(
        "deny.yaml",
        "prompt: p\npolicy:\n  allow: [\"run_shell(*)\"]\n  \
         deny: [\"run_shell(git push*)\", \"run_shell(curl*)\", \"run_shell(rm -rf*)\"]\n",
    );
    ybs.file(
        "parser-alone.json",
        r#"{"safety": {"sandbox_exec_guard": false}}"#,
    );
    let commands: Vec<String> = rows.iter().map(|(command, _)| command.clone()).collect();
    let wild = Share::of(&rows, &explain_all(&ybs, "wild.yaml", None, &commands));
    let parser_explained = explain_all(&ybs, "deny.yaml", Some("parser-alone.json"), &commands);
    let parser = Share::of(&rows, &parser_explained);
    let guarded_explained = explain_all(&ybs, "deny.yaml", None, &commands);
    let guarded = Share::of(&rows, &guarded_explained);
    let report = format!(
        "{}\n{}\n{}",
        wild.report("run_shell(*)", rows.len()),
        parser.report("run_shell(*) + deny, the parser alone", rows.len()),
        guarded.report("run_shell(*) + deny, with the exec guard", rows.len())
    );
    println!("{report}");
    assert!(wild.agent_refused.is_empty(), "{report}");
    assert!(wild.percent(rows.len()) >= 97.0, "{report}");
    assert!(parser.percent(rows.len()) >= 80.0, "{report}");
    assert!(
        guarded_explained
            .iter()
            .all(|e| e["sandbox"]["exec_guard_holds"] == true),
        "this machine's sandbox has no exec guard"
    );
    assert!(guarded.percent(rows.len()) >= 95.0, "{report}");
    assert!(guarded.agent_refused.is_empty(), "{report}");
    // No allowed command has a part that runs a denied program: the
    // deny rules still refuse every part they can see.
    for (command, explanation) in commands
        .iter()
        .zip(&parser_explained)
        .chain(commands.iter().zip(&guarded_explained))
    {
        if explanation["decision"]["verdict"] != "allow" {
            continue;
        }
        for part in explanation["parts"].as_array().unwrap() {
            let argv: Vec<&str> = part["argv"]
                .as_array()
                .unwrap()
                .iter()
                .filter_map(Value::as_str)
                .collect();
            let program = argv.first().map(|w| w.rsplit('/').next().unwrap_or(w));
            let denied = match program {
                Some("curl") => true,
                Some("git") => argv.get(1) == Some(&"push"),
                Some("rm") => argv.get(1).is_some_and(|w| w.starts_with("-rf")),
                _ => false,
            };
            assert!(!denied, "{command}: {report}");
        }
    }
}
