//! The character-level parser behind [`super::parse`]. One pass, no
//! backtracking; substitutions recurse (to [`MAX_DEPTH`]) and add their
//! commands as nested parts.

use super::runners::{self, Inner};
use super::{Hazard, HazardKind, ParsedCommand, Redirection, Seg, Shape, SimpleCommand};

/// Nesting beyond this (substitutions in substitutions, `bash -c` in
/// `bash -c` …) is [`HazardKind::Unparseable`].
const MAX_DEPTH: usize = 8;

mod compound;
mod redirect;
mod words;

/// Words that open or close a compound command in command position; the
/// parser drops them and judges the command that follows.
const STRIPPED_WORDS: &[&str] = &[
    "!", "{", "}", "if", "then", "elif", "else", "do", "while", "until", "fi", "done", "esac",
];

/// Words that start a construct whose words are not a plain command.
const CONTROL_WORDS: &[&str] = &["for", "case", "select", "function", "[[", "coproc", "in"];

pub(super) struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
    out: ParsedCommand,
    heredocs: Vec<PendingHereDoc>,
}

struct PendingHereDoc {
    delimiter: String,
    strip_tabs: bool,
    expands: bool,
}

/// A word being read.
#[derive(Debug, Default)]
struct Word {
    text: String,
    shape: Shape,
    /// Anything quoted or escaped.
    quoted: bool,
    /// Quoted, escaped or expanded: not a reserved word.
    special: bool,
    /// `$X` or `${X}`.
    variable: bool,
    /// Any expansion or substitution.
    expanded: bool,
    /// An unquoted glob piece anywhere.
    glob: bool,
    /// An unquoted glob piece as the first character.
    leading_glob: bool,
    /// `NAME=` with an unquoted name: an assignment in prefix position.
    assignment: bool,
    /// Whether the first unquoted `=` has been seen.
    equals_seen: bool,
    /// `{a,b}` or `{1..3}` seen.
    brace: bool,
    /// An unquoted `$…` or backticks: the value may split into words.
    splits: bool,
    hazards: Vec<(HazardKind, String)>,
}

impl Word {
    fn lit(&mut self, c: char) {
        self.text.push(c);
        if let Some(Seg::Lit(text)) = self.shape.last_mut() {
            text.push(c);
        } else {
            self.shape.push(Seg::Lit(c.to_string()));
        }
    }

    fn glob_piece(&mut self, piece: &str) {
        if self.text.is_empty() {
            self.leading_glob = true;
        }
        self.glob = true;
        self.text.push_str(piece);
        self.shape.push(Seg::Glob(piece.to_owned()));
    }

    fn var(&mut self, name: &str, source: &str) {
        self.special = true;
        self.expanded = true;
        self.text.push_str(source);
        self.shape.push(Seg::Var(name.to_owned()));
    }

    /// True at a position where an unquoted `~` starts a tilde prefix.
    fn tilde_position(&self) -> bool {
        self.text.is_empty()
            || (self.equals_seen && self.text.ends_with('='))
            || (self.assignment && self.text.ends_with(':'))
    }
}

/// The words and redirections of the simple command being read.
#[derive(Debug, Default)]
struct Builder {
    words: Vec<Word>,
    redirections: Vec<(Redirection, Word)>,
    hazards: Vec<(HazardKind, String)>,
}

impl Builder {
    fn is_empty(&self) -> bool {
        self.words.is_empty() && self.redirections.is_empty()
    }

    fn hazard(&mut self, kind: HazardKind, text: &str) {
        self.hazards.push((kind, text.to_owned()));
    }
}

/// Where a `case` statement is in this list: reading a clause's
/// patterns (after `in` or `;;`), or its commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CaseAt {
    Pattern,
    Body,
}

/// `Some(n)` when `cmd` is `case WORD in` and `n` pattern words after it.
fn case_head(cmd: &Builder) -> Option<usize> {
    match cmd.words.as_slice() {
        [case, _, keyword, patterns @ ..]
            if !case.special && case.text == "case" && !keyword.special && keyword.text == "in" =>
        {
            Some(patterns.len())
        }
        _ => None,
    }
}

