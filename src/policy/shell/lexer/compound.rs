//! Compound syntax the flat reader meets mid-list: `case` clauses, `name()`
//! definitions, and a `(` after words: `a=(…)`, `for ((…))`, `time ( … )`.

use super::{Builder, CaseAt, Parser, Word, case_head};
use crate::policy::shell::HazardKind;

impl Parser {
    /// `case` syntax at `c`, if it is: `;;`, `;&` or `;;&` ending a
    /// clause, the `|` and `)` of a clause's patterns (which are data: what
    /// they substitute was read as parts of its own), a pattern's optional
    /// `(`, and `esac`. Returns whether it was.
    pub(super) fn case_syntax(
        &mut self,
        c: char,
        cmd: &mut Builder,
        cases: &mut Vec<CaseAt>,
        via: Option<&str>,
    ) -> bool {
        let top = cases.last().copied();
        let head = case_head(cmd);
        match c {
            ';' if top == Some(CaseAt::Body) && matches!(self.peek_at(1), Some(';' | '&')) => {
                self.pos += 2;
                if self.peek() == Some('&') {
                    self.pos += 1;
                }
                if let Some(top) = cases.last_mut() {
                    *top = CaseAt::Pattern;
                }
                self.finish(cmd, via);
            }
            '|' if top == Some(CaseAt::Pattern) || head.is_some() => self.pos += 1,
            ')' if top == Some(CaseAt::Pattern) || head.is_some() => {
                self.pos += 1;
                let patterns = match head {
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
                self.finish(cmd, via);
            }
            '(' if top == Some(CaseAt::Pattern) && cmd.is_empty() => self.pos += 1,
            '(' if head == Some(0) => {
                self.pos += 1;
                cases.push(CaseAt::Pattern);
                self.finish(cmd, via);
            }
            'e' if cmd.is_empty() && top.is_some() && self.upcoming_word("esac") => {
                self.pos += 4;
                cases.pop();
            }
            _ => return false,
        }
        true
    }

    /// `name()` at `pos` (the `(`): the name runs the body that follows
    /// later.
    pub(super) fn function_name(&mut self, cmd: &mut Builder, via: Option<&str>) {
        while self.peek().is_some_and(|c| c != ')') {
            self.pos += 1;
        }
        self.pos += 1;
        let name = cmd.words.remove(0);
        cmd.hazard(HazardKind::ControlFlow, "function");
        cmd.hazard(HazardKind::ControlFlow, &format!("{}()", name.text));
        self.finish(cmd, via);
    }

    /// A `(` after words that bash reads (`pos` at the `(`): an array
    /// assignment `a=(1 "$b" $(c))` (also as an argument of `declare`,
    /// `local`, `typeset`, `readonly`, `export`), whose elements are words
    /// of the assignment; the arithmetic `for (( i = 0; i < n; i++ ))`, whose
    /// names are evaluated (an arithmetic hazard, like `(( … ))`); and
    /// `time ( … )`, which times a subshell. Returns whether it was one;
    /// anything else after a word stays unparseable.
    pub(super) fn compound_paren(&mut self, cmd: &mut Builder) -> bool {
        let plain = |word: &Word, text: &str| !word.special && word.text == text;
        let adjacent = self.pos > 0 && self.chars.get(self.pos - 1) == Some(&'=');
        let declares = cmd.words.first().is_some_and(|first| {
            ["declare", "local", "typeset", "readonly", "export"]
                .iter()
                .any(|name| plain(first, name))
        });
        if adjacent
            && let Some(last) = cmd.words.last()
            && last.assignment
            && (declares || cmd.words.iter().all(|w| w.assignment))
        {
            self.pos += 1;
            self.array_elements(cmd);
            return true;
        }
        if cmd.words.first().is_some_and(|first| plain(first, "[["))
            && !cmd.words.iter().skip(1).any(|w| plain(w, "]]"))
        {
            self.test_group(cmd);
            return true;
        }
        match cmd.words.as_slice() {
            [word] if plain(word, "for") && self.peek_at(1) == Some('(') => {
                let start = self.pos;
                let mut depth = 0usize;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '(' => depth += 1,
                        ')' => {
                            depth -= 1;
                            if depth == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let text: String = self.chars[start..self.pos].iter().collect();
                if depth != 0 {
                    cmd.hazard(HazardKind::Unparseable, "missing `))`");
                }
                // What a substitution inside runs is not read here: never
                // run it unread.
                if text.contains("$(") || text.contains('`') {
                    cmd.hazard(HazardKind::Unparseable, "a substitution in `for (( … ))`");
                }
                cmd.hazard(HazardKind::Arithmetic, &format!("for {text}"));
                true
            }
            [word] | [word, _]
                if plain(word, "time") && cmd.words.iter().skip(1).all(|w| plain(w, "-p")) =>
            {
                // The keyword times what follows: the subshell is the part.
                cmd.words.clear();
                false
            }
            _ => false,
        }
    }

    /// A `(` inside `[[ … ]]` (`pos` at it): a regex group (`=~
    /// ([0-9]+)`) or a grouping of tests, read as data up to its `)` and
    /// the rest of the word; with a substitution inside, unparseable (what
    /// it runs is not read here).
    fn test_group(&mut self, cmd: &mut Builder) {
        let start = self.pos;
        let mut depth = 0usize;
        while let Some(c) = self.peek() {
            match c {
                '(' => depth += 1,
                ')' => depth = depth.saturating_sub(1),
                '\n' => break,
                _ => {}
            }
            self.pos += 1;
            if depth == 0
                && self
                    .peek()
                    .is_none_or(|c| matches!(c, ' ' | '\t' | '\n' | ';' | '&' | '|'))
            {
                break;
            }
        }
        let text: String = self.chars[start..self.pos].iter().collect();
        if depth != 0 || text.contains("$(") || text.contains('`') {
            cmd.hazard(HazardKind::Unparseable, "a group in `[[ … ]]`");
        }
        let mut word = Word::default();
        for c in text.chars() {
            word.lit(c);
        }
        word.quoted = true;
        word.special = true;
        cmd.words.push(word);
    }

    /// The elements of `a=(…)` up to `)`, `pos` past `(`: each read as a
    /// word (its substitutions parts of their own) and appended to the
    /// assignment word.
    fn array_elements(&mut self, cmd: &mut Builder) {
        let mut elements: Vec<Word> = Vec::new();
        loop {
            while matches!(self.peek(), Some(' ' | '\t' | '\n')) {
                self.pos += 1;
            }
            match self.peek() {
                Some(')') => {
                    self.pos += 1;
                    break;
                }
                None => {
                    cmd.hazard(HazardKind::Unparseable, "missing `)`");
                    break;
                }
                Some(_) => {}
            }
            let before = self.pos;
            let element = self.word();
            if self.pos == before {
                cmd.hazard(HazardKind::Unparseable, "an array element");
                break;
            }
            elements.push(element);
        }
        let Some(word) = cmd.words.last_mut() else {
            return;
        };
        word.lit('(');
        for (index, mut element) in elements.into_iter().enumerate() {
            if index > 0 {
                word.lit(' ');
            }
            word.text.push_str(&element.text);
            word.shape.append(&mut element.shape);
            word.hazards.append(&mut element.hazards);
            word.quoted |= element.quoted;
            word.special |= element.special;
            word.variable |= element.variable;
            word.expanded |= element.expanded;
            word.splits |= element.splits;
        }
        word.lit(')');
    }
}
