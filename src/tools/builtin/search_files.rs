//! `search_files {pattern, path=".", file_pattern, context_lines=2,
//! max_results=50}`: regex search over file contents.
//!
//! ripgrep's own crates: the parallel `ignore` walk and `grep-searcher`,
//! which quits on a NUL byte (binary files are skipped). Every file is
//! searched so `total_matches` is exact; only the first `max_results`
//! matches in path order are kept with their text, and memory stays
//! bounded by that however many files match.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::path::Path;
use std::sync::{LazyLock, Mutex};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};
use serde::Serialize;
use serde_json::{Value, json};

use super::args::{Args, spec};
use super::path_tool::{PathArg, PathTool, Reach};
use super::walk::{self, PathGlob, WalkCtx};
use crate::core::ToolSpec;
use crate::tools::paths::{self, Access, Kind};
use crate::tools::{ToolCtx, ToolError, ToolOutput};

const DEFAULT_MAX: u64 = 50;
const MAX_MAX: u64 = 1000;
const DEFAULT_CONTEXT: u64 = 2;
const MAX_CONTEXT: u64 = 10;
/// Longer lines are cut in results.
const MAX_LINE_CHARS: usize = 500;

pub struct SearchFiles;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "search_files",
        "Regex search in file contents; respects .gitignore, skips binary files.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "Regex"},
                "path": {"type": "string", "default": "."},
                "file_pattern": {"type": "string", "description": "Glob filter, e.g. *.py"},
                "context_lines": {"type": "integer", "default": DEFAULT_CONTEXT},
                "max_results": {"type": "integer", "default": DEFAULT_MAX},
            },
            "required": ["pattern"],
        }),
    )
});

impl PathTool for SearchFiles {
    const PATH: PathArg = PathArg::path_or_workdir(&SPEC, Reach::Read);

    async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        search(args, ctx).await
    }
}

/// One matching line and its neighbours.
#[derive(Debug, Clone, Serialize)]
struct Match {
    file: String,
    line: u64,
    content: String,
    context_before: Vec<String>,
    context_after: Vec<String>,
}

struct Query {
    matcher: RegexMatcher,
    file_pattern: Option<PathGlob>,
    context: usize,
    max: usize,
}

/// The most memory a pattern may compile to (and its lazy DFA use): a
/// pattern past it is an error the model is told, not a search that
/// crawls through every file with a huge automaton and finds nothing.
const PATTERN_SIZE_LIMIT: usize = 16 << 20;

async fn search(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let parsed = Args::new(&args, &SPEC)?;
    let pattern = parsed.string("pattern")?;
    let matcher = RegexMatcherBuilder::new()
        .line_terminator(Some(b'\n'))
        .size_limit(PATTERN_SIZE_LIMIT)
        .dfa_size_limit(PATTERN_SIZE_LIMIT)
        .build(pattern)
        .map_err(|error| {
            let error = error.to_string();
            ToolError::Model(if error.contains("size limit") {
                format!(
                    "`pattern` is too large to compile: its compiled form passes the limit of {} MiB; \
                     search for a shorter pattern (fewer or smaller repetitions)",
                    PATTERN_SIZE_LIMIT >> 20
                )
            } else {
                format!("`pattern` is not a valid regex: {error}")
            })
        })?;
    let file_pattern = parsed
        .opt_string("file_pattern")?
        .filter(|glob| !glob.is_empty())
        .map(|glob| PathGlob::new("file_pattern", glob))
        .transpose()?;
    let context = parsed
        .opt_u64("context_lines")?
        .unwrap_or(DEFAULT_CONTEXT)
        .min(MAX_CONTEXT);
    let max = parsed
        .opt_u64("max_results")?
        .filter(|max| *max > 0)
        .unwrap_or(DEFAULT_MAX)
        .min(MAX_MAX);
    let path = parsed.opt_string("path")?.unwrap_or(".");
    let resolved = paths::resolve(ctx, path, Access::Read)?;
    match resolved.kind {
        Some(Kind::Dir | Kind::File) => {}
        Some(Kind::Special(what)) => {
            return Err(ToolError::Model(format!(
                "`{}` is a {what}, not a file or directory",
                resolved.display
            )));
        }
        None => return Err(paths::not_found(&resolved)),
    }
    let query = Query {
        matcher,
        file_pattern,
        context: usize::try_from(context).unwrap_or(0),
        max: usize::try_from(max).unwrap_or(usize::MAX),
    };
    let walk_ctx = WalkCtx::new(ctx, resolved.abs);
    let single_file = resolved.kind == Some(Kind::File);
    let (matches, total, note) = walk::blocking(move || {
        let (matches, total) = if single_file {
            search_one(&walk_ctx, &query)
        } else {
            search_tree(&walk_ctx, &query)
        };
        Ok((matches, total, walk_ctx.limit_note()))
    })
    .await?;
    let mut result = json!({
        "matches": matches,
        "total_matches": total,
        "truncated": total > matches.len() || note.is_some(),
    });
    if let Some(note) = note {
        result["note"] = json!(note);
    }
    Ok(ToolOutput::json(&result))
}

