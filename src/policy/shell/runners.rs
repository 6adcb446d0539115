//! Programs that run other programs, or code given as a string.
//!
//! The choice (docs/security.md S4): such a command is **never auto-allowed** —
//! each family below adds a hazard — **and** the command it would run is
//! unwrapped, when it can be read statically, into a nested part, so deny
//! and ask rules and the guards judge it like any other part
//! (`env X=1 rm -rf x` hits `deny: rm*`; `timeout 5 sudo id` hits the
//! `sudo` guard; `bash -c 'curl x'` hits `deny: curl*`). Unwrapping for
//! allow was rejected: every wrapper has options that change what runs
//! (`env -S`, `xargs -I`, `find -execdir`, `timeout --foreground` …), and
//! a wrong unwrap would silently widen an allowlist. The model is told to
//! run the inner command directly.
//!
//! Options that execute (`sort --compress-program`, `tar -I`), debuggers,
//! editors, pagers and builtins that evaluate subscripts are in
//! `execs.rs`; sed scripts are parsed in `sed.rs`.
//!
//! Shells running a script file (`bash scripts/test.sh`) are not a hazard:
//! like `python x.py` or `make`, what they run is the operator's choice
//! when they allow it by name (under a wildcard while a deny rule exists
//! they are opaque, see `policy/opaque.rs`). Shells reading code from
//! `-c`, stdin or a descriptor (`bash /dev/stdin`) are.

use super::execs::{self, abbreviates};
use super::{HazardKind, Placeholder, SimpleCommand};
use super::{programs, sed};

/// What a part runs besides itself.
#[derive(Debug, Default)]
pub(super) struct Analysis {
    pub hazards: Vec<(HazardKind, String)>,
    pub inner: Vec<Inner>,
}

/// A command a part runs.
#[derive(Debug)]
pub(super) enum Inner {
    /// An argv taken from the part's own words.
    Command(SimpleCommand),
    /// Shell code in a string (`bash -c`, `eval`, `watch`, `trap`).
    Script { text: String, via: String },
}

/// A wrapper: `prog [options] [positionals] command args…`.
struct Wrapper {
    names: &'static [&'static str],
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

const fn wrapper(names: &'static [&'static str], valued: &'static [&'static str]) -> Wrapper {
    Wrapper {
        names,
        valued,
        positionals: 0,
        script: &[],
        shell_rest: false,
        leading: false,
    }
}

