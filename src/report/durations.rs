//! `OUT/durations.json`: how long each task took, for the next run's
//! `--shard-by durations` (docs/ci.md, "Shards balanced by duration").
//! Every run and merge writes it; `--durations FILE` reads it back, or a
//! JUnit file ybs wrote (`junit.xml`, merged or not).
//!
//! A task is named by its id (unique across the files of a run); a task
//! run several times (`--repeat`, `--models`) counts its mean per run.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::rates::base_id;
use super::results::TaskResult;

/// The file name inside `OUT/`.
pub const DURATIONS_FILE: &str = "durations.json";

/// Each task's mean duration per run, in milliseconds, by task id.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Durations {
    /// `1`.
    pub version: u32,
    pub tasks: BTreeMap<String, u64>,
}

/// Why `--durations FILE` cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum DurationsError {
    #[error("{}: cannot read the durations file: {source}", path.display())]
    Read {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// `place` is the `line:col` a JSON file goes wrong at.
    #[error("{}{}: neither a ybs durations.json nor a JUnit XML file ybs wrote: {why}", path.display(), place.map(|(line, col)| format!(":{line}:{col}")).unwrap_or_default())]
    Foreign {
        path: std::path::PathBuf,
        place: Option<(usize, usize)>,
        why: String,
    },
}

impl Durations {
    /// The mean duration per run of each task of `results`.
    pub fn of(results: &[TaskResult]) -> Self {
        Self::mean_per_task(
            results
                .iter()
                .map(|result| (result.task.as_str(), result.duration_ms)),
        )
    }

    /// Each task's mean over its runs, `(id, ms)` a run; a copy's id
    /// (`--repeat`, `--models`) counts as its task's.
    fn mean_per_task<'a>(runs: impl Iterator<Item = (&'a str, u64)>) -> Self {
        let mut sums: BTreeMap<String, (u64, u64)> = BTreeMap::new();
        for (id, ms) in runs {
            let entry = sums.entry(base_id(id).to_owned()).or_default();
            entry.0 = entry.0.saturating_add(ms);
            entry.1 += 1;
        }
        Self {
            version: 1,
            tasks: sums
                .into_iter()
                .map(|(id, (sum, runs))| (id, sum / runs.max(1)))
                .collect(),
        }
    }

    /// The file as JSON, with a final newline.
    pub fn to_json(&self) -> Vec<u8> {
        let mut json = serde_json::to_vec_pretty(self).unwrap_or_default();
        json.push(b'\n');
        json
    }

    /// Reads `path`: a `durations.json`, or a JUnit file ybs wrote (each
    /// `<testcase>`'s `time`, its name the task id). Returns the durations
    /// and the file's digest (`sha256:HEX`), which the shard records.
    pub fn read(path: &Path) -> Result<(Self, String), DurationsError> {
        let bytes = std::fs::read(path).map_err(|source| DurationsError::Read {
            path: path.to_owned(),
            source,
        })?;
        let digest = {
            use sha2::Digest as _;
            let hash = sha2::Sha256::digest(&bytes);
            let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
            format!("sha256:{hex}")
        };
        let foreign = |why: String| DurationsError::Foreign {
            path: path.to_owned(),
            place: None,
            why,
        };
        let text = String::from_utf8_lossy(&bytes);
        let durations = if text.trim_start().starts_with('<') {
            Self::of_junit(&text).map_err(foreign)?
        } else {
            let durations: Self = serde_json::from_slice(&bytes).map_err(|error| {
                // serde's own "at line L column C" becomes the place.
                let why = error.to_string();
                let why = why
                    .split_once(" at line ")
                    .map_or(why.as_str(), |(why, _)| why)
                    .to_owned();
                DurationsError::Foreign {
                    path: path.to_owned(),
                    place: (error.line() > 0).then(|| (error.line(), error.column().max(1))),
                    why,
                }
            })?;
            if durations.version != 1 {
                return Err(foreign(format!("version {} is unknown", durations.version)));
            }
            durations
        };
        Ok((durations, digest))
    }

    /// The durations of a JUnit report ybs wrote: each test case's `time`
    /// (seconds) under its task id, the mean over the runs of a task.
    fn of_junit(text: &str) -> Result<Self, String> {
        let report =
            quick_junit::Report::deserialize_from_str(text).map_err(|error| error.to_string())?;
        let name = report.name.as_ref().map_or("", |name| name.as_str());
        if name != "ybs" {
            return Err(format!("its report is `{name}`, not `ybs`"));
        }
        Ok(Self::mean_per_task(
            report
                .test_suites
                .iter()
                .flat_map(|suite| suite.test_cases.iter())
                .map(|case| {
                    let ms = case.time.map_or(0, |time| {
                        u64::try_from(time.as_millis()).unwrap_or(u64::MAX)
                    });
                    (case.name.as_str(), ms)
                }),
        ))
    }

    /// The shard (`1..=total`) of each of `ids`, balanced by duration:
    /// longest first onto the least-loaded shard (the lowest on a tie),
    /// ties between tasks broken by id, a task the file does not know at
    /// the median of those it does. The same file gives every machine the
    /// same split. Also the predicted load of each shard, in ms.
    pub fn split(&self, ids: &[&str], total: u32) -> (BTreeMap<String, u32>, Vec<u64>) {
        let mut known: Vec<u64> = ids
            .iter()
            .filter_map(|id| self.tasks.get(*id).copied())
            .collect();
        known.sort_unstable();
        let median = known.get(known.len() / 2).copied().unwrap_or(1).max(1);
        let mut order: Vec<(u64, &str)> = ids
            .iter()
            .map(|id| (self.tasks.get(*id).copied().unwrap_or(median), *id))
            .collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let mut loads = vec![0_u64; usize::try_from(total.max(1)).unwrap_or(1)];
        let mut placed = BTreeMap::new();
        for (ms, id) in order {
            let (index, _) = loads
                .iter()
                .enumerate()
                .min_by_key(|(index, load)| (**load, *index))
                .unwrap_or((0, &0));
            loads[index] = loads[index].saturating_add(ms);
            placed.insert(id.to_owned(), u32::try_from(index).unwrap_or(0) + 1);
        }
        (placed, loads)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_first_onto_the_least_loaded_shard() {
        let durations = Durations {
            version: 1,
            tasks: [("a", 100), ("b", 60), ("c", 50), ("d", 40), ("e", 10)]
                .into_iter()
                .map(|(id, ms)| (id.to_owned(), ms))
                .collect(),
        };
        let (placed, loads) = durations.split(&["e", "d", "c", "b", "a", "new"], 2);
        // a 100 → 1; b 60 → 2; c 50 → 2; `new`, unknown, at the median
        // (50), after c by id → 1; d 40 → 2; e 10 → 1 (the lower on a tie).
        let shards: Vec<u32> = ["a", "b", "c", "new", "d", "e"]
            .iter()
            .map(|id| placed[*id])
            .collect();
        assert_eq!(shards, [1, 2, 2, 1, 2, 1]);
        assert_eq!(loads, [160, 150]);
        // The same input, the same split.
        assert_eq!(
            durations.split(&["a", "b", "c", "d", "e", "new"], 2).0,
            placed
        );
    }
}
