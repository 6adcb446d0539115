//! Issue 33 (docs/policy.md, "The sandbox decides"): under a full
//! wildcard (`allow: [run_shell(*)]`) with no deny or ask rule on
//! `run_shell` and the full sandbox in force, every command that parses
//! runs, confined; the model is told so. Under `--no-sandbox` the parser
//! decides as before, and the refusal says why.

use serde_json::{Value, json};

use super::git::transcript;
use crate::support::cassette::{answer, calls};
use crate::support::server::Server;
use crate::support::{Ybs, wire};

const WILDCARD: &str =
    "prompt: do the thing\ncommit: false\npolicy:\n  allow: [\"run_shell(*)\"]\n";

/// (command, file it writes, what the file must hold).
const EVERYDAY: &[(&str, &str, &str)] = &[
    (
        "cat > notes.txt << 'EOF'\nfirst $HOME line\nEOF",
        "notes.txt",
        "first $HOME line\n",
    ),
    (
        "for f in tests/*.py; do wc -l < \"$f\"; done > loop.txt",
        "loop.txt",
        "2\n1\n",
    ),
    (
        "ls tests/*.py | xargs wc -l > xargs.txt",
        "xargs.txt",
        "3 total",
    ),
    (
        "python3 -c \"open('py.txt', 'w').write('py\\n')\"",
        "py.txt",
        "py\n",
    ),
    ("echo \"$(echo sub)st\" > subst.txt", "subst.txt", "subst\n"),
    (
        "bash -c 'echo one > bash.txt && echo two >> bash.txt'",
        "bash.txt",
        "one\ntwo\n",
    ),
    ("timeout 60 ls tests > timeout.txt", "timeout.txt", "a.py\n"),
    (
        "if [ -f tests/a.py ]; then echo yes > if.txt; fi",
        "if.txt",
        "yes\n",
    ),
    (
        "printf 'x\\ny\\n' > list; while read -r f; do echo \"<$f>\"; done < list > while.txt",
        "while.txt",
        "<x>\n<y>\n",
    ),
    (
        "diff <(sort tests/a.py) <(sort tests/a.py) && echo same > diff.txt",
        "diff.txt",
        "same\n",
    ),
    (
        "echo $((6 * 7)) ${PATH:+has-path} > vars.txt",
        "vars.txt",
        "42 has-path\n",
    ),
    (
        "find tests -name '*.py' -exec wc -l {} + > total.txt",
        "total.txt",
        "3 total",
    ),
];

/// `ybs run t.yaml` against a scripted OpenAI server whose model sends
/// `commands` through `run_shell`, one a turn, then answers: the run
/// (exit 0 checked) and the server, whose requests the test reads.
fn scripted_run(ybs: &Ybs, commands: &[String]) -> (crate::support::Run, Server) {
    let mut replies: Vec<_> = commands
        .iter()
        .enumerate()
        .map(|(n, command)| {
            wire::openai_sse_call(
                &format!("call_{n}"),
                "run_shell",
                &json!({"command": command}),
            )
        })
        .collect();
    replies.push(wire::openai_sse_answer("done"));
    let server = Server::start(replies);
    let url = format!("{}/v1", server.url);
    let run = ybs.run([
        "run",
        "t.yaml",
        "--provider",
        "openai",
        "--endpoint",
        &url,
        "--model",
        "m",
    ]);
    run.expect_code(0);
    (run, server)
}

fn seed(ybs: &Ybs) {
    ybs.file("tests/a.py", "a = 1\nb = 2\n");
    ybs.file("tests/b.py", "c = 3\n");
}

/// The held-out acceptance's run, written out: a scripted model's
/// everyday commands all run, and its first request does not tell it "no
/// $(…)".
#[test]
fn everyday_shell_runs_under_a_bare_wildcard_and_the_model_is_told_so() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    ybs.file("t.yaml", WILDCARD);
    seed(&ybs);
    let commands: Vec<String> = EVERYDAY.iter().map(|(c, _, _)| (*c).to_owned()).collect();
    let (run, server) = scripted_run(&ybs, &commands);
    let calls = transcript(&run, "t")["tool_calls"].clone();
    for (entry, (command, file, content)) in calls.as_array().unwrap().iter().zip(EVERYDAY) {
        let context = format!("{command}: {entry}");
        assert_eq!(entry["decision"]["verdict"], "allow", "{context}");
        assert!(ybs.exists(file), "{context}");
        assert!(
            ybs.read(file).contains(content),
            "{context}: {}",
            ybs.read(file)
        );
    }
    assert_eq!(calls.as_array().unwrap().len(), EVERYDAY.len());
    let request = server.requests()[0].json();
    let system = request["messages"][0]["content"].to_string();
    assert!(system.contains("Policy: "), "{system}");
    assert!(!system.contains("no $("), "{system}");
    assert!(system.contains("any command runs"), "{system}");
}

