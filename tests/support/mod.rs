//! Test support: a temp-dir builder that runs the real `ybs` binary, and
//! helpers to write cassettes. Every suite takes its helpers from here:
//! [`git`] (a repository set up and inspected), [`task_yaml`] (a task
//! file), [`tool_calls`] (what a transcript records); a helper written a
//! second time in a suite belongs here instead.
#![allow(dead_code)]

pub mod cassette;
pub mod mcp_http;
#[path = "../../src/llm/test_server.rs"]
pub mod server;
pub mod wire;

use std::path::{Path, PathBuf};
use std::process::Command;

use assert_cmd::cargo::CommandCargoExt;
use serde_json::Value;
use tempfile::TempDir;

/// A scratch directory in which `ybs` runs, with an isolated HOME.
pub struct Ybs {
    dir: TempDir,
    home: TempDir,
    env: Vec<(String, String)>,
}

/// What one `ybs` invocation did.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    root: PathBuf,
}

/// Runs git in `dir` with no user or system config, a fixed identity and
/// every directory trusted (some suites hand the repository to another
/// user); asserts it succeeded and returns its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .env("GIT_CONFIG_COUNT", "1")
        .env("GIT_CONFIG_KEY_0", "safe.directory")
        .env("GIT_CONFIG_VALUE_0", "*")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?} in {}: {}",
        dir.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A task file's text: a prompt, a policy that allows everything, then
/// `extra` (more fields, one a line).
pub fn task_yaml(extra: &str) -> String {
    format!("prompt: do the thing\npolicy:\n  default: allow\n{extra}")
}

/// The tool calls a task's transcript records, in order.
pub fn tool_calls(transcript: &Value) -> &Vec<Value> {
    transcript["tool_calls"]
        .as_array()
        .expect("the transcript has tool_calls")
}

impl Ybs {
    /// [`git`] in this directory.
    pub fn git(&self, args: &[&str]) -> String {
        git(self.path(), args)
    }

    pub fn new() -> Self {
        Self {
            dir: TempDir::new().unwrap(),
            home: TempDir::new().unwrap(),
            env: Vec::new(),
        }
    }

    /// The operator's config turns the sandbox's exec guard off: the
    /// policy's parser decides alone, as on a kernel without the guard
    /// (docs/policy.md, "The exec guard").
    pub fn parser_alone(self) -> Self {
        let dir = self.home().join(".config/ybs");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.json"),
            r#"{"safety": {"sandbox_exec_guard": false}}"#,
        )
        .unwrap();
        self
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn home(&self) -> &Path {
        self.home.path()
    }

    /// A directory for programs put on the children's `PATH`: outside the
    /// workdir (whose `PATH` entries ybs drops) and outside `/tmp` (private
    /// inside the sandbox), so sandboxed children find them.
    pub fn bin_dir(&self) -> PathBuf {
        let name = self.dir.path().file_name().unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("bin")
            .join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A directory outside the workdir, the home and `/tmp` (when the
    /// build directory is not under it): a place confined programs must
    /// not write to.
    pub fn outside(&self) -> PathBuf {
        let name = self.dir.path().file_name().unwrap();
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join("outside")
            .join(name);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// Writes a file relative to the scratch dir (parents created).
    pub fn file(&self, relative: &str, content: &str) -> &Self {
        let path = self.dir.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
        self
    }

    /// Writes a cassette file from a list of interactions.
    pub fn cassette(&self, relative: &str, interactions: Vec<Value>) -> &Self {
        let text = serde_json::to_string_pretty(
            &serde_json::json!({"version": 1, "interactions": interactions}),
        )
        .unwrap();
        self.file(relative, &text)
    }

    pub fn env(mut self, key: &str, value: &str) -> Self {
        self.env.push((key.to_owned(), value.to_owned()));
        self
    }

    pub fn command(&self) -> Command {
        let mut command = Command::cargo_bin("ybs").unwrap();
        command.current_dir(self.dir.path());
        for (key, _) in std::env::vars() {
            if key.starts_with("YBS_")
                || key.ends_with("_API_KEY")
                || key.starts_with("GITHUB_")
                || key == "OPENAI_BASE_URL"
                || key == "OLLAMA_HOST"
            {
                command.env_remove(key);
            }
        }
        command.env("HOME", self.home.path());
        command.env("GIT_CONFIG_GLOBAL", "/dev/null");
        command.env("GIT_CONFIG_NOSYSTEM", "1");
        command.stdin(std::process::Stdio::null());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    pub fn run<I, S>(&self, args: I) -> Run
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let output = self.command().args(args).output().unwrap();
        Run::from_output(output, self.dir.path())
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(relative))
            .unwrap_or_else(|e| panic!("cannot read {relative}: {e}"))
    }

    pub fn json(&self, relative: &str) -> Value {
        serde_json::from_str(&self.read(relative))
            .unwrap_or_else(|e| panic!("{relative} is not JSON: {e}"))
    }

    pub fn exists(&self, relative: &str) -> bool {
        self.dir.path().join(relative).exists()
    }
}

impl Run {
    /// The outcome of a `ybs` started some other way in `root`.
    pub fn from_output(output: std::process::Output, root: &Path) -> Self {
        Self {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            root: root.to_owned(),
        }
    }

    /// Panics with the full output unless the exit code is `code`.
    pub fn expect_code(&self, code: i32) -> &Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code {}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }

    pub fn json(&self, relative: &str) -> Value {
        let text = std::fs::read_to_string(self.root.join(relative)).unwrap_or_else(|e| {
            panic!(
                "cannot read {relative}: {e}\n--- stdout\n{}\n--- stderr\n{}",
                self.stdout, self.stderr
            )
        });
        serde_json::from_str(&text).unwrap()
    }

    pub fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root.join(relative)).unwrap_or_else(|e| {
            panic!(
                "cannot read {relative}: {e}\n--- stdout\n{}\n--- stderr\n{}",
                self.stdout, self.stderr
            )
        })
    }

    /// The results of the tool calls the model saw in task `t`'s
    /// transcript, in order (parsed when the result is JSON, else the
    /// text as a JSON string).
    pub fn tool_results(&self) -> Vec<Value> {
        self.json("ybs-out/t/transcript.json")["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| {
                let content = m["content"].as_str().unwrap();
                serde_json::from_str(content).unwrap_or_else(|_| Value::from(content))
            })
            .collect()
    }

    /// Every line of an events.jsonl file, parsed.
    pub fn events(&self, task: &str) -> Vec<Value> {
        self.read(&format!("ybs-out/{task}/events.jsonl"))
            .lines()
            .map(|line| serde_json::from_str(line).unwrap())
            .collect()
    }
}
