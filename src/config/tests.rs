//! Layering tests with temp dirs and an injected environment.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::task::{TaskSpec, load_str};

use super::*;

/// A fake machine: system dir, home, cwd, environment.
struct World {
    _root: tempfile::TempDir,
    system: PathBuf,
    home: PathBuf,
    cwd: PathBuf,
    env: HashMap<String, String>,
}

impl World {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let system = root.path().join("etc/ybs/config.json");
        let home = root.path().join("home");
        let cwd = root.path().join("repo");
        std::fs::create_dir_all(&home).unwrap();
        std::fs::create_dir_all(&cwd).unwrap();
        Self {
            _root: root,
            system,
            home,
            cwd,
            env: HashMap::new(),
        }
    }

    fn write(&self, path: &Path, text: &str) -> PathBuf {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        path.to_path_buf()
    }

    fn set(&mut self, name: &str, value: &str) {
        self.env.insert(name.to_owned(), value.to_owned());
    }

    fn load(&self, overrides: &Overrides) -> Result<Config, ConfigError> {
        let env = |name: &str| self.env.get(name).cloned();
        let sources = Sources {
            cwd: &self.cwd,
            home: Some(&self.home),
            system_config: &self.system,
            env: &env,
        };
        load(overrides, &sources)
    }
}

fn task(text: &str) -> TaskSpec {
    let file = load_str(Path::new("t.yaml"), text, &[]).unwrap();
    file.tasks.into_iter().next().unwrap()
}

const LIST_TASK: &str = "\
defaults: { model: from-defaults, limits: { max_iterations: 10 } }
tasks:
  - id: a
    prompt: p
";
const OWN_TASK: &str = "\
defaults: { model: from-defaults, limits: { max_iterations: 10 } }
tasks:
  - id: a
    prompt: p
    model: from-task
    limits: { max_iterations: 11, timeout: 5m }
";

#[test]
fn precedence_at_every_layer() {
    let mut world = World::new();
    let model = |world: &World, overrides: &Overrides, text: &str| {
        world
            .load(overrides)
            .unwrap()
            .task_settings(&task(text))
            .model
    };
    let flags = Overrides::default();
    assert_eq!(model(&world, &flags, "prompt: p\n"), "replay");
    assert_eq!(model(&world, &flags, LIST_TASK), "from-defaults");
    assert_eq!(model(&world, &flags, OWN_TASK), "from-task");
    world.write(&world.system.clone(), r#"{"llm": {"model": "system"}}"#);
    assert_eq!(model(&world, &flags, OWN_TASK), "system");
    world.write(
        &world.home.join(".config/ybs/config.json"),
        "llm: { model: user }\n",
    );
    assert_eq!(model(&world, &flags, OWN_TASK), "user");
    world.write(
        &world.home.join(".ybs.json"),
        r#"{"llm": {"model": "home"}}"#,
    );
    assert_eq!(model(&world, &flags, OWN_TASK), "home");
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"llm": {"model": "repo"}}"#,
    );
    assert_eq!(model(&world, &flags, OWN_TASK), "repo");
    let explicit = world.write(&world.cwd.join("ci.yaml"), "llm:\n  model: explicit\n");
    let with_config = Overrides {
        config_file: Some(PathBuf::from("ci.yaml")),
        ..Overrides::default()
    };
    assert_eq!(model(&world, &with_config, OWN_TASK), "explicit");
    world.set("YBS_MODEL", "env");
    assert_eq!(model(&world, &with_config, OWN_TASK), "env");
    let with_flag = Overrides {
        model: Some("flag".into()),
        config_file: Some(explicit),
        ..Overrides::default()
    };
    assert_eq!(model(&world, &with_flag, OWN_TASK), "flag");
    let config = world.load(&with_flag).unwrap();
    assert_eq!(config.files.len(), 5, "{:?}", config.files);
}

