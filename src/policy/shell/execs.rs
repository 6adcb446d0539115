//! Programs with options or arguments that run other programs
//! (`sort --compress-program`, `ssh -o ProxyCommand`, `tar -I`, `zip -TT`,
//! `sqlite3 .shell`), programs that always may (debuggers, editors,
//! pagers), and bash builtins that evaluate an array subscript as
//! arithmetic, which runs any `$(…)` inside it (`printf -v 'a[$(id)]'`,
//! `read`, `unset`, `declare`, `test -v`, `let`, `mapfile -C`, `compgen -W`).
//!
//! Long options are matched with GNU's abbreviations in mind: `--compress-p`
//! means `--compress-program` to `sort`, so any prefix of at least `min`
//! characters counts.

use super::HazardKind;
use super::SimpleCommand;
use super::runners::Analysis;

/// True if `word` is `long` or an abbreviation of it at least `min`
/// characters long (`--` included), with or without `=value`.
pub(super) fn abbreviates(word: &str, long: &str, min: usize) -> bool {
    let name = word.split('=').next().unwrap_or(word);
    name.starts_with("--") && name.len() >= min && long.starts_with(name)
}

/// A single-dash cluster (`-xIf`) containing one of `letters`. Stops at
/// `--`.
fn cluster_has(argv: &[String], letters: &[char]) -> bool {
    argv.iter()
        .take_while(|w| *w != "--")
        .filter(|w| w.starts_with('-') && !w.starts_with("--") && w.len() > 1)
        .any(|w| w[1..].chars().any(|c| letters.contains(&c)))
}

/// Any word (before `--`) abbreviating one of `longs` (`(long, min)`).
fn any_long(argv: &[String], longs: &[(&str, usize)]) -> bool {
    argv.iter()
        .take_while(|w| *w != "--")
        .any(|w| longs.iter().any(|(long, min)| abbreviates(w, long, *min)))
}

/// Looks at programs that are not wrappers but may run other programs.
/// Returns true if it recognised the program.
pub(super) fn analyze(family: &str, cmd: &SimpleCommand, analysis: &mut Analysis) -> bool {
    let argv = &cmd.argv;
    let args = &argv[1..];
    let program = cmd.program().unwrap_or(family);
    let mut runs = |what: &str| analysis.hazard(HazardKind::RunsProgram, what);
    match family {
        "sort" => {
            if any_long(args, &[("--compress-program", 4)]) {
                runs("sort --compress-program");
            }
        }
        "ssh" | "scp" | "sftp" | "slogin" => ssh(program, args, analysis),
        "zip" => {
            if args.iter().any(|w| w.starts_with("-TT"))
                || any_long(args, &[("--unzip-command", 5)])
            {
                runs("zip -TT");
            }
        }
        "sdiff" | "diff" => {
            if any_long(args, &[("--diff-program", 3)]) {
                runs(&format!("{program} --diff-program"));
            }
        }
        "sqlite" => sqlite(program, args, analysis),
        "man" => {
            if cluster_has(args, &['P', 'H'])
                || any_long(args, &[("--pager", 5), ("--html", 4), ("--browser", 4)])
            {
                runs("man --pager");
            }
        }
        // Debuggers run the program and their own scripts (`-ex`, `-x`,
        // a `.gdbinit` in the directory).
        "gdb" | "lldb" | "cgdb" | "gdbserver" | "rr" => runs(&format!("{program} (debugger)")),
        // Editors run commands from options (`-c`, `+cmd`, `-S`), modelines
        // and project files; pagers run `!cmd` and input filters.
        "vi" | "vim" | "nvim" | "view" | "vimdiff" | "rvim" | "rview" | "gvim" | "evim" | "ex"
        | "nex" | "emacs" | "emacsclient" | "ed" | "red" => {
            runs(&format!("{program} (editor)"));
        }
        "less" | "more" | "most" | "pg" => runs(&format!("{program} (pager)")),
        "hyperfine" | "watchexec" | "entr" | "perf" | "at" | "batch" => runs(program),
        "fd" | "fdfind" => {
            if args
                .iter()
                .any(|w| matches!(w.as_str(), "-x" | "-X") || w.starts_with("--exec"))
            {
                runs(&format!("{program} --exec"));
            }
        }
        "run-parts" => runs("run-parts (runs every script in a directory)"),
        "npx" | "npm" | "pnpm" | "yarn" => {
            if args
                .iter()
                .any(|w| w == "-c" || abbreviates(w, "--call", 4))
            {
                runs(&format!("{program} -c"));
            }
        }
        "go" => {
            if args.iter().any(|w| {
                let name = w.trim_start_matches('-');
                w.starts_with('-') && (name.starts_with("exec") || name.starts_with("toolexec"))
            }) {
                runs("go -exec");
            }
        }
        "rustc" | "rustdoc" => {
            if args
                .iter()
                .any(|w| w.contains("linker=") || w.contains("linker-flavor"))
            {
                runs(&format!("{program} -C linker="));
            }
        }
        "gcc" | "g++" | "cc" | "c++" | "clang" | "clang++" | "gcc-" | "clang-" => {
            if args.iter().any(|w| {
                w == "-wrapper"
                    || w.starts_with("-fplugin")
                    || w.starts_with("-B")
                    || w.starts_with("-specs")
                    || w.starts_with("--specs")
            }) {
                runs(&format!("{program} -wrapper"));
            }
        }
        "expect" | "tclsh" | "wish" => {
            super::programs::interpreter(cmd, &["-c"], &[], &[], analysis);
        }
        _ => return builtin(family, cmd, analysis),
    }
    true
}

