//! Policy through the binary (issue 4, acceptance 6 and the decision
//! records of S13): `ybs policy explain`, `policy.examples`, `on_ask`, the
//! operator ceiling of `--policy FILE`.

use std::os::unix::fs::PermissionsExt;

use serde_json::{Value, json};

use crate::support::Ybs;
use crate::support::cassette::{answer, call, calls};
use crate::support::tool_calls;

/// A task file with two tasks sharing `defaults.policy`.
const TASKS: &str = "\
defaults:
  policy:
    allow:
      - read_file
      - run_shell(cargo test*)
      - run_shell: { command: [\"curl*\"] }
    deny:
      - run_shell(git push*)
tasks:
  - id: build
    prompt: p
    policy:
      ask: [write_file]
  - id: other
    prompt: p
";

/// An operator policy that allows no `curl` and denies `rm -rf`.
const CEILING: &str = "\
allow:
  - read_file
  - write_file
  - run_shell(cargo *)
deny:
  - run_shell(rm -rf*)
";

/// Runs `ybs policy explain ARGS... CALL` and returns (verdict, rule, output).
fn explain(ybs: &Ybs, args: &[&str], call: &str) -> (String, String, String) {
    let mut all = vec!["policy", "explain"];
    all.extend_from_slice(args);
    all.push(call);
    let run = ybs.run(&all);
    run.expect_code(0);
    let field = |name: &str| {
        run.stdout
            .lines()
            .find_map(|line| line.trim().strip_prefix(name))
            .unwrap_or_else(|| panic!("no `{name}` in:\n{}", run.stdout))
            .trim()
            .to_owned()
    };
    (field("verdict:"), field("rule:"), run.stdout.clone())
}

/// Puts fake programs on PATH that record being run.
fn fake_programs(ybs: &Ybs, names: &[&str]) -> String {
    for name in names {
        let path = ybs.bin_dir().join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho ran >> '{}/ran-{name}'\n",
                ybs.path().display()
            ),
        )
        .unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!(
        "{}:{}",
        ybs.bin_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

fn tool_message(transcript: &Value, index: usize) -> String {
    transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .nth(index)
        .unwrap_or_else(|| panic!("no tool message {index}"))["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

// ---------------------------------------------------------------------------
// ybs policy explain

#[test]
fn explain_without_a_task_uses_the_defaults() {
    let ybs = Ybs::new();
    let (verdict, rule, out) = explain(&ybs, &[], "run_shell(cargo test && curl x)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "default"),
        "{out}"
    );
    assert!(
        out.contains("cargo test") && out.contains("curl x"),
        "{out}"
    );
    let (verdict, rule, out) = explain(&ybs, &[], "write_file(.git/hooks/pre-commit)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "guard:protected_paths"),
        "{out}"
    );
    let (verdict, rule, out) = explain(&ybs, &[], "run_shell(sudo make install)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "guard:blocked_commands"),
        "{out}"
    );
    // The default lists are the policy's full ones, even under a task
    // whose default is allow.
    ybs.file("open.yaml", "prompt: p\npolicy: { default: allow }\n");
    for (call, rule) in [
        ("run_shell(cat /proc/self/environ)", "guard:blocked_paths"),
        ("run_shell(xxd /proc/1/environ)", "guard:blocked_paths"),
        ("run_shell(ls /proc/1/root/)", "guard:blocked_paths"),
        ("run_shell(cat ~/.aws/credentials)", "guard:blocked_paths"),
        ("run_shell(su root)", "guard:blocked_commands"),
        ("run_shell(doas id)", "guard:blocked_commands"),
        ("run_shell(pkexec id)", "guard:blocked_commands"),
    ] {
        for args in [&[][..], &["--task", "open.yaml"][..]] {
            let (verdict, got, out) = explain(&ybs, args, call);
            assert_eq!(
                (verdict.as_str(), got.as_str()),
                ("deny", rule),
                "{call}:\n{out}"
            );
        }
    }
    let (verdict, rule, out) = explain(&ybs, &[], "read_file(../outside)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "guard:outside_workdir"),
        "{out}"
    );
}

#[test]
fn explain_with_a_task_names_the_rule_of_each_part() {
    let ybs = Ybs::new();
    ybs.file("tasks.yaml", TASKS);
    let task = ["--task", "tasks.yaml#build"];
    for (call, verdict, rule) in [
        (
            "run_shell(cargo test --quiet)",
            "allow",
            "allow[1] run_shell(cargo test*)",
        ),
        ("read_file(src/lib.rs)", "allow", "allow[0] read_file"),
        ("write_file(src/lib.rs)", "ask", "ask[0] write_file"),
        (
            "run_shell(git push origin main)",
            "deny",
            "deny[0] run_shell(git push*)",
        ),
        (
            "run_shell(cargo test && git push)",
            "deny",
            "deny[0] run_shell(git push*)",
        ),
        ("run_shell(cargo test; make)", "deny", "default"),
        ("run_shell(cargo test $(curl x))", "deny", "default"),
        ("edit_file(src/lib.rs)", "deny", "default"),
        ("write_file(tasks.yaml)", "deny", "guard:protected_paths"),
    ] {
        let (got_verdict, got_rule, out) = explain(&ybs, &task, call);
        assert_eq!(
            (got_verdict.as_str(), got_rule.as_str()),
            (verdict, rule),
            "{call}:\n{out}"
        );
    }
    // Each part of a chain is listed with its own verdict and rule.
    let (_, _, out) = explain(&ybs, &task, "run_shell(cargo test; make)");
    assert!(out.contains("parts:"), "{out}");
    assert!(
        out.lines()
            .any(|l| l.contains("make") && l.contains("deny") && l.contains("default")),
        "{out}"
    );

    // A file with several tasks needs the id; an unknown id is named.
    let run = ybs.run(["policy", "explain", "--task", "tasks.yaml", "read_file(a)"]);
    run.expect_code(2);
    assert!(run.stderr.contains("several tasks"), "{}", run.stderr);
    let run = ybs.run([
        "policy",
        "explain",
        "--task",
        "tasks.yaml#nope",
        "read_file(a)",
    ]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("nope") && run.stderr.contains("build, other"),
        "{}",
        run.stderr
    );
    let run = ybs.run(["policy", "explain", "run_shell(cargo"]);
    run.expect_code(2);
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
}

#[test]
fn explain_applies_the_operator_ceiling() {
    let ybs = Ybs::new();
    ybs.file("tasks.yaml", TASKS);
    ybs.file("ceiling.yaml", CEILING);
    let args = ["--task", "tasks.yaml#build", "--policy", "ceiling.yaml"];
    let (verdict, rule, out) = explain(&ybs, &args, "run_shell(curl x)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "operator default"),
        "{out}"
    );
    assert!(out.contains("operator policy does not"), "{out}");
    let (verdict, rule, out) = explain(&ybs, &args, "run_shell(rm -rf build)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "operator deny[0] run_shell(rm -rf*)"),
        "{out}"
    );
    // Allowed by both: the task's rule is named.
    let (verdict, _, out) = explain(&ybs, &args, "run_shell(cargo test)");
    assert_eq!(verdict, "allow", "{out}");
    // The ceiling cannot widen the task: write_file stays `ask`.
    let (verdict, _, out) = explain(&ybs, &args, "write_file(src/a.rs)");
    assert_eq!(verdict, "ask", "{out}");
    // Without a task: what a task with no policy of its own would get.
    // The ceiling grants nothing by itself, so that is its default.
    let (verdict, rule, out) = explain(
        &ybs,
        &["--policy", "ceiling.yaml"],
        "run_shell(cargo build)",
    );
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "default"),
        "{out}"
    );
    let (verdict, rule, out) = explain(
        &ybs,
        &["--policy", "ceiling.yaml"],
        "run_shell(rm -rf /tmp/x)",
    );
    assert_eq!(verdict, "deny", "{out}");
    assert!(
        rule.starts_with("operator deny[0]") || rule.starts_with("guard:"),
        "{out}"
    );
}

// ---------------------------------------------------------------------------
// policy.examples

const FAILING_EXAMPLES: &str = "\
prompt: p
policy:
  allow: ['run_shell(cargo test*)', read_file]
  deny: ['run_shell(curl*)']
  examples:
    allow: ['run_shell(cargo test --all)', 'run_shell(curl example.com)']
    deny: ['run_shell(cargo test && curl x)', 'read_file(src/lib.rs)']
";

#[test]
fn failing_examples_stop_run_and_validate_naming_example_and_rule() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", FAILING_EXAMPLES);
    ybs.cassette("t.cassette.json", vec![answer("never asked")]);
    for command in ["run", "validate"] {
        let run = ybs.run([command, "t.yaml"]);
        run.expect_code(2);
        let err = &run.stderr;
        assert!(err.contains("t.yaml"), "{command}: {err}");
        assert!(
            err.contains("run_shell(curl example.com)"),
            "{command}: {err}"
        );
        assert!(err.contains("deny[0] run_shell(curl*)"), "{command}: {err}");
        assert!(err.contains("read_file(src/lib.rs)"), "{command}: {err}");
        assert!(err.contains("allow[1] read_file"), "{command}: {err}");
        // The examples that hold are not reported.
        assert!(!err.contains("cargo test --all"), "{command}: {err}");
        assert!(!ybs.exists("ybs-out/t"), "{command}: nothing may run");
    }
}

#[test]
fn passing_examples_let_the_task_run() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: ['run_shell(cargo test*)']\n  examples:\n    allow: ['run_shell(cargo test -q)']\n    deny: ['run_shell(cargo test; curl x)', 'write_file(.git/config)']\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    ybs.run(["validate", "t.yaml"]).expect_code(0);
    ybs.run(["run", "t.yaml"]).expect_code(0);
}

#[test]
fn failing_examples_of_the_operator_policy_are_usage_errors() {
    let ybs = Ybs::new();
    ybs.file("t.yaml", "prompt: p\n");
    ybs.cassette("t.cassette.json", vec![answer("ok")]);
    ybs.file(
        "ceiling.yaml",
        "allow: [read_file]\nexamples:\n  allow: ['write_file(a.txt)']\n",
    );
    for command in ["run", "validate"] {
        let run = ybs.run([command, "--policy", "ceiling.yaml", "t.yaml"]);
        run.expect_code(2);
        assert!(run.stderr.contains("write_file(a.txt)"), "{}", run.stderr);
    }
}

// ---------------------------------------------------------------------------
// on_ask

#[test]
fn on_ask_deny_tells_the_model_approval_is_needed() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [read_file]\n  ask: [write_file]\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "a.txt", "content": "x"})),
            answer("could not"),
        ],
    );
    // An approval typed on stdin is never read (S3): no TTY, no prompt.
    let mut command = ybs.command();
    command
        .args(["run", "t.yaml"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = command.spawn().unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"y\ny\na\n").unwrap();
    let output = child.wait_with_output().unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert!(!ybs.exists("a.txt"));
    let transcript = ybs.json("ybs-out/t/transcript.json");
    let entry = &tool_calls(&transcript)[0];
    assert_eq!(entry["decision"]["verdict"], "ask");
    assert_eq!(entry["decision"]["rule"], "ask[0] write_file");
    assert_eq!(entry["result"]["ran"], false);
    let told = tool_message(&transcript, 0);
    assert!(told.contains("needs approval"), "{told}");
    assert!(told.contains("on_ask: deny"), "{told}");
    assert!(told.contains("not run"), "{told}");
    // The model was told the policy up front, once.
    let prompt = transcript["system_prompt"].as_str().unwrap();
    assert_eq!(prompt.matches("Policy:").count(), 1, "{prompt}");
    assert!(prompt.contains("write_file"), "{prompt}");
    assert!(!prompt.contains(".."), "{prompt}");
}

