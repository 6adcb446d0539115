//! The module levels of docs/architecture.md: imports point only down, and
//! the L2 modules never use each other; inside the runner, the engine never
//! uses a door.
//!
//! Each file under `src/` is read as Rust tokens (comments and literals
//! blanked first), not as lines: every `use` item is parsed up to its `;`,
//! nested and multi-line `crate::{…}` groups included, and every path in
//! code that starts at `crate`, `self`, `super` or a child module is
//! resolved against the file's own module path, as is every path that
//! begins at a name a `use` binds (`use crate as x;` … `x::runner`). A
//! `pub use` or `pub type` that hands a lower module to a level that may
//! not name it is flagged too, and so is a glob or alias of the crate
//! root (`use crate::*`, `use crate as x`): what it brings in goes by
//! unseen names. A `#[path]` module is scanned where it is mounted, and
//! production code has none.
//!
//! The CLI parses argv, builds options and maps errors to exit codes: it
//! reaches the agent, the providers, the tools, task files, policies and
//! git only through the runner (`runner::run`, `runner::chat::Chat`,
//! `runner::inspect`, `runner::toolbox::tools` for `ybs tools`),
//! and prints through `report::terminal`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// module → modules it may use.
const MAY_USE: &[(&str, &[&str])] = &[
    ("core", &[]),
    ("llm", &["core"]),
    ("tools", &["core"]),
    ("policy", &["core"]),
    ("git", &["core"]),
    ("report", &["core"]),
    ("task", &["core", "policy", "llm", "tools"]),
    ("agent", &["core", "llm", "tools", "policy"]),
    ("config", &["core", "task", "policy", "llm", "tools"]),
    (
        "runner",
        &[
            "core", "llm", "tools", "policy", "git", "report", "task", "agent", "config",
        ],
    ),
    ("cli", &["core", "report", "config", "runner"]),
];

