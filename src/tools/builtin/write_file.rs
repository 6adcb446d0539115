//! `write_file {path, content}`: create or replace a file.

use std::sync::LazyLock;

use serde_json::{Value, json};

use super::args::{Args, spec};
use super::path_tool::{PathArg, PathTool, Reach};
use crate::core::ToolSpec;
use crate::tools::paths::{self, Access};
use crate::tools::{ToolCtx, ToolError, ToolOutput};

pub struct WriteFile;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "write_file",
        "Create or overwrite a file; parent directories are created.",
        json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {"type": "string"},
            },
            "required": ["path", "content"],
        }),
    )
});

impl PathTool for WriteFile {
    const PATH: PathArg = PathArg::path(&SPEC, Reach::Write);

    async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
        write(&args, ctx)
    }
}

fn write(args: &Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let args = Args::new(args, &SPEC)?;
    let path = args.string("path")?;
    let content = args.string("content")?;
    let resolved = paths::resolve(ctx, path, Access::Write)?;
    paths::write_bytes(ctx, &resolved, content.as_bytes())?;
    let mut output = ToolOutput::json(&json!({
        "path": resolved.display,
        "bytes_written": content.len(),
    }));
    output.changed.push(resolved.display_path());
    Ok(output)
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use serde_json::json;

    use super::*;
    use crate::tools::Tool;
    use crate::tools::testing::{Fixture, model_error};

    #[tokio::test]
    async fn writes_and_reports_bytes_and_changes() {
        let fx = Fixture::new();
        let out = WriteFile
            .call(
                json!({"path": "new/dir/f.txt", "content": "héllo"}),
                &fx.ctx,
            )
            .await
            .unwrap();
        let value: Value = serde_json::from_str(&out.content).unwrap();
        assert_eq!(value, json!({"path": "new/dir/f.txt", "bytes_written": 6}));
        assert_eq!(out.changed, [PathBuf::from("new/dir/f.txt")]);
        assert_eq!(fx.read("new/dir/f.txt"), "héllo");
        WriteFile
            .call(json!({"path": "new/dir/f.txt", "content": ""}), &fx.ctx)
            .await
            .unwrap();
        assert_eq!(fx.read("new/dir/f.txt"), "");
    }

    #[tokio::test]
    async fn refuses_guarded_paths_and_bad_arguments() {
        let fx = Fixture::new();
        fx.symlink(fx.root.join("outside"), "out");
        let cases = [
            (
                json!({"path": ".git/hooks/pre-commit", "content": "x"}),
                "writing under .git/",
            ),
            (json!({"path": "out/x", "content": "x"}), "resolves outside"),
            (json!({"path": "a/.env", "content": "x"}), "blocked path"),
            (json!({"path": "f"}), "missing required parameter `content`"),
            (
                json!({"path": "f", "content": 1}),
                "parameter `content` must be a string",
            ),
        ];
        for (args, expected) in cases {
            let message = model_error(WriteFile.call(args.clone(), &fx.ctx).await);
            assert!(message.contains(expected), "{args}: {message}");
        }
        assert!(!fx.work().join(".git").exists());
        assert!(!fx.root.join("outside/x").exists());
        let target = WriteFile.target(&json!({"path": ".git/config"}), &fx.ctx);
        assert!(target.is_err());
        let target = WriteFile
            .target(&json!({"path": "src/x.rs"}), &fx.ctx)
            .unwrap();
        assert_eq!(target.path.as_deref(), Some("src/x.rs"));
    }
}