#[test]
fn limits_narrower_wins_and_a_task_may_not_widen_the_operator() {
    let mut world = World::new();
    let load = |world: &World, overrides: &Overrides| world.load(overrides).unwrap();
    let flags = Overrides::default();
    // No operator value: the task's own limits apply, above the default.
    let config = load(&world, &flags);
    assert_eq!(config.task_settings(&task(LIST_TASK)).max_iterations, 10);
    assert_eq!(config.task_settings(&task(OWN_TASK)).max_iterations, 11);
    assert_eq!(
        config.task_settings(&task(OWN_TASK)).timeout,
        Some(Duration::from_secs(300))
    );
    let big = "prompt: p\nlimits: { max_iterations: 50 }\n";
    assert_eq!(config.task_settings(&task(big)).max_iterations, 50);
    assert!(config.check_task(&task(big)).is_empty());
    world.write(
        &world.home.join(".ybs.json"),
        r#"{"agent": {"max_iterations": 40}, "context": {"max_tool_output_chars": 500}}"#,
    );
    let config = load(&world, &flags);
    // The task's narrower values win over the operator's.
    assert_eq!(config.task_settings(&task(OWN_TASK)).max_iterations, 11);
    assert_eq!(
        config.task_settings(&task("prompt: p\n")).max_iterations,
        40
    );
    assert_eq!(
        config.task_settings(&task(OWN_TASK)).max_tool_output_chars,
        500
    );
    // A wider one is refused, naming the file, the key and the operator's value.
    let problems = config.check_task(&task(big));
    assert_eq!(problems.len(), 1, "{problems:?}");
    let home_file = world.home.join(".ybs.json");
    assert_eq!(
        problems[0].to_string().lines().next().unwrap(),
        format!(
            "t.yaml:2:27: `limits.max_iterations: 50` of task `t` is wider than the operator's 40 (set by {})",
            home_file.display()
        )
    );
    world.set("YBS_MAX_ITERATIONS", "5");
    world.set("YBS_TIMEOUT", "90");
    let config = load(&world, &flags);
    assert_eq!(config.task_settings(&task(LIST_TASK)).max_iterations, 5);
    assert_eq!(config.check_task(&task(OWN_TASK)).len(), 2);
    let slow_check = "prompt: p\nchecks: [{ run: make, timeout: 10m }, { run: ls, timeout: 5s }]\n";
    let problems = config.check_task(&task(slow_check));
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].message.starts_with(
            "`timeout: 600s` of check `make` of task `t` is wider than the operator's 90s"
        ),
        "{problems:?}"
    );
    let narrow = "prompt: p\nlimits: { max_iterations: 3, timeout: 1m }\n";
    assert!(config.check_task(&task(narrow)).is_empty());
    assert_eq!(config.task_settings(&task(narrow)).max_iterations, 3);
    assert_eq!(
        config.task_settings(&task(narrow)).timeout,
        Some(Duration::from_secs(60))
    );
    // No limit set anywhere: 4096.
    assert_eq!(config.task_settings(&task("prompt: p\n")).max_tokens, 4096);
    world.write(
        &world.home.join(".ybs.json"),
        "llm: { max_output_tokens: 1000 }\n",
    );
    let config = load(&world, &flags);
    let tokens = |n: u32| format!("prompt: p\nmax_output_tokens: {n}\n");
    assert_eq!(config.task_settings(&task(&tokens(500))).max_tokens, 500);
    assert_eq!(config.task_settings(&task("prompt: p\n")).max_tokens, 1000);
    // The older name is the same setting.
    assert_eq!(
        config
            .task_settings(&task("prompt: p\nmax_tokens: 300\n"))
            .max_tokens,
        300
    );
    assert!(config.check_task(&task(&tokens(500))).is_empty());
    let problems = config.check_task(&task(&tokens(4000)));
    assert!(
        problems[0]
            .message
            .starts_with("`max_output_tokens: 4000` of task `t` is wider than the operator's 1000"),
        "{problems:?}"
    );
    let flags = Overrides {
        max_iterations: Some(2),
        ..Overrides::default()
    };
    let config = load(&world, &flags);
    let problems = config.check_task(&task(narrow));
    assert!(
        problems[0].message.contains("set by a command-line flag"),
        "{problems:?}"
    );
}