/// The runner's rooms (a file `src/runner/<room>.rs` or a folder
/// `src/runner/<room>/`). The doors are the ways into a run, one per
/// command; the engine is what every door shares. A door may use the
/// engine; the engine never uses a door. `mod.rs` is the room's root: it
/// may re-export a door (`pub use front::run`), but its code is engine.
///
/// `resume` is a door: the pause state that `task_run` writes lives in
/// `pause`, the worktree reopening `prepare` uses in `workspace`, and the
/// end every run shares (totals, step outputs, OpenTelemetry, the
/// unconfined warning) in `session`.
const RUNNER_DOORS: &[&str] = &[
    "front",
    "resume",
    "chat",
    "toolbox",
    "inspect",
    "schemas",
    "approve",
    "adhoc",
    "scratch",
    "clean",
    "sandbox_check",
];
pub(super) const RUNNER_ENGINE: &[&str] = &[
    "load",
    "lazy",
    "context",
    "select",
    "dirs",
    "mod",
    "batch",
    "options",
    "error",
    "prepare",
    "task_run",
    "checks",
    "workspace",
    "state",
    "results",
    "redacting",
    "subject",
    "tools",
    "pause",
    "session",
    "agents_md",
    "answer",
    "parallel",
    "matrix",
    "breaker",
    "rule_tools",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The text with comments, strings and character literals blanked to
/// spaces (line breaks kept, so line numbers hold).
fn blank_comments_and_literals(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let blank = |out: &mut String, c: char| out.push(if c == '\n' { '\n' } else { ' ' });
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if c == 'r'
            && matches!(next, Some('"' | '#'))
            && (i == 0 || !(chars[i - 1].is_alphanumeric() || chars[i - 1] == '_'))
        {
            // A raw string: r"…", r#"…"#, … (or the `r#ident` form).
            let mut j = i + 1;
            while chars.get(j) == Some(&'#') {
                j += 1;
            }
            if chars.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            let hashes = j - i - 1;
            let mut k = j + 1;
            while k < chars.len() {
                if chars[k] == '"' && (1..=hashes).all(|h| chars.get(k + h) == Some(&'#')) {
                    k += 1 + hashes;
                    break;
                }
                k += 1;
            }
            for &c in &chars[i..k.min(chars.len())] {
                blank(&mut out, c);
            }
            i = k;
        } else if c == '"' {
            blank(&mut out, c);
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                if chars[i] == '\\' {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
                if i < chars.len() {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
            if i < chars.len() {
                blank(&mut out, chars[i]);
                i += 1;
            }
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{1F600}') or a lifetime ('a).
            let end = if next == Some('\\') {
                (i + 3..chars.len()).find(|&k| chars[k] == '\'')
            } else if chars.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match end {
                Some(end) => {
                    for &c in &chars[i..=end] {
                        blank(&mut out, c);
                    }
                    i = end + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

#[derive(Debug, Clone, PartialEq)]
enum Token {
    Ident(String),
    Punct(&'static str),
    Other,
}

/// Identifiers and the punctuation paths are made of, each with its line.
fn tokens(code: &str) -> Vec<(Token, usize)> {
    let mut out = Vec::new();
    let mut line = 1;
    let chars: Vec<char> = code.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\n' {
            line += 1;
            i += 1;
        } else if c.is_whitespace() {
            i += 1;
        } else if c.is_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let word: String = chars[start..i].iter().collect();
            out.push((Token::Ident(word.trim_start_matches("r#").to_owned()), line));
        } else if c == ':' && chars.get(i + 1) == Some(&':') {
            out.push((Token::Punct("::"), line));
            i += 2;
        } else if matches!(c, '-' | '=') && chars.get(i + 1) == Some(&'>') {
            // `->` and `=>`: not a closing `>`.
            out.push((Token::Other, line));
            i += 2;
        } else {
            let punct = match c {
                '{' => Token::Punct("{"),
                '}' => Token::Punct("}"),
                '(' => Token::Punct("("),
                ')' => Token::Punct(")"),
                ',' => Token::Punct(","),
                ';' => Token::Punct(";"),
                '*' => Token::Punct("*"),
                '$' => Token::Punct("$"),
                '<' => Token::Punct("<"),
                '>' => Token::Punct(">"),
                _ => Token::Other,
            };
            out.push((punct, line));
            i += 1;
        }
    }
    out
}

fn is_ident(token: Option<&(Token, usize)>, word: &str) -> bool {
    matches!(token, Some((Token::Ident(w), _)) if w == word)
}

fn is_punct(token: Option<&(Token, usize)>, punct: &str) -> bool {
    matches!(token, Some((Token::Punct(p), _)) if *p == punct)
}

/// One path a file names, as written (`crate::agent::Agent`,
/// `super::prepare::PreparedTask`), with the line of its first segment.
#[derive(Debug, Clone)]
pub(super) struct Named {
    pub(super) segments: Vec<String>,
    /// The line of each segment.
    pub(super) lines: Vec<usize>,
    /// From a `pub` or `pub(crate)` `use` item, or the type a `pub` or
    /// `pub(crate)` `type` alias names: a re-export.
    pub(super) exported: bool,
    /// The file's module at that point (inline `mod x { … }` included).
    pub(super) module: Vec<String>,
    /// Inside a test-only item (`#[cfg(test)] mod tests { … }`).
    in_test: bool,
    /// The name a `use` leaf binds (`Agent` for `crate::agent::Agent`,
    /// `x` for `crate as x`); `None` for a glob or a path in code.
    binds: Option<String>,
}

/// One path as written, each segment with its line.
type Path_ = Vec<(String, usize)>;

/// One leaf of a use tree: its path, and the name an `as` gives it.
type Leaf = (Path_, Option<String>);

/// Parses one use tree from `at`: `a::b::{c, d::{e, f}}`, `a::*`,
/// `a as b`, each leaf expanded into a path.
fn use_tree(tokens: &[(Token, usize)], at: &mut usize, prefix: &Path_, out: &mut Vec<Leaf>) {
    let mut path = prefix.clone();
    if is_punct(tokens.get(*at), "::") {
        *at += 1;
    }
    loop {
        match tokens.get(*at) {
            Some((Token::Ident(word), line)) => {
                path.push((word.clone(), *line));
                *at += 1;
                let mut alias = None;
                if is_ident(tokens.get(*at), "as") {
                    if let Some((Token::Ident(name), _)) = tokens.get(*at + 1) {
                        alias = Some(name.clone());
                    }
                    *at += 2;
                }
                if is_punct(tokens.get(*at), "::") {
                    *at += 1;
                    continue;
                }
                out.push((path, alias));
                return;
            }
            Some((Token::Punct("*"), line)) => {
                *at += 1;
                path.push(("*".to_owned(), *line));
                out.push((path, None));
                return;
            }
            Some((Token::Punct("{"), _)) => {
                *at += 1;
                while !is_punct(tokens.get(*at), "}") && *at < tokens.len() {
                    use_tree(tokens, at, &path, out);
                    if is_punct(tokens.get(*at), ",") {
                        *at += 1;
                    }
                }
                *at += 1;
                return;
            }
            _ => return,
        }
    }
}

/// Every `use` item in `tokens`: the index of its `use`, whether it is
/// `pub` or `pub(crate)`, and its leaves.
fn use_items(tokens: &[(Token, usize)]) -> Vec<(usize, bool, Vec<Leaf>)> {
    let mut out = Vec::new();
    for i in 0..tokens.len() {
        if !is_ident(tokens.get(i), "use") {
            continue;
        }
        let mut at = i + 1;
        let mut leaves = Vec::new();
        use_tree(tokens, &mut at, &Vec::new(), &mut leaves);
        out.push((i, is_pub(tokens, i), leaves));
    }
    out
}

/// The item at `at` is `pub` or `pub(crate)` (so seen outside its top-level module).
fn is_pub(tokens: &[(Token, usize)], at: usize) -> bool {
    is_ident(tokens.get(at.wrapping_sub(1)), "pub")
        || (is_punct(tokens.get(at.wrapping_sub(1)), ")")
            && is_ident(tokens.get(at.wrapping_sub(2)), "crate")
            && is_ident(tokens.get(at.wrapping_sub(4)), "pub"))
}

/// The name a `use` leaf binds: its alias, or its last segment (the one
/// before a trailing `self`); `None` for a glob and for `_`.
fn binds(path: &Path_, alias: Option<&String>) -> Option<String> {
    let name = match alias {
        Some(alias) => alias.clone(),
        None => {
            let mut names = path.iter().rev().map(|(s, _)| s);
            let last = names.next()?;
            if last == "self" {
                names.next()?.clone()
            } else {
                last.clone()
            }
        }
    };
    (name != "_" && name != "*").then_some(name)
}

/// A path in code from `at`: `first::second::…`, each segment with its line.
fn code_path(tokens: &[(Token, usize)], at: usize) -> (Path_, usize) {
    let mut path = Vec::new();
    if let Some((Token::Ident(first), line)) = tokens.get(at) {
        path.push((first.clone(), *line));
    }
    let mut at = at + 1;
    while is_punct(tokens.get(at), "::") {
        match tokens.get(at + 1) {
            Some((Token::Ident(next), line)) => path.push((next.clone(), *line)),
            _ => break,
        }
        at += 2;
    }
    (path, at)
}

/// The module at a point of a file: its own, and the inline modules open there.
fn within(module: &[String], inline: &[(String, usize)]) -> Vec<String> {
    let mut path = module.to_vec();
    path.extend(inline.iter().map(|(name, _)| name.clone()));
    path
}

/// The token ranges of a file's test-only items (`#[cfg(test)]` modules,
/// functions, …), and the names of the test-only child modules it
/// declares in files of their own (`#[cfg(test)] mod tests;`).
fn test_items(tokens: &[(Token, usize)]) -> (Vec<std::ops::Range<usize>>, BTreeSet<String>) {
    let mut ranges = Vec::new();
    let mut test_children = BTreeSet::new();
    let mut i = 0;
    while i < tokens.len() {
        let cfg_test = is_ident(tokens.get(i), "cfg")
            && is_punct(tokens.get(i + 1), "(")
            && is_ident(tokens.get(i + 2), "test")
            && is_punct(tokens.get(i + 3), ")");
        if !cfg_test {
            i += 1;
            continue;
        }
        // The item: up to its `;`, or its body's closing brace.
        let mut at = i + 4;
        while at < tokens.len() && !is_punct(tokens.get(at), ";") && !is_punct(tokens.get(at), "{")
        {
            if is_ident(tokens.get(at), "mod")
                && let Some((Token::Ident(name), _)) = tokens.get(at + 1)
                && is_punct(tokens.get(at + 2), ";")
            {
                test_children.insert(name.clone());
            }
            at += 1;
        }
        if is_punct(tokens.get(at), "{") {
            let mut depth = 0_usize;
            while at < tokens.len() {
                if is_punct(tokens.get(at), "{") {
                    depth += 1;
                } else if is_punct(tokens.get(at), "}") {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                at += 1;
            }
        }
        ranges.push(i..at + 1);
        i = at + 1;
    }
    (ranges, test_children)
}

/// Every path a file names: the leaves of its `use` items (and an
/// `extern crate self as x`), the paths in its code that begin at
/// `crate`, `self`, `super`, one of `children` (the modules declared
/// right below the file's module) or a name a `use` item binds to a
/// path in the crate (`use crate as x;` … `x::runner::run`), and the
/// type each `pub type` alias names.
pub(super) fn named_paths(
    text: &str,
    module: &[String],
    children: &BTreeSet<String>,
) -> Vec<Named> {
    let tokens = tokens(&blank_comments_and_literals(text));
    let (tests, _) = test_items(&tokens);
    let in_test = |at: usize| tests.iter().any(|range| range.contains(&at));
    let uses: BTreeMap<usize, (bool, Vec<Leaf>)> = use_items(&tokens)
        .into_iter()
        .map(|(at, exported, leaves)| (at, (exported, leaves)))
        .collect();
    let mut out = Vec::new();
    // Paths in code that begin at another name: resolved once the names
    // the `use` items bind are known.
    let mut pending = Vec::new();
    let named = |path: &Path_, exported: bool, module: Vec<String>, at: usize| Named {
        segments: path.iter().map(|(segment, _)| segment.clone()).collect(),
        lines: path.iter().map(|(_, line)| *line).collect(),
        exported,
        module,
        in_test: in_test(at),
        binds: None,
    };
    // Inline `mod x {`: the brace depth each opened at.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0_usize;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            (Token::Punct("{"), _) => depth += 1,
            (Token::Punct("}"), _) => {
                depth = depth.saturating_sub(1);
                if inline.last().is_some_and(|(_, at)| *at == depth) {
                    inline.pop();
                }
            }
            (Token::Ident(word), _)
                if word == "mod"
                    && matches!(tokens.get(i + 1), Some((Token::Ident(_), _)))
                    && is_punct(tokens.get(i + 2), "{") =>
            {
                if let Some((Token::Ident(name), _)) = tokens.get(i + 1) {
                    inline.push((name.clone(), depth));
                }
                i += 3;
                depth += 1;
                continue;
            }
            (Token::Ident(word), line)
                if word == "extern"
                    && is_ident(tokens.get(i + 1), "crate")
                    && is_ident(tokens.get(i + 2), "self") =>
            {
                let mut root = named(
                    &vec![("crate".to_owned(), *line)],
                    false,
                    within(module, &inline),
                    i,
                );
                if is_ident(tokens.get(i + 3), "as")
                    && let Some((Token::Ident(alias), _)) = tokens.get(i + 4)
                {
                    root.binds = Some(alias.clone());
                }
                out.push(root);
                i += 3;
                continue;
            }
            (Token::Ident(word), _) if word == "use" => {
                let module = within(module, &inline);
                if let Some((exported, leaves)) = uses.get(&i) {
                    for (path, alias) in leaves {
                        let mut leaf = named(path, *exported, module.clone(), i);
                        leaf.binds = binds(path, alias.as_ref());
                        out.push(leaf);
                    }
                }
                let mut at = i + 1;
                while at < tokens.len() && !is_punct(tokens.get(at), ";") {
                    at += 1;
                }
                i = at + 1;
                continue;
            }
            (Token::Ident(word), _) if word == "type" && is_pub(&tokens, i) => {
                // `pub type Name<…> = path::To<…>;`: the path after `=`
                // (the first token at the outer level that is not a
                // generic's bracket).
                let mut at = i + 2;
                let mut angle = 0_usize;
                while at < tokens.len() && !is_punct(tokens.get(at), ";") {
                    match &tokens[at] {
                        (Token::Punct("<"), _) => angle += 1,
                        (Token::Punct(">"), _) => angle = angle.saturating_sub(1),
                        (Token::Other, _) if angle == 0 => break,
                        _ => {}
                    }
                    at += 1;
                }
                if matches!(tokens.get(at), Some((Token::Other, _)))
                    && matches!(tokens.get(at + 1), Some((Token::Ident(_), _)))
                {
                    let (path, _) = code_path(&tokens, at + 1);
                    let alias = named(&path, true, within(module, &inline), i);
                    if path.len() == 1 {
                        pending.push(alias);
                    } else {
                        out.push(alias.clone());
                        pending.push(alias);
                    }
                }
                i += 1;
                continue;
            }
            (Token::Ident(word), _)
                if is_punct(tokens.get(i + 1), "::")
                    && !is_punct(tokens.get(i.wrapping_sub(1)), "::") =>
            {
                let (path, at) = code_path(&tokens, i);
                let found = named(&path, false, within(module, &inline), i);
                if matches!(word.as_str(), "crate" | "self" | "super")
                    || (inline.is_empty() && children.contains(word))
                {
                    out.push(found);
                } else {
                    pending.push(found);
                }
                i = at;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    // The names `use` items bind to paths in the crate.
    let aliases: BTreeMap<String, Vec<String>> = out
        .iter()
        .filter_map(|named| Some((named.binds.clone()?, resolve(named, children)?)))
        .collect();
    for mut found in pending {
        let Some(first) = found.segments.first() else {
            continue;
        };
        if matches!(first.as_str(), "crate" | "self" | "super") {
            continue;
        }
        let Some(base) = aliases.get(first) else {
            continue;
        };
        let line = found.lines[0];
        let mut segments = vec!["crate".to_owned()];
        segments.extend(base.iter().cloned());
        segments.extend(found.segments.iter().skip(1).cloned());
        let mut lines = vec![line; base.len() + 1];
        lines.extend(found.lines.iter().skip(1));
        found.segments = segments;
        found.lines = lines;
        out.push(found);
    }
    out
}

/// A path named in `module`, made absolute from the crate root; `None`
/// for a path outside the crate (`std::…`, `serde::…`).
impl Named {
    /// The line of the segment that names a module: the first one past
    /// `crate`, `self` and `super`.
    pub(super) fn line(&self) -> usize {
        self.segments
            .iter()
            .zip(&self.lines)
            .find(|(segment, _)| !matches!(segment.as_str(), "crate" | "self" | "super"))
            .or_else(|| self.segments.iter().zip(&self.lines).next_back())
            .map_or(0, |(_, line)| *line)
    }
}

pub(super) fn resolve(named: &Named, children: &BTreeSet<String>) -> Option<Vec<String>> {
    let mut segments = named.segments.iter().peekable();
    let mut path = match segments.peek().map(|s| s.as_str()) {
        Some("crate") => {
            segments.next();
            Vec::new()
        }
        Some("self") => {
            segments.next();
            named.module.clone()
        }
        Some("super") => {
            let mut path = named.module.clone();
            while segments.peek().is_some_and(|s| *s == "super") {
                segments.next();
                path.pop();
            }
            path
        }
        Some(first) if !named.module.is_empty() && children.contains(first) => named.module.clone(),
        _ => return None,
    };
    path.extend(segments.filter(|s| *s != "self").cloned());
    Some(path)
}

/// A source file: where it is, its module path, the modules right below it.
pub(super) struct Source {
    /// Relative to `src/`.
    pub(super) file: PathBuf,
    pub(super) module: Vec<String>,
    pub(super) children: BTreeSet<String>,
    pub(super) text: String,
}

/// The module path of a file under `src/` (`agent/run/admission.rs` →
/// `agent::run::admission`; a `mod.rs` is its folder's module).
fn module_of(file: &Path) -> Vec<String> {
    let mut module: Vec<String> = file
        .with_extension("")
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if module
        .last()
        .is_some_and(|m| m == "mod" || m == "lib" || m == "main")
    {
        module.pop();
    }
    module
}

/// A `#[path = "…"] mod name;` in a file: the line of its `mod`, the
/// path as written, and the module's name.
fn path_attributes(text: &str) -> Vec<(usize, String, String)> {
    let original: Vec<char> = text.chars().collect();
    let blanked: Vec<char> = blank_comments_and_literals(text).chars().collect();
    let skip = |mut at: usize| {
        // (A string literal is blanked too: stop at its quote.)
        while blanked.get(at).is_some_and(|c| c.is_whitespace()) && original.get(at) != Some(&'"') {
            at += 1;
        }
        at
    };
    let mut out = Vec::new();
    for start in 0..blanked.len() {
        if blanked[start] != '#' {
            continue;
        }
        let mut at = skip(start + 1);
        if blanked.get(at) != Some(&'[') {
            continue;
        }
        at = skip(at + 1);
        let word: String = blanked[at..].iter().take(4).collect();
        if word != "path"
            || blanked
                .get(at + 4)
                .is_some_and(|c| c.is_alphanumeric() || *c == '_')
        {
            continue;
        }
        at = skip(at + 4);
        if blanked.get(at) != Some(&'=') {
            continue;
        }
        at = skip(at + 1);
        // The literal is blanked: read it from the original text.
        if original.get(at) != Some(&'"') {
            continue;
        }
        let Some(close) = (at + 1..original.len()).find(|&k| original[k] == '"') else {
            continue;
        };
        let written: String = original[at + 1..close].iter().collect();
        let rest: String = blanked[close + 1..].iter().collect();
        let before = blanked[..close].iter().filter(|c| **c == '\n').count();
        let tokens = tokens(&rest);
        for (k, (token, line)) in tokens.iter().enumerate() {
            if matches!(token, Token::Punct(";" | "{")) {
                break;
            }
            if *token == Token::Ident("mod".to_owned())
                && let Some((Token::Ident(name), _)) = tokens.get(k + 1)
            {
                out.push((before + line, written.clone(), name.clone()));
                break;
            }
        }
    }
    out
}

/// `dir/written` with `.` and `..` folded away.
fn joined(dir: &Path, written: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for component in dir.join(written).components() {
        match component {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

/// The modules declared test-only (`#[cfg(test)] mod tests;`), by path.
fn test_modules(located: &[(PathBuf, Vec<String>, &String)]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (_, module, text) in located {
        for child in without_test_items(text).1 {
            let mut module = module.clone();
            module.push(child);
            out.push(module);
        }
    }
    out
}

/// The `#[path]` modules of production code: the file that declares one,
/// the line, the file it mounts (relative to `src/`) and the module
/// path it mounts it at.
fn path_mounts(files: &[(PathBuf, String)]) -> Vec<(PathBuf, usize, PathBuf, Vec<String>)> {
    let located: Vec<(PathBuf, Vec<String>, &String)> = files
        .iter()
        .map(|(file, text)| (file.clone(), module_of(file), text))
        .collect();
    let tests = test_modules(&located);
    let mut out = Vec::new();
    for (file, module, text) in &located {
        if tests.iter().any(|test| module.starts_with(test)) {
            continue;
        }
        let (kept, _) = without_test_items(text);
        for (line, written, name) in path_attributes(text) {
            let in_production = kept.iter().enumerate().any(|(k, (token, at))| {
                *at == line
                    && *token == Token::Ident("mod".to_owned())
                    && is_ident(kept.get(k + 1), &name)
            });
            if !in_production {
                continue;
            }
            let dir = file.parent().unwrap_or(Path::new(""));
            let mut mounted = module.clone();
            mounted.push(name);
            out.push((file.clone(), line, joined(dir, &written), mounted));
        }
    }
    out
}

/// Every file with its module path: where it lies, and again where a
/// production `#[path]` module mounts it.
pub(super) fn sources(files: &[(PathBuf, String)]) -> Vec<Source> {
    let mut entries: Vec<(PathBuf, Vec<String>, &String)> = files
        .iter()
        .map(|(file, text)| (file.clone(), module_of(file), text))
        .collect();
    for (_, _, target, module) in path_mounts(files) {
        if let Some((file, text)) = files.iter().find(|(file, _)| *file == target) {
            entries.push((file.clone(), module, text));
        }
    }
    entries
        .iter()
        .map(|(file, module, text)| Source {
            file: file.clone(),
            module: module.clone(),
            children: entries
                .iter()
                .map(|(_, m, _)| m)
                .filter(|m| m.len() == module.len() + 1 && m.starts_with(module))
                .filter_map(|m| m.last().cloned())
                .collect(),
            text: (*text).clone(),
        })
        .collect()
}

fn may_use(module: &str) -> Option<&'static [&'static str]> {
    MAY_USE
        .iter()
        .find(|(m, _)| *m == module)
        .map(|(_, uses)| *uses)
}

/// Every import against the levels, and every re-export that hands a
/// module to a level that may not name it.
fn level_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut violations = Vec::new();
    for source in sources(files) {
        let Some(own) = source.module.first() else {
            continue;
        };
        let Some(allowed) = may_use(own) else {
            continue;
        };
        for named in named_paths(&source.text, &source.module, &source.children) {
            let Some(path) = resolve(&named, &source.children) else {
                continue;
            };
            if path.is_empty() || path == ["*"] {
                // `use crate::*`, `use crate as x`: what is used from the
                // crate then goes by unseen names.
                violations.push(format!(
                    "{}:{}: `{own}` names the crate root whole (`{}`): name the module it uses",
                    source.file.display(),
                    named.line(),
                    named.segments.join("::")
                ));
                continue;
            }
            let Some(used) = path.first() else {
                continue;
            };
            if used == own || may_use(used).is_none() {
                continue;
            }
            let at = format!("{}:{}", source.file.display(), named.line());
            if !allowed.contains(&used.as_str()) {
                let violation = format!("{at}: `{own}` uses `crate::{used}`");
                if violations.last() != Some(&violation) {
                    violations.push(violation);
                }
            } else if named.exported {
                for (user, uses) in MAY_USE {
                    if uses.contains(&own.as_str())
                        && !uses.contains(&used.as_str())
                        && user != used
                    {
                        violations.push(format!(
                            "{at}: `{own}` re-exports `crate::{}` to `{user}`, which may not use `{used}`",
                            path.join("::")
                        ));
                    }
                }
            }
        }
    }
    violations
}

/// The runner's room a path inside the runner names: `runner::front::…`
/// is `front`; a name the root re-exports from a room is that room's.
fn room_of(path: &[String], reexports: &BTreeMap<String, String>) -> Option<String> {
    if path.first().map(String::as_str) != Some("runner") {
        return None;
    }
    let name = path.get(1)?;
    if RUNNER_DOORS.contains(&name.as_str()) || RUNNER_ENGINE.contains(&name.as_str()) {
        return Some(name.clone());
    }
    reexports.get(name).cloned()
}

/// Every use of a door by an engine room of the runner.
fn room_violations(files: &[(PathBuf, String)]) -> Vec<String> {
    let sources = sources(files);
    let runner: Vec<&Source> = sources
        .iter()
        .filter(|s| s.module.first().map(String::as_str) == Some("runner"))
        .collect();
    // What the root re-exports, by name: `pub use front::run` → run: front.
    let mut reexports = BTreeMap::new();
    for source in runner.iter().filter(|s| s.module.len() == 1) {
        for named in named_paths(&source.text, &source.module, &source.children) {
            let Some(path) = resolve(&named, &source.children) else {
                continue;
            };
            if !named.exported || path.first().map(String::as_str) != Some("runner") {
                continue;
            }
            if let (Some(room), Some(name)) = (path.get(1), path.last()) {
                reexports.insert(name.clone(), room.clone());
            }
        }
    }
    let mut violations = Vec::new();
    for source in runner {
        let room = source.module.get(1).map_or("mod", String::as_str);
        if !RUNNER_ENGINE.contains(&room) {
            continue;
        }
        for named in named_paths(&source.text, &source.module, &source.children) {
            // The root declares and re-exports the doors.
            if room == "mod" && named.exported {
                continue;
            }
            let Some(path) = resolve(&named, &source.children) else {
                continue;
            };
            if path == ["runner", "*"] && !named.in_test {
                // `use super::*` takes the root's re-exported doors too.
                violations.push(format!(
                    "{}:{}: the engine room `{room}` imports the runner's root whole (`{}`), its doors included",
                    source.file.display(),
                    named.line(),
                    named.segments.join("::")
                ));
            } else if let Some(used) = room_of(&path, &reexports)
                && RUNNER_DOORS.contains(&used.as_str())
            {
                violations.push(format!(
                    "{}:{}: the engine room `{room}` uses the door `{used}`",
                    source.file.display(),
                    named.line()
                ));
            }
        }
    }
    violations
}

/// The modules that may read the process environment (variables, the
/// working and temp directories): the CLI and `config`
/// (`config::process_environ`, `config::process_cwd`), and the crate root.
/// Everything else gets the values from them (`core::Environ`).
const ENV_READERS: &[&str] = &["cli", "config"];

/// What reads (or changes) the process environment, as `std::env::NAME`.
const ENV_READS: &[&str] = &[
    "var",
    "var_os",
    "vars",
    "vars_os",
    "temp_dir",
    "current_dir",
    "home_dir",
    "set_var",
    "remove_var",
    "set_current_dir",
];

/// The reads below `config` that stay, each for a reason.
const ENV_READS_ALLOWED: &[(&str, &str, &str)] = &[
    // `ybs __sandbox` is a program of its own (the confined child's first
    // process, docs/sandbox.md): it enters the directory it was started
    // in and works in its own temp directory, after ybs has handed over.
    (
        "tools/sandbox/helper.rs",
        "current_dir",
        "the sandbox helper process",
    ),
    (
        "tools/sandbox/helper.rs",
        "set_current_dir",
        "the sandbox helper process",
    ),
    (
        "tools/sandbox/helper.rs",
        "temp_dir",
        "the sandbox helper process",
    ),
    // `ybs __sandbox-init`, the same program kept for a task: each
    // program it starts enters the directory ybs asked for.
    (
        "tools/sandbox/helper/init.rs",
        "set_current_dir",
        "the resident sandbox process",
    ),
    // The sandbox is being rebuilt; these two move to `Environ` with it.
    (
        "tools/sandbox/placeholders.rs",
        "var_os",
        "the sandbox rebuild",
    ),
    (
        "tools/sandbox/private_temp.rs",
        "temp_dir",
        "the sandbox rebuild",
    ),
];

/// The text of a file without its test-only items (`#[cfg(test)]`
/// modules, functions, …), blanked; and the names of the test-only child
/// modules it declares in files of their own (`#[cfg(test)] mod tests;`).
fn without_test_items(text: &str) -> (Vec<(Token, usize)>, BTreeSet<String>) {
    let tokens = tokens(&blank_comments_and_literals(text));
    let (tests, test_children) = test_items(&tokens);
    let kept = tokens
        .into_iter()
        .enumerate()
        .filter(|(at, _)| !tests.iter().any(|range| range.contains(at)))
        .map(|(_, token)| token)
        .collect();
    (kept, test_children)
}

/// Each file's production code as tokens: without its test-only items,
/// and without the files of test-only modules (`#[cfg(test)] mod tests;`
/// and everything below it).
fn production(files: &[(PathBuf, String)]) -> Vec<(Source, Vec<(Token, usize)>)> {
    let mut test_modules: Vec<Vec<String>> = Vec::new();
    let mut scanned = Vec::new();
    for source in sources(files) {
        let (tokens, test_children) = without_test_items(&source.text);
        for child in test_children {
            let mut module = source.module.clone();
            module.push(child);
            test_modules.push(module);
        }
        scanned.push((source, tokens));
    }
    scanned.retain(|(source, _)| {
        !test_modules
            .iter()
            .any(|test| source.module.starts_with(test))
    });
    scanned
}

/// Every read of the process environment outside [`ENV_READERS`] and
/// test code, but those [`ENV_READS_ALLOWED`] lists: `file:line: std::env::NAME`.
fn env_reads(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut reads = Vec::new();
    for (source, tokens) in production(files) {
        let Some(own) = source.module.first() else {
            continue;
        };
        if ENV_READERS.contains(&own.as_str()) {
            continue;
        }
        let file = source.file.display().to_string();
        let mut found = |name: &str, line: usize| {
            let allowed = ENV_READS_ALLOWED
                .iter()
                .any(|(at, read, _)| *at == file && *read == name);
            let read = format!("{file}:{line}: std::env::{name}");
            if !allowed && !reads.contains(&read) {
                reads.push(read);
            }
        };
        // The names `std::env` goes by: its own, and each `as` it is given.
        let mut env = BTreeSet::from(["env".to_owned()]);
        for (_, _, leaves) in use_items(&tokens) {
            for (path, alias) in leaves {
                let mut segments: Vec<&str> = path.iter().map(|(s, _)| s.as_str()).collect();
                if segments.last() == Some(&"self") {
                    segments.pop();
                }
                if segments == ["std", "env"]
                    && let Some(alias) = alias
                {
                    env.insert(alias);
                }
            }
        }
        for i in 0..tokens.len() {
            // `env::NAME` in code or a `use` path, `env::{…, NAME}` in a
            // group, `env::*`.
            let named_env =
                matches!(tokens.get(i), Some((Token::Ident(word), _)) if env.contains(word));
            if !named_env || !is_punct(tokens.get(i + 1), "::") {
                continue;
            }
            match tokens.get(i + 2) {
                Some((Token::Ident(name), line)) if ENV_READS.contains(&name.as_str()) => {
                    found(name, *line);
                }
                Some((Token::Punct("*"), line)) => found("*", *line),
                Some((Token::Punct("{"), _)) => {
                    let mut at = i + 3;
                    while at < tokens.len() && !is_punct(tokens.get(at), "}") {
                        if let Some((Token::Ident(name), line)) = tokens.get(at)
                            && ENV_READS.contains(&name.as_str())
                        {
                            found(name, *line);
                        }
                        at += 1;
                    }
                }
                _ => {}
            }
        }
    }
    reads
}

pub(super) fn crate_files() -> Vec<(PathBuf, String)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            (file.strip_prefix(&src).unwrap().to_path_buf(), text)
        })
        .collect()
}

pub(super) fn fixture(files: &[(&str, &str)]) -> Vec<(PathBuf, String)> {
    files
        .iter()
        .map(|(file, text)| (PathBuf::from(file), (*text).to_owned()))
        .collect()
}

#[test]
fn a_planted_multi_line_group_is_caught() {
    // As rustfmt writes a group over 100 columns: one member a line, and a
    // nested group inside.
    let files = fixture(&[
        (
            "tools/planted.rs",
            "use crate::{\n    core::Message,\n    agent::{\n        Agent,\n        Stop,\n    },\n    llm::\n        Provider,\n};\n",
        ),
        ("tools/mod.rs", "mod planted;\n"),
    ]);
    assert_eq!(
        level_violations(&files),
        [
            "tools/planted.rs:3: `tools` uses `crate::agent`",
            "tools/planted.rs:7: `tools` uses `crate::llm`",
        ]
    );
}

#[test]
fn paths_in_code_and_relative_paths_are_resolved() {
    let files = fixture(&[
        (
            "agent/run/deep.rs",
            "fn f() {\n    let _ = crate::runner::run;\n    super::super::super::git::open();\n    super::Agent::new();\n}\n",
        ),
        ("agent/run.rs", "mod deep;\n"),
    ]);
    assert_eq!(
        level_violations(&files),
        [
            "agent/run/deep.rs:2: `agent` uses `crate::runner`",
            "agent/run/deep.rs:3: `agent` uses `crate::git`",
        ]
    );
}

#[test]
fn comments_strings_and_allowed_uses_are_not_imports() {
    let files = fixture(&[(
        "llm/quiet.rs",
        "// use crate::agent::Agent;\n/* crate::runner::run /* nested */ crate::git */\nconst A: &str = \"crate::agent::x\";\nconst B: &str = r#\"use crate::{agent, runner};\"#;\nconst C: char = '\"';\nfn f<'a>(x: &'a str) -> &'a str { x }\nuse crate::core::{self, Message};\nmod tests {\n    use super::*;\n}\n",
    )]);
    assert_eq!(level_violations(&files), Vec::<String>::new());
}

#[test]
fn a_re_export_may_not_hand_a_lower_module_up_past_its_level() {
    let files = fixture(&[(
        "runner/mod.rs",
        "pub use crate::agent::Stop;\npub use crate::report::Console;\npub(crate) use crate::{\n    git::Repo,\n};\nuse crate::task::TaskSpec;\n",
    )]);
    assert_eq!(
        level_violations(&files),
        [
            "runner/mod.rs:1: `runner` re-exports `crate::agent::Stop` to `cli`, which may not use `agent`",
            "runner/mod.rs:4: `runner` re-exports `crate::git::Repo` to `cli`, which may not use `git`",
        ]
    );
}

#[test]
fn a_planted_engine_use_of_a_door_is_caught() {
    let files = fixture(&[
        (
            "runner/mod.rs",
            "mod front;\nmod prepare;\nmod chat;\npub use front::run;\nfn execute() {\n    chat::Session::open();\n}\n",
        ),
        ("runner/front.rs", "use super::prepare::PreparedTask;\n"),
        ("runner/chat.rs", ""),
        (
            "runner/prepare.rs",
            "use super::{\n    RunError,\n    run,\n};\n",
        ),
    ]);
    assert_eq!(
        room_violations(&files),
        [
            "runner/mod.rs:6: the engine room `mod` uses the door `chat`",
            "runner/prepare.rs:3: the engine room `prepare` uses the door `front`",
        ]
    );
}

#[test]
fn the_cli_reaches_agents_providers_and_tools_only_through_the_runner() {
    let cli = may_use("cli").unwrap();
    for below in ["agent", "llm", "tools", "task", "policy", "git"] {
        assert!(!cli.contains(&below), "cli may not use `{below}`");
    }
}

#[test]
fn imports_point_only_down() {
    let violations = level_violations(&crate_files());
    assert!(
        violations.is_empty(),
        "imports against the module levels:\n{}",
        violations.join("\n")
    );
}

/// The scan reads every file whole: with comments and literals blanked,
/// each file's braces balance (a literal read as code would unbalance
/// them), and the crate's own imports are seen.
#[test]
fn the_scan_reads_every_file_whole() {
    let files = crate_files();
    for (file, text) in &files {
        let mut depth = 0_i64;
        for (token, _) in tokens(&blank_comments_and_literals(text)) {
            match token {
                Token::Punct("{") => depth += 1,
                Token::Punct("}") => depth -= 1,
                _ => {}
            }
            assert!(depth >= 0, "{}: a `}}` closes nothing", file.display());
        }
        assert_eq!(depth, 0, "{}: braces do not balance", file.display());
    }
    let seen: usize = sources(&files)
        .iter()
        .map(|source| {
            named_paths(&source.text, &source.module, &source.children)
                .iter()
                .filter(|named| resolve(named, &source.children).is_some())
                .count()
        })
        .sum();
    assert!(seen > 1000, "only {seen} paths into the crate seen");
}

#[test]
fn the_runners_engine_never_uses_a_door() {
    let violations = room_violations(&crate_files());
    assert!(
        violations.is_empty(),
        "the runner's engine uses a door:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_runner_room_is_classified() {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runner");
    for entry in std::fs::read_dir(&runner).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        assert!(
            RUNNER_DOORS.contains(&name.as_str()) || RUNNER_ENGINE.contains(&name.as_str()),
            "src/runner/{name} is neither a door nor engine (RUNNER_DOORS, RUNNER_ENGINE)"
        );
    }
}

#[test]
fn every_top_level_module_is_classified() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for entry in std::fs::read_dir(&src).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            assert!(
                may_use(&name).is_some(),
                "src/{name} has no level in MAY_USE"
            );
        }
    }
}

