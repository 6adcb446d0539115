//! Pure unit tests: the spec, the seccomp program, placeholders. The
//! confinement itself needs the helper in the `ybs` binary and is tested
//! through it (tests/suite/sandbox.rs, tests/suite/confinement.rs).

use super::*;

#[test]
fn without_the_helper_nothing_can_be_confined() {
    // This test binary is not `ybs`: `main` never registered the helper.
    let probe = probe();
    assert!(!probe.available(), "{probe:?}");
    let error = Sandbox::prepare(Path::new("/"), &SandboxSettings::default()).unwrap_err();
    assert!(error.0.contains("helper"), "{error}");
    assert_eq!(probe.missing().len(), 3);
}

#[test]
fn the_spec_travels_as_one_argument() {
    let spec = HelperSpec {
        namespaces: true,
        workdir: PathBuf::from("/w"),
        temp: PathBuf::from("/tmp/t"),
        read_only: vec![PathBuf::from("/w/.git")],
        ..HelperSpec::default()
    };
    let argv = spec.argv(
        &OsString::from("sh"),
        &[OsString::from("-c"), OsString::from("x")],
    );
    assert_eq!(argv[0], spec::HELPER_ARG);
    assert_eq!(argv[2], "--");
    assert_eq!(argv[3..], [OsString::from("sh"), "-c".into(), "x".into()]);
    let back: HelperSpec = serde_json::from_str(argv[1].to_str().unwrap()).unwrap();
    assert_eq!(back, spec);
    assert_eq!(
        spec.landlock_roots(),
        [PathBuf::from("/w"), PathBuf::from("/tmp/t")]
    );
}

