//! Programs whose arguments may hide code: interpreters with inline code
//! (`python -c`, `perl -e`, `node -e`), awk programs that run commands,
//! `find -exec`. sed scripts are in `sed.rs`.

use super::HazardKind;
use super::SimpleCommand;
use super::runners::{Analysis, Inner};
use super::{Placeholder, Seg};

/// An interpreter taking code in an option (`python -c`, `perl -e`) or
/// from stdin. Options are scanned up to the script operand or a `stop`
/// option (`python -m`); a single-dash cluster containing a code letter
/// counts (`perl -ne`, `python -Sc`).
pub(super) fn interpreter(
    cmd: &SimpleCommand,
    code: &[&str],
    stop: &[&str],
    valued: &[&str],
    analysis: &mut Analysis,
) {
    let program = cmd.program().unwrap_or_default();
    let letters: Vec<char> = code
        .iter()
        .filter(|flag| flag.len() == 2)
        .filter_map(|flag| flag.chars().nth(1))
        .collect();
    let mut index = 1;
    while let Some(word) = cmd.argv.get(index) {
        if word == "--" {
            match cmd.argv.get(index + 1) {
                Some(script) if is_stdin_path(script) => {
                    analysis.hazard(HazardKind::StdinProgram, &format!("{program} {script}"));
                }
                Some(_) => {}
                None => analysis.hazard(
                    HazardKind::StdinProgram,
                    &format!("{program} reading code from stdin"),
                ),
            }
            return;
        }
        if stop.contains(&word.as_str()) {
            // `python3 -m code` (and other REPL modules) read their
            // program from stdin.
            if let Some(module) = cmd.argv.get(index + 1)
                && STDIN_MODULES.contains(&module.as_str())
            {
                analysis.hazard(HazardKind::StdinProgram, &format!("{program} -m {module}"));
            }
            return;
        }
        if is_stdin_path(word) {
            analysis.hazard(HazardKind::StdinProgram, &format!("{program} {word}"));
            return;
        }
        if code.iter().any(|flag| {
            word == flag || (flag.starts_with("--") && word.starts_with(&format!("{flag}=")))
        }) || (word.starts_with('-')
            && !word.starts_with("--")
            && word[1..].chars().any(|c| letters.contains(&c)))
        {
            analysis.hazard(HazardKind::InlineCode, &format!("{program} {word}"));
            return;
        }
        if !word.starts_with('-') {
            return;
        }
        if let Some((flag, value)) = word.split_once('=')
            && valued.contains(&flag)
            && is_stdin_path(value)
        {
            analysis.hazard(HazardKind::StdinProgram, &format!("{program} {word}"));
            return;
        }
        if valued.contains(&word.as_str()) {
            // `node -r /dev/stdin app.js`, `ruby -r /dev/fd/0 x.rb`.
            if let Some(value) = cmd.argv.get(index + 1).filter(|w| is_stdin_path(w)) {
                analysis.hazard(
                    HazardKind::StdinProgram,
                    &format!("{program} {word} {value}"),
                );
                return;
            }
            index += 2;
        } else {
            index += 1;
        }
    }
    let asks_about_itself = cmd.argv[1..]
        .iter()
        .any(|w| matches!(w.as_str(), "--version" | "-V" | "--help" | "-h" | "-v"));
    if asks_about_itself {
        return;
    }
    analysis.hazard(
        HazardKind::InlineCode,
        &format!("{program} reading code from stdin"),
    );
}

/// Python modules that read their program from stdin (REPLs).
const STDIN_MODULES: &[&str] = &[
    "code", "asyncio", "pdb", "IPython", "ptpython", "bpython", "idlelib", "pyrepl", "_pyrepl",
];

/// True if and only if a script operand names stdin or an inherited
/// descriptor rather than a file: `-`, `/dev/stdin`, `/dev/fd/N`,
/// `/proc/self/fd/N`, `/proc/PID/fd/N`, `/dev/tty` (also with `//`, `./`
/// or `..` in them). Such a program is whatever the here-string, pipe or
/// redirection feeds it, which policy does not read as code.
pub(crate) fn is_stdin_path(word: &str) -> bool {
    if word == "-" {
        return true;
    }
    let mut parts: Vec<&str> = Vec::new();
    for part in word.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            part => parts.push(part),
        }
    }
    matches!(
        parts.as_slice(),
        [.., "dev", "stdin" | "tty" | "console"] | [.., "fd", _] | [.., "dev", "pts", _]
    )
}