#[test]
fn a_planted_read_of_the_environment_below_config_is_caught() {
    let files = fixture(&[
        (
            "tools/planted.rs",
            "use std::env;\nuse std::env::{self as e,\n    var_os};\nfn f() {\n    let _ = env::var(\"HOME\");\n    let _ = std::env::temp_dir();\n    // std::env::var(\"IN_A_COMMENT\")\n    let _ = \"std::env::vars()\";\n}\n#[cfg(test)]\nmod tests {\n    fn g() { std::env::var(\"T\"); }\n}\n",
        ),
        (
            "report/deep.rs",
            "#[cfg(test)]\nmod tests;\nfn f() { std::env::current_dir(); }\n",
        ),
        ("report/deep/tests.rs", "fn t() { std::env::var(\"X\"); }\n"),
        ("config/read.rs", "fn f() { std::env::vars_os(); }\n"),
        ("cli/read.rs", "fn f() { std::env::var(\"X\"); }\n"),
    ]);
    assert_eq!(
        env_reads(&files),
        [
            "tools/planted.rs:3: std::env::var_os",
            "tools/planted.rs:5: std::env::var",
            "tools/planted.rs:6: std::env::temp_dir",
            "report/deep.rs:3: std::env::current_dir",
        ]
    );
}

/// Nothing below `config` reads the process environment: `config` reads
/// it once (`config::process_environ`) and the values are passed down.
#[test]
fn nothing_below_config_reads_the_process_environment() {
    let reads = env_reads(&crate_files());
    assert!(
        reads.is_empty(),
        "reads of the process environment below `config` (take the value from \
         `core::Environ`, handed down from `config::process_environ`):\n{}",
        reads.join("\n")
    );
}

