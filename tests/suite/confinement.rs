//! Issue 9's acceptance through the real binary: a scripted model (replay
//! cassette) writes Python scripts and runs them with `run_shell`; checks
//! run what it wrote. Run as root (as CI here does) and, where the test
//! can drop to one, as an unprivileged user.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::cassette::{answer, call};
use crate::support::git;
use crate::support::{Run, Ybs};

/// Variables a CI runner might hold, with canary values.
const CANARIES: &[(&str, &str)] = &[
    ("API_KEY", "canary-api-key-5e1d0c"),
    ("DEPLOY_KEY", "canary-deploy-key-77ab"),
    ("DATABASE_URL", "postgres://canary:pw-39f1@db/x"),
    ("SLACK_WEBHOOK_URL", "https://hooks.slack.test/canary-0c4e"),
    ("GH_PAT", "ghp_canary_pat_1b2c3d"),
];

fn with_canaries(mut ybs: Ybs) -> Ybs {
    for (name, value) in CANARIES {
        ybs = ybs.env(name, value);
    }
    ybs
}

/// A repository with two commits in `dir`.
fn repo(dir: &Path) {
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("app.txt"), "one\n").unwrap();
    git(dir, &["add", "app.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
    std::fs::write(dir.join("app.txt"), "two\n").unwrap();
    git(dir, &["commit", "-q", "-am", "second"]);
}

/// The task: the model writes `files` and runs `python3 probe.py`.
fn task(ybs: &Ybs, extra_yaml: &str, files: &[(&str, &str)]) {
    ybs.file(
        "t.yaml",
        &format!(
            "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n{extra_yaml}"
        ),
    );
    let mut turns: Vec<Value> = files
        .iter()
        .map(|(path, content)| call("write_file", json!({"path": path, "content": content})))
        .collect();
    turns.push(call(
        "run_shell",
        json!({"command": "python3 probe.py", "timeout_seconds": 60}),
    ));
    turns.push(answer("done"));
    ybs.cassette("t.cassette.json", turns);
}

/// The last shell result the model saw.
fn shell_result(run: &Run, transcript: &str) -> Value {
    let transcript = run.json(transcript);
    let content = transcript["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap();
    serde_json::from_str(&content).unwrap_or_else(|_| json!(content))
}

/// `key=value` lines of a probe's stdout.
fn verdicts(result: &Value) -> std::collections::BTreeMap<String, String> {
    result["stdout"]
        .as_str()
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(key, value)| (key.to_owned(), value.to_owned()))
        .collect()
}

fn assert_denied(verdicts: &std::collections::BTreeMap<String, String>, keys: &[&str]) {
    for key in keys {
        let verdict = verdicts.get(*key).map(String::as_str);
        assert!(
            verdict.is_some_and(|v| v.starts_with("denied")),
            "{key}: {verdict:?} in {verdicts:#?}"
        );
    }
}

/// Every output of the run: stdout, stderr, every file under `ybs-out`.
fn all_outputs(run: &Run, root: &Path) -> String {
    let mut text = format!("{}\n{}\n", run.stdout, run.stderr);
    let mut stack = vec![root.join("ybs-out")];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(content) = std::fs::read_to_string(&path) {
                text.push_str(&content);
            }
        }
    }
    text
}

fn assert_no_canary(text: &str) {
    for (name, value) in CANARIES {
        assert!(!text.contains(value), "{name}'s value leaked");
    }
}

/// Python: try `body` (a statement), print `name=ok` or `name=denied (...)`.
fn attempt(name: &str, body: &str) -> String {
    format!(
        "try:\n    {body}\n    print('{name}=ok')\nexcept Exception as e:\n    print('{name}=denied', type(e).__name__, e)\n"
    )
}

// ---------------------------------------------------------------------------
// Acceptance 1: the fsmonitor chain, and a check is confined.

