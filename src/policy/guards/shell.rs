//! The guards over a shell command: its words, redirections and `cd`s.

use super::{DEVICES, GuardHit, Guards, PROTECTED_VARIABLES, READERS, ShellCheck, writes_operands};
use crate::policy::pathshape::{Comp, Resolved, resolve};
use crate::policy::shell::{HazardKind, ParsedCommand, Seg, SimpleCommand};

impl Guards {
    /// The guards for a parsed shell command run in `cwd` (relative to
    /// the workdir, or absolute; `None` is the workdir).
    pub fn check_shell(&self, parsed: &ParsedCommand, cwd: Option<&str>) -> ShellCheck {
        let mut check = ShellCheck::default();
        let start = match cwd {
            Some(cwd) => self.resolve_path(cwd),
            None => Resolved {
                comps: self.workdir.clone(),
                floating: false,
            },
        };
        let mut dirs: Vec<Option<Vec<Comp>>> = Vec::new();
        if start.is_exact() && self.roots.iter().any(|root| start.is_under(root)) {
            dirs.push(Some(start.comps));
        } else {
            check.hazard(HazardKind::UnknownDirectory, None, cwd.unwrap_or_default());
            dirs.push(if start.is_exact() {
                Some(start.comps)
            } else {
                None
            });
        }
        for (index, part) in parsed.parts.iter().enumerate() {
            if let Some(hit) = self.check_part(part, index, &dirs, &mut check) {
                check.hit = Some(hit);
                return check;
            }
            if matches!(part.program(), Some("cd" | "pushd")) {
                self.follow_cd(part, index, &mut dirs, &mut check);
            }
        }
        check
    }

    pub(super) fn check_part(
        &self,
        part: &SimpleCommand,
        index: usize,
        dirs: &[Option<Vec<Comp>>],
        check: &mut ShellCheck,
    ) -> Option<GuardHit> {
        let text = part.argv_text();
        for entry in &self.commands {
            if dirs
                .iter()
                .any(|dir| entry.matches(part, self.dir_base(dir)))
            {
                return Some(GuardHit::new(
                    "blocked_commands",
                    format!("`{text}` matches blocked command `{}`", entry.text),
                ));
            }
        }
        for shape in part
            .shapes
            .iter()
            .chain(part.redirections.iter().map(|r| &r.shape))
        {
            if let Some(Seg::Var(name)) = shape.iter().find(
                |seg| matches!(seg, Seg::Var(name) if PROTECTED_VARIABLES.contains(&name.as_str())),
            ) {
                return Some(GuardHit::new(
                    "protected_paths",
                    format!("`{text}` uses `${name}`, a GitHub Actions control file"),
                ));
            }
        }
        if let Some(hit) = self.check_words(part, &text, index, dirs, check) {
            return Some(hit);
        }
        self.check_redirections(part, index, dirs, check)
    }

    /// The paths the words of `part` (its `text`) name, in each of `dirs`.
    pub(super) fn check_words(
        &self,
        part: &SimpleCommand,
        text: &str,
        index: usize,
        dirs: &[Option<Vec<Comp>>],
        check: &mut ShellCheck,
    ) -> Option<GuardHit> {
        let writer = writes_operands(part);
        let reader = part.program().is_some_and(|p| READERS.contains(&p));
        let argv_offset = part.assignments.len();
        for (word_index, shape) in part.shapes.iter().enumerate() {
            for dir in dirs {
                for resolved in self.word_paths(shape, dir) {
                    if let Some(entry) = self.blocked_entry(&resolved) {
                        return Some(GuardHit::new(
                            "blocked_paths",
                            format!("`{text}` names blocked path `{entry}`"),
                        ));
                    }
                    if word_index > argv_offset
                        && let Some(entry) = self.protected_entry(&resolved)
                    {
                        if writer {
                            return Some(GuardHit::new(
                                "protected_paths",
                                format!("`{text}` writes protected path `{entry}`"),
                            ));
                        }
                        if !reader {
                            // `git log --output=.git/x`: a program that
                            // may write through an option.
                            check.hazard(
                                HazardKind::NamesProtectedPath,
                                Some(index),
                                &resolved.display(),
                            );
                        }
                    }
                    if self
                        .blocked
                        .iter()
                        .zip(&self.hidden)
                        .any(|((_, pattern), hidden)| !hidden && resolved.may_contain(pattern))
                    {
                        check.hazard(
                            HazardKind::ContainsBlockedPath,
                            Some(index),
                            &resolved.display(),
                        );
                    }
                }
            }
        }
        None
    }

    /// The files the redirections of `part` open, in each of `dirs`.
    pub(super) fn check_redirections(
        &self,
        part: &SimpleCommand,
        index: usize,
        dirs: &[Option<Vec<Comp>>],
        check: &mut ShellCheck,
    ) -> Option<GuardHit> {
        for redirection in &part.redirections {
            if !redirection.opens_file() {
                continue;
            }
            for dir in dirs {
                let resolved = resolve(&redirection.shape, self.dir_base(dir));
                if let Some(entry) = self.blocked_entry(&resolved) {
                    return Some(GuardHit::new(
                        "blocked_paths",
                        format!(
                            "redirection to `{}` names blocked path `{entry}`",
                            redirection.target
                        ),
                    ));
                }
                if redirection.writes()
                    && let Some(entry) = self.protected_entry(&resolved)
                {
                    return Some(GuardHit::new(
                        "protected_paths",
                        format!(
                            "redirection writes `{}`, protected (`{entry}`)",
                            redirection.target
                        ),
                    ));
                }
                let inside = resolved.is_exact()
                    && (self.roots.iter().any(|root| resolved.is_under(root))
                        || DEVICES.contains(&resolved.display().as_str()));
                if !inside {
                    check.hazard(
                        HazardKind::RedirectOutside,
                        Some(index),
                        &redirection.target,
                    );
                }
            }
        }
        None
    }
}
