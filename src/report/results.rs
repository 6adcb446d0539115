//! The end result of each task, as run-level reports (JUnit, summary) need
//! it, collected from interleaved events of many tasks.

use std::collections::HashMap;

use crate::core::event::{
    CheckLocation, Event, EventRecord, Git, GitOutcome, LlmResponse, Note, SandboxInfo, TaskOutput,
};
use crate::core::outcome::{Reason, Status};
use crate::core::usage::{Cost, Usage};

/// How one task ended, with what a report shows about it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskResult {
    pub task: String,
    pub file: String,
    pub suite: String,
    pub run_id: String,
    pub provider: String,
    pub model: String,
    /// Unix ms of `task.started` (or of the task's first event).
    pub started_ms: u64,
    pub status: Status,
    pub reason: Reason,
    pub message: Option<String>,
    pub expect: String,
    pub iterations: u32,
    pub usage: Usage,
    pub cost: Cost,
    pub duration_ms: u64,
    /// The checks that failed in the last attempt that ran checks.
    pub failed_checks: Vec<FailedCheck>,
    pub git: Option<GitOutcome>,
    /// The kernel confinement of the task's children (docs/security.md S1).
    pub sandbox: Option<SandboxInfo>,
    /// False when the events stopped before `task.finished`; the result is
    /// then reported as an `internal_error`.
    pub finished: bool,
    /// `--dry-run`: tool calls were decided, not executed.
    pub dry_run: bool,
    /// The task's `warning: ` notes (a declared tool or MCP server that
    /// could not start), for the summary.
    pub warnings: Vec<String>,
    /// The model's final answer (`task.output`), when it gave one.
    pub output: Option<String>,
    /// Its JSON value, under an output contract it met.
    pub output_json: Option<serde_json::Value>,
}

/// A check that did not pass.
#[derive(Debug, Clone, PartialEq)]
pub struct FailedCheck {
    pub name: String,
    pub command: String,
    pub exit_code: Option<i32>,
    pub expected_exit: i32,
    pub timed_out: bool,
    pub output_tail: String,
    /// Where its output points, inside the repository.
    pub locations: Vec<CheckLocation>,
}

impl FailedCheck {
    /// One line naming the check and how it failed, e.g.
    /// ``check `builds` exited 1 (expected 0)``.
    pub fn describe(&self) -> String {
        let name = self.name.replace('`', "'");
        if self.timed_out {
            format!("check `{name}` timed out")
        } else if let Some(code) = self.exit_code {
            format!(
                "check `{name}` exited {code} (expected {})",
                self.expected_exit
            )
        } else {
            format!(
                "check `{name}` was killed by a signal (expected exit {})",
                self.expected_exit
            )
        }
    }
}

impl TaskResult {
    /// `reason: detail`, where the detail names the failing checks when
    /// the task failed its checks, and is the task's message otherwise.
    pub fn headline(&self) -> String {
        let detail = if self.reason == Reason::ChecksFailed && !self.failed_checks.is_empty() {
            Some(
                self.failed_checks
                    .iter()
                    .map(FailedCheck::describe)
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        } else {
            self.message.clone().map(|message| first_line(&message))
        };
        match detail {
            Some(detail) if !detail.is_empty() => format!("{}: {detail}", self.reason),
            _ => self.reason.to_string(),
        }
    }

    /// The commit of the task, if it made one.
    pub fn commit(&self) -> Option<&str> {
        self.git.as_ref().and_then(|git| git.commit.as_deref())
    }

    pub fn salvage_ref(&self) -> Option<&str> {
        self.git.as_ref().and_then(|git| git.salvage_ref.as_deref())
    }
}

fn first_line(text: &str) -> String {
    let line = text.lines().next().unwrap_or_default().trim();
    if text.trim().lines().nth(1).is_some() {
        format!("{line} …")
    } else {
        line.to_owned()
    }
}

/// Gathers [`TaskResult`]s from the event stream, tasks in the order they
/// started.
#[derive(Debug, Default)]
pub struct ResultCollector {
    tasks: Vec<Pending>,
    index: HashMap<String, usize>,
}

#[derive(Debug, Clone)]
struct Pending {
    result: TaskResult,
    /// Every check run, with its attempt number.
    checks: Vec<(u32, bool, FailedCheck)>,
    last_ms: u64,
}

impl ResultCollector {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn push(&mut self, record: &EventRecord) {
        let index = match self.index.get(&record.task) {
            Some(&index) => index,
            None => {
                self.index.insert(record.task.clone(), self.tasks.len());
                self.tasks.push(Pending::new(&record.task, record.ts_ms));
                self.tasks.len() - 1
            }
        };
        let Some(pending) = self.tasks.get_mut(index) else {
            return;
        };
        if matches!(record.event, Event::TaskStarted(_)) && pending.result.finished {
            // The same task again (a resumed run): start over, keep the slot.
            *pending = Pending::new(&record.task, record.ts_ms);
        }
        pending.push(record);
    }

