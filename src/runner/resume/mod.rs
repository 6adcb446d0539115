//! `ybs resume OUT` behind the CLI (docs/resume.md): find the paused
//! tasks, check their signed state, gather the answers, read policy and
//! config again, restore the work tree, and go on with each task through
//! the same [`super::execute`] as `ybs run`, primed with the earlier
//! halves ([`super::pause::Resuming`]), and end as a run ends
//! ([`super::session::finish`]).

mod answers;

pub use answers::{describe_pending, gather_answers};

use std::collections::{BTreeMap, HashMap};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::load::Loaded;
use super::options::{Entry, ResumeEntry, RunOptions};
use super::pause::Resumed;
use super::session::{Session, Threads};
use super::state::{self, Key, STATE_FILE, State, StateError};
use super::workspace::InWorktree;
use super::{PreparedTask, RunContext, RunError, RunReport};
use crate::agent::Answer;
use crate::core::Status;
use crate::core::event::{EventRecord, PendingAnswer};
use crate::git::{Snapshot, Workspace};
use crate::report::Console;
use crate::report::{EVENTS_FILE, OutDir};
use crate::task::TaskSpec;

/// A task whose state was found and verified.
pub struct PausedTask {
    pub state: State,
    /// `sha256:<hex>` of `state.json`: the state's id (single-use).
    pub state_id: String,
    /// The task file, relative to the directory ybs runs in.
    pub file: PathBuf,
}

/// Where the answers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultsInput {
    File(PathBuf),
    Stdin,
}

/// `ybs resume`'s flags, parsed.
#[derive(Debug, Clone, Default)]
pub struct ResumeFlags {
    pub task: Option<String>,
    pub results: Option<ResultsInput>,
    /// Call ids, or `all`.
    pub approve: Vec<String>,
    pub deny: Vec<String>,
    /// `--by NAME`: who approves (else `$GITHUB_ACTOR`, else `cli`).
    pub by: Option<String>,
    /// Go on even though the task file or the policy changed.
    pub allow_changed: bool,
}

/// Masks what ybs knows to be secret before the config is read: every
/// secret-looking variable of ybs's environment and the API keys (and
/// the credential shapes every redactor knows).
pub fn env_redactor(environ: &crate::core::Environ) -> crate::core::Redactor {
    super::redactor(&crate::tools::ChildEnv::scrubbed(environ, &[]), environ)
}

fn usage(error: StateError) -> RunError {
    RunError::Usage {
        message: error.message,
        hint: error.hint,
    }
}

/// The paused tasks in `out_dir` (only `task` when given), each state's
/// signature checked. Nothing is written.
pub fn find_paused(
    cwd: &Path,
    out_dir: &Path,
    task: Option<&str>,
    environ: &crate::core::Environ,
) -> Result<Vec<PausedTask>, RunError> {
    let out = cwd.join(out_dir);
    if !out.is_dir() {
        return Err(RunError::usage(
            format!("{}: no such output directory", out_dir.display()),
            Some("pass the --out directory of the run that paused"),
        ));
    }
    let mut ids: Vec<String> = match task {
        Some(task) => vec![task.to_owned()],
        None => std::fs::read_dir(&out)
            .map_err(|error| {
                RunError::usage(
                    format!("{}: {error}", out_dir.display()),
                    Some("pass the output directory of the run that paused (`--out-dir`, `ybs-out` by default)"),
                )
            })?
            .filter_map(Result::ok)
            .filter(|entry| entry.path().join(STATE_FILE).is_file())
            .filter_map(|entry| entry.file_name().to_str().map(str::to_owned))
            .collect(),
    };
    ids.sort();
    if ids.is_empty() {
        return Err(RunError::usage(
            format!("{}: no paused task (no */state.json)", out_dir.display()),
            Some("`ybs resume` goes on with a run that exited 3"),
        ));
    }
    let env = |name: &str| environ.var(name);
    ids.iter()
        .map(|id| read_state(&out, out_dir, id, &env))
        .collect()
}

/// Reads a plain file (never through a link) of at most `max` bytes.
fn read_plain(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path)?;
    if !meta.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!(
            "larger than {} MiB",
            max >> 20
        )));
    }
    Ok(bytes)
}