/// bash refuses an operator with no command on one side (`&& x`,
/// `x |` at the end, `;;`-less `; x`): such a line does not parse.
fn needs_command(cmd: &mut Builder, subshell: bool, op: &str) {
    if cmd.is_empty() && !subshell {
        cmd.hazard(
            HazardKind::Unparseable,
            &format!("`{op}` without a command"),
        );
    }
}

fn is_name(text: &str) -> bool {
    let mut chars = text.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn is_metachar(c: char) -> bool {
    matches!(
        c,
        ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')'
    )
}

impl Parser {
    pub(super) fn parse(text: &str) -> ParsedCommand {
        let mut parser = Self {
            chars: text.chars().collect(),
            pos: 0,
            depth: 0,
            out: ParsedCommand::default(),
            heredocs: Vec::new(),
        };
        parser.list(false, None);
        parser.out
    }

    /// True if and only if `word` starts at `pos`, followed by a
    /// metacharacter or the end.
    fn upcoming_word(&self, word: &str) -> bool {
        let len = word.chars().count();
        self.chars
            .get(self.pos..self.pos + len)
            .is_some_and(|chars| chars.iter().copied().eq(word.chars()))
            && self
                .chars
                .get(self.pos + len)
                .is_none_or(|&c| is_metachar(c))
    }

    /// True if and only if `(` at `pos` opens `name()` after the one
    /// plain word of `cmd`.
    fn function_definition(&self, cmd: &Builder) -> bool {
        let [word] = cmd.words.as_slice() else {
            return false;
        };
        if word.special || !is_name(&word.text) || !cmd.redirections.is_empty() {
            return false;
        }
        let mut at = self.pos + 1;
        while matches!(self.chars.get(at), Some(' ' | '\t')) {
            at += 1;
        }
        self.chars.get(at) == Some(&')')
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn source(&self, start: usize) -> String {
        self.chars[start..self.pos.min(self.chars.len())]
            .iter()
            .collect()
    }

    fn push_hazard(&mut self, kind: HazardKind, part: Option<usize>, text: &str) {
        self.out.hazards.push(Hazard {
            kind,
            part,
            text: text.to_owned(),
        });
    }

    fn skip_blanks(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t') => self.pos += 1,
                Some('\\') if self.peek_at(1) == Some('\n') => self.pos += 2,
                _ => return,
            }
        }
    }

    /// Reads simple commands to the end of input or, with `close`, to the
    /// matching `)`.
    fn list(&mut self, close: bool, via: Option<&str>) {
        let mut cmd = Builder::default();
        // The `&&`, `||` or `|` still waiting for the command after it,
        // and whether the command being read is a `( … )` (no words).
        let mut dangling: Option<&'static str> = None;
        let mut subshell = false;
        // The `case` statements open in this list, innermost last.
        let mut cases: Vec<CaseAt> = Vec::new();
        loop {
            self.skip_blanks();
            let Some(c) = self.peek() else {
                if close {
                    cmd.hazard(HazardKind::Unparseable, "missing `)`");
                }
                if !cases.is_empty() {
                    cmd.hazard(HazardKind::Unparseable, "missing `esac`");
                }
                if let Some(op) = dangling {
                    needs_command(&mut cmd, subshell, op);
                }
                self.finish(&mut cmd, via);
                self.heredoc_bodies(via);
                return;
            };
            if self.case_syntax(c, &mut cmd, &mut cases, via) {
                (dangling, subshell) = (None, false);
                continue;
            }
            if c == '(' && self.function_definition(&cmd) {
                self.function_name(&mut cmd, via);
                continue;
            }
            match c {
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                '\n' => {
                    self.pos += 1;
                    // A newline may follow `&&`, `||` or `|`: the command
                    // after it is still awaited.
                    if !cmd.is_empty() || subshell {
                        dangling = None;
                        subshell = false;
                    }
                    if case_head(&cmd) == Some(0) {
                        cases.push(CaseAt::Pattern);
                    }
                    self.finish(&mut cmd, via);
                    self.heredoc_bodies(via);
                }
                ';' => {
                    self.pos += 1;
                    if matches!(self.peek(), Some(';' | '&')) {
                        self.pos += 1;
                        cmd.hazard(HazardKind::Unparseable, ";;");
                    }
                    if case_head(&cmd) == Some(0) {
                        cases.push(CaseAt::Pattern);
                    }
                    needs_command(&mut cmd, subshell, dangling.unwrap_or(";"));
                    (dangling, subshell) = (None, false);
                    self.finish(&mut cmd, via);
                }
                '&' if self.peek_at(1) == Some('>') => {
                    self.pos += 1;
                    self.redirection(&mut cmd, None, true, via);
                }
                '&' | '|' => {
                    self.pos += 1;
                    let op = match (c, self.peek()) {
                        ('&', Some('&')) => "&&",
                        ('|', Some('|')) => "||",
                        ('|', Some('&')) => "|&",
                        ('&', _) => "&",
                        _ => "|",
                    };
                    if op.len() == 2 {
                        self.pos += 1;
                    }
                    needs_command(&mut cmd, subshell, dangling.unwrap_or(op));
                    dangling = (op != "&").then_some(op);
                    subshell = false;
                    self.finish(&mut cmd, via);
                }
                ')' => {
                    self.pos += 1;
                    if close {
                        if let Some(op) = dangling {
                            needs_command(&mut cmd, subshell, op);
                        }
                        self.finish(&mut cmd, via);
                        return;
                    }
                    cmd.hazard(HazardKind::Unparseable, "unmatched `)`");
                    self.finish(&mut cmd, via);
                }
                '(' if self.compound_paren(&mut cmd) => {}
                '(' => {
                    self.pos += 1;
                    if cmd.is_empty() {
                        subshell = true;
                        cmd.hazard(HazardKind::Subshell, "( … )");
                        if self.peek() == Some('(') {
                            // `(( … ))`: arithmetic, whose names are
                            // evaluated (a value `a[$(…)]` runs a command).
                            cmd.hazard(HazardKind::Arithmetic, "(( … ))");
                        }
                    } else {
                        cmd.hazard(HazardKind::Unparseable, "`(` after a word");
                    }
                    self.nested_list("( … )");
                }
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    let mut word = Word::default();
                    self.process_substitution(&mut word);
                    cmd.words.push(word);
                }
                '<' | '>' => self.redirection(&mut cmd, None, false, via),
                _ => self.word_or_descriptor(&mut cmd, via),
            }
        }
    }

    /// A word, or a descriptor number (`2>`) or name (`{fd}>`) before a
    /// redirection.
    fn word_or_descriptor(&mut self, cmd: &mut Builder, via: Option<&str>) {
        let word = self.word();
        let is_fd = !word.special
            && !word.text.is_empty()
            && word.text.bytes().all(|b| b.is_ascii_digit())
            && matches!(self.peek(), Some('<' | '>'))
            && self.peek_at(1) != Some('(');
        // `{name}>file` (bash 4.1): the shell picks a free
        // descriptor and stores it in `name`; the word is not
        // an argument.
        let is_named_fd = !word.special
            && word
                .text
                .strip_prefix('{')
                .and_then(|rest| rest.strip_suffix('}'))
                .is_some_and(|name| {
                    name.chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                })
            && matches!(self.peek(), Some('<' | '>'))
            && self.peek_at(1) != Some('(');
        if is_fd {
            let fd = word.text.parse().ok();
            self.redirection(cmd, fd, false, via);
        } else if is_named_fd {
            cmd.hazard(
                HazardKind::ChangesShell,
                &format!("{}> (a named descriptor sets a variable)", word.text),
            );
            self.redirection(cmd, None, false, via);
        } else {
            cmd.words.push(word);
        }
    }

    /// Parses `( … )`, `$( … )` or `<( … )` contents; `pos` is past `(`.
    fn nested_list(&mut self, via: &str) {
        if self.depth >= MAX_DEPTH {
            self.push_hazard(HazardKind::Unparseable, None, "nested too deeply");
            self.pos = self.chars.len();
            return;
        }
        self.depth += 1;
        self.list(true, Some(via));
        self.depth -= 1;
    }

    /// Parses a string a program will run as shell code (`bash -c`, `eval`,
    /// backticks) as nested parts.
    fn nested_text(&mut self, text: &str, via: &str) {
        if self.depth >= MAX_DEPTH {
            self.push_hazard(HazardKind::Unparseable, None, "nested too deeply");
            return;
        }
        let chars = std::mem::replace(&mut self.chars, text.chars().collect());
        let pos = std::mem::replace(&mut self.pos, 0);
        let heredocs = std::mem::take(&mut self.heredocs);
        self.depth += 1;
        self.list(false, Some(via));
        self.depth -= 1;
        self.chars = chars;
        self.pos = pos;
        self.heredocs = heredocs;
    }

    /// Ends the simple command being read: sorts its words, records its
    /// hazards and the commands it runs.
    fn finish(&mut self, cmd: &mut Builder, via: Option<&str>) {
        let mut cmd = std::mem::take(cmd);
        let mut hazards = cmd.hazards;
        let mut assignments: Vec<Word> = Vec::new();
        let mut argv: Vec<Word> = Vec::new();
        for word in cmd.words {
            if argv.is_empty() && !word.special && STRIPPED_WORDS.contains(&word.text.as_str()) {
                match word.text.as_str() {
                    "!" => {}
                    "{" | "}" => hazards.push((HazardKind::BraceGroup, word.text.clone())),
                    _ => hazards.push((HazardKind::ControlFlow, word.text.clone())),
                }
                continue;
            }
            if argv.is_empty() && word.assignment {
                assignments.push(word);
            } else {
                argv.push(word);
            }
        }
        if let Some(first) = argv.first()
            && !first.special
            && CONTROL_WORDS.contains(&first.text.as_str())
        {
            hazards.push((HazardKind::ControlFlow, first.text.clone()));
        }
        for (index, word) in argv.iter_mut().enumerate() {
            hazards.append(&mut word.hazards);
            if index == 0 {
                if word.expanded || word.glob {
                    hazards.push((HazardKind::ExpansionInCommandWord, word.text.clone()));
                }
            } else {
                if word.variable {
                    hazards.push((HazardKind::Variable, word.text.clone()));
                }
                if word.leading_glob {
                    hazards.push((HazardKind::GlobMayBeOption, word.text.clone()));
                }
            }
        }
        let mut redirections = Vec::new();
        for word in assignments
            .iter_mut()
            .chain(cmd.redirections.iter_mut().map(|(_, word)| word))
        {
            hazards.append(&mut word.hazards);
            if word.variable {
                hazards.push((HazardKind::Variable, word.text.clone()));
            }
        }
        for (redirection, _) in cmd.redirections {
            redirections.push(redirection);
        }
        if argv.is_empty() && assignments.is_empty() && redirections.is_empty() {
            for (kind, text) in hazards {
                self.push_hazard(kind, None, &text);
            }
            return;
        }
        let part = SimpleCommand {
            splits: assignments
                .iter()
                .chain(&argv)
                .map(|word| word.splits)
                .collect(),
            shapes: assignments
                .iter()
                .chain(&argv)
                .map(|word| word.shape.clone())
                .collect(),
            assignments: assignments.into_iter().map(|word| word.text).collect(),
            argv: argv.into_iter().map(|word| word.text).collect(),
            redirections,
            via: via.map(str::to_owned),
            placeholder: None,
        };
        let index = self.out.parts.len();
        self.out.parts.push(part);
        for (kind, text) in hazards {
            self.push_hazard(kind, Some(index), &text);
        }
        self.runners(index);
    }

    /// Records what the part at `index` runs besides itself.
    fn runners(&mut self, index: usize) {
        let analysis = runners::analyze(&self.out.parts[index]);
        for (kind, text) in analysis.hazards {
            self.push_hazard(kind, Some(index), &text);
        }
        for inner in analysis.inner {
            if self.depth >= MAX_DEPTH {
                self.push_hazard(HazardKind::Unparseable, Some(index), "nested too deeply");
                return;
            }
            match inner {
                Inner::Command(command) => {
                    let inner_index = self.out.parts.len();
                    self.out.parts.push(command);
                    self.depth += 1;
                    self.runners(inner_index);
                    self.depth -= 1;
                }
                Inner::Script { text, via } => self.nested_text(&text, &via),
            }
        }
    }
}
