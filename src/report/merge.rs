//! `ybs report merge DIR... --out DIR`: one report from the output
//! directories of several shards (or runs).
//!
//! The per-task transcripts are the source of truth. Each is turned back
//! into the events a report needs ([`Transcript::result_records`]) and fed
//! to the same [`RunSinks`] (JUnit and summary) a run uses, so a merged
//! report reads exactly like the report of one run over all the tasks.
//! The task directories (`transcript.json`, `events.jsonl`, `state.json`)
//! are copied under `--out`.
//!
//! A sharded run also writes `OUT/shard.json` ([`ShardFile`]): which shard
//! it was and which tasks it selected. It lets a merge accept an empty
//! shard, ignore stale task directories a reused output directory still
//! holds, and notice a shard or a task that is missing.

use std::collections::{BTreeSet, HashMap};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::core::Shard;
use crate::core::event::EventSink;
use crate::core::exit;

use super::fsutil::{task_dir, with_path};
use super::outdir::{DIGESTS_FILE, Digests, OutDir};
use super::results::{ResultCollector, TaskResult};
use super::scope::RunScope;
use super::sinks::{OutputLayout, RunSinks};
use super::transcript::{TRANSCRIPT_FILE, Transcript};

/// The file name of a shard's manifest inside `OUT/`.
pub const SHARD_FILE: &str = "shard.json";

/// `OUT/shard.json`: what one `ybs run --shard K/N` selected.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShardFile {
    /// `K/N`.
    pub shard: String,
    /// `--shard auto`: the engine and the variables it was read from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::core::shard::ShardSource>,
    /// `--shard-by durations`: the digest (`sha256:HEX`) of the durations
    /// file the split balanced; absent: split by hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub durations: Option<String>,
    pub run_id: String,
    /// The ids of the tasks in this shard, in run order (may be empty).
    pub tasks: Vec<String>,
}

impl ShardFile {
    /// Writes `OUT/shard.json` through the held output directory.
    pub fn write(&self, out: &OutDir) -> io::Result<()> {
        let mut json = serde_json::to_vec_pretty(self).map_err(io::Error::other)?;
        json.push(b'\n');
        out.write_atomic(None, SHARD_FILE, &json).map(drop)
    }
}

/// Why a merge could not be made. Every variant but [`Self::Write`] is
/// a problem with the inputs: nothing was written.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    #[error("`{}` is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("no task transcripts in `{}`", dir.display())]
    NoTranscripts { dir: PathBuf },
    #[error("task `{task}` is in both `{}` and `{}`", first.display(), second.display())]
    Duplicate {
        task: String,
        first: PathBuf,
        second: PathBuf,
    },
    #[error("failed to read `{}`", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("`{}` is not a ybs transcript", path.display())]
    Transcript {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("`{}` is not a ybs shard file", path.display())]
    ShardFile {
        path: PathBuf,
        source: ShardFileError,
    },
    #[error("`{}` holds the transcript of task `{found}`, not `{expected}`", path.display())]
    Mismatch {
        path: PathBuf,
        expected: String,
        found: String,
    },
    #[error("`{}` is shard {first} but `{}` is shard {second}: they come from different splits", first_dir.display(), second_dir.display())]
    MixedSplits {
        first_dir: PathBuf,
        first: Shard,
        second_dir: PathBuf,
        second: Shard,
    },
    #[error("`{}` was split {first} but `{}` {second}: they come from different splits", first_dir.display(), second_dir.display())]
    MixedMethods {
        first_dir: PathBuf,
        first: String,
        second_dir: PathBuf,
        second: String,
    },
    #[error("`{}` does not match the digest ybs recorded for it in `{}`: it was changed after the run", path.display(), digests.display())]
    Forged { path: PathBuf, digests: PathBuf },
    #[error("`{}` has no digest recorded in `{}`", path.display(), digests.display())]
    NoDigest { path: PathBuf, digests: PathBuf },
    #[error("`{}` is a symbolic link, not a transcript ybs wrote", path.display())]
    Link { path: PathBuf },
    #[error(transparent)]
    OutDir(#[from] super::outdir::OpenError),
    #[error("`--out {}` is also one of the directories to merge", out.display())]
    OutIsInput { out: PathBuf },
    #[error("failed to write the merged outputs")]
    Write { source: io::Error },
}

