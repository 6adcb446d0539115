//! A small POSIX-ish shell parser for policy (docs/security.md S4). It does not
//! run anything; it answers "which programs would this string start, with
//! which words, writing where?" and, for everything it cannot answer
//! statically, records a [`Hazard`]. A command with any hazard never
//! matches an `allow` rule, so the parser fails closed: what it does not
//! understand becomes a hazard, never a silently dropped word.
//!
//! Why our own: `conch-parser` is unmaintained, `yash-syntax` is GPL, and
//! `brush-parser` (a full bash grammar, ~7k lines over `peg`, `cached`,
//! `bon`) would still leave the policy-specific walk (wrappers, nested
//! strings, guard shapes) to write. Policy needs a much smaller language,
//! and a parser whose every gap is a hazard.
//!
//! What it understands: simple commands joined by `;`, `&&`, `||`, `|`,
//! `|&`, `&` and newlines; single quotes, double quotes, backslash escapes
//! and line continuations; `#` comments; `NAME=value` prefixes;
//! redirections (`<`, `>`, `>>`, `>|`, `<>`, `<&`, `>&`, `&>`, `&>>`,
//! `<<`, `<<-`, `<<<`, with an fd number). What it flags (see
//! [`HazardKind`]): substitutions of every kind (their contents are parsed
//! too, as nested parts, so deny rules and guards still see them),
//! variables, brace expansion, globs that may expand to an option,
//! subshells, brace groups, control flow, here-docs, and programs that run
//! other programs (see `runners.rs`).
//!
//! Nested commands (inside `$(…)`, backticks, `<(…)`, `( … )`, `bash -c`,
//! `eval`, and the inner command of a wrapper such as `env X=1 rm`) are
//! added to [`ParsedCommand::parts`] with [`SimpleCommand::via`] saying how
//! they are reached, so a deny rule or a guard matches them like any part.

mod execs;
mod lexer;
mod programs;
pub(crate) use programs::is_stdin_path;
pub(crate) use runners::SHELLS;
mod runners;
mod sed;

use serde::Serialize;

/// A whole `run_shell` command, split into simple commands.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ParsedCommand {
    /// Every simple command: top-level parts in order, and nested ones
    /// (with `via` set) next to the part that contains them.
    pub parts: Vec<SimpleCommand>,
    /// Everything that makes the command not auto-allowable.
    pub hazards: Vec<Hazard>,
}

/// One simple command: `X=1 prog arg > file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SimpleCommand {
    /// `NAME=value` words before the command word, as written minus quotes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub assignments: Vec<String>,
    /// The command word and its arguments, quotes removed. A variable or
    /// substitution stays as its source text (`$HOME`, `$(date)`).
    pub argv: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub redirections: Vec<Redirection>,
    /// How a nested command is reached (`$(…)`, `bash -c`, `env`, …);
    /// `None` for a top-level part of the chain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// What each word may stand for on disk, for the path guards: one per
    /// assignment, then one per argv word.
    #[serde(skip)]
    pub(crate) shapes: Vec<Shape>,
    /// Per word, like `shapes`: whether it holds an unquoted expansion,
    /// whose value may split into several words (and so start options).
    #[serde(skip)]
    pub(crate) splits: Vec<bool>,
    /// What a wrapper puts into the words in place of a pattern
    /// (`xargs -I R`, find's `{}`), for the analysis of unknowns.
    #[serde(skip)]
    pub(crate) placeholder: Option<Placeholder>,
}

/// A pattern in a nested command's words that its wrapper replaces at
/// run time: `xargs -I R` with a line of its input, `find -exec` with
/// the file found, which starts with `prefix` when that is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Placeholder {
    pub pattern: String,
    pub prefix: Option<String>,
}

impl SimpleCommand {
    /// The text allow rules match: assignments and argv joined by single
    /// spaces. Newlines inside words become spaces so that a glob's `*`
    /// (which never crosses a newline) still spans the whole command.
    pub fn text(&self) -> String {
        join_words(self.assignments.iter().chain(&self.argv))
    }

    /// The argv alone, joined like [`Self::text`].
    pub fn argv_text(&self) -> String {
        join_words(&self.argv)
    }

