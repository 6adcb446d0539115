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
use super::{HazardKind, SimpleCommand};
use super::{programs, sed};
use git::git;
use shells::shell;
use wrappers::{LOADER, WRAPPERS, is_loader, wrapped};

mod git;
mod shells;
mod wrappers;

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

/// Shells whose `-c` or stdin is code.
pub(crate) const SHELLS: &[&str] = &[
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