const WRAPPERS: &[Wrapper] = &[
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
const LOADER: Wrapper = wrapper(
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
fn is_loader(name: &str) -> bool {
    name == "ld.so"
        || name.starts_with("ld.so.")
        || ((name.starts_with("ld-linux")
            || name.starts_with("ld-musl")
            || name.starts_with("ld64"))
            && name.contains(".so"))
}

/// Shells whose `-c` or stdin is code.
const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "zsh", "dash", "ksh", "mksh", "pdksh", "ash", "yash", "posh", "fish",
    "csh", "tcsh",
];

/// Variables that choose which program runs or how (`PATH=. cargo` runs
/// `./cargo`); prefix families end with `_`.
const HIJACK_VARIABLES: &[&str] = &[
    "PATH",
    "IFS",
    "ENV",
    "BASH_ENV",
    "CDPATH",
    "SHELLOPTS",
    "BASHOPTS",
    "PS4",
    "PROMPT_COMMAND",
    "HOME",
    "XDG_CONFIG_HOME",
    "ZDOTDIR",
    "SHELL",
    "PAGER",
    "EDITOR",
    "VISUAL",
    "BROWSER",
    "LD_",
    "DYLD_",
    "GIT_",
    "RUSTC",
    "RUSTC_",
    "RUSTDOC",
    "RUSTFLAGS",
    "RUSTDOCFLAGS",
    "CARGO_",
    "CC",
    "CXX",
    "LD",
    "AR",
    "MAKEFLAGS",
    "MAKEFILES",
    "PYTHONPATH",
    "PYTHONSTARTUP",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "NODE_PATH",
    "PERL5OPT",
    "PERL5LIB",
    "RUBYOPT",
    "RUBYLIB",
    "JAVA_TOOL_OPTIONS",
    "_JAVA_OPTIONS",
    "MANPAGER",
    "MANOPT",
    "SYSTEMD_PAGER",
    "LESSOPEN",
    "LESSCLOSE",
    "TAR_OPTIONS",
    "ZIPOPT",
    "RSYNC_RSH",
    "RSYNC_CONNECT_PROG",
    "SSH_ASKPASS",
    "SUDO_ASKPASS",
    "GCONV_PATH",
    "PYTHONBREAKPOINT",
    "PERL5DB",
    "VIMINIT",
    "EXINIT",
];

/// True if and only if setting `name` may change which program runs.
pub(crate) fn hijacks(name: &str) -> bool {
    HIJACK_VARIABLES.iter().any(|entry| {
        if let Some(prefix) = entry.strip_suffix('_')
            && entry.len() > 2
        {
            name == prefix || name.starts_with(entry)
        } else {
            name == *entry
        }
    })
}

/// Looks at what `cmd` runs besides itself.
pub(super) fn analyze(cmd: &SimpleCommand) -> Analysis {
    let mut analysis = Analysis::default();
    for assignment in &cmd.assignments {
        check_assignment(assignment, &mut analysis);
    }
    let Some(program) = cmd.program() else {
        return analysis;
    };
    let family = match program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.') {
        "" => program,
        family => family,
    };
    let handled = builtin(cmd, program, family, &mut analysis)
        || interpreter(cmd, program, family, &mut analysis)
        || known_program(cmd, program, family, &mut analysis);
    if !handled {
        if SHELLS.contains(&family) {
            shell(cmd, program, &mut analysis);
        } else if let Some(spec) = WRAPPERS.iter().find(|w| w.names.contains(&program)) {
            wrapped(cmd, program, spec, &mut analysis);
        } else if is_loader(program) {
            wrapped(cmd, program, &LOADER, &mut analysis);
        } else {
            execs::analyze(family, cmd, &mut analysis);
        }
    }
    analysis
}

/// The shell's own commands that run code or change the shell: `eval`,
/// `source`, `trap`, `export`, `command`…, and `env`, `capsh`.
fn builtin(cmd: &SimpleCommand, program: &str, family: &str, analysis: &mut Analysis) -> bool {
    let argv = &cmd.argv;
    match family {
        "eval" => {
            analysis.hazard(HazardKind::Eval, &cmd.argv_text());
            if argv.len() > 1 {
                analysis.script(argv[1..].join(" "), "eval");
            }
        }
        "shopt" if harmless_shopt(&argv[1..]) => {}
        "source" | "." | "alias" | "unalias" | "shopt" | "enable" | "hash" => {
            analysis.hazard(HazardKind::ChangesShell, program);
        }
        "trap" => {
            analysis.hazard(HazardKind::ChangesShell, program);
            if let Some(code) = argv.get(1).filter(|word| !word.starts_with('-')) {
                analysis.script(code.clone(), "trap");
            }
        }
        "export" | "declare" | "typeset" | "local" | "readonly" => {
            for word in &argv[1..] {
                check_assignment(word, analysis);
            }
            execs::analyze(family, cmd, analysis);
        }
        "capsh" => {
            // `capsh … -- ARGS` runs `/bin/bash ARGS` (or `--shell=`).
            analysis.hazard(HazardKind::RunsProgram, "capsh");
            if let Some(at) = argv.iter().position(|w| w == "--") {
                let mut words = vec!["bash".to_owned()];
                words.extend(argv[at + 1..].iter().cloned());
                analysis.inner_words(cmd, words, at, "capsh --");
            }
        }
        "env" => env(cmd, analysis),
        "command" => {
            if !argv[1..].iter().any(|w| w == "-v" || w == "-V") {
                analysis.hazard(HazardKind::RunsProgram, program);
                let start = 1 + argv[1..].iter().take_while(|w| w.starts_with('-')).count();
                analysis.command(cmd, start, start, program);
            }
        }
        _ => return false,
    }
    true
}