    /// The command word without its directory (`/bin/rm` → `rm`).
    pub fn program(&self) -> Option<&str> {
        self.argv.first().map(|word| basename(word))
    }

    /// Every text a deny or ask rule is tried on: the full text, the argv
    /// alone, and the argv with the command word's directory stripped.
    pub fn deny_views(&self) -> Vec<String> {
        let mut views = vec![self.text(), self.argv_text()];
        if let Some(program) = self.program()
            && self.argv.first().map(String::as_str) != Some(program)
        {
            views.push(join_words(
                std::iter::once(&program.to_owned()).chain(self.argv.iter().skip(1)),
            ));
        }
        views.dedup();
        views
    }
}

/// The last path component of a command word.
pub(crate) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn join_words<'a>(words: impl IntoIterator<Item = &'a String>) -> String {
    let mut text = String::new();
    for word in words {
        if !text.is_empty() {
            text.push(' ');
        }
        text.extend(word.chars().map(|c| if c == '\n' { ' ' } else { c }));
    }
    text
}

/// One redirection of a simple command.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Redirection {
    /// The explicit fd (`2>`), if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fd: Option<u32>,
    pub kind: RedirectKind,
    /// The target word, quotes removed (a here-doc's delimiter).
    pub target: String,
    #[serde(skip)]
    pub(crate) shape: Shape,
}

impl Redirection {
    /// True if and only if this redirection opens `target` as a file
    /// (`2>&1` and `<&0` duplicate an fd; here-docs and here-strings
    /// carry text).
    pub fn opens_file(&self) -> bool {
        match self.kind {
            RedirectKind::DupOutput | RedirectKind::DupInput => !is_fd_word(&self.target),
            RedirectKind::HereDoc | RedirectKind::HereString => false,
            RedirectKind::Input
            | RedirectKind::Output
            | RedirectKind::Append
            | RedirectKind::Clobber
            | RedirectKind::ReadWrite
            | RedirectKind::OutputAll
            | RedirectKind::AppendAll => true,
        }
    }

    /// True if and only if this redirection may write its target.
    pub fn writes(&self) -> bool {
        self.opens_file() && !matches!(self.kind, RedirectKind::Input | RedirectKind::DupInput)
    }
}

fn is_fd_word(word: &str) -> bool {
    word == "-" || (!word.is_empty() && word.bytes().all(|b| b.is_ascii_digit()))
}

/// The operator of a redirection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RedirectKind {
    /// `<`
    Input,
    /// `>`
    Output,
    /// `>>`
    Append,
    /// `>|`
    Clobber,
    /// `<>`
    ReadWrite,
    /// `<&`
    DupInput,
    /// `>&` (to a file when the target is not an fd number)
    DupOutput,
    /// `&>`
    OutputAll,
    /// `&>>`
    AppendAll,
    /// `<<` and `<<-`
    HereDoc,
    /// `<<<`
    HereString,
}

/// Something that makes a command not auto-allowable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Hazard {
    pub kind: HazardKind,
    /// Index into [`ParsedCommand::parts`] of the part it was found in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub part: Option<usize>,
    /// The offending text, for the message.
    pub text: String,
}

impl std::fmt::Display for Hazard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.text.is_empty() {
            f.write_str(self.kind.describe())
        } else {
            write!(f, "{} `{}`", self.kind.describe(), self.text)
        }
    }
}

