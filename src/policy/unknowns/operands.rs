//! Unknown arguments: which programs take them, and only as operands no option starts.

use super::Tok;
use crate::policy::shell::{SHELLS, Seg, SimpleCommand};

/// Programs and builtins whose operands are code, a program, a
/// subscript the shell evaluates, or expressions (`find . "$X"` may be
/// `-exec …`): an unknown anywhere in their arguments is refused.
pub(super) const CODE_OPERANDS: &[&str] = &[
    // Builtins that evaluate array subscripts or define what runs.
    "printf",
    "test",
    "[",
    "[[",
    "let",
    "read",
    "unset",
    "wait",
    "getopts",
    "declare",
    "typeset",
    "local",
    "export",
    "readonly",
    "mapfile",
    "readarray",
    "compgen",
    "complete",
    "eval",
    "source",
    ".",
    "trap",
    "alias",
    "exec",
    "command",
    "builtin",
    "enable",
    "hash",
    "type",
    "shopt",
    "set",
    "bind",
    "fc",
    "history",
    "ulimit",
    "umask",
    "caller",
    // Programs whose operands are scripts, expressions or remote commands.
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "perl",
    "ruby",
    "php",
    "lua",
    "luajit",
    "node",
    "nodejs",
    "bun",
    "deno",
    "tsx",
    "ts-node",
    "Rscript",
    "julia",
    "tclsh",
    "wish",
    "expect",
    "guile",
    "sbcl",
    "find",
    "tar",
    "ps",
    "ssh",
    "scp",
    "sftp",
    "slogin",
    "rsync",
    "make",
    "gmake",
    "dc",
    "bc",
    "m4",
    "jq",
    "yq",
    "gdb",
    "lldb",
    "busybox",
    "toybox",
    "sqlite3",
    "mysql",
    "psql",
    "redis-cli",
    "osascript",
    "xargs",
    "parallel",
    "watch",
    "at",
    "batch",
    "crontab",
    "git",
    "sed",
];

/// Why an unknown argument of `program` (no [`super::OPTIONLESS`] one) might
/// make it run something a deny or ask rule names, if it might.
///
/// Every unknown must be an operand that cannot turn into an option or
/// into several words: a quoted expansion (no word splitting) after a
/// literal that starts the word with a character no option starts with
/// (`"./$f"`, `src/*.rs`, `"$HOME/x"`, find's `{}` under a literal start
/// point). The first argument must be literal: it may pick a subcommand
/// or an alias (`cargo x$Y`). Programs whose operands are code or
/// expressions ([`CODE_OPERANDS`], shells, interpreters) take none;
/// `git` and `sed` take them only behind a literal subcommand or script.
pub(super) fn operand_problem(part: &SimpleCommand, program: &str) -> Option<String> {
    let family = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let family = if family.is_empty() { program } else { family };
    let unknown_words: Vec<usize> = (1..part.argv.len())
        .filter(|&index| word_unknown(part, index))
        .collect();
    let option = || {
        Some(format!(
            "an unknown argument of `{program}` may become an option that runs a program or code"
        ))
    };
    let code = || {
        Some(format!(
            "an unknown argument of `{program}` may become code, a program or an expression it runs"
        ))
    };
    if part.via.as_deref() == Some("xargs") {
        // Its input is appended: any words at all.
        return option();
    }
    let shell_like = SHELLS.contains(&family) || family == "python" || family == "pypy";
    let gated = matches!(family, "git" | "sed");
    if matches!(program, "test" | "[") {
        return (!plain_test(part)).then(code).flatten();
    }
    if matches!(program, "export" | "readonly" | "local") {
        return (!plain_assignments(part)).then(code).flatten();
    }
    let code_operands = CODE_OPERANDS.contains(&program) || CODE_OPERANDS.contains(&family);
    if shell_like || (code_operands && !gated) {
        return code();
    }
    let whole_first = part.assignments.len() + 1;
    if unknown_words.first() == Some(&1) && !path_operand(part, whole_first) {
        return Some(format!(
            "the first argument of `{program}` is unknown: it may pick a subcommand or an alias"
        ));
    }
    if (family == "sed" && !sed_script_literal(part))
        || (family == "git" && !git_subcommand_literal(part))
    {
        return code();
    }
    if unknown_words
        .iter()
        .any(|&index| !operand_only(part, part.assignments.len() + index))
    {
        return option();
    }
    None
}