fn searcher(context: usize) -> Searcher {
    SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(b'\0'))
        .before_context(context)
        .after_context(context)
        .build()
}

fn search_one(walk_ctx: &WalkCtx, query: &Query) -> (Vec<Match>, usize) {
    let mut searcher = searcher(query.context);
    let found = search_file(&mut searcher, &query.matcher, query, &walk_ctx.root);
    match found {
        Some((count, mut matches)) => {
            let display = walk_ctx.display(&walk_ctx.root);
            for found in &mut matches {
                found.file.clone_from(&display);
            }
            (matches, count)
        }
        None => (Vec::new(), 0),
    }
}

fn search_tree(walk_ctx: &WalkCtx, query: &Query) -> (Vec<Match>, usize) {
    let shared = Mutex::new(Kept::default());
    let mut builder = Builder {
        walk_ctx,
        query,
        shared: &shared,
    };
    walk_ctx.walker().visit(&mut builder);
    let kept = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let matches: Vec<Match> = kept.files.into_values().flatten().take(query.max).collect();
    (matches, kept.total)
}

/// Searches one file: its match count and its first `max` matches (with
/// `file` left empty), or `None` if it could not be read, is binary or has
/// no match.
fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    query: &Query,
    path: &Path,
) -> Option<(usize, Vec<Match>)> {
    let file = paths::open_regular(path)?;
    let mut sink = FileSink::new(query.context, query.max);
    searcher.search_file(matcher, &file, &mut sink).ok()?;
    if sink.binary || sink.count == 0 {
        return None;
    }
    Some((sink.count, sink.matches))
}

/// Matches kept so far: the smallest paths holding at least `max` matches.
#[derive(Default)]
struct Kept {
    files: BTreeMap<String, Vec<Match>>,
    total: usize,
}

impl Kept {
    fn add(&mut self, file: String, count: usize, mut matches: Vec<Match>, max: usize) {
        self.total += count;
        for found in &mut matches {
            found.file.clone_from(&file);
        }
        self.files.insert(file, matches);
        self.trim(max);
    }

    /// Drops files beyond the first ones that already hold `max` matches.
    fn trim(&mut self, max: usize) {
        let mut held = 0;
        let mut cut = None;
        for (file, matches) in &self.files {
            if held >= max {
                cut = Some(file.clone());
                break;
            }
            held += matches.len();
        }
        if let Some(cut) = cut {
            self.files.split_off(&cut);
        }
    }

    fn merge(&mut self, other: Kept, max: usize) {
        self.total += other.total;
        self.files.extend(other.files);
        self.trim(max);
    }
}

struct Builder<'s> {
    walk_ctx: &'s WalkCtx,
    query: &'s Query,
    shared: &'s Mutex<Kept>,
}

impl<'s> ParallelVisitorBuilder<'s> for Builder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            walk_ctx: self.walk_ctx,
            query: self.query,
            shared: self.shared,
            // Each thread gets its own regex caches: a shared matcher's
            // cache pool is contended.
            matcher: self.query.matcher.clone(),
            searcher: searcher(self.query.context),
            kept: Kept::default(),
        })
    }
}

