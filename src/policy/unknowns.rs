//! Deciding under unknowns where there is something to dodge (issue 33
//! item 2; docs/policy.md, "Unknowns under deny rules").
//!
//! Under a full wildcard with the full sandbox in force, while a `deny`
//! or `ask` rule names `run_shell` commands, a command whose parts hold
//! words the parser cannot see (a `$VAR`, a `$(…)`, a loop variable, a
//! glob, xargs' input, `find -exec`'s `{}`) is allowed only if:
//!
//! - every hazard is of a kind whose inside the analysis reads
//!   ([`tolerable`]): substitutions (their commands are parts of their
//!   own), variables (not arithmetic on names: `$((x))`, `${a[i]}`,
//!   `${!x}` evaluate a value `a[$(…)]` as code), control flow, subshells, here-documents, and the
//!   wrappers whose command is a part of its own (`xargs` without `-I`,
//!   `find -exec`, `timeout`, `nice`, `env` …, `bash -c 'LITERAL'`);
//! - no part could match a deny or ask rule for any value of its
//!   unknowns: each rule's glob is intersected with the part's text, its
//!   unknowns standing for any text ([`intersects`]);
//! - an unknown never sits where it could name the program, nor in the
//!   arguments of a program that has options that run code (`sort $X` may
//!   be `--compress-program=…`, `python3 "$f"` may be `-c …`): only the
//!   programs of [`OPTIONLESS`] take unknown arguments.
//!
//! Inline code, `eval`, a shell reading stdin, a script file stay for
//! `policy.opaque` (docs/policy.md, "Opaque programs").

use super::shell::{Hazard, HazardKind, Seg, SimpleCommand};

mod operands;
use operands::{operand_problem, placeholder_tokens};

/// Programs with no option that runs a program, loads code, or evaluates
/// an array subscript: an unknown argument can only be a file name or a
/// harmless option.
pub(crate) const OPTIONLESS: &[&str] = &[
    "echo",
    "cat",
    "ls",
    "wc",
    "head",
    "tail",
    "grep",
    "egrep",
    "fgrep",
    "cut",
    "tr",
    "uniq",
    "comm",
    "paste",
    "nl",
    "fold",
    "fmt",
    "column",
    "diff",
    "cmp",
    "stat",
    "file",
    "du",
    "df",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "mkdir",
    "rmdir",
    "touch",
    "cp",
    "mv",
    "ln",
    "rm",
    "chmod",
    "true",
    "false",
    "pwd",
    "date",
    "id",
    "whoami",
    "uname",
    "tee",
    "seq",
    "sleep",
    "cd",
    "jq",
    "sha256sum",
    "sha1sum",
    "md5sum",
    "base64",
    "od",
    "xxd",
    "hexdump",
    "tac",
    "rev",
    "mktemp",
    "tree",
    "kill", // The words of a loop's or a `case`'s head are data.
    "for",
    "select",
    "case",
];

/// Wrappers whose command the analysis reads as a part of its own.
const READ_WRAPPERS: &[&str] = &[
    "xargs",
    "timeout",
    "nice",
    "nohup",
    "stdbuf",
    "env",
    "command",
    "ionice",
    "setsid",
    "find -exec",
    "find -execdir",
];

/// True if and only if the analysis reads what `hazard` hides: its
/// commands are parts of their own, its unknowns are checked per part.
pub(crate) fn tolerable(hazard: &Hazard) -> bool {
    match hazard.kind {
        HazardKind::CommandSubstitution
        | HazardKind::Backticks
        | HazardKind::ProcessSubstitution
        | HazardKind::Variable
        | HazardKind::GlobMayBeOption
        | HazardKind::Subshell
        | HazardKind::BraceGroup
        | HazardKind::HereDoc
        | HazardKind::BraceExpansion
        | HazardKind::RedirectOutside
        | HazardKind::UnknownDirectory
        | HazardKind::NamesProtectedPath => true,
        // `trap 'CODE' SIG`: the code is parsed into parts of its own.
        HazardKind::ChangesShell => hazard.text == "trap",
        // A function makes a later word run its body; `coproc` runs its
        // command under another name.
        HazardKind::ControlFlow => !matches!(hazard.text.as_str(), "function" | "coproc"),
        // `xargs -I X … X …` puts its input anywhere, the program too:
        // its command's words hold an unknown where `X` stood.
        HazardKind::RunsProgram => READ_WRAPPERS.contains(&hazard.text.as_str()),
        // `bash -c 'LITERAL'`: its commands are parts; `bash -c "$X"`
        // has an unknown command word, refused per part. Other shells
        // read some words otherwise than bash (`$"x"` in dash).
        // `sh -c 'LITERAL'` too when the code reads alike in both (else
        // the runners add a second, intolerable hazard).
        HazardKind::NestedShell => matches!(hazard.text.as_str(), "bash -c" | "sh -c" | "dash -c"),
        _ => false,
    }
}