#[test]
fn the_fsmonitor_chain_is_stopped_and_checks_are_confined() {
    let ybs = with_canaries(Ybs::new());
    repo(ybs.path());
    let config_before = std::fs::read(ybs.path().join(".git/config")).unwrap();
    let outside = PathBuf::from(format!(
        "/var/tmp/ybs-pwned-by-check-{}",
        std::process::id()
    ));
    let payload = "#!/bin/sh\necho payload > /tmp/../pwned\n";
    let setup = format!(
        "import os\n{}",
        attempt(
            "fsmonitor",
            "open('.git/config', 'a').write('[core]\\n\\tfsmonitor = ./fsm.sh\\n')"
        )
    );
    // What the check runs: code the model wrote.
    let check = format!(
        "import os, socket\n\
         print('canaries=' + ','.join(n for n in {names:?} if n in os.environ) or 'none')\n\
         {}{}",
        attempt(
            "outside",
            &format!("open('{}', 'w').write('x')", outside.display())
        ),
        attempt("inet", "socket.socket(socket.AF_INET, socket.SOCK_STREAM)"),
        names = CANARIES.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
    );
    task(
        &ybs,
        "checks:\n  - git status --porcelain\n  - run: python3 check.py\n    name: tests\n",
        &[
            ("fsm.sh", payload),
            ("probe.py", &setup),
            ("check.py", &check),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    assert_denied(&verdicts(&result), &["fsmonitor"]);
    assert_eq!(
        std::fs::read(ybs.path().join(".git/config")).unwrap(),
        config_before
    );

    let events = run.events("t");
    let check = events
        .iter()
        .find(|e| e["type"] == "check.completed" && e["name"] == "tests")
        .expect("the check ran");
    let output = check["output_tail"].as_str().unwrap();
    let seen: std::collections::BTreeMap<String, String> = output
        .lines()
        .filter_map(|line| line.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    assert_eq!(
        seen.get("canaries").map(String::as_str),
        Some(""),
        "{output}"
    );
    assert_denied(&seen, &["outside", "inet"]);
    assert!(!outside.exists());
    assert!(!Path::new("/pwned").exists());
    assert_no_canary(&all_outputs(&run, ybs.path()));
}

/// A check that asks for the network gets it only when the operator grants
/// it: without the grant the task file is refused at load (exit 2, located,
/// naming the key), by `run` and by `validate`; the repository's own config
/// cannot grant it.
#[test]
fn a_check_gets_the_network_only_when_it_asks_and_the_operator_grants_it() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let ybs = Ybs::new();
    let connect = format!(
        "import socket\n{}",
        attempt(
            "connect",
            &format!("socket.create_connection(('127.0.0.1', {port}), timeout=5)")
        )
    );
    ybs.file("net.py", &connect);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\ntools: { builtin: [read_file] }\nchecks:\n  - run: python3 net.py\n    name: closed\n  - run: python3 net.py\n    name: open\n    network: true\n",
    );
    ybs.cassette("t.cassette.json", vec![answer("done")]);
    let output_of = |run: &Run, name: &str| -> String {
        run.events("t")
            .iter()
            .find(|e| e["type"] == "check.completed" && e["name"] == name)
            .map(|e| e["output_tail"].as_str().unwrap().to_owned())
            .unwrap()
    };
    for args in [vec!["run", "t.yaml"], vec!["validate", "t.yaml"]] {
        let run = ybs.run(args);
        run.expect_code(2);
        assert!(run.stderr.contains("t.yaml:9:"), "{}", run.stderr);
        assert!(
            run.stderr.contains("asks for the network")
                && run.stderr.contains("safety.sandbox_check_network: true"),
            "{}",
            run.stderr
        );
    }
    assert!(!ybs.path().join("ybs-out").exists());

    // The repository cannot grant it.
    ybs.file(
        ".ybs.json",
        r#"{"safety": {"sandbox_check_network": true}}"#,
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(2);
    assert!(
        run.stderr
            .contains("cannot be set in the repository's config"),
        "{}",
        run.stderr
    );
    std::fs::remove_file(ybs.path().join(".ybs.json")).unwrap();

    // The operator grants it: only the check that asks has it.
    ybs.file(
        "operator.json",
        r#"{"safety": {"sandbox_check_network": true}}"#,
    );
    ybs.run(["validate", "t.yaml", "--config", "operator.json"])
        .expect_code(0);
    let run = ybs.run(["run", "t.yaml", "--config", "operator.json"]);
    run.expect_code(0);
    assert!(output_of(&run, "closed").starts_with("connect=denied"));
    assert!(output_of(&run, "open").starts_with("connect=ok"));
}

// ---------------------------------------------------------------------------
// Acceptance 2: history, CI and control files, outputs.

fn protected_probe() -> String {
    let mut script = String::from("import os, subprocess\n");
    for (name, body) in [
        ("git_config", "open('.git/config', 'a').write('x')"),
        ("git_hook", "open('.git/hooks/pre-commit', 'w').write('x')"),
        ("git_new", "open('.git/new-file', 'w').write('x')"),
        ("git_chmod", "os.chmod('.git/HEAD', 0o777)"),
        ("git_unlink", "os.unlink('.git/HEAD')"),
        ("git_rename", "os.rename('.git', 'moved-git')"),
        (
            "workflow",
            "os.makedirs('.github/workflows', exist_ok=True); open('.github/workflows/x.yml', 'w').write('x')",
        ),
        (
            "actions",
            "os.makedirs('.github/actions', exist_ok=True); open('.github/actions/x.yml', 'w').write('x')",
        ),
        (
            "github_rename",
            "os.rename('.github', 'moved-github'); os.makedirs('.github/workflows'); open('.github/workflows/x.yml', 'w').write('x')",
        ),
        ("ybs_json", "open('.ybs.json', 'w').write('{}')"),
        ("ybs_json_rmdir", "os.rmdir('.ybs.json')"),
        ("task_file", "open('t.yaml', 'a').write('x')"),
        ("out_dir", "open('ybs-out/forged.json', 'w').write('x')"),
        (
            "out_read",
            "assert not os.listdir('ybs-out'), os.listdir('ybs-out')",
        ),
    ] {
        script.push_str(&attempt(name, body));
    }
    for (name, args) in [
        ("reset", "['git', 'reset', '--hard', 'HEAD~1']"),
        ("stash_drop", "['git', 'stash', 'drop']"),
        ("gc", "['git', 'gc', '--prune=now']"),
    ] {
        script.push_str(&format!(
            "r = subprocess.run({args}, capture_output=True)\nprint('{name}=' + ('ok' if r.returncode == 0 else 'denied'))\n"
        ));
    }
    script
}

const PROTECTED: &[&str] = &[
    "git_config",
    "git_hook",
    "git_new",
    "git_chmod",
    "git_unlink",
    "git_rename",
    "workflow",
    "actions",
    "github_rename",
    "ybs_json",
    "ybs_json_rmdir",
    "task_file",
    "out_dir",
    "reset",
    "stash_drop",
    "gc",
];

/// Runs the protected-path probe in a repository with a stash entry and
/// a dirty file; `workflows` decides whether `.github/workflows` exists.
fn run_protected(ybs: &Ybs, workflows: bool, wrap: impl Fn(&Ybs) -> Run) {
    let root = ybs.path();
    repo(root);
    std::fs::write(root.join("app.txt"), "stashed\n").unwrap();
    git(root, &["stash", "-q"]);
    if workflows {
        ybs.file(".github/workflows/ci.yml", "on: push\n");
        git(root, &["add", ".github"]);
        git(root, &["commit", "-q", "-m", "ci"]);
    }
    std::fs::write(root.join("app.txt"), "the user's uncommitted work\n").unwrap();
    let head = git(root, &["rev-parse", "HEAD"]);
    let log = git(root, &["log", "--format=%H"]);
    let stash = git(root, &["stash", "list"]);
    let git_files = snapshot(&root.join(".git"));
    task(ybs, "", &[("probe.py", &protected_probe())]);
    std::fs::create_dir_all(root.join("ybs-out")).unwrap();
    let run = wrap(ybs);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    let verdicts = verdicts(&result);
    assert_denied(&verdicts, PROTECTED);
    assert_eq!(verdicts.get("out_read").map(String::as_str), Some("ok"));

    assert_eq!(
        std::fs::read_to_string(root.join("app.txt")).unwrap(),
        "the user's uncommitted work\n"
    );
    assert_eq!(git(root, &["rev-parse", "HEAD"]), head);
    assert_eq!(git(root, &["log", "--format=%H"]), log);
    assert_eq!(git(root, &["stash", "list"]), stash);
    assert_eq!(snapshot(&root.join(".git")), git_files);
    assert!(!root.join(".github/workflows/x.yml").exists());
    // The placeholders for missing paths are gone, the tree is as before.
    assert!(!root.join(".ybs.json").exists());
    assert!(!root.join(".github/actions").exists());
    assert_eq!(root.join(".github").exists(), workflows);
    assert!(!root.join("ybs-out/forged.json").exists());
    let status = git(root, &["status", "--porcelain"]);
    assert_eq!(
        status,
        " M app.txt\n?? probe.py\n?? t.cassette.json\n?? t.yaml\n"
    );
}

/// Every file under `dir` with its content.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>, u32)> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_owned()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else {
                let content = std::fs::read(&path).unwrap_or_default();
                files.push((path, content, meta.permissions().mode()));
            }
        }
    }
    files.sort();
    files
}