    /// The results so far, in start order. Tasks without `task.finished`
    /// are reported as errors (`internal_error`).
    pub fn results(&self) -> Vec<TaskResult> {
        self.tasks.iter().map(Pending::result).collect()
    }

    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

impl Pending {
    fn new(task: &str, ts_ms: u64) -> Self {
        Self {
            result: TaskResult {
                task: task.to_owned(),
                file: String::new(),
                suite: String::new(),
                run_id: String::new(),
                provider: String::new(),
                model: String::new(),
                started_ms: ts_ms,
                status: Status::Error,
                reason: Reason::InternalError,
                message: Some("the task's events ended before task.finished".to_owned()),
                expect: "pass".to_owned(),
                iterations: 0,
                usage: Usage::default(),
                cost: Cost::Usd(0.0),
                duration_ms: 0,
                failed_checks: Vec::new(),
                sandbox: None,
                git: None,
                finished: false,
                dry_run: false,
                warnings: Vec::new(),
                output: None,
                output_json: None,
            },
            checks: Vec::new(),
            last_ms: ts_ms,
        }
    }

    fn push(&mut self, record: &EventRecord) {
        self.last_ms = self.last_ms.max(record.ts_ms);
        let result = &mut self.result;
        match &record.event {
            Event::TaskStarted(start) => {
                result.dry_run = start.dry_run;
                result.sandbox = start.sandbox.as_deref().cloned();
                result.started_ms = record.ts_ms;
                result.file.clone_from(&start.file);
                result.suite.clone_from(&start.suite);
                result.run_id.clone_from(&start.run_id);
                result.provider.clone_from(&start.provider);
                result.model.clone_from(&start.model);
            }
            Event::CheckCompleted(check) => self.checks.push((
                check.attempt,
                check.passed,
                FailedCheck {
                    name: check.name.clone(),
                    command: check.command.clone(),
                    exit_code: check.exit_code,
                    expected_exit: check.expected_exit,
                    timed_out: check.timed_out,
                    output_tail: check.output_tail.clone(),
                    locations: check.locations.clone(),
                },
            )),
            Event::TaskFinished(end) => {
                result.finished = true;
                result.status = end.status;
                result.reason = end.reason;
                result.message.clone_from(&end.message);
                result.expect.clone_from(&end.expect);
                result.iterations = end.iterations;
                result.usage = end.usage;
                result.cost = end.cost;
                result.duration_ms = end.duration_ms;
            }
            Event::LlmResponse(LlmResponse {
                iteration,
                usage,
                cost,
                ..
            }) if !result.finished => {
                result.usage.add(*usage);
                result.cost = result.cost.plus(*cost);
                result.iterations = result.iterations.max(*iteration);
            }
            Event::Git(Git { outcome }) => result.git = Some(outcome.clone()),
            Event::Note(Note { message }) => {
                if let Some(warning) = message.strip_prefix(crate::core::event::WARNING) {
                    result.warnings.push(warning.to_owned());
                }
            }
            Event::TaskOutput(TaskOutput {
                content: text,
                json,
            }) => {
                result.output = Some(text.clone());
                result.output_json.clone_from(json);
            }
            // `ybs resume`: the paused half's `task.finished` was not the
            // end; what follows adds to its totals.
            Event::TaskResumed(_) => result.finished = false,
            _ => {}
        }
    }