#[test]
fn the_repository_config_only_narrows_the_operators() {
    let world = World::new();
    world.write(
        &world.home.join(".ybs.json"),
        "agent: { max_iterations: 3 }\ngit: { auto_commit: false }\ntools: { builtin: { run_shell: { enabled: false, timeout_seconds: 5 } } }\n",
    );
    let repo = world.cwd.join(".ybs.json");
    world.write(
        &repo,
        "{\n  \"agent\": {\"max_iterations\": 50},\n  \"git\": {\"auto_commit\": true},\n  \"tools\": {\"builtin\": {\"run_shell\": {\"enabled\": true, \"timeout_seconds\": 60}}}\n}\n",
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    let lines: Vec<String> = diagnostics.0.iter().map(ToString::to_string).collect();
    assert_eq!(lines.len(), 4, "{lines:#?}");
    let home = world.home.join(".ybs.json");
    assert!(lines[0].starts_with(&format!(
        "{}:2:31: `agent.max_iterations: 50` in the repository's config is wider than the operator's 3 (set by {})",
        repo.display(),
        home.display()
    )), "{lines:#?}");
    assert!(lines[1].contains("`git.auto_commit: true`"), "{lines:#?}");
    assert!(
        diagnostics.0[1]
            .hint
            .as_deref()
            .unwrap()
            .contains("may turn it off, never on"),
        "{lines:#?}"
    );
    assert!(
        lines[2].contains("tools.builtin.run_shell.enabled"),
        "{lines:#?}"
    );
    assert!(
        lines[3].contains("tools.builtin.run_shell.timeout_seconds: 60s"),
        "{lines:#?}"
    );
    // Narrower values apply.
    world.write(
        &repo,
        "agent: { max_iterations: 2, retry_attempts: 0 }\ntools: { builtin: { run_shell: { timeout_seconds: 2 }, read_file: { enabled: false } } }\n",
    );
    let config = world.load(&Overrides::default()).unwrap();
    assert_eq!(config.session_settings().max_iterations, 2);
    assert_eq!(config.retry().attempts, 0);
    assert!(!config.git.auto_commit);
    assert!(!config.tools.builtin["run_shell"].enabled);
    assert!(!config.tools.builtin["read_file"].enabled);
    assert_eq!(
        config.tools.builtin["run_shell"].timeout,
        Some(Duration::from_secs(2))
    );
}

#[test]
fn keys_without_an_effect_are_rejected() {
    let world = World::new();
    world.write(
        &world.home.join(".ybs.json"),
        "context: { repo_map_tokens: 1024 }\nsafety: { require_confirmation: [run_shell] }\nui: { color: auto }\n",
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    let text = diagnostics.to_string();
    assert_eq!(diagnostics.len(), 3, "{text}");
    assert!(
        text.contains(":1:12: `context.repo_map_tokens` is not supported"),
        "{text}"
    );
    assert!(
        text.contains(":2:11: `safety.require_confirmation` is not supported"),
        "{text}"
    );
    assert!(text.contains("policy `ask` rule"), "{text}");
    assert!(text.contains("on_ask"), "{text}");
    assert!(text.contains(":3:1: `ui` is not supported"), "{text}");
}

#[test]
fn prices_are_the_operators_and_a_cost_limit_needs_one() {
    let world = World::new();
    let limited = "prompt: p\nmodel: my-model\nlimits: { max_cost_usd: 0.5 }\n";
    let config = world.load(&Overrides::default()).unwrap();
    let problems = config.check_task(&task(limited));
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0]
            .message
            .contains("price of model `my-model` is not known")
    );
    assert!(problems[0].hint.as_deref().unwrap().contains("llm.price"));
    world.write(
        &world.home.join(".ybs.json"),
        "llm: { price: { input_per_mtok: 1, output_per_mtok: 2, cached_input_per_mtok: 0.1 } }\n",
    );
    let config = world.load(&Overrides::default()).unwrap();
    assert!(config.check_task(&task(limited)).is_empty());
    assert_eq!(
        config
            .price_table()
            .price("my-model")
            .unwrap()
            .cached_input_per_mtok,
        Some(0.1)
    );
    world.write(
        &world.cwd.join(".ybs.json"),
        "llm: { pricing: { my-model: { input_per_mtok: 0, output_per_mtok: 0 } } }\n",
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    assert!(
        diagnostics
            .to_string()
            .contains("`llm.pricing` cannot be set in the repository's config")
    );
}

#[test]
fn unknown_key_names_line_col_and_suggests() {
    let world = World::new();
    world.write(
        &world.cwd.join(".ybs.json"),
        "{\n  \"llm\": {\n    \"modle\": \"x\"\n  },\n  \"agnet\": {}\n}\n",
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    let path = world.cwd.join(".ybs.json");
    assert_eq!(diagnostics.len(), 2);
    assert_eq!(
        diagnostics.0[0].to_string(),
        format!(
            "{}:3:5: unknown field `modle` in `llm`, expected one of `provider`, `model`, `endpoint`, `temperature`, `max_tokens`, `max_output_tokens`, `timeout_seconds`, `stream`, `stream_idle_timeout_seconds`, `total_timeout_seconds`, `text_tool_calls`, `pricing`, `price`, `max_response_bytes`, `prompt_cache`, `prompt_cache_ttl`, `prompt_cache_key`",
            path.display()
        )
    );
    assert_eq!(
        diagnostics.0[0].hint.as_deref(),
        Some("did you mean `model`?")
    );
    assert!(
        diagnostics.0[1]
            .to_string()
            .contains(":5:3: unknown field `agnet` in the config file")
    );
    assert_eq!(
        diagnostics.0[1].hint.as_deref(),
        Some("did you mean `agent`?")
    );
}

const SEED_JSON: &str = r#"{
  "version": "1.0",
  "llm": {
    "provider": "ollama",
    "model": "qwen3:14b",
    "endpoint": "http://localhost:11434",
    "temperature": 0.7,
    "max_tokens": 4096,
    "timeout_seconds": 120,
    "text_tool_calls": true,
    "pricing": { "my-model": { "input_per_mtok": 1, "output_per_mtok": 2.5 } }
  },
  "context": { "max_tokens": 32000, "compaction_threshold": 0.9, "max_tool_output_chars": 10000 },
  "agent": { "max_iterations": 25, "retry_attempts": 5, "retry_backoff_base_ms": 250 },
  "safety": {
    "sandbox_enabled": true,
    "sandbox_allowed_paths": ["./"],
    "sandbox_blocked_paths": ["~/.ssh", "~/.aws", "~/.config"],
    "blocked_commands": ["rm -rf /", "sudo", "chmod 777"],
    "env_passthrough": ["GITHUB_TOKEN"]
  },
  "tools": {
    "builtin": {
      "read_file": {"enabled": true},
      "run_shell": {"enabled": true, "timeout_seconds": 60}
    },
    "external": [
      { "name": "web_search", "type": "executable", "path": "~/.ybs/tools/web-search", "enabled": true,
        "parameters": { "type": "object", "properties": { "q": { "type": "string" } } } }
    ],
    "search_paths": ["/opt/tools"]
  },
  "git": { "auto_commit": false, "commit_message_prefix": "[bot]" }
}"#;

#[test]
fn the_seed_schema_in_json() {
    let world = World::new();
    world.write(&world.home.join(".config/ybs/config.json"), SEED_JSON);
    let config = world.load(&Overrides::default()).unwrap();
    let settings = config.session_settings();
    assert_eq!(settings.provider, "ollama");
    assert_eq!(settings.model, "qwen3:14b");
    assert_eq!(settings.endpoint.as_deref(), Some("http://localhost:11434"));
    assert_eq!(settings.endpoint_origin, Origin::Operator);
    assert_eq!(settings.temperature, Some(0.7));
    assert_eq!(settings.max_tokens, 4096);
    assert!(settings.text_tool_calls);
    assert_eq!(config.llm.pricing["my-model"].output_per_mtok, 2.5);
    assert!(config.price_table().price("my-model").is_some());
    assert_eq!(config.context.max_tokens, Some(32000));
    assert!((config.context.compaction_threshold - 0.9).abs() < f64::EPSILON);
    assert_eq!(config.retry().attempts, 5);
    assert_eq!(config.retry().base_delay, Duration::from_millis(250));
    assert_eq!(config.safety.allowed_paths, ["./"]);
    assert_eq!(
        config.safety.blocked_paths,
        ["~/.ssh", "~/.aws", "~/.config"]
    );
    assert_eq!(config.safety.env_passthrough, ["GITHUB_TOKEN"]);
    assert_eq!(
        config.tools.builtin["run_shell"].timeout,
        Some(Duration::from_secs(60))
    );
    assert!(config.tools.builtin["write_file"].enabled);
    assert_eq!(config.tools.external[0].name, "web_search");
    assert_eq!(config.tools.external[0].timeout, Duration::from_secs(30));
    assert_eq!(
        config.tools.external[0].parameters.as_ref().unwrap()["type"],
        "object"
    );
    assert_eq!(config.tools.search_paths, [PathBuf::from("/opt/tools")]);
    assert!(!config.git.auto_commit);
    assert_eq!(config.git.commit_message_prefix, "[bot]");
}

#[test]
fn yaml_config_and_higher_files_override_field_by_field() {
    let world = World::new();
    world.write(&world.home.join(".config/ybs/config.json"), SEED_JSON);
    world.write(
        &world.home.join(".ybs.json"),
        "# YAML in a .json file is fine\nllm:\n  model: small\n  pricing:\n    other: { input_per_mtok: 0, output_per_mtok: 0 }\n",
    );
    let config = world.load(&Overrides::default()).unwrap();
    let settings = config.session_settings();
    assert_eq!(settings.model, "small");
    assert_eq!(settings.provider, "ollama");
    assert_eq!(config.llm.pricing.len(), 2);
}

#[test]
fn api_key_in_a_file_is_rejected() {
    let world = World::new();
    world.write(
        &world.home.join(".ybs.json"),
        "llm:\n  provider: openai\n  api_key: sk-abc\n",
    );
    let error = world.load(&Overrides::default()).unwrap_err();
    let ConfigError::Files(diagnostics) = &error else {
        panic!()
    };
    assert_eq!(diagnostics.len(), 1);
    let message = diagnostics.0[0].to_string();
    assert!(message.contains(":3:3: `llm.api_key` is not allowed: API keys come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY), never from files"), "{message}");
    assert!(!message.contains("sk-abc"));
    assert_eq!(error.exit_code(), 2);
}

#[test]
fn bad_env_values_name_the_variable() {
    let mut world = World::new();
    world.set("YBS_TEMPERATURE", "hot");
    let error = world.load(&Overrides::default()).unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid value `hot` for environment variable YBS_TEMPERATURE: expected a number of 0 or more, like 0.2"
    );
    world.env.clear();
    world.set("YBS_OUT", "results");
    world.set("YBS_CASSETTE", "c.json");
    world.set("YBS_RETRY_ATTEMPTS", "1");
    world.set("YBS_GIT_AUTHOR", "CI <ci@example.com>");
    let config = world.load(&Overrides::default()).unwrap();
    assert_eq!(config.out, PathBuf::from("results"));
    assert_eq!(config.cassette, Some(PathBuf::from("c.json")));
    assert_eq!(config.retry().attempts, 1);
    assert_eq!(config.git.author.as_ref().unwrap().name, "CI");
    let flags = Overrides {
        out: Some("flag-out".into()),
        ..Overrides::default()
    };
    assert_eq!(world.load(&flags).unwrap().out, PathBuf::from("flag-out"));
}