/// The same commands under `--no-sandbox`: the parser decides, each one
/// is refused, nothing of it runs, and the model is told why; its first
/// request keeps the parser's rules.
#[test]
fn without_the_full_sandbox_the_parser_decides_and_says_why() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        &WILDCARD.replace("do the thing", "do the thing\nmodel: m"),
    );
    seed(&ybs);
    let turn: Vec<(&str, Value)> = EVERYDAY
        .iter()
        .map(|(command, _, _)| ("run_shell", json!({"command": command})))
        .collect();
    ybs.cassette("t.cassette.json", vec![calls(&turn), answer("done")]);
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(0);
    let calls = transcript(&run, "t")["tool_calls"].clone();
    for (entry, (command, file, _)) in calls.as_array().unwrap().iter().zip(EVERYDAY) {
        let context = format!("{command}: {entry}");
        assert_ne!(entry["decision"]["verdict"], "allow", "{context}");
        assert!(!ybs.exists(file), "{context}");
        let told = entry["result"]["output"].to_string();
        assert!(
            told.contains("only under the full sandbox (namespaces+landlock+seccomp)"),
            "{context}"
        );
    }
}

/// `ybs policy explain` prints the sandbox it assumed and, per part, the
/// unknowns and why they may run; `--sandbox` and `--no-sandbox` override
/// the probe.
#[test]
fn explain_says_which_sandbox_it_assumed_and_why_unknowns_run() {
    let ybs = Ybs::new().parser_alone();
    ybs.file("t.yaml", WILDCARD);
    ybs.file(
        "d.yaml",
        "prompt: p\npolicy:\n  allow: [\"run_shell(*)\"]\n  deny: [\"run_shell(git push*)\"]\n",
    );
    let explain = |args: &[&str]| {
        let mut all = vec!["policy", "explain"];
        all.extend_from_slice(args);
        let run = ybs.run(&all);
        run.expect_code(0);
        run.stdout.clone()
    };
    let call = "run_shell(echo \"$(git rev-parse --show-toplevel)\")";
    let out = explain(&["--sandbox", "full", "--task", "t.yaml", call]);
    assert!(out.contains("verdict: allow"), "{out}");
    assert!(
        out.contains("sandbox: namespaces+landlock+seccomp (--sandbox full)"),
        "{out}"
    );
    assert!(
        out.contains("unknowns: command substitution `$(git rev-parse --show-toplevel)` — left to the sandbox"),
        "{out}"
    );
    let out = explain(&["--no-sandbox", "--task", "t.yaml", call]);
    assert!(out.contains("verdict: deny"), "{out}");
    assert!(out.contains("sandbox: none (--no-sandbox)"), "{out}");
    assert!(out.contains("kept back"), "{out}");
    let out = explain(&["--sandbox", "reduced", "--task", "t.yaml", call]);
    assert!(out.contains("verdict: deny"), "{out}");
    assert!(
        out.contains("sandbox: landlock+seccomp (--sandbox reduced)"),
        "{out}"
    );
    // A deny rule on run_shell: the unknowns are decided against it.
    let out = explain(&["--sandbox", "full", "--task", "d.yaml", call]);
    assert!(out.contains("verdict: allow"), "{out}");
    assert!(
        out.contains("no deny or ask rule can match this part for any value of its unknowns"),
        "{out}"
    );
    let out = explain(&["--sandbox", "full", "--task", "d.yaml", "run_shell(git $X)"]);
    assert!(out.contains("verdict: deny"), "{out}");
    assert!(
        out.contains("kept back: `git $X` could match `run_shell(git push*)`"),
        "{out}"
    );
    // Without a flag: the probe's answer, said so.
    let out = explain(&["--task", "t.yaml", call]);
    assert!(out.contains("(probed)"), "{out}");
    // The guards still refuse what they name literally.
    for (command, guard) in [
        ("sudo ls", "guard:blocked_commands"),
        ("cat .env", "guard:blocked_paths"),
        ("cat ~/.ssh/id_rsa", "guard:blocked_paths"),
        ("echo x > .git/config", "guard:protected_paths"),
        ("echo x >> $GITHUB_ENV", "guard:protected_paths"),
    ] {
        let out = explain(&[
            "--sandbox",
            "full",
            "--task",
            "t.yaml",
            &format!("run_shell({command})"),
        ]);
        assert!(
            out.contains("verdict: deny") && out.contains(guard),
            "{command}: {out}"
        );
    }
    // What does not parse never runs.
    let out = explain(&[
        "--sandbox",
        "full",
        "--task",
        "t.yaml",
        "run_shell(echo $(date)",
    ]);
    assert!(out.contains("verdict: deny"), "{out}");
    // Issue 33 item 4: a directory holding blocked paths, under the full
    // sandbox that hides them; not without it.
    let out = explain(&[
        "--sandbox",
        "full",
        "--task",
        "t.yaml",
        "run_shell(ls -la ~)",
    ]);
    assert!(out.contains("verdict: allow"), "{out}");
    let out = explain(&["--no-sandbox", "--task", "t.yaml", "run_shell(ls -la ~)"]);
    assert!(out.contains("verdict: deny"), "{out}");
    assert!(
        out.contains("names a directory containing a blocked path"),
        "{out}"
    );
}

