//! `read_file {path, offset=1, limit=500}`: numbered lines of a text file.

use std::fmt::Write as _;
use std::sync::LazyLock;

use serde_json::{Value, json};

use super::args::{Args, spec};
use super::path_tool::{PathArg, PathTool, Reach};
use crate::core::ToolSpec;
use crate::tools::paths::{self, Access, MAX_READ_BYTES};
use crate::tools::{ToolCtx, ToolError, ToolOutput};

const DEFAULT_LIMIT: u64 = 500;
const MAX_LIMIT: u64 = 2000;
/// Longer lines are cut, so one minified line cannot flood the context.
const MAX_LINE_CHARS: usize = 2000;
/// A NUL byte in this many leading bytes marks a binary file.
const BINARY_SNIFF_BYTES: usize = 8000;

pub struct ReadFile;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "read_file",
        "Read a text file as numbered lines.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer", "description": "First line, 1-based", "default": 1},
                "limit": {"type": "integer", "description": "Max lines", "default": DEFAULT_LIMIT},
            },
            "required": ["path"],
        }),
    )
});

impl PathTool for ReadFile {
    const PATH: PathArg = PathArg::path(&SPEC, Reach::Read);

    async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        read(&args, ctx)
    }
}

fn read(args: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &SPEC)?;
    let path = args.string("path")?;
    let offset = args.opt_u64("offset")?.unwrap_or(1).max(1);
    let limit = args
        .opt_u64("limit")?
        .filter(|limit| *limit > 0)
        .unwrap_or(DEFAULT_LIMIT)
        .min(MAX_LIMIT);
    let resolved = paths::resolve(ctx, path, Access::Read)?;
    let bytes = paths::read_bytes(&resolved, MAX_READ_BYTES)?;
    if is_binary(&bytes) {
        return Err(ToolError::Model(format!(
            "`{}` is a binary file ({} bytes); not shown",
            resolved.display,
            bytes.len()
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    let total_lines = count_lines(&bytes);
    if offset > 1 && offset > total_lines {
        return Err(ToolError::Model(format!(
            "offset {offset} is past the end: `{}` has {total_lines} lines",
            resolved.display
        )));
    }
    let last = (offset + limit - 1).min(total_lines);
    let width = last.to_string().len();
    let mut content = String::with_capacity(text.len().min(256 * 1024));
    for (number, line) in (offset..=last).zip(text.split('\n').skip(to_usize(offset - 1))) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if number > offset {
            content.push('\n');
        }
        let _ = write!(content, "{number:>width$}\t");
        push_capped(&mut content, line);
    }
    let truncated = last < total_lines;
    let mut result = json!({
        "path": resolved.display,
        "content": content,
        "total_lines": total_lines,
        "truncated": truncated,
    });
    if truncated {
        result["next_offset"] = json!(last + 1);
    }
    Ok(ToolOutput::json(&result))
}

/// True if the head of `bytes` holds a NUL byte.
pub(super) fn is_binary(bytes: &[u8]) -> bool {
    bytes[..bytes.len().min(BINARY_SNIFF_BYTES)].contains(&0)
}

/// Lines as an editor counts them: a final line without `\n` counts.
fn count_lines(bytes: &[u8]) -> u64 {
    let newlines = bytes.iter().filter(|byte| **byte == b'\n').count() as u64;
    newlines + u64::from(bytes.last().is_some_and(|byte| *byte != b'\n'))
}

fn to_usize(value: u64) -> usize {
    usize::try_from(value).unwrap_or(usize::MAX)
}

fn push_capped(out: &mut String, line: &str) {
    match line.char_indices().nth(MAX_LINE_CHARS) {
        None => out.push_str(line),
        Some((cut, _)) => {
            out.push_str(&line[..cut]);
            let _ = write!(
                out,
                " [... line cut, {} characters in all]",
                line.chars().count()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::{Fixture, model_error};

    async fn call(fx: &Fixture, args: Value) -> Result<Value, ToolError> {
        let out = ReadFile.call(args, &fx.ctx).await?;
        assert!(out.changed.is_empty());
        Ok(serde_json::from_str(&out.content).unwrap())
    }

    #[tokio::test]
    async fn numbers_lines_and_pages() {
        let fx = Fixture::new();
        let text: String = (1..=12).map(|n| format!("line {n}\r\n")).collect();
        fx.file("f.txt", &text);
        let out = call(&fx, json!({"path": "f.txt", "offset": 9, "limit": 2}))
            .await
            .unwrap();
        assert_eq!(out["content"], " 9\tline 9\n10\tline 10");
        assert_eq!(out["total_lines"], 12);
        assert_eq!(out["truncated"], true);
        assert_eq!(out["next_offset"], 11);
        let out = call(&fx, json!({"path": "f.txt", "offset": "11"}))
            .await
            .unwrap();
        assert_eq!(out["content"], "11\tline 11\n12\tline 12");
        assert_eq!(out["truncated"], false);
        assert!(out.get("next_offset").is_none());
    }

    #[tokio::test]
    async fn handles_empty_and_unterminated_files() {
        let fx = Fixture::new();
        fx.file("empty", "");
        fx.file("short", "a\nb");
        let out = call(&fx, json!({"path": "empty"})).await.unwrap();
        assert_eq!(
            (out["content"].as_str(), out["total_lines"].as_u64()),
            (Some(""), Some(0))
        );
        let out = call(&fx, json!({"path": "short"})).await.unwrap();
        assert_eq!(out["content"], "1\ta\n2\tb");
        assert_eq!(out["total_lines"], 2);
    }

    #[tokio::test]
    async fn refuses_binary_and_bad_offsets() {
        let fx = Fixture::new();
        std::fs::write(fx.work().join("bin"), b"ELF\0\x01\x02").unwrap();
        fx.file("f", "one\n");
        assert_eq!(
            model_error(call(&fx, json!({"path": "bin"})).await),
            "`bin` is a binary file (6 bytes); not shown"
        );
        assert_eq!(
            model_error(call(&fx, json!({"path": "f", "offset": 5})).await),
            "offset 5 is past the end: `f` has 1 lines"
        );
        assert_eq!(
            model_error(call(&fx, json!({})).await),
            "missing required parameter `path`"
        );
        assert_eq!(
            model_error(call(&fx, json!({"path": ["f"]})).await),
            "parameter `path` must be a string"
        );
        assert!(
            model_error(call(&fx, json!({"path": "../outside/secret.txt"})).await)
                .contains("resolves outside")
        );
    }

    #[tokio::test]
    async fn cuts_very_long_lines() {
        let fx = Fixture::new();
        fx.file("min.js", &"x".repeat(5000));
        let out = call(&fx, json!({"path": "min.js"})).await.unwrap();
        let content = out["content"].as_str().unwrap();
        assert!(content.len() < 2100);
        assert!(content.ends_with("[... line cut, 5000 characters in all]"));
    }

    #[test]
    fn target_is_the_resolved_path() {
        let fx = Fixture::new();
        fx.file("src/a.rs", "");
        let target = ReadFile
            .target(&json!({"path": "./src/../src/a.rs"}), &fx.ctx)
            .unwrap();
        assert_eq!(target.path.as_deref(), Some("src/a.rs"));
        assert!(
            ReadFile
                .target(&json!({"path": "/etc/passwd"}), &fx.ctx)
                .is_err()
        );
    }
}