fn read_state(
    out: &Path,
    out_dir: &Path,
    id: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PausedTask, RunError> {
    let shown = out_dir.join(id).join(STATE_FILE);
    let plain = !id.is_empty() && !id.starts_with('.') && !id.contains(['/', '\\']);
    if !plain {
        return Err(RunError::usage(
            format!("invalid task id `{id}`"),
            Some(
                "name a task of the paused run: the directories under the output directory that hold a state.json",
            ),
        ));
    }
    let bytes = read_plain(&out.join(id).join(STATE_FILE), 512 << 20).map_err(|error| {
        RunError::usage(
            format!("{}: {error}", shown.display()),
            Some("`--task` names a task that paused"),
        )
    })?;
    let mac = read_plain(&out.join(id).join(state::MAC_FILE), 1024).map_err(|error| {
        RunError::usage(
            format!(
                "{}: {error}",
                out_dir.join(id).join(state::MAC_FILE).display()
            ),
            Some("the state's signature travels with it: copy the whole output directory"),
        )
    })?;
    let tampered = |detail: &str| {
        RunError::usage(
            format!(
                "{}: the paused state was changed after ybs wrote it ({detail}); refusing to resume",
                shown.display()
            ),
            Some("resume from the output directory the run wrote, unedited"),
        )
    };
    // Who signed is read before the signature is checked, only to pick
    // the key; the signature then covers it.
    let unverified: Value = serde_json::from_slice(&bytes).map_err(|_| tampered("not JSON"))?;
    let run_id = unverified
        .get("run_id")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let signed_by = unverified
        .get("key")
        .and_then(Value::as_str)
        .unwrap_or("local");
    let key: Key = state::verifying_key(run_id, signed_by, env).map_err(usage)?;
    if !key.verify(&bytes, &String::from_utf8_lossy(&mac)) {
        let detail = match (signed_by, key.source) {
            ("env", "env") | ("local", "local") => "its signature does not match",
            ("env", _) => {
                "its signature does not match; it says it was signed with YBS_RESUME_KEY, which is not set here"
            }
            _ => {
                "its signature does not match; it says it was signed with the run's local key, but YBS_RESUME_KEY is set here"
            }
        };
        return Err(tampered(detail));
    }
    let state: State = serde_json::from_slice(&bytes)
        .map_err(|error| tampered(&format!("not a state of this version: {error}")))?;
    if state.schema_version != state::STATE_VERSION {
        return Err(RunError::usage(
            format!(
                "{}: state version {} is not {}",
                shown.display(),
                state.schema_version,
                state::STATE_VERSION
            ),
            Some("resume with the ybs version that paused the run"),
        ));
    }
    if state.task.id != id {
        return Err(tampered("it names another task"));
    }
    state::inside(Path::new("."), &state.task.file).map_err(usage)?;
    let state_id = state::sha256(&bytes);
    if state::was_used(&state_id, env) {
        let used = state::already_used(&state_id);
        return Err(RunError::usage(
            format!("{}: {}", shown.display(), used.message),
            used.hint.as_deref(),
        ));
    }
    Ok(PausedTask {
        file: PathBuf::from(&state.task.file),
        state,
        state_id,
    })
}

/// One paused task with its answers, ready to go on.
fn resumed_task(
    task: &PausedTask,
    answers: &BTreeMap<String, Answer>,
    by: &str,
    approver: &str,
) -> Result<Resumed, RunError> {
    let mut mine = HashMap::new();
    let mut summary = Vec::new();
    for call in &task.state.pending {
        if let Some(answer) = answers.get(&call.id) {
            summary.push(PendingAnswer {
                id: call.id.clone(),
                answer: match answer {
                    Answer::Output(_) => "output",
                    Answer::Error(_) => "error",
                    Answer::Approved(true) => "approved",
                    Answer::Approved(false) => "denied",
                }
                .to_owned(),
            });
            mine.insert(call.id.clone(), answer.clone());
        }
    }
    let snapshot = task
        .state
        .git
        .as_ref()
        .map(|git| serde_json::from_value::<Snapshot>(git.snapshot.clone()))
        .transpose()
        .map_err(|error| {
            RunError::usage(
                format!("the state's git snapshot: {error}"),
                Some(
                    "the state file was written by another ybs version or changed: rerun the task",
                ),
            )
        })?;
    Ok(Resumed {
        state: task.state.clone(),
        snapshot,
        answers: mine,
        resumed_by: by.to_owned(),
        approver: approver.to_owned(),
        summary,
        state_id: task.state_id.clone(),
    })
}

/// Goes on with `resumed` tasks of `loaded` (their task files), writing
/// into the output directory they paused in.
pub fn resume(
    loaded: Loaded,
    resumed: Vec<Resumed>,
    options: RunOptions,
    flags: &ResumeFlags,
    console: &mut dyn Console,
) -> Result<RunReport, RunError> {
    let tasks = paused_tasks(&loaded, &resumed, flags.allow_changed)?;
    // The keys that signed the states are secrets of the run as well.
    let environ = loaded.environ.clone();
    let env = |name: &str| environ.var(name);
    let mut resuming = ResumeEntry::default();
    for item in &resumed {
        resuming
            .keys
            .extend(state::key_text(&item.state.run_id, &item.state.key, &env));
        if let Some(place) = InWorktree::of(&item.state)? {
            resuming.worktrees.insert(item.state.task.id.clone(), place);
        }
    }
    let entry = Entry {
        tasks: tasks.iter().map(|task| task.id.clone()).collect(),
        copies: super::matrix::Copies::default(),
        resuming: Some(resuming),
    };
    let session = Session::open(loaded, options, entry, Threads::Two, console)?;
    let context = &session.context;
    let (prepared, outputs) = session.prepare(
        &tasks,
        |context, prepared| check_prepared(context, prepared, &resumed, flags.allow_changed),
        "remove the link, or pass --out a path without symbolic links",
    )?;
    // The events of each task's earlier halves, checked against the
    // state: the transcript goes on from them.
    let earlier = resumed
        .iter()
        .map(|item| earlier_events(&outputs.out, item))
        .collect::<Result<Vec<_>, RunError>>()?;
    // Everything checked: each state is used up now, before anything
    // runs (docs/resume.md: single-use).
    for item in &resumed {
        if let Err(error) = state::mark_used(&item.state_id, &item.state.run_id, &env) {
            super::discard(&prepared);
            return Err(RunError::usage(
                format!("{}/{STATE_FILE}: {}", item.state.task.id, error.message),
                error.hint.as_deref(),
            ));
        }
    }
    super::session::warn_unconfined(console, &prepared);
    let resuming = super::pause::Resuming {
        resumed: &resumed,
        earlier,
    };
    let report = session.execute(prepared, Some(resuming), &outputs, console)?;
    let totals = resumed_totals(&report, (&context.cwd, &context.environ), &session.options);
    session.finish(console, &report, totals);
    Ok(report)
}

/// The task of each paused state, from the task files loaded again: each
/// must still be there, its file unchanged unless `allow_changed`.
fn paused_tasks(
    loaded: &Loaded,
    resumed: &[Resumed],
    allow_changed: bool,
) -> Result<Vec<TaskSpec>, RunError> {
    let mut tasks = Vec::new();
    for item in resumed {
        let state = &item.state;
        // A run of `--repeat` (`t#2`) goes on as a copy of its task; a
        // copy of `--models` would need its model, which the state does
        // not hold.
        let base = crate::report::rates::base_id(&state.task.id);
        if state.task.id.contains(crate::report::rates::MODEL_MARK) {
            return Err(RunError::usage(
                format!(
                    "{}: task `{}` is a copy of `--models`, which `ybs resume` cannot go on with",
                    state.task.file, state.task.id
                ),
                Some("run the task again with `ybs run --model MODEL`"),
            ));
        }
        let found = loaded
            .files
            .iter()
            .flat_map(|file| &file.tasks)
            .find(|task| task.id == base)
            .cloned()
            .map(|mut task| {
                task.id.clone_from(&state.task.id);
                task
            })
            .ok_or_else(|| {
                RunError::usage(
                    format!(
                        "{}: no task `{}` in it any more",
                        state.task.file, state.task.id
                    ),
                    Some("resume with the task file the run paused with"),
                )
            })?;
        let bytes = std::fs::read(loaded.cwd.join(&state.task.file))
            .map_err(|error| {
                RunError::usage(
                    format!("{}: {error}", state.task.file),
                    Some("resume from the directory `ybs run` ran in, with the task file the run paused with"),
                )
            })?;
        if state::sha256(&bytes) != state.task.file_sha256 && !allow_changed {
            return Err(RunError::usage(
                format!(
                    "{}: the task file changed since the task paused",
                    state.task.file
                ),
                Some("resume with the task file as it was, or pass --allow-changed"),
            ));
        }
        tasks.push(found);
    }
    Ok(tasks)
}

/// The events of a paused task's earlier halves, their digest checked
/// against the state's.
fn earlier_events(out: &OutDir, item: &Resumed) -> Result<Vec<EventRecord>, RunError> {
    let id = &item.state.task.id;
    let bytes = out.read_file(Some(id), EVENTS_FILE).map_err(|error| {
        RunError::usage(
            format!("{id}/{EVENTS_FILE}: {error}"),
            Some("the paused run's outputs are incomplete: rerun the task"),
        )
    })?;
    if state::sha256(&bytes) != item.state.events_sha256 {
        return Err(RunError::usage(
            format!("{id}/{EVENTS_FILE} changed since the task paused; refusing to resume"),
            Some("resume from the output directory the run wrote, unedited"),
        ));
    }
    // The digest matched: a line that does not parse is a bug, not an
    // attack, and dropping it would lose part of the transcript.
    bytes
        .split(|byte| *byte == b'\n')
        .filter(|line| !line.is_empty())
        .enumerate()
        .map(|(index, line)| {
            serde_json::from_slice::<EventRecord>(line).map_err(|error| {
                RunError::usage(
                    format!("{id}/{EVENTS_FILE}:{}: {error}", index + 1),
                    Some("resume with the ybs version that paused the task"),
                )
            })
        })
        .collect()
}

/// The line of totals of `ybs resume`.
fn resumed_totals(
    report: &RunReport,
    (cwd, environ): (&Path, &crate::core::Environ),
    options: &RunOptions,
) -> String {
    let total = report.results.len();
    format!(
        "ybs: resumed {total} task{}: {} passed, {} failed, {}, {} paused{} — outputs in {}",
        if total == 1 { "" } else { "s" },
        report.count(Status::Passed),
        report.count(Status::Failed),
        crate::core::text::count_of(report.count(Status::Error) as u64, "error"),
        report.count(Status::Paused),
        match report.count(Status::Paused) {
            0 => String::new(),
            _ => format!(
                " ({})",
                super::front::resume_command(
                    (cwd, environ),
                    &options.out_dir,
                    &options.flags.resume_args,
                )
            ),
        },
        options.out_dir.display()
    )
}

/// The state carries no trust: the policy read again must be the one
/// the task paused under, the workdir the same, and the work tree is
/// brought to the paused task's.
fn check_prepared(
    context: &RunContext,
    prepared: &[PreparedTask],
    resumed: &[Resumed],
    allow_changed: bool,
) -> Result<(), RunError> {
    let cwd = context
        .cwd
        .canonicalize()
        .unwrap_or_else(|_| context.cwd.clone());
    for (task, item) in prepared.iter().zip(resumed) {
        let state = &item.state;
        if task.policy_hash != state.policy_hash && !allow_changed {
            return Err(RunError::usage(
                format!(
                    "task `{}`: the policy changed since the task paused",
                    state.task.id
                ),
                Some(
                    "resume under the policy and config the run paused with, or pass --allow-changed",
                ),
            ));
        }
        // As in the checkout, also for a task in its `--jobs` worktree.
        let workdir = super::task_workdir(
            &context.config,
            &context.cwd,
            context.home.as_deref(),
            &task.task,
        )
        .ok()
        .and_then(|workdir| state::relative(&workdir, &cwd));
        if workdir.as_deref() != Some(state.workdir.as_str()) {
            return Err(RunError::usage(
                format!(
                    "task `{}`: its workdir is {}, the paused task's was {}",
                    state.task.id,
                    task.tool_ctx.workdir.display(),
                    state.workdir
                ),
                Some("run `ybs resume` from the directory `ybs run` ran in"),
            ));
        }
        if let (Some(git), Some(snapshot)) = (&state.git, &item.snapshot) {
            let workspace = Workspace::open(&task.tool_ctx.workdir)
                .map_err(|error| {
                    RunError::usage(
                        format!("git: {error}"),
                        Some("run `ybs resume` from the directory `ybs run` ran in"),
                    )
                })?
                .ok_or_else(|| {
                    RunError::usage(
                        format!(
                            "task `{}` paused in a git repository; {} is not in one",
                            state.task.id,
                            task.tool_ctx.workdir.display()
                        ),
                        Some("resume in a checkout of the commit the run paused at"),
                    )
                })?;
            let outputs: Vec<PathBuf> = context
                .outputs
                .iter()
                .map(|path| context.cwd.join(path))
                .collect();
            state::restore(&workspace.excluding(&outputs), snapshot, &git.files).map_err(usage)?;
        }
    }
    Ok(())
}
