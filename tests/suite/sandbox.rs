//! Kernel confinement of `run_shell` and external tools through the binary
//! (docs/security.md S1). A scripted model runs commands that a static guard
//! cannot see through (a script it wrote itself); the kernel must stop
//! them.

use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use serde_json::{Value, json};

use crate::support::cassette::{answer, call};
use crate::support::{Run, Ybs};

fn manifest_sandbox(run: &Run) -> Value {
    run.json("ybs-out/t/transcript.json")["manifest"]["sandbox"].clone()
}

/// A task whose model writes `escape.sh` (a write outside the workdir,
/// the home and `/tmp`, plus writes inside, in `$TMPDIR` and in the
/// task's own `$HOME`) and runs it.
fn escape_task(ybs: &Ybs) {
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let outside = ybs.outside();
    let outside = outside.display();
    let script = format!(
        "echo in > inside.txt && echo tmp > \"$TMPDIR/t.txt\" && cat \"$TMPDIR/t.txt\" && echo h > \"$HOME/h\"\necho out > '{outside}/escaped.txt'\n"
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call(
                "write_file",
                json!({"path": "escape.sh", "content": script}),
            ),
            call("run_shell", json!({"command": "sh escape.sh"})),
            answer("done"),
        ],
    );
}

#[test]
fn shell_writes_outside_the_workdir_are_denied_by_the_kernel() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let results = run.tool_results();
    let shell = &results[1];
    assert_eq!(shell["stdout"], "tmp\n", "{shell}");
    assert!(
        shell["stderr"].as_str().unwrap().contains("cannot create"),
        "{shell}"
    );
    assert_ne!(shell["exit_code"], 0);
    assert!(!ybs.outside().join("escaped.txt").exists());
    assert_eq!(ybs.read("inside.txt"), "in\n");
    let sandbox = manifest_sandbox(&run);
    assert_eq!(sandbox["mode"], "namespaces+landlock+seccomp", "{sandbox}");
    assert_eq!(
        sandbox["layers"],
        json!(["namespaces", "landlock", "seccomp"]),
        "{sandbox}"
    );
    assert!(sandbox.get("missing").is_none(), "{sandbox}");
    assert_eq!(sandbox["network"], false);
    assert!(sandbox["landlock"].as_str().unwrap().ends_with("enforced"));
    // The private temp dir is gone with the task.
    let temp = sandbox["writable"][1].as_str().unwrap().to_owned();
    assert!(temp.contains("ybs-sandbox-"), "{sandbox}");
    assert!(!std::path::Path::new(&temp).exists());
    assert!(!run.stderr.contains("UNCONFINED"), "{}", run.stderr);
    let events = run.events("t");
    assert_eq!(events[0]["sandbox"]["mode"], "namespaces+landlock+seccomp");
}

#[test]
fn no_sandbox_lifts_it_and_every_output_says_so() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    let run = ybs.run(["run", "t.yaml", "--no-sandbox", "--quiet"]);
    run.expect_code(0);
    assert_eq!(
        std::fs::read_to_string(ybs.outside().join("escaped.txt")).unwrap(),
        "out\n"
    );
    let sandbox = manifest_sandbox(&run);
    assert_eq!(sandbox["mode"], "none", "{sandbox}");
    assert!(sandbox["reason"].as_str().unwrap().contains("--no-sandbox"));
    assert!(
        run.stderr.contains("warning: no sandbox") && run.stderr.contains("UNCONFINED"),
        "{}",
        run.stderr
    );
    assert!(run.read("ybs-out/summary.md").contains("UNCONFINED"));
    assert!(run.read("ybs-out/junit.xml").contains("UNCONFINED"));
}

#[test]
fn the_repository_config_cannot_turn_the_sandbox_off_or_widen_it() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    ybs.file(
        ".ybs.json",
        r#"{"safety": {"sandbox_enabled": false, "sandbox_network": true, "sandbox_writable_paths": ["/"], "sandbox_unix_sockets": true, "sandbox_require": "landlock", "sandbox_check_network": true}}"#,
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    for key in [
        "sandbox_unix_sockets",
        "sandbox_require",
        "sandbox_check_network",
    ] {
        assert!(run.stderr.contains(key), "{key}: {}", run.stderr);
    }
    assert!(run.stderr.contains("sandbox_enabled"), "{}", run.stderr);
    assert!(run.stderr.contains("sandbox_network"), "{}", run.stderr);
    assert!(
        run.stderr.contains("sandbox_writable_paths"),
        "{}",
        run.stderr
    );
}