#[test]
fn every_allowed_read_of_the_environment_is_still_there() {
    let files = crate_files();
    for (file, read, why) in ENV_READS_ALLOWED {
        let (_, text) = files
            .iter()
            .find(|(path, _)| path.display().to_string() == *file)
            .unwrap_or_else(|| panic!("{file} ({why}) is gone: drop it from ENV_READS_ALLOWED"));
        assert!(
            text.contains(&format!("env::{read}")),
            "{file} no longer reads `std::env::{read}` ({why}): drop it from ENV_READS_ALLOWED"
        );
    }
}

/// The one place production code reads the process environment into a
/// `core::Environ` (`config::process_environ`): the CLI's entry, as file
/// and function. Every command and the runner get the value from there.
const ENVIRON_READ_AT: (&str, &str) = ("cli/mod.rs", "main");

/// Every production site that names `config::process_environ` (a call, or
/// the function taken as a value), or a name a `use` gives it, but its
/// definition and the `use` items themselves: `(file, line, function)`,
/// the function being the `fn` the site is in.
fn environ_reads(files: &[(PathBuf, String)]) -> Vec<(String, usize, String)> {
    let mut sites = Vec::new();
    for (source, tokens) in production(files) {
        let mut names = BTreeSet::from(["process_environ".to_owned()]);
        let mut in_use = vec![false; tokens.len()];
        for (at, _, leaves) in use_items(&tokens) {
            for (path, alias) in leaves {
                if path
                    .last()
                    .is_some_and(|(last, _)| last == "process_environ")
                    && let Some(alias) = alias
                {
                    names.insert(alias);
                }
            }
            let mut end = at;
            while end < tokens.len() && !is_punct(tokens.get(end), ";") {
                in_use[end] = true;
                end += 1;
            }
        }
        let mut function = String::new();
        for (i, (token, line)) in tokens.iter().enumerate() {
            let Token::Ident(word) = token else {
                continue;
            };
            if is_ident(tokens.get(i.wrapping_sub(1)), "fn") {
                function.clone_from(word);
            } else if names.contains(word) && !in_use[i] {
                sites.push((source.file.display().to_string(), *line, function.clone()));
            }
        }
    }
    sites
}