/// A piece of a pattern: a character, or any text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok {
    Char(char),
    /// `?`, a `[…]` class: one character.
    One,
    /// `*` or an unknown: any text.
    Star,
}

/// Why `part` may not run under deny or ask rules, if it may not:
/// `rule_globs` are the command globs of every deny and ask rule on
/// `run_shell`, with the rule's text.
pub(crate) fn problem<'a>(
    part: &SimpleCommand,
    rule_globs: impl IntoIterator<Item = (&'a str, String)>,
) -> Option<String> {
    let (views, unknown) = views(part);
    if !unknown {
        return None;
    }
    let program_known = part
        .shapes
        .get(part.assignments.len())
        .is_none_or(|shape| shape.iter().all(|seg| matches!(seg, Seg::Lit(_))))
        && part.argv.first().is_some_and(|word| {
            !(word == "{}"
                && part
                    .via
                    .as_deref()
                    .is_some_and(|via| via.starts_with("find")))
                && !(word.contains('{') && (word.contains(',') || word.contains("..")))
        });
    let text = part.text();
    // `x=$(…)` alone: an assignment runs nothing (a variable that picks
    // a program is a hazard of its own).
    if part.argv.is_empty() {
        return None;
    }
    if !program_known {
        return Some(format!(
            "`{text}`: an unknown may name the program, which a deny or ask rule may name"
        ));
    }
    for (glob, rule) in rule_globs {
        for alternative in glob_alternatives(glob) {
            if views.iter().any(|view| intersects(&alternative, view)) {
                return Some(format!(
                    "`{text}` could match `{rule}` for some value of its unknowns"
                ));
            }
        }
    }
    let program = part.program().unwrap_or_default();
    if OPTIONLESS.contains(&program) {
        return None;
    }
    operand_problem(part, program).map(|why| format!("`{text}`: {why}"))
}

/// The texts deny and ask rules are tried on, as patterns, and whether
/// the part holds an unknown.
fn views(part: &SimpleCommand) -> (Vec<Vec<Tok>>, bool) {
    let mut unknown = false;
    let found = part
        .via
        .as_deref()
        .is_some_and(|via| via.starts_with("find"));
    let words: Vec<Vec<Tok>> = part
        .assignments
        .iter()
        .chain(&part.argv)
        .enumerate()
        .map(|(index, word)| {
            let shape = part
                .shapes
                .get(index)
                .filter(|_| part.shapes.len() == part.assignments.len() + part.argv.len());
            let argv_index = index.checked_sub(part.assignments.len());
            // `find -exec … {} …`: the file found.
            let is_found = argv_index.is_some() && word == "{}" && found;
            // `{a,b}`, `{1..5}`: brace expansion makes other words.
            let braced = word.contains('{') && (word.contains(',') || word.contains(".."));
            if let Some(tokens) = argv_index.and_then(|_| placeholder_tokens(part, word)) {
                unknown = true;
                return tokens;
            }
            match shape {
                _ if is_found || braced => {
                    unknown = true;
                    vec![Tok::Star]
                }
                Some(shape) => shape
                    .iter()
                    .flat_map(|seg| match seg {
                        Seg::Lit(text) => text.chars().map(Tok::Char).collect::<Vec<_>>(),
                        // `$?`, `$#`, `$$`, `$!`: a number, never an option.
                        Seg::Var(name) if matches!(name.as_str(), "?" | "#" | "$" | "!") => {
                            vec![Tok::Char('0')]
                        }
                        Seg::Glob(_) | Seg::Var(_) => {
                            unknown = true;
                            vec![Tok::Star]
                        }
                    })
                    .collect(),
                None if word.contains(['$', '`', '*', '?', '[']) => {
                    unknown = true;
                    vec![Tok::Star]
                }
                None => word.chars().map(Tok::Char).collect(),
            }
        })
        .collect();
    let mut argv_words: Vec<Vec<Tok>> = words[part.assignments.len()..].to_vec();
    if part.via.as_deref() == Some("xargs") {
        // Its input is appended to the command.
        unknown = true;
        argv_words.push(vec![Tok::Star]);
    }
    let mut all_words = words[..part.assignments.len()].to_vec();
    all_words.extend(argv_words.iter().cloned());
    let mut views = vec![join(&all_words), join(&argv_words)];
    if let Some(first) = argv_words.first()
        && let Some(slash) = first.iter().rposition(|tok| *tok == Tok::Char('/'))
    {
        let mut stripped = argv_words.clone();
        stripped[0] = first[slash + 1..].to_vec();
        views.push(join(&stripped));
    }
    (views, unknown)
}