#[test]
fn missing_config_file_is_an_error_only_when_asked_for() {
    let mut world = World::new();
    assert!(world.load(&Overrides::default()).unwrap().files.is_empty());
    let flags = Overrides {
        config_file: Some("nope.json".into()),
        ..Overrides::default()
    };
    let error = world.load(&flags).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("nope.json: config file not found\nhint: "),
        "{error}"
    );
    world.set("YBS_CONFIG", "also-missing.yaml");
    assert!(world.load(&Overrides::default()).is_err());
}

#[test]
fn errors_of_all_files_are_reported_together() {
    let world = World::new();
    world.write(
        &world.system.clone(),
        "{\"llm\": {\"provider\": \"opneai\"}}",
    );
    world.write(
        &world.home.join(".ybs.json"),
        "agent: { max_iterations: many }\n",
    );
    world.write(&world.cwd.join(".ybs.json"), "{ broken\n");
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!()
    };
    assert_eq!(diagnostics.len(), 3, "{diagnostics}");
    assert_eq!(
        diagnostics.0[0].hint.as_deref(),
        Some("did you mean `openai`?")
    );
    assert!(diagnostics.0[1].message.contains("expected a whole number"));
    assert!(diagnostics.0[2].message.starts_with("invalid YAML"));
}

#[test]
fn the_repository_config_cannot_widen_trust() {
    let world = World::new();
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"safety": {"allowed_paths": ["/"], "env_passthrough": ["AWS_SECRET_ACCESS_KEY"], "sandbox_enabled": false}}"#,
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!()
    };
    assert_eq!(diagnostics.len(), 3, "{diagnostics}");
    assert!(
        diagnostics
            .iter()
            .all(|d| d.message.contains("repository's config"))
    );

    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"safety": {"blocked_paths": ["secrets/**"], "blocked_commands": []}, "llm": {"endpoint": "https://example.com"}}"#,
    );
    let config = world.load(&Overrides::default()).unwrap();
    assert!(config.safety.blocked_paths.contains(&"~/.ssh".to_owned()));
    assert!(
        config
            .safety
            .blocked_paths
            .contains(&"secrets/**".to_owned())
    );
    assert_eq!(config.safety.blocked_commands, defaults::BLOCKED_COMMANDS);
    assert_eq!(
        config.session_settings().endpoint_origin,
        Origin::Repository
    );
    let task_endpoint = task("prompt: p\nendpoint: https://task.example\n");
    assert_eq!(
        config.task_settings(&task_endpoint).endpoint.as_deref(),
        Some("https://example.com")
    );

    let operator_only = World::new();
    let settings = operator_only
        .load(&Overrides::default())
        .unwrap()
        .task_settings(&task_endpoint);
    assert_eq!(settings.endpoint.as_deref(), Some("https://task.example"));
    assert_eq!(settings.endpoint_origin, Origin::TaskFile);
}