#[test]
fn operator_config_grants_writable_paths() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    let outside = ybs.outside().display().to_string();
    ybs.file(
        "operator.json",
        &format!(r#"{{"safety": {{"sandbox_writable_paths": ["{outside}"]}}}}"#),
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    assert!(ybs.outside().join("escaped.txt").exists());
    assert_eq!(
        manifest_sandbox(&run)["mode"],
        "namespaces+landlock+seccomp"
    );
}

/// A task that connects to `port` on 127.0.0.1 with bash's `/dev/tcp`.
fn connect_task(ybs: &Ybs, port: u16) {
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let script = format!(
        "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected\n\
         command -v python3 >/dev/null && python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); s.bind(\"u.sock\"); print(\"unix ok\")'\n"
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "net.sh", "content": script})),
            call("run_shell", json!({"command": "bash net.sh"})),
            answer("done"),
        ],
    );
}

#[test]
fn no_network_nor_named_unix_sockets_unless_the_operator_grants_them() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let ybs = Ybs::new();
    connect_task(&ybs, port);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let shell = &run.tool_results()[1];
    let stdout = shell["stdout"].as_str().unwrap();
    assert!(!stdout.contains("connected"), "{shell}");
    assert!(
        shell["stderr"].as_str().unwrap().contains("not permitted"),
        "{shell}"
    );
    assert!(listener.accept().is_err(), "a connection was accepted");
    assert!(!stdout.contains("unix ok"), "{shell}");

    // Granted by the operator.
    let ybs = Ybs::new();
    connect_task(&ybs, port);
    ybs.file(
        "operator.json",
        r#"{"safety": {"sandbox_network": true, "sandbox_unix_sockets": true}}"#,
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    let shell = &run.tool_results()[1];
    assert!(
        shell["stdout"].as_str().unwrap().contains("connected"),
        "{shell}"
    );
    assert!(
        shell["stdout"].as_str().unwrap().contains("unix ok"),
        "{shell}"
    );
    assert_eq!(manifest_sandbox(&run)["network"], true);
}

/// An external tool that tries to write outside the workdir and reports.
const ESCAPING_TOOL: &str = r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo '{"name": "escape", "description": "Escape", "parameters": {}}'
  exit 0
fi
cat >/dev/null
if echo x > 'OUTSIDE_DIR/tool-escaped.txt' 2>/dev/null; then w=yes; else w=no; fi
if echo x > "$TMPDIR/tool-tmp.txt" 2>/dev/null; then t=yes; else t=no; fi
printf '{"success": true, "result": "write=%s tmp=%s"}\n' "$w" "$t"
"#;