    fn result(&self) -> TaskResult {
        let mut result = self.result.clone();
        if !result.finished {
            result.duration_ms = self.last_ms.saturating_sub(result.started_ms);
        }
        let last_attempt = self.checks.iter().map(|(attempt, ..)| *attempt).max();
        result.failed_checks = self
            .checks
            .iter()
            .filter(|(attempt, passed, _)| Some(*attempt) == last_attempt && !passed)
            .map(|(.., check)| check.clone())
            .collect();
        result
    }
}

/// How many tasks ended in each status.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RunTotals {
    pub passed: usize,
    pub failed: usize,
    pub error: usize,
    pub paused: usize,
    /// Never started (docs/ci.md: the breaker, the budget, an interrupt).
    pub skipped: usize,
}

impl RunTotals {
    pub fn of<'a>(results: impl IntoIterator<Item = &'a TaskResult>) -> Self {
        let mut totals = Self::default();
        for result in results {
            totals.add(result.status);
        }
        totals
    }

    pub fn add(&mut self, status: Status) {
        match status {
            Status::Passed => self.passed += 1,
            Status::Failed => self.failed += 1,
            Status::Error => self.error += 1,
            Status::Paused => self.paused += 1,
            Status::Skipped => self.skipped += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.passed + self.failed + self.error + self.paused + self.skipped
    }
}

/// `3 tasks: 2 passed, 1 failed`: passed always, the others when non-zero.
impl std::fmt::Display for RunTotals {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let total = self.total();
        let noun = if total == 1 { "task" } else { "tasks" };
        write!(f, "{total} {noun}: {} passed", self.passed)?;
        for (count, word) in [
            (self.failed, "failed"),
            (self.error, "errored"),
            (self.paused, "paused"),
            (self.skipped, "skipped"),
        ] {
            if count > 0 {
                write!(f, ", {count} {word}")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata::{self, records_two_files};

    fn collect(records: &[EventRecord]) -> Vec<TaskResult> {
        let mut collector = ResultCollector::new();
        for record in records {
            collector.push(record);
        }
        collector.results()
    }

    #[test]
    fn routes_interleaved_tasks_in_start_order() {
        let results = collect(&records_two_files());
        let ids: Vec<_> = results.iter().map(|r| r.task.as_str()).collect();
        assert_eq!(ids, ["alpha", "beta", "gamma"]);
        assert_eq!(results[0].commit(), Some("89abcdef0123456789"));
        assert_eq!(results[1].cost, Cost::Unknown);
        assert_eq!(results[1].file, "tasks/b.yaml");
        assert_eq!(
            results[1].headline(),
            "checks_failed: check `builds` exited 1 (expected 0)"
        );
        assert_eq!(
            results[2].headline(),
            "provider_error: HTTP 500 <html>| bad gateway …"
        );
        assert_eq!(results[0].headline(), "completed");
        let totals = RunTotals::of(&results);
        assert_eq!(totals.to_string(), "3 tasks: 1 passed, 1 failed, 1 errored");
    }

    #[test]
    fn only_the_last_attempts_failures_count() {
        let mut retried = testdata::check("t", 3, "builds", 0, "ok");
        if let Event::CheckCompleted(check) = &mut retried.event {
            check.attempt = 2;
        }
        let results = collect(&[
            testdata::started("t", "t.yaml", 1),
            testdata::check("t", 2, "builds", 1, "boom"),
            retried,
            testdata::passed("t", 4),
        ]);
        assert!(results[0].failed_checks.is_empty());
    }

    #[test]
    fn unfinished_tasks_are_internal_errors() {
        let results = collect(&[testdata::started("t", "t.yaml", 100)]);
        assert_eq!(results[0].status, Status::Error);
        assert_eq!(results[0].reason, Reason::InternalError);
        assert!(!results[0].finished);
        assert_eq!(
            RunTotals::of(&results).to_string(),
            "1 task: 0 passed, 1 errored"
        );
    }

    #[test]
    fn describes_timeouts_and_signals() {
        let mut check = FailedCheck {
            name: "a`b".to_owned(),
            command: "x".to_owned(),
            exit_code: None,
            expected_exit: 0,
            timed_out: true,
            output_tail: String::new(),
            locations: Vec::new(),
        };
        assert_eq!(check.describe(), "check `a'b` timed out");
        check.timed_out = false;
        assert_eq!(
            check.describe(),
            "check `a'b` was killed by a signal (expected exit 0)"
        );
    }
}
