//! The pause state (docs/resume.md): what a paused task leaves behind
//! (`OUT/<task>/state.json` and its signature) and what `ybs resume`
//! brings back to it. The run path writes and removes the state here; the
//! resume command ([`super::resume`]) finds, checks and answers it.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use super::state::{self, CarriedFile, Key, STATE_FILE, State, StateGit};
use super::{PreparedTask, RunContext};
use crate::agent::{Agent, Answer};
use crate::core::Message;
use crate::core::event::{PendingAnswer, PendingCall};
use crate::git::Snapshot;
use crate::report::{EVENTS_FILE, OutDir};

/// What `ybs resume` brings to a paused task.
pub struct Resumed {
    pub state: State,
    /// The repository at the task's start, from the state.
    pub snapshot: Option<Snapshot>,
    pub answers: HashMap<String, Answer>,
    /// `results:sha256:…` and/or `approver:NAME`, for `task.resumed`.
    pub resumed_by: String,
    /// Who approved or denied, in the records of those calls.
    pub approver: String,
    pub summary: Vec<PendingAnswer>,
    /// `sha256:<hex>` of the state's bytes: its id, used up at resume.
    pub state_id: String,
}

/// The paused task that [`super::task_run::run_or_resume`] hands over.
pub struct Paused<'a, 'b> {
    pub agent: &'a Agent<'b>,
    pub pending: Vec<PendingCall>,
    pub carried: Option<(Snapshot, Vec<CarriedFile>)>,
    /// Running time so far, earlier halves included.
    pub elapsed: Duration,
    pub pauses: u32,
}

/// Why a paused task's state was not written.
#[derive(Debug, thiserror::Error)]
pub enum WriteStateError {
    #[error(transparent)]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The task file as a paused state names it: its path relative to the
/// directory ybs runs in, and its bytes (the state holds their digest).
pub struct StateFile {
    pub path: String,
    pub bytes: Vec<u8>,
}

/// Names the task file and the workdir for the state, before the task
/// ends as paused, so that `ybs resume` run in the same directory finds
/// them. The task file is named where it is when it lies beneath that
/// directory; otherwise (a file elsewhere, or one given as text by `ybs
/// run --prompt`) ybs writes a copy beside the state,
/// `OUT/<task>/<file name>`, and names the copy. `Err`: why the task
/// cannot be resumed from here (a workdir elsewhere, an output directory
/// elsewhere), and what to do.
pub fn name_for_state(
    run: &RunContext,
    prepared: &PreparedTask,
    out: &OutDir,
) -> Result<(StateFile, String), String> {
    let task = &prepared.task;
    let cwd = run.cwd.canonicalize().unwrap_or_else(|_| run.cwd.clone());
    // Beneath `cwd` by plain names: what `ybs resume` accepts.
    let beneath = |path: &Path| {
        let path = path.canonicalize().ok()?;
        state::relative(&path, &cwd)
            .filter(|relative| state::inside(Path::new("."), relative).is_ok())
    };
    // The workdir as in the checkout (not a `--jobs` worktree).
    let workdir = super::task_workdir(&run.config, &run.cwd, run.home.as_deref(), task)
        .map_err(|error| error.to_string())?;
    let workdir = beneath(&workdir).ok_or_else(|| {
        format!(
            "the task paused, but `ybs resume` could not go on with it: its workdir {} lies outside the directory ybs runs in ({}); run ybs from a directory that holds the workdir",
            workdir.display(),
            run.cwd.display()
        )
    })?;
    let unsaved = run.unsaved.get(&task.file);
    let bytes = match unsaved {
        Some(text) => text.clone().into_bytes(),
        None => std::fs::read(run.cwd.join(&task.file))
            .map_err(|error| format!("{}: {error}", task.file.display()))?,
    };
    if unsaved.is_none()
        && let Some(path) = beneath(&run.cwd.join(&task.file))
    {
        return Ok((StateFile { path, bytes }, workdir));
    }
    // A copy beside the state.
    let name = task
        .file
        .file_name()
        .and_then(|name| name.to_str())
        .filter(|name| !OWN_FILES.contains(name))
        .unwrap_or("task.yaml");
    let dir = beneath(&run.cwd.join(out.path()).join(&task.id)).ok_or_else(|| {
        format!(
            "the task paused, but `ybs resume` could not go on with it: its task file {} and the output directory {} both lie outside the directory ybs runs in ({}); pass an --out inside it",
            task.file.display(),
            out.path().display(),
            run.cwd.display()
        )
    })?;
    out.write_atomic(Some(&task.id), name, &bytes)
        .map_err(|error| error.to_string())?;
    let path = format!("{dir}/{name}");
    Ok((StateFile { path, bytes }, workdir))
}

/// The names ybs writes in a task's output directory: a copy of the task
/// file never takes one.
const OWN_FILES: &[&str] = &[
    STATE_FILE,
    state::MAC_FILE,
    EVENTS_FILE,
    "transcript.json",
    "output.md",
    "output.json",
];

/// Writes `OUT/<task>/state.json` and its signature, after the task's
/// `task.finished`. The conversation and pending calls are masked like
/// every output; paths are relative (`named`: [`name_for_state`]).
pub fn write_state(
    run: &RunContext,
    prepared: &PreparedTask,
    out: &OutDir,
    key: &Key,
    (file, workdir): (StateFile, String),
    paused: Paused<'_, '_>,
) -> Result<(), WriteStateError> {
    let task = &prepared.task;
    let StateFile {
        path: file,
        bytes: file_bytes,
    } = file;
    let events = out.read_file(Some(&task.id), EVENTS_FILE)?;
    let agent = paused.agent;
    let messages: Vec<Message> = masked(run, agent.messages())?;
    let pending: Vec<PendingCall> = masked(run, &paused.pending)?;
    let git = match paused.carried {
        Some((snapshot, files)) => Some(StateGit {
            snapshot: serde_json::to_value(snapshot)?,
            files,
        }),
        None => None,
    };
    let state = State {
        schema_version: state::STATE_VERSION,
        run_id: run.run_id.clone(),
        task: state::StateTask {
            id: task.id.clone(),
            file,
            file_sha256: state::sha256(&file_bytes),
        },
        policy_hash: prepared.policy_hash.clone(),
        base_commit: git.as_ref().and_then(|git| {
            git.snapshot
                .get("base")
                .and_then(Value::as_str)
                .map(str::to_owned)
        }),
        workdir,
        key: key.source.to_owned(),
        pauses: paused.pauses,
        spent: state::Spent {
            iterations: agent.iterations(),
            usage: agent.usage(),
            cost: agent.cost(),
            elapsed_ms: u64::try_from(paused.elapsed.as_millis()).unwrap_or(u64::MAX),
        },
        messages,
        pending,
        changed: agent
            .changed
            .iter()
            .map(|path| path.to_string_lossy().into_owned())
            .collect(),
        git,
        events_sha256: state::sha256(&events),
        loop_guard: agent.loop_guard().clone(),
        wrap_up_warned: agent.wrap_up_warned(),
        worktree: prepared
            .worktree
            .as_ref()
            .map(|worktree| state::StateWorktree {
                path: worktree.relative_root(),
                branch: worktree.branch.clone(),
            }),
        no_commit: run.no_commit,
        scratch: run.scratch,
    };
    let mut bytes = serde_json::to_vec_pretty(&state)?;
    bytes.push(b'\n');
    let mac = key.sign(&bytes);
    out.write_atomic(Some(&task.id), STATE_FILE, &bytes)?;
    out.write_atomic(
        Some(&task.id),
        state::MAC_FILE,
        format!("{mac}\n").as_bytes(),
    )?;
    Ok(())
}

/// `value` masked by the run's redactor, read back as `T`.
fn masked<T: serde::Serialize + serde::de::DeserializeOwned>(
    run: &RunContext,
    value: impl serde::Serialize,
) -> Result<T, serde_json::Error> {
    let mut value = serde_json::to_value(value)?;
    run.redactor.redact_value(&mut value);
    serde_json::from_value(value)
}

/// A resumed task went on: its state is spent.
pub fn remove_state(out: &OutDir, task: &str) {
    let _ = out.remove(task, STATE_FILE);
    let _ = out.remove(task, state::MAC_FILE);
}

/// What `ybs resume` hands [`super::execute`]: the resumed tasks, in the
/// order of the prepared ones, and the events of each one's earlier halves
/// (checked against its state).
pub struct Resuming<'r> {
    pub resumed: &'r [Resumed],
    pub earlier: Vec<Vec<crate::core::event::EventRecord>>,
}