/// A `shard.json` that does not parse.
#[derive(Debug, thiserror::Error)]
pub enum ShardFileError {
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    #[error("{0}")]
    Shard(String),
}

impl MergeError {
    /// `2` for bad inputs, `4` when the outputs could not be written.
    pub fn exit_code(&self) -> u8 {
        match self {
            Self::NotADirectory { .. }
            | Self::NoTranscripts { .. }
            | Self::Duplicate { .. }
            | Self::Read { .. }
            | Self::Transcript { .. }
            | Self::ShardFile { .. }
            | Self::Mismatch { .. }
            | Self::MixedSplits { .. }
            | Self::MixedMethods { .. }
            | Self::Forged { .. }
            | Self::NoDigest { .. }
            | Self::Link { .. }
            | Self::OutDir(_)
            | Self::OutIsInput { .. } => exit::USAGE,
            Self::Write { .. } => exit::INFRA,
        }
    }

    /// What to do about it.
    pub fn hint(&self) -> Option<String> {
        match self {
            Self::NotADirectory { .. } | Self::NoTranscripts { .. } => Some(format!(
                "pass the `--out` directories of `ybs run` (each holds `<task>/{TRANSCRIPT_FILE}`)"
            )),
            Self::Duplicate { .. } => Some(
                "each task must run in exactly one shard: run every shard with the same paths, \
                 --filter and N in `--shard K/N`"
                    .to_owned(),
            ),
            Self::MixedSplits { .. } => {
                Some("merge the shards of one `--shard K/N` split only".to_owned())
            }
            Self::MixedMethods { .. } => Some(
                "run every shard with the same --shard-by and the same --durations file"
                    .to_owned(),
            ),
            Self::OutIsInput { .. } => Some("write the merge to a new directory".to_owned()),
            Self::Forged { .. } | Self::Link { .. } => Some(
                "do not merge this directory: its transcript is not the one ybs wrote; run the shard again"
                    .to_owned(),
            ),
            Self::NoDigest { .. } => Some(format!(
                "merge only output directories of a `ybs run` that recorded its transcripts in `{DIGESTS_FILE}`; run the shard again"
            )),
            Self::OutDir(_) => {
                Some("pass --out a path without symbolic links".to_owned())
            }
            Self::Read { .. }
            | Self::Transcript { .. }
            | Self::ShardFile { .. }
            | Self::Mismatch { .. }
            | Self::Write { .. } => None,
        }
    }
}

impl exit::Failure for MergeError {
    fn exit_code(&self) -> u8 {
        MergeError::exit_code(self)
    }
    fn hint(&self) -> Option<String> {
        MergeError::hint(self)
    }
}

/// What a merge wrote.
#[derive(Debug, Clone)]
pub struct Merged {
    /// Every task, ordered by task file, then id.
    pub results: Vec<TaskResult>,
    pub scope: RunScope,
}

impl Merged {
    /// True if and only if a shard or a task its shard selected is missing
    /// from the merge (see [`RunScope::warnings`]).
    pub fn incomplete(&self) -> bool {
        !self.scope.warnings.is_empty()
    }
}

/// One input directory, read.
struct Input {
    dir: PathBuf,
    shard: Option<(Shard, ShardFile)>,
    tasks: Vec<InputTask>,
}

struct InputTask {
    id: String,
    dir: PathBuf,
    transcript: Transcript,
}

/// Merges the output directories `dirs` into `outputs.out_dir`:
/// `junit.xml`, `summary.md` and a copy of every task directory; `cwd`
/// is the directory ybs runs in (relative outputs are beneath it).
pub fn merge(dirs: &[PathBuf], outputs: &OutputLayout, cwd: &Path) -> Result<Merged, MergeError> {
    merge_with_rate(dirs, outputs, None, cwd)
}

