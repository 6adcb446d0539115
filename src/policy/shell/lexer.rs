//! The character-level parser behind [`super::parse`]. One pass, no
//! backtracking; substitutions recurse (to [`MAX_DEPTH`]) and add their
//! commands as nested parts.

use super::runners::{self, Inner};
use super::{
    Hazard, HazardKind, ParsedCommand, RedirectKind, Redirection, Seg, Shape, SimpleCommand,
};

/// Nesting beyond this (substitutions in substitutions, `bash -c` in
/// `bash -c` …) is [`HazardKind::Unparseable`].
const MAX_DEPTH: usize = 8;

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

/// True if and only if bash evaluates something of the parameter
/// expansion `source` (`${…}`) as arithmetic or as a name: an
/// indirection (`${!x}`), a subscript other than `@`, `*` or digits
/// (`${a[i]}`), or an offset or length with a name in it (`${x:i}`).
/// A name there is expanded and evaluated again, so a value
/// `a[$(…)]` runs a command.
fn parameter_evaluates(source: &str) -> bool {
    let inner = source
        .strip_prefix("${")
        .and_then(|rest| rest.strip_suffix('}'))
        .unwrap_or(source);
    let inner = inner
        .strip_prefix('#')
        .filter(|rest| !rest.is_empty())
        .unwrap_or(inner);
    if inner.starts_with('!') {
        return true;
    }
    let rest = inner.trim_start_matches(|c: char| c.is_ascii_alphanumeric() || c == '_');
    let rest = match rest.strip_prefix('[') {
        Some(subscript) => {
            let Some((index, after)) = subscript.split_once(']') else {
                return true;
            };
            if !(index == "@" || index == "*" || index.bytes().all(|b| b.is_ascii_digit())) {
                return true;
            }
            after
        }
        None => rest,
    };
    match rest.strip_prefix(':') {
        Some(offset) if !offset.starts_with(['-', '=', '+', '?']) => !offset
            .chars()
            .all(|c| c.is_ascii_digit() || c == ' ' || c == ':' || "+-*/%()".contains(c)),
        _ => false,
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
                        if self.peek() == Some('&') {
                            self.pos += 1;
                        }
                        // `;;`, `;&`, `;;&` end a `case` clause.
                        if let Some(top) = cases.last_mut()
                            && *top == CaseAt::Body
                        {
                            *top = CaseAt::Pattern;
                            (dangling, subshell) = (None, false);
                            self.finish(&mut cmd, via);
                            continue;
                        }
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
                '|' if cases.last() == Some(&CaseAt::Pattern) || case_head(&cmd).is_some() => {
                    // `a|b)`: one clause's patterns.
                    self.pos += 1;
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
                ')' if cases.last() == Some(&CaseAt::Pattern) || case_head(&cmd).is_some() => {
                    // The end of a clause's patterns: they are data (what
                    // they substitute was read as parts of its own).
                    self.pos += 1;
                    let patterns = match case_head(&cmd) {
                        Some(_) => cmd.words.split_off(3),
                        None => std::mem::take(&mut cmd.words),
                    };
                    for mut word in patterns {
                        cmd.hazards.append(&mut word.hazards);
                    }
                    if !cmd.words.is_empty() {
                        cases.push(CaseAt::Body);
                    } else if let Some(top) = cases.last_mut() {
                        *top = CaseAt::Body;
                    }
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
                '(' if cases.last() == Some(&CaseAt::Pattern) && cmd.is_empty() => {
                    // `(a)`: a pattern's optional opening parenthesis.
                    self.pos += 1;
                }
                '(' if case_head(&cmd) == Some(0) => {
                    self.pos += 1;
                    cases.push(CaseAt::Pattern);
                    self.finish(&mut cmd, via);
                }
                '(' if self.function_definition(&cmd) => {
                    // `name() BODY`: the name runs the body later.
                    while self.peek() != Some(')') {
                        self.pos += 1;
                    }
                    self.pos += 1;
                    let name = cmd.words.remove(0);
                    cmd.hazard(HazardKind::ControlFlow, "function");
                    cmd.hazard(HazardKind::ControlFlow, &format!("{}()", name.text));
                    self.finish(&mut cmd, via);
                }
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
                'e' if cmd.is_empty() && !cases.is_empty() && self.upcoming_word("esac") => {
                    self.pos += 4;
                    cases.pop();
                }
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

    fn word(&mut self) -> Word {
        let mut word = Word::default();
        let mut braces = 0usize;
        while let Some(c) = self.peek() {
            if is_metachar(c) {
                break;
            }
            match c {
                '\\' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(escaped) => {
                            self.pos += 1;
                            word.quoted = true;
                            word.special = true;
                            word.lit(escaped);
                        }
                        None => word.lit('\\'),
                    }
                }
                '\'' => {
                    self.pos += 1;
                    word.quoted = true;
                    word.special = true;
                    self.single_quoted(&mut word);
                }
                '"' => {
                    self.pos += 1;
                    word.quoted = true;
                    word.special = true;
                    self.double_quoted(&mut word, true);
                }
                '$' => self.dollar(&mut word, false),
                '`' => self.backticks(&mut word, false),
                '*' | '?' => {
                    self.pos += 1;
                    word.glob_piece(&c.to_string());
                }
                '[' => self.bracket(&mut word),
                '~' if word.tilde_position() => self.tilde(&mut word),
                '=' => {
                    self.pos += 1;
                    if !word.equals_seen {
                        word.equals_seen = true;
                        let name = word.text.strip_suffix('+').unwrap_or(&word.text);
                        word.assignment = !word.special && !word.glob && is_name(name);
                    }
                    word.lit('=');
                }
                _ => {
                    self.pos += 1;
                    match c {
                        '{' => braces += 1,
                        '}' => braces = braces.saturating_sub(1),
                        ',' if braces > 0 => word.brace = true,
                        '.' if braces > 0 && self.peek() == Some('.') => word.brace = true,
                        _ => {}
                    }
                    word.lit(c);
                }
            }
        }
        if word.brace {
            word.hazards
                .push((HazardKind::BraceExpansion, word.text.clone()));
        }
        word
    }

    fn single_quoted(&mut self, word: &mut Word) {
        loop {
            match self.peek() {
                None => {
                    word.hazards
                        .push((HazardKind::Unparseable, "unterminated `'`".to_owned()));
                    return;
                }
                Some('\'') => {
                    self.pos += 1;
                    return;
                }
                Some(c) => {
                    self.pos += 1;
                    word.lit(c);
                }
            }
        }
    }

    /// Inside `"…"` (`closing`), or a here-doc body (no closing quote).
    fn double_quoted(&mut self, word: &mut Word, closing: bool) {
        loop {
            match self.peek() {
                None => {
                    if closing {
                        word.hazards
                            .push((HazardKind::Unparseable, "unterminated `\"`".to_owned()));
                    }
                    return;
                }
                Some('"') if closing => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some('\n') => self.pos += 1,
                        Some(c @ ('$' | '`' | '\\')) => {
                            self.pos += 1;
                            word.lit(c);
                        }
                        Some('"') if closing => {
                            self.pos += 1;
                            word.lit('"');
                        }
                        _ => word.lit('\\'),
                    }
                }
                Some('$') => self.dollar(word, true),
                Some('`') => self.backticks(word, true),
                Some(c) => {
                    self.pos += 1;
                    word.lit(c);
                }
            }
        }
    }

    /// With `pos` on the first `(` of `$((…))`: the position after its
    /// `))` when everything inside is digits, blanks and arithmetic
    /// operators (no name, no expansion).
    fn literal_arithmetic_end(&self) -> Option<usize> {
        let mut depth = 0usize;
        let mut at = self.pos + 2;
        loop {
            match *self.chars.get(at)? {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    return (self.chars.get(at + 1) == Some(&')')).then_some(at + 2);
                }
                ')' => depth -= 1,
                c if c.is_ascii_digit() || c == ' ' || "+-*/%<>=!&|^~?:".contains(c) => {}
                _ => return None,
            }
            at += 1;
        }
    }

    /// `$…` at `pos`.
    fn dollar(&mut self, word: &mut Word, in_quotes: bool) {
        let start = self.pos;
        self.pos += 1;
        if !in_quotes
            && self.peek().is_some_and(|c| {
                c == '(' || c == '{' || c.is_ascii_alphanumeric() || "_@*#?$!-".contains(c)
            })
        {
            word.splits = true;
        }
        match self.peek() {
            Some('(') => {
                let arithmetic = self.peek_at(1) == Some('(');
                if arithmetic && let Some(end) = self.literal_arithmetic_end() {
                    // Numbers and operators only: a number, like `$#`
                    // (no variable whose value could hold a subscript).
                    self.pos = end;
                    let source = self.source(start);
                    word.var("#", &source);
                    return;
                }
                self.pos += 1;
                let (kind, via) = if arithmetic {
                    (HazardKind::Arithmetic, "$((…))")
                } else {
                    (HazardKind::CommandSubstitution, "$(…)")
                };
                self.nested_list(via);
                let source = self.source(start);
                word.hazards.push((kind, source.clone()));
                word.var(&source, &source);
            }
            Some('{') => {
                self.pos += 1;
                let name_start = self.pos;
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                let name = self.source(name_start);
                self.parameter_rest(word);
                let source = self.source(start);
                if parameter_evaluates(&source) {
                    word.hazards.push((HazardKind::Arithmetic, source.clone()));
                }
                word.variable = true;
                word.var(if name.is_empty() { &source } else { &name }, &source);
            }
            Some('[') => {
                // `$[ … ]`: the old arithmetic expansion.
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '[' => depth += 1,
                        ']' if depth <= 1 => break,
                        ']' => depth -= 1,
                        _ => {}
                    }
                }
                let source = self.source(start);
                word.hazards.push((HazardKind::Arithmetic, source.clone()));
                word.var(&source, &source);
            }
            Some('\'') if !in_quotes => {
                self.pos += 1;
                word.quoted = true;
                word.special = true;
                let before = word.text.len();
                self.ansi_c_quoted(word);
                let decoded = word.text[before..].to_owned();
                word.hazards.push((HazardKind::AnsiCQuote, decoded));
            }
            Some('"') if !in_quotes => {
                self.pos += 1;
                word.quoted = true;
                word.special = true;
                self.double_quoted(word, true);
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                while self
                    .peek()
                    .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
                {
                    self.pos += 1;
                }
                let source = self.source(start);
                word.variable = true;
                word.var(&source[1..], &source);
            }
            Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => {
                self.pos += 1;
                let source = self.source(start);
                word.variable = true;
                word.var(&source[1..], &source);
            }
            _ => word.lit('$'),
        }
    }

    /// The rest of `${…}` after the name: skips to the matching `}`,
    /// parsing substitutions inside it.
    fn parameter_rest(&mut self, word: &mut Word) {
        let mut depth = 1usize;
        let mut scratch = Word::default();
        loop {
            match self.peek() {
                None => {
                    word.hazards
                        .push((HazardKind::Unparseable, "unterminated `${`".to_owned()));
                    return;
                }
                Some('}') => {
                    self.pos += 1;
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                Some('{') => {
                    self.pos += 1;
                    depth += 1;
                }
                Some('\\') => self.pos += 2,
                Some('\'') => {
                    self.pos += 1;
                    self.single_quoted(&mut scratch);
                }
                Some('"') => {
                    self.pos += 1;
                    self.double_quoted(&mut scratch, true);
                }
                Some('$') => self.dollar(&mut scratch, true),
                Some('`') => self.backticks(&mut scratch, true),
                Some(_) => self.pos += 1,
            }
        }
        word.hazards.append(&mut scratch.hazards);
    }

    /// `$'…'` after the quote: decodes the usual escapes.
    fn ansi_c_quoted(&mut self, word: &mut Word) {
        loop {
            match self.peek() {
                None => {
                    word.hazards
                        .push((HazardKind::Unparseable, "unterminated `$'`".to_owned()));
                    return;
                }
                Some('\'') => {
                    self.pos += 1;
                    return;
                }
                Some('\\') => {
                    self.pos += 1;
                    let Some(c) = self.peek() else { continue };
                    self.pos += 1;
                    let decoded = match c {
                        'n' => '\n',
                        't' => '\t',
                        'r' => '\r',
                        'a' => '\u{7}',
                        'b' => '\u{8}',
                        'e' | 'E' => '\u{1b}',
                        'f' => '\u{c}',
                        'v' => '\u{b}',
                        'x' => self.radix_char(16, 2),
                        '0'..='7' => {
                            self.pos -= 1;
                            self.radix_char(8, 3)
                        }
                        other => other,
                    };
                    word.lit(decoded);
                }
                Some(c) => {
                    self.pos += 1;
                    word.lit(c);
                }
            }
        }
    }

    fn radix_char(&mut self, radix: u32, max: usize) -> char {
        let mut value = 0u32;
        for _ in 0..max {
            let Some(digit) = self.peek().and_then(|c| c.to_digit(radix)) else {
                break;
            };
            value = value * radix + digit;
            self.pos += 1;
        }
        char::from_u32(value).unwrap_or('\u{fffd}')
    }

    fn backticks(&mut self, word: &mut Word, in_quotes: bool) {
        let start = self.pos;
        self.pos += 1;
        if !in_quotes {
            word.splits = true;
        }
        let mut inner = String::new();
        loop {
            match self.peek() {
                None => {
                    word.hazards
                        .push((HazardKind::Unparseable, "unterminated backtick".to_owned()));
                    break;
                }
                Some('`') => {
                    self.pos += 1;
                    break;
                }
                Some('\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(c @ ('$' | '`' | '\\')) => {
                            self.pos += 1;
                            inner.push(c);
                        }
                        Some('"') if in_quotes => {
                            self.pos += 1;
                            inner.push('"');
                        }
                        _ => inner.push('\\'),
                    }
                }
                Some(c) => {
                    self.pos += 1;
                    inner.push(c);
                }
            }
        }
        let source = self.source(start);
        word.hazards.push((HazardKind::Backticks, source.clone()));
        self.nested_text(&inner, "`…`");
        word.var(&source, &source);
    }

    /// `<(…)` or `>(…)` at `pos`.
    fn process_substitution(&mut self, word: &mut Word) {
        let start = self.pos;
        self.pos += 2;
        self.nested_list("<(…)");
        let source = self.source(start);
        word.hazards
            .push((HazardKind::ProcessSubstitution, source.clone()));
        word.var(&source, &source);
    }

    /// `[` at `pos`: a glob class if a `]` closes it within the word.
    fn bracket(&mut self, word: &mut Word) {
        let mut end = self.pos + 1;
        if matches!(self.chars.get(end), Some('!' | '^')) {
            end += 1;
        }
        if self.chars.get(end) == Some(&']') {
            end += 1;
        }
        while let Some(&c) = self.chars.get(end) {
            if c == ']' {
                let piece = self.chars[self.pos..=end].iter().collect::<String>();
                self.pos = end + 1;
                word.glob_piece(&piece);
                return;
            }
            if is_metachar(c) || matches!(c, '\'' | '"' | '\\' | '$' | '`') {
                break;
            }
            end += 1;
        }
        self.pos += 1;
        word.lit('[');
    }

    /// An unquoted `~` at a tilde position.
    fn tilde(&mut self, word: &mut Word) {
        let start = self.pos;
        self.pos += 1;
        while self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '+'))
        {
            self.pos += 1;
        }
        let source = self.source(start);
        match &source[1..] {
            "" => word.var("HOME", &source),
            "+" => word.var("PWD", &source),
            "-" => word.var("OLDPWD", &source),
            _ => {
                word.hazards.push((HazardKind::TildeUser, source.clone()));
                word.var(&source, &source);
            }
        }
    }

    /// A redirection operator at `pos` (past `&` for `&>`), then its target.
    fn redirection(
        &mut self,
        cmd: &mut Builder,
        fd: Option<u32>,
        ampersand: bool,
        via: Option<&str>,
    ) {
        let (kind, length, strip_tabs) = if ampersand {
            if self.peek_at(1) == Some('>') {
                (RedirectKind::AppendAll, 2, false)
            } else {
                (RedirectKind::OutputAll, 1, false)
            }
        } else {
            match (self.peek(), self.peek_at(1), self.peek_at(2)) {
                (Some('>'), Some('>'), _) => (RedirectKind::Append, 2, false),
                (Some('>'), Some('|'), _) => (RedirectKind::Clobber, 2, false),
                (Some('>'), Some('&'), _) => (RedirectKind::DupOutput, 2, false),
                (Some('>'), _, _) => (RedirectKind::Output, 1, false),
                (Some('<'), Some('<'), Some('<')) => (RedirectKind::HereString, 3, false),
                (Some('<'), Some('<'), Some('-')) => (RedirectKind::HereDoc, 3, true),
                (Some('<'), Some('<'), _) => (RedirectKind::HereDoc, 2, false),
                (Some('<'), Some('>'), _) => (RedirectKind::ReadWrite, 2, false),
                (Some('<'), Some('&'), _) => (RedirectKind::DupInput, 2, false),
                _ => (RedirectKind::Input, 1, false),
            }
        };
        let operator_start = self.pos;
        self.pos += length;
        let operator = self.source(operator_start);
        self.skip_blanks();
        if self.peek().is_none_or(is_metachar) {
            cmd.hazard(
                HazardKind::Unparseable,
                &format!("`{operator}` without a target"),
            );
            let _ = via;
            return;
        }
        let target = self.word();
        if kind == RedirectKind::HereDoc {
            cmd.hazard(HazardKind::HereDoc, &format!("{operator}{}", target.text));
            self.heredocs.push(PendingHereDoc {
                delimiter: target.text.clone(),
                strip_tabs,
                expands: !target.quoted,
            });
        }
        let redirection = Redirection {
            fd,
            kind,
            target: target.text.clone(),
            shape: target.shape.clone(),
        };
        cmd.redirections.push((redirection, target));
    }

    /// Consumes the bodies of pending here-docs at the start of a line;
    /// parses substitutions in bodies whose delimiter is unquoted.
    fn heredoc_bodies(&mut self, via: Option<&str>) {
        for doc in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            let mut found = false;
            while self.pos < self.chars.len() {
                let end = self.chars[self.pos..]
                    .iter()
                    .position(|&c| c == '\n')
                    .map_or(self.chars.len(), |offset| self.pos + offset);
                let line: String = self.chars[self.pos..end].iter().collect();
                self.pos = (end + 1).min(self.chars.len());
                let compared = if doc.strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if compared == doc.delimiter {
                    found = true;
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            if !found {
                self.push_hazard(HazardKind::Unparseable, None, "unterminated here-document");
            }
            if doc.expands {
                self.heredoc_expansions(&body, via);
            }
        }
    }

    fn heredoc_expansions(&mut self, body: &str, _via: Option<&str>) {
        let chars = std::mem::replace(&mut self.chars, body.chars().collect());
        let pos = std::mem::replace(&mut self.pos, 0);
        let mut scratch = Word::default();
        self.double_quoted(&mut scratch, false);
        self.chars = chars;
        self.pos = pos;
        for (kind, text) in scratch.hazards {
            self.push_hazard(kind, None, &text);
        }
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