#[test]
fn history_ci_and_control_files_are_read_only_existing_or_not() {
    let ybs = Ybs::new();
    run_protected(&ybs, true, |ybs| ybs.run(["run", "t.yaml"]));
    let ybs = Ybs::new();
    run_protected(&ybs, false, |ybs| ybs.run(["run", "t.yaml"]));
}

// ---------------------------------------------------------------------------
// Acceptance 3: no privileges, nothing outside reachable.

/// A process outside the sandbox the model must not be able to signal.
struct Canary(Child);

impl Canary {
    fn start(marker: &str, user: Option<u32>) -> Self {
        let mut command = match user {
            Some(uid) => {
                let mut command = Command::new("setpriv");
                command.args([
                    &format!("--reuid={uid}"),
                    &format!("--regid={uid}"),
                    "--clear-groups",
                    "sh",
                ]);
                command
            }
            None => Command::new("sh"),
        };
        let child = command
            .args(["-c", &format!("sleep 30; : {marker}")])
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        Self(child)
    }

    fn pid(&self) -> u32 {
        self.0.id()
    }

    /// The process state letter (`S` sleeping, `T` stopped...).
    fn state(&self) -> String {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap();
        stat.rsplit(')')
            .next()
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .to_owned()
    }
}

impl Drop for Canary {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn privilege_probe(canary: u32, outside: &Path, socket: &Path, abstract_name: &str) -> String {
    let mut script = String::from(
        "import ctypes, os, socket, signal, time\n\
         while not os.path.exists('ybs.pid'): time.sleep(0.02)\n\
         ybs = int(open('ybs.pid').read())\n",
    );
    for (name, body) in [
        ("mknod", "os.mknod('blk', 0o600 | 0o060000, os.makedev(8, 0))".to_owned()),
        ("mknod_chr", "os.mknod('chr', 0o600 | 0o020000, os.makedev(1, 3))".to_owned()),
        ("chown", format!("os.chown('{}', 1, 1)", outside.display())),
        ("chmod", format!("os.chmod('{}', 0o777)", outside.display())),
        ("sethostname", "socket.sethostname('pwned')".to_owned()),
        ("stop_ybs", "os.kill(ybs, signal.SIGSTOP)".to_owned()),
        ("stop_canary", format!("os.kill({canary}, signal.SIGSTOP)")),
        ("kill_canary", format!("os.kill({canary}, signal.SIGKILL)")),
        (
            "path_socket",
            format!(
                "s = socket.socket(socket.AF_UNIX); s.connect('{}')",
                socket.display()
            ),
        ),
        (
            "abstract_socket",
            format!("s = socket.socket(socket.AF_UNIX); s.connect('\\0{abstract_name}')"),
        ),
        (
            "unshare",
            "libc = ctypes.CDLL(None, use_errno=True); assert libc.unshare(0x10000000) == 0, ctypes.get_errno()".to_owned(),
        ),
    ] {
        script.push_str(&attempt(name, &body));
    }
    // Reading ybs's environment: absent from this /proc; a leak is not
    // "denied" even if the read "works".
    script.push_str(
        "try:
    data = open(f'/proc/{ybs}/environ', 'rb').read()
    print('environ=' + ('LEAKED' if b'canary' in data else 'denied (another process)'))
except Exception as e:
    print('environ=denied', type(e).__name__, e)
",
    );
    script.push_str(
        "print('hostname=' + socket.gethostname())\n\
         print('pids=' + ','.join(p for p in os.listdir('/proc') if p.isdigit()))\n\
         print('caps=' + [l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\n",
    );
    script
}

/// Runs the privilege probe with `ybs` started by `command` (called once
/// every file is written); the canary runs as `canary_user`.
fn run_privileges(ybs: &Ybs, command: impl FnOnce(&Ybs) -> Command, canary_user: Option<u32>) {
    let root = ybs.path();
    let marker = format!("ybs-canary-{}", std::process::id());
    let canary = Canary::start(&marker, canary_user);
    std::fs::create_dir_all(root.join("work")).unwrap();
    ybs.file("outside.txt", "outside\n");
    let socket_path = root.join("work/daemon.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket_path).unwrap();
    listener.set_nonblocking(true).unwrap();
    // Unique per call: the root and the unprivileged test run this at once.
    let abstract_name = format!(
        "ybs-test-{}-{}",
        std::process::id(),
        root.file_name().unwrap().to_string_lossy()
    );
    let abstract_listener = {
        use std::os::linux::net::SocketAddrExt;
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        std::os::unix::net::UnixListener::bind_addr(&addr).unwrap()
    };
    abstract_listener.set_nonblocking(true).unwrap();
    let script = privilege_probe(
        canary.pid(),
        &root.join("outside.txt"),
        &socket_path,
        &abstract_name,
    );
    task(ybs, "workdir: work\n", &[("probe.py", &script)]);
    let mut command = command(ybs);
    let child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::fs::write(root.join("work/ybs.pid"), child.id().to_string()).unwrap();
    let output = child.wait_with_output().unwrap();
    let run = Run::from_output(output, root);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    let verdicts = verdicts(&result);
    assert_denied(
        &verdicts,
        &[
            "mknod",
            "mknod_chr",
            "chown",
            "chmod",
            "sethostname",
            "environ",
            "stop_ybs",
            "stop_canary",
            "kill_canary",
            "path_socket",
            "abstract_socket",
            "unshare",
        ],
    );
    assert_eq!(verdicts["hostname"], "ybs-sandbox");
    assert_eq!(verdicts["caps"], "0000000000000000");
    // Only the sandbox's own processes are visible: few, small pids.
    let pids: Vec<u32> = verdicts["pids"]
        .split(',')
        .map(|pid| pid.parse().unwrap())
        .collect();
    assert!(pids.len() <= 4 && pids.contains(&1), "{pids:?}");
    assert!(!pids.contains(&canary.pid()));
    assert_eq!(canary.state(), "S", "the canary was signalled");
    assert!(listener.accept().is_err());
    assert!(abstract_listener.accept().is_err());
    let meta = std::fs::metadata(root.join("outside.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o644);
    assert!(!root.join("work/blk").exists());
}

#[test]
fn as_root_no_privilege_survives_and_nothing_outside_is_reachable() {
    let ybs = with_canaries(Ybs::new());
    run_privileges(
        &ybs,
        |ybs| {
            let mut command = ybs.command();
            command.args(["run", "t.yaml"]);
            command
        },
        None,
    );
}

// ---------------------------------------------------------------------------
// Acceptance 4: every process ends.

const CHAIN: &str = r#"#!/bin/sh
# chain.sh DEPTH MARKER: DEPTH nested shells, each waiting on the next.
if [ "$1" -gt 0 ]; then
  sh ./chain.sh $(($1 - 1)) "$2"
else
  exec sh -c "sleep 60; : $2"
fi
"#;

fn process_probe(marker: &str, block: bool) -> String {
    let mut script = format!(
        "import os, subprocess, time, sys\n\
         subprocess.Popen(['sh', './chain.sh', '100', '{marker}'], start_new_session=True)\n\
         if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('sh', ['sh', '-c', 'sleep 60; : {marker}-daemon'])\n    os._exit(0)\n\
         os.wait()\n\
         def count():\n    n = 0\n    for p in os.listdir('/proc'):\n        try:\n            if b'{marker}' in open(f'/proc/{{p}}/cmdline', 'rb').read(): n += 1\n        except Exception: pass\n    return n\n\
         deadline = time.time() + 20\n\
         while count() < 102 and time.time() < deadline: time.sleep(0.05)\n\
         print('alive=' + str(count()))\n\
         sys.stdout.flush()\n"
    );
    if block {
        script.push_str("open('ready', 'w').write('1')\ntime.sleep(60)\n");
    }
    script
}

/// Processes on the host whose command line holds `marker`.
fn alive_with(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes())
            })
        })
        .count()
}