#[test]
fn no_sandbox_flag_and_flag_validation() {
    let world = World::new();
    let flags = Overrides {
        no_sandbox: true,
        ..Overrides::default()
    };
    assert!(!world.load(&flags).unwrap().safety().sandbox_enabled);
    let flags = Overrides {
        provider: Some("gpt".into()),
        ..Overrides::default()
    };
    let error = world.load(&flags).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("invalid value `gpt` for `--provider`")
    );
}

#[test]
fn policy_file() {
    let world = World::new();
    let path = world.write(
        &world.cwd.join("policy.yaml"),
        "deny:\n  - run_shell: { command: \"git push*\" }\ndefault: deny\n",
    );
    let spec = load_policy_file(&path).unwrap();
    assert_eq!(spec.deny[0].commands, ["git push*"]);
    let bad = world.write(
        &world.cwd.join("bad.yaml"),
        "allow: [read_file]\non_ask: later\n",
    );
    let error = load_policy_file(&bad).unwrap_err();
    assert!(error.to_string().contains(":2:9: "), "{error}");
    assert!(load_policy_file(&world.cwd.join("missing.yaml")).is_err());
}

#[test]
fn streaming_and_deadlines_from_llm() {
    let world = World::new();
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"llm": {"stream": false, "stream_idle_timeout_seconds": "500ms", "total_timeout_seconds": "2m"}}"#,
    );
    let settings = world
        .load(&Overrides::default())
        .unwrap()
        .session_settings();
    assert!(!settings.stream);
    assert_eq!(settings.llm_idle_timeout, Duration::from_millis(500));
    assert_eq!(settings.llm_total_timeout, Duration::from_secs(120));
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"llm": {"stream_idle_timeout_seconds": 0}}"#,
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    assert!(
        diagnostics.0[0]
            .to_string()
            .contains("invalid `stream_idle_timeout_seconds`: must be longer than 0"),
        "{diagnostics}"
    );
}

