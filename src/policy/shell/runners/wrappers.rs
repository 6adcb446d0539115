//! Programs that run the command they are given (`env`, `xargs`,
//! `timeout`, `sudo` …) and the dynamic loader.

use super::{Analysis, HazardKind, Inner, SimpleCommand};
use crate::policy::shell::Placeholder;

/// A wrapper: `prog [options] [positionals] command args…`.
pub(super) struct Wrapper {
    pub(super) names: &'static [&'static str],
    /// Options whose value is the next word.
    valued: &'static [&'static str],
    /// Words after the options and before the command (`timeout 10`).
    positionals: usize,
    /// Options whose value is shell code (`su -c`, `flock -c`).
    script: &'static [&'static str],
    /// The rest is joined and run by a shell (`watch`, `parallel`).
    shell_rest: bool,
    /// A first word that is not an option is an argument, not the command
    /// (`setarch x86_64 [-R] cmd`, `runcon CONTEXT cmd`); options may follow it.
    leading: bool,
}

pub(super) const fn wrapper(
    names: &'static [&'static str],
    valued: &'static [&'static str],
) -> Wrapper {
    Wrapper {
        names,
        valued,
        positionals: 0,
        script: &[],
        shell_rest: false,
        leading: false,
    }
}

pub(super) const WRAPPERS: &[Wrapper] = &[
    wrapper(
        &[
            "builtin",
            "nohup",
            "setsid",
            "unbuffer",
            "catchsegv",
            "valgrind",
        ],
        &[],
    ),
    wrapper(&["firejail", "busybox"], &[]),
    Wrapper {
        leading: true,
        ..wrapper(&["setarch"], &[])
    },
    wrapper(&["linux32", "linux64", "uname26", "i386", "x86_64"], &[]),
    Wrapper {
        leading: true,
        ..wrapper(
            &["runcon"],
            &[
                "-u", "-r", "-t", "-l", "--user", "--role", "--type", "--range",
            ],
        )
    },
    wrapper(&["prlimit"], &["-p", "--pid", "-o", "--output"]),
    wrapper(
        &["setpriv"],
        &[
            "--reuid",
            "--regid",
            "--ruid",
            "--euid",
            "--rgid",
            "--egid",
            "--groups",
            "--inh-caps",
            "--ambient-caps",
            "--bounding-set",
            "--securebits",
            "--pdeathsig",
            "--selinux-label",
            "--apparmor-profile",
            "--landlock-access",
            "--landlock-rule",
        ],
    ),
    wrapper(
        &["xvfb-run"],
        &[
            "-n",
            "--server-num",
            "-e",
            "--error-file",
            "-f",
            "--auth-file",
            "-p",
            "--xauth-protocol",
            "-s",
            "--server-args",
            "-w",
            "--wait",
        ],
    ),
    wrapper(
        &["numactl"],
        &["-C", "-N", "-m", "-i", "-p", "-c", "-P", "-w"],
    ),
    wrapper(&["cgexec"], &["-g"]),
    wrapper(
        &["torsocks", "proxychains", "proxychains4", "tsocks"],
        &["-f", "-u", "-p", "-a", "-P"],
    ),
    wrapper(
        &[
            "eatmydata",
            "fakechroot",
            "dumb-init",
            "tini",
            "daemonize",
            "chpst",
            "sshpass",
        ],
        &["-p", "-f", "-u", "-e", "-P"],
    ),
    Wrapper {
        positionals: 1,
        ..wrapper(&["faketime"], &["-m", "-f"])
    },
    wrapper(&["ssh-agent"], &["-a", "-E", "-t", "-P", "-O"]),
    wrapper(&["ccache", "sccache", "distcc", "icecc"], &[]),
    wrapper(
        &["dbus-run-session", "dbus-launch"],
        &["--config-file", "--dbus-daemon"],
    ),
    Wrapper {
        positionals: 1,
        script: &["-c"],
        shell_rest: true,
        ..wrapper(&["sg"], &[])
    },
    wrapper(&["nice"], &["-n", "--adjustment"]),
    wrapper(
        &["stdbuf"],
        &["-i", "-o", "-e", "--input", "--output", "--error"],
    ),
    wrapper(&["ionice"], &["-c", "-n", "--class", "--classdata"]),
    wrapper(&["time"], &["-f", "--format", "-o", "--output"]),
    wrapper(&["fakeroot"], &["-l", "--lib", "--faked", "-s", "-i"]),
    wrapper(
        &["strace"],
        &[
            "-o", "-e", "-p", "-s", "-u", "-E", "-a", "-b", "-I", "-P", "-S", "-X", "-O",
        ],
    ),
    wrapper(
        &["ltrace"],
        &["-o", "-e", "-p", "-s", "-u", "-a", "-n", "-l"],
    ),
    wrapper(
        &["unshare"],
        &[
            "-S", "-G", "--setuid", "--setgid", "-R", "--root", "-w", "--wd",
        ],
    ),
    wrapper(&["nsenter"], &["-t", "--target", "-S", "-G", "-r", "-w"]),
    wrapper(
        &["systemd-run"],
        &[
            "-p",
            "--property",
            "-u",
            "--unit",
            "-E",
            "--setenv",
            "-M",
            "--machine",
        ],
    ),
    wrapper(&["proot"], &["-r", "-b", "-w", "-q"]),
    wrapper(
        &["sudo"],
        &[
            "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
        ],
    ),
    wrapper(&["doas"], &["-u", "-C"]),
    wrapper(&["pkexec"], &["--user"]),
    wrapper(&["exec"], &["-a"]),
    wrapper(
        &["xargs"],
        &[
            "-a",
            "--arg-file",
            "-d",
            "--delimiter",
            "-E",
            "-I",
            "-L",
            "-n",
            "--max-args",
            "-P",
            "--max-procs",
            "-s",
            "--max-chars",
            "--process-slot-var",
        ],
    ),
    Wrapper {
        positionals: 1,
        ..wrapper(&["timeout"], &["-s", "--signal", "-k", "--kill-after"])
    },
    Wrapper {
        positionals: 1,
        ..wrapper(&["chrt", "taskset"], &[])
    },
    Wrapper {
        positionals: 1,
        ..wrapper(&["chroot"], &["--userspec", "--groups"])
    },
    Wrapper {
        positionals: 1,
        script: &["-c", "--command"],
        ..wrapper(
            &["flock"],
            &["-w", "--wait", "--timeout", "-E", "--conflict-exit-code"],
        )
    },
    Wrapper {
        script: &["-c", "--command", "--session-command"],
        ..wrapper(
            &["su", "runuser"],
            &["-u", "-g", "-G", "-s", "--shell", "-w"],
        )
    },
    Wrapper {
        script: &["-c", "--command"],
        ..wrapper(&["script"], &["-E", "-I", "-O", "-B", "-T", "-t"])
    },
    Wrapper {
        shell_rest: true,
        ..wrapper(&["watch"], &["-n", "--interval", "-q", "--equexit"])
    },
    Wrapper {
        shell_rest: true,
        ..wrapper(
            &["parallel"],
            &["-j", "--jobs", "-S", "--sshlogin", "--delay"],
        )
    },
];

