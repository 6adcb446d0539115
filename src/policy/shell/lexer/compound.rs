//! Compound syntax the flat reader meets mid-list: `case` clauses and `name()` definitions.

use super::{Builder, CaseAt, Parser, case_head};
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
}
