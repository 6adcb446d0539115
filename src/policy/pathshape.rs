//! Paths as policy sees them: lexical, component by component, where a
//! component may be a glob. Used by the guards to ask "may this word name
//! something under `~/.ssh`?" for literal paths, shell globs (`~/.ss*`)
//! and words with a variable (`$HOME/.ssh/id_rsa`).
//!
//! Lexical only: symlinks are the file tools' business (docs/security.md S2) and
//! the sandbox's (S1). Policy never touches the disk.

use std::path::{Component, Path};

use super::shell::Seg;

/// One path component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Comp {
    Lit(String),
    Pat(Vec<Tok>),
    /// `**`: any number of components, with any names.
    Any,
    /// `**` of a shell glob in a word: any number of components, none of
    /// them a hidden name (bash's `globstar` skips names that start with
    /// `.`, as `*` does: [`Tok::Star`] `dot: false`).
    Deep,
}

/// A piece of a glob component.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Char(char),
    /// `*`; `dot` when it may match a leading `.` (a variable's value may,
    /// a shell glob may not).
    Star {
        dot: bool,
    },
    One,
    Class {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

/// A resolved word: absolute components, or (`floating`) components that
/// sit under some unknown directory (`$X/.ssh`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    pub comps: Vec<Comp>,
    pub floating: bool,
}

impl Resolved {
    /// True if and only if every component is literal and the path is
    /// anchored: a path policy can reason about exactly.
    pub fn is_exact(&self) -> bool {
        !self.floating && self.comps.iter().all(|c| matches!(c, Comp::Lit(_)))
    }

    /// `/a/b` for an exact path.
    pub fn display(&self) -> String {
        let mut text = String::new();
        for comp in &self.comps {
            text.push('/');
            match comp {
                Comp::Lit(name) => text.push_str(name),
                Comp::Pat(_) => text.push('*'),
                Comp::Any | Comp::Deep => text.push_str("**"),
            }
        }
        if text.is_empty() {
            text.push('/');
        }
        text
    }

    /// True if and only if this path may name `pattern` or something
    /// under it (`pattern` ends with [`Comp::Any`] for that).
    pub fn may_match(&self, pattern: &[Comp]) -> bool {
        if !self.floating {
            return intersect(&self.comps, pattern);
        }
        // A floating path must show a literal component of its own, lined
        // up with a non-`**` component of the pattern; the unknown prefix
        // (`$X`) proves nothing either way.
        let Some(first) = self.comps.iter().position(|c| matches!(c, Comp::Lit(_))) else {
            return false;
        };
        let tail = &self.comps[first..];
        (0..pattern.len()).any(|start| {
            !matches!(pattern[start], Comp::Any | Comp::Deep)
                && comp_overlap(&tail[0], &pattern[start])
                && intersect(tail, &pattern[start..])
        })
    }

    /// True if and only if this exact path is a proper ancestor of what
    /// `pattern` names (`/home/u` for `/home/u/.ssh/**`).
    pub fn may_contain(&self, pattern: &[Comp]) -> bool {
        if self.floating || matches!(pattern.first(), Some(Comp::Any | Comp::Deep)) {
            return false;
        }
        let mut under = self.comps.clone();
        under.push(Comp::Any);
        !self.may_match(pattern) && intersect(&under, pattern)
    }

    /// True if and only if the path is exactly `root` or under it.
    pub fn is_under(&self, root: &[Comp]) -> bool {
        self.is_exact() && self.comps.len() >= root.len() && self.comps[..root.len()] == *root
    }
}

/// Components of an absolute filesystem path (lossy for non-UTF-8).
pub(crate) fn path_comps(path: &Path) -> Vec<Comp> {
    let mut comps = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(name) => comps.push(Comp::Lit(name.to_string_lossy().into_owned())),
            Component::ParentDir => {
                comps.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    comps
}

/// Context for resolving words.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Base<'a> {
    /// The directory relative words start from.
    pub cwd: &'a [Comp],
    pub home: Option<&'a [Comp]>,
    /// The directory is unknown (after `cd $X`): relative words float.
    pub floating_cwd: bool,
}