/// The dynamic loader run as a program (`/lib64/ld-linux-x86-64.so.2
/// [OPTIONS] PROGRAM ARGS`): a wrapper whose first operand is the program
/// it loads and runs. Its options with a value.
pub(super) const LOADER: Wrapper = wrapper(
    &[],
    &[
        "--library-path",
        "--preload",
        "--argv0",
        "--audit",
        "--inhibit-rpath",
        "--glibc-hwcaps-prepend",
        "--glibc-hwcaps-mask",
    ],
);

/// True if and only if `name` is a dynamic loader's: glibc's
/// `ld-linux*.so*`, `ld64.so*` and `ld.so`, musl's `ld-musl-*.so*`.
pub(super) fn is_loader(name: &str) -> bool {
    name == "ld.so"
        || name.starts_with("ld.so.")
        || ((name.starts_with("ld-linux")
            || name.starts_with("ld-musl")
            || name.starts_with("ld64"))
            && name.contains(".so"))
}

/// A generic wrapper from [`WRAPPERS`].
pub(super) fn wrapped(cmd: &SimpleCommand, program: &str, spec: &Wrapper, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let kind = if program == "exec" {
        HazardKind::Exec
    } else {
        HazardKind::RunsProgram
    };
    analysis.hazard(kind, program);
    let mut index = 1;
    if spec.leading && argv.get(1).is_some_and(|w| !w.starts_with('-')) {
        index = 2;
    }
    while let Some(word) = argv.get(index) {
        if word == "--" {
            index += 1;
            break;
        }
        if !word.starts_with('-') || word.len() == 1 {
            break;
        }
        if spec.script.contains(&word.as_str()) {
            if let Some(code) = argv.get(index + 1) {
                analysis.script(code.clone(), program);
            }
            return;
        }
        if let Some((option, code)) = word.split_once('=')
            && spec.script.contains(&option)
        {
            analysis.script(code.to_owned(), program);
            return;
        }
        index += if spec.valued.contains(&word.as_str()) {
            2
        } else {
            1
        };
    }
    index += spec.positionals;
    // `flock FILE -c CODE`: the code option may follow the positionals.
    if let Some(word) = argv.get(index)
        && spec.script.contains(&word.as_str())
    {
        if let Some(code) = argv.get(index + 1) {
            analysis.script(code.clone(), program);
        }
        return;
    }
    if index >= argv.len() {
        if program == "chroot" {
            analysis.hazard(HazardKind::NestedShell, "chroot runs a shell");
        }
        return;
    }
    if spec.shell_rest {
        analysis.script(argv[index..].join(" "), program);
    } else {
        analysis.command(cmd, index, index, program);
        if program == "xargs"
            && let Some(replace) = xargs_replace(&argv[1..index])
            && let Some(Inner::Command(inner)) = analysis.inner.last_mut()
        {
            inner.via = Some("xargs -I".to_owned());
            inner.placeholder = Some(Placeholder {
                pattern: replace,
                prefix: None,
            });
        }
    }
}

/// `xargs -I R` (`-IR`, `-i[R]`, `--replace[=R]`): the replace string,
/// given the words before the command.
pub(super) fn xargs_replace(options: &[String]) -> Option<String> {
    let mut found = None;
    let mut words = options.iter();
    while let Some(word) = words.next() {
        found = match word.as_str() {
            "-I" => words.next().cloned(),
            "-i" | "--replace" => Some("{}".to_owned()),
            _ => word
                .strip_prefix("--replace=")
                .or_else(|| word.strip_prefix("-I"))
                .or_else(|| word.strip_prefix("-i"))
                .filter(|_| !word.starts_with("--") || word.starts_with("--replace="))
                .map(str::to_owned)
                .or(found),
        };
    }
    found.filter(|replace| !replace.is_empty())
}
