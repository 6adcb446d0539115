use serde_json::json;

use super::*;

fn specs() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "read_file".to_owned(),
            description: "Read a file.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"],
                "additionalProperties": false,
            }),
        },
        ToolSpec {
            name: "run_shell".to_owned(),
            description: "Run a command.".to_owned(),
            parameters: json!({"type": "object", "properties": {"command": {"type": "string"}}}),
        },
    ]
}

/// Runs `script`, answering each tool command with `answer`; returns the
/// output and the calls made.
async fn run(
    script: &str,
    limits: ScriptLimits,
    answer: impl Fn(&InnerCall) -> InnerReply,
) -> (ScriptOutput, Vec<(String, Value)>) {
    let tool = ScriptTool::new(&specs(), limits);
    let mut run = tool
        .start(&json!({"commands": script}), None)
        .expect("starts");
    let mut calls = Vec::new();
    let mut open = true;
    loop {
        tokio::select! {
            call = run.calls.recv(), if open => match call {
                Some(call) => {
                    calls.push((call.name.clone(), call.arguments.clone()));
                    let reply = answer(&call);
                    call.reply(reply);
                }
                None => open = false,
            },
            output = &mut run.done => return (output.expect("an output"), calls),
        }
    }
}

fn file(call: &InnerCall) -> InnerReply {
    let path = call.arguments["path"].as_str().unwrap_or_default();
    InnerReply::Done {
        ok: true,
        content: json!({"path": path, "content": format!("1\tfn {path}()\n2\tlet x = 1;"), "total_lines": 2, "truncated": false}).to_string(),
    }
}

#[tokio::test]
async fn tool_commands_pipe_into_text_tools() {
    let (out, calls) = run(
        "for f in a b c; do read_file --path \"$f\" | grep fn; done | wc -l",
        ScriptLimits::default(),
        file,
    )
    .await;
    assert_eq!(out.stdout.trim(), "3", "{out:?}");
    assert_eq!(out.exit_code, 0);
    assert_eq!(calls.len(), 3);
    assert_eq!(calls[1], ("read_file".to_owned(), json!({"path": "b"})));
}

#[tokio::test]
async fn run_shell_is_not_a_command() {
    let tool = ScriptTool::new(&specs(), ScriptLimits::default());
    let names: Vec<&str> = tool.commands().iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["read_file"]);
    assert!(tool.spec().description.contains("read_file --path <str>"));
    let (out, calls) = run(
        "run_shell --command ls || echo fallback",
        ScriptLimits::default(),
        file,
    )
    .await;
    assert!(calls.is_empty());
    assert_eq!(out.stdout, "fallback\n", "{out:?}");
}

#[tokio::test]
async fn a_refusal_goes_to_stderr_and_fails_the_command() {
    let (out, _) = run(
        "read_file --path x || echo fallback",
        ScriptLimits::default(),
        |_| InnerReply::Done {
            ok: false,
            content: "denied by policy (rule `deny_paths`)".to_owned(),
        },
    )
    .await;
    assert_eq!(out.stdout, "fallback\n");
    assert!(
        out.stderr
            .contains("read_file: denied by policy (rule `deny_paths`)"),
        "{out:?}"
    );
}

#[tokio::test]
async fn the_filesystem_is_not_reachable() {
    let (out, _) = run(
        "cat /etc/passwd; echo hi > /tmp/x; ls /",
        ScriptLimits::default(),
        file,
    )
    .await;
    assert!(!out.stdout.contains("root:"), "{out:?}");
    assert_ne!(out.exit_code, 0);
}

#[tokio::test]
async fn limits_end_the_script() {
    let limits = ScriptLimits {
        max_tool_calls: 5,
        max_loop_iterations: 100,
        ..ScriptLimits::default()
    };
    let (out, _) = run("while true; do :; done; echo after", limits, file).await;
    assert!(
        out.stderr
            .contains("maximum loop iterations exceeded (100)"),
        "{out:?}"
    );
    assert!(out.ended_by.is_some(), "{out:?}");
    let (out, calls) = run(
        "for i in $(seq 1 50); do read_file --path a >/dev/null; done; echo after",
        limits,
        file,
    )
    .await;
    assert_eq!(calls.len(), 5);
    assert!(out.stderr.contains("more than 5 tool commands"), "{out:?}");
    assert!(!out.stdout.contains("after"), "{out:?}");
    assert_eq!(out.exit_code, 1);
    let many = "read_file --path a\n".repeat(10_000);
    let (out, calls) = run(&many, ScriptLimits::default(), file).await;
    assert_eq!(calls.len(), 100);
    assert!(
        out.stderr.contains("more than 100 tool commands"),
        "{out:?}"
    );
    let big = "echo x\n".repeat(20_000);
    let (out, _) = run(&big, ScriptLimits::default(), file).await;
    assert!(
        out.stderr
            .contains("maximum command count exceeded (10000)"),
        "{out:?}"
    );
}

#[tokio::test]
async fn wall_time_ends_a_slow_script() {
    let limits = ScriptLimits {
        wall_time: std::time::Duration::from_millis(300),
        ..ScriptLimits::default()
    };
    let started = std::time::Instant::now();
    let (out, calls) = run(
        "for i in 1 2 3 4 5 6 7 8 9 10; do read_file --path a; done",
        limits,
        |call| {
            std::thread::sleep(std::time::Duration::from_millis(100));
            file(call)
        },
    )
    .await;
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    assert!(calls.len() < 10, "{}", calls.len());
    assert!(out.ended_by.is_some(), "{out:?}");
    assert!(out.stderr.contains("ybs: the script was ended"), "{out:?}");
    assert_ne!(out.exit_code, 0);
}

#[test]
fn the_description_with_every_builtin_fits_the_token_budget() {
    let specs: Vec<ToolSpec> = crate::tools::builtin::NAMES
        .iter()
        .map(|name| {
            crate::tools::builtin::get(name)
                .expect("a built-in")
                .spec()
                .clone()
        })
        .collect();
    let tool = ScriptTool::new(&specs, ScriptLimits::default());
    let description = &tool.spec().description;
    for command in tool.commands() {
        assert!(
            description.contains(&format!("- {}", command.usage)),
            "{description}"
        );
    }
    assert!(!description.contains("run_shell"), "{description}");
    assert!(
        description.contains("write_file --path <str> --content <str>"),
        "{description}"
    );
    // About 4 bytes per token: the whole tool stays under 400 tokens.
    let bytes = description.len() + tool.spec().parameters.to_string().len();
    assert!(bytes < 1_600, "{bytes} bytes:\n{description}");
}

#[tokio::test]
async fn too_much_output_is_cut_and_reported() {
    let limits = ScriptLimits {
        max_output_bytes: 1024,
        ..ScriptLimits::default()
    };
    let (out, calls) = run(
        "for i in $(seq 1 2000); do echo line $i; done\nread_file --path after\necho end",
        limits,
        file,
    )
    .await;
    assert_eq!(out.stdout.len(), 1024);
    assert!(out.stdout.starts_with("line 1\nline 2\n"));
    assert!(!out.stdout.contains("end"), "{out:?}");
    assert!(calls.len() <= 1, "{calls:?}");
    assert_eq!(
        out.stderr,
        "ybs: more than 1 KiB of output (limit): the output was cut there\n"
    );
    assert_eq!(out.exit_code, 1);
}
