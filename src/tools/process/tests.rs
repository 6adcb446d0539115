use std::time::{Duration, Instant};

use super::*;

fn env() -> ChildEnv {
    ChildEnv::scrubbed_from(
        [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())].into_iter(),
        &[],
    )
}

fn shell<'a>(command: &str, dir: &Path, env: &'a ChildEnv, timeout: Duration) -> ProcessSpec<'a> {
    ProcessSpec::shell(command, dir.to_path_buf(), env, timeout, 64 * 1024)
}

/// True once `pid` is gone or a zombie (dead, waiting for its reaper).
fn dead(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn wait_dead(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if dead(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap()
        .split_whitespace()
        .map(|pid| pid.parse().unwrap())
        .collect()
}

#[tokio::test]
async fn captures_output_and_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let out = run(shell(
        "echo out; echo err >&2; exit 3",
        dir.path(),
        &env,
        Duration::from_secs(10),
    ))
    .await
    .unwrap();
    assert_eq!(out.stdout, "out\n");
    assert_eq!(out.stderr, "err\n");
    assert_eq!(out.exit_code, Some(3));
    assert_eq!(out.signal, None);
    assert!(!out.timed_out);
}

#[tokio::test]
async fn runs_in_cwd_with_pwd_set() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let out = run(shell(
        "pwd; /bin/pwd; echo $PWD",
        dir.path(),
        &env,
        Duration::from_secs(10),
    ))
    .await
    .unwrap();
    let expected = dir.path().display().to_string();
    for line in out.stdout.lines() {
        assert_eq!(line, expected);
    }
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let pids = dir.path().join("pids");
    let command = format!(
        "echo $$ > {p}; sleep 300 & echo $! >> {p}; sleep 300 & echo $! >> {p}; wait",
        p = pids.display()
    );
    let started = Instant::now();
    let out = run(shell(&command, dir.path(), &env, Duration::from_secs(2)))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out);
    assert_eq!(out.signal, Some(9));
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert!(wait_dead(pid), "process {pid} survived the timeout");
    }
}

#[tokio::test]
async fn caps_huge_output_keeping_head_and_tail() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let mut spec = shell(
        "echo first; head -c 50000000 /dev/zero | tr '\\0' x; echo; echo last",
        dir.path(),
        &env,
        Duration::from_secs(60),
    );
    spec.output_cap = 1000;
    let out = run(spec).await.unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(out.stdout_truncated);
    assert!(!out.stderr_truncated);
    assert!(out.stdout.len() < 1100, "{}", out.stdout.len());
    assert!(out.stdout.starts_with("first\nxxx"));
    assert!(out.stdout.ends_with("xxx\nlast\n"));
    assert!(out.stdout.contains("bytes of output omitted"));
}

#[test]
fn capture_counts_what_it_drops() {
    let mut capture = Capture::new(10);
    for _ in 0..100 {
        capture.push(b"0123456789");
    }
    let (text, truncated) = capture.finish();
    assert!(truncated);
    assert_eq!(
        text,
        "01234\n[... 990 of 1000 bytes of output omitted ...]\n56789"
    );
    let mut capture = Capture::new(10);
    capture.push(b"0123456789");
    assert_eq!(capture.finish(), ("0123456789".to_owned(), false));
}

#[test]
fn capture_memory_stays_bounded_by_the_cap() {
    // 256 MiB through a 1 MiB cap, in pipe-sized chunks: what is held
    // never grows past a small multiple of the cap, and every byte counts.
    let cap = 1 << 20;
    let mut capture = Capture::new(cap);
    let chunk = vec![b'x'; CHUNK];
    let mut held_most = 0;
    for _ in 0..(256 << 20) / CHUNK {
        capture.push(&chunk);
        held_most = held_most.max(capture.head.capacity() + capture.tail.capacity());
    }
    assert!(held_most <= 3 * cap, "held {held_most} bytes");
    assert_eq!(capture.total, 256 << 20);
    let (text, truncated) = capture.finish();
    assert!(truncated);
    assert!(text.len() < cap + 100, "{}", text.len());
    assert!(text.contains(&format!(
        "{} of {} bytes of output omitted",
        (256 << 20) - cap,
        256 << 20
    )));
}

