//! Discovery and calls with real executables (shell and Python) written
//! by the tests (issue 6, acceptance 1-4 and 6).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::tools::testing::Fixture;
use crate::tools::{Tool, ToolError};

/// A work tree (`fx.work()`, also the directory ybs runs in) with a home
/// and a cache directory beside it.
struct Setup {
    fx: Fixture,
    settings: DiscoverySettings,
}

impl Setup {
    fn new() -> Self {
        let fx = Fixture::new();
        let settings = DiscoverySettings {
            cwd: fx.work().to_owned(),
            home: Some(fx.root.join("home")),
            search_paths: Vec::new(),
            declared: Vec::new(),
            cache_dir: Some(fx.root.join("cache")),
            sandbox: None,
        };
        Self { fx, settings }
    }

    /// Writes an executable script at `relative` (to the work tree).
    fn script(&self, relative: &str, body: &str) -> PathBuf {
        let path = self.fx.file(relative, body);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    /// Writes an executable in `~/.ybs/tools` (operator-installed).
    fn user_tool(&self, name: &str, body: &str) -> PathBuf {
        let dir = self.fx.root.join("home/.ybs/tools");
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path
    }

    async fn discover(&self, names: &[&str]) -> Catalog {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let enable = Enable {
            names: &names,
            named_by: "task",
            policy: &|_| false,
        };
        discover::discover(&self.settings, &enable, &self.fx.ctx.env).await
    }

    async fn tool(&self, name: &str) -> ExternalTool {
        let catalog = self.discover(&[name]).await;
        let entry = catalog.get(name).unwrap();
        ExternalTool::new(entry, Metrics::new())
            .unwrap_or_else(|| panic!("{name}: {:?} {:?}", entry.status, entry.detail))
    }

    fn count(&self, relative: &str) -> usize {
        std::fs::read_to_string(self.fx.work().join(relative))
            .map(|text| text.lines().count())
            .unwrap_or(0)
    }
}

/// A shell tool that counts `--schema` runs and calls in files, echoes
/// its input and answers with the given schema.
fn echo_sh(schema: &str) -> String {
    format!(
        r#"#!/bin/sh
if [ "$1" = "--schema" ]; then
  echo x >> schema-runs
  cat <<'EOF'
{schema}
EOF
  exit 0
fi
echo x >> call-runs
input=$(cat)
printf '{{"success": true, "result": {{"input": %s, "mode": "%s"}}, "metadata": {{"pid": %s}}}}\n' "$input" "$YBS_TOOL_MODE" "$$"
"#
    )
}

const ECHO_SCHEMA: &str = r#"{"name": "echo", "description": "Echo the input", "parameters": {"message": {"type": "string", "description": "What to echo", "required": true}, "times": {"type": "integer", "default": 1}}}"#;

const PY_TOOL: &str = r#"#!/usr/bin/env python3
import json, sys
if "--schema" in sys.argv:
    print(json.dumps({"name": "add", "description": "Add two numbers",
                      "parameters": {"a": {"type": "number", "required": True},
                                     "b": {"type": "number", "required": True}}}))
    sys.exit(0)
params = json.load(sys.stdin)
print(json.dumps({"success": True, "result": params["a"] + params["b"]}))
"#;

#[tokio::test]
async fn discovery_statuses_from_schema_sidecar_neither_missing_and_invalid() {
    let mut setup = Setup::new();
    setup.script("tools/echo", &echo_sh(ECHO_SCHEMA));
    setup.script("tools/add.py", PY_TOOL);
    setup.script("tools/side", "#!/bin/sh\necho x >> side-runs\nexit 3\n");
    setup.fx.file(
        "tools/side.tool.json",
        r#"{"description": "From a sidecar", "parameters": {"n": {"type": "integer"}}}"#,
    );
    setup.script("tools/plain", "#!/bin/sh\necho hello\n");
    setup.script(
        "tools/bad",
        "#!/bin/sh\necho '{\"parameters\": {\"x\": {\"type\": \"text\"}}}'\n",
    );
    setup.fx.file("tools/README.md", "not a tool\n");
    setup.fx.file("tools/noexec", "#!/bin/sh\n");
    setup
        .fx
        .file("tools/noexec.tool.json", r#"{"parameters": {}}"#);
    setup.settings.declared.push(Declared {
        name: "gone".to_owned(),
        path: PathBuf::from("/nonexistent/tool"),
        description: None,
        parameters: None,
        timeout: DEFAULT_TIMEOUT,
        enabled: true,
        source: Source::Config,
    });
    let catalog = setup
        .discover(&["echo", "add", "side", "plain", "bad", "noexec"])
        .await;
    let status = |name: &str| {
        let entry = catalog
            .get(name)
            .unwrap_or_else(|| panic!("{name} not found"));
        (entry.status, entry.detail.clone().unwrap_or_default())
    };
    assert_eq!(status("echo").0, Status::Ready);
    assert_eq!(catalog.get("echo").unwrap().schema_from, Some("--schema"));
    assert_eq!(status("add").0, Status::Ready);
    assert_eq!(status("side").0, Status::Ready);
    assert_eq!(catalog.get("side").unwrap().schema_from, Some("sidecar"));
    assert_eq!(
        setup.count("side-runs"),
        0,
        "a sidecar means no --schema run"
    );
    assert_eq!(status("plain").0, Status::SchemaUnknown);
    let (bad, reason) = status("bad");
    assert_eq!(bad, Status::InvalidSchema);
    assert!(reason.contains("unknown type `text`"), "{reason}");
    assert_eq!(status("gone").0, Status::MissingBinary);
    assert_eq!(status("noexec").0, Status::NotExecutable);
    assert!(catalog.get("README").is_none());
    assert_eq!(catalog.get("echo").unwrap().description(), "Echo the input");
    // Offered to the model: only the ones with a schema.
    let echo = ExternalTool::new(catalog.get("echo").unwrap(), Metrics::new()).unwrap();
    assert!(echo.has_schema());
    assert_eq!(echo.spec().parameters["required"], json!(["message"]));
    let plain = ExternalTool::new(catalog.get("plain").unwrap(), Metrics::new()).unwrap();
    assert!(!plain.has_schema());
    assert!(ExternalTool::new(catalog.get("bad").unwrap(), Metrics::new()).is_none());
}

#[tokio::test]
async fn repository_tools_are_never_run_unless_enabled() {
    let setup = Setup::new();
    setup.script("tools/echo", &echo_sh(ECHO_SCHEMA));
    setup
        .fx
        .file("tools/side.tool.json", r#"{"parameters": {}}"#);
    setup.script("tools/side", "#!/bin/sh\n");
    let catalog = setup.discover(&[]).await;
    let echo = catalog.get("echo").unwrap();
    assert_eq!(echo.status, Status::Disabled);
    assert!(echo.detail.as_deref().unwrap().contains("tools.external"));
    assert_eq!(setup.count("schema-runs"), 0);
    assert_eq!(catalog.get("side").unwrap().status, Status::Disabled);
    assert!(
        catalog.get("side").unwrap().schema.is_some(),
        "sidecar read"
    );
    // The policy enables.
    let enable = Enable {
        names: &[],
        named_by: "task",
        policy: &|name| name == "echo",
    };
    let catalog = discover::discover(&setup.settings, &enable, &setup.fx.ctx.env).await;
    assert_eq!(catalog.get("echo").unwrap().status, Status::Ready);
    assert_eq!(catalog.get("echo").unwrap().enabled_by, Some("policy"));
    // Operator-installed tools are enabled as found.
    setup.user_tool("mine", &echo_sh(ECHO_SCHEMA));
    let catalog = setup.discover(&[]).await;
    assert_eq!(catalog.get("mine").unwrap().status, Status::Ready);
    assert_eq!(catalog.get("mine").unwrap().enabled_by, Some("operator"));
}

#[tokio::test]
async fn config_entries_disabled_inline_and_repository() {
    let mut setup = Setup::new();
    let path = setup.script("bin/inline", "#!/bin/sh\necho x >> schema-runs\n");
    let declared = |name: &str, enabled, source, parameters: Option<Value>| Declared {
        name: name.to_owned(),
        path: path.clone(),
        description: Some("Configured".to_owned()),
        parameters,
        timeout: Duration::from_secs(7),
        enabled,
        source,
    };
    setup.settings.declared = vec![
        declared(
            "inline",
            true,
            Source::Config,
            Some(json!({"q": {"type": "string"}})),
        ),
        declared("off", false, Source::Config, None),
        declared("repo", true, Source::RepositoryConfig, None),
    ];
    let catalog = setup.discover(&["off"]).await;
    let inline = catalog.get("inline").unwrap();
    assert_eq!(inline.status, Status::Ready);
    assert_eq!(inline.schema_from, Some("config"));
    assert_eq!(inline.timeout, Duration::from_secs(7));
    assert_eq!(inline.description(), "Configured");
    assert_eq!(
        catalog.get("off").unwrap().status,
        Status::Disabled,
        "a task cannot re-enable"
    );
    assert_eq!(catalog.get("repo").unwrap().status, Status::Disabled);
    assert_eq!(setup.count("schema-runs"), 0);
}

#[tokio::test]
async fn schema_cache_spares_unchanged_tools() {
    let setup = Setup::new();
    let path = setup.script("tools/echo", &echo_sh(ECHO_SCHEMA));
    setup.script("tools/plain", "#!/bin/sh\necho x >> plain-runs\nexit 1\n");
    for _ in 0..3 {
        let catalog = setup.discover(&["echo", "plain"]).await;
        assert_eq!(catalog.get("echo").unwrap().status, Status::Ready);
        assert_eq!(catalog.get("plain").unwrap().status, Status::SchemaUnknown);
    }
    assert_eq!(setup.count("schema-runs"), 1);
    assert_eq!(
        setup.count("plain-runs"),
        3,
        "a failed probe is never cached"
    );
    // A changed file is probed again.
    let longer = echo_sh(ECHO_SCHEMA) + "# changed\n";
    std::fs::write(&path, longer).unwrap();
    let catalog = setup.discover(&["echo"]).await;
    assert_eq!(catalog.get("echo").unwrap().status, Status::Ready);
    assert_eq!(setup.count("schema-runs"), 2);
}

#[tokio::test]
async fn calls_pass_json_on_stdin_and_read_the_envelope() {
    let setup = Setup::new();
    setup.script("tools/echo", &echo_sh(ECHO_SCHEMA));
    setup.script("tools/add.py", PY_TOOL);
    let echo = setup.tool("echo").await;
    let out = echo
        .call(json!({"message": "hi"}), &setup.fx.ctx)
        .await
        .unwrap();
    let result: Value = serde_json::from_str(&out.content).unwrap();
    assert_eq!(result["input"], json!({"message": "hi", "times": 1}));
    assert_eq!(result["mode"], "subprocess");
    let add = setup.tool("add").await;
    assert!(add.has_schema());
    let out = add
        .call(json!({"a": 2, "b": 3.5}), &setup.fx.ctx)
        .await
        .unwrap();
    assert_eq!(out.content, "5.5");
}

#[tokio::test]
async fn bad_parameters_are_rejected_before_spawn() {
    let setup = Setup::new();
    setup.script("tools/echo", &echo_sh(ECHO_SCHEMA));
    let echo = setup.tool("echo").await;
    for (args, expected) in [
        (json!({}), "missing required parameter `message`"),
        (
            json!({"message": 5}),
            "parameter `message` must be a string",
        ),
        (
            json!({"message": "m", "times": "2"}),
            "parameter `times` must be an integer",
        ),
    ] {
        let ctx = &setup.fx.ctx;
        match echo.target(&args, ctx) {
            Err(ToolError::Model(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("{args}: {other:?}"),
        }
        match echo.call(args.clone(), ctx).await {
            Err(ToolError::Model(message)) => assert!(message.contains(expected), "{message}"),
            other => panic!("{args}: {other:?}"),
        }
    }
    assert_eq!(setup.count("call-runs"), 0);
}

/// Tools that misbehave give a clear failed call, and ybs goes on.
#[tokio::test]
async fn bad_tools_fail_cleanly() {
    let setup = Setup::new();
    let sidecar = r#"{"parameters": {}}"#;
    let tools = [
        (
            "garbage",
            "#!/bin/sh\necho 'this is not json'\necho 'boom: parse failed' >&2\n",
        ),
        ("killed", "#!/bin/sh\necho 'about to die' >&2\nkill -9 $$\n"),
        ("exit137", "#!/bin/sh\nexit 137\n"),
        ("nosuccess", "#!/bin/sh\necho '{\"result\": 1}'\n"),
        (
            "refuses",
            "#!/bin/sh\necho '{\"success\": false, \"error\": \"no such thing\"}'\n",
        ),
        (
            "selfdelete",
            "#!/bin/sh\nrm -f \"$0\"\necho '{\"success\": true, \"result\": \"gone\"}'\n",
        ),
        (
            "flood",
            "#!/bin/sh\nhead -c 100000000 /dev/zero | tr '\\0' 'a'\n",
        ),
        (
            "fails",
            "#!/bin/sh\necho '{\"success\": false, \"error\": \"bad input\"}'\nexit 1\n",
        ),
    ];
    for (name, body) in tools {
        setup.script(&format!("tools/{name}"), body);
        setup.fx.file(&format!("tools/{name}.tool.json"), sidecar);
    }
    let names: Vec<&str> = tools.iter().map(|(name, _)| *name).collect();
    let catalog = setup.discover(&names).await;
    let metrics = Metrics::new();
    let run = |name: &str| {
        let tool = ExternalTool::new(catalog.get(name).unwrap(), metrics.clone()).unwrap();
        let ctx = setup.fx.ctx.clone();
        async move { tool.call(json!({}), &ctx).await }
    };
    let error = |result: Result<crate::tools::ToolOutput, ToolError>| match result {
        Err(ToolError::Model(message)) => message,
        other => panic!("expected a failed call: {other:?}"),
    };
    let message = error(run("garbage").await);
    assert!(
        message.contains("not a JSON envelope: this is not json"),
        "{message}"
    );
    assert!(
        message.contains("boom: parse failed"),
        "stderr tail: {message}"
    );
    let message = error(run("killed").await);
    assert!(
        message.contains("killed by signal 9") && message.contains("about to die"),
        "{message}"
    );
    assert!(error(run("exit137").await).contains("exited with code 137"));
    assert!(error(run("nosuccess").await).contains("without a boolean `success`"));
    assert_eq!(error(run("refuses").await), "no such thing");
    assert!(error(run("fails").await).contains("exited with code 1: bad input"));
    assert_eq!(run("selfdelete").await.unwrap().content, "gone");
    let message = error(run("selfdelete").await);
    assert!(message.contains("could not be started"), "{message}");
    let started = Instant::now();
    let message = error(run("flood").await);
    assert!(message.contains("more output than the cap"), "{message}");
    assert!(started.elapsed() < Duration::from_secs(20));
    let summary = metrics.summaries();
    let calls: u64 = summary.iter().map(|m| m.calls).sum();
    let successes: u64 = summary.iter().map(|m| m.successes).sum();
    assert_eq!((calls, successes), (9, 1));
}

#[tokio::test]
async fn a_hanging_tool_times_out_and_leaves_no_process() {
    let setup = Setup::new();
    setup.script(
        "tools/hang",
        "#!/bin/sh\nsleep 60 &\necho $! > child.pid\necho $$ > tool.pid\nsleep 60\n",
    );
    setup.fx.file(
        "tools/hang.tool.json",
        r#"{"parameters": {}, "timeout_seconds": 1}"#,
    );
    let catalog = setup.discover(&["hang"]).await;
    let entry = catalog.get("hang").unwrap();
    assert_eq!(entry.timeout, Duration::from_secs(1));
    let metrics = Metrics::new();
    let tool = ExternalTool::new(entry, metrics.clone()).unwrap();
    let started = Instant::now();
    let result = tool.call(json!({}), &setup.fx.ctx).await;
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    match result {
        Err(ToolError::Model(message)) => {
            assert!(message.contains("timed out after 1s"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    for file in ["tool.pid", "child.pid"] {
        let pid = setup.fx.read(file).trim().to_owned();
        assert!(!alive(&pid), "{file} {pid} still runs");
    }
    assert_eq!(metrics.summaries()[0].timeouts, 1);
}

/// True if process `pid` exists and is not a zombie.
fn alive(pid: &str) -> bool {
    // Give the kernel a moment to tear the group down.
    for _ in 0..50 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return false,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .is_some_and(|rest| rest.trim_start().starts_with('Z')) =>
            {
                return false;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    true
}

#[tokio::test]
async fn concurrent_calls_are_separate_processes() {
    let setup = Setup::new();
    setup.script(
        "tools/slow",
        "#!/bin/sh\ninput=$(cat)\necho $$ >> pids\nsleep 1\nprintf '{\"success\": true, \"result\": %s}\\n' \"$input\"\n",
    );
    setup.fx.file(
        "tools/slow.tool.json",
        r#"{"parameters": {"n": {"type": "integer", "required": true}}}"#,
    );
    let tool = setup.tool("slow").await;
    let started = Instant::now();
    let calls = (0..10).map(|n| tool.call(json!({"n": n}), &setup.fx.ctx));
    let results = futures_util::future::join_all(calls).await;
    let elapsed = started.elapsed();
    for (n, result) in results.into_iter().enumerate() {
        let value: Value = serde_json::from_str(&result.unwrap().content).unwrap();
        assert_eq!(value, json!({"n": n}));
    }
    let pids: std::collections::BTreeSet<String> =
        setup.fx.read("pids").lines().map(str::to_owned).collect();
    assert_eq!(pids.len(), 10, "ten processes");
    assert!(
        elapsed < Duration::from_secs(5),
        "ran one after another: {elapsed:?}"
    );
}

#[tokio::test]
async fn task_paths_and_missing_names() {
    let setup = Setup::new();
    setup.script("scripts/lint.sh", &echo_sh(ECHO_SCHEMA));
    let catalog = setup.discover(&["scripts/lint.sh", "nowhere"]).await;
    let lint = catalog.get("lint").unwrap();
    assert_eq!((lint.status, lint.source), (Status::Ready, Source::Task));
    assert_eq!(lint.enabled_by, Some("task"));
    let nowhere = catalog.get("nowhere").unwrap();
    assert_eq!(nowhere.status, Status::MissingBinary);
    assert!(nowhere.detail.as_deref().unwrap().contains("not found"));
}

#[test]
fn tool_names_come_from_file_names() {
    assert_eq!(
        discover::tool_name(Path::new("/t/run-tests.py")).as_deref(),
        Some("run-tests")
    );
    assert_eq!(
        discover::tool_name(Path::new("/t/git_summary")).as_deref(),
        Some("git_summary")
    );
    assert_eq!(discover::tool_name(Path::new("/t/bad name")), None);
}
