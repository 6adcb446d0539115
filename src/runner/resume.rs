//! `ybs resume OUT` behind the CLI (docs/resume.md): find the paused
//! tasks, check their signed state, gather the answers, read policy and
//! config again, restore the work tree, and go on with each task through
//! the same [`super::execute`] as `ybs run`, primed with the earlier
//! halves ([`super::pause::Resuming`]), and end as a run ends
//! ([`super::session::finish`]).

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
use crate::core::event::{EventRecord, PendingAnswer, PendingCall, PendingKind};
use crate::git::{Snapshot, Workspace};
use crate::report::Console;
use crate::report::{EVENTS_FILE, OutDir};
use crate::task::TaskSpec;

/// A results file or stdin is read up to this size.
const MAX_RESULTS_BYTES: u64 = 16 << 20;

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

/// One pending call, for `ybs resume --list` and before an approval is
/// given: `ID  KIND  TOOL ARGUMENTS  (rule RULE)`, the arguments masked
/// and cut to 500 characters.
pub fn describe_pending(call: &PendingCall, redactor: &crate::core::Redactor) -> String {
    let mut arguments = call.arguments.clone();
    redactor.redact_value(&mut arguments);
    let arguments = crate::core::text::truncate_middle(&arguments.to_string(), 500).0;
    format!(
        "{}  {}  {} {}  (rule {})",
        call.id,
        call.kind.as_str(),
        call.name,
        redactor.redact(&arguments),
        call.rule
    )
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
            .map_err(|error| RunError::usage(format!("{}: {error}", out_dir.display()), None))?
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
        return Err(RunError::usage(format!("invalid task id `{id}`"), None));
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

/// The answers for every pending call of `paused`, from the results
/// input and the flags; every call must be answered exactly once.
pub fn gather_answers(
    paused: &[PausedTask],
    flags: &ResumeFlags,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Resumed>, RunError> {
    let mut answers: BTreeMap<String, Answer> = BTreeMap::new();
    let pending: Vec<&PendingCall> = paused.iter().flat_map(|task| &task.state.pending).collect();
    let digest = match &flags.results {
        Some(input) => {
            let (bytes, name) = read_results(input)?;
            result_answers(&bytes, &name, &pending, &mut answers)?;
            Some(state::sha256(&bytes))
        }
        None => None,
    };
    flag_answers(flags, &pending, &mut answers)?;
    all_answered(&pending, &answers)?;
    let approved_any = answers
        .values()
        .any(|answer| matches!(answer, Answer::Approved(_)));
    let approver = flags
        .by
        .clone()
        .or_else(|| env("GITHUB_ACTOR"))
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "cli".to_owned());
    let mut by = Vec::new();
    if let Some(digest) = &digest {
        by.push(format!("results:{digest}"));
    }
    if approved_any {
        by.push(format!("approver:{approver}"));
    }
    let by = by.join(" ");
    paused
        .iter()
        .map(|task| resumed_task(task, &answers, &by, &approver))
        .collect()
}

/// The kind of the pending call `id`: it must be pending in exactly one
/// task.
fn kind_of(pending: &[&PendingCall], id: &str) -> Result<PendingKind, RunError> {
    let found: Vec<&&PendingCall> = pending.iter().filter(|call| call.id == id).collect();
    match found.as_slice() {
        [one] => Ok(one.kind),
        [] => Err(RunError::usage(
            format!("`{id}` is not a pending call of the paused run"),
            Some("the pending calls are listed in OUT/<task>/state.json `pending`"),
        )),
        _ => Err(RunError::usage(
            format!("`{id}` is pending in more than one task"),
            Some("resume one task at a time with --task ID"),
        )),
    }
}

/// The bytes of `--results FILE` (or `-`, stdin) and the name to show for
/// them, at most [`MAX_RESULTS_BYTES`].
fn read_results(input: &ResultsInput) -> Result<(Vec<u8>, String), RunError> {
    match input {
        ResultsInput::File(path) => Ok((
            read_plain(path, MAX_RESULTS_BYTES)
                .map_err(|error| RunError::usage(format!("{}: {error}", path.display()), None))?,
            path.display().to_string(),
        )),
        ResultsInput::Stdin => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_RESULTS_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|error| RunError::usage(format!("stdin: {error}"), None))?;
            if bytes.len() as u64 > MAX_RESULTS_BYTES {
                return Err(RunError::usage("stdin: the results pass 16 MiB", None));
            }
            Ok((bytes, "stdin".to_owned()))
        }
    }
}

/// The answers of the results input `name`: each names a pending call
/// once and fits its kind (a caller tool's output or error, an approval).
fn result_answers(
    bytes: &[u8],
    name: &str,
    pending: &[&PendingCall],
    answers: &mut BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    for (id, answer) in parse_results(bytes, name)? {
        let kind = kind_of(pending, &id)?;
        let fits = matches!(
            (kind, &answer),
            (PendingKind::Caller, Answer::Output(_) | Answer::Error(_))
                | (PendingKind::Approval, Answer::Approved(_))
        );
        if !fits {
            return Err(RunError::usage(
                format!(
                    "{name}: `{id}` is a pending {} and needs {}",
                    kind.as_str(),
                    match kind {
                        PendingKind::Caller => "`output` or `error`",
                        PendingKind::Approval => "`approved`",
                    }
                ),
                None,
            ));
        }
        if answers.insert(id.clone(), answer).is_some() {
            return Err(RunError::usage(
                format!("{name}: `{id}` is answered twice"),
                None,
            ));
        }
    }
    Ok(())
}