struct Visitor<'s> {
    walk_ctx: &'s WalkCtx,
    query: &'s Query,
    shared: &'s Mutex<Kept>,
    matcher: RegexMatcher,
    searcher: Searcher,
    kept: Kept,
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if !entry.file_type().is_some_and(|kind| kind.is_file()) {
            return WalkState::Continue;
        }
        let path = entry.path();
        if let Some(glob) = &self.query.file_pattern {
            let (in_walk, in_workdir) = self.walk_ctx.relative(path);
            if !glob.is_match(in_walk, in_workdir) {
                return WalkState::Continue;
            }
        }
        if let Some((count, matches)) =
            search_file(&mut self.searcher, &self.matcher, self.query, path)
        {
            let display = self.walk_ctx.display(path);
            self.kept.add(display, count, matches, self.query.max);
        }
        WalkState::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let kept = std::mem::take(&mut self.kept);
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .merge(kept, self.query.max);
    }
}

/// Collects one file's matches with their context lines.
struct FileSink {
    context: usize,
    max: usize,
    count: usize,
    matches: Vec<Match>,
    /// The last `context` lines seen, for the next match's before-context.
    recent: VecDeque<(u64, String)>,
    /// Indexes into `matches` still collecting after-context.
    pending: Vec<usize>,
    binary: bool,
}

impl FileSink {
    fn new(context: usize, max: usize) -> Self {
        Self {
            context,
            max,
            count: 0,
            matches: Vec::new(),
            recent: VecDeque::with_capacity(context),
            pending: Vec::new(),
            binary: false,
        }
    }

    /// True while line texts are still needed (for kept matches).
    fn wants_text(&self) -> bool {
        self.matches.len() < self.max || !self.pending.is_empty()
    }

    fn line(&mut self, number: u64, bytes: &[u8], is_match: bool) {
        if !self.wants_text() {
            return;
        }
        let text = line_text(bytes);
        let context = self.context as u64;
        let matches = &mut self.matches;
        self.pending.retain(|index| {
            let kept = &mut matches[*index];
            if number > kept.line && number <= kept.line + context {
                kept.context_after.push(text.clone());
            }
            number < kept.line + context
        });
        if is_match && self.matches.len() < self.max {
            let context_before = self
                .recent
                .iter()
                .filter(|(seen, _)| *seen + context >= number && *seen < number)
                .map(|(_, line)| line.clone())
                .collect();
            if self.context > 0 {
                self.pending.push(self.matches.len());
            }
            self.matches.push(Match {
                file: String::new(),
                line: number,
                content: text.clone(),
                context_before,
                context_after: Vec::new(),
            });
        }
        if self.context > 0 {
            if self.recent.len() == self.context {
                self.recent.pop_front();
            }
            self.recent.push_back((number, text));
        }
    }
}

