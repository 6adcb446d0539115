//! `run_shell {command, working_directory=".", timeout_seconds=30}`.
//!
//! A non-zero exit is a normal result the model reads, not a tool error.

use std::sync::LazyLock;
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::args::{Args, spec};
use crate::core::ToolSpec;
use crate::tools::{Target, Tool, ToolCtx, ToolError, ToolOutput, paths, process};

pub struct RunShell;

static SPEC: LazyLock<ToolSpec> = LazyLock::new(|| {
    spec(
        "run_shell",
        "Run a bash command. No stdin, no TTY. A non-zero exit_code is a result, not an error.",
        json!({
            "type": "object",
            "properties": {
                "command": {"type": "string"},
                "working_directory": {"type": "string", "default": "."},
                "timeout_seconds": {"type": "integer", "default": 30},
            },
            "required": ["command"],
        }),
    )
});

impl Tool for RunShell {
    fn spec(&self) -> &ToolSpec {
        &SPEC
    }

    fn target(&self, args: &Value, ctx: &ToolCtx) -> Result<Target, ToolError> {
        let args = Args::new(args, &SPEC)?;
        let command = args.string("command")?;
        let directory = args.opt_string("working_directory")?.unwrap_or(".");
        let resolved = paths::resolve_dir(ctx, directory)?;
        Ok(Target {
            path: Some(resolved.display),
            command: Some(command.to_owned()),
        })
    }

    fn call<'a>(
        &'a self,
        args: Value,
        ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(run(args, ctx))
    }
}

async fn run(args: Value, ctx: &ToolCtx) -> Result<ToolOutput, ToolError> {
    let args = Args::new(&args, &SPEC)?;
    let command = args.string("command")?;
    if command.trim().is_empty() {
        return Err(ToolError::Model("`command` is empty".to_owned()));
    }
    let directory = args.opt_string("working_directory")?.unwrap_or(".");
    let timeout = args
        .opt_u64("timeout_seconds")?
        .map_or(ctx.shell_timeout, Duration::from_secs)
        .clamp(
            Duration::from_secs(1),
            ctx.max_shell_timeout.max(Duration::from_secs(1)),
        );
    let cwd = paths::resolve_dir(ctx, directory)?.abs;
    let output = process::run_command(
        command,
        cwd,
        &ctx.env,
        timeout,
        ctx.output_cap_bytes,
        ctx.shell_sandbox(),
    )
    .await
    .map_err(|error| ToolError::Model(format!("could not start the shell: {error}")))?;
    let mut result = json!({
        "exit_code": output.shell_exit_code(),
        "stdout": output.stdout,
        "stderr": output.stderr,
        "timed_out": output.timed_out,
    });
    if output.timed_out {
        result["timeout_seconds"] = json!(timeout.as_secs());
    }
    if let Some(signal) = output.signal {
        result["signal"] = json!(signal);
    }
    if output.stdout_truncated || output.stderr_truncated {
        result["truncated"] = json!(true);
        // Last, where a cut of the whole result for the model keeps them:
        // how much each stream printed in all.
        result["stdout_bytes"] = json!(output.stdout_bytes);
        result["stderr_bytes"] = json!(output.stderr_bytes);
    }
    Ok(ToolOutput::json(&result))
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::json;

    use super::*;
    use crate::tools::testing::Fixture;

    async fn shell(fx: &Fixture, args: Value) -> Result<Value, ToolError> {
        let out = RunShell.call(args, &fx.ctx).await?;
        Ok(serde_json::from_str(&out.content).unwrap())
    }

    #[tokio::test]
    async fn reports_exit_code_and_output() {
        let fx = Fixture::new();
        fx.file("sub/x.txt", "");
        let out = shell(
            &fx,
            json!({"command": "ls; echo oops >&2; exit 4", "working_directory": "sub"}),
        )
        .await
        .unwrap();
        assert_eq!(
            out,
            json!({"exit_code": 4, "stdout": "x.txt\n", "stderr": "oops\n", "timed_out": false})
        );
        let out = shell(&fx, json!({"command": "cat"})).await.unwrap();
        assert_eq!(out["exit_code"], 0);
        assert_eq!(out["stdout"], "");
    }

    #[tokio::test]
    async fn times_out_with_the_clamped_timeout() {
        let mut fx = Fixture::new();
        fx.ctx.max_shell_timeout = Duration::from_secs(1);
        let started = Instant::now();
        let out = shell(&fx, json!({"command": "sleep 30", "timeout_seconds": 600}))
            .await
            .unwrap();
        assert!(started.elapsed() < Duration::from_secs(3));
        assert_eq!(out["timed_out"], true);
        assert_eq!(out["timeout_seconds"], 1);
        assert_eq!(out["exit_code"], 137);
        assert_eq!(out["signal"], 9);
    }

    #[tokio::test]
    async fn environment_is_the_scrubbed_one() {
        let mut fx = Fixture::new();
        fx.ctx.env = crate::tools::ChildEnv::scrubbed_from(
            [
                ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
                ("DEPLOY_TOKEN".to_owned(), "canary-71d2".to_owned()),
            ]
            .into_iter(),
            &[],
        );
        let out = shell(&fx, json!({"command": "env"})).await.unwrap();
        let stdout = out["stdout"].as_str().unwrap();
        assert!(!stdout.contains("canary-71d2"));
        assert!(stdout.contains("CI=1"));
    }

    #[tokio::test]
    async fn bad_arguments_and_directories_are_model_errors() {
        let fx = Fixture::new();
        for (args, expected) in [
            (json!({}), "missing required parameter `command`"),
            (json!({"command": "  "}), "`command` is empty"),
            (
                json!({"command": "ls", "working_directory": "../outside"}),
                "resolves outside",
            ),
            (
                json!({"command": "ls", "timeout_seconds": "soon"}),
                "`timeout_seconds` must be",
            ),
        ] {
            match shell(&fx, args.clone()).await {
                Err(ToolError::Model(message)) => {
                    assert!(message.contains(expected), "{args}: {message}")
                }
                other => panic!("{args}: {other:?}"),
            }
        }
        let target = RunShell
            .target(&json!({"command": "cargo test"}), &fx.ctx)
            .unwrap();
        assert_eq!(target.command.as_deref(), Some("cargo test"));
        assert_eq!(target.path.as_deref(), Some("."));
    }
}