fn wait_for_none(marker: &str) -> usize {
    std::thread::sleep(Duration::from_secs(1));
    alive_with(marker)
}

/// `ybs run t.yaml` started in the background, once its program wrote
/// `ready` in the workdir (or 30 s passed).
fn run_until_ready(ybs: &Ybs) -> Child {
    let child = ybs
        .command()
        .args(["run", "t.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ybs.exists("ready") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    child
}

#[test]
fn every_process_ends_with_the_task_and_with_ybs() {
    let marker = format!("ybs-chain-{}-a", std::process::id());
    let ybs = Ybs::new();
    ybs.file("chain.sh", CHAIN);
    task(&ybs, "", &[("probe.py", &process_probe(&marker, false))]);
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    let verdicts = verdicts(&result);
    // 101 chain processes (100 shells and the sleep) and the daemon.
    assert!(
        verdicts["alive"].parse::<usize>().unwrap() >= 102,
        "{result}"
    );
    assert_eq!(wait_for_none(&marker), 0);

    // kill -9 of ybs mid-task.
    let marker = format!("ybs-chain-{}-b", std::process::id());
    let ybs = Ybs::new();
    ybs.file("chain.sh", CHAIN);
    task(&ybs, "", &[("probe.py", &process_probe(&marker, true))]);
    let mut child = run_until_ready(&ybs);
    assert!(ybs.exists("ready"), "the tree was never built");
    assert!(alive_with(&marker) >= 102);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(wait_for_none(&marker), 0);
}

// ---------------------------------------------------------------------------
// Acceptance 5: the environment is an allowlist; withheld values never
// surface.

#[test]
fn children_see_only_the_allowlist_and_canaries_appear_nowhere() {
    let ybs = with_canaries(Ybs::new())
        .env("LC_TIME", "C")
        .env("TZ", "UTC");
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\nchecks:\n  - run: env\n    name: env\n",
    );
    let echo = CANARIES
        .iter()
        .map(|(name, _)| format!("print('{name}=' + os.environ.get('{name}', ''))\n"))
        .collect::<String>();
    ybs.file("echo.py", &format!("import os\n{echo}"));
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "env"})),
            call("run_shell", json!({"command": "python3 echo.py"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let results = run.tool_results();
    let names = |text: &str| -> Vec<String> {
        let mut names: Vec<String> = text
            .lines()
            .filter_map(|line| line.split_once('=').map(|(name, _)| name.to_owned()))
            .collect();
        names.sort();
        names
    };
    // PWD is the child's working directory, set by ybs, not inherited;
    // LANG and LC_* pass when set (LC_TIME is); the non-interactive
    // settings are always there.
    let allowed = [
        "CI",
        "DEBIAN_FRONTEND",
        "GIT_PAGER",
        "GIT_TERMINAL_PROMPT",
        "HOME",
        "PAGER",
        "PATH",
        "PWD",
        "TERM",
        "TMPDIR",
        "TZ",
    ];
    let without_locale = |names: Vec<String>| -> Vec<String> {
        names
            .into_iter()
            .filter(|name| name != "LANG" && !name.starts_with("LC_"))
            .collect()
    };
    // `CARGO_HOME` and `RUSTUP_HOME` pass when set (a toolchain outside
    // `~`); `cargo test` may set them for this process.
    let mut allowed: Vec<&str> = allowed
        .into_iter()
        .chain(
            ["CARGO_HOME", "RUSTUP_HOME"]
                .into_iter()
                .filter(|name| std::env::var_os(name).is_some()),
        )
        .collect();
    allowed.sort_unstable();
    let stdout = results[0]["stdout"].as_str().unwrap();
    assert_eq!(without_locale(names(stdout)), allowed);
    assert!(stdout.contains("LC_TIME=C\n"), "{stdout}");
    let env: Vec<&str> = results[0]["stdout"].as_str().unwrap().lines().collect();
    assert!(env.contains(&"TERM=dumb"), "{env:?}");
    assert!(env.contains(&"TMPDIR=/tmp"), "{env:?}");
    // The user's home (read-only, its credentials hidden).
    let home = format!("HOME={}", ybs.home().display());
    assert!(env.contains(&home.as_str()), "{env:?}");
    for (name, _) in CANARIES {
        assert!(
            results[1]["stdout"]
                .as_str()
                .unwrap()
                .contains(&format!("{name}=\n")),
            "{}",
            results[1]
        );
    }
    let check = run
        .events("t")
        .into_iter()
        .find(|e| e["type"] == "check.completed")
        .unwrap();
    // The shell that runs a check adds SHLVL and `_`.
    let check_names: Vec<String> = without_locale(names(check["output_tail"].as_str().unwrap()))
        .into_iter()
        .filter(|name| name != "SHLVL" && name != "_")
        .collect();
    assert_eq!(check_names, allowed);
    assert_no_canary(&all_outputs(&run, ybs.path()));
}

/// Withheld values reaching an output through the program itself (it read
/// them from a file, say) are still masked; harmless ones are not.
#[test]
fn withheld_values_are_redacted_from_every_output() {
    let ybs = with_canaries(Ybs::new()).env("SOME_DIR", "/opt/some/dir");
    let values: Vec<&str> = CANARIES.iter().map(|(_, value)| *value).collect();
    ybs.file(
        "leak.txt",
        &format!("{}\n/opt/some/dir\n", values.join("\n")),
    );
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell]\nchecks:\n  - cat leak.txt\n",
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("run_shell", json!({"command": "cat leak.txt"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let outputs = all_outputs(&run, ybs.path());
    assert_no_canary(&outputs);
    assert!(outputs.contains("/opt/some/dir"));
}

// ---------------------------------------------------------------------------
// The same as an unprivileged user.

/// `ybs run t.yaml` as uid/gid 65534 (nobody) through `setpriv`, or `None`
/// when `setpriv` is missing.
fn as_nobody(ybs: &Ybs) -> Option<Command> {
    if Command::new("setpriv").arg("--version").output().is_err() {
        return None;
    }
    for dir in [ybs.path(), ybs.home()] {
        let status = Command::new("chown")
            .args(["-R", "65534:65534"])
            .arg(dir)
            .status()
            .unwrap();
        assert!(status.success());
    }
    let inner = ybs.command();
    let mut command = Command::new("setpriv");
    command
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(inner.get_program())
        .args(["run", "t.yaml"])
        .current_dir(ybs.path());
    for (key, value) in inner.get_envs() {
        match value {
            Some(value) => command.env(key, value),
            None => command.env_remove(key),
        };
    }
    Some(command)
}

#[test]
fn as_an_unprivileged_user_the_same_holds() {
    let uid = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    if uid.ok() != Some(0) {
        // Already unprivileged: every other test of this file covers it.
        return;
    }
    if Command::new("setpriv").arg("--version").output().is_err() {
        println!("skipped: setpriv is missing, cannot drop to an unprivileged user");
        return;
    }
    // Privileges and reachability, with a canary of the same user.
    let ybs = with_canaries(Ybs::new());
    run_privileges(&ybs, |ybs| as_nobody(ybs).unwrap(), Some(65534));

    // History and control files.
    let ybs = Ybs::new();
    run_protected(&ybs, false, |ybs| {
        let output = as_nobody(ybs).unwrap().output().unwrap();
        Run::from_output(output, ybs.path())
    });

    // Process trees.
    let marker = format!("ybs-chain-{}-nobody", std::process::id());
    let ybs = Ybs::new();
    ybs.file("chain.sh", CHAIN);
    task(&ybs, "", &[("probe.py", &process_probe(&marker, false))]);
    let output = as_nobody(&ybs).unwrap().output().unwrap();
    let run = Run::from_output(output, ybs.path());
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    assert!(
        verdicts(&result)["alive"].parse::<usize>().unwrap() >= 102,
        "{result}"
    );
    assert_eq!(wait_for_none(&marker), 0);
}

// ---------------------------------------------------------------------------
// The resident sandbox: one per task, each program still on its own.

/// Three programs of one task in the task's resident sandbox: the first
/// leaves a daemon (own session, double fork) writing a heartbeat in
/// `/tmp`; the next ones see none of the first's processes (their `/proc`
/// holds only their own namespace) and the heartbeat has stopped; every program
/// gets its own session, no capability, and the same view (`/tmp` is the
/// task's). After the task nothing with the marker is left.
#[test]
fn programs_of_one_task_share_the_view_but_nothing_alive() {
    let marker = format!("ybs-resident-{}", std::process::id());
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let first = format!(
        "import os\n\
         if os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n        os.execvp('sh', ['sh', '-c', 'while :; do date +%s%N > /tmp/beat; sleep 0.05; done; : {marker}'])\n    os._exit(0)\n\
         os.wait()\n\
         import time\n\
         while not os.path.exists('/tmp/beat'): time.sleep(0.01)\n\
         open('/tmp/left-by-first', 'w').write('1')\n\
         print('first=' + str(os.getpid()) + ',' + str(os.getsid(0)))\n"
    );
    let second = format!(
        "import os, time\n\
         beat = open('/tmp/beat').read()\n\
         time.sleep(0.5)\n\
         print('beating=' + str(open('/tmp/beat').read() != beat))\n\
         pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit())\n\
         seen = 0\n\
         for p in pids:\n    try:\n        seen += b'{marker}' in open(f'/proc/{{p}}/cmdline', 'rb').read()\n    except Exception: pass\n\
         caps = [l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1]\n\
         print('pids=' + ','.join(map(str, pids)))\n\
         print('seen=' + str(seen))\n\
         print('tmp=' + str(os.path.exists('/tmp/left-by-first')))\n\
         print('session=' + str(os.getsid(0) == os.getpid()))\n\
         print('caps=' + caps)\n\
         print('host=' + os.uname().nodename)\n"
    );
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "first.py", "content": first})),
            call(
                "write_file",
                json!({"path": "second.py", "content": second}),
            ),
            call("run_shell", json!({"command": "python3 first.py"})),
            call("run_shell", json!({"command": "python3 second.py"})),
            call("run_shell", json!({"command": "python3 second.py"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    let verdicts = verdicts(&result);
    let pids: Vec<u32> = verdicts["pids"]
        .split(',')
        .map(|pid| pid.parse().unwrap())
        .collect();
    // PID 1 of the program's namespace and the program itself.
    assert!(pids.len() <= 3 && pids.contains(&1), "{result}");
    assert_eq!(verdicts["seen"], "0", "{result}");
    // The first program's daemon ended with it.
    assert_eq!(verdicts["beating"], "False", "{result}");
    assert_eq!(verdicts["tmp"], "True", "{result}");
    assert_eq!(verdicts["session"], "True", "{result}");
    assert_eq!(verdicts["caps"], "0000000000000000", "{result}");
    assert_eq!(verdicts["host"], "ybs-sandbox", "{result}");
    assert_eq!(wait_for_none(&marker), 0);
}

/// A program's PID 1 is forked by the resident itself, with no process
/// in between. Seen from the host while the program waits: its
/// ancestors that are the sandbox (`ybs __sandbox-init`) are its PID 1,
/// the resident and the process that made the task's namespaces; one
/// more would cost every program one more fork.
#[test]
fn a_program_starts_two_forks_below_the_resident() {
    let marker = format!("ybs-forks-{}", std::process::id());
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let probe = "import os, time\n\
         open('ready', 'w').write('1')\n\
         deadline = time.time() + 30\n\
         while not os.path.exists('go') and time.time() < deadline: time.sleep(0.02)\n";
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "wait.py", "content": probe})),
            call(
                "run_shell",
                json!({"command": format!("python3 wait.py {marker}")}),
            ),
            answer("done"),
        ],
    );
    let mut child = run_until_ready(&ybs);
    let program = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .find(|entry| {
            std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
                cmdline
                    .windows(marker.len())
                    .any(|w| w == marker.as_bytes())
            })
        })
        .map(|entry| entry.path());
    let mut sandbox = Vec::new();
    let mut current = program.clone();
    while let Some(dir) = current {
        let status = std::fs::read_to_string(dir.join("status")).unwrap_or_default();
        let parent = status
            .lines()
            .find_map(|line| line.strip_prefix("PPid:"))
            .map(|pid| pid.trim().to_owned())
            .filter(|pid| pid != "0");
        current = parent.map(|pid| PathBuf::from("/proc").join(pid));
        if let Some(dir) = &current {
            let cmdline = std::fs::read(dir.join("cmdline")).unwrap_or_default();
            if cmdline.windows(14).any(|w| w == b"__sandbox-init") {
                sandbox.push(dir.clone());
            }
        }
    }
    ybs.file("go", "1");
    child.wait().unwrap();
    assert!(program.is_some(), "the program was never seen");
    assert_eq!(sandbox.len(), 3, "{sandbox:?}");
}