/// The families of hazard. Each one names a way the text of a command
/// differs from what runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HazardKind {
    /// `$(…)`
    CommandSubstitution,
    /// `` `…` ``
    Backticks,
    /// `<(…)`, `>(…)`
    ProcessSubstitution,
    /// `$((…))`
    Arithmetic,
    /// `$X`, `${X}` in an argument, assignment or redirection.
    Variable,
    /// `$X`, `${X}`, a substitution or a glob as the command word.
    ExpansionInCommandWord,
    /// `$'…'`
    AnsiCQuote,
    /// `{a,b}`, `{1..9}`
    BraceExpansion,
    /// `~user`
    TildeUser,
    /// An unquoted glob at the start of a word (`*.rs`): a file named
    /// `--pre=x` would become an option.
    GlobMayBeOption,
    /// `eval`
    Eval,
    /// `exec`
    Exec,
    /// `sh -c`, `bash -lc`, a shell reading stdin.
    NestedShell,
    /// A shell or interpreter given its program as a path to stdin or an
    /// inherited descriptor: `bash /dev/stdin`, `python3 /dev/fd/0`,
    /// `awk -f -`, `node --import /proc/self/fd/0`, `python3 -m code`.
    StdinProgram,
    /// `python -c`, `perl -e`, `node -e`, awk `system()`, sed `e` …
    InlineCode,
    /// `env`, `xargs`, `find -exec`, `git -c`, `rg --pre`, `timeout` …
    RunsProgram,
    /// `source`, `.`, `alias`, `trap`, `shopt`, `hash`, `enable`
    ChangesShell,
    /// `PATH=…`, `LD_PRELOAD=…`, `GIT_…=…` and other variables that pick
    /// which program runs.
    HijackVariable,
    /// `( … )`
    Subshell,
    /// `{ …; }`
    BraceGroup,
    /// `if`, `for`, `while`, `case`, `function` …
    ControlFlow,
    /// `<<EOF`
    HereDoc,
    /// A redirection whose target resolves outside the workdir.
    RedirectOutside,
    /// A word naming a directory that contains a blocked path (`~`, `/`).
    ContainsBlockedPath,
    /// A protected path named by a program not known to only read it.
    NamesProtectedPath,
    /// A working directory (or `cd` target) outside the workdir or unknown.
    UnknownDirectory,
    /// Unbalanced quotes or parentheses, `;;`, a stray `)`, nesting too
    /// deep: anything the parser does not understand.
    Unparseable,
}

impl HazardKind {
    /// A short noun phrase for messages.
    pub fn describe(self) -> &'static str {
        match self {
            Self::CommandSubstitution => "command substitution",
            Self::Backticks => "backtick substitution",
            Self::ProcessSubstitution => "process substitution",
            Self::Arithmetic => "arithmetic expansion",
            Self::Variable => "variable expansion",
            Self::ExpansionInCommandWord => "expansion in the command word",
            Self::AnsiCQuote => "ANSI-C quoting",
            Self::BraceExpansion => "brace expansion",
            Self::TildeUser => "another user's home",
            Self::GlobMayBeOption => "unquoted glob at the start of a word (write `./` before it)",
            Self::Eval => "eval",
            Self::Exec => "exec",
            Self::NestedShell => "nested shell",
            Self::StdinProgram => "stdin program (code read from stdin or a descriptor)",
            Self::InlineCode => "inline code for an interpreter",
            Self::RunsProgram => "runs another program",
            Self::ChangesShell => "changes how the shell runs later commands",
            Self::HijackVariable => "sets a variable that picks which program runs",
            Self::Subshell => "subshell",
            Self::BraceGroup => "brace group",
            Self::ControlFlow => "shell control flow",
            Self::HereDoc => "here-document",
            Self::RedirectOutside => "redirection outside the workdir",
            Self::ContainsBlockedPath => "names a directory containing a blocked path",
            Self::NamesProtectedPath => "names a protected path",
            Self::UnknownDirectory => "working directory outside the workdir or unknown",
            Self::Unparseable => "cannot parse",
        }
    }
}

/// What a word may stand for, for the path guards: literal text, unquoted
/// glob pieces and expansions whose value policy cannot see.
pub(crate) type Shape = Vec<Seg>;

/// A piece of a [`Shape`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seg {
    /// Text that stays as written.
    Lit(String),
    /// An unquoted glob piece: `*`, `?` or a `[…]` class.
    Glob(String),
    /// An expansion: `HOME` for `~` and `$HOME`, `PWD`, any other name,
    /// or the source text of a substitution.
    Var(String),
}

/// Parses a command. Never fails: what does not parse is a
/// [`HazardKind::Unparseable`] hazard, with the parts found so far (so
/// deny rules and guards still see them).
pub fn parse(command: &str) -> ParsedCommand {
    let mut parsed = lexer::Parser::parse(command);
    parsed.hazards.dedup();
    parsed
}

#[cfg(test)]
mod tests;