/// awk programs may run commands: `system(…)`, `print | "cmd"`,
/// `"cmd" | getline`. Every program text is looked at (`-e`/`--source`,
/// several of them, or the first operand); gawk's `-l`/`--load` loads a
/// shared library. A program file (`-f`) is like `python x.py`: what it
/// runs is the operator's choice when they allow it.
pub(super) fn awk(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let mut programs: Vec<&str> = Vec::new();
    let mut from_file = false;
    let mut index = 1;
    while let Some(word) = argv.get(index) {
        index += 1;
        match word.as_str() {
            "-f" | "--file" | "-E" | "--exec" | "-i" | "--include" => {
                from_file = true;
                if let Some(file) = argv.get(index).filter(|w| is_stdin_path(w)) {
                    analysis.hazard(HazardKind::StdinProgram, &format!("awk {word} {file}"));
                }
                index += 1;
            }
            "-e" | "--source" => {
                programs.extend(argv.get(index).map(String::as_str));
                index += 1;
            }
            "-v" | "-F" | "--assign" | "--field-separator" => index += 1,
            "-l" | "--load" => {
                analysis.hazard(
                    HazardKind::InlineCode,
                    &format!("awk {word} (loads a library)"),
                );
                index += 1;
            }
            "--" => {
                if programs.is_empty() && !from_file {
                    programs.extend(argv.get(index).map(String::as_str));
                }
                break;
            }
            _ if word.starts_with("--source=") => programs.push(&word["--source=".len()..]),
            _ if word.starts_with("--load=") || (word.starts_with("-l") && word.len() > 2) => {
                analysis.hazard(
                    HazardKind::InlineCode,
                    &format!("awk {word} (loads a library)"),
                );
            }
            _ if word.starts_with("-e") && word.len() > 2 => programs.push(&word[2..]),
            _ if word.starts_with("-f") && word.len() > 2 => {
                from_file = true;
                if is_stdin_path(&word[2..]) {
                    analysis.hazard(HazardKind::StdinProgram, &format!("awk {word}"));
                }
            }
            _ if word.starts_with("--file=")
                || word.starts_with("--exec=")
                || word.starts_with("--include=") =>
            {
                from_file = true;
                if word.split_once('=').is_some_and(|(_, v)| is_stdin_path(v)) {
                    analysis.hazard(HazardKind::StdinProgram, &format!("awk {word}"));
                }
            }
            _ if word.starts_with('-') && word.len() > 1 => {}
            _ => {
                if programs.is_empty() && !from_file {
                    programs.push(word);
                }
                break;
            }
        }
    }
    if let Some(program) = programs
        .into_iter()
        .find(|program| program.contains("system") || program.contains('|'))
    {
        analysis.hazard(HazardKind::InlineCode, program);
    }
}

/// What every file `find` hands to `-exec` starts with: `./` under
/// `-execdir`, else its one start point when that is literal (`.` when
/// none is given).
fn found_prefix(cmd: &SimpleCommand, in_dir: bool) -> Option<String> {
    if in_dir {
        return Some("./".to_owned());
    }
    let argv = &cmd.argv;
    let offset = cmd.assignments.len();
    let mut index = 1;
    while argv
        .get(index)
        .is_some_and(|w| matches!(w.as_str(), "-H" | "-L" | "-P"))
    {
        index += 1;
    }
    if argv
        .get(index)
        .is_some_and(|w| w.starts_with("-D") || w.starts_with("-O"))
    {
        return None;
    }
    let starts: Vec<usize> = (index..argv.len())
        .take_while(|&at| !argv[at].starts_with(['-', '(', '!', ')', ',']))
        .collect();
    match starts.as_slice() {
        [] => Some(".".to_owned()),
        [at] => {
            let literal = cmd
                .shapes
                .get(offset + at)
                .is_some_and(|shape| shape.iter().all(|seg| matches!(seg, Seg::Lit(_))));
            literal.then(|| argv[*at].clone())
        }
        _ => None,
    }
}

/// `find … -exec cmd {} ;` (and `-execdir`, `-ok`, `-okdir`).
pub(super) fn find(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let argv = &cmd.argv;
    let mut index = 1;
    while index < argv.len() {
        let word = &argv[index];
        index += 1;
        if matches!(word.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
            analysis.hazard(HazardKind::RunsProgram, &format!("find {word}"));
            let start = index;
            while argv.get(index).is_some_and(|w| w != ";" && w != "+") {
                index += 1;
            }
            if index > start {
                analysis.inner_words(cmd, argv[start..index].to_vec(), start, "find -exec");
                if let Some(Inner::Command(inner)) = analysis.inner.last_mut() {
                    inner.placeholder = Some(Placeholder {
                        pattern: "{}".to_owned(),
                        prefix: found_prefix(cmd, word.ends_with("dir")),
                    });
                }
            }
        }
    }
}