/// Deny rules with the sandbox's exec guard (docs/policy.md, "The exec
/// guard"): the everyday commands run, and so do a Makefile, a script, a
/// module and inline code; a denied program they start is refused at
/// exec, with the reason on the command's stderr; a literal one is
/// refused up front. The model is told so.
#[test]
fn under_deny_rules_the_exec_guard_runs_what_the_parser_cannot_read() {
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test");
    ybs.file(
        "t.yaml",
        "prompt: do the thing\ncommit: false\npolicy:\n  allow: [\"run_shell(*)\"]\n  \
         deny: [\"run_shell(git push*)\", \"run_shell(curl*)\", \"run_shell(rm -rf*)\"]\n",
    );
    seed(&ybs);
    ybs.file(
        "Makefile",
        "all:\n\techo made > made.txt\npush:\n\tgit push origin main\n",
    );
    ybs.file("build.sh", "#!/bin/sh\necho built > built.txt\n");
    std::fs::set_permissions(
        ybs.path().join("build.sh"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    std::fs::create_dir_all(ybs.path().join("doomed/inner")).unwrap();
    let mut commands: Vec<String> = EVERYDAY.iter().map(|(c, _, _)| (*c).to_owned()).collect();
    let runs = [
        ("make", "made.txt"),
        ("./build.sh", "built.txt"),
        (
            "python3 -m json.tool tests/../seed.json > mod.txt",
            "mod.txt",
        ),
        (
            "node -e 1 2>/dev/null; eval \"echo ev > eval.txt\"",
            "eval.txt",
        ),
    ];
    ybs.file("seed.json", "{\"a\": 1}\n");
    commands.extend(runs.iter().map(|(c, _)| (*c).to_owned()));
    let at_exec = [
        "make push",
        "python3 -c \"import subprocess, sys; sys.exit(subprocess.call(['rm', '-rf', 'doomed']))\"",
        "X=cu; ${X}rl -s http://127.0.0.1:9",
    ];
    commands.extend(at_exec.iter().map(|c| (*c).to_owned()));
    commands.push("python3 -c \"import os; os.system('rm -rf doomed')\"".to_owned());
    commands.push("rm -rf doomed".to_owned());
    let (run, server) = scripted_run(&ybs, &commands);
    let calls = transcript(&run, "t")["tool_calls"].clone();
    let calls = calls.as_array().unwrap();
    assert_eq!(calls.len(), commands.len());
    for (entry, (command, file, content)) in calls.iter().zip(EVERYDAY) {
        let context = format!("{command}: {entry}");
        assert_eq!(entry["decision"]["verdict"], "allow", "{context}");
        assert!(ybs.read(file).contains(content), "{context}");
    }
    for (entry, (command, file)) in calls[EVERYDAY.len()..].iter().zip(runs) {
        let context = format!("{command}: {entry}");
        assert_eq!(entry["decision"]["verdict"], "allow", "{context}");
        assert!(ybs.exists(file), "{context}");
    }
    for (entry, command) in calls[EVERYDAY.len() + runs.len()..].iter().zip(at_exec) {
        let context = format!("{command}: {entry}");
        assert_eq!(entry["decision"]["verdict"], "allow", "{context}");
        let told = entry["result"]["output"].to_string();
        assert!(told.contains("ybs sandbox: refused exec of"), "{context}");
    }
    assert!(
        ybs.path().join("doomed/inner").is_dir(),
        "rm -rf was refused"
    );
    let named = &calls[calls.len() - 2];
    assert_eq!(named["decision"]["verdict"], "deny", "{named}");
    assert!(
        named["decision"]["detail"]
            .as_str()
            .is_some_and(|d| d.contains("`rm -rf` is named where the parser cannot read")),
        "{named}"
    );
    let last = calls.last().unwrap();
    assert_eq!(last["decision"]["verdict"], "deny", "{last}");
    assert_eq!(
        last["decision"]["rule"], "deny[2] run_shell(rm -rf*)",
        "{last}"
    );
    let request = server.requests()[0].json();
    let system = request["messages"][0]["content"].to_string();
    assert!(
        system.contains("a denied program is refused wherever it is started"),
        "{system}"
    );
    assert!(!system.contains("no $("), "{system}");
}