fn escaping_tool(ybs: &Ybs) {
    let path = ybs.path().join("tools/escape");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let outside = ybs.outside().display().to_string();
    std::fs::write(&path, ESCAPING_TOOL.replace("OUTSIDE_DIR", &outside)).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn external_tools_are_confined_the_same_way() {
    let ybs = Ybs::new();
    let cache = ybs.home().join(".cache");
    let ybs = ybs.env("XDG_CACHE_HOME", cache.to_str().unwrap());
    escaping_tool(&ybs);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { external: [escape] }\npolicy: { allow: [escape] }\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![call("escape", json!({})), answer("done")],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(run.tool_results()[0], "write=no tmp=yes");
    assert!(!ybs.outside().join("tool-escaped.txt").exists());

    // `ybs tools invoke` too; `--no-sandbox` lifts it and says so.
    let run = ybs.run(["tools", "invoke", "escape"]);
    run.expect_code(0);
    assert!(run.stdout.contains("write=no tmp=yes"), "{}", run.stdout);
    assert!(!ybs.outside().join("tool-escaped.txt").exists());
    let run = ybs.run(["tools", "invoke", "escape", "--no-sandbox"]);
    run.expect_code(0);
    assert!(run.stdout.contains("write=yes"), "{}", run.stdout);
    assert!(run.stderr.contains("UNCONFINED"), "{}", run.stderr);
    assert!(ybs.outside().join("tool-escaped.txt").exists());
}

/// `ybs` started with Landlock made unavailable by the kernel: a seccomp
/// filter (installed in the child before exec) fails
/// `landlock_create_ruleset` with `ENOSYS`, as on a kernel without it.
fn run_without_landlock(ybs: &Ybs, args: &[&str]) -> Run {
    run_with_failing(
        ybs,
        args,
        nix::libc::SYS_landlock_create_ruleset,
        nix::libc::ENOSYS,
    )
}

/// `ybs` started with user namespaces made unavailable: `unshare` fails
/// with `EPERM`, as where unprivileged user namespaces are disabled.
fn run_without_namespaces(ybs: &Ybs, args: &[&str]) -> Run {
    run_with_failing(ybs, args, nix::libc::SYS_unshare, nix::libc::EPERM)
}

/// `ybs` started under a seccomp filter failing `syscall` with `errno`.
#[allow(unsafe_code)]
fn run_with_failing(ybs: &Ybs, args: &[&str], syscall: i64, errno: i32) -> Run {
    use seccompiler::{SeccompAction, SeccompFilter, TargetArch};
    let filter = SeccompFilter::new(
        [(syscall, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        TargetArch::try_from(std::env::consts::ARCH).unwrap(),
    )
    .unwrap();
    let program: seccompiler::BpfProgram = filter.try_into().unwrap();
    let mut command = ybs.command();
    command.args(args);
    // SAFETY: apply_filter makes two system calls and does not allocate.
    unsafe {
        command
            .pre_exec(move || seccompiler::apply_filter(&program).map_err(std::io::Error::other));
    }
    let output = command.output().unwrap();
    Run::from_output(output, ybs.path())
}

#[test]
fn without_kernel_confinement_a_shell_task_refuses_to_start() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    let run = run_without_landlock(&ybs, &["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("kernel confinement is unavailable"),
        "{}",
        run.stderr
    );
    assert!(run.stderr.contains("--no-sandbox"), "{}", run.stderr);
    assert!(!ybs.exists("inside.txt"));

    // `--no-sandbox` runs it, and says so.
    let run = run_without_landlock(&ybs, &["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(0);
    assert!(ybs.outside().join("escaped.txt").exists());
    assert_eq!(manifest_sandbox(&run)["mode"], "none");

    // A task that runs no program for the model starts, and says why
    // nothing is confined.
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { builtin: [read_file] }\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    let run = run_without_landlock(&ybs, &["run", "t.yaml"]);
    run.expect_code(0);
    let sandbox = manifest_sandbox(&run);
    assert_eq!(sandbox["mode"], "none");
    assert!(
        sandbox["reason"].as_str().unwrap().contains("Landlock"),
        "{sandbox}"
    );
    assert!(run.stderr.contains("UNCONFINED"), "{}", run.stderr);
}

#[test]
fn without_namespaces_tasks_refuse_unless_the_operator_accepts_landlock_alone() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    let run = run_without_namespaces(&ybs, &["run", "t.yaml"]);
    run.expect_code(2);
    assert!(run.stderr.contains("namespaces"), "{}", run.stderr);
    assert!(run.stderr.contains("sandbox_require"), "{}", run.stderr);
    assert!(!ybs.exists("inside.txt"));

    // The repository cannot lower the requirement.
    ybs.file(
        ".ybs.json",
        r#"{"safety": {"sandbox_require": "landlock"}}"#,
    );
    let run = run_without_namespaces(&ybs, &["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr.contains("cannot be set in the repository"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();

    // The operator can: Landlock and seccomp still stop the write, and
    // every output names the missing layer.
    ybs.file(
        "operator.json",
        r#"{"safety": {"sandbox_require": "landlock"}}"#,
    );
    let run = run_without_namespaces(&ybs, &["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    assert!(!ybs.outside().join("escaped.txt").exists());
    assert_eq!(ybs.read("inside.txt"), "in\n");
    let sandbox = manifest_sandbox(&run);
    assert_eq!(sandbox["mode"], "landlock+seccomp", "{sandbox}");
    assert_eq!(
        sandbox["layers"],
        json!(["landlock", "seccomp"]),
        "{sandbox}"
    );
    assert!(
        sandbox["missing"][0]
            .as_str()
            .unwrap()
            .starts_with("namespaces: "),
        "{sandbox}"
    );
    assert!(
        run.stderr.contains("missing layer: namespaces"),
        "{}",
        run.stderr
    );
    assert!(
        run.read("ybs-out/summary.md")
            .contains("missing layer: namespaces")
    );
    let shell = &run.tool_results()[1];
    assert!(
        shell["stderr"]
            .as_str()
            .unwrap()
            .contains("Permission denied"),
        "{shell}"
    );
}

#[test]
fn a_bad_sandbox_requirement_is_a_located_error() {
    let ybs = Ybs::new();
    escape_task(&ybs);
    ybs.file(
        "operator.json",
        "{\"safety\": {\"sandbox_require\": \"none\"}}",
    );
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(2);
    assert!(run.stderr.contains("operator.json:1:"), "{}", run.stderr);
    assert!(run.stderr.contains("`all` or `landlock`"), "{}", run.stderr);
    assert!(run.stderr.contains("hint:"), "{}", run.stderr);
}

/// Start-up (issue 24, item 1): the probe's answer is kept for the boot in
/// ybs's cache directory when every layer works, used while its key (boot,
/// kernel, binary, user) matches, and replaced by a new probe when not.
#[test]
fn a_working_probe_is_kept_for_the_boot_and_used_only_under_its_key() {
    let ybs = Ybs::new();
    let cache = ybs.home().join("xdg-cache");
    let ybs = ybs.env("XDG_CACHE_HOME", &cache.display().to_string());
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "echo hi"})),
            answer("done"),
        ],
    );
    let kept = cache.join("ybs/sandbox-probe.json");
    let run = ybs.run(["run", "t.yaml", "--no-sandbox"]);
    run.expect_code(0);
    assert!(!kept.exists(), "--no-sandbox probes nothing");

    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let probed = manifest_sandbox(&run)["landlock"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut value: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(value["landlock"], probed.as_str(), "{value}");
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");

    // The kept answer is what the next run reports: no probe ran.
    let other = if probed == "fully_enforced" {
        "partially_enforced"
    } else {
        "fully_enforced"
    };
    value["landlock"] = json!(other);
    std::fs::write(&kept, value.to_string()).unwrap();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(manifest_sandbox(&run)["landlock"], other);
    assert_eq!(run.tool_results()[0]["stdout"], "hi\n");

    // Kept under another key (another boot, binary or user): probed again.
    value["key"] = json!("boot=another");
    std::fs::write(&kept, value.to_string()).unwrap();
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    assert_eq!(manifest_sandbox(&run)["landlock"], probed.as_str());
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_ne!(value["key"], "boot=another", "{value}");
    assert_eq!(value["landlock"], probed.as_str(), "{value}");
}

/// The private temp dir (`ybs-sandbox-*` under `TMPDIR`) is made at the
/// task's first confined program, not when the task is set up: while the
/// model answers the first request of a task that may run `run_shell`,
/// nothing of the sandbox is in the temp dir yet (docs/sandbox.md). The
/// model here is a socket that reads the request and never answers; the
/// run is then killed.
#[test]
fn the_private_temp_dir_waits_for_the_first_confined_program() {
    use std::io::Read as _;
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [\"run_shell(cat *)\", read_file]\n",
    );
    let temp = tempfile::tempdir().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1", listener.local_addr().unwrap());
    let mut child = ybs
        .command()
        .env("TMPDIR", temp.path())
        .args(["run", "-q", "--provider", "openai", "--model", "m"])
        .args(["--endpoint", &endpoint, "t.yaml"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (mut stream, _) = listener.accept().unwrap();
    let mut request = Vec::new();
    let mut buffer = [0_u8; 4096];
    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
        let read = stream.read(&mut buffer).unwrap();
        assert!(read > 0, "the connection closed before the request");
        request.extend_from_slice(&buffer[..read]);
    }
    let made: Vec<String> = std::fs::read_dir(temp.path())
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("ybs-sandbox-"))
        .collect();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(made.is_empty(), "made before any program ran: {made:?}");
}

/// No run leaves its private temp dir behind, and what a run killed
/// before its end left (an overlay's work directory at mode 000 inside)
/// is swept by the next run, while a live run's is left alone.
#[test]
fn private_temp_dirs_go_with_their_run_and_a_killed_runs_are_swept() {
    use std::os::unix::fs::PermissionsExt as _;
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\nchecks:\n  - name: c\n    run: echo ok > \"$TMPDIR/x\"\n",
    )
    .cassette("t.cassette.json", vec![answer("done")]);
    let temp = tempfile::tempdir().unwrap();
    // pid_max is at most 2^22: this process cannot exist.
    let dead = temp.path().join("ybs-sandbox-4999999-0123456789abcdef");
    let locked = dead.join(".ybs-scratch/0/work/work");
    std::fs::create_dir_all(&locked).unwrap();
    std::fs::write(locked.join("f"), "x").unwrap();
    std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o000)).unwrap();
    let live = temp.path().join(format!(
        "ybs-sandbox-{}-fedcba9876543210",
        std::process::id()
    ));
    std::fs::create_dir_all(&live).unwrap();
    let ybs = ybs.env("TMPDIR", temp.path().to_str().unwrap());
    let run = ybs.run(["run", "t.yaml", "--cassette", "t.cassette.json"]);
    run.expect_code(0);
    let left: Vec<String> = std::fs::read_dir(temp.path())
        .unwrap()
        .flatten()
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        left,
        [live.file_name().unwrap().to_string_lossy().into_owned()],
        "{}",
        run.stdout
    );
}

