//! `edit_file {path, old_text, new_text, replace_all=false}`: exact
//! replacement.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::args::{Args, spec};
use super::path_tool::{PathArg, PathTool, Reach};
use super::read_file::is_binary;
use crate::core::ToolSpec;
use crate::tools::paths::{self, Access, MAX_READ_BYTES, MAX_WRITE_BYTES};
use crate::tools::{ToolCtx, ToolError, ToolOutput};

pub struct EditFile;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "edit_file",
        "Replace exact text in a file (copy it without the line numbers). old_text must match once unless replace_all.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_text": {"type": "string"},
                "new_text": {"type": "string"},
                "replace_all": {"type": "boolean", "default": false},
            },
            "required": ["path", "old_text", "new_text"],
        }),
    )
});

impl PathTool for EditFile {
    const PATH: PathArg = PathArg::path(&SPEC, Reach::Write).existing();

    async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        edit(&args, ctx)
    }
}

fn edit(args: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &SPEC)?;
    let path = args.string("path")?;
    let old_text = args.string("old_text")?;
    let new_text = args.string("new_text")?;
    let replace_all = args.opt_bool("replace_all")?.unwrap_or(false);
    if old_text.is_empty() {
        return Err(ToolError::Model(
            "`old_text` is empty; to create or overwrite a file use write_file".to_owned(),
        ));
    }
    if old_text == new_text {
        return Err(ToolError::Model(
            "`old_text` and `new_text` are identical; nothing to change".to_owned(),
        ));
    }
    let resolved = paths::resolve(ctx, path, Access::Write)?;
    let bytes = paths::read_bytes(&resolved, MAX_READ_BYTES)?;
    if is_binary(&bytes) {
        return Err(ToolError::Model(format!(
            "`{}` is a binary file; edit_file edits text",
            resolved.display
        )));
    }
    let text = String::from_utf8(bytes).map_err(|_| {
        ToolError::Model(format!(
            "`{}` is not valid UTF-8; edit_file cannot edit it exactly",
            resolved.display
        ))
    })?;

    let (old, new) = match_line_endings(&text, old_text, new_text);
    let count = text.matches(old.as_str()).count();
    if count == 0 {
        return Err(ToolError::Model(not_found_message(
            &resolved.display,
            &text,
            old_text,
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolError::Model(format!(
            "`old_text` matches {count} times in `{}`; include more surrounding lines to make it unique, or set replace_all",
            resolved.display
        )));
    }
    // The size of the result, before making it: a short `old_text`
    // matching millions of times, with a longer `new_text`, would
    // otherwise build gigabytes only for the write limit to refuse them.
    let replaced = if replace_all { count } else { 1 };
    let size =
        (text.len() - replaced * old.len()).saturating_add(replaced.saturating_mul(new.len()));
    if size > MAX_WRITE_BYTES {
        return Err(ToolError::Model(format!(
            "the edit would make `{}` {size} bytes, over the {} MB limit for writing",
            resolved.display,
            MAX_WRITE_BYTES / (1024 * 1024)
        )));
    }
    let edited = if replace_all {
        text.replace(old.as_str(), &new)
    } else {
        text.replacen(old.as_str(), &new, 1)
    };
    paths::write_bytes(ctx, &resolved, edited.as_bytes())?;
    let mut output = ToolOutput::json(&json!({
        "path": resolved.display,
        "replacements": count,
    }));
    output.changed.push(resolved.display_path());
    Ok(output)
}

/// The texts to use: as given, or with `\r\n` line ends when the file uses
/// them and the model wrote bare `\n` (models rarely reproduce `\r`).
fn match_line_endings(text: &str, old_text: &str, new_text: &str) -> (String, String) {
    let crlf = |s: &str| s.replace("\r\n", "\n").replace('\n', "\r\n");
    if !text.contains(old_text)
        && text.contains("\r\n")
        && old_text.contains('\n')
        && !old_text.contains('\r')
    {
        let old = crlf(old_text);
        if text.contains(&old) {
            return (old, crlf(new_text));
        }
    }
    (old_text.to_owned(), new_text.to_owned())
}

fn not_found_message(display: &str, text: &str, old_text: &str) -> String {
    let mut message = format!("`old_text` was not found in `{display}`");
    let trimmed = old_text.trim();
    let squashed = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
    if !trimmed.is_empty() && trimmed != old_text && text.contains(trimmed) {
        message.push_str("; it matches after trimming leading/trailing whitespace");
    } else if squashed(text).contains(&squashed(old_text)) {
        message.push_str("; a match differs only in whitespace or indentation");
    }
    message.push_str(". Read the file again and copy the exact text.");
    message
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::{Fixture, model_error};

    async fn edit(fx: &Fixture, args: Value) -> Result<Value, ToolError> {
        let out = EditFile.call(args, &fx.ctx).await?;
        assert_eq!(out.changed.len(), 1);
        Ok(serde_json::from_str(&out.content).unwrap())
    }

    #[tokio::test]
    async fn an_edit_that_would_outgrow_the_write_limit_is_refused_before_it_is_made() {
        let fx = Fixture::new();
        let text = "a".repeat(5 * 1024 * 1024);
        fx.file("f", &text);
        let message = model_error(
            edit(
                &fx,
                json!({"path": "f", "old_text": "a", "new_text": "a".repeat(4096), "replace_all": true}),
            )
            .await,
        );
        assert!(
            message.contains("the edit would make `f` 21474836480 bytes, over the 10 MB limit"),
            "{message}"
        );
        assert_eq!(fx.read("f"), text);
    }

    #[tokio::test]
    async fn replaces_a_unique_match() {
        let fx = Fixture::new();
        fx.file("src/lib.rs", "fn a() {}\nfn b() {}\n");
        let out = EditFile
            .call(
                json!({"path": "src/lib.rs", "old_text": "fn b() {}", "new_text": "fn c() {}"}),
                &fx.ctx,
            )
            .await
            .unwrap();
        assert_eq!(out.changed, [PathBuf::from("src/lib.rs")]);
        let value: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(value, json!({"path": "src/lib.rs", "replacements": 1}));
        assert_eq!(fx.read("src/lib.rs"), "fn a() {}\nfn c() {}\n");
    }

    #[tokio::test]
    async fn ambiguous_or_missing_text_fails_with_counts() {
        let fx = Fixture::new();
        fx.file("f", "x = 1\nx = 1\n    indented  line\n");
        assert_eq!(
            model_error(
                edit(
                    &fx,
                    json!({"path": "f", "old_text": "x = 1", "new_text": "y"})
                )
                .await
            ),
            "`old_text` matches 2 times in `f`; include more surrounding lines to make it unique, or set replace_all"
        );
        let message = model_error(
            edit(
                &fx,
                json!({"path": "f", "old_text": "nope", "new_text": "y"}),
            )
            .await,
        );
        assert!(
            message.starts_with("`old_text` was not found in `f`"),
            "{message}"
        );
        let message = model_error(
            edit(
                &fx,
                json!({"path": "f", "old_text": "indented line", "new_text": "y"}),
            )
            .await,
        );
        assert!(message.contains("differs only in whitespace"), "{message}");
        let out = edit(
            &fx,
            json!({"path": "f", "old_text": "x = 1", "new_text": "y", "replace_all": true}),
        )
        .await
        .unwrap();
        assert_eq!(out["replacements"], 2);
        assert_eq!(fx.read("f"), "y\ny\n    indented  line\n");
    }

    #[tokio::test]
    async fn refuses_empty_identical_missing_and_binary() {
        let fx = Fixture::new();
        std::fs::write(fx.work().join("bin"), b"a\0b").unwrap();
        // The argument checks are about an existing file: a missing one
        // is said first (with the nearest existing paths).
        fx.file("f", "a\n");
        let cases = [
            (
                json!({"path": "f", "old_text": "", "new_text": "x"}),
                "`old_text` is empty",
            ),
            (
                json!({"path": "f", "old_text": "a", "new_text": "a"}),
                "identical",
            ),
            (
                json!({"path": "missing.rs", "old_text": "a", "new_text": "b"}),
                "does not exist",
            ),
            (
                json!({"path": "bin", "old_text": "a", "new_text": "b"}),
                "binary file",
            ),
            (
                json!({"path": "f", "old_text": "a"}),
                "missing required parameter `new_text`",
            ),
            (
                json!({"path": "f", "old_text": "a", "new_text": "b", "replace_all": 2}),
                "`replace_all` must be a boolean",
            ),
            (
                json!({"path": ".git/config", "old_text": "a", "new_text": "b"}),
                "writing under .git/",
            ),
        ];
        for (args, expected) in cases {
            let message = model_error(edit(&fx, args.clone()).await);
            assert!(message.contains(expected), "{args}: {message}");
        }
    }

    #[tokio::test]
    async fn keeps_crlf_line_endings() {
        let fx = Fixture::new();
        fx.file("win.txt", "one\r\ntwo\r\nthree\r\n");
        edit(
            &fx,
            json!({"path": "win.txt", "old_text": "one\ntwo", "new_text": "1\n2"}),
        )
        .await
        .unwrap();
        assert_eq!(fx.read("win.txt"), "1\r\n2\r\nthree\r\n");
    }
}