/// Interpreters: code given inline (`-c`, `-e`…) or a module or file
/// loaded before the script.
fn interpreter(cmd: &SimpleCommand, program: &str, family: &str, analysis: &mut Analysis) -> bool {
    let argv = &cmd.argv;
    match family {
        "python" | "pypy" => programs::interpreter(cmd, &["-c"], &["-m"], &["-W", "-X"], analysis),
        "perl" => programs::interpreter(cmd, &["-e", "-E"], &[], &["-I", "-M"], analysis),
        "ruby" => programs::interpreter(cmd, &["-e"], &[], &["-I", "-r"], analysis),
        "node" | "nodejs" | "bun" => programs::interpreter(
            cmd,
            &["-e", "--eval", "-p", "--print"],
            &[],
            &[
                "-r",
                "--require",
                "--import",
                "--loader",
                "--experimental-loader",
            ],
            analysis,
        ),
        "deno" if argv.get(1).is_some_and(|w| w == "eval") => {
            analysis.hazard(HazardKind::InlineCode, "deno eval");
        }
        "php" => {
            programs::interpreter(cmd, &["-r", "-R", "-B", "-E"], &[], &["-d", "-c"], analysis)
        }
        "lua" | "luajit" | "Rscript" | "R" => {
            programs::interpreter(cmd, &["-e"], &[], &["-l"], analysis);
        }
        "julia" => programs::interpreter(
            cmd,
            &["-e", "-E", "--eval", "--print"],
            &[],
            &["-J", "-L", "-p", "-t", "--sysimage", "--load", "--procs"],
            analysis,
        ),
        "groovy" | "scala" | "osascript" | "ghci" | "elixir" | "racket" => {
            programs::interpreter(cmd, &["-e", "--eval"], &[], &[], analysis);
        }
        "erl" => programs::interpreter(cmd, &["-eval"], &[], &[], analysis),
        "guile" => programs::interpreter(cmd, &["-c"], &[], &["-L", "-l"], analysis),
        "sbcl" => programs::interpreter(cmd, &["--eval"], &[], &["--load"], analysis),
        "clisp" => programs::interpreter(cmd, &["-x"], &[], &["-i"], analysis),
        // `!cmd` in a dc program runs a shell command; m4's `syscmd`.
        "dc" => programs::interpreter(
            cmd,
            &["-e", "--expression"],
            &[],
            &["-f", "--file"],
            analysis,
        ),
        "m" if program == "m4" => {
            programs::interpreter(cmd, &[], &[], &["-D", "-U", "-I"], analysis);
        }
        _ => return false,
    }
    true
}

