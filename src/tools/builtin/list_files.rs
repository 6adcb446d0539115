//! `list_files {pattern, path=".", max_results=100}`: files matching a glob.

use std::sync::{LazyLock, Mutex};

use ignore::{DirEntry, ParallelVisitor, ParallelVisitorBuilder, WalkState};
use serde_json::{Value, json};

use super::args::{Args, spec};
use super::path_tool::{PathArg, PathTool, Reach};
use super::walk::{self, PathGlob, WalkCtx};
use crate::core::ToolSpec;
use crate::tools::paths;
use crate::tools::{ToolCtx, ToolError, ToolOutput};

const DEFAULT_MAX: u64 = 100;
const MAX_MAX: u64 = 5000;

pub struct ListFiles;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "list_files",
        "List files matching a glob, sorted; respects .gitignore.",
        json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "description": "e.g. **/*.rs; without / matches names at any depth"},
                "path": {"type": "string", "default": "."},
                "max_results": {"type": "integer", "default": DEFAULT_MAX},
            },
            "required": ["pattern"],
        }),
    )
});

impl PathTool for ListFiles {
    const PATH: PathArg = PathArg::path_or_workdir(&SPEC, Reach::Dir);

    async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        let parsed = Args::new(&args, &SPEC)?;
        let pattern = PathGlob::new("pattern", parsed.string("pattern")?)?;
        let path = parsed.opt_string("path")?.unwrap_or(".");
        let max = parsed
            .opt_u64("max_results")?
            .filter(|max| *max > 0)
            .unwrap_or(DEFAULT_MAX)
            .min(MAX_MAX);
        let root = paths::resolve_dir(ctx, path)?.abs;
        let walk_ctx = WalkCtx::new(ctx, root);
        let max = usize::try_from(max).unwrap_or(usize::MAX);
        let (files, total, note) = walk::blocking(move || {
            let (files, total) = list(&walk_ctx, &pattern, max);
            Ok((files, total, walk_ctx.limit_note()))
        })
        .await?;
        let mut result = json!({
            "files": files,
            "total_matches": total,
            "truncated": total > files.len() || note.is_some(),
        });
        if let Some(note) = note {
            result["note"] = json!(note);
        }
        Ok(ToolOutput::json(&result))
    }
}

/// The first `max` matching files in sorted order, and how many matched.
fn list(walk_ctx: &WalkCtx, pattern: &PathGlob, max: usize) -> (Vec<String>, usize) {
    let shared = Mutex::new(Found::default());
    let mut builder = Builder {
        walk_ctx,
        pattern,
        max,
        shared: &shared,
    };
    walk_ctx.walker().visit(&mut builder);
    let mut found = shared
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.trim(max);
    (found.files, found.total)
}

#[derive(Default)]
struct Found {
    files: Vec<String>,
    total: usize,
}

impl Found {
    /// Keeps the `max` smallest paths (sorted).
    fn trim(&mut self, max: usize) {
        self.files.sort_unstable();
        self.files.truncate(max);
    }

    fn merge(&mut self, other: Found, max: usize) {
        self.total += other.total;
        self.files.extend(other.files);
        if self.files.len() > max.saturating_mul(2) {
            self.trim(max);
        }
    }
}

struct Builder<'s> {
    walk_ctx: &'s WalkCtx,
    pattern: &'s PathGlob,
    max: usize,
    shared: &'s Mutex<Found>,
}

impl<'s> ParallelVisitorBuilder<'s> for Builder<'s> {
    fn build(&mut self) -> Box<dyn ParallelVisitor + 's> {
        Box::new(Visitor {
            walk_ctx: self.walk_ctx,
            pattern: self.pattern,
            max: self.max,
            shared: self.shared,
            found: Found::default(),
        })
    }
}

struct Visitor<'s> {
    walk_ctx: &'s WalkCtx,
    pattern: &'s PathGlob,
    max: usize,
    shared: &'s Mutex<Found>,
    found: Found,
}

impl ParallelVisitor for Visitor<'_> {
    fn visit(&mut self, entry: Result<DirEntry, ignore::Error>) -> WalkState {
        let Ok(entry) = entry else {
            return WalkState::Continue;
        };
        if entry.file_type().is_none_or(|kind| kind.is_dir()) {
            return WalkState::Continue;
        }
        let path = entry.path();
        let (in_walk, in_workdir) = self.walk_ctx.relative(path);
        if self.pattern.is_match(in_walk, in_workdir) {
            self.found.total += 1;
            self.found.files.push(self.walk_ctx.display(path));
            if self.found.files.len() > self.max.saturating_mul(2) {
                self.found.trim(self.max);
            }
        }
        WalkState::Continue
    }
}