/// The shell's builtins that evaluate `NAME[subscript]` as arithmetic (a
/// subscript runs `$(…)`), or run a command by an option.
fn builtin(family: &str, cmd: &SimpleCommand, analysis: &mut Analysis) -> bool {
    let args = &cmd.argv[1..];
    let program = cmd.program().unwrap_or(family);
    match family {
        "printf" => {
            let mut index = 0;
            while let Some(word) = args.get(index) {
                let name = match word.as_str() {
                    "-v" => args.get(index + 1).map(String::as_str),
                    "--" => break,
                    _ => word.strip_prefix("-v"),
                };
                if name.is_some_and(|n| n.contains('[')) {
                    subscript(analysis, &format!("printf -v {}", name.unwrap_or_default()));
                }
                if !word.starts_with('-') {
                    break;
                }
                index += 1;
            }
        }
        "test" | "[" => {
            for pair in args.windows(2) {
                if matches!(pair[0].as_str(), "-v" | "-R") && pair[1].contains('[') {
                    subscript(analysis, &format!("{program} {} {}", pair[0], pair[1]));
                }
            }
        }
        "let" => subscript(analysis, &cmd.argv_text()),
        "read" | "unset" | "wait" | "getopts" => {
            if let Some(word) = args.iter().find(|w| w.contains('[')) {
                subscript(analysis, &format!("{program} {word}"));
            }
        }
        "declare" | "typeset" | "local" | "export" | "readonly" => {
            if let Some(word) = args.iter().find(|w| w.contains('[')) {
                subscript(analysis, &format!("{program} {word}"));
            }
            // `-i` makes later assignments arithmetic; `-n` makes the name
            // a reference to any other, subscripts included.
            if cluster_has(args, &['i', 'n']) {
                subscript(analysis, &cmd.argv_text());
            }
        }
        "mapfile" | "readarray" => {
            if cluster_has(args, &['C']) {
                analysis.hazard(HazardKind::RunsProgram, &format!("{program} -C"));
            }
            if let Some(word) = args.iter().find(|w| w.contains('[')) {
                subscript(analysis, &format!("{program} {word}"));
            }
        }
        "compgen" | "complete" => {
            if cluster_has(args, &['C', 'F', 'W']) {
                analysis.hazard(HazardKind::RunsProgram, &format!("{program} -C/-F/-W"));
            }
        }
        _ => return false,
    }
    true
}

fn subscript(analysis: &mut Analysis, text: &str) {
    analysis.hazard(
        HazardKind::Arithmetic,
        &format!("{text} (a subscript or name evaluated as arithmetic)"),
    );
}