/// `--approve ID|all` and `--deny ID|all`: approvals only, each answered
/// once (`all`: every approval not answered yet).
fn flag_answers(
    flags: &ResumeFlags,
    pending: &[&PendingCall],
    answers: &mut BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    for (ids, yes, flag) in [
        (&flags.approve, true, "--approve"),
        (&flags.deny, false, "--deny"),
    ] {
        for id in ids {
            let targets: Vec<String> = if id == "all" {
                pending
                    .iter()
                    .filter(|call| call.kind == PendingKind::Approval)
                    .filter(|call| !answers.contains_key(&call.id))
                    .map(|call| call.id.clone())
                    .collect()
            } else {
                if kind_of(pending, id)? != PendingKind::Approval {
                    return Err(RunError::usage(
                        format!(
                            "{flag} {id}: `{id}` is a caller tool call; its result goes in --results"
                        ),
                        None,
                    ));
                }
                if answers.contains_key(id) {
                    return Err(RunError::usage(
                        format!("{flag} {id}: `{id}` is answered twice"),
                        None,
                    ));
                }
                vec![id.clone()]
            };
            for target in targets {
                answers.insert(target, Answer::Approved(yes));
            }
        }
    }
    Ok(())
}

/// Every pending call has its answer.
fn all_answered(
    pending: &[&PendingCall],
    answers: &BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    let missing: Vec<&str> = pending
        .iter()
        .filter(|call| !answers.contains_key(&call.id))
        .map(|call| call.id.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(RunError::usage(
        format!(
            "every pending call must be answered; missing: {}",
            missing.join(", ")
        ),
        Some(
            "give caller results with --results FILE and decide approvals with --approve/--deny ID|all",
        ),
    ))
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
        .map_err(|error| RunError::usage(format!("the state's git snapshot: {error}"), None))?;
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

/// `{"results": [{"id", "output"} | {"id", "error"} | {"id", "approved"}]}`.
fn parse_results(bytes: &[u8], name: &str) -> Result<Vec<(String, Answer)>, RunError> {
    let bad = |detail: String| {
        RunError::usage(
            format!("{name}: {detail}"),
            Some(
                r#"expected {"results": [{"id": "...", "output": ...} | {"id": "...", "error": "..."} | {"id": "...", "approved": true|false}]}"#,
            ),
        )
    };
    let value: Value =
        serde_json::from_slice(bytes).map_err(|error| bad(format!("not JSON: {error}")))?;
    let Some(object) = value.as_object() else {
        return Err(bad("not a JSON object".to_owned()));
    };
    if let Some(key) = object.keys().find(|key| *key != "results") {
        return Err(bad(format!("unknown field `{key}`")));
    }
    let Some(results) = object.get("results").and_then(Value::as_array) else {
        return Err(bad("`results` must be a list".to_owned()));
    };
    results
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let at = |detail: &str| bad(format!("results[{index}]: {detail}"));
            let Some(entry) = entry.as_object() else {
                return Err(at("not an object"));
            };
            let Some(id) = entry.get("id").and_then(Value::as_str) else {
                return Err(at("`id` (a string) is missing"));
            };
            if let Some(key) = entry
                .keys()
                .find(|key| !["id", "output", "error", "approved"].contains(&key.as_str()))
            {
                return Err(at(&format!("unknown field `{key}`")));
            }
            let answers: Vec<Answer> = [
                entry.get("output").cloned().map(Answer::Output),
                match entry.get("error") {
                    Some(Value::String(text)) => Some(Answer::Error(text.clone())),
                    Some(_) => return Err(at("`error` must be a string")),
                    None => None,
                },
                match entry.get("approved") {
                    Some(Value::Bool(yes)) => Some(Answer::Approved(*yes)),
                    Some(_) => return Err(at("`approved` must be true or false")),
                    None => None,
                },
            ]
            .into_iter()
            .flatten()
            .collect();
            match <[Answer; 1]>::try_from(answers) {
                Ok([answer]) => Ok((id.to_owned(), answer)),
                Err(_) => Err(at("needs exactly one of `output`, `error`, `approved`")),
            }
        })
        .collect()
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
            .map_err(|error| RunError::usage(format!("{}: {error}", state.task.file), None))?;
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
    let bytes = out
        .read_file(Some(id), EVENTS_FILE)
        .map_err(|error| RunError::usage(format!("{id}/{EVENTS_FILE}: {error}"), None))?;
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
                .map_err(|error| RunError::usage(format!("git: {error}"), None))?
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_files_are_checked_entry_by_entry() {
        let ok = parse_results(
            br#"{"results": [{"id": "a", "output": {"url": "u"}}, {"id": "b", "error": "x"}, {"id": "c", "approved": false}]}"#,
            "r.json",
        )
        .unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok[2], ("c".to_owned(), Answer::Approved(false)));
        for bad in [
            &br#"[]"#[..],
            br#"{"results": [{"id": "a"}]}"#,
            br#"{"results": [{"id": "a", "output": 1, "error": "x"}]}"#,
            br#"{"results": [{"id": "a", "outptu": 1}]}"#,
            br#"{"results": [], "extra": 1}"#,
            br#"{"results": [{"id": "a", "approved": "yes"}]}"#,
        ] {
            assert!(
                parse_results(bad, "r.json").is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