/// What is wrong with where the process environment is read: each site
/// but [`ENVIRON_READ_AT`], or that one missing.
fn environ_read_problems(files: &[(PathBuf, String)]) -> Vec<String> {
    let sites = environ_reads(files);
    let (file, function) = ENVIRON_READ_AT;
    let mut problems: Vec<String> = sites
        .iter()
        .filter(|(at, _, within)| (at.as_str(), within.as_str()) != ENVIRON_READ_AT)
        .map(|(at, line, within)| format!("{at}:{line}: in fn {within}"))
        .collect();
    let entry = sites
        .iter()
        .filter(|(at, _, within)| (at.as_str(), within.as_str()) == ENVIRON_READ_AT)
        .count();
    if entry != 1 {
        problems.push(format!(
            "{file}: fn {function} reads it {entry} times, not once"
        ));
    }
    problems
}

#[test]
fn a_planted_second_read_of_the_environ_is_caught() {
    let entry = (
        "cli/mod.rs",
        "pub fn main() -> u8 {\n    let environ = crate::config::process_environ();\n    cmd::dispatch(&environ)\n}\n",
    );
    let config = (
        "config/mod.rs",
        "mod load;\npub use load::{process_cwd, process_environ};\n/// process_environ() in a comment\npub fn defined() {}\n",
    );
    let definition = (
        "config/load.rs",
        "pub fn process_environ() -> Environ {\n    Environ::new(std::env::vars_os())\n}\n#[cfg(test)]\nmod tests {\n    fn t() { super::process_environ(); }\n}\n",
    );
    assert_eq!(
        environ_read_problems(&fixture(&[entry, config, definition])),
        Vec::<String>::new()
    );
    let planted = fixture(&[
        config,
        definition,
        (
            "runner/load.rs",
            "use crate::config;\nfn load_with() {\n    let environ = config::process_environ();\n}\n",
        ),
        (
            "cli/cmd/report.rs",
            "use crate::config::process_environ as read;\nfn merge() {\n    let steps = read();\n}\nfn html() {\n    let f: fn() -> Environ = crate::config::process_environ;\n}\n",
        ),
        (
            "cli/mod.rs",
            "pub fn main() -> u8 {\n    let environ = crate::config::process_environ();\n    let again = crate::config::process_environ();\n    cmd::dispatch(&environ)\n}\n",
        ),
    ]);
    assert_eq!(
        environ_read_problems(&planted),
        [
            "runner/load.rs:3: in fn load_with",
            "cli/cmd/report.rs:3: in fn merge",
            "cli/cmd/report.rs:6: in fn html",
            "cli/mod.rs: fn main reads it 2 times, not once",
        ]
    );
    assert_eq!(
        environ_read_problems(&fixture(&[config, definition])),
        ["cli/mod.rs: fn main reads it 0 times, not once"]
    );
}