/// Programs that run others by an option (`wget --use-askpass`, `rg
/// --pre`, `make VAR=…`, `nc -e`…) or a script language (`awk`, `sed`).
fn known_program(
    cmd: &SimpleCommand,
    program: &str,
    family: &str,
    analysis: &mut Analysis,
) -> bool {
    let argv = &cmd.argv;
    match family {
        "pwsh" | "powershell" => powershell(cmd, analysis),
        "socat"
            if argv[1..].iter().any(|w| {
                let lower = w.to_ascii_lowercase();
                lower.starts_with("exec:") || lower.starts_with("system:")
            }) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "socat EXEC:/SYSTEM:");
        }
        "nc" | "ncat" | "netcat" | "nc.traditional"
            if argv[1..].iter().any(|w| {
                matches!(w.as_str(), "-e" | "-c")
                    || w.starts_with("--exec")
                    || w.starts_with("--sh-exec")
                    || w.starts_with("--lua-exec")
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains(['e', 'c']))
            }) =>
        {
            analysis.hazard(HazardKind::RunsProgram, &format!("{program} -e"));
        }
        // `--use-askpass=CMD`, or the same as a wgetrc command (`-e`).
        "wget"
            if argv[1..].iter().any(|w| {
                w.starts_with("--use-askpass")
                    || w.starts_with("--execute")
                    || (w.starts_with('-') && !w.starts_with("--") && w.contains('e'))
            }) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "wget --use-askpass/--execute");
        }
        "awk" | "gawk" | "mawk" | "nawk" => programs::awk(cmd, analysis),
        "sed" | "gsed" => sed::sed(cmd, analysis),
        "find" => programs::find(cmd, analysis),
        "git" => git(cmd, analysis),
        "rg" => {
            for (index, word) in argv.iter().enumerate() {
                if let Some(value) = word.strip_prefix("--pre=") {
                    analysis.hazard(HazardKind::RunsProgram, "rg --pre");
                    analysis.inner_words(cmd, vec![value.to_owned()], index, "rg --pre");
                } else if word.starts_with("--hostname-bin") {
                    // Runs that program to learn the host name.
                    analysis.hazard(HazardKind::RunsProgram, "rg --hostname-bin");
                } else if word == "--pre" {
                    analysis.hazard(HazardKind::RunsProgram, "rg --pre");
                    if let Some(value) = argv.get(index + 1) {
                        analysis.inner_words(cmd, vec![value.clone()], index + 1, "rg --pre");
                    }
                }
            }
        }
        "cargo" => {
            if argv
                .iter()
                .take_while(|w| *w != "--")
                .any(|w| w == "--config" || w.starts_with("--config=") || w == "-Z")
            {
                analysis.hazard(HazardKind::RunsProgram, "cargo --config");
            }
        }
        // `make` runs the Makefile's recipes: allowing `make*` allows what
        // the repository's Makefile says, like `cargo test` runs build
        // scripts. What changes the recipes from the command line does not
        // pass: `VAR=value` overrides (`make CC=./x`), `SHELL=`, `--eval`.
        "make" | "gmake" => {
            if let Some(word) = argv[1..].iter().find(|w| {
                (w.contains('=') && !w.starts_with('-'))
                    || abbreviates(w, "--eval", 4)
                    || w.starts_with("-E")
            }) {
                analysis.hazard(HazardKind::RunsProgram, &format!("make {word}"));
            }
        }
        "tar" | "gtar" | "bsdtar" => execs::tar(&argv[1..], analysis),
        "rsync" => execs::rsync(&argv[1..], analysis),
        _ => return false,
    }
    true
}

impl Analysis {
    pub(super) fn hazard(&mut self, kind: HazardKind, text: &str) {
        self.hazards.push((kind, text.to_owned()));
    }

    fn script(&mut self, text: String, via: &str) {
        self.inner.push(Inner::Script {
            text,
            via: via.to_owned(),
        });
    }

    /// The part's argv from `argv_start`, with `argv[assign_start..argv_start]`
    /// as assignments (`env X=1 cmd`).
    fn command(&mut self, cmd: &SimpleCommand, assign_start: usize, argv_start: usize, via: &str) {
        if argv_start >= cmd.argv.len() {
            return;
        }
        let offset = cmd.assignments.len();
        self.inner.push(Inner::Command(SimpleCommand {
            assignments: cmd.argv[assign_start..argv_start].to_vec(),
            argv: cmd.argv[argv_start..].to_vec(),
            redirections: Vec::new(),
            via: Some(via.to_owned()),
            placeholder: None,
            shapes: cmd
                .shapes
                .get(offset + assign_start..)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
            splits: cmd
                .splits
                .get(offset + assign_start..)
                .map(<[_]>::to_vec)
                .unwrap_or_default(),
        }));
    }

    /// Given words (`find -exec rm {} ;`) as a nested command; `at` is the
    /// argv index of the first one, for its shape.
    pub(super) fn inner_words(
        &mut self,
        cmd: &SimpleCommand,
        argv: Vec<String>,
        at: usize,
        via: &str,
    ) {
        let offset = cmd.assignments.len() + at;
        let shapes = cmd
            .shapes
            .get(offset..offset + argv.len())
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        let splits = cmd
            .splits
            .get(offset..offset + argv.len())
            .map(<[_]>::to_vec)
            .unwrap_or_default();
        self.inner.push(Inner::Command(SimpleCommand {
            assignments: Vec::new(),
            argv,
            redirections: Vec::new(),
            via: Some(via.to_owned()),
            placeholder: None,
            shapes,
            splits,
        }));
    }
}