/// Resolves a word's shape lexically.
pub(crate) fn resolve(shape: &[Seg], base: Base<'_>) -> Resolved {
    let mut segs = shape.iter().peekable();
    let mut floating = false;
    let mut builder = Builder::default();
    match segs.peek() {
        Some(Seg::Var(name)) if name == "HOME" && base.home.is_some() => {
            builder.comps = base.home.map(<[Comp]>::to_vec).unwrap_or_default();
            segs.next();
        }
        Some(Seg::Var(name)) if name == "PWD" => {
            builder.comps = base.cwd.to_vec();
            segs.next();
        }
        Some(Seg::Var(_)) => floating = true,
        Some(Seg::Lit(text)) if text.starts_with('/') => {}
        _ => {
            builder.comps = base.cwd.to_vec();
            floating = base.floating_cwd;
        }
    }
    for seg in segs {
        match seg {
            Seg::Lit(text) => {
                for c in text.chars() {
                    if c == '/' {
                        builder.end_component();
                    } else {
                        builder.current.push(Tok::Char(c));
                    }
                }
            }
            Seg::Glob(glob) => builder.current.extend(glob_tokens(glob)),
            Seg::Var(_) => builder.current.push(Tok::Star { dot: true }),
        }
    }
    builder.end_component();
    Resolved {
        comps: builder.comps,
        floating,
    }
}

/// Resolves a plain path string (a file tool's argument, a guard entry).
/// `~` and `**` and globs are understood; `base` is the workdir.
pub(crate) fn resolve_text(text: &str, base: Base<'_>, globs: bool) -> Resolved {
    let mut shape = Vec::new();
    let rest = if text == "~" || text.starts_with("~/") {
        shape.push(Seg::Var("HOME".to_owned()));
        &text[1..]
    } else {
        text
    };
    let mut literal = String::new();
    for c in rest.chars() {
        if globs && matches!(c, '*' | '?') {
            if !literal.is_empty() {
                shape.push(Seg::Lit(std::mem::take(&mut literal)));
            }
            shape.push(Seg::Glob(c.to_string()));
        } else {
            literal.push(c);
        }
    }
    if !literal.is_empty() {
        shape.push(Seg::Lit(literal));
    }
    let mut resolved = if text.starts_with("**") {
        // `**/.env` is anywhere, not under the workdir only.
        resolve(&shape, Base { cwd: &[], ..base })
    } else {
        resolve(&shape, base)
    };
    // A pattern's or a path's `**` is any components, hidden ones too.
    for comp in &mut resolved.comps {
        if *comp == Comp::Deep {
            *comp = Comp::Any;
        }
    }
    resolved
}

#[derive(Default)]
struct Builder {
    comps: Vec<Comp>,
    current: Vec<Tok>,
}

impl Builder {
    fn end_component(&mut self) {
        let toks = std::mem::take(&mut self.current);
        if toks.is_empty() {
            return;
        }
        let literal: Option<String> = toks
            .iter()
            .map(|t| match t {
                Tok::Char(c) => Some(*c),
                _ => None,
            })
            .collect();
        match literal.as_deref() {
            Some(".") => {}
            Some("..") => {
                if !matches!(self.comps.last(), Some(Comp::Any | Comp::Deep) | None) {
                    self.comps.pop();
                }
            }
            Some(name) => self.comps.push(Comp::Lit(name.to_owned())),
            None if toks.iter().all(|t| matches!(t, Tok::Star { dot: false }))
                && toks.len() >= 2 =>
            {
                self.comps.push(Comp::Deep);
            }
            None if toks.iter().all(|t| matches!(t, Tok::Star { .. })) && toks.len() >= 2 => {
                self.comps.push(Comp::Any);
            }
            None => self.comps.push(Comp::Pat(toks)),
        }
    }
}

fn glob_tokens(glob: &str) -> Vec<Tok> {
    match glob {
        "*" => vec![Tok::Star { dot: false }],
        "?" => vec![Tok::One],
        _ => {
            let inner: Vec<char> = glob
                .trim_start_matches('[')
                .trim_end_matches(']')
                .chars()
                .collect();
            let (negated, inner) = match inner.first() {
                Some('!' | '^') => (true, &inner[1..]),
                _ => (false, &inner[..]),
            };
            let mut ranges = Vec::new();
            let mut index = 0;
            while index < inner.len() {
                if inner.get(index + 1) == Some(&'-') && index + 2 < inner.len() {
                    ranges.push((inner[index], inner[index + 2]));
                    index += 3;
                } else {
                    ranges.push((inner[index], inner[index]));
                    index += 1;
                }
            }
            vec![Tok::Class { negated, ranges }]
        }
    }
}