/// The process environment is read into an `Environ` once, at the CLI's
/// entry, and passed down to every command and into the runner.
#[test]
fn the_environ_is_read_once_at_the_entry() {
    let problems = environ_read_problems(&crate_files());
    assert!(
        problems.is_empty(),
        "`config::process_environ` is called once, in {}: fn {} (take the \
         `core::Environ` handed down from there):\n{}",
        ENVIRON_READ_AT.0,
        ENVIRON_READ_AT.1,
        problems.join("\n")
    );
}

/// No production function is longer than this many lines, from `fn` to
/// its closing brace.
const LONGEST_FUNCTION: usize = 150;
/// A production function over this many lines is long ...
const LONG_FUNCTION: usize = 100;
/// ... and at most this many are.
const MOST_LONG_FUNCTIONS: usize = 10;
/// At most this many `Result<…, String>` in production code: errors are
/// typed (`thiserror`) at module boundaries.
const MOST_STRING_ERRORS: usize = 10;

/// Every production function (test code left out) with its length in
/// lines, from `fn` to its closing brace, longest first:
/// `(file:line: `name`, length)`.
fn function_lengths(files: &[(PathBuf, String)]) -> Vec<(String, usize)> {
    let mut out = Vec::new();
    for (source, tokens) in production(files) {
        for (i, (token, line)) in tokens.iter().enumerate() {
            let (Token::Ident(word), Some((Token::Ident(name), _))) = (token, tokens.get(i + 1))
            else {
                continue;
            };
            if word != "fn" {
                continue;
            }
            // The body's opening brace; a `;` first is a declaration only.
            let Some(open) = (i + 2..tokens.len())
                .find(|&at| is_punct(tokens.get(at), "{") || is_punct(tokens.get(at), ";"))
            else {
                continue;
            };
            if is_punct(tokens.get(open), ";") {
                continue;
            }
            let mut depth = 0_usize;
            for (token, end) in &tokens[open..] {
                match token {
                    Token::Punct("{") => depth += 1,
                    Token::Punct("}") => {
                        depth -= 1;
                        if depth == 0 {
                            let at = format!("{}:{line}: `{name}`", source.file.display());
                            out.push((at, end - line + 1));
                            break;
                        }
                    }
                    _ => {}
                }
            }
        }
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

/// Every `Result<…, String>` in production code (test code left out),
/// nested generics and lines split by rustfmt included: `file:line`.
fn string_errors(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut out = Vec::new();
    for (source, tokens) in production(files) {
        for (i, (token, line)) in tokens.iter().enumerate() {
            if *token != Token::Ident("Result".to_owned()) || !is_punct(tokens.get(i + 1), "<") {
                continue;
            }
            // The arguments at the outer level, up to the closing `>`.
            let mut depth = 0_usize;
            let mut arguments: Vec<Vec<&Token>> = vec![Vec::new()];
            for (token, _) in &tokens[i + 1..] {
                match token {
                    Token::Punct("<" | "(" | "{") => depth += 1,
                    Token::Punct(">" | ")" | "}") => depth -= 1,
                    Token::Punct(",") if depth == 1 => {
                        arguments.push(Vec::new());
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if let Some(argument) = arguments.last_mut() {
                    argument.push(token);
                }
            }
            if arguments.last().is_some_and(Vec::is_empty) {
                arguments.pop(); // a trailing comma
            }
            let string = Token::Ident("String".to_owned());
            if arguments.len() == 2 && arguments[1] == [&string] {
                out.push(format!("{}:{line}", source.file.display()));
            }
        }
    }
    out
}

/// The long functions, each with its length, for a failure message.
fn listed(functions: &[(String, usize)]) -> String {
    functions
        .iter()
        .map(|(at, length)| format!("{at} {length} lines"))
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn a_planted_long_function_is_measured_and_test_code_is_not() {
    let body = |lines: usize| "    let _ = 1;\n".repeat(lines - 2);
    let long = format!(
        "/// fn commented() {{\n{}\nfn long(\n    x: &str,\n) -> Result<(), String> {{\n    let _ = \"{{\";\n{}}}\ntrait T {{\n    fn declared(&self);\n}}\nfn short() {{ let f: fn() = || {{}}; }}\n#[cfg(test)]\nmod tests {{\n    fn in_a_test() {{\n{}    }}\n}}\n",
        "// }\n".repeat(200),
        body(200),
        body(300),
    );
    let files = fixture(&[
        ("tools/long.rs", &long),
        ("tools/mod.rs", "mod long;\n#[cfg(test)]\nmod tests;\n"),
        (
            "tools/tests.rs",
            &format!("fn helper() {{\n{}}}\n", body(300)),
        ),
    ]);
    assert_eq!(
        function_lengths(&files),
        [
            ("tools/long.rs:203: `long`".to_owned(), 203),
            ("tools/long.rs:409: `short`".to_owned(), 1),
        ]
    );
}

#[test]
fn a_planted_string_error_is_counted_and_test_code_is_not() {
    let files = fixture(&[
        (
            "llm/planted.rs",
            "fn a() -> Result<(), String> { todo!() }\nfn b() -> Result<\n    Vec<(u8, String)>,\n    String,\n> { todo!() }\nfn c() -> io::Result<String> { todo!() }\nfn d() -> Result<String, Error> { todo!() }\nfn e() -> Result<Box<dyn Fn() -> u8>, String> { todo!() }\nconst S: &str = \"Result<(), String>\";\n#[cfg(test)]\nfn t() -> Result<(), String> { Ok(()) }\n",
        ),
        ("llm/mod.rs", "mod planted;\n"),
    ]);
    assert_eq!(
        string_errors(&files),
        ["llm/planted.rs:1", "llm/planted.rs:2", "llm/planted.rs:8"]
    );
}

#[test]
fn no_production_function_is_too_long() {
    let functions = function_lengths(&crate_files());
    let too_long: Vec<_> = functions
        .iter()
        .filter(|(_, length)| *length > LONGEST_FUNCTION)
        .cloned()
        .collect();
    let long: Vec<_> = functions
        .iter()
        .filter(|(_, length)| *length > LONG_FUNCTION)
        .cloned()
        .collect();
    assert!(
        too_long.is_empty() && long.len() <= MOST_LONG_FUNCTIONS,
        "production functions over {LONGEST_FUNCTION} lines: none may be; over \
         {LONG_FUNCTION} lines: at most {MOST_LONG_FUNCTIONS} may be, there are {} \
         (split them):\n{}",
        long.len(),
        listed(&long)
    );
}

#[test]
fn production_errors_are_typed() {
    let errors = string_errors(&crate_files());
    assert!(
        errors.len() <= MOST_STRING_ERRORS,
        "{} `Result<…, String>` in production code, at most {MOST_STRING_ERRORS} may be \
         (type the error with `thiserror`):\n{}",
        errors.len(),
        errors.join("\n")
    );
}

/// No production file is longer than this many production lines ...
const LONGEST_FILE: usize = 1200;
/// ... a file over this many is long ...
const LONG_FILE: usize = 600;
/// ... and at most this many are.
const MOST_LONG_FILES: usize = 9;

/// Each production file with its production lines, longest first: the
/// lines before its `#[cfg(test)]` module (all of them if it has none);
/// the files of test-only modules (`tests.rs`, …) are not counted.
fn production_lines(files: &[(PathBuf, String)]) -> Vec<(String, usize)> {
    let located: Vec<(PathBuf, Vec<String>, &String)> = files
        .iter()
        .map(|(file, text)| (file.clone(), module_of(file), text))
        .collect();
    let tests = test_modules(&located);
    let mut out = Vec::new();
    for (file, module, text) in &located {
        if file.file_name().is_some_and(|name| name == "tests.rs")
            || tests.iter().any(|test| module.starts_with(test))
        {
            continue;
        }
        let tokens = tokens(&blank_comments_and_literals(text));
        // The first `#[cfg(test)]` on an inline module: `mod name {`.
        let test_module = (0..tokens.len()).find_map(|i| {
            let cfg_test = is_ident(tokens.get(i), "cfg")
                && is_punct(tokens.get(i + 1), "(")
                && is_ident(tokens.get(i + 2), "test")
                && is_punct(tokens.get(i + 3), ")");
            if !cfg_test {
                return None;
            }
            let item = tokens[i + 4..]
                .iter()
                .position(|(token, _)| matches!(token, Token::Punct(";" | "{")))?;
            let at = i + 4 + item;
            let inline = is_punct(tokens.get(at), "{")
                && is_ident(tokens.get(at.wrapping_sub(2)), "mod")
                && matches!(tokens.get(at - 1), Some((Token::Ident(_), _)));
            inline.then_some(tokens[i].1)
        });
        let lines = match test_module {
            Some(line) => line - 1,
            None => text.lines().count(),
        };
        out.push((file.display().to_string(), lines));
    }
    out.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    out
}

#[test]
fn a_planted_long_file_is_measured_and_its_tests_are_not() {
    let code = |lines: usize| "fn f() {}\n".repeat(lines);
    let inline = format!(
        "{}#[cfg(test)]\nfn helper() {{}}\n{}#[cfg(test)]\n#[allow(unused)]\nmod tests {{\n{}}}\n",
        code(3),
        code(4),
        code(50)
    );
    let declared = format!("#[cfg(test)]\nmod tests;\n{}", code(8));
    let files = fixture(&[
        ("tools/inline.rs", &inline),
        ("tools/declared.rs", &declared),
        ("tools/declared/tests.rs", &code(900)),
        ("tools/declared/tests/more.rs", &code(900)),
        ("tools/mod.rs", "mod inline;\nmod declared;\n"),
        ("llm/tests.rs", &code(700)),
    ]);
    assert_eq!(
        production_lines(&files),
        [
            ("tools/declared.rs".to_owned(), 10),
            ("tools/inline.rs".to_owned(), 9),
            ("tools/mod.rs".to_owned(), 2),
        ]
    );
}

#[test]
fn no_production_file_is_too_long() {
    let files = production_lines(&crate_files());
    let too_long: Vec<_> = files.iter().filter(|(_, n)| *n > LONGEST_FILE).collect();
    let long: Vec<_> = files.iter().filter(|(_, n)| *n > LONG_FILE).collect();
    assert!(
        too_long.is_empty() && long.len() <= MOST_LONG_FILES,
        "production files over {LONGEST_FILE} lines: none may be; over {LONG_FILE} lines: \
         at most {MOST_LONG_FILES} may be, there are {} (move cohesive parts into \
         sub-modules):\n{}",
        long.len(),
        long.iter()
            .map(|(file, n)| format!("{file} {n} lines"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Every production `#[path]` module: `file:line: … mounts FILE as MODULE`.
fn path_modules(files: &[(PathBuf, String)]) -> Vec<String> {
    path_mounts(files)
        .into_iter()
        .map(|(file, line, target, module)| {
            format!(
                "{}:{line}: a `#[path]` module mounts {} as `{}`",
                file.display(),
                target.display(),
                module.join("::")
            )
        })
        .collect()
}

#[test]
fn a_planted_glob_or_alias_of_the_crate_root_is_caught() {
    let files = fixture(&[
        (
            "tools/planted.rs",
            "use crate::*;\nuse crate as x;\nuse crate::{self as y};\nextern crate self as z;\nfn f() {\n    x::runner::run();\n    let _ = z::agent::Agent::new;\n}\n",
        ),
        ("tools/mod.rs", "mod planted;\nuse super::*;\n"),
    ]);
    assert_eq!(
        level_violations(&files),
        [
            "tools/planted.rs:1: `tools` names the crate root whole (`crate::*`): name the module it uses",
            "tools/planted.rs:2: `tools` names the crate root whole (`crate`): name the module it uses",
            "tools/planted.rs:3: `tools` names the crate root whole (`crate::self`): name the module it uses",
            "tools/planted.rs:4: `tools` names the crate root whole (`crate`): name the module it uses",
            "tools/planted.rs:6: `tools` uses `crate::runner`",
            "tools/planted.rs:7: `tools` uses `crate::agent`",
            "tools/mod.rs:2: `tools` names the crate root whole (`super::*`): name the module it uses",
        ]
    );
}

#[test]
fn a_planted_glob_of_the_runners_root_in_an_engine_room_is_caught() {
    let files = fixture(&[
        (
            "runner/mod.rs",
            "mod front;\nmod prepare;\nmod batch;\npub use front::run;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\n",
        ),
        ("runner/front.rs", "use super::*;\n"),
        (
            "runner/prepare.rs",
            "use super::*;\nuse super as root;\nfn f() {\n    run();\n    root::run();\n}\n#[cfg(test)]\nmod tests {\n    use super::super::*;\n}\n",
        ),
        ("runner/batch.rs", "use crate::runner::{*, RunError};\n"),
    ]);
    assert_eq!(
        room_violations(&files),
        [
            "runner/prepare.rs:1: the engine room `prepare` imports the runner's root whole (`super::*`), its doors included",
            "runner/prepare.rs:5: the engine room `prepare` uses the door `front`",
            "runner/batch.rs:1: the engine room `batch` imports the runner's root whole (`crate::runner::*`), its doors included",
        ]
    );
}

#[test]
fn a_type_alias_is_a_re_export() {
    let files = fixture(&[
        (
            "runner/mod.rs",
            "use crate::agent::Stop;\npub type S = Stop;\npub type A = crate::agent::Agent<u8>;\npub(crate) type G<T> = crate::git::Repo<T>;\npub type Pair = (Option<crate::agent::Stop>, u8);\ntype Private = crate::agent::Turn;\npub type Hook = Box<dyn Fn(Stop) -> u8>;\n",
        ),
        ("tools/planted.rs", "pub type T = crate::agent::Turn;\n"),
    ]);
    assert_eq!(
        level_violations(&files),
        [
            "runner/mod.rs:3: `runner` re-exports `crate::agent::Agent` to `cli`, which may not use `agent`",
            "runner/mod.rs:4: `runner` re-exports `crate::git::Repo` to `cli`, which may not use `git`",
            "runner/mod.rs:2: `runner` re-exports `crate::agent::Stop` to `cli`, which may not use `agent`",
            "tools/planted.rs:1: `tools` uses `crate::agent`",
        ]
    );
}

#[test]
fn a_planted_alias_or_glob_of_std_env_is_a_read() {
    let files = fixture(&[
        (
            "tools/planted.rs",
            "use std::env as e;\nuse std::{env as f};\nuse std::env::*;\nfn g() {\n    e::var(\"X\");\n    f::current_dir();\n    e::args();\n}\n",
        ),
        ("tools/mod.rs", "mod planted;\n"),
    ]);
    assert_eq!(
        env_reads(&files),
        [
            "tools/planted.rs:3: std::env::*",
            "tools/planted.rs:5: std::env::var",
            "tools/planted.rs:6: std::env::current_dir",
        ]
    );
}

#[test]
fn a_planted_path_module_is_resolved_where_it_is_mounted() {
    let files = fixture(&[
        (
            "tools/mod.rs",
            "#[path = \"../runner/evil.rs\"]\nmod evil;\n#[path = \"../config/reader.rs\"] mod reader;\n#[cfg(test)]\n#[path = \"../llm/fixture.rs\"]\nmod fixture;\n",
        ),
        ("runner/evil.rs", "use crate::agent::Agent;\n"),
        ("config/reader.rs", "fn f() { std::env::var(\"X\"); }\n"),
        ("llm/fixture.rs", "use crate::llm::Provider;\n"),
    ]);
    assert_eq!(
        path_modules(&files),
        [
            "tools/mod.rs:2: a `#[path]` module mounts runner/evil.rs as `tools::evil`",
            "tools/mod.rs:3: a `#[path]` module mounts config/reader.rs as `tools::reader`",
        ]
    );
    assert_eq!(
        level_violations(&files),
        ["runner/evil.rs:1: `tools` uses `crate::agent`"]
    );
    assert_eq!(env_reads(&files), ["config/reader.rs:1: std::env::var"]);
}

/// A `#[path]` module's file lies elsewhere than its module path says;
/// production code has none (test code may borrow a fixture that way).
#[test]
fn no_production_module_is_mounted_by_path() {
    let mounted = path_modules(&crate_files());
    assert!(
        mounted.is_empty(),
        "production `#[path]` modules (move the file where its module is):\n{}",
        mounted.join("\n")
    );
}