#[tokio::test]
async fn stdin_is_empty_unless_given() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let started = Instant::now();
    let out = run(shell("cat", dir.path(), &env, Duration::from_secs(20)))
        .await
        .unwrap();
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(out.stdout, "");
    assert_eq!(out.exit_code, Some(0));

    let mut spec = shell("cat; echo done", dir.path(), &env, Duration::from_secs(20));
    spec.stdin = Some(b"fed\n".to_vec());
    let out = run(spec).await.unwrap();
    assert_eq!(out.stdout, "fed\ndone\n");
}

#[tokio::test]
async fn no_terminal() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let out = run(shell(
        "test -t 0 || echo no-stdin-tty; test -t 1 || echo no-stdout-tty; (exec </dev/tty) 2>/dev/null || echo no-ctty; \
         read -r -a stat < /proc/$$/stat; [ \"${stat[5]}\" = $$ ] && [ \"${stat[4]}\" = $$ ] && echo own-session",
        dir.path(),
        &env,
        Duration::from_secs(10),
    ))
    .await
    .unwrap();
    assert_eq!(
        out.stdout, "no-stdin-tty\nno-stdout-tty\nno-ctty\nown-session\n",
        "{}",
        out.stderr
    );
}

#[tokio::test]
async fn environment_is_scrubbed() {
    let dir = tempfile::tempdir().unwrap();
    let env = ChildEnv::scrubbed_from(
        [
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("MY_TOKEN".to_owned(), "canary-6c1f".to_owned()),
            ("VISIBLE".to_owned(), "plain".to_owned()),
            ("PASSED".to_owned(), "by-operator".to_owned()),
        ]
        .into_iter(),
        &["PASSED".to_owned()],
    );
    let out = run(shell("env", dir.path(), &env, Duration::from_secs(10)))
        .await
        .unwrap();
    assert!(!out.stdout.contains("canary-6c1f"), "{}", out.stdout);
    assert!(!out.stdout.contains("VISIBLE=plain"), "{}", out.stdout);
    assert!(out.stdout.contains("PASSED=by-operator"), "{}", out.stdout);
    assert!(out.stdout.contains("CI=1"));
    assert!(out.stdout.contains("TERM=dumb"));
}

#[tokio::test]
async fn grandchild_holding_the_pipe_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let pids = dir.path().join("pids");
    let command = format!("echo hi; sleep 60 & echo $! > {}", pids.display());
    let started = Instant::now();
    let out = run(shell(&command, dir.path(), &env, Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(out.stdout, "hi\n");
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    for pid in pids_in(&pids) {
        assert!(wait_dead(pid), "background process {pid} survived");
    }
}

#[tokio::test]
async fn cancelled_run_kills_the_group() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let pids = dir.path().join("pids");
    let command = format!("sleep 60 & echo $! > {}; wait", pids.display());
    let spec = shell(&command, dir.path(), &env, Duration::from_secs(60));
    let cancelled = tokio::time::timeout(Duration::from_millis(500), run(spec)).await;
    assert!(cancelled.is_err());
    for pid in pids_in(&pids) {
        assert!(wait_dead(pid), "process {pid} survived cancellation");
    }
}

#[test]
fn simple_commands_skip_the_shell() {
    let argv = |command: &str| {
        simple_argv(command).map(|argv| {
            argv.into_iter()
                .map(|arg| arg.into_string().unwrap())
                .collect::<Vec<_>>()
        })
    };
    assert_eq!(argv("cat"), Some(vec!["cat".to_owned()]));
    assert_eq!(
        argv("cargo  test --lib tools::process"),
        Some(
            vec!["cargo", "test", "--lib", "tools::process"]
                .into_iter()
                .map(String::from)
                .collect()
        )
    );
    for needs_shell in [
        "",
        "echo hi",
        "cd src",
        "FOO=1 make",
        "ls *.rs",
        "cat ~/x",
        "a | b",
        "a && b",
        "a; b",
        "a > f",
        "echo $HOME",
        "echo 'q'",
        "a\nb",
        "a # c",
        "a {b,c}",
        "! false",
        "x\\ y",
    ] {
        assert_eq!(argv(needs_shell), None, "{needs_shell:?}");
    }
}