/// True if and only if some path matches both component patterns.
/// Two non-literal components are assumed to overlap (fail closed).
pub(crate) fn intersect(a: &[Comp], b: &[Comp]) -> bool {
    let mut memo = vec![None; (a.len() + 1) * (b.len() + 1)];
    intersect_from(a, b, 0, 0, &mut memo)
}

fn intersect_from(a: &[Comp], b: &[Comp], i: usize, j: usize, memo: &mut [Option<bool>]) -> bool {
    let key = i * (b.len() + 1) + j;
    if let Some(known) = memo[key] {
        return known;
    }
    let result = match (a.get(i), b.get(j)) {
        (None, None) => true,
        (Some(Comp::Any), _) => {
            intersect_from(a, b, i + 1, j, memo)
                || (j < b.len() && intersect_from(a, b, i, j + 1, memo))
        }
        (_, Some(Comp::Any)) => {
            intersect_from(a, b, i, j + 1, memo)
                || (i < a.len() && intersect_from(a, b, i + 1, j, memo))
        }
        (Some(Comp::Deep), other) => {
            intersect_from(a, b, i + 1, j, memo)
                || (other.is_some_and(|c| !hidden(c)) && intersect_from(a, b, i, j + 1, memo))
        }
        (other, Some(Comp::Deep)) => {
            intersect_from(a, b, i, j + 1, memo)
                || (other.is_some_and(|c| !hidden(c)) && intersect_from(a, b, i + 1, j, memo))
        }
        (None, _) | (_, None) => false,
        (Some(x), Some(y)) => comp_overlap(x, y) && intersect_from(a, b, i + 1, j + 1, memo),
    };
    memo[key] = Some(result);
    result
}

/// A component that is certainly a hidden name (a literal `.x`), which a
/// shell glob's `**` does not cross.
fn hidden(comp: &Comp) -> bool {
    match comp {
        Comp::Lit(name) => name.starts_with('.'),
        Comp::Pat(toks) => toks.first() == Some(&Tok::Char('.')),
        Comp::Any | Comp::Deep => false,
    }
}

fn comp_overlap(x: &Comp, y: &Comp) -> bool {
    match (x, y) {
        (Comp::Lit(x), Comp::Lit(y)) => x == y,
        (Comp::Lit(name), Comp::Pat(toks)) | (Comp::Pat(toks), Comp::Lit(name)) => {
            glob_match(toks, name)
        }
        _ => true,
    }
}

/// Matches one glob component against a name, with the POSIX rule that a
/// leading `.` is only matched by a literal `.` (or a variable's value).
pub(crate) fn glob_match(toks: &[Tok], name: &str) -> bool {
    let chars: Vec<char> = name.chars().collect();
    if chars.first() == Some(&'.')
        && matches!(
            toks.first(),
            Some(Tok::Star { dot: false } | Tok::One | Tok::Class { .. })
        )
    {
        return false;
    }
    let mut memo = vec![None; (toks.len() + 1) * (chars.len() + 1)];
    match_from(toks, &chars, 0, 0, &mut memo)
}