fn check_assignment(word: &str, analysis: &mut Analysis) {
    if let Some((name, _)) = word.split_once('=') {
        let name = name.strip_suffix('+').unwrap_or(name);
        if hijacks(name) {
            analysis.hazard(HazardKind::HijackVariable, word);
        }
    }
}

/// `env [-i] [-u NAME] [NAME=VALUE]… [command args…]`.
fn env(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        if word == "--" {
            index += 1;
            break;
        }
        if let Some(split) = word
            .strip_prefix("--split-string=")
            .or_else(|| word.strip_prefix("-S").filter(|rest| !rest.is_empty()))
        {
            analysis.hazard(HazardKind::RunsProgram, "env -S");
            analysis.script(split.to_owned(), "env -S");
            index += 1;
            continue;
        }
        if matches!(word.as_str(), "-S" | "--split-string") {
            analysis.hazard(HazardKind::RunsProgram, "env -S");
            if let Some(split) = argv.get(index + 1) {
                analysis.script(split.clone(), "env -S");
            }
            index += 2;
            continue;
        }
        if matches!(word.as_str(), "-u" | "--unset" | "-C" | "--chdir") {
            index += 2;
            continue;
        }
        if word.starts_with('-') {
            index += 1;
            continue;
        }
        break;
    }
    let assign_start = index;
    while argv.get(index).is_some_and(|word| word.contains('=')) {
        check_assignment(&argv[index], analysis);
        index += 1;
    }
    if index < argv.len() {
        analysis.hazard(HazardKind::RunsProgram, "env");
        analysis.command(cmd, assign_start, index, "env");
    }
}

/// `bash -c CODE`, `sh -lc CODE`, a shell reading stdin.
/// `shopt -s|-u|-q OPT…` of options that change globbing or reporting
/// only: not `expand_aliases`, `extglob` (which changes how later lines
/// parse), `extdebug`, `sourcepath` and the like.
fn harmless_shopt(args: &[String]) -> bool {
    const GLOBBING: &[&str] = &[
        "globstar",
        "nullglob",
        "dotglob",
        "nocaseglob",
        "failglob",
        "nocasematch",
        "globasciiranges",
        "lastpipe",
        "inherit_errexit",
        "checkwinsize",
    ];
    matches!(args.first().map(String::as_str), Some("-s" | "-u" | "-q"))
        && args.len() > 1
        && args[1..]
            .iter()
            .all(|word| GLOBBING.contains(&word.as_str()))
}

/// True if and only if `sh` or `dash` runs no command in `code` that
/// bash would not: none of the syntax where they part ways (`((` is a
/// subshell to dash and arithmetic to bash; dash expands aliases) and
/// none where bash's reading is the one the analysis has.
fn read_alike(code: &str) -> bool {
    const APART: &[&str] = &[
        "((", "$'", "$\"", "[[", "<(", ">(", "|&", "&>", "<<<", "function", "select", "coproc",
        "alias", "{", "}",
    ];
    !APART.iter().any(|syntax| code.contains(syntax))
}

