//! What a run produced, and the exit code it earns (docs/cli.md).

use crate::core::exit;
use crate::core::{Reason, Status};
use crate::report::rates::{Verdict, rates};

/// The end state of one task, after `expect` was applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskResult {
    pub id: String,
    pub status: Status,
    pub reason: Reason,
    pub message: Option<String>,
}

/// Every task of a run.
#[derive(Debug, Clone, Default)]
pub struct RunReport {
    pub results: Vec<TaskResult>,
    pub interrupted: bool,
    /// The first output error (a sink that could not write), if any.
    pub output_error: Option<String>,
    /// Output files found replaced, changed or linked elsewhere after
    /// ybs wrote them (see `report::OutDir::check`).
    pub tampering: Vec<String>,
    /// Lines to show after the run that change nothing in its outcome
    /// (spans not delivered to the OpenTelemetry collector).
    pub warnings: Vec<String>,
    /// `--min-pass-rate R`: decides the tasks `--repeat` found flaky.
    pub min_pass_rate: Option<f64>,
}

impl RunReport {
    /// `0` all passed, `1` any failed or an output was tampered with, `3` paused, `4` infra error
    /// or a task skipped (the batch stopped before it: a quota or
    /// authentication error, `--max-cost-usd`) and no failure, `130`
    /// interrupted.
    pub fn exit_code(&self) -> u8 {
        if self.interrupted {
            return exit::INTERRUPTED;
        }
        // Under `--repeat` the runs of a task count as one, by their
        // verdict (docs/cli.md): a task without runs is its own verdict.
        let verdicts = rates(
            self.results.iter().map(|r| (r.id.as_str(), r.status)),
            self.min_pass_rate,
        );
        let any = |verdict| verdicts.iter().any(|rate| rate.verdict == verdict);
        // A flaky task failed some of its runs: a failure, as the contract's
        // codes have it, unless `--min-pass-rate` accepted its rate (then
        // its verdict is `Passed`).
        if any(Verdict::Failed) || any(Verdict::Flaky) || !self.tampering.is_empty() {
            exit::TASK_FAILED
        } else if any(Verdict::Error) || self.results.iter().any(|r| r.status == Status::Skipped) {
            exit::INFRA
        } else if any(Verdict::Paused) {
            exit::PAUSED
        } else if self.output_error.is_some() {
            exit::INFRA
        } else {
            exit::OK
        }
    }

    /// Exit 1 came from flaky tasks only: no task failed as a whole and no
    /// output was tampered with.
    fn only_flaky(&self) -> bool {
        let verdicts = rates(
            self.results.iter().map(|r| (r.id.as_str(), r.status)),
            self.min_pass_rate,
        );
        self.tampering.is_empty()
            && verdicts.iter().any(|rate| rate.verdict == Verdict::Flaky)
            && !verdicts.iter().any(|rate| rate.verdict == Verdict::Failed)
    }

    /// The step outputs of a run that ended with exit `code`, its outputs
    /// laid out as `layout` says (docs/progress.md): `status` (the code as
    /// a word), the counts, and the paths of the reports.
    pub fn github_outputs(
        &self,
        code: u8,
        layout: &crate::report::OutputLayout,
    ) -> Vec<(&'static str, String)> {
        let status = match code {
            exit::OK => "passed",
            // Exit 1 from flaky tasks alone (nothing failed every run).
            exit::TASK_FAILED if self.only_flaky() => "flaky",
            exit::TASK_FAILED => "failed",
            exit::PAUSED => "paused",
            exit::INTERRUPTED => "interrupted",
            _ => "error",
        };
        let summary = layout.out_dir.join(crate::report::SUMMARY_FILE);
        // A one-task run's answer, for the next step; empty otherwise.
        let answer = match self.results.as_slice() {
            [only] => Some(
                layout
                    .out_dir
                    .join(&only.id)
                    .join(crate::report::OUTPUT_FILE),
            )
            .filter(|path| path.is_file())
            .map(|path| path.display().to_string())
            .unwrap_or_default(),
            _ => String::new(),
        };
        vec![
            ("status", status.to_owned()),
            ("passed", self.count(Status::Passed).to_string()),
            ("failed", self.count(Status::Failed).to_string()),
            ("errors", self.count(Status::Error).to_string()),
            ("paused", self.count(Status::Paused).to_string()),
            ("skipped", self.count(Status::Skipped).to_string()),
            ("junit", layout.junit.display().to_string()),
            ("summary", summary.display().to_string()),
            ("out", layout.out_dir.display().to_string()),
            ("output", answer),
        ]
    }

    pub fn count(&self, status: Status) -> usize {
        self.results.iter().filter(|r| r.status == status).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(status: Status) -> TaskResult {
        TaskResult {
            id: "t".into(),
            status,
            reason: Reason::Completed,
            message: None,
        }
    }

    #[test]
    fn exit_codes() {
        let report = |statuses: &[Status]| RunReport {
            results: statuses.iter().map(|s| result(*s)).collect(),
            ..RunReport::default()
        };
        assert_eq!(report(&[]).exit_code(), 0);
        assert_eq!(report(&[Status::Passed]).exit_code(), 0);
        assert_eq!(
            report(&[Status::Passed, Status::Failed, Status::Error]).exit_code(),
            1
        );
        assert_eq!(report(&[Status::Passed, Status::Error]).exit_code(), 4);
        assert_eq!(report(&[Status::Paused]).exit_code(), 3);
        // `--repeat`: the runs of a task count once, by their verdict.
        let runs = |statuses: &[(&str, Status)], min| RunReport {
            results: statuses
                .iter()
                .map(|(id, status)| TaskResult {
                    id: (*id).to_owned(),
                    ..result(*status)
                })
                .collect(),
            min_pass_rate: min,
            ..RunReport::default()
        };
        let flaky = [
            ("a#1", Status::Passed),
            ("a#2", Status::Failed),
            ("b#1", Status::Passed),
            ("b#2", Status::Passed),
        ];
        // Flaky: a failure by the contract's codes, unless a rate decides.
        assert_eq!(runs(&flaky, None).exit_code(), 1);
        assert!(runs(&flaky, None).only_flaky());
        assert_eq!(runs(&flaky, Some(0.5)).exit_code(), 0);
        assert_eq!(runs(&flaky, Some(0.75)).exit_code(), 1);
        let mut worse = flaky.to_vec();
        worse.push(("c", Status::Error));
        // A flaky task outranks an infrastructure error, as a failure does.
        assert_eq!(runs(&worse, None).exit_code(), 1);
        let mut failed = flaky.to_vec();
        failed.push(("c", Status::Failed));
        assert!(!runs(&failed, None).only_flaky());
        // The batch stopped before a task: never a pass.
        assert_eq!(report(&[Status::Passed, Status::Skipped]).exit_code(), 4);
        assert_eq!(report(&[Status::Failed, Status::Skipped]).exit_code(), 1);
        let mut interrupted = report(&[Status::Failed]);
        interrupted.interrupted = true;
        assert_eq!(interrupted.exit_code(), 130);
    }
}