#[test]
fn repository_config_cannot_trust_tools() {
    let world = World::new();
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"tools": {"external": [{"name": "lint", "path": "tools/lint"}]}}"#,
    );
    world.write(
        &world.home.join(".ybs.json"),
        r#"{"tools": {"external": [{"name": "fmt", "path": "/opt/fmt"}]}}"#,
    );
    let config = world.load(&Overrides::default()).unwrap();
    let by_name = |name: &str| {
        config
            .tools
            .external
            .iter()
            .find(|tool| tool.name == name)
            .unwrap()
            .from_repository
    };
    assert!(by_name("lint"));
    assert!(!by_name("fmt"));

    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"tools": {"search_paths": ["/usr/bin"]}}"#,
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    assert!(
        diagnostics.0[0]
            .to_string()
            .contains("`tools.search_paths` cannot be set in the repository's config")
    );
}

#[test]
fn a_huge_repository_config_is_refused_without_reading_it_all() {
    let world = World::new();
    let repo = world.cwd.join(".ybs.json");
    world.write(&repo, &format!("# {}\n", "x".repeat(2 << 20)));
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!("file errors expected")
    };
    assert_eq!(
        diagnostics.to_string().lines().next().unwrap(),
        format!(
            "{}: the config file is larger than 1048576 bytes",
            repo.display()
        )
    );
}

#[test]
fn allowed_workdirs_come_from_the_operator_only() {
    let world = World::new();
    world.write(
        &world.home.join(".config/ybs/config.json"),
        r#"{"safety": {"allowed_workdirs": ["/srv/work", "~/scratch"]}}"#,
    );
    let config = world.load(&Overrides::default()).unwrap();
    assert_eq!(config.safety.allowed_workdirs, ["/srv/work", "~/scratch"]);
    world.write(
        &world.cwd.join(".ybs.json"),
        r#"{"safety": {"allowed_workdirs": ["/"]}}"#,
    );
    let ConfigError::Files(diagnostics) = world.load(&Overrides::default()).unwrap_err() else {
        panic!()
    };
    let text = diagnostics.to_string();
    assert!(
        text.contains("`safety.allowed_workdirs` cannot be set in the repository's config"),
        "{text}"
    );
}