fn shell(cmd: &SimpleCommand, program: &str, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let mut index = 1;
    let mut code_flag = false;
    let mut stdin = false;
    while let Some(word) = argv.get(index) {
        if word == "--" || word == "-" {
            index += 1;
            stdin |= word == "-";
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            if let Some(code) = long.strip_prefix("command=") {
                analysis.hazard(HazardKind::NestedShell, &format!("{program} --command"));
                analysis.script(code.to_owned(), &format!("{program} -c"));
                return;
            }
            code_flag |= long == "command";
            if matches!(long, "rcfile" | "init-file") {
                index += 1;
            }
            index += 1;
            continue;
        }
        if (word.starts_with('-') || word.starts_with('+')) && word.len() > 1 {
            let letters = &word[1..];
            code_flag |= letters.contains('c');
            stdin |= letters.contains('s') || letters.contains('i');
            if letters.contains('o') || letters.contains('O') {
                index += 1;
            }
            index += 1;
            continue;
        }
        break;
    }
    if code_flag {
        analysis.hazard(HazardKind::NestedShell, &format!("{program} -c"));
        let family = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        if family != "bash" && !argv.get(index).is_some_and(|code| read_alike(code)) {
            // The analysis reads code as bash does.
            analysis.hazard(
                HazardKind::NestedShell,
                &format!("{program} -c with code another shell may read otherwise"),
            );
        }
        if let Some(code) = argv.get(index) {
            analysis.script(code.clone(), &format!("{program} -c"));
        }
    } else if stdin || index >= argv.len() {
        analysis.hazard(
            HazardKind::NestedShell,
            &format!("{program} reading commands from stdin"),
        );
        if argv[1..index].iter().any(|w| w == "-") {
            analysis.hazard(HazardKind::StdinProgram, &format!("{program} -"));
        }
    } else if programs::is_stdin_path(&argv[index]) {
        // `bash /dev/stdin <<< …`, `sh /dev/fd/0`, `bash /proc/self/fd/0`.
        analysis.hazard(
            HazardKind::StdinProgram,
            &format!("{program} {}", argv[index]),
        );
    }
}

/// git's options before its subcommand (`-c`, `-C DIR`, `--git-dir`…):
/// those that may run a program are hazards. Returns where the
/// subcommand is.
fn git_options(argv: &[String], analysis: &mut Analysis) -> usize {
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        match word.as_str() {
            "-c" | "--config-env" => {
                analysis.hazard(HazardKind::RunsProgram, &format!("git {word}"));
                index += 2;
            }
            // Another directory's repository configuration (one the model
            // may have written outside `.git`) can run programs: an alias
            // `!cmd`, `core.fsmonitor`, `core.sshCommand`.
            "-C" | "--git-dir" => {
                if argv.get(index + 1).is_none_or(|dir| dir != ".") {
                    analysis.hazard(HazardKind::RunsProgram, &format!("git {word} DIR"));
                }
                index += 2;
            }
            "--work-tree" | "--namespace" | "--super-prefix" => index += 2,
            _ if word.starts_with("--git-dir=") => {
                analysis.hazard(HazardKind::RunsProgram, "git --git-dir=DIR");
                index += 1;
            }
            _ if word.starts_with("--config-env=") || word.starts_with("--exec-path=") => {
                analysis.hazard(HazardKind::RunsProgram, &format!("git {word}"));
                index += 1;
            }
            _ if word.starts_with('-') => index += 1,
            _ => break,
        }
    }
    index
}