fn join(words: &[Vec<Tok>]) -> Vec<Tok> {
    let mut out = Vec::new();
    for (index, word) in words.iter().enumerate() {
        if index > 0 {
            out.push(Tok::Char(' '));
        }
        out.extend(word.iter().copied());
    }
    out
}

/// A command glob as patterns: `{a,b}` alternatives expanded (one level;
/// a nested one makes the glob match anything), `\x` a literal `x`.
fn glob_alternatives(glob: &str) -> Vec<Vec<Tok>> {
    let Some(open) = glob.find('{') else {
        return vec![glob_tokens(glob)];
    };
    let Some(close) = glob[open..].find('}').map(|at| open + at) else {
        return vec![vec![Tok::Star]];
    };
    let inner = &glob[open + 1..close];
    if inner.contains('{') {
        return vec![vec![Tok::Star]];
    }
    inner
        .split(',')
        .flat_map(|choice| {
            glob_alternatives(&format!("{}{choice}{}", &glob[..open], &glob[close + 1..]))
        })
        .collect()
}

fn glob_tokens(glob: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => {
                if out.last() != Some(&Tok::Star) {
                    out.push(Tok::Star);
                }
            }
            '?' => out.push(Tok::One),
            '[' => {
                // A class: one character (which one does not matter for
                // an over-approximation).
                for c in chars.by_ref() {
                    if c == ']' {
                        break;
                    }
                }
                out.push(Tok::One);
            }
            '\\' => out.push(Tok::Char(chars.next().unwrap_or('\\'))),
            c => out.push(Tok::Char(c)),
        }
    }
    out
}

/// True if and only if some text matches both patterns: a search over
/// pairs of positions, each step consuming one character in both.
fn intersects(a: &[Tok], b: &[Tok]) -> bool {
    let mut seen = vec![false; (a.len() + 1) * (b.len() + 1)];
    let mut stack = vec![(0usize, 0usize)];
    while let Some((i, j)) = stack.pop() {
        let key = i * (b.len() + 1) + j;
        if seen[key] {
            continue;
        }
        seen[key] = true;
        if i == a.len() && j == b.len() {
            return true;
        }
        // A star may match nothing.
        if a.get(i) == Some(&Tok::Star) {
            stack.push((i + 1, j));
        }
        if b.get(j) == Some(&Tok::Star) {
            stack.push((i, j + 1));
        }
        let (Some(x), Some(y)) = (a.get(i), b.get(j)) else {
            continue;
        };
        let compatible = match (x, y) {
            (Tok::Char(p), Tok::Char(q)) => p == q,
            _ => true,
        };
        if compatible {
            let next_i = if *x == Tok::Star { i } else { i + 1 };
            let next_j = if *y == Tok::Star { j } else { j + 1 };
            if (next_i, next_j) != (i, j) {
                stack.push((next_i, next_j));
            } else {
                // Two stars eat a character together: either may stop.
                stack.push((i + 1, j));
                stack.push((i, j + 1));
            }
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn literal(text: &str) -> Vec<Tok> {
        text.chars()
            .map(|c| if c == '*' { Tok::Star } else { Tok::Char(c) })
            .collect()
    }

    #[test]
    fn globs_meet_patterns_with_unknowns() {
        let meets = |glob: &str, pattern: &str| {
            glob_alternatives(glob)
                .iter()
                .any(|g| intersects(g, &literal(pattern)))
        };
        assert!(meets("git push*", "git *"));
        assert!(meets("git push*", "git*"));
        assert!(!meets("git push*", "echo *"));
        assert!(meets("rm -rf*", "rm *"));
        assert!(!meets("rm -rf*", "rmdir *"));
        assert!(!meets("curl*", "wc -l *"));
        assert!(meets("*curl*", "wc -l *"));
        assert!(meets("{curl,wget}*", "wget *"));
        assert!(!meets("{curl,wget} x", "wget y*"));
        assert!(meets("git push --force", "git push --force"));
        assert!(!meets("git push --force", "git push --forc"));
        assert!(meets("git p?sh*", "git *h"));
        assert!(meets("git [pq]ush*", "git *"));
        assert!(meets("*", ""));
        assert!(!meets("a*b", "c*"));
    }
}