#[test]
fn on_ask_fail_fails_the_task_with_policy_denied() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [read_file]\n  ask: ['run_shell(make*)']\n  on_ask: fail\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "make deploy"})),
            answer("never reached"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(1);
    let transcript = run.json("ybs-out/t/transcript.json");
    assert_eq!(transcript["status"], "failed");
    assert_eq!(transcript["reason"], "policy_denied");
    assert!(
        transcript["message"]
            .as_str()
            .unwrap()
            .contains("needs approval"),
        "{}",
        transcript["message"]
    );
    let entry = &tool_calls(&transcript)[0];
    assert_eq!(entry["decision"]["verdict"], "ask");
    assert_eq!(entry["result"]["ran"], false);
    let junit = ybs.read("ybs-out/junit.xml");
    assert!(junit.contains("policy_denied"), "{junit}");
    assert!(run.stdout.contains("policy_denied"), "{}", run.stdout);
}

#[test]
fn on_ask_pause_under_an_operator_deny_is_a_denial_and_typos_are_named() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  ask: [run_shell]\n  on_ask: pause\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![call("run_shell", json!({"command": "true"})), answer("ok")],
    );
    // The operator chose `deny`: a task cannot pause for a human instead.
    ybs.file(
        "deny.yaml",
        "allow: [run_shell]\nask: [run_shell]\non_ask: deny\n",
    );
    let run = ybs.run(["run", "t.yaml", "--policy", "deny.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("ybs-out/t/state.json"));
    let transcript = run.json("ybs-out/t/transcript.json");
    let output = transcript["tool_calls"][0]["result"]["output"]
        .as_str()
        .unwrap();
    assert!(output.contains("policy.on_ask: deny"), "{output}");

    ybs.file("typo.yaml", "prompt: p\npolicy:\n  on_ask: later\n");
    let run = ybs.run(["validate", "typo.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("typo.yaml:3:11:"), "{}", run.stderr);
    assert!(run.stderr.contains("`pause`"), "{}", run.stderr);
}

// ---------------------------------------------------------------------------
// The operator ceiling in a run

#[test]
fn a_task_cannot_widen_the_operator_policy() {
    let ybs = Ybs::new();
    let path = fake_programs(&ybs, &["curl", "cargo"]);
    let ybs = ybs.env("PATH", &path);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  default: allow\n  allow: ['run_shell(curl*)', 'run_shell(cargo*)']\n",
    );
    ybs.file("ceiling.yaml", CEILING);
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("run_shell", json!({"command": "curl https://example.com"})),
                ("run_shell", json!({"command": "cargo test"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "--policy", "ceiling.yaml", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("ran-curl"), "curl ran despite the ceiling");
    assert!(ybs.exists("ran-cargo"), "cargo is allowed by both");
    let transcript = run.json("ybs-out/t/transcript.json");
    let entry = &tool_calls(&transcript)[0];
    assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
    assert_eq!(entry["decision"]["rule"], "operator default", "{entry}");
    let told = tool_message(&transcript, 0);
    assert!(told.contains("operator policy does not"), "{told}");
    // Without the ceiling the task's own rules decide.
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(ybs.exists("ran-curl"));
}

// ---------------------------------------------------------------------------
// Decision records (S13)

#[test]
fn every_call_has_a_complete_decision_record() {
    let ybs = Ybs::new();
    ybs.file("src/lib.rs", &"fn x() {}\n".repeat(200));
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nlimits: { max_tool_output_chars: 300 }\npolicy:\n  allow: [read_file, 'run_shell(echo *)', 'run_shell(seq *)']\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                ("read_file", json!({"path": "src/lib.rs"})),
                ("run_shell", json!({"command": "echo hi && seq 1 3"})),
                ("run_shell", json!({"command": "seq 1 100000"})),
                ("write_file", json!({"path": "src/new.rs", "content": "x"})),
                ("read_file", json!({"path": "../escape"})),
                ("run_shell", json!({"command": "echo a; curl x"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let events = run.events("t");
    let decided: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool.decided")
        .collect();
    let completed: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool.completed")
        .collect();
    assert_eq!(decided.len(), 6);
    assert_eq!(completed.len(), 6);
    for (decision, done) in decided.iter().zip(&completed) {
        assert_eq!(decision["call_id"], done["call_id"]);
        for field in ["verdict", "rule", "resolved"] {
            assert!(!decision[field].is_null(), "{field} missing: {decision}");
        }
        let resolved = &decision["resolved"];
        let has_target = resolved["path"].is_string() || resolved["argv"].is_array();
        assert!(has_target, "no resolved path or argv: {decision}");
        assert!(done["duration_ms"].is_u64(), "{done}");
        assert!(done["truncated"].is_boolean(), "{done}");
    }
    let by_index = |i: usize| (decided[i], completed[i]);

    let (decision, done) = by_index(0);
    assert_eq!(decision["verdict"], "allow");
    assert_eq!(decision["rule"], "allow[0] read_file");
    assert_eq!(decision["resolved"]["path"], "src/lib.rs");
    assert_eq!(done["truncated"], true, "{done}");

    let (decision, done) = by_index(1);
    assert_eq!(decision["verdict"], "allow");
    assert_eq!(
        decision["resolved"]["argv"],
        json!([["echo", "hi"], ["seq", "1", "3"]])
    );
    assert_eq!(done["ran"], true);
    assert_eq!(done["truncated"], false);

    let (_, done) = by_index(2);
    assert_eq!(done["truncated"], true);

    let (decision, done) = by_index(3);
    assert_eq!(decision["verdict"], "deny");
    assert_eq!(decision["rule"], "default");
    assert_eq!(decision["resolved"]["path"], "src/new.rs");
    assert_eq!(done["ran"], false);

    let (decision, _) = by_index(4);
    assert_eq!(decision["verdict"], "deny");
    assert_eq!(decision["rule"], "guard:outside_workdir", "{decision}");
    assert!(
        decision["resolved"]["path"]
            .as_str()
            .unwrap()
            .ends_with("/escape"),
        "{decision}"
    );

    let (decision, _) = by_index(5);
    assert_eq!(decision["verdict"], "deny");
    assert_eq!(
        decision["resolved"]["argv"],
        json!([["echo", "a"], ["curl", "x"]])
    );

    // The transcript carries the same record per call.
    let transcript = run.json("ybs-out/t/transcript.json");
    for entry in tool_calls(&transcript) {
        assert!(entry["decision"]["verdict"].is_string(), "{entry}");
        assert!(entry["decision"]["rule"].is_string(), "{entry}");
        assert!(entry["decision"]["resolved"].is_object(), "{entry}");
        assert!(entry["duration_ms"].is_u64(), "{entry}");
        assert!(entry["result"]["truncated"].is_boolean(), "{entry}");
    }
}

/// Issue 10, item 11: a prefix rule naming the program never auto-allows a
/// form of it that runs another program.
#[test]
fn prefix_rules_never_allow_programs_that_run_programs() {
    let ybs = Ybs::new();
    let forms: &[(&str, &str)] = &[
        ("setarch*", "setarch x86_64 sh -c id"),
        ("setarch*", "setarch -R id"),
        ("prlimit*", "prlimit --nofile=10 id"),
        ("setpriv*", "setpriv --reuid=1 id"),
        ("capsh*", "capsh -- -c id"),
        ("chroot*", "chroot / id"),
        ("unshare*", "unshare -r id"),
        ("nsenter*", "nsenter -t 1 id"),
        ("flock*", "flock /tmp/x -c id"),
        ("ionice*", "ionice -c 3 id"),
        ("chrt*", "chrt 1 id"),
        ("taskset*", "taskset 1 id"),
        ("stdbuf*", "stdbuf -oL id"),
        ("timeout*", "timeout 5 id"),
        ("nice*", "nice id"),
        ("nohup*", "nohup id"),
        ("xvfb-run*", "xvfb-run id"),
        ("watch*", "watch id"),
        ("script*", "script -qc id /dev/null"),
        ("sort*", "sort --compress-program=sh x"),
        ("sort*", "sort --compress-prog sh x"),
        ("git grep*", "git grep -O foo"),
        ("git grep*", "git grep --open-files-in-pager=vim foo"),
        ("git difftool*", "git difftool -x sh"),
        ("git difftool*", "git difftool -yxsh"),
        ("git*", "git -c core.pager=sh log"),
        ("ssh*", "ssh -o ProxyCommand=sh host"),
        ("ssh*", "ssh -oLocalCommand=sh host"),
        ("zip*", "zip -TT sh x.zip a"),
        ("zip*", "zip --unzip-command=sh x.zip a"),
        ("gdb*", "gdb -ex '!id'"),
        ("gdb*", "gdb -x script.gdb"),
        ("vim*", "vim -c '!id'"),
        ("vim*", "vim '+!id' x"),
        ("vi*", "vi -S x.vim"),
        ("nvim*", "nvim -c ':!id'"),
        ("sdiff*", "sdiff --diff-program=sh a b"),
        ("sqlite3*", "sqlite3 db '.shell id'"),
        ("sqlite3*", "sqlite3 db '.system id'"),
        ("sqlite3*", "sqlite3 -cmd '.shell id' db"),
        ("tar*", "tar --to-command=sh -xf x.tar"),
        ("tar*", "tar -I sh -xf x.tar"),
        ("tar*", "tar xIf sh x.tar"),
        ("tar*", "tar --checkpoint-action=exec=sh -xf x.tar"),
        ("rsync*", "rsync -e sh a b"),
        ("rsync*", "rsync -avze sh a b"),
        ("less*", "less x"),
        ("more*", "more x"),
        ("awk*", "awk 'BEGIN{system(\"id\")}'"),
        ("awk*", "awk '{print | \"sh\"}'"),
        ("perl*", "perl -e 'system(1)'"),
        ("python*", "python -c 1"),
        ("ruby*", "ruby -e 1"),
        ("node*", "node -e 1"),
        ("make*", "make CC=./x"),
        ("man*", "man --pager=sh ls"),
        ("printf*", "printf -v 'a[$(id)]' x"),
        ("test*", "test -v 'a[$(id)]'"),
        ("let*", "let 'a[$(id)]=1'"),
        ("read*", "read 'a[$(id)]'"),
        ("unset*", "unset 'a[$(id)]'"),
        ("declare*", "declare 'a[$(id)]=1'"),
        ("typeset*", "typeset 'a[$(id)]'"),
        ("mapfile*", "mapfile -C id x"),
        ("readarray*", "readarray -C id x"),
        ("compgen*", "compgen -C id"),
        ("sed*", "sed '\\%re%e' f"),
        ("sed*", "sed '1ecmd' f"),
        ("sed*", "sed '/re/I e' f"),
        ("sed*", "sed '$e' f"),
        ("sed*", "sed -e p -e 'e id' f"),
        ("sed*", "sed --expression='e id' f"),
        ("sed*", "sed -f script.sed f"),
        ("sed*", "sed -ns 's/a/b/e' f"),
    ];
    for (rule, form) in forms {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\npolicy:\n  allow:\n    - \"run_shell({rule})\"\n"),
        );
        let (verdict, _, out) = explain(&ybs, &["--task", "t.yaml"], &format!("run_shell({form})"));
        assert_ne!(verdict, "allow", "{form} under {rule}:\n{out}");
        assert!(out.contains("not auto-allowed"), "{form}:\n{out}");
    }
    // The same rules still allow the plain forms.
    for (rule, form) in [
        ("sort*", "sort -u x"),
        ("git grep*", "git grep -n foo"),
        ("tar*", "tar -xzf x.tar.gz"),
        ("sed*", "sed -n '/a/,/b/p' f"),
        ("sed*", "sed -i.bak 's/a/b/g' f"),
        ("make*", "make test"),
        ("sqlite3*", "sqlite3 db 'select 1'"),
        ("man*", "man ls"),
    ] {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\npolicy:\n  allow:\n    - \"run_shell({rule})\"\n"),
        );
        let (verdict, _, out) = explain(&ybs, &["--task", "t.yaml"], &format!("run_shell({form})"));
        assert_eq!(verdict, "allow", "{form} under {rule}:\n{out}");
    }
}

/// Issue 10, item 11, through `ybs run`: under `allow: run_shell(sort*)`
/// and friends, a form that would run another program does not run at
/// all, and the model is told why; the plain form runs.
#[test]
fn a_program_run_through_an_option_never_runs_under_a_prefix_rule() {
    let ybs = Ybs::new();
    let path = fake_programs(&ybs, &["evil", "sort", "tar", "git"]);
    let ybs = ybs.env("PATH", &path);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: ['run_shell(sort*)', 'run_shell(tar*)', 'run_shell(git grep*)']\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            calls(&[
                (
                    "run_shell",
                    json!({"command": "sort --compress-program=evil x"}),
                ),
                ("run_shell", json!({"command": "tar xIf evil x.tar"})),
                ("run_shell", json!({"command": "git grep -Oevil foo"})),
                ("run_shell", json!({"command": "sort -u x"})),
            ]),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert!(!ybs.exists("ran-tar"), "tar ran");
    assert!(!ybs.exists("ran-git"), "git ran");
    assert!(ybs.exists("ran-sort"), "the plain sort is allowed");
    let transcript = run.json("ybs-out/t/transcript.json");
    for index in 0..3 {
        let entry = &tool_calls(&transcript)[index];
        assert_eq!(entry["decision"]["verdict"], "deny", "{entry}");
        assert_eq!(entry["result"]["ran"], false, "{entry}");
        let told = tool_message(&transcript, index);
        assert!(told.contains("not auto-allowed"), "{told}");
    }
    assert_eq!(
        std::fs::read_to_string(ybs.path().join("ran-sort")).unwrap(),
        "ran\n",
        "sort ran once, for the plain form"
    );
}

/// `fs__*` names every tool of the MCP server `fs` (its tools are offered
/// as `fs__<tool>`), in a task file and in `--policy FILE` alike.
#[test]
fn a_rule_for_every_tool_of_an_mcp_server_is_accepted_and_matches_them() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ntools:\n  mcp: [{name: fs, command: fs-server}]\npolicy:\n  allow: [\"fs__*\", read_file]\n  deny: [\"fs__write*\"]\n",
    );
    ybs.run(["validate", "t.yaml", "--provider", "ollama"])
        .expect_code(0);
    let (verdict, rule, _) = explain(&ybs, &["--task", "t.yaml"], "fs__read_file(a.txt)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("allow", "allow[0] fs__*")
    );
    let (verdict, rule, _) = explain(&ybs, &["--task", "t.yaml"], "fs__write_file(a.txt)");
    assert_eq!(
        (verdict.as_str(), rule.as_str()),
        ("deny", "deny[0] fs__write*")
    );
    let (verdict, _, _) = explain(&ybs, &["--task", "t.yaml"], "git__log");
    assert_eq!(verdict, "deny");
    // A character that is in no tool name is still refused.
    ybs.file("bad.yaml", "prompt: p\npolicy:\n  allow: [\"fs/*\"]\n");
    let run = ybs.run(["validate", "bad.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("`fs__*`"), "{}", run.stderr);
}

/// An `allow` command glob with `;`, `&&`, `||` or `|` outside quotes can
/// never match (every part of a command must be allowed on its own), so
/// it is an error where it is written; in `deny` it matches the whole
/// text, and inside quotes it is an argument.
#[test]
fn an_allow_rule_joining_commands_is_flagged_where_it_is_written() {
    let ybs = Ybs::new();
    for (rule, operator) in [
        ("run_shell(cargo test && curl x)", "&&"),
        ("run_shell(cargo test; curl x)", ";"),
        ("run_shell(cat x | sh)", "|"),
        ("run_shell(make || true)", "||"),
    ] {
        ybs.file(
            "t.yaml",
            &format!("prompt: p\nprovider: ollama\npolicy:\n  allow: [read_file, \"{rule}\"]\n"),
        );
        let run = ybs.run(["validate", "t.yaml"]);
        run.expect_code(2);
        assert!(
            run.stderr.contains(&format!(
                "t.yaml:4:22: `allow` rule `{rule}` can never match: a command is allowed part by part"
            )) && run.stderr.contains(&format!("no part holds `{operator}`")),
            "{}",
            run.stderr
        );
        assert!(run.stderr.contains("hint: allow each command on its own"));
    }
    ybs.file(
        "t.yaml",
        "prompt: p\nprovider: ollama\npolicy:\n  allow: ['run_shell(grep \"a|b\" *)']\n  deny: [\"run_shell(a; b)\"]\n",
    );
    ybs.run(["validate", "t.yaml"]).expect_code(0);
}

/// A rule naming a tool the task cannot have matches nothing: a `deny`
/// that denies nothing, an `allow` that allows nothing. Both `ybs
/// validate` and `ybs run` refuse it (exit 2) where it is written, with
/// the closest name; an MCP tool is known by its server's prefix, an
/// external tool by `./tools` or the task's `tools.external`.
#[test]
fn a_rule_naming_an_unknown_tool_is_refused_where_it_is_written() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        concat!(
            "prompt: p\n",
            "provider: ollama\n",
            "tools:\n",
            "  mcp: [{name: github, command: gh-mcp}]\n",
            "policy:\n",
            "  allow: [read_file, \"run_shel(cargo test*)\"]\n",
            "  deny:\n",
            "    - githb__*\n",
            "    - edit_fiel: { path: \"secrets/**\" }\n",
        ),
    );
    for command in ["validate", "run"] {
        let run = ybs.run([command, "t.yaml"]);
        run.expect_code(2);
        for (line, hint) in [
            (
                "t.yaml:6:22: `allow` rule `run_shel(cargo test*)` of task `t` names no tool: `run_shel` is not a built-in, external, caller or MCP tool",
                "hint: did you mean `run_shell`?",
            ),
            (
                "t.yaml:8:7: `deny` rule `githb__*` of task `t` names the MCP server `githb`, which neither the task nor the config declares",
                "hint: did you mean `github__*`?",
            ),
            (
                "t.yaml:9:7: `deny` rule `edit_fiel(secrets/**)` of task `t` names no tool",
                "hint: did you mean `edit_file`?",
            ),
        ] {
            assert!(
                run.stderr.contains(line),
                "{command}: {line}\n{}",
                run.stderr
            );
            assert!(
                run.stderr.contains(hint),
                "{command}: {hint}\n{}",
                run.stderr
            );
        }
        assert!(!ybs.exists("ybs-out"), "nothing may run");
    }
    // Known tools: built-ins, a server's tools by its prefix, patterns
    // that name some tool, an external tool in ./tools, one the task
    // names, a caller tool.
    ybs.file("tools/lint", "#!/bin/sh\necho ok\n");
    let lint = ybs.path().join("tools/lint");
    std::fs::set_permissions(&lint, std::fs::Permissions::from_mode(0o755)).unwrap();
    ybs.file(
        "t.yaml",
        concat!(
            "prompt: p\n",
            "provider: ollama\n",
            "tools:\n",
            "  mcp: [{name: github, command: gh-mcp}]\n",
            "  external: [fmt]\n",
            "  caller: [{name: deploy, description: d}]\n",
            "policy:\n",
            "  allow: [\"*\", \"run_*\", github__get_issue, \"git*\", lint, fmt, deploy]\n",
            "  deny: [\"github__*\", \"*_file(secrets/**)\"]\n",
        ),
    );
    let run = ybs.run(["validate", "t.yaml"]);
    run.expect_code(0);
}