/// `git -c key=value …`, and subcommands that run a command or hook.
fn git(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let index = git_options(argv, analysis);
    let Some(subcommand) = argv.get(index) else {
        return;
    };
    let rest = &argv[index + 1..];
    // git accepts any unique abbreviation of a long option (`--up=` for
    // `git clone --upload-pack`): every prefix counts.
    let runs = |flags: &[&str]| {
        rest.iter().take_while(|w| *w != "--").any(|w| {
            flags.iter().any(|flag| {
                w == flag
                    || w.starts_with(&format!("{flag}="))
                    || (flag.starts_with("--") && abbreviates(w, flag, 3))
                    || (flag.len() == 2 && !flag.starts_with("--") && w.starts_with(flag))
            })
        })
    };
    // A short-option cluster (`-yxsh`) containing one of `letters`.
    let cluster = |letters: &[char]| {
        rest.iter()
            .take_while(|w| *w != "--")
            .filter(|w| w.starts_with('-') && !w.starts_with("--") && w.len() > 1)
            .any(|w| w[1..].chars().any(|c| letters.contains(&c)))
    };
    let via = format!("git {subcommand}");
    match subcommand.as_str() {
        "submodule" if rest.first().is_some_and(|w| w == "foreach") => {
            analysis.hazard(HazardKind::RunsProgram, "git submodule foreach");
            let code: Vec<&str> = rest[1..]
                .iter()
                .map(String::as_str)
                .skip_while(|w| w.starts_with('-'))
                .collect();
            analysis.script(code.join(" "), &via);
        }
        "bisect" if rest.first().is_some_and(|w| w == "run") => {
            analysis.hazard(HazardKind::RunsProgram, "git bisect run");
            analysis.command(cmd, index + 2, index + 2, &via);
        }
        "filter-branch" => analysis.hazard(HazardKind::RunsProgram, "git filter-branch"),
        "rebase" if runs(&["-x", "--exec"]) => {
            analysis.hazard(HazardKind::RunsProgram, "git rebase --exec");
        }
        "difftool" | "mergetool" if runs(&["--extcmd", "--tool"]) || cluster(&['x', 't']) => {
            analysis.hazard(HazardKind::RunsProgram, &format!("{via} --extcmd"));
        }
        "grep" if runs(&["--open-files-in-pager"]) || cluster(&['O']) => {
            analysis.hazard(HazardKind::RunsProgram, "git grep --open-files-in-pager");
        }
        "send-email"
            if runs(&[
                "--sendmail-cmd",
                "--smtp-server",
                "--to-cmd",
                "--cc-cmd",
                "--header-cmd",
            ]) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "git send-email --sendmail-cmd");
        }
        "help" if runs(&["--web", "--man", "--info"]) || cluster(&['w', 'm', 'i']) => {
            analysis.hazard(HazardKind::RunsProgram, "git help --web");
        }
        // `git remote-ext URL CMD` runs CMD when asked to connect;
        // `git daemon --access-hook=CMD` runs CMD for each request.
        "instaweb" | "web--browse" | "remote-ext" => analysis.hazard(HazardKind::RunsProgram, &via),
        "daemon" if rest.iter().any(|w| w.starts_with("--access-hook")) => {
            analysis.hazard(HazardKind::RunsProgram, "git daemon --access-hook");
        }
        // The receiving repository runs its hooks (and its `core.hooksPath`):
        // a local one may be a directory the model wrote.
        "push" | "send-pack" if pushes_to_a_local_repository(rest) => {
            analysis.hazard(
                HazardKind::RunsProgram,
                &format!("git {subcommand} to a local repository (runs its hooks)"),
            );
        }
        "receive-pack" => {
            analysis.hazard(HazardKind::RunsProgram, "git receive-pack (runs hooks)");
        }
        "config"
            if rest.iter().filter(|w| !w.starts_with('-')).count() >= 2
                && !plain_git_setting(rest) =>
        {
            analysis.hazard(HazardKind::RunsProgram, "git config (sets a value)");
        }
        _ => {}
    }
    // The program run on the other side (`--upload-pack`), a template
    // directory's hooks, a clone's configuration.
    let remote_program = runs(&["--upload-pack", "--receive-pack", "--exec", "--template"])
        && matches!(
            subcommand.as_str(),
            "clone" | "fetch" | "pull" | "push" | "ls-remote" | "archive" | "init" | "submodule"
        );
    if remote_program || (subcommand == "clone" && runs(&["-u", "-c", "--config"])) {
        let what = format!("git {subcommand} --upload-pack");
        analysis.hazard(HazardKind::RunsProgram, &what);
    }
}