/// `test`/`[` whose unknowns are only string or file operands: `[ -z
/// "$X" ]`, `[ ! -f "$f" ]`, `[ "$a" = "$b" ]`. With two words the first
/// is the operator; with three the middle one is, and it takes priority
/// (POSIX), so no unknown becomes `-v` (which evaluates a subscript) or
/// an arithmetic operand (`-eq` evaluates names).
pub(super) fn plain_test(part: &SimpleCommand) -> bool {
    const UNARY: &[&str] = &[
        "-z", "-n", "-e", "-f", "-d", "-s", "-r", "-w", "-x", "-L", "-h", "-p", "-S", "-b", "-c",
        "-g", "-u", "-k", "-O", "-G", "-N",
    ];
    const BINARY: &[&str] = &["=", "==", "!=", "<", ">", "-nt", "-ot", "-ef"];
    let offset = part.assignments.len();
    let mut words: Vec<usize> = (1..part.argv.len()).collect();
    if part.argv[0] == "[" {
        if words
            .last()
            .is_none_or(|&last| part.argv[last] != "]" || word_unknown(part, last))
        {
            return false;
        }
        words.pop();
    }
    if words
        .first()
        .is_some_and(|&first| part.argv[first] == "!" && !word_unknown(part, first))
    {
        words.remove(0);
    }
    let literal = |index: usize| !word_unknown(part, index);
    let single = |index: usize| !part.splits.get(offset + index).copied().unwrap_or(true);
    match words.as_slice() {
        [op, operand] => {
            literal(*op) && UNARY.contains(&part.argv[*op].as_str()) && single(*operand)
        }
        [left, op, right] => {
            literal(*op)
                && BINARY.contains(&part.argv[*op].as_str())
                && single(*left)
                && single(*right)
        }
        _ => false,
    }
}