/// [`merge`], the runs of `--repeat` decided by `--min-pass-rate`
/// (`min_pass_rate`) as the run would have.
pub fn merge_with_rate(
    dirs: &[PathBuf],
    outputs: &OutputLayout,
    min_pass_rate: Option<f64>,
    cwd: &Path,
) -> Result<Merged, MergeError> {
    let inputs = dirs
        .iter()
        .map(|dir| read_input(dir))
        .collect::<Result<Vec<_>, _>>()?;
    check_out_dir(&outputs.out_dir, dirs)?;
    let mut scope = scope_of(&inputs)?;
    scope.min_pass_rate = min_pass_rate;
    let mut tasks: Vec<&InputTask> = Vec::new();
    let mut owner: HashMap<&str, &Path> = HashMap::new();
    for input in &inputs {
        for task in &input.tasks {
            if let Some(first) = owner.insert(&task.id, &input.dir) {
                return Err(MergeError::Duplicate {
                    task: task.id.clone(),
                    first: first.to_owned(),
                    second: input.dir.clone(),
                });
            }
            tasks.push(task);
        }
    }
    // Shards run on different machines at overlapping times: order by
    // file, then id, so the same tasks always merge to the same report.
    tasks.sort_by(|a, b| (&a.transcript.task.file, &a.id).cmp(&(&b.transcript.task.file, &b.id)));

    let write = |source: io::Error| MergeError::Write { source };
    let open = outputs.open(cwd)?;
    let mut sinks = RunSinks::reports(outputs, &open, scope.clone());
    let mut collector = ResultCollector::new();
    for task in &tasks {
        for record in task.transcript.result_records() {
            collector.push(&record);
            sinks.event(&record).map_err(write)?;
        }
        let target = task_dir(&outputs.out_dir, &task.id).map_err(write)?;
        copy_dir(&task.dir, &target).map_err(write)?;
    }
    sinks.finish().map_err(write)?;
    Ok(Merged {
        results: collector.results(),
        scope,
    })
}

/// Reads one directory: its `shard.json`, if any, and the transcript of
/// each task it holds (only those `shard.json` lists, when there is one).
fn read_input(dir: &Path) -> Result<Input, MergeError> {
    if !dir.is_dir() {
        return Err(MergeError::NotADirectory {
            dir: dir.to_owned(),
        });
    }
    let shard = read_shard_file(dir)?;
    let listed: Option<BTreeSet<&str>> = shard
        .as_ref()
        .map(|(_, file)| file.tasks.iter().map(String::as_str).collect());
    let read_error = |path: &Path| {
        let path = path.to_owned();
        move |source| MergeError::Read { path, source }
    };
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .map_err(read_error(dir))?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .map(|entry| entry.file_name().to_string_lossy().into_owned())
        .filter(|name| task_dir(dir, name).is_ok())
        .filter(|name| {
            listed
                .as_ref()
                .is_none_or(|listed| listed.contains(name.as_str()))
        })
        .collect();
    names.sort();
    let digests_path = dir.join(DIGESTS_FILE);
    let digests = read_digests(&digests_path)?;
    let mut tasks = Vec::new();
    for name in names {
        let task_path = dir.join(&name);
        let path = task_path.join(TRANSCRIPT_FILE);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(MergeError::Link { path });
            }
            Ok(meta) if meta.is_file() => {}
            _ => continue,
        }
        let bytes = std::fs::read(&path).map_err(read_error(&path))?;
        match digests.transcripts.get(&name) {
            None => {
                return Err(MergeError::NoDigest {
                    path,
                    digests: digests_path,
                });
            }
            Some(recorded) if *recorded != Digests::of(&bytes) => {
                return Err(MergeError::Forged {
                    path,
                    digests: digests_path,
                });
            }
            Some(_) => {}
        }
        let text = String::from_utf8_lossy(&bytes);
        let transcript: Transcript =
            serde_json::from_str(&text).map_err(|source| MergeError::Transcript {
                path: path.clone(),
                source,
            })?;
        if transcript.task.id != name {
            return Err(MergeError::Mismatch {
                path,
                expected: name,
                found: transcript.task.id,
            });
        }
        tasks.push(InputTask {
            id: name,
            dir: task_path,
            transcript,
        });
    }
    let empty_shard = shard
        .as_ref()
        .is_some_and(|(_, file)| file.tasks.is_empty());
    if tasks.is_empty() && !empty_shard {
        return Err(MergeError::NoTranscripts {
            dir: dir.to_owned(),
        });
    }
    Ok(Input {
        dir: dir.to_owned(),
        shard,
        tasks,
    })
}