/// `git config [--global|--local|--replace-all|--add] KEY VALUE` of a
/// key that names no program, hook, filter, alias or included file.
fn plain_git_setting(rest: &[String]) -> bool {
    const KEYS: &[&str] = &[
        "user.name",
        "user.email",
        "init.defaultbranch",
        "pull.rebase",
        "pull.ff",
        "push.default",
        "push.autosetupremote",
        "fetch.prune",
        "merge.ff",
        "rebase.autosquash",
        "rebase.autostash",
        "core.autocrlf",
        "core.filemode",
        "core.ignorecase",
        "core.quotepath",
        "core.safecrlf",
        "color.ui",
        "advice.detachedhead",
        "commit.gpgsign",
        "tag.gpgsign",
        "diff.renames",
        "log.date",
    ];
    let mut words = rest.iter();
    let mut operands = Vec::new();
    for word in words.by_ref() {
        match word.as_str() {
            "--global" | "--local" | "--replace-all" | "--add" | "--unset" | "--unset-all" => {}
            option if option.starts_with('-') => return false,
            operand => operands.push(operand),
        }
    }
    operands.len() == 2 && KEYS.contains(&operands[0].to_ascii_lowercase().as_str())
}

/// PowerShell: `-Command`, `-EncodedCommand`, `-CommandWithArgs` (any
/// case, any abbreviation, `-c`, `-e`, `-ec`, `-cwa`) carry inline code;
/// without a script file it reads commands from stdin.
fn powershell(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let program = cmd.program().unwrap_or_default();
    // Every word is looked at, also after the script (its arguments):
    // an option's value is not told apart from the script's name.
    let names: Vec<String> = cmd.argv[1..]
        .iter()
        .filter_map(|word| word.strip_prefix('-'))
        .map(|name| name.trim_start_matches('-').to_ascii_lowercase())
        .filter(|name| !name.is_empty())
        .collect();
    if let Some(name) = names.iter().find(|name| {
        ["command", "encodedcommand", "commandwithargs"]
            .iter()
            .any(|long| long.starts_with(name.as_str()))
            || matches!(name.as_str(), "ec" | "cwa")
    }) {
        analysis.hazard(HazardKind::InlineCode, &format!("{program} -{name}"));
        return;
    }
    let script = cmd.argv[1..].iter().any(|word| !word.starts_with('-'))
        || names.iter().any(|name| "file".starts_with(name.as_str()));
    let about_itself = names
        .iter()
        .any(|name| matches!(name.as_str(), "version" | "v" | "help" | "h" | "?"));
    if !script && !about_itself {
        analysis.hazard(
            HazardKind::InlineCode,
            &format!("{program} reading commands from stdin"),
        );
    }
}

/// `git push ARGS`: true when the repository it names (the first word
/// that is not an option, or `--repo=`) is a path or a `file://` URL, not
/// a network URL (`https://…`, `ssh://…`, `host:path`) or a remote's name.
/// `git push` with no repository uses the configured remote. (A name with
/// no remote of that name is a path to git: docs/policy.md says so.)
fn pushes_to_a_local_repository(rest: &[String]) -> bool {
    let mut words = rest.iter();
    let mut repository = None;
    while let Some(word) = words.next() {
        if word == "--" {
            repository = words.next().map(String::as_str);
            break;
        }
        if let Some(value) = word.strip_prefix("--repo=") {
            repository = Some(value);
            break;
        }
        if matches!(word.as_str(), "-o" | "--push-option" | "--repo") {
            if word == "--repo" {
                repository = words.next().map(String::as_str);
                break;
            }
            words.next();
            continue;
        }
        if !word.starts_with('-') {
            repository = Some(word.as_str());
            break;
        }
    }
    let Some(repository) = repository else {
        return false;
    };
    match repository.split_once("://") {
        Some((scheme, _)) => scheme.eq_ignore_ascii_case("file"),
        // scp-like `host:path`: a colon before any slash.
        None if repository
            .split_once(':')
            .is_some_and(|(host, _)| !host.is_empty() && !host.contains('/')) =>
        {
            false
        }
        // A name (`origin`) is taken for a configured remote; a path is not.
        None => repository.contains('/') || repository.starts_with(['.', '~']),
    }
}

/// A generic wrapper from [`WRAPPERS`].
fn wrapped(cmd: &SimpleCommand, program: &str, spec: &Wrapper, analysis: &mut Analysis) {
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
fn xargs_replace(options: &[String]) -> Option<String> {
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
