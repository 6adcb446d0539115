//! `ybs report fixture OUT/<task> --to DIR`: a run recorded with
//! `--record` becomes a regression fixture (docs/outputs.md#fixtures):
//! `DIR/<task>.yaml`, the task alone, answering from the `replay`
//! provider, and `DIR/<task>.cassette.json`, the task's masked
//! interactions, so that `ybs run DIR/<task>.yaml` replays offline to the
//! same end: the same tool calls, status and reason.
//!
//! The task file is the one the run read, found where its transcript
//! says (relative to the directory ybs runs in), with only this task
//! left, its provider `replay` and no endpoint. It is written as JSON,
//! which is YAML too, so every value keeps its type.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::core::decode::yaml::parse;
use crate::core::exit;
use crate::core::outcome::{Reason, Status};

use super::outdir::OutDir;
use super::sinks::CASSETTE_FILE;
use super::transcript::{TRANSCRIPT_FILE, Transcript};

/// What `ybs report fixture` wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Fixture {
    pub task: String,
    pub task_file: PathBuf,
    pub cassette: PathBuf,
    /// How the recorded run ended, which the replay should end with.
    pub status: Option<Status>,
    pub reason: Option<Reason>,
    pub tool_calls: usize,
}

/// Why no fixture was made. Every variant but [`Self::Write`] is a
/// problem with the inputs: nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum FixtureError {
    #[error("`{}` holds no {TRANSCRIPT_FILE}", dir.display())]
    NoTranscript { dir: PathBuf },
    #[error("`{}` is not a ybs transcript", path.display())]
    Transcript {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("`{}` holds no {CASSETTE_FILE}: the run of task `{task}` was not recorded", dir.display())]
    NoCassette { dir: PathBuf, task: String },
    #[error("failed to read the task file `{}` the run read", path.display())]
    TaskFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{}: {message}", path.display())]
    TaskFileInvalid { path: PathBuf, message: String },
    #[error("failed to write the fixture")]
    Write { source: std::io::Error },
}

impl FixtureError {
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::Write { .. } => exit::INFRA,
            _ => exit::USAGE,
        }
    }

    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NoTranscript { .. } | Self::Transcript { .. } => Some(
                "give the directory of one task in a run's output, like `ybs-out/<task-id>`"
                    .to_owned(),
            ),
            Self::NoCassette { .. } => Some(
                "run the task with `--record FILE`: each task's interactions are kept in OUT/<task>/cassette.json"
                    .to_owned(),
            ),
            Self::TaskFile { .. } | Self::TaskFileInvalid { .. } => Some(
                "run `ybs report fixture` from the directory the run ran in, with the task file as it was"
                    .to_owned(),
            ),
            Self::Write { .. } => None,
        }
    }
}

impl exit::Failure for FixtureError {
    fn exit_code(&self) -> u8 {
        FixtureError::exit_code(self)
    }
    fn hint(&self) -> Option<String> {
        FixtureError::hint(self)
    }
}

/// Makes the fixture of the task whose outputs are in `task_dir` in
/// `to` (created when missing); `cwd` is where the run ran, which the
/// transcript's task file path is relative to.
pub fn make(task_dir: &Path, to: &Path, cwd: &Path) -> Result<Fixture, FixtureError> {
    let transcript_path = task_dir.join(TRANSCRIPT_FILE);
    let text = match std::fs::read(&transcript_path) {
        Ok(text) => text,
        Err(_) => {
            return Err(FixtureError::NoTranscript {
                dir: task_dir.to_owned(),
            });
        }
    };
    let transcript: Transcript =
        serde_json::from_slice(&text).map_err(|source| FixtureError::Transcript {
            path: transcript_path.clone(),
            source,
        })?;
    let task = transcript.task.id.clone();
    let cassette =
        std::fs::read(task_dir.join(CASSETTE_FILE)).map_err(|_| FixtureError::NoCassette {
            dir: task_dir.to_owned(),
            task: task.clone(),
        })?;
    let file = cwd.join(&transcript.task.file);
    let source = std::fs::read_to_string(&file).map_err(|source| FixtureError::TaskFile {
        path: file.clone(),
        source,
    })?;
    let invalid = |message: String| FixtureError::TaskFileInvalid {
        path: file.clone(),
        message,
    };
    let (root, errors) = parse(&source);
    if let Some(error) = errors.first() {
        return Err(FixtureError::TaskFileInvalid {
            path: PathBuf::from(format!("{}:{}", file.display(), error.span)),
            message: error.message.clone(),
        });
    }
    let root = root.map(|node| node.to_json()).unwrap_or(Value::Null);
    let fixture = alone(root, &transcript).map_err(|error| invalid(error.to_string()))?;
    let status = transcript
        .status
        .map_or_else(|| "unfinished".to_owned(), |status| status.to_string());
    let reason = transcript
        .reason
        .map_or_else(String::new, |reason| format!(" ({reason})"));
    let mut yaml = format!(
        "# Made by `ybs report fixture` from task `{task}` of run {}, which ended {status}{reason}\n# after {} tool calls. It replays {task}.cassette.json: `ybs run` this file.\n",
        transcript.manifest.run_id.replace('\n', " "),
        transcript.tool_calls.len(),
    )
    .replace('\r', " ");
    yaml.push_str(&serde_json::to_string_pretty(&fixture).map_err(|error| {
        FixtureError::Write {
            source: std::io::Error::other(error),
        }
    })?);
    yaml.push('\n');
    let write = |error| FixtureError::Write { source: error };
    std::fs::create_dir_all(to).map_err(write)?;
    let out = OutDir::open(to, cwd).map_err(|error| FixtureError::Write {
        source: std::io::Error::other(error.to_string()),
    })?;
    let yaml_name = format!("{task}.yaml");
    let cassette_name = format!("{task}.cassette.json");
    out.write_atomic(None, &cassette_name, &cassette)
        .map_err(write)?;
    out.write_atomic(None, &yaml_name, yaml.as_bytes())
        .map_err(write)?;
    Ok(Fixture {
        task_file: to.join(yaml_name),
        cassette: to.join(cassette_name),
        status: transcript.status,
        reason: transcript.reason,
        tool_calls: transcript.tool_calls.len(),
        task,
    })
}