/// The attacker's pass against the resident sandbox: a program tries to
/// reach what starts it. It holds no descriptor beyond its three standard
/// streams (not the resident's socket, not a status or control pipe); its
/// PID 1's memory, descriptors, environment and root are refused to it;
/// `ptrace` is refused; and `kill -9 -1` reaches nothing outside its own
/// namespace: the next program of the task still starts and its own ids
/// say it is new.
#[test]
fn a_program_cannot_reach_the_resident_or_its_pid_one() {
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let probe = "import os, ctypes, signal\n\
         def attempt(key, action):\n    \
             try:\n        action()\n        print(key + '=reached')\n    \
             except Exception as error:\n        print(key + '=denied ' + type(error).__name__)\n\
         fds = sorted(int(fd) for fd in os.listdir('/proc/self/fd'))\n\
         extra = [fd for fd in fds if fd > 2 and os.path.exists(f'/proc/self/fd/{fd}') and not os.readlink(f'/proc/self/fd/{fd}').startswith('/proc/')]\n\
         print('extra_fds=' + ','.join(f'{fd}:{os.readlink(f\"/proc/self/fd/{fd}\")}' for fd in extra))\n\
         print('ppid=' + str(os.getppid()))\n\
         attempt('pid1_mem', lambda: open('/proc/1/mem', 'r+b').close())\n\
         def open_fds():\n    \
             for fd in os.listdir('/proc/1/fd'):\n        \
                 try:\n            os.close(os.open(f'/proc/1/fd/{fd}', os.O_RDWR))\n            return\n        \
                 except PermissionError:\n            pass\n        \
                 try:\n            os.close(os.open(f'/proc/1/fd/{fd}', os.O_RDONLY))\n            return\n        \
                 except PermissionError:\n            pass\n    \
             raise PermissionError('none opened')\n\
         attempt('pid1_fds', open_fds)\n\
         attempt('pid1_environ', lambda: open('/proc/1/environ', 'rb').read())\n\
         attempt('pid1_root', lambda: os.listdir('/proc/1/root/'))\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def trace():\n    \
             if libc.ptrace(16, 1, 0, 0) != 0:\n        raise OSError(ctypes.get_errno(), 'ptrace')\n\
         attempt('ptrace_pid1', trace)\n\
         import resource\n\
         attempt('pid1_prlimit', lambda: resource.prlimit(1, resource.RLIMIT_NOFILE, (16, 16)))\n\
         def uffd():\n    \
             number = {'x86_64': 323, 'aarch64': 282}[os.uname().machine]\n    \
             if libc.syscall(number, 1) < 0:\n        raise OSError(ctypes.get_errno(), 'userfaultfd')\n\
         attempt('userfaultfd', uffd)\n\
         print('same_resident=' + str(open('/tmp/userns-before').read() == os.readlink('/proc/self/ns/user')))\n";
    // The user namespace is the resident's: the same for every program it
    // starts, another for another resident.
    let killer = "import os, signal\n\
         open('/tmp/userns-before', 'w').write(os.readlink('/proc/self/ns/user'))\n\
         try:\n    os.kill(-1, signal.SIGKILL)\n\
         except Exception:\n    pass\n";
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "probe.py", "content": probe})),
            call(
                "write_file",
                json!({"path": "killer.py", "content": killer}),
            ),
            call("run_shell", json!({"command": "python3 killer.py"})),
            call("run_shell", json!({"command": "python3 probe.py"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    let result = shell_result(&run, "ybs-out/t/transcript.json");
    let verdicts = verdicts(&result);
    assert_eq!(
        verdicts.get("extra_fds").map(String::as_str),
        Some(""),
        "{result}"
    );
    // The program after the killer was started by the same resident.
    assert_eq!(verdicts["same_resident"], "True", "{result}");
    // Its namespace starts at its PID 1: nothing outside it is seen.
    assert!(verdicts["ppid"].parse::<u32>().unwrap() < 10, "{result}");
    assert_denied(
        &verdicts,
        &[
            "pid1_mem",
            "pid1_fds",
            "pid1_environ",
            "pid1_root",
            "ptrace_pid1",
            "pid1_prlimit",
            "userfaultfd",
        ],
    );
}

/// Process ids on the host whose parent is `parent`.
fn children_of(parent: u32) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| parent_of(*pid) == Some(parent))
        .collect()
}