/// ssh options that run a local program or load a library.
const SSH_KEYS: &[&str] = &[
    "proxycommand",
    "localcommand",
    "permitlocalcommand",
    "knownhostscommand",
    "pkcs11provider",
    "securitykeyprovider",
    "include",
    "remotecommand",
];

fn ssh(program: &str, args: &[String], analysis: &mut Analysis) {
    let mut index = 0;
    while let Some(word) = args.get(index) {
        index += 1;
        if word == "--" || !word.starts_with('-') {
            continue;
        }
        // `-o Key=value`, `-oKey=value`, `-o 'Key value'`.
        let value = match word.as_str() {
            "-o" => args.get(index).map(String::as_str),
            _ => word.strip_prefix("-o").filter(|rest| !rest.is_empty()),
        };
        if let Some(value) = value {
            let key = value
                .split(|c: char| c == '=' || c.is_whitespace())
                .next()
                .unwrap_or_default()
                .to_ascii_lowercase();
            if SSH_KEYS.contains(&key.as_str()) {
                analysis.hazard(HazardKind::RunsProgram, &format!("{program} -o {value}"));
            }
            continue;
        }
        // `-F config` may set any of the above; `-I lib`, scp/sftp `-S
        // program`, sftp `-D server`.
        let letters = &word[1..];
        let runs = match program {
            "scp" | "sftp" => letters.contains(['F', 'I', 'S', 'D']),
            _ => letters.contains(['F', 'I']),
        };
        if runs {
            analysis.hazard(HazardKind::RunsProgram, &format!("{program} {word}"));
        }
    }
}

/// `sqlite3 DB '.shell id'`, `-cmd '.system id'`, SQL loading an
/// extension, or commands read from stdin (a redirection may feed
/// dot-commands).
fn sqlite(program: &str, args: &[String], analysis: &mut Analysis) {
    let mut operands = Vec::new();
    let mut index = 0;
    while let Some(word) = args.get(index) {
        index += 1;
        match word.trim_start_matches('-') {
            "cmd" | "init" => {
                analysis.hazard(HazardKind::RunsProgram, &format!("{program} {word}"));
                index += 1;
            }
            "version" | "help" => return,
            "separator" | "newline" | "nullvalue" | "vfs" | "maxsize" | "mmap" | "lookaside"
            | "pagecache" | "heap" | "A" | "escape" => index += 1,
            _ if word.starts_with('-') && word.len() > 1 => {}
            _ => operands.push(word.as_str()),
        }
    }
    if operands.len() < 2 {
        analysis.hazard(
            HazardKind::RunsProgram,
            &format!("{program} reading commands from stdin"),
        );
        return;
    }
    for sql in &operands[1..] {
        let dot_command = sql.lines().any(|line| line.trim_start().starts_with('.'))
            || sql.split(';').any(|s| s.trim_start().starts_with('.'));
        if dot_command || sql.to_ascii_lowercase().contains("load_extension") {
            analysis.hazard(HazardKind::RunsProgram, &format!("{program} {sql}"));
        }
    }
}

/// `tar --to-command`, `-I PROG`, `--checkpoint-action=exec=…`, in long,
/// abbreviated, dash-cluster and old-style (`tar xIf`) spellings.
pub(super) fn tar(args: &[String], analysis: &mut Analysis) {
    const LONG: &[(&str, usize)] = &[
        ("--to-command", 6),
        ("--use-compress-program", 5),
        ("--checkpoint-action", 12),
        ("--info-script", 5),
        ("--new-volume-script", 6),
        ("--rsh-command", 5),
        ("--rmt-command", 5),
    ];
    let old_style = args
        .first()
        .is_some_and(|w| !w.starts_with('-') && w.contains(['I', 'F']));
    if old_style || cluster_has(args, &['I', 'F']) || any_long(args, LONG) {
        analysis.hazard(HazardKind::RunsProgram, "tar --to-command");
    }
}

/// `rsync -e CMD`, `-avze ssh`, `--rsh`, `--rsync-path`.
pub(super) fn rsync(args: &[String], analysis: &mut Analysis) {
    if cluster_has(args, &['e']) || any_long(args, &[("--rsh", 4), ("--rsync-path", 4)]) {
        analysis.hazard(HazardKind::RunsProgram, "rsync -e");
    }
}