/// Why the task file the run read does not give the fixture's task.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
enum NotAlone {
    #[error("not a task file (a mapping)")]
    NotAMapping,
    #[error("`tasks` is not a list")]
    TasksNotAList,
    #[error("no task `{0}` in the file any more")]
    NoTask(String),
}

/// The task file with only `transcript`'s task, answering from `replay`.
fn alone(root: Value, transcript: &Transcript) -> Result<Value, NotAlone> {
    let Value::Object(mut file) = root else {
        return Err(NotAlone::NotAMapping);
    };
    let id = &transcript.task.id;
    let Some(tasks) = file.remove("tasks") else {
        // The single-task form: the fixture's file stem is the task's id.
        replay(&mut file);
        file.insert("id".to_owned(), Value::String(id.clone()));
        return Ok(Value::Object(file));
    };
    let Value::Array(tasks) = tasks else {
        return Err(NotAlone::TasksNotAList);
    };
    let mut task = tasks
        .into_iter()
        .find(|task| task.get("id").and_then(Value::as_str) == Some(id))
        .ok_or_else(|| NotAlone::NoTask(id.clone()))?;
    if let Value::Object(task) = &mut task {
        replay(task);
    }
    if let Some(Value::Object(defaults)) = file.get_mut("defaults") {
        defaults.remove("endpoint");
    }
    // The suite stays the one the run reported.
    if !transcript.task.suite.is_empty() {
        file.insert(
            "name".to_owned(),
            Value::String(transcript.task.suite.clone()),
        );
    }
    file.insert("tasks".to_owned(), Value::Array(vec![task]));
    Ok(Value::Object(file))
}

/// The `replay` provider, no endpoint.
fn replay(task: &mut Map<String, Value>) {
    task.remove("endpoint");
    task.insert("provider".to_owned(), Value::String("replay".to_owned()));
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::report::transcript::build_transcript;

    fn transcript(id: &str, suite: &str) -> Transcript {
        let mut transcript = build_transcript(&[]);
        transcript.task.id = id.to_owned();
        transcript.task.suite = suite.to_owned();
        transcript
    }

    fn yaml(text: &str) -> Value {
        parse(text).0.unwrap().to_json()
    }

    #[test]
    fn the_list_form_keeps_only_the_task_on_replay() {
        let file = yaml(
            "vars: {repo: .}\ndefaults:\n  provider: openai\n  endpoint: http://x\n  limits: { max_iterations: 3, timeout: 5m }\ntasks:\n  - id: a\n    prompt: A\n    endpoint: http://y\n  - id: b\n    prompt: B\n",
        );
        let fixture = alone(file, &transcript("a", "nightly")).unwrap();
        assert_eq!(
            fixture,
            json!({
                "vars": {"repo": "."},
                "defaults": {"provider": "openai", "limits": {"max_iterations": 3, "timeout": "5m"}},
                "name": "nightly",
                "tasks": [{"id": "a", "prompt": "A", "provider": "replay"}],
            })
        );
        // JSON is YAML: it reads back as it was written.
        let text = serde_json::to_string_pretty(&fixture).unwrap();
        assert_eq!(yaml(&text), fixture);
        assert_eq!(
            alone(
                yaml("tasks:\n  - id: b\n    prompt: B\n"),
                &transcript("a", "")
            )
            .unwrap_err()
            .to_string(),
            "no task `a` in the file any more"
        );
    }

    #[test]
    fn the_single_task_form_gets_its_id() {
        let file = yaml("prompt: do it\nprovider: anthropic\nchecks: [true]\n");
        assert_eq!(
            alone(file, &transcript("t", "t")).unwrap(),
            json!({"prompt": "do it", "provider": "replay", "checks": [true], "id": "t"})
        );
    }
}
