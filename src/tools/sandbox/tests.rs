use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::tools::ChildEnv;
use crate::tools::process::{self, ProcessOutput, ProcessSpec};

/// A workdir and a sibling outside it, canonical.
struct Dirs {
    _temp: tempfile::TempDir,
    work: PathBuf,
    outside: PathBuf,
}

fn dirs() -> Dirs {
    let temp = tempfile::tempdir().unwrap();
    let root = temp.path().canonicalize().unwrap();
    let work = root.join("work");
    let outside = root.join("outside");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    Dirs {
        _temp: temp,
        work,
        outside,
    }
}

fn env(sandbox: &Sandbox) -> ChildEnv {
    let mut env = ChildEnv::scrubbed_from(
        [("PATH".to_owned(), std::env::var("PATH").unwrap_or_default())].into_iter(),
        &[],
    );
    env.set("TMPDIR", &sandbox.temp_dir().display().to_string());
    env
}

async fn sh(command: &str, cwd: &Path, sandbox: &Arc<Sandbox>) -> ProcessOutput {
    let env = env(sandbox);
    let spec = ProcessSpec::shell(
        command,
        cwd.to_owned(),
        &env,
        Duration::from_secs(10),
        64 * 1024,
    )
    .confined(Some(sandbox));
    process::run(spec).await.unwrap()
}

#[test]
fn the_probe_finds_landlock_on_this_kernel() {
    // The machines ybs is developed and tested on have Landlock and
    // seccomp; a kernel without them fails here on purpose.
    let probe = probe();
    assert!(probe.available(), "{probe:?}");
}

#[tokio::test]
async fn writes_only_under_the_writable_roots() {
    let dirs = dirs();
    let sandbox = Arc::new(Sandbox::prepare(&dirs.work, &SandboxSettings::default()).unwrap());
    let temp = sandbox.temp_dir().to_owned();
    assert!(temp.is_dir());
    let out = sh(
        &format!(
            "echo in > inside.txt && echo tmp > \"$TMPDIR/t.txt\" && echo null > /dev/null && mkdir -p a/b && mv inside.txt a/b/ && echo ok; echo out > {}/escaped.txt",
            dirs.outside.display()
        ),
        &dirs.work,
        &sandbox,
    )
    .await;
    assert!(out.stdout.contains("ok"), "{out:?}");
    assert!(out.stderr.contains("Permission denied"), "{out:?}");
    assert_ne!(out.exit_code, Some(0));
    assert!(dirs.work.join("a/b/inside.txt").is_file());
    assert!(temp.join("t.txt").is_file());
    assert!(!dirs.outside.join("escaped.txt").exists());
    // Reading outside is fine; the temp dir goes with the sandbox.
    std::fs::write(dirs.outside.join("r.txt"), "readable").unwrap();
    let out = sh(
        &format!("cat {}/r.txt", dirs.outside.display()),
        &dirs.work,
        &sandbox,
    )
    .await;
    assert_eq!(out.stdout, "readable");
    drop(sandbox);
    assert!(!temp.exists());
}

#[tokio::test]
async fn extra_writable_roots_are_writable() {
    let dirs = dirs();
    let settings = SandboxSettings {
        writable: vec![dirs.outside.clone(), PathBuf::from("/no/such/dir")],
        network: false,
    };
    let sandbox = Arc::new(Sandbox::prepare(&dirs.work, &settings).unwrap());
    assert_eq!(sandbox.writable().len(), 3);
    let out = sh(
        &format!("echo x > {}/granted.txt", dirs.outside.display()),
        &dirs.work,
        &sandbox,
    )
    .await;
    assert_eq!(out.exit_code, Some(0), "{out:?}");
    assert!(dirs.outside.join("granted.txt").is_file());
}

/// A bash `/dev/tcp` connect that prints `connected` when it works.
fn connect_command(port: u16) -> String {
    format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected")
}

#[tokio::test]
async fn no_network_unless_granted() {
    let dirs = dirs();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();

    let sandbox = Arc::new(Sandbox::prepare(&dirs.work, &SandboxSettings::default()).unwrap());
    assert!(!sandbox.network());
    let out = sh(&connect_command(port), &dirs.work, &sandbox).await;
    assert!(!out.stdout.contains("connected"), "{out:?}");
    assert!(out.stderr.contains("not permitted"), "{out:?}");
    assert!(listener.accept().is_err(), "a connection was accepted");

    let granted = SandboxSettings {
        writable: Vec::new(),
        network: true,
    };
    let open = Arc::new(Sandbox::prepare(&dirs.work, &granted).unwrap());
    let out = sh(&connect_command(port), &dirs.work, &open).await;
    assert!(out.stdout.contains("connected"), "{out:?}");
    assert!(open.info().network);
}

#[tokio::test]
async fn unix_sockets_still_work() {
    let dirs = dirs();
    let sandbox = Arc::new(Sandbox::prepare(&dirs.work, &SandboxSettings::default()).unwrap());
    let socket = dirs.work.join("s.sock");
    let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    // bash cannot open a unix socket: python3 does, when installed.
    let out = sh(
        "command -v python3 >/dev/null || exit 77; python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); print(\"unix ok\")' s.sock",
        &dirs.work,
        &sandbox,
    )
    .await;
    if out.exit_code == Some(77) {
        return;
    }
    assert!(out.stdout.contains("unix ok"), "{out:?}");
    drop(listener);
}

#[test]
fn info_describes_the_confinement() {
    let dirs = dirs();
    let sandbox = Sandbox::prepare(&dirs.work, &SandboxSettings::default()).unwrap();
    let info = sandbox.info();
    assert_eq!(info.mode, MECHANISM);
    assert!(info.confined());
    assert!(!info.network);
    assert_eq!(info.writable[0], dirs.work.display().to_string());
    assert!(info.landlock.is_some());
    assert!(info.describe().contains("no network"));
    let none = unconfined("--no-sandbox");
    assert!(!none.confined());
    assert!(none.describe().contains("UNCONFINED"));
}
