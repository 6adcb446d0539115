//! What the sandbox holds back and bounds (docs/sandbox.md): the
//! non-interactive environment of every child, ybs's own state and the
//! credentials a machine holds, the `--record` file, and the number of
//! processes a task may have.

use serde_json::{Value, json};

use crate::support::cassette::{answer, call};
use crate::support::{Run, Ybs};

/// The output of the check named `name`.
fn check_output(run: &Run, name: &str) -> String {
    run.events("t")
        .iter()
        .find(|e| e["type"] == "check.completed" && e["name"] == name)
        .map(|e| e["output_tail"].as_str().unwrap().to_owned())
        .unwrap_or_else(|| panic!("no check {name}"))
}

const NON_INTERACTIVE: &[&str] = &[
    "GIT_TERMINAL_PROMPT=0",
    "DEBIAN_FRONTEND=noninteractive",
    "GIT_PAGER=cat",
    "PAGER=cat",
];

/// A shell command and a check see the non-interactive settings, even
/// when the operator passes a `PAGER` of their own through.
#[test]
fn every_child_gets_the_non_interactive_environment() {
    let ybs = Ybs::new()
        .env("PAGER", "less")
        .env("GIT_PAGER", "less")
        .env("CI", "");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\nchecks:\n  - run: env\n    name: env\n",
    );
    ybs.file(
        "operator.json",
        r#"{"safety": {"env_passthrough": ["PAGER", "GIT_PAGER"]}}"#,
    );
    ybs.cassette(
        "t.cassette.json",
        vec![call("run_shell", json!({"command": "env"})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    let shell = run.tool_results()[0]["stdout"].as_str().unwrap().to_owned();
    let check = check_output(&run, "env");
    for output in [&shell, &check] {
        let lines: Vec<&str> = output.lines().collect();
        for setting in NON_INTERACTIVE {
            assert!(lines.contains(setting), "{setting} missing:\n{output}");
        }
        assert!(!lines.contains(&"PAGER=less"), "{output}");
        assert!(lines.contains(&"CI=1"), "{output}");
    }
}

/// A home outside `/tmp` (the host's `/tmp` is private in the sandbox
/// anyway), as on a CI runner.
fn home_outside_tmp() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("ybs-home-")
        .tempdir_in("/var/tmp")
        .expect("a directory under /var/tmp")
}

/// Files under a home a confined program must not read: ybs's own state
/// and cache, and credentials of the default blocked list.
const HOME_SECRETS: &[&str] = &[
    ".local/state/ybs/resume-keys/run-earlier",
    ".cache/ybs/tools/schema.json",
    ".cargo/credentials.toml",
    ".cargo/credentials",
    ".m2/settings.xml",
    ".gradle/gradle.properties",
    ".terraform.d/credentials.tfrc.json",
    ".azure/accessTokens.json",
    ".gnupg/private-keys-v1.d/k.key",
    ".password-store/ci/token.gpg",
    ".local/share/keyrings/login.keyring",
];

/// ybs's state and cache directories and the credential files a machine
/// holds are hidden from a confined `cat` (default `blocked_paths`); ybs's
/// own directories stay hidden, also from `read_file`, when the operator's
/// `blocked_paths` names none of them and `allowed_paths` holds the home.
#[test]
fn ybs_state_and_machine_credentials_are_hidden_from_confined_programs() {
    let home_dir = home_outside_tmp();
    let home = home_dir.path().to_path_buf();
    let mut canaries = Vec::new();
    for (n, relative) in HOME_SECRETS.iter().enumerate() {
        let path = home.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let canary = format!("canary{n}x7q");
        std::fs::write(&path, &canary).unwrap();
        canaries.push(canary);
    }
    let ybs = Ybs::new().env("HOME", home.to_str().unwrap());
    let cat: Vec<String> = HOME_SECRETS
        .iter()
        .map(|relative| format!("cat '{}'", home.join(relative).display()))
        .collect();
    ybs.file("probe.sh", &format!("{}\necho probed\n", cat.join("\n")));
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, read_file]\n",
    );
    let key = home.join(HOME_SECRETS[0]).display().to_string();
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "sh probe.sh"})),
            call("read_file", json!({"path": key})),
            answer("done"),
        ],
    );
    let everything = |run: &Run| {
        let mut text = format!("{}{}", run.stdout, run.stderr);
        for name in ["transcript.json", "events.jsonl"] {
            text.push_str(&run.read(&format!("ybs-out/t/{name}")));
        }
        text
    };

    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let shell = &run.tool_results()[0];
    assert!(
        shell["stdout"].as_str().unwrap().ends_with("probed\n"),
        "{shell}"
    );
    let seen = everything(&run);
    for (relative, canary) in HOME_SECRETS.iter().zip(&canaries) {
        assert!(!seen.contains(canary.as_str()), "{relative} leaked");
    }

    // The operator's list names none of them, and allows the home: ybs's
    // own directories stay hidden from both the shell and read_file.
    ybs.file(
        "operator.json",
        &json!({"safety": {"blocked_paths": ["~/.ssh"], "allowed_paths": [home]}}).to_string(),
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    let results = run.tool_results();
    let read = results[1].to_string();
    assert!(read.contains("blocked path"), "{read}");
    let seen = everything(&run);
    for (relative, canary) in HOME_SECRETS.iter().zip(&canaries).take(2) {
        assert!(!seen.contains(canary.as_str()), "{relative} leaked");
    }
    // Credentials the operator no longer lists are theirs to expose.
    assert!(seen.contains(canaries[2].as_str()), "{seen}");
    for (relative, canary) in HOME_SECRETS.iter().zip(&canaries) {
        assert_eq!(
            &std::fs::read_to_string(home.join(relative)).unwrap(),
            canary
        );
    }
}

