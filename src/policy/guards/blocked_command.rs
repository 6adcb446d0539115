//! `safety.blocked_commands` entries: `sudo`, `rm -rf /`, `chmod 777`,
//! `mkfs`, `dd of=/dev/`, matched per simple command on the normalized
//! argv. The program matches by name (`/usr/bin/sudo`, and `mkfs.ext4`
//! for `mkfs`); every flag of the entry must appear in any spelling
//! (`-rf`, `-fr`, `-r -f`, `-R`, `--recursive --force`); every operand
//! must be named by some word: paths lexically (`/`, `//`, `/.`, `/*`,
//! `../../..` from the workdir), `key=/path/` as a prefix, modes with
//! their equivalents (`0777`, `a+rwx`).

use std::collections::BTreeSet;

use super::GuardError;
use crate::policy::pathshape::{self, Base, Comp, glob_match, resolve};
use crate::policy::shell::{self, Shape, SimpleCommand};

/// One `safety.blocked_commands` entry.
#[derive(Debug, Clone)]
pub(super) struct BlockedCommand {
    pub text: String,
    program: String,
    flags: BTreeSet<char>,
    long_flags: BTreeSet<String>,
    operands: Vec<Operand>,
}

#[derive(Debug, Clone)]
enum Operand {
    /// `/`: an operand naming this path (a trailing glob such as `/*`
    /// counts as the directory itself); `prefix` for `/dev/`.
    Path {
        comps: Vec<Comp>,
        prefix: bool,
    },
    /// `of=/dev/`
    KeyPath {
        key: String,
        comps: Vec<Comp>,
        prefix: bool,
    },
    /// `777` for chmod: also `0777`, `1777`, `a+rwx`, `ugo=rwx`.
    Mode(String),
    Word(String),
}

impl BlockedCommand {
    pub fn parse(entry: &str) -> Result<Self, GuardError> {
        let error = |problem: &str| GuardError {
            list: "safety.blocked_commands",
            entry: entry.to_owned(),
            problem: problem.to_owned(),
        };
        let parsed = shell::parse(entry);
        let [part] = parsed.parts.as_slice() else {
            return Err(error("expected one simple command"));
        };
        let Some(program) = part.argv.first() else {
            return Err(error("missing the command word"));
        };
        let mut command = Self {
            text: entry.to_owned(),
            program: program.clone(),
            flags: BTreeSet::new(),
            long_flags: BTreeSet::new(),
            operands: Vec::new(),
        };
        let root: [Comp; 0] = [];
        let base = Base {
            cwd: &root,
            home: None,
            floating_cwd: false,
        };
        for word in &part.argv[1..] {
            if is_flag(word) {
                add_flags(word, &mut command.flags, &mut command.long_flags);
            } else if let Some((key, value)) = word.split_once('=')
                && value.starts_with('/')
            {
                command.operands.push(Operand::KeyPath {
                    key: key.to_owned(),
                    comps: pathshape::resolve_text(value, base, false).comps,
                    prefix: value.len() > 1 && value.ends_with('/'),
                });
            } else if word.starts_with('/') {
                command.operands.push(Operand::Path {
                    comps: pathshape::resolve_text(word, base, false).comps,
                    prefix: word.len() > 1 && word.ends_with('/'),
                });
            } else if !word.is_empty() && word.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
                command.operands.push(Operand::Mode(word.clone()));
            } else {
                command.operands.push(Operand::Word(word.clone()));
            }
        }
        Ok(command)
    }

    pub fn matches(&self, part: &SimpleCommand, base: Base<'_>) -> bool {
        let Some(program) = part.program() else {
            return false;
        };
        let family = program
            .strip_prefix(self.program.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('.'));
        if !family {
            return false;
        }
        let offset = part.assignments.len() + 1;
        let args: Vec<(&String, &Shape)> = part.argv[1..]
            .iter()
            .zip(part.shapes.get(offset..).unwrap_or_default())
            .collect();
        let mut flags = BTreeSet::new();
        let mut long_flags = BTreeSet::new();
        for (word, _) in args.iter().take_while(|(w, _)| *w != "--") {
            if is_flag(word) {
                add_flags(word, &mut flags, &mut long_flags);
            }
        }
        self.flags.is_subset(&flags)
            && self.long_flags.is_subset(&long_flags)
            && self.operands.iter().all(|operand| {
                args.iter()
                    .any(|(word, shape)| operand.matches(word, shape, base))
            })
    }
}

impl Operand {
    fn matches(&self, word: &str, shape: &Shape, base: Base<'_>) -> bool {
        match self {
            Self::Path { comps, prefix } => {
                let resolved = resolve(shape, base);
                !resolved.floating && path_is(&resolved.comps, comps, *prefix)
            }
            Self::KeyPath { key, comps, prefix } => {
                let Some(value) = word
                    .strip_prefix(key.as_str())
                    .and_then(|w| w.strip_prefix('='))
                else {
                    return false;
                };
                let resolved = pathshape::resolve_text(value, base, true);
                !resolved.floating && path_is(&resolved.comps, comps, *prefix)
            }
            Self::Mode(mode) => mode_is(word, mode),
            Self::Word(expected) => word == expected,
        }
    }
}

/// True if and only if `actual` (trailing globs dropped: `/*` is `/`)
/// names `expected`, or something under it when `prefix`.
fn path_is(actual: &[Comp], expected: &[Comp], prefix: bool) -> bool {
    let mut actual = actual;
    while let Some((last, rest)) = actual.split_last()
        && !matches!(last, Comp::Lit(_))
    {
        actual = rest;
    }
    let length_ok = if prefix {
        actual.len() >= expected.len()
    } else {
        actual.len() == expected.len()
    };
    length_ok
        && actual.iter().zip(expected).all(|(a, e)| match (a, e) {
            (Comp::Lit(a), Comp::Lit(e)) => a == e,
            (Comp::Pat(toks), Comp::Lit(e)) => glob_match(toks, e),
            _ => true,
        })
}

fn mode_is(word: &str, mode: &str) -> bool {
    if !word.is_empty() && word.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        let trimmed = word.trim_start_matches('0');
        return trimmed.ends_with(mode) && trimmed.len() <= mode.len() + 1;
    }
    if mode == "777" {
        // Symbolic forms that make a file writable by everyone.
        let (who, perms) = match word.split_once(['+', '=']) {
            Some(split) => split,
            None => return false,
        };
        return who.chars().all(|c| "ugoa".contains(c))
            && (who.contains('a') || who.contains('o'))
            && perms.contains('w');
    }
    false
}

fn is_flag(word: &str) -> bool {
    word.len() > 1 && word.starts_with('-') && !word[1..].starts_with(|c: char| c.is_ascii_digit())
}

fn add_flags(word: &str, flags: &mut BTreeSet<char>, long_flags: &mut BTreeSet<String>) {
    if let Some(long) = word.strip_prefix("--") {
        match long {
            "recursive" => {
                flags.insert('r');
            }
            "force" => {
                flags.insert('f');
            }
            _ => {
                long_flags.insert(long.to_owned());
            }
        }
    } else {
        flags.extend(word[1..].chars().map(|c| if c == 'R' { 'r' } else { c }));
    }
}
