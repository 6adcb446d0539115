//! `ybs run --repeat N` and `--models a,b` (docs/ci.md): the copies of a
//! task and what they add up to.
//!
//! A copy's id is the task id, then `@<model>` for a model of
//! `--models`, then `#<k>` for run k of `--repeat` (`fix@gpt-4o#2`).
//! Task ids never hold `@` or `#`, so the id alone says which task,
//! model and run a result is: the reports (and `report merge`, which
//! reads them back from the transcripts) need nothing else to group the
//! runs of a task and compare the models.
//!
//! The runs of one task (with one model) add up to a [`Verdict`]: passed
//! when every run passed, flaky when some did, else the worst of the
//! runs. `--min-pass-rate R` decides flaky ones: a pass rate of at least
//! R passes, a lower one fails.

use crate::core::Status;

/// Before the model of a copy's id.
pub const MODEL_MARK: char = '@';
/// Before the run number of a copy's id.
pub const RUN_MARK: char = '#';

/// The id without its run number: what the runs of one task (with one
/// model) share. `fix@m#2` → `fix@m`; an id without `#k` as it is.
pub fn group_key(id: &str) -> &str {
    match id.rsplit_once(RUN_MARK) {
        Some((key, run)) if !run.is_empty() && run.bytes().all(|b| b.is_ascii_digit()) => key,
        _ => id,
    }
}

/// The task id of a copy: `fix@m#2` → `fix`.
pub fn base_id(id: &str) -> &str {
    let key = group_key(id);
    key.split_once(MODEL_MARK).map_or(key, |(base, _)| base)
}

/// Whether these ids are copies of `--models`.
pub fn has_models<'a>(mut ids: impl Iterator<Item = &'a str>) -> bool {
    ids.any(|id| group_key(id).contains(MODEL_MARK))
}

/// Whether these ids are runs of `--repeat`.
pub fn has_runs<'a>(mut ids: impl Iterator<Item = &'a str>) -> bool {
    ids.any(|id| group_key(id) != id)
}

/// What the runs of one task add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Passed,
    /// Some runs passed, not all, and no `--min-pass-rate` decided it.
    Flaky,
    Failed,
    Error,
    Paused,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Flaky => "flaky",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::Paused => "paused",
        }
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The runs of one task (with one model).
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    /// The id without the run number.
    pub key: String,
    pub runs: usize,
    pub passed: usize,
    pub verdict: Verdict,
    /// Some runs passed and some did not (whatever `--min-pass-rate`
    /// made of it).
    pub mixed: bool,
    /// The indexes, in the given items, of this task's runs.
    pub members: Vec<usize>,
}

impl Rate {
    /// Runs passed over runs, 0 to 1.
    pub fn rate(&self) -> f64 {
        ratio(self.passed, self.runs)
    }

    /// `2/3 (67%)`.
    pub fn describe(&self) -> String {
        format!("{}/{} ({})", self.passed, self.runs, percent(self.rate()))
    }
}

/// `passed` over `runs` (0 when there is no run).
#[expect(clippy::cast_precision_loss, reason = "counts far below 2^52")]
pub fn ratio(passed: usize, runs: usize) -> f64 {
    if runs == 0 {
        0.0
    } else {
        passed as f64 / runs as f64
    }
}

/// `67%`.
pub fn percent(rate: f64) -> String {
    format!("{:.0}%", rate * 100.0)
}

/// A task's runs being gathered: its key, whether the key is of runs of
/// `--repeat`, and each run's index and status.
type Group = (String, bool, Vec<(usize, Status)>);

/// The runs of each task, grouped by [`group_key`] in the order each
/// task's first run comes, with their verdict under `min_pass_rate`.
pub fn rates<'a>(
    items: impl IntoIterator<Item = (&'a str, Status)>,
    min_pass_rate: Option<f64>,
) -> Vec<Rate> {
    let mut groups: Vec<Group> = Vec::new();
    for (index, (id, status)) in items.into_iter().enumerate() {
        let key = group_key(id);
        // Only runs of `--repeat` add up: a plain id is a task of its own.
        let runs = key != id;
        match groups
            .iter_mut()
            .find(|(other, of_runs, _)| runs && *of_runs && other == key)
        {
            Some((_, _, members)) => members.push((index, status)),
            None => groups.push((key.to_owned(), runs, vec![(index, status)])),
        }
    }
    groups
        .into_iter()
        .map(|(key, _, runs)| {
            let passed = runs.iter().filter(|(_, s)| *s == Status::Passed).count();
            let any = |status| runs.iter().any(|(_, s)| *s == status);
            let worst = if any(Status::Failed) {
                Verdict::Failed
            } else if any(Status::Error) {
                Verdict::Error
            } else {
                Verdict::Paused
            };
            let mixed = passed > 0 && passed < runs.len();
            let verdict = if passed == runs.len() {
                Verdict::Passed
            } else if passed == 0 {
                worst
            } else if worst == Verdict::Paused {
                // Some runs passed and the others wait for `ybs resume`:
                // the rate is not known yet.
                Verdict::Paused
            } else {
                match min_pass_rate {
                    Some(min) if ratio(passed, runs.len()) >= min => Verdict::Passed,
                    Some(_) => Verdict::Failed,
                    None => Verdict::Flaky,
                }
            };
            Rate {
                key,
                runs: runs.len(),
                passed,
                verdict,
                mixed,
                members: runs.into_iter().map(|(index, _)| index).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_of_copies_name_the_task_model_and_run() {
        assert_eq!(group_key("fix@gpt-4o#2"), "fix@gpt-4o");
        assert_eq!(group_key("fix#12"), "fix");
        assert_eq!(group_key("fix@m"), "fix@m");
        assert_eq!(group_key("fix"), "fix");
        assert_eq!(base_id("fix@gpt-4o#2"), "fix");
        assert_eq!(base_id("fix#2"), "fix");
        assert!(has_models(["a", "fix@m"].into_iter()));
        assert!(!has_models(["a#1", "b"].into_iter()));
        assert!(has_runs(["a#1"].into_iter()));
        assert!(!has_runs(["a@m"].into_iter()));
    }

    #[test]
    fn runs_add_up_to_a_verdict() {
        use Status::{Error, Failed, Passed};
        let items = [
            ("a#1", Passed),
            ("b#1", Passed),
            ("a#2", Failed),
            ("b#2", Passed),
            ("c#1", Error),
            ("c#2", Failed),
            ("e#1", Passed),
            ("e#2", Status::Paused),
            ("d", Passed),
        ];
        let verdicts = |min| {
            rates(items, min)
                .into_iter()
                .map(|rate| (rate.key, rate.verdict, rate.passed, rate.runs))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            verdicts(None),
            [
                ("a".to_owned(), Verdict::Flaky, 1, 2),
                ("b".to_owned(), Verdict::Passed, 2, 2),
                ("c".to_owned(), Verdict::Failed, 0, 2),
                ("e".to_owned(), Verdict::Paused, 1, 2),
                ("d".to_owned(), Verdict::Passed, 1, 1),
            ]
        );
        assert_eq!(verdicts(Some(0.5))[0].1, Verdict::Passed);
        assert_eq!(verdicts(Some(0.6))[0].1, Verdict::Failed);
        assert_eq!(rates(items, None)[0].members, [0, 2]);
        assert_eq!(rates(items, None)[0].describe(), "1/2 (50%)");
    }
}