/// The run's resume key is masked like any secret: a task that pauses
/// writes it, and a later task of the run that reads it (unconfined,
/// where nothing hides it) shows `[REDACTED]`.
#[test]
fn the_runs_resume_key_is_masked_in_every_output() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "\
defaults:
  commit: false
  tools:
    caller:
      - name: deploy_preview
        description: Deploy
  policy:
    allow: [run_shell, deploy_preview]
tasks:
  - id: pauses
    prompt: deploy
  - id: reads
    prompt: read
",
    );
    ybs.file(
        "read.sh",
        "for f in \"$HOME\"/.local/state/ybs/resume-keys/*; do echo \"key=$(cat \"$f\")\"; done\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            json!({"task": "pauses", "response": {"content": "", "tool_calls": [{"id": "call_0", "name": "deploy_preview", "arguments": {}}], "usage": {"input_tokens": 10, "output_tokens": 2}}}),
            json!({"task": "reads", "response": {"content": "", "tool_calls": [{"id": "call_0", "name": "run_shell", "arguments": {"command": "sh read.sh"}}], "usage": {"input_tokens": 10, "output_tokens": 2}}}),
            json!({"task": "reads", "response": {"content": "read", "usage": {"input_tokens": 10, "output_tokens": 2}}}),
        ],
    );
    let run = ybs.run([
        "run",
        "t.yaml",
        "--no-sandbox",
        "--cassette",
        "t.cassette.json",
    ]);
    run.expect_code(3);
    let keys = ybs.home().join(".local/state/ybs/resume-keys");
    let key = std::fs::read_dir(&keys)
        .unwrap()
        .map(|entry| std::fs::read_to_string(entry.unwrap().path()).unwrap())
        .next()
        .expect("the paused task wrote its key");
    let key = key.trim();
    assert_eq!(key.len(), 64);
    let transcript = run.read("ybs-out/reads/transcript.json");
    assert!(transcript.contains("key=[REDACTED]"), "{transcript}");
    let mut seen = format!("{}{}{transcript}", run.stdout, run.stderr);
    for task in ["pauses", "reads"] {
        seen.push_str(&run.read(&format!("ybs-out/{task}/events.jsonl")));
    }
    seen.push_str(&run.read("ybs-out/pauses/state.json"));
    seen.push_str(&run.read("ybs-out/summary.md"));
    assert!(!seen.contains(key), "the resume key leaked");
}

/// `--record` with the cassette inside the repository: the model plants
/// links where ybs writes (the old fixed temporary name, the cassette
/// itself) and tries to write the cassette. The file outside stays as it
/// was, the cassette holds every interaction, and the confined program
/// cannot write it.
#[test]
fn record_never_writes_through_a_planted_link() {
    use crate::support::server::Server;
    use crate::support::wire;
    let ybs = Ybs::new().env("OPENAI_API_KEY", "sk-test-record-key");
    std::fs::create_dir(ybs.path().join("fixtures")).unwrap();
    let victim = ybs.home().join("victim.txt");
    std::fs::write(&victim, "keep\n").unwrap();
    let plant = format!(
        "ln -s '{v}' fixtures/rec.json.tmp; ln -s '{v}' fixtures/.rec.json.tmp; ln -sf '{v}' fixtures/rec.json; echo hijacked > fixtures/rec.json\n",
        v = victim.display()
    );
    // A script, so that the kernel, not the policy's guard, has to stop it.
    ybs.file("plant.sh", &plant);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\n",
    );
    let server = Server::start(vec![
        wire::openai_sse_call("c1", "run_shell", &json!({"command": "sh plant.sh"})),
        wire::openai_sse_call("c2", "run_shell", &json!({"command": "true"})),
        wire::openai_sse_answer("done"),
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
        "--record",
        "fixtures/rec.json",
    ]);
    run.expect_code(0);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep\n");
    let shell = &run.tool_results()[0];
    let stderr = shell["stderr"]
        .as_str()
        .unwrap_or_else(|| panic!("{shell}"));
    assert!(
        stderr.contains("rec.json") && stderr.contains("Read-only"),
        "{shell}"
    );
    let recorded = std::fs::symlink_metadata(ybs.path().join("fixtures/rec.json")).unwrap();
    assert!(recorded.is_file());
    let cassette: Value =
        serde_json::from_str(&ybs.read("fixtures/rec.json")).expect("the cassette is JSON");
    assert_eq!(cassette["interactions"].as_array().unwrap().len(), 3);
}

