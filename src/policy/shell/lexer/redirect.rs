//! Redirections and here-documents.

use super::{Builder, Parser, PendingHereDoc, Word, is_metachar};
use crate::policy::shell::{HazardKind, RedirectKind, Redirection};

impl Parser {
    /// A redirection operator at `pos` (past `&` for `&>`), then its target.
    pub(super) fn redirection(
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
        // `< <(cmd)`, `> >(cmd)`: the target is a process substitution,
        // whose command is a part of its own.
        let substituted = matches!(self.peek(), Some('<' | '>')) && self.peek_at(1) == Some('(');
        if substituted && !matches!(kind, RedirectKind::HereDoc | RedirectKind::HereString) {
            let mut target = Word::default();
            self.process_substitution(&mut target);
            redirect_to(cmd, fd, kind, target);
            return;
        }
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
        redirect_to(cmd, fd, kind, target);
    }

    /// Consumes the bodies of pending here-docs at the start of a line;
    /// parses substitutions in bodies whose delimiter is unquoted.
    pub(super) fn heredoc_bodies(&mut self, via: Option<&str>) {
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

    pub(super) fn heredoc_expansions(&mut self, body: &str, _via: Option<&str>) {
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
}

/// `cmd` redirects `fd` (`kind`) to `target`.
fn redirect_to(cmd: &mut Builder, fd: Option<u32>, kind: RedirectKind, target: Word) {
    let redirection = Redirection {
        fd,
        kind,
        target: target.text.clone(),
        shape: target.shape.clone(),
    };
    cmd.redirections.push((redirection, target));
}
