//! The pause state (docs/resume.md): what a paused task leaves behind
//! (`OUT/<task>/state.json` and its signature) and what `ybs resume`
//! brings back to it. The run path writes and removes the state here; the
//! resume command ([`super::resume`]) finds, checks and answers it.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::prepare::PrepareError;
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
    #[error("the task file {} is outside the directory ybs runs in", .0.display())]
    FileOutside(PathBuf),
    #[error("the workdir {} is outside the directory ybs runs in", .0.display())]
    WorkdirOutside(PathBuf),
    #[error("{}: {source}", .file.display())]
    TaskFile {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error(transparent)]
    Workdir(#[from] PrepareError),
    #[error(transparent)]
    Output(#[from] std::io::Error),
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Writes `OUT/<task>/state.json` and its signature, after the task's
/// `task.finished`. The conversation and pending calls are masked like
/// every output; paths are relative.
pub fn write_state(
    run: &RunContext,
    prepared: &PreparedTask,
    out: &OutDir,
    key: &Key,
    paused: Paused<'_, '_>,
) -> Result<(), WriteStateError> {
    let task = &prepared.task;
    let (file, file_bytes, workdir) = task_place(run, task)?;
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

/// The task file (relative to the directory ybs runs in), its bytes, and
/// its workdir as in the checkout (not a `--jobs` worktree), relative.
fn task_place(
    run: &RunContext,
    task: &crate::task::TaskSpec,
) -> Result<(String, Vec<u8>, String), WriteStateError> {
    let cwd = run.cwd.canonicalize().unwrap_or_else(|_| run.cwd.clone());
    let file = state::relative(&cwd.join(&task.file), &cwd)
        .or_else(|| state::relative(&run.cwd.join(&task.file), &run.cwd))
        .ok_or_else(|| WriteStateError::FileOutside(task.file.clone()))?;
    let file_bytes =
        std::fs::read(run.cwd.join(&task.file)).map_err(|source| WriteStateError::TaskFile {
            file: task.file.clone(),
            source,
        })?;
    let workdir = super::task_workdir(&run.config, &run.cwd, run.home.as_deref(), task)?;
    let workdir = state::relative(&workdir, &cwd)
        .ok_or_else(|| WriteStateError::WorkdirOutside(workdir.clone()))?;
    Ok((file, file_bytes, workdir))
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