/// `DIR/digests.json`; empty when missing (each transcript is then
/// refused for having no digest).
fn read_digests(path: &Path) -> Result<Digests, MergeError> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(MergeError::Link {
                path: path.to_owned(),
            });
        }
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Digests::default()),
        _ => {}
    }
    let text = std::fs::read_to_string(path).map_err(|source| MergeError::Read {
        path: path.to_owned(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| MergeError::Transcript {
        path: path.to_owned(),
        source,
    })
}

fn read_shard_file(dir: &Path) -> Result<Option<(Shard, ShardFile)>, MergeError> {
    let path = dir.join(SHARD_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(MergeError::Read { path, source }),
    };
    let invalid = |source| MergeError::ShardFile {
        path: path.clone(),
        source,
    };
    let file: ShardFile =
        serde_json::from_str(&text).map_err(|err| invalid(ShardFileError::Json(err)))?;
    let shard = file
        .shard
        .parse::<Shard>()
        .map_err(|err| invalid(ShardFileError::Shard(err)))?;
    Ok(Some((shard, file)))
}

/// Refuses an `--out` that is one of the inputs: the copies would
/// overwrite what they copy.
fn check_out_dir(out_dir: &Path, dirs: &[PathBuf]) -> Result<(), MergeError> {
    let Ok(out) = std::fs::canonicalize(out_dir) else {
        // Does not exist yet: cannot be an input.
        return Ok(());
    };
    if dirs
        .iter()
        .any(|dir| std::fs::canonicalize(dir).is_ok_and(|dir| dir == out))
    {
        return Err(MergeError::OutIsInput {
            out: out_dir.to_owned(),
        });
    }
    Ok(())
}

/// The merged shards, and a warning for each shard of the split and each
/// task a shard selected that has no transcript.
fn scope_of(inputs: &[Input]) -> Result<RunScope, MergeError> {
    let mut scope = RunScope {
        merged_from: inputs
            .iter()
            .map(|input| input.dir.display().to_string())
            .collect(),
        ..RunScope::default()
    };
    let sharded: Vec<(&Input, Shard, &ShardFile)> = inputs
        .iter()
        .filter_map(|input| {
            let (shard, file) = input.shard.as_ref()?;
            Some((input, *shard, file))
        })
        .collect();
    let Some(&(first_input, first, first_file)) = sharded.first() else {
        return Ok(scope);
    };
    for &(input, shard, file) in &sharded {
        if file.durations != first_file.durations {
            let how = |file: &ShardFile| {
                file.durations.as_ref().map_or_else(
                    || "by hash".to_owned(),
                    |digest| format!("by the durations of {digest}"),
                )
            };
            return Err(MergeError::MixedMethods {
                first_dir: first_input.dir.clone(),
                first: how(first_file),
                second_dir: input.dir.clone(),
                second: how(file),
            });
        }
        if shard.total() != first.total() {
            return Err(MergeError::MixedSplits {
                first_dir: first_input.dir.clone(),
                first,
                second_dir: input.dir.clone(),
                second: shard,
            });
        }
    }
    let mut shards: Vec<Shard> = sharded.iter().map(|&(_, shard, _)| shard).collect();
    shards.sort();
    shards.dedup();
    for index in 1..=first.total() {
        if let Some(missing) = Shard::new(index, first.total()).filter(|s| !shards.contains(s)) {
            scope.warnings.push(format!(
                "shard {missing} is missing: its tasks are not in this report"
            ));
        }
    }
    for &(input, shard, file) in &sharded {
        for task in &file.tasks {
            if !input.tasks.iter().any(|found| &found.id == task) {
                scope.warnings.push(format!(
                    "task `{task}` of shard {shard} has no transcript in {}",
                    input.dir.display()
                ));
            }
        }
    }
    scope.merged_shards = shards;
    Ok(scope)
}

/// Copies the regular files and directories of `from` into `to`,
/// replacing `to`. Symbolic links are not followed or copied: a task
/// directory holds none, and a merge must not read outside its inputs.
fn copy_dir(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::remove_dir_all(to) {
        Err(err) if err.kind() != io::ErrorKind::NotFound => return Err(with_path(err, to)),
        _ => {}
    }
    std::fs::create_dir_all(to).map_err(|err| with_path(err, to))?;
    for entry in std::fs::read_dir(from).map_err(|err| with_path(err, from))? {
        let entry = entry.map_err(|err| with_path(err, from))?;
        let kind = entry
            .file_type()
            .map_err(|err| with_path(err, &entry.path()))?;
        let target = to.join(entry.file_name());
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), &target).map_err(|err| with_path(err, &target))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::event::EventRecord;
    use crate::core::outcome::Status;
    use crate::report::testdata::records_two_files;
    use crate::report::transcript::build_transcript;

    /// Writes the transcripts (and events) of `tasks` under `dir`.
    fn shard_dir(root: &Path, name: &str, tasks: &[&str], shard: Option<&str>) -> PathBuf {
        let dir = root.join(name);
        let out = OutDir::open(&dir, root).unwrap();
        let records = records_two_files();
        for task in tasks {
            let own: Vec<EventRecord> = records
                .iter()
                .filter(|record| record.task == *task)
                .cloned()
                .collect();
            let json = serde_json::to_vec(&build_transcript(&own)).unwrap();
            out.write_transcript(task, TRANSCRIPT_FILE, &json).unwrap();
            std::fs::write(dir.join(task).join("events.jsonl"), "{}\n").unwrap();
        }
        if let Some(shard) = shard {
            ShardFile {
                shard: shard.to_owned(),
                source: None,
                durations: None,
                run_id: "r".to_owned(),
                tasks: tasks.iter().map(|task| (*task).to_owned()).collect(),
            }
            .write(&out)
            .unwrap();
        }
        dir
    }

    fn outputs(root: &Path) -> OutputLayout {
        OutputLayout::new(root.join("merged"), None, None)
    }

    #[test]
    fn merges_reports_and_copies_task_dirs() {
        let root = tempfile::tempdir().unwrap();
        let one = shard_dir(root.path(), "one", &["gamma", "beta"], Some("1/3"));
        let two = shard_dir(root.path(), "two", &["alpha"], Some("2/3"));
        let three = shard_dir(root.path(), "three", &[], Some("3/3"));
        let merged = merge(&[one, two, three], &outputs(root.path()), root.path()).unwrap();
        let ids: Vec<_> = merged.results.iter().map(|r| r.task.as_str()).collect();
        // By file (tasks/a.yaml, tasks/b.yaml), then id.
        assert_eq!(ids, ["alpha", "gamma", "beta"]);
        assert_eq!(merged.results[2].status, Status::Failed);
        assert!(!merged.incomplete(), "{:?}", merged.scope);
        let out = root.path().join("merged");
        let xml = std::fs::read_to_string(out.join("junit.xml")).unwrap();
        let report = quick_junit::Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.tests, 3);
        assert_eq!(report.failures, 1);
        let summary = std::fs::read_to_string(out.join("summary.md")).unwrap();
        assert!(summary.contains("(shards 1/3, 2/3, 3/3)"), "{summary}");
        assert!(
            summary.contains("3 tasks: 1 passed, 1 failed, 1 errored"),
            "{summary}"
        );
        for task in ["alpha", "beta", "gamma"] {
            assert!(out.join(task).join(TRANSCRIPT_FILE).is_file(), "{task}");
            assert!(out.join(task).join("events.jsonl").is_file(), "{task}");
        }
    }

    #[test]
    fn duplicates_name_both_directories() {
        let root = tempfile::tempdir().unwrap();
        let one = shard_dir(root.path(), "one", &["alpha"], None);
        let two = shard_dir(root.path(), "two", &["alpha", "beta"], None);
        let err = merge(&[one, two], &outputs(root.path()), root.path()).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("`alpha`") && text.contains("one") && text.contains("two"),
            "{text}"
        );
        assert_eq!(err.exit_code(), exit::USAGE);
        assert!(!root.path().join("merged").exists());
    }

    #[test]
    fn bad_inputs_are_usage_errors() {
        let root = tempfile::tempdir().unwrap();
        let empty = root.path().join("empty");
        std::fs::create_dir_all(empty.join("not-a-task")).unwrap();
        let err = merge(
            std::slice::from_ref(&empty),
            &outputs(root.path()),
            root.path(),
        )
        .unwrap_err();
        assert!(matches!(err, MergeError::NoTranscripts { .. }), "{err}");
        assert!(err.hint().is_some());
        let err = merge(
            &[root.path().join("nope")],
            &outputs(root.path()),
            root.path(),
        )
        .unwrap_err();
        assert!(matches!(err, MergeError::NotADirectory { .. }), "{err}");
        let a = shard_dir(root.path(), "a", &["alpha"], Some("1/2"));
        let b = shard_dir(root.path(), "b", &["beta"], Some("1/3"));
        let err = merge(&[a.clone(), b], &outputs(root.path()), root.path()).unwrap_err();
        assert!(matches!(err, MergeError::MixedSplits { .. }), "{err}");
        let err = merge(
            std::slice::from_ref(&a),
            &OutputLayout::new(a.clone(), None, None),
            root.path(),
        )
        .unwrap_err();
        assert!(matches!(err, MergeError::OutIsInput { .. }), "{err}");
        std::fs::write(a.join(SHARD_FILE), "{").unwrap();
        let err = merge(&[a], &outputs(root.path()), root.path()).unwrap_err();
        assert!(matches!(err, MergeError::ShardFile { .. }), "{err}");
    }

    #[test]
    fn forged_or_undigested_transcripts_are_refused() {
        let root = tempfile::tempdir().unwrap();
        let one = shard_dir(root.path(), "one", &["alpha", "beta"], None);
        let path = one.join("beta").join(TRANSCRIPT_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(&path, text.replace("\"failed\"", "\"passed\"")).unwrap();
        let err = merge(
            std::slice::from_ref(&one),
            &outputs(root.path()),
            root.path(),
        )
        .unwrap_err();
        assert!(matches!(err, MergeError::Forged { .. }), "{err}");
        assert!(err.to_string().contains("beta"), "{err}");
        assert_eq!(err.exit_code(), exit::USAGE);
        assert!(!root.path().join("merged").exists());
        std::fs::remove_file(one.join(DIGESTS_FILE)).unwrap();
        let err = merge(&[one], &outputs(root.path()), root.path()).unwrap_err();
        assert!(matches!(err, MergeError::NoDigest { .. }), "{err}");
    }

    #[test]
    fn missing_shards_and_tasks_are_warned_about() {
        let root = tempfile::tempdir().unwrap();
        let one = shard_dir(root.path(), "one", &["alpha", "beta"], Some("1/3"));
        std::fs::remove_dir_all(one.join("beta")).unwrap();
        // A stale task directory that shard.json does not list is ignored.
        shard_dir(root.path(), "one", &["gamma"], None);
        std::fs::write(
            one.join(SHARD_FILE),
            r#"{"shard":"1/3","run_id":"r","tasks":["alpha","beta"]}"#,
        )
        .unwrap();
        let merged = merge(&[one], &outputs(root.path()), root.path()).unwrap();
        assert_eq!(merged.results.len(), 1);
        assert!(merged.incomplete());
        let warnings = merged.scope.warnings.join("\n");
        assert!(warnings.contains("shard 2/3 is missing"), "{warnings}");
        assert!(warnings.contains("shard 3/3 is missing"), "{warnings}");
        assert!(warnings.contains("task `beta` of shard 1/3"), "{warnings}");
    }
}
