//! Words: quoting, expansions and substitutions, tilde and globs.

use super::{Parser, Word, is_metachar, is_name};
use crate::policy::shell::HazardKind;

impl Parser {
    pub(super) fn word(&mut self) -> Word {
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

    pub(super) fn single_quoted(&mut self, word: &mut Word) {
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
    pub(super) fn double_quoted(&mut self, word: &mut Word, closing: bool) {
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
    pub(super) fn literal_arithmetic_end(&self) -> Option<usize> {
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
    pub(super) fn dollar(&mut self, word: &mut Word, in_quotes: bool) {
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
    pub(super) fn parameter_rest(&mut self, word: &mut Word) {
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
    pub(super) fn ansi_c_quoted(&mut self, word: &mut Word) {
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

    pub(super) fn radix_char(&mut self, radix: u32, max: usize) -> char {
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

    pub(super) fn backticks(&mut self, word: &mut Word, in_quotes: bool) {
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
    pub(super) fn process_substitution(&mut self, word: &mut Word) {
        let start = self.pos;
        self.pos += 2;
        self.nested_list("<(…)");
        let source = self.source(start);
        word.hazards
            .push((HazardKind::ProcessSubstitution, source.clone()));
        word.var(&source, &source);
    }

    /// `[` at `pos`: a glob class if a `]` closes it within the word.
    pub(super) fn bracket(&mut self, word: &mut Word) {
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
    pub(super) fn tilde(&mut self, word: &mut Word) {
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