impl Drop for Visitor<'_> {
    fn drop(&mut self) {
        let found = std::mem::take(&mut self.found);
        self.shared
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .merge(found, self.max);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::Fixture;

    async fn list(fx: &Fixture, args: Value) -> Result<Value, ToolError> {
        let out = ListFiles.call(args, &fx.ctx).await?;
        Ok(serde_json::from_str(&out.content).unwrap())
    }

    #[test]
    fn a_walk_stops_at_the_entry_limit_with_a_note() {
        let fx = Fixture::new();
        for n in 0..60 {
            fx.file(&format!("d{}/f{n}.txt", n % 3), "");
        }
        let pattern = PathGlob::new("pattern", "*.txt").unwrap();
        let walk_ctx = WalkCtx::with_limit(&fx.ctx, fx.ctx.workdir.clone(), 20);
        let (files, total) = super::list(&walk_ctx, &pattern, 1000);
        assert!(total < 20 && files.len() == total, "{total} {files:?}");
        let note = walk_ctx.limit_note().unwrap();
        assert!(note.contains("after 20 entries"), "{note}");
        // Under the limit: no note.
        let walk_ctx = WalkCtx::with_limit(&fx.ctx, fx.ctx.workdir.clone(), 1000);
        assert_eq!(super::list(&walk_ctx, &pattern, 1000).1, 60);
        assert_eq!(walk_ctx.limit_note(), None);
    }

    fn tree() -> Fixture {
        let fx = Fixture::new();
        fx.file("src/main.rs", "");
        fx.file("src/lib.rs", "");
        fx.file("src/deep/mod.rs", "");
        fx.file("README.md", "");
        fx.file(".github/ci.yml", "");
        fx.file(".gitignore", "target/\n*.log\n");
        fx.file("target/debug/out.rs", "");
        fx.file("app.log", "");
        fx.file(".git/config", "");
        fx.file(".env", "SECRET=1");
        fx
    }

    #[tokio::test]
    async fn globs_respect_gitignore_and_sort() {
        let fx = tree();
        let out = list(&fx, json!({"pattern": "*.rs"})).await.unwrap();
        assert_eq!(
            out,
            json!({"files": ["src/deep/mod.rs", "src/lib.rs", "src/main.rs"], "total_matches": 3, "truncated": false})
        );
        let out = list(&fx, json!({"pattern": "src/*.rs"})).await.unwrap();
        assert_eq!(out["files"], json!(["src/lib.rs", "src/main.rs"]));
        let out = list(&fx, json!({"pattern": "**/*.rs", "path": "src/deep"}))
            .await
            .unwrap();
        assert_eq!(out["files"], json!(["src/deep/mod.rs"]));
        let out = list(&fx, json!({"pattern": "*"})).await.unwrap();
        assert_eq!(
            out["files"],
            json!([
                ".github/ci.yml",
                ".gitignore",
                "README.md",
                "src/deep/mod.rs",
                "src/lib.rs",
                "src/main.rs"
            ])
        );
    }

    #[tokio::test]
    async fn truncates_to_max_results() {
        let fx = Fixture::new();
        for n in 0..30 {
            fx.file(&format!("d{}/f{n:02}.txt", n % 3), "");
        }
        let out = list(&fx, json!({"pattern": "*.txt", "max_results": 4}))
            .await
            .unwrap();
        assert_eq!(
            out["files"],
            json!(["d0/f00.txt", "d0/f03.txt", "d0/f06.txt", "d0/f09.txt"])
        );
        assert_eq!(out["total_matches"], 30);
        assert_eq!(out["truncated"], true);
    }

    #[tokio::test]
    async fn bad_arguments_are_model_errors() {
        let fx = tree();
        for (args, expected) in [
            (json!({}), "missing required parameter `pattern`"),
            (
                json!({"pattern": "a[", "path": "."}),
                "`pattern` is not a valid glob",
            ),
            (
                json!({"pattern": "*", "path": "../outside"}),
                "resolves outside",
            ),
            (
                json!({"pattern": "*", "path": "README.md"}),
                "is not a directory",
            ),
            (json!({"pattern": "*", "path": "nope"}), "does not exist"),
        ] {
            match list(&fx, args.clone()).await {
                Err(ToolError::Model(message)) => {
                    assert!(message.contains(expected), "{args}: {message}")
                }
                other => panic!("{args}: {other:?}"),
            }
        }
        let target = ListFiles.target(&json!({"pattern": "*"}), &fx.ctx).unwrap();
        assert_eq!(target.path.as_deref(), Some("."));
    }
}