impl Resuming<'_> {
    /// Primes the run's report sinks: the run's other tasks, as their
    /// transcripts (checked against `OUT/digests.json`) say they ended, so
    /// the reports list every task; then each resumed task's earlier
    /// events, so its transcript goes on from them.
    pub(crate) fn prime(
        &self,
        out: &OutDir,
        sinks: &mut crate::report::RunSinks,
        report: &mut super::RunReport,
    ) {
        let resumed_ids: Vec<&str> = self
            .resumed
            .iter()
            .map(|item| item.state.task.id.as_str())
            .collect();
        let run_ids: Vec<&str> = self
            .resumed
            .iter()
            .map(|item| item.state.run_id.as_str())
            .collect();
        let others = other_transcripts(out, &resumed_ids)
            .into_iter()
            .filter(|transcript| run_ids.contains(&transcript.manifest.run_id.as_str()));
        for transcript in others {
            for record in transcript.result_records() {
                if let Err(error) = sinks.replay_report(&record) {
                    report.output_error.get_or_insert(error.to_string());
                }
            }
        }
        for records in &self.earlier {
            for record in records {
                if let Err(error) = sinks.replay(record) {
                    report.output_error.get_or_insert(error.to_string());
                }
            }
        }
    }
}

/// The transcripts in `out` of tasks other than `resumed`, each whose
/// digest `OUT/digests.json` records, in task order.
fn other_transcripts(out: &OutDir, resumed: &[&str]) -> Vec<crate::report::Transcript> {
    let digests: crate::report::Digests = out
        .read_file(None, crate::report::DIGESTS_FILE)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .unwrap_or_default();
    digests
        .transcripts
        .iter()
        .filter(|(task, _)| !resumed.contains(&task.as_str()))
        .filter_map(|(task, digest)| {
            let bytes = out
                .read_file(Some(task), crate::report::TRANSCRIPT_FILE)
                .ok()?;
            (crate::report::Digests::of(&bytes) == *digest)
                .then(|| serde_json::from_slice(&bytes).ok())
                .flatten()
        })
        .collect()
}