/// `ybs sandbox check` (issue 38, item 4): every layer, what is missing
/// and why; exit 0 when all work, 4 when one is missing.
#[test]
fn sandbox_check_prints_each_layer_and_exits_by_what_works() {
    let ybs = Ybs::new();
    let run = ybs.run(["sandbox", "check"]);
    run.expect_code(0);
    let lines: Vec<&str> = run.stdout.lines().collect();
    assert_eq!(lines[0], "namespaces ok", "{}", run.stdout);
    assert!(lines[1].starts_with("landlock   ok ("), "{}", run.stdout);
    assert_eq!(lines[2], "seccomp    ok", "{}", run.stdout);
    assert_eq!(
        lines[3], "exec-guard ok (deny rules on run_shell hold at exec)",
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("ok: every layer works"));
    assert!(!run.stdout.contains("AppArmor"), "{}", run.stdout);

    let run = ybs.run(["sandbox", "check", "--json"]);
    run.expect_code(0);
    let check: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(check["ok"], true);
    assert_eq!(check["layers"][0]["layer"], "namespaces");
    assert_eq!(check["missing"], json!([]));
    assert_eq!(check["cause"], Value::Null);
    assert_eq!(check["exec_guard"]["ok"], true);

    let run = run_without_namespaces(&ybs, &["sandbox", "check"]);
    run.expect_code(4);
    assert!(
        run.stdout.starts_with("namespaces missing: "),
        "{}",
        run.stdout
    );
    assert!(run.stdout.contains("landlock   ok ("), "{}", run.stdout);
    assert!(!run.stdout.contains("ok: every layer"), "{}", run.stdout);
    assert!(
        run.stderr.starts_with(
            "error: kernel confinement is incomplete here: namespaces missing\nhint: "
        ),
        "{}",
        run.stderr
    );
    assert!(
        run.stderr.contains("sandbox_require: landlock"),
        "{}",
        run.stderr
    );
    // The Action's script looks for this text (.github/action/run.sh).
    let run = run_without_namespaces(&ybs, &["sandbox", "check", "--json"]);
    run.expect_code(4);
    assert!(
        run.stdout
            .starts_with(r#"{"ok":false,"layers":[{"layer":"namespaces","ok":false,"#),
        "{}",
        run.stdout
    );

    let run = run_without_landlock(&ybs, &["sandbox", "check", "--json"]);
    run.expect_code(4);
    let check: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(check["ok"], false);
    assert_eq!(check["layers"][1]["ok"], false);
    assert!(
        check["missing"][0]
            .as_str()
            .unwrap()
            .starts_with("landlock: "),
        "{check}"
    );
}
