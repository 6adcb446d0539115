//! Programs whose arguments may hide code: interpreters with inline code
//! (`python -c`, `perl -e`, `node -e`), awk programs that run commands,
//! sed scripts that run commands or touch files, `find -exec`.

use super::HazardKind;
use super::SimpleCommand;
use super::runners::Analysis;

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
        if stop.contains(&word.as_str()) || word == "--" {
            return;
        }
        if word == "-" {
            break;
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
        index += if valued.contains(&word.as_str()) {
            2
        } else {
            1
        };
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

/// awk programs may run commands: `system(…)`, `print | "cmd"`,
/// `"cmd" | getline`.
pub(super) fn awk(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let mut index = 1;
    while let Some(word) = cmd.argv.get(index) {
        match word.as_str() {
            "-f" | "--file" => return,
            "-v" | "-F" | "--assign" | "--field-separator" => index += 2,
            "--" => {
                index += 1;
                break;
            }
            _ if word.starts_with('-') && word.len() > 1 => index += 1,
            _ => break,
        }
    }
    if let Some(program) = cmd.argv.get(index)
        && (program.contains("system") || program.contains('|'))
    {
        analysis.hazard(HazardKind::InlineCode, program);
    }
}

/// sed scripts may run commands (`e`, the `s///e` flag) or read and write
/// any file (`r`, `R`, `w`, `W`, the `s///w` flag).
pub(super) fn sed(cmd: &SimpleCommand, analysis: &mut Analysis) {
    let mut scripts: Vec<&str> = Vec::new();
    let mut from_option = false;
    let mut operand = None;
    let mut index = 1;
    while let Some(word) = cmd.argv.get(index) {
        if matches!(word.as_str(), "-e" | "--expression") {
            scripts.extend(cmd.argv.get(index + 1).map(String::as_str));
            from_option = true;
            index += 2;
        } else if let Some(script) = word.strip_prefix("--expression=") {
            scripts.push(script);
            from_option = true;
            index += 1;
        } else if matches!(word.as_str(), "-f" | "--file") {
            from_option = true;
            index += 2;
        } else if matches!(word.as_str(), "-l" | "--line-length") {
            index += 2;
        } else if word.starts_with('-') && word.len() > 1 {
            index += 1;
        } else {
            operand.get_or_insert(word.as_str());
            index += 1;
        }
    }
    if !from_option {
        scripts.extend(operand);
    }
    if let Some(script) = scripts
        .into_iter()
        .find(|script| sed_runs_or_touches_files(script))
    {
        analysis.hazard(HazardKind::InlineCode, script);
    }
}

fn sed_runs_or_touches_files(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    for (index, &c) in chars.iter().enumerate() {
        let before = chars[..index]
            .iter()
            .rev()
            .find(|c| !c.is_whitespace() && **c != '!');
        let command_position = before.is_none_or(|b| {
            matches!(b, ';' | '{' | '}' | '\n' | '/' | '$' | ',') || b.is_ascii_digit()
        });
        if !command_position {
            continue;
        }
        let next = chars.get(index + 1);
        match c {
            'e' if next.is_none_or(|n| n.is_whitespace() || *n == ';' || *n == '}') => {
                return true;
            }
            'r' | 'R' | 'w' | 'W' if next.is_some_and(|n| n.is_whitespace()) => return true,
            's' if substitute_flags(&chars[index + 1..])
                .is_some_and(|flags| flags.contains('e') || flags.contains('w')) =>
            {
                return true;
            }
            _ => {}
        }
    }
    false
}

/// The flags of an `s` command whose delimiter starts `rest`.
fn substitute_flags(rest: &[char]) -> Option<String> {
    let delimiter = *rest.first()?;
    if delimiter.is_alphanumeric() || delimiter.is_whitespace() || delimiter == '\\' {
        return None;
    }
    let mut fields = 0;
    let mut index = 1;
    while fields < 2 {
        match rest.get(index)? {
            '\\' => index += 2,
            c if *c == delimiter => {
                fields += 1;
                index += 1;
            }
            _ => index += 1,
        }
    }
    Some(
        rest[index..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric())
            .collect(),
    )
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
            }
        }
    }
}
