//! The sandbox's exec guard (docs/sandbox.md, "The exec guard"): with
//! deny rules in the spec, every exec of a confined process is checked
//! against them by the real helper, in each way a program is started: the
//! one-shot helper with and without namespaces, and the task's resident
//! sandbox (`ybs __sandbox-init`), driven here the way ybs drives it.

use std::io::{IoSlice, Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use nix::sys::socket::{
    AddressFamily, ControlMessage, MsgFlags, SockFlag, SockType, sendmsg, socketpair,
};
use ybs::tools::sandbox::spec::{HelperSpec, Request};

const DENY: [&str; 3] = ["curl*", "git push*", "rm -rf*"];

/// A workdir with a private temp dir and a `bin/` of dummy programs
/// (`curl`), so nothing depends on what the machine has installed.
struct Work {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Work {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir(root.join("tmp")).unwrap();
        std::fs::create_dir(root.join("bin")).unwrap();
        let curl = root.join("bin/curl");
        std::fs::write(&curl, "#!/bin/sh\necho curl-ran \"$@\"\n").unwrap();
        std::fs::set_permissions(&curl, std::fs::Permissions::from_mode(0o755)).unwrap();
        Self { _dir: dir, root }
    }

    fn spec(&self, namespaces: bool, deny: &[&str]) -> String {
        HelperSpec {
            namespaces,
            workdir: self.root.clone(),
            temp: self.root.join("tmp"),
            exec_deny: deny.iter().map(|glob| (*glob).to_owned()).collect(),
            ..HelperSpec::default()
        }
        .to_json()
    }

    fn path_var(&self) -> String {
        format!(
            "{}:/usr/local/bin:/usr/bin:/bin",
            self.root.join("bin").display()
        )
    }
}

/// What one program did: exit code, stdout, stderr.
#[derive(Debug)]
struct Ran {
    code: i32,
    stdout: String,
    stderr: String,
}

/// `sh -c script` through the one-shot helper.
fn one_shot(work: &Work, spec: &str, script: &str) -> Ran {
    let output = Command::new(env!("CARGO_BIN_EXE_ybs"))
        .args(["__sandbox", spec, "--", "sh", "-c", script])
        .current_dir(&work.root)
        .env_clear()
        .env("PATH", work.path_var())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    Ran {
        code: output.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The refusal's line for `view` and `glob`.
fn refusal(view: &str, glob: &str) -> String {
    format!("ybs sandbox: refused exec of `{view}`: it matches the deny rule `run_shell({glob})`")
}

fn python3() -> bool {
    Command::new("python3")
        .arg("--version")
        .output()
        .is_ok_and(|output| output.status.success())
}

/// The cases every launch path must get right, run with `run`.
fn the_deny_rules_hold(mut run: impl FnMut(&str) -> Ran) {
    let refused = |ran: &Ran, view: &str, glob: &str| {
        assert_ne!(ran.code, 0, "{ran:?}");
        assert!(ran.stderr.contains(&refusal(view, glob)), "{view}: {ran:?}");
        assert!(!ran.stdout.contains("-ran"), "{ran:?}");
    };
    refused(&run("curl --version"), "curl --version", "curl*");
    refused(&run("env curl x"), "curl x", "curl*");
    refused(&run("bash -c 'exec curl x'"), "curl x", "curl*");
    // By the path executed, whatever argv[0] says.
    refused(&run("bash -c 'exec -a innocent curl x'"), "curl x", "curl*");
    let ran = run("touch y; /bin/rm -rf y; test -e y && echo y-kept");
    assert!(
        ran.stderr.contains(&refusal("rm -rf y", "rm -rf*")),
        "{ran:?}"
    );
    assert_eq!(ran.stdout, "y-kept\n", "{ran:?}");
    if python3() {
        let ran = run("python3 -c 'import subprocess; subprocess.run([\"git\", \"push\"])'");
        assert!(
            ran.stderr.contains(&refusal("git push", "git push*")),
            "{ran:?}"
        );
    }
    let ran = run("echo ok; true");
    assert_eq!((ran.code, ran.stdout.as_str()), (0, "ok\n"), "{ran:?}");
    let ran = run("git --version");
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(ran.stdout.starts_with("git version"), "{ran:?}");
    // The literal text does not match `rm -rf*`.
    let ran = run("mkdir d && rm -r -f d && echo removed");
    assert_eq!((ran.code, ran.stdout.as_str()), (0, "removed\n"), "{ran:?}");
    // A renamed copy is seen by its own name only (the policy refuses a
    // literal renamed program itself): `zz -rf` is not `rm -rf*`.
    let ran = run("cp /bin/rm ./zz && touch z && ./zz -rf z && echo zz-ran");
    assert_eq!((ran.code, ran.stdout.as_str()), (0, "zz-ran\n"), "{ran:?}");
    assert!(!ran.stderr.contains("refused"), "{ran:?}");
}

#[test]
fn the_one_shot_helper_refuses_denied_execs_in_the_namespaces() {
    let work = Work::new();
    let spec = work.spec(true, &DENY);
    the_deny_rules_hold(|script| one_shot(&work, &spec, script));
}

#[test]
fn the_one_shot_helper_refuses_denied_execs_without_namespaces() {
    let work = Work::new();
    let spec = work.spec(false, &DENY);
    the_deny_rules_hold(|script| one_shot(&work, &spec, script));
}

/// How many processes the program's PID namespace holds (a shell glob:
/// no process of its own).
const PROCESSES: &str = "set -- /proc/[0-9]*; echo $#";

#[test]
fn without_deny_rules_there_is_no_guard() {
    let work = Work::new();
    for namespaces in [true, false] {
        let spec = work.spec(namespaces, &[]);
        assert!(!spec.contains("exec_deny"), "{spec}");
        let ran = one_shot(&work, &spec, "curl --version");
        assert_eq!(ran.code, 0, "{ran:?}");
        assert_eq!(ran.stdout, "curl-ran --version\n", "{ran:?}");
        // No supervisor: the namespace holds PID 1 and the program.
        if namespaces {
            let ran = one_shot(&work, &spec, PROCESSES);
            assert_eq!(ran.stdout, "2\n", "PID 1, sh: {ran:?}");
        }
    }
    // With rules, the supervisor is one more process.
    let spec = work.spec(true, &DENY);
    let ran = one_shot(&work, &spec, PROCESSES);
    assert_eq!(ran.stdout, "3\n", "PID 1, the supervisor, sh: {ran:?}");
}

#[test]
fn a_deny_rule_that_is_not_a_glob_fails_the_setup() {
    let work = Work::new();
    for namespaces in [true, false] {
        let ran = one_shot(&work, &work.spec(namespaces, &["curl[*"]), "echo ran");
        assert_eq!(ran.code, 125, "{ran:?}");
        assert!(
            ran.stderr.contains("exec guard: deny rule `curl[*`"),
            "{ran:?}"
        );
        assert_eq!(ran.stdout, "");
    }
}

/// A task's resident sandbox, started and spoken to as ybs does
/// (src/tools/sandbox/resident.rs).
struct Resident {
    socket: OwnedFd,
    child: std::process::Child,
}

impl Resident {
    fn start(spec: &str) -> Self {
        let (socket, theirs) = socketpair(
            AddressFamily::Unix,
            SockType::SeqPacket,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_ybs"))
            .args(["__sandbox-init", spec])
            .env_clear()
            .stdin(Stdio::from(theirs))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut answer = [0u8; 4096];
        let read =
            nix::sys::socket::recv(socket.as_raw_fd(), &mut answer, MsgFlags::empty()).unwrap();
        assert_eq!(String::from_utf8_lossy(&answer[..read]), "ok");
        Self { socket, child }
    }

    fn run(&self, work: &Work, script: &str) -> Ran {
        let request = Request {
            argv: ["sh", "-c", script].map(Into::into).to_vec(),
            cwd: work.root.clone(),
            env: vec![("PATH".into(), work.path_var().into())],
        };
        let memfd =
            nix::sys::memfd::memfd_create(c"request", nix::sys::memfd::MFdFlags::MFD_CLOEXEC)
                .unwrap();
        std::fs::File::from(memfd.try_clone().unwrap())
            .write_all(&request.encode())
            .unwrap();
        let null = OwnedFd::from(std::fs::File::open("/dev/null").unwrap());
        let pipe = || nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).unwrap();
        let (stdout, stdout_theirs) = pipe();
        let (stderr, stderr_theirs) = pipe();
        let (status, status_theirs) = pipe();
        let (control_theirs, control) = pipe();
        let fds = [
            memfd.as_raw_fd(),
            null.as_raw_fd(),
            stdout_theirs.as_raw_fd(),
            stderr_theirs.as_raw_fd(),
            status_theirs.as_raw_fd(),
            control_theirs.as_raw_fd(),
        ];
        sendmsg::<()>(
            self.socket.as_raw_fd(),
            &[IoSlice::new(b"r")],
            &[ControlMessage::ScmRights(&fds)],
            MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .unwrap();
        drop((memfd, null, stdout_theirs, stderr_theirs, status_theirs));
        drop(control_theirs);
        let read_all = |fd: OwnedFd| {
            let mut text = Vec::new();
            std::fs::File::from(fd).read_to_end(&mut text).unwrap();
            text
        };
        let stderr = std::thread::spawn(move || read_all(stderr));
        let stdout = read_all(stdout);
        let stderr = stderr.join().unwrap();
        let word = read_all(status);
        drop(control);
        let raw = i32::from_ne_bytes(word.as_slice().try_into().expect("a wait status"));
        Ran {
            code: if libc_exited(raw) {
                (raw >> 8) & 0xff
            } else {
                -1
            },
            stdout: String::from_utf8_lossy(&stdout).into_owned(),
            stderr: String::from_utf8_lossy(&stderr).into_owned(),
        }
    }
}

fn libc_exited(raw: i32) -> bool {
    raw & 0x7f == 0
}

impl Drop for Resident {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn the_resident_sandbox_refuses_denied_execs_in_every_program() {
    let work = Work::new();
    let resident = Resident::start(&work.spec(true, &DENY));
    // Each case is a program of its own, from a spare of its own.
    the_deny_rules_hold(|script| resident.run(&work, script));
    let without = Resident::start(&work.spec(true, &[]));
    let ran = without.run(&work, "curl --version");
    assert_eq!(ran.stdout, "curl-ran --version\n", "{ran:?}");
}

/// `*` spans `/`, as in the policy's command globs; a rule on a path
/// matches the exec of that path as written (view a), not of the name.
/// (A glob that starts with `*` would also meet the `#!` view of the
/// dummy, `/bin/sh …/bin/curl x`: the kernel runs that.)
#[test]
fn a_glob_spans_slashes_like_the_policy_command_globs() {
    let work = Work::new();
    let glob = format!("{}/*curl x*", work.root.display());
    let spec = work.spec(true, &[glob.as_str()]);
    let ran = one_shot(&work, &spec, &format!("{}/bin/curl x", work.root.display()));
    assert!(
        ran.stderr
            .contains(&format!("it matches the deny rule `run_shell({glob})`")),
        "{ran:?}"
    );
    let ran = one_shot(&work, &spec, "curl x");
    assert_eq!(ran.stdout, "curl-ran x\n", "{ran:?}");
}
