//! Shells given code: `-c`, stdin, and what `sh` reads otherwise than bash.

use super::{Analysis, HazardKind, SimpleCommand, programs};

/// True if and only if `sh` or `dash` runs no command in `code` that
/// bash would not: none of the syntax where they part ways (`((` is a
/// subshell to dash and arithmetic to bash; dash expands aliases) and
/// none where bash's reading is the one the analysis has.
pub(super) fn read_alike(code: &str) -> bool {
    const APART: &[&str] = &[
        "((", "$'", "$\"", "[[", "<(", ">(", "|&", "&>", "<<<", "function", "select", "coproc",
        "alias", "{", "}",
    ];
    !APART.iter().any(|syntax| code.contains(syntax))
}

pub(super) fn shell(cmd: &SimpleCommand, program: &str, analysis: &mut Analysis) {
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