impl Sink for FileSink {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.count += 1;
        self.line(found.line_number().unwrap_or(0), found.bytes(), true);
        Ok(true)
    }

    fn context(&mut self, _searcher: &Searcher, line: &SinkContext<'_>) -> Result<bool, io::Error> {
        self.line(line.line_number().unwrap_or(0), line.bytes(), false);
        Ok(true)
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line without its terminator, lossy UTF-8, cut when very long.
fn line_text(bytes: &[u8]) -> String {
    let bytes = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
    let text = String::from_utf8_lossy(bytes);
    match text.char_indices().nth(MAX_LINE_CHARS) {
        None => text.into_owned(),
        Some((cut, _)) => format!(
            "{} [... line cut, {} characters in all]",
            &text[..cut],
            text.chars().count()
        ),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::Fixture;

    async fn search(fx: &Fixture, args: Value) -> Result<Value, ToolError> {
        let out = SearchFiles.call(args, &fx.ctx).await?;
        assert!(out.changed.is_empty());
        Ok(serde_json::from_str(&out.content).unwrap())
    }

    #[tokio::test]
    async fn finds_matches_with_context() {
        let fx = Fixture::new();
        fx.file("src/a.rs", "one\ntwo\nfn target() {}\nfour\nfive\nsix\n");
        fx.file("src/b.rs", "fn target2() {}\n");
        let out = search(&fx, json!({"pattern": "fn target"})).await.unwrap();
        assert_eq!(
            out,
            json!({
                "matches": [
                    {"file": "src/a.rs", "line": 3, "content": "fn target() {}",
                     "context_before": ["one", "two"], "context_after": ["four", "five"]},
                    {"file": "src/b.rs", "line": 1, "content": "fn target2() {}",
                     "context_before": [], "context_after": []},
                ],
                "total_matches": 2,
                "truncated": false,
            })
        );
    }

    #[tokio::test]
    async fn adjacent_matches_share_context() {
        let fx = Fixture::new();
        fx.file("f", "a\nx1\nx2\nb\n");
        let out = search(&fx, json!({"pattern": "^x", "context_lines": 1}))
            .await
            .unwrap();
        let matches = out["matches"].as_array().unwrap();
        assert_eq!(matches[0]["context_before"], json!(["a"]));
        assert_eq!(matches[0]["context_after"], json!(["x2"]));
        assert_eq!(matches[1]["context_before"], json!(["x1"]));
        assert_eq!(matches[1]["context_after"], json!(["b"]));
    }

    #[tokio::test]
    async fn skips_ignored_binary_git_and_blocked_files() {
        let fx = Fixture::new();
        fx.file(".gitignore", "ignored/\n");
        fx.file("ignored/x.txt", "needle\n");
        fx.file(".git/config", "needle\n");
        fx.file(".env", "needle\n");
        fx.file("visible.txt", "needle\n");
        fx.file(".hidden.txt", "needle\n");
        std::fs::write(fx.work().join("bin.dat"), b"needle\n\0\x01\x02").unwrap();
        nix::unistd::mkfifo(
            &fx.work().join("fifo"),
            nix::sys::stat::Mode::from_bits_truncate(0o644),
        )
        .unwrap();
        fx.symlink(fx.root.join("outside/secret.txt"), "link.txt");
        let out = search(&fx, json!({"pattern": "needle|secret", "context_lines": 0}))
            .await
            .unwrap();
        let files: Vec<&str> = out["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|found| found["file"].as_str().unwrap())
            .collect();
        assert_eq!(files, [".hidden.txt", "visible.txt"]);
    }

    #[tokio::test]
    async fn filters_by_file_pattern_and_truncates() {
        let fx = Fixture::new();
        for n in 0..20 {
            fx.file(&format!("d/f{n:02}.py"), "hit\nhit\n");
            fx.file(&format!("d/f{n:02}.rs"), "hit\n");
        }
        let out = search(
            &fx,
            json!({"pattern": "hit", "file_pattern": "*.py", "max_results": 3, "context_lines": 0}),
        )
        .await
        .unwrap();
        assert_eq!(out["total_matches"], 40);
        assert_eq!(out["truncated"], true);
        let found: Vec<(String, u64)> = out["matches"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| {
                (
                    m["file"].as_str().unwrap().to_owned(),
                    m["line"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            found,
            [
                ("d/f00.py".to_owned(), 1),
                ("d/f00.py".to_owned(), 2),
                ("d/f01.py".to_owned(), 1)
            ]
        );
    }

    #[tokio::test]
    async fn searches_a_single_file_and_reports_errors() {
        let fx = Fixture::new();
        fx.file("one.txt", "alpha\nbeta\n");
        let out = search(&fx, json!({"pattern": "beta", "path": "one.txt"}))
            .await
            .unwrap();
        assert_eq!(out["matches"][0]["file"], "one.txt");
        assert_eq!(out["matches"][0]["context_before"], json!(["alpha"]));
        for (args, expected) in [
            (json!({"pattern": "("}), "`pattern` is not a valid regex"),
            (json!({}), "missing required parameter `pattern`"),
            (
                json!({"pattern": "x", "path": "../outside"}),
                "resolves outside",
            ),
            (json!({"pattern": "x", "path": "nope"}), "does not exist"),
            (
                json!({"pattern": "x", "context_lines": -1}),
                "`context_lines` must be a non-negative integer",
            ),
        ] {
            match search(&fx, args.clone()).await {
                Err(ToolError::Model(message)) => {
                    assert!(message.contains(expected), "{args}: {message}")
                }
                other => panic!("{args}: {other:?}"),
            }
        }
    }
}