/// `export`/`readonly`/`local` whose every word is `NAME=value` with a
/// literal name (no option, no subscript): the value is a string, never
/// evaluated. Names that change which program runs are a hazard of their
/// own ([`super::shell`]'s hijack list).
pub(super) fn plain_assignments(part: &SimpleCommand) -> bool {
    (1..part.argv.len()).all(|index| {
        let Some(Some(Seg::Lit(head))) =
            shape_of(part, part.assignments.len() + index).map(|s| s.first())
        else {
            return false;
        };
        head.split_once('=').is_some_and(|(name, _)| {
            name.chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
    })
}

/// `word` as a pattern when it holds the part's placeholder (`xargs -I
/// R`, find's `{}`, inside a word too: GNU find replaces `-r{}`): what
/// the wrapper puts there is its known prefix, then any text.
pub(super) fn placeholder_tokens(part: &SimpleCommand, word: &str) -> Option<Vec<Tok>> {
    let placeholder = part.placeholder.as_ref()?;
    if !word.contains(placeholder.pattern.as_str()) {
        return None;
    }
    let mut tokens = Vec::new();
    for (at, piece) in word.split(placeholder.pattern.as_str()).enumerate() {
        if at > 0 {
            tokens.extend(
                placeholder
                    .prefix
                    .iter()
                    .flat_map(|p| p.chars().map(Tok::Char)),
            );
            tokens.push(Tok::Star);
        }
        tokens.extend(piece.chars().map(Tok::Char));
    }
    Some(tokens)
}

/// True if and only if argv word `index` holds an unknown.
pub(super) fn word_unknown(part: &SimpleCommand, index: usize) -> bool {
    let word = &part.argv[index];
    if placeholder_tokens(part, word).is_some() {
        return true;
    }
    let whole = part.assignments.len() + index;
    let found = word == "{}"
        && part
            .via
            .as_deref()
            .is_some_and(|via| via.starts_with("find"));
    let braced = word.contains('{') && (word.contains(',') || word.contains(".."));
    if found || braced {
        return true;
    }
    match shape_of(part, whole) {
        Some(shape) => shape.iter().any(|seg| match seg {
            Seg::Lit(_) => false,
            Seg::Var(name) => !matches!(name.as_str(), "?" | "#" | "$" | "!"),
            Seg::Glob(_) => true,
        }),
        None => word.contains(['$', '`', '*', '?', '[']),
    }
}

pub(super) fn shape_of(part: &SimpleCommand, whole: usize) -> Option<&Vec<Seg>> {
    part.shapes
        .get(whole)
        .filter(|_| part.shapes.len() == part.assignments.len() + part.argv.len())
}

/// True if and only if word `whole` (counting assignments) is one word
/// that no option starts: no unquoted expansion in it, and it starts with
/// a literal letter, digit, `.`, `/`, `_`, `~`, or `$HOME`/`$PWD` (an
/// absolute path).
pub(super) fn operand_only(part: &SimpleCommand, whole: usize) -> bool {
    if part.splits.get(whole).copied().unwrap_or(true) {
        return false;
    }
    if let Some(index) = whole.checked_sub(part.assignments.len())
        && let Some(tokens) = placeholder_tokens(part, &part.argv[index])
    {
        return match tokens.first() {
            Some(Tok::Char(c)) => c.is_alphanumeric() || "./_~".contains(*c),
            _ => false,
        };
    }
    match shape_of(part, whole).and_then(|shape| shape.first()) {
        Some(Seg::Lit(text)) => text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || "./_~".contains(c)),
        Some(Seg::Var(name)) => matches!(name.as_str(), "HOME" | "PWD"),
        _ => false,
    }
}

/// True if and only if word `whole` is an [`operand_only`] path: it
/// starts with a literal holding a `/`, with `$HOME`/`$PWD`, or with the
/// start point of a `find` (no subcommand or alias has a `/`).
pub(super) fn path_operand(part: &SimpleCommand, whole: usize) -> bool {
    if !operand_only(part, whole) {
        return false;
    }
    let Some(index) = whole.checked_sub(part.assignments.len()) else {
        return false;
    };
    let word = &part.argv[index];
    if let Some(placeholder) = &part.placeholder
        && word.starts_with(placeholder.pattern.as_str())
    {
        return placeholder.prefix.is_some();
    }
    match shape_of(part, whole).and_then(|shape| shape.first()) {
        Some(Seg::Lit(text)) => text.contains('/'),
        Some(Seg::Var(_)) => true,
        _ => false,
    }
}

/// `git`: its global options (`-c alias.x=!…`, `--exec-path`) and its
/// subcommand are literal.
pub(super) fn git_subcommand_literal(part: &SimpleCommand) -> bool {
    let mut index = 1;
    while index < part.argv.len() {
        if word_unknown(part, index) {
            return false;
        }
        let word = part.argv[index].as_str();
        if matches!(
            word,
            "-C" | "-c"
                | "--git-dir"
                | "--work-tree"
                | "--namespace"
                | "--exec-path"
                | "--config-env"
        ) {
            if part.argv.get(index + 1).is_none() || word_unknown(part, index + 1) {
                return false;
            }
            index += 2;
            continue;
        }
        if !word.starts_with('-') {
            return true;
        }
        index += 1;
    }
    false
}

/// `sed`: the script is literal, so unknown operands are files: a literal
/// `-e`/`-f`/`--expression`/`--file` gives it, else the first word that is
/// no option (`-l N` skipped) is it, and must come before every unknown.
pub(super) fn sed_script_literal(part: &SimpleCommand) -> bool {
    let mut index = 1;
    while index < part.argv.len() {
        if word_unknown(part, index) {
            return false;
        }
        let word = part.argv[index].as_str();
        if matches!(word, "-e" | "-f" | "--expression" | "--file") {
            return part.argv.get(index + 1).is_some() && !word_unknown(part, index + 1);
        }
        if word.starts_with("--expression=") || word.starts_with("--file=") {
            return true;
        }
        if word == "-l" {
            index += 2;
            continue;
        }
        if word == "--" {
            return part
                .argv
                .get(index + 1)
                .is_some_and(|_| !word_unknown(part, index + 1));
        }
        if !word.starts_with('-') {
            return true;
        }
        index += 1;
    }
    false
}