/// The marker argument of the bomb's processes: none may be alive after
/// the run.
const BOMB_MARK: &str = "4321.25";

/// Processes on the machine whose command line holds `mark`.
fn alive_with(mark: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(mark))
        })
        .count()
}

/// A program that forks as long as it may (300 at most, so an unbounded
/// machine survives the test), each child a long `sleep`: under
/// `safety.max_processes: 64` the forks are refused short of 64, the
/// call ends, the next call and the check work, and nothing of it is left
/// after the run. The manifest names the bound.
#[test]
fn max_processes_bounds_a_fork_bomb_and_nothing_survives_the_task() {
    let ybs = Ybs::new();
    ybs.file(
        "bomb.py",
        &format!(
            "import os\n\
             started = 0\n\
             try:\n\
             \x20   for _ in range(300):\n\
             \x20       if os.fork() == 0:\n\
             \x20           os.execvp('sleep', ['sleep', '{BOMB_MARK}'])\n\
             \x20       started += 1\n\
             except OSError as error:\n\
             \x20   print('refused', error.errno)\n\
             print('started', started)\n"
        ),
    );
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\nchecks:\n  - run: echo check-ran\n    name: after\n",
    );
    ybs.file("operator.json", r#"{"safety": {"max_processes": 64}}"#);
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "run_shell",
                json!({"command": "python3 bomb.py", "timeout_seconds": 60}),
            ),
            call("run_shell", json!({"command": "echo still-here"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    let results = run.tool_results();
    let bomb = results[0]["stdout"].as_str().unwrap_or_default().to_owned();
    assert!(bomb.contains("refused 11"), "{}", results[0]);
    let started: usize = bomb
        .lines()
        .find_map(|line| line.strip_prefix("started "))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{bomb}"));
    assert!(started < 64, "{bomb}");
    assert_eq!(results[0]["timed_out"], false, "{}", results[0]);
    assert_eq!(results[1]["stdout"], "still-here\n", "{}", results[1]);
    assert!(check_output(&run, "after").contains("check-ran"));
    assert_eq!(alive_with(BOMB_MARK), 0);
    let sandbox = &run.json("ybs-out/t/transcript.json")["manifest"]["sandbox"];
    assert!(
        sandbox["processes"]
            .as_str()
            .is_some_and(|bound| bound.ends_with(": 64")),
        "{sandbox}"
    );
    assert!(sandbox.get("missing_bounds").is_none(), "{sandbox}");
}

/// The same bomb run by an unprivileged ybs (`nobody`, through
/// `setpriv`): no cgroup to make, so `RLIMIT_NPROC` bounds it. Needs root
/// to become `nobody` (the tests run as root in CI).
#[test]
fn max_processes_binds_an_unprivileged_ybs_through_rlimit_nproc() {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    if std::fs::metadata("/proc/self").unwrap().uid() != 0 {
        return;
    }
    let dir = tempfile::Builder::new()
        .prefix("ybs-nobody-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let root = dir.path();
    let mark = "4321.75";
    let write = |name: &str, text: &str| std::fs::write(root.join(name), text).unwrap();
    write(
        "bomb.py",
        &format!(
            "import os\nstarted = 0\ntry:\n    for _ in range(300):\n        if os.fork() == 0:\n            os.execvp('sleep', ['sleep', '{mark}'])\n        started += 1\nexcept OSError as error:\n    print('refused', error.errno)\nprint('started', started)\n"
        ),
    );
    write(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\n",
    );
    write("operator.json", r#"{"safety": {"max_processes": 64}}"#);
    write(
        "t.cassette.json",
        &json!({"version": 1, "interactions": [
            call("run_shell", json!({"command": "python3 bomb.py"})),
            answer("done"),
        ]})
        .to_string(),
    );
    std::fs::create_dir(root.join("home")).unwrap();
    for path in [root.to_path_buf(), root.join("home")] {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(assert_cmd::cargo::cargo_bin("ybs"))
        .args([
            "run",
            "t.yaml",
            "--config",
            "operator.json",
            "--cassette",
            "t.cassette.json",
        ])
        .current_dir(root)
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", root.join("home"))
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("setpriv runs");
    let run = Run::from_output(output, root);
    run.expect_code(0);
    let bomb = run.tool_results()[0]["stdout"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(bomb.contains("refused 11"), "{bomb}");
    let sandbox = &run.json("ybs-out/t/transcript.json")["manifest"]["sandbox"];
    assert_eq!(sandbox["processes"], "RLIMIT_NPROC: 64", "{sandbox}");
    assert_eq!(alive_with(mark), 0);
}