#[test]
fn the_exec_guard_travels_in_the_spec_only_when_it_has_rules() {
    let spec = HelperSpec {
        exec_deny: vec!["curl*".to_owned(), "git push*".to_owned()],
        ..HelperSpec::default()
    };
    let json = spec.to_json();
    assert!(
        json.contains(r#""exec_deny":["curl*","git push*"]"#),
        "{json}"
    );
    assert_eq!(serde_json::from_str::<HelperSpec>(&json).unwrap(), spec);
    // Without rules the spec is what it was (and so is a resident's key).
    let json = HelperSpec::default().to_json();
    assert!(!json.contains("exec_deny"), "{json}");
    assert_eq!(
        serde_json::from_str::<HelperSpec>(&json).unwrap().exec_deny,
        Vec::<String>::new()
    );
}

#[test]
fn a_machine_without_the_exec_guard_misses_no_layer() {
    let probe = Probe {
        namespaces: Ok(()),
        landlock: Ok("fully_enforced"),
        seccomp: Ok(()),
        exec_guard: Err("Linux 5.4".to_owned()),
    };
    assert!(probe.available());
    assert!(probe.missing().is_empty());
}

#[test]
fn requirement_spellings() {
    assert_eq!(Require::parse("all"), Some(Require::All));
    assert_eq!(Require::parse("landlock"), Some(Require::Landlock));
    assert_eq!(Require::parse("none"), None);
}

#[test]
fn placeholders_appear_and_go_when_empty() {
    let temp = tempfile::tempdir().unwrap();
    let work = temp.path().canonicalize().unwrap();
    std::fs::create_dir(work.join(".github")).unwrap();
    std::fs::write(work.join("kept.txt"), "x").unwrap();
    let paths = [
        work.join(".github/workflows"),
        work.join(".ybs.json"),
        work.join("kept.txt"),
        work.join("deep/a/b"),
        PathBuf::from("/elsewhere/x"),
    ];
    let placeholders = Placeholders::create_recorded(&work, &paths, None);
    assert!(work.join(".github/workflows").is_dir());
    assert!(work.join(".ybs.json").is_dir());
    assert!(work.join("deep/a/b").is_dir());
    assert!(!Path::new("/elsewhere").exists());
    // Something was put into one: it stays.
    std::fs::write(work.join("deep/a/file"), "x").unwrap();
    drop(placeholders);
    assert!(!work.join(".github/workflows").exists());
    assert!(work.join(".github").is_dir(), "not made by ybs: kept");
    assert!(!work.join(".ybs.json").exists());
    assert!(!work.join("deep/a/b").exists());
    assert!(work.join("deep/a/file").exists());
    assert_eq!(std::fs::read_to_string(work.join("kept.txt")).unwrap(), "x");
}

#[test]
fn unconfined_info_says_why() {
    let info = unconfined("disabled");
    assert!(!info.confined());
    assert!(info.describe().contains("UNCONFINED"));
}

#[cfg(target_os = "linux")]
mod seccomp {
    use super::super::filter::{FilterSettings, seccomp_program};

    const RET_ERRNO: u32 = 0x0005_0000;

    fn program(network: bool, unix_sockets: bool) -> Vec<seccompiler::sock_filter> {
        seccomp_program(FilterSettings {
            network,
            unix_sockets,
            exec_guard: false,
        })
        .unwrap()
    }

    #[test]
    fn a_foreign_abi_gets_an_errno_before_the_kill_of_seccompiler() {
        let program = program(false, false);
        // ld arch; jeq native; ret ERRNO(EPERM)
        assert_eq!(program[0].code, 0x20);
        assert_eq!(program[0].k, 4);
        assert_eq!(program[1].k, 62 | 0x8000_0000 | 0x4000_0000);
        assert_eq!(program[2].code, 0x06);
        assert_eq!(program[2].k, RET_ERRNO | 1);
        if std::env::consts::ARCH == "x86_64" {
            // the x32 bit
            assert_eq!(program[4].k, 0x4000_0000);
            assert_eq!(program[5].k, RET_ERRNO | 1);
        }
        // clone3 -> ENOSYS
        let enosys = program
            .iter()
            .position(|op| op.code == 0x06 && op.k == RET_ERRNO | 38)
            .unwrap();
        assert_eq!(program[enosys - 1].k, 435);
    }

    /// Runs a classic BPF seccomp program the way the kernel does, on
    /// the instructions these programs use: the action, and how many
    /// instructions it took.
    fn run(
        program: &[seccompiler::sock_filter],
        nr: u32,
        arch: u32,
        args: [u64; 6],
    ) -> (u32, usize) {
        let mut data = Vec::new();
        data.extend_from_slice(&nr.to_ne_bytes());
        data.extend_from_slice(&arch.to_ne_bytes());
        data.extend_from_slice(&0u64.to_ne_bytes());
        for arg in args {
            data.extend_from_slice(&arg.to_ne_bytes());
        }
        let word = |offset: u32| {
            let offset = offset as usize;
            u32::from_ne_bytes(data[offset..offset + 4].try_into().unwrap())
        };
        let (mut a, mut pc, mut steps) = (0u32, 0usize, 0usize);
        loop {
            let op = &program[pc];
            pc += 1;
            steps += 1;
            let (jt, jf) = (usize::from(op.jt), usize::from(op.jf));
            match op.code {
                0x20 => a = word(op.k),
                0x54 => a &= op.k,
                0x15 => pc += if a == op.k { jt } else { jf },
                0x25 => pc += if a > op.k { jt } else { jf },
                0x35 => pc += if a >= op.k { jt } else { jf },
                0x45 => pc += if a & op.k != 0 { jt } else { jf },
                0x05 => pc += op.k as usize,
                0x06 => return (op.k, steps),
                code => panic!("instruction {code:#x} at {}", pc - 1),
            }
        }
    }

    /// The fast path (filter.rs) answers every system call, of every
    /// architecture and with the arguments the rules look at, exactly as
    /// the chain of rules alone does, and decides a number without a rule
    /// in a few instructions (the kernel emulates the program for every
    /// number when it is installed).
    #[test]
    fn the_fast_path_answers_as_the_rules_do_in_a_few_steps() {
        let native = super::super::filter::audit_arch().unwrap();
        let flags: Vec<u64> = [
            0x0002_0000u64,
            0x0400_0000,
            0x0800_0000,
            0x1000_0000,
            0x2000_0000,
            0x4000_0000,
            0x8000_0000,
            0x80,
        ]
        .into_iter()
        .flat_map(|flag| [flag, flag | 0x11, flag | 0x0001_0f00])
        .collect();
        let values: Vec<u64> = [
            0u64,
            1,
            2,
            10,
            16,
            0x11,
            0x0001_0f00 | 0x11,
            0o020_666,
            0o060_600,
            0o100_644,
            0o010_644,
            0o140_755,
            0xffff_ffff,
            0x1_0000_0001,
            0x1_0000_0000,
        ]
        .into_iter()
        .chain(flags)
        .collect();
        for (network, unix_sockets) in [(false, false), (false, true), (true, false), (true, true)]
        {
            let settings = FilterSettings {
                network,
                unix_sockets,
                exec_guard: false,
            };
            let fast = seccomp_program(settings).unwrap();
            let chain = super::super::filter::chain_only_program(settings).unwrap();
            let mut quick = 0;
            for arch in [native, 0x4000_0003, 0xc000_00b7, 0] {
                for nr in (0..1024u32).chain([0x4000_0000, 0x4000_0001, 0x4000_0200, 0xffff_ffff]) {
                    for value in &values {
                        let args = [*value; 6];
                        let (action, steps) = run(&fast, nr, arch, args);
                        assert_eq!(
                            action,
                            run(&chain, nr, arch, args).0,
                            "nr {nr} arch {arch:#x} args {value:#x} ({network}, {unix_sockets})"
                        );
                        if arch == native && *value == 0 && steps <= 20 {
                            quick += 1;
                        }
                    }
                }
            }
            // All but the forty-odd numbers with a rule.
            assert!(quick >= 1028 - 50, "{quick} of 1028 numbers quickly");
        }
    }

    /// With the exec guard, `execve` and `execveat` of the native
    /// architecture go to the supervisor; a foreign one is still refused
    /// first, and every other call is answered as without the guard.
    #[test]
    fn the_exec_guard_sends_both_execs_to_the_supervisor_and_nothing_else() {
        const USER_NOTIF: u32 = 0x7fc0_0000;
        let native = super::super::filter::audit_arch().unwrap();
        let settings = |exec_guard| FilterSettings {
            network: false,
            unix_sockets: false,
            exec_guard,
        };
        let guarded = seccomp_program(settings(true)).unwrap();
        let plain = seccomp_program(settings(false)).unwrap();
        let execs = [
            u32::try_from(nix::libc::SYS_execve).unwrap(),
            u32::try_from(nix::libc::SYS_execveat).unwrap(),
        ];
        for nr in 0..1024u32 {
            for arch in [native, 0x4000_0003] {
                let (action, _) = run(&guarded, nr, arch, [0; 6]);
                if arch == native && execs.contains(&nr) {
                    assert_eq!(action, USER_NOTIF, "nr {nr}");
                } else {
                    assert_eq!(
                        action,
                        run(&plain, nr, arch, [0; 6]).0,
                        "nr {nr} arch {arch:#x}"
                    );
                }
            }
        }
        assert!(!plain.iter().any(|op| op.code == 0x06 && op.k == USER_NOTIF));
    }

    #[test]
    fn the_socket_rules_follow_the_grants() {
        // Every combination compiles, and they differ.
        let all = [
            program(false, false),
            program(false, true),
            program(true, false),
            program(true, true),
        ];
        for (i, a) in all.iter().enumerate() {
            for b in &all[i + 1..] {
                let same = a.len() == b.len()
                    && a.iter()
                        .zip(b)
                        .all(|(x, y)| (x.code, x.jt, x.jf, x.k) == (y.code, y.jt, y.jf, y.k));
                assert!(!same);
            }
        }
    }
}

#[test]
fn a_request_travels_whole_and_nothing_malformed_is_read() {
    use std::os::unix::ffi::OsStringExt;
    let request = spec::Request {
        argv: vec![
            OsString::from("sh"),
            OsString::from("-c"),
            OsString::from_vec(b"printf '\xff\0'".to_vec()),
        ],
        cwd: PathBuf::from("/work dir/x"),
        env: vec![
            (OsString::from("PATH"), OsString::from("/usr/bin:/bin")),
            (OsString::from("EMPTY"), OsString::new()),
        ],
    };
    let bytes = request.encode();
    assert_eq!(spec::Request::decode(&bytes), Some(request.clone()));
    // Cut anywhere, or with a byte too many, it is refused.
    for cut in 0..bytes.len() {
        assert_eq!(spec::Request::decode(&bytes[..cut]), None, "cut at {cut}");
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert_eq!(spec::Request::decode(&longer), None);
    // No program, no request.
    let empty = spec::Request {
        argv: Vec::new(),
        ..request
    };
    assert_eq!(spec::Request::decode(&empty.encode()), None);
}

#[cfg(target_os = "linux")]
#[test]
fn a_process_with_threads_is_never_allowed_to_fork() {
    // A second thread, whatever the test harness runs on.
    let (stop, wait) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || wait.recv());
    assert!(!super::sys::enter_single_threaded());
    let refused = super::sys::fork();
    drop(stop);
    let _ = thread.join();
    assert!(refused.is_err());
}