#[tokio::test]
async fn run_command_falls_back_to_the_shell() {
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let timeout = Duration::from_secs(10);
    let out = run_command("ls -a", dir.path().to_path_buf(), &env, timeout, 4096, None)
        .await
        .unwrap();
    assert_eq!(out.stdout, ".\n..\n");
    let out = run_command(
        "no-such-program-ybs",
        dir.path().to_path_buf(),
        &env,
        timeout,
        4096,
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.exit_code, Some(127));
    assert!(out.stderr.contains("not found"), "{}", out.stderr);

    // Relative to the command's directory; a script without a shebang is
    // run by the shell, as `sh -c` would.
    use std::os::unix::fs::PermissionsExt;
    for (name, body) in [
        ("with.sh", "#!/bin/sh\necho with\n"),
        ("without.sh", "echo without\n"),
    ] {
        let script = dir.path().join(name);
        std::fs::write(&script, body).unwrap();
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let out = run_command(
        "./with.sh",
        dir.path().to_path_buf(),
        &env,
        timeout,
        4096,
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "with\n");
    let out = run_command(
        "./without.sh",
        dir.path().to_path_buf(),
        &env,
        timeout,
        4096,
        None,
    )
    .await
    .unwrap();
    assert_eq!(out.stdout, "without\n");
}

/// Runs [`hardened_child`] in a fresh copy of this test binary (this same
/// test, with `YBS_HARDENED_CHILD` set), so the process-wide settings do
/// not leak into other tests.
#[test]
fn harden_self_and_subreaper() {
    if std::env::var_os("YBS_HARDENED_CHILD").is_some() {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(hardened_child());
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "tools::process::tests::harden_self_and_subreaper",
            "--nocapture",
        ])
        .env("YBS_HARDENED_CHILD", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("1 passed"), "{stdout}");
}

/// `harden_self` and the subreaper, in the copy started above.
async fn hardened_child() {
    use std::os::unix::fs::MetadataExt;
    // Read before hardening: a non-dumpable process's /proc entry is root's.
    let root = std::fs::metadata("/proc/self").unwrap().uid() == 0;
    harden_self().unwrap();
    assert!(!nix::sys::prctl::get_dumpable().unwrap());
    let dir = tempfile::tempdir().unwrap();
    let env = env();
    let timeout = Duration::from_secs(10);

    // Root with capabilities reads any process's environ whatever its
    // dumpable flag (the kernel sandbox is what stops that).
    if !root {
        let command = format!("cat /proc/{}/environ", std::process::id());
        let out = run(shell(&command, dir.path(), &env, timeout))
            .await
            .unwrap();
        assert_ne!(out.exit_code, Some(0), "{}", out.stdout);
        assert_eq!(out.stdout, "");
    }

    let pids = dir.path().join("pids");
    let command = format!(
        "setsid sleep 60 >/dev/null 2>&1 & echo $! > {p}; (setsid sh -c 'sleep 60 & echo $! >> {p}; wait' >/dev/null 2>&1 &); sleep 0.2",
        p = pids.display()
    );
    let out = run(shell(&command, dir.path(), &env, timeout))
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0), "{}", out.stderr);
    let pids = pids_in(&pids);
    assert_eq!(pids.len(), 2);
    for pid in pids {
        assert!(wait_dead(pid), "escapee {pid} survived");
        assert!(
            std::fs::metadata(format!("/proc/{pid}")).is_err(),
            "{pid} not reaped"
        );
    }
}