fn match_from(toks: &[Tok], chars: &[char], t: usize, c: usize, memo: &mut [Option<bool>]) -> bool {
    let key = t * (chars.len() + 1) + c;
    if let Some(known) = memo[key] {
        return known;
    }
    let result = match toks.get(t) {
        None => c == chars.len(),
        Some(Tok::Star { .. }) => {
            match_from(toks, chars, t + 1, c, memo)
                || (c < chars.len() && match_from(toks, chars, t, c + 1, memo))
        }
        Some(tok) => {
            chars.get(c).is_some_and(|&ch| match tok {
                Tok::Char(expected) => ch == *expected,
                Tok::One => true,
                Tok::Class { negated, ranges } => {
                    ranges.iter().any(|(lo, hi)| (*lo..=*hi).contains(&ch)) != *negated
                }
                Tok::Star { .. } => false,
            }) && match_from(toks, chars, t + 1, c + 1, memo)
        }
    };
    memo[key] = Some(result);
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::shell;

    fn home() -> Vec<Comp> {
        path_comps(Path::new("/home/u"))
    }

    fn work() -> Vec<Comp> {
        path_comps(Path::new("/home/u/w"))
    }

    fn word(text: &str) -> Resolved {
        let parsed = shell::parse(&format!("cat {text}"));
        let home = home();
        let work = work();
        resolve(
            &parsed.parts[0].shapes[1],
            Base {
                cwd: &work,
                home: Some(&home),
                floating_cwd: false,
            },
        )
    }

    fn blocked(text: &str) -> Vec<Comp> {
        let home = home();
        let work = work();
        let mut comps = resolve_text(
            text,
            Base {
                cwd: &work,
                home: Some(&home),
                floating_cwd: false,
            },
            true,
        )
        .comps;
        comps.push(Comp::Any);
        comps
    }

    /// (word, blocked entry, may match)
    const MATCHES: &[(&str, &str, bool)] = &[
        ("~/.ssh/id_rsa", "~/.ssh", true),
        ("/home/u/.ssh", "~/.ssh", true),
        ("../.ssh/id_rsa", "~/.ssh", true),
        ("../../u/./.ssh/x", "~/.ssh", true),
        ("$HOME/.ssh/id_rsa", "~/.ssh", true),
        ("${HOME}/.ssh/id_rsa", "~/.ssh", true),
        ("$H/.ssh/id_rsa", "~/.ssh", true),
        ("~/.ss*/id_rsa", "~/.ssh", true),
        ("~/.s?h", "~/.ssh", true),
        ("~/.[s]sh", "~/.ssh", true),
        ("~/*/id_rsa", "~/.ssh", false),
        ("~/.*", "~/.ssh", true),
        ("/home/*/.ssh/k", "~/.ssh", true),
        ("$X", "~/.ssh", false),
        ("$TMPDIR/x", "~/.ssh", false),
        ("~/.sshx", "~/.ssh", false),
        ("src/main.rs", "~/.ssh", false),
        (".env", "**/.env", true),
        ("sub/dir/.env", "**/.env", true),
        (".e*", "**/.env", true),
        ("*", "**/.env", false),
        ("x.env", "**/.env", false),
        // A shell glob's `**` crosses no hidden name: `.env`, nor what is
        // under a hidden directory (`.env/` as a directory).
        ("**/*.rs", "**/.env", false),
        ("src/**", "**/.env", false),
        ("**/.env", "**/.env", true),
        ("**/.e*", "**/.env", true),
        ("**/*", "~/.ssh", false),
        ("/home/**/k", "~/.ssh", false),
        ("/home/u/**/.ssh/k", "~/.ssh", true),
        ("$X/**/*.rs", "**/.env", false),
        ("/proc/self/environ", "/proc/*/environ", true),
        ("/proc/1/environ", "/proc/*/environ", true),
        ("/proc/$$/environ", "/proc/*/environ", true),
        ("/proc/cpuinfo", "/proc/*/environ", false),
    ];

    #[test]
    fn words_against_blocked_paths() {
        for (text, entry, expected) in MATCHES {
            assert_eq!(
                word(text).may_match(&blocked(entry)),
                *expected,
                "{text} vs {entry}: {:?}",
                word(text)
            );
        }
    }

    #[test]
    fn ancestors() {
        assert!(word("~").may_contain(&blocked("~/.ssh")));
        assert!(word("/").may_contain(&blocked("~/.ssh")));
        assert!(word("../..").may_contain(&blocked("~/.ssh")));
        assert!(!word("..").may_contain(&blocked("~/.ssh")) || work().len() == 3);
        assert!(!word(".").may_contain(&blocked("~/.ssh")));
        assert!(!word(".").may_contain(&blocked("**/.env")));
        assert!(!word("~/.ssh/x").may_contain(&blocked("~/.ssh")));
    }

    #[test]
    fn lexical_normalization() {
        assert_eq!(word("/a/../b/./c//d/").display(), "/b/c/d");
        assert_eq!(word("/..").display(), "/");
        assert_eq!(word("x").display(), "/home/u/w/x");
        assert!(word("x").is_under(&work()));
        assert!(!word("../x").is_under(&work()));
        assert!(!word("*.rs").is_exact());
    }
}