/// The parent of `pid` on the host, `None` when it is gone.
fn parent_of(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix("PPid:"))?
        .trim()
        .parse()
        .ok()
}

fn cmdline_has(pid: u32, needle: &[u8]) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|cmdline| cmdline.windows(needle.len()).any(|w| w == needle))
}

/// The host pid of the process whose command line holds `needle`, waited
/// for up to 30 s.
fn find_process(needle: &str) -> Option<u32> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let found = std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
            .find(|pid| cmdline_has(*pid, needle.as_bytes()));
        if found.is_some() || Instant::now() > deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The nearest ancestor of `pid` that is the sandbox (`__sandbox-init`):
/// the program's PID 1.
fn sandbox_ancestor(mut pid: u32) -> Option<u32> {
    loop {
        pid = parent_of(pid).filter(|parent| *parent != 0)?;
        if cmdline_has(pid, b"__sandbox-init") {
            return Some(pid);
        }
    }
}

/// The next program's PID 1 is made before its request: while a program
/// runs, the resident has one more child, a *spare* PID 1 whose one child
/// waits for a request, and these very processes become the PID 1 and
/// the process of the task's next program. (Seen from the host; nothing
/// here depends on how long a step takes: each side waits for the other's
/// file.)
#[test]
fn the_next_programs_pid_one_is_ready_before_its_request() {
    let marker = format!("ybs-spare-{}", std::process::id());
    let ybs = Ybs::new();
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let probe = "import os, sys, time\n\
         step = sys.argv[1]\n\
         open('ready-' + step, 'w').write('1')\n\
         deadline = time.time() + 60\n\
         while not os.path.exists('go-' + step) and time.time() < deadline: time.sleep(0.02)\n";
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "wait.py", "content": probe})),
            call(
                "run_shell",
                json!({"command": format!("python3 wait.py 1 {marker}-first")}),
            ),
            call(
                "run_shell",
                json!({"command": format!("python3 wait.py 2 {marker}-second")}),
            ),
            answer("done"),
        ],
    );
    let mut child = ybs
        .command()
        .args(["run", "t.yaml"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let first = find_process(&format!("{marker}-first")).expect("the first program");
    let first_pid_one = sandbox_ancestor(first).expect("the first program's PID 1");
    let resident = parent_of(first_pid_one).expect("the resident");
    assert!(cmdline_has(resident, b"__sandbox-init"));
    // The spare: the resident's other child, waiting with no child of its
    // own (it may still be on its way).
    let deadline = Instant::now() + Duration::from_secs(30);
    let spare = loop {
        let spares: Vec<u32> = children_of(resident)
            .into_iter()
            .filter(|pid| *pid != first_pid_one && cmdline_has(*pid, b"__sandbox-init"))
            .collect();
        if !spares.is_empty() || Instant::now() > deadline {
            break spares;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(spare.len(), 1, "the resident's children: {spare:?}");
    let spare = spare[0];
    let waiting = children_of(spare);
    assert_eq!(waiting.len(), 1, "the spare's children: {waiting:?}");
    assert!(cmdline_has(waiting[0], b"__sandbox-init"));
    ybs.file("go-1", "1");
    let second = find_process(&format!("{marker}-second")).expect("the second program");
    let second_pid_one = sandbox_ancestor(second);
    // The program's process is the one that waited (or, when a launcher
    // such as a version manager's shim forked, its ancestor).
    let mut lineage = vec![second];
    while let Some(parent) = parent_of(*lineage.last().unwrap()).filter(|p| *p != spare && *p > 1) {
        lineage.push(parent);
    }
    ybs.file("go-2", "1");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert_eq!(second_pid_one, Some(spare));
    assert!(lineage.contains(&waiting[0]), "{lineage:?} {waiting:?}");
    assert_eq!(wait_for_none(&marker), 0);
}

/// A program found on `PATH` inside the sandbox is searched the way a
/// shell searches: entries that are missing or not directories are
/// skipped, and so is a file without the execute right and a directory
/// of that name (`EACCES`); the program runs under the name it was
/// called by (`argv[0]`), and a file without a `#!` line is run by the
/// shell.
#[test]
fn a_program_is_searched_on_path_like_a_shell_does() {
    let ybs = Ybs::new();
    let bin = ybs.bin_dir();
    let make = |relative: &str, body: &str, mode: u32| {
        let path = bin.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    make("a/ybs-tool", "#!/bin/sh\necho from-a\n", 0o644);
    std::fs::create_dir_all(bin.join("b/ybs-tool")).unwrap();
    make("c/ybs-tool", "#!/bin/sh\necho from-c\n", 0o755);
    make("c/ybs-plain", "echo plain-by-the-shell\n", 0o755);
    // A Python outside every home (homes are hidden in the sandbox but for
    // their toolchains and `PATH` entries: docs/sandbox.md, "The home").
    let python = String::from_utf8(
        Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .iter()
        .map(Path::new)
        .find(|path| path.exists())
        .unwrap_or(Path::new(python.trim()));
    std::os::unix::fs::symlink(python.canonicalize().unwrap(), bin.join("c/ybs-python")).unwrap();
    let path = format!(
        "{bin}/missing:/etc/passwd:{bin}/a:{bin}/b:{bin}/c:/usr/bin:/bin",
        bin = bin.display()
    );
    let ybs = ybs.env("PATH", &path);
    ybs.file(
        "t.yaml",
        "prompt: p\ncommit: false\npolicy:\n  allow: [run_shell, write_file]\n",
    );
    let show = "import sys\nprint('argv0=' + sys.orig_argv[0])\n";
    ybs.cassette(
        "t.cassette.json",
        vec![
            call("write_file", json!({"path": "show.py", "content": show})),
            call("run_shell", json!({"command": "ybs-tool"})),
            call("run_shell", json!({"command": "ybs-plain"})),
            call("run_shell", json!({"command": "ybs-python show.py"})),
            answer("done"),
        ],
    );
    let run = ybs.run(["run", "t.yaml"]);
    run.expect_code(0);
    // After the write_file's.
    let results = &run.tool_results()[1..];
    assert_eq!(results.len(), 3, "{results:?}");
    assert_eq!(results[0]["stdout"], "from-c\n", "{results:?}");
    assert_eq!(results[1]["stdout"], "plain-by-the-shell\n", "{results:?}");
    assert_eq!(results[2]["stdout"], "argv0=ybs-python\n", "{results:?}");
}
