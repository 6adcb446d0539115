//! `OUT/junit.xml` (docs/outputs.md), written with quick-junit at the end of the
//! run: one `<testsuite>` per task file, one `<testcase>` per task.
//!
//! Status mapping: `passed` → success, `failed` → `<failure>`, `error` →
//! `<error>`, `paused` and `skipped` (never started) → `<skipped>`. Text from the model or tools goes
//! through [`neutralize_chars`] first and then quick-junit's `XmlString`,
//! so the file is well-formed whatever the text holds (docs/security.md S8).

use std::io;
use std::sync::Arc;
use std::time::Duration;

use quick_junit::{
    NonSuccessKind, Property, Report, TestCase, TestCaseStatus, TestRerun, TestSuite,
};

use crate::core::event::{EventRecord, EventSink};
use crate::core::ids::rfc3339;
use crate::core::outcome::Status;
use crate::core::text::tail;

use super::fsutil::with_path;
use super::log::neutralize_chars;
use super::outdir::OutDir;
use super::rates;
use super::results::{ResultCollector, TaskResult};
use super::scope::RunScope;

/// How much of a failing check's output goes into the XML, in bytes.
const CHECK_TAIL_BYTES: usize = 8 * 1024;

/// Collects every task's result; writes the JUnit XML at `finish()`.
#[derive(Debug)]
pub struct JunitSink {
    dir: Arc<OutDir>,
    name: String,
    scope: RunScope,
    results: ResultCollector,
}

impl JunitSink {
    /// Writes the file `name` in `dir`, through the held directory.
    pub fn new(dir: Arc<OutDir>, name: impl Into<String>) -> Self {
        Self {
            dir,
            name: name.into(),
            scope: RunScope::default(),
            results: ResultCollector::new(),
        }
    }

    /// Records the run's scope (its shard) in the report.
    #[must_use]
    pub fn with_scope(mut self, scope: RunScope) -> Self {
        self.scope = scope;
        self
    }
}

impl EventSink for JunitSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        self.results.push(record);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        let path = self.dir.path().join(&self.name);
        let xml = junit_xml(&self.results.results(), &self.scope)
            .map_err(|err| with_path(io::Error::other(err), &path))?;
        self.dir
            .write_atomic(None, &self.name, xml.as_bytes())
            .map(drop)
    }
}

/// The JUnit report of these results, as XML text.
pub fn junit_xml(
    results: &[TaskResult],
    scope: &RunScope,
) -> Result<String, quick_junit::SerializeError> {
    junit_report(results, scope).to_string()
}

/// The JUnit report of these results: suites by task file, in the order
/// each file's first task started. A shard's suites carry a `shard`
/// property (`2/8`); a shard with no tasks gets one empty suite, `ybs`,
/// that carries it, so the file still says which shard it is.
///
/// With `--models` the suites are one per model instead (property
/// `model`); with `--repeat` the runs of a task are one test case with
/// the verdict of them all and a `pass_rate` property (docs/outputs.md).
pub fn junit_report(results: &[TaskResult], scope: &RunScope) -> Report {
    let models = rates::has_models(results.iter().map(|result| result.task.as_str()));
    let repeated = rates::has_runs(results.iter().map(|result| result.task.as_str()));
    let mut files: Vec<(&str, Vec<&TaskResult>)> = Vec::new();
    for result in results {
        let key = if models { &result.model } else { &result.file };
        match files.iter_mut().find(|(file, _)| *file == key) {
            Some((_, members)) => members.push(result),
            None => files.push((key, vec![result])),
        }
    }
    let mut report = Report::new("ybs");
    let mut total_ms = 0;
    for (file, members) in files {
        let name = if models {
            file
        } else {
            suite_name(file, &members)
        };
        let mut suite = TestSuite::new(clean(name));
        let suite_ms: u64 = members.iter().map(|result| result.duration_ms).sum();
        total_ms += suite_ms;
        suite.set_time(Duration::from_millis(suite_ms));
        if let Some(started) = members.iter().map(|result| result.started_ms).min() {
            suite
                .extra
                .insert("timestamp".into(), rfc3339(started).into());
        }
        if models {
            suite.add_property(Property::new("model", clean(file)));
            let passed = members
                .iter()
                .filter(|result| result.status == Status::Passed)
                .count();
            suite.add_property(Property::new(
                "pass_rate",
                format!("{:.2}", rates::ratio(passed, members.len())),
            ));
        } else {
            suite.add_property(Property::new("file", clean(file)));
        }
        if let Some(shard) = scope.shard {
            suite.add_property(Property::new("shard", shard.to_string()));
        }
        if repeated {
            let runs = rates::rates(
                members
                    .iter()
                    .map(|result| (result.task.as_str(), result.status)),
                scope.min_pass_rate,
            );
            suite.add_test_cases(runs.iter().map(|rate| {
                let runs: Vec<&TaskResult> =
                    rate.members.iter().map(|&index| members[index]).collect();
                repeated_case(rate, &runs, scope.min_pass_rate)
            }));
        } else {
            suite.add_test_cases(members.into_iter().map(test_case));
        }
        report.add_test_suite(suite);
    }
    if let (Some(shard), true) = (scope.shard, results.is_empty()) {
        let mut suite = TestSuite::new("ybs");
        suite.add_property(Property::new("shard", shard.to_string()));
        report.add_test_suite(suite);
    }
    report.set_time(Duration::from_millis(total_ms));
    report
}

/// The runs of one task under `--repeat`, as one test case: passed,
/// flaky (a success with a `<flakyFailure>` per run that did not pass),
/// or the first run that did not pass; `pass_rate` and each run's end
/// as properties.
fn repeated_case(rate: &rates::Rate, runs: &[&TaskResult], min_pass_rate: Option<f64>) -> TestCase {
    let first = runs[0];
    let failing = runs.iter().find(|run| run.status != Status::Passed);
    let status = match (rate.verdict, failing) {
        (rates::Verdict::Passed | rates::Verdict::Flaky, _) | (_, None) => {
            let mut status = TestCaseStatus::success();
            for run in runs.iter().filter(|run| run.status != Status::Passed) {
                let kind = if run.status == Status::Error {
                    NonSuccessKind::Error
                } else {
                    NonSuccessKind::Failure
                };
                let mut rerun = TestRerun::new(kind);
                rerun.set_message(clean(&format!("{}: {}", run.task, run.headline())));
                rerun.set_type(run.reason.as_str());
                rerun.set_time(Duration::from_millis(run.duration_ms));
                status.add_rerun(rerun);
            }
            status
        }
        (_, Some(run)) => {
            let mut status = self::status(run);
            if rate.mixed {
                let min = min_pass_rate.unwrap_or(1.0);
                status.set_message(clean(&format!(
                    "pass rate {} is below --min-pass-rate {min}",
                    rate.describe()
                )));
            }
            status
        }
    };
    let mut case = TestCase::new(clean(&rate.key), status);
    case.set_classname(clean(&first.suite));
    let duration_ms: u64 = runs.iter().map(|run| run.duration_ms).sum();
    case.set_time(Duration::from_millis(duration_ms));
    let mut cost = crate::core::usage::Cost::Usd(0.0);
    let mut input = 0u64;
    let mut output = 0u64;
    for run in runs {
        cost = cost.plus(run.cost);
        input = input.saturating_add(run.usage.input_tokens);
        output = output.saturating_add(run.usage.output_tokens);
    }
    let mut properties = vec![
        ("task", rates::base_id(&rate.key).to_owned()),
        ("status", rate.verdict.to_string()),
        ("pass_rate", format!("{:.2}", rate.rate())),
        ("runs", rate.runs.to_string()),
        ("passed", rate.passed.to_string()),
        ("provider", first.provider.clone()),
        ("model", first.model.clone()),
        ("input_tokens", input.to_string()),
        ("output_tokens", output.to_string()),
        (
            "cost",
            cost.usd()
                .map_or_else(|| "unknown".to_owned(), |usd| usd.to_string()),
        ),
        ("duration_ms", duration_ms.to_string()),
    ];
    if let Some(min) = min_pass_rate {
        properties.push(("min_pass_rate", min.to_string()));
    }
    for run in runs {
        properties.push((
            "run",
            format!("{}: {} ({})", run.task, run.status, run.reason),
        ));
    }
    case.add_properties(
        properties
            .into_iter()
            .map(|(name, value)| Property::new(name, clean(&value))),
    );
    let out: String = runs
        .iter()
        .map(|run| format!("{}: {} ({})\n", run.task, run.status, run.reason))
        .collect();
    case.set_system_out(clean(&out));
    case
}

fn suite_name<'a>(file: &'a str, members: &[&'a TaskResult]) -> &'a str {
    members
        .iter()
        .map(|result| result.suite.as_str())
        .find(|suite| !suite.is_empty())
        .unwrap_or(file)
}

fn test_case(result: &TaskResult) -> TestCase {
    let mut case = TestCase::new(clean(&result.task), status(result));
    case.set_classname(clean(&result.suite));
    case.set_time(Duration::from_millis(result.duration_ms));
    let cost = result
        .cost
        .usd()
        .map_or_else(|| "unknown".to_owned(), |usd| usd.to_string());
    let mut properties = vec![
        ("task", result.task.clone()),
        ("status", result.status.to_string()),
        ("reason", result.reason.to_string()),
        ("provider", result.provider.clone()),
        ("model", result.model.clone()),
        ("iterations", result.iterations.to_string()),
        ("input_tokens", result.usage.input_tokens.to_string()),
        ("output_tokens", result.usage.output_tokens.to_string()),
        ("cost", cost),
        ("duration_ms", result.duration_ms.to_string()),
    ];
    if let Some(commit) = result.commit() {
        properties.push(("commit", commit.to_owned()));
    }
    if let Some(salvage) = result.salvage_ref() {
        properties.push(("salvage_ref", salvage.to_owned()));
    }
    if result.expect != "pass" {
        properties.push(("expect", result.expect.clone()));
    }
    if let Some(sandbox) = &result.sandbox {
        properties.push(("sandbox", sandbox.describe()));
    }
    if result.dry_run {
        properties.push(("dry_run", "true".to_owned()));
    }
    case.add_properties(
        properties
            .into_iter()
            .map(|(name, value)| Property::new(name, clean(&value))),
    );
    let mut out = String::new();
    if result.dry_run {
        out.push_str("dry run: tool calls were decided and recorded, not executed; no command or check ran; nothing was committed\n");
    }
    if let Some(git) = &result.git {
        out.push_str(&format!("git: {}\n", git.note));
    }
    // The answer, as `OUT/<task>/output.md` holds it.
    if let Some(answer) = result
        .output
        .as_deref()
        .filter(|text| !text.trim().is_empty())
    {
        if !out.is_empty() {
            out.push('\n');
        }
        out.push_str(answer.trim_end());
        out.push('\n');
    }
    if !out.is_empty() {
        case.set_system_out(clean(&out));
    }
    case
}

fn status(result: &TaskResult) -> TestCaseStatus {
    let mut status = match result.status {
        Status::Passed => return TestCaseStatus::success(),
        Status::Failed => TestCaseStatus::non_success(NonSuccessKind::Failure),
        Status::Error => TestCaseStatus::non_success(NonSuccessKind::Error),
        Status::Paused | Status::Skipped => TestCaseStatus::skipped(),
    };
    let headline = match result.status {
        // `paused: 2 pending calls`; the calls are in the description.
        Status::Paused => format!(
            "paused: {}",
            result
                .message
                .as_deref()
                .and_then(|message| message.split(':').next())
                .unwrap_or("pending calls")
        ),
        _ => result.headline(),
    };
    status.set_message(clean(&headline));
    status.set_type(result.reason.as_str());
    let text = description(result);
    if !text.is_empty() {
        status.set_description(clean(&text));
    }
    status
}

/// The text of a failure: the task's message, then each failing check
/// with its command and the tail of its output.
fn description(result: &TaskResult) -> String {
    let mut text = String::new();
    if let Some(message) = &result.message {
        text.push_str(message.trim_end());
        text.push('\n');
    }
    for check in &result.failed_checks {
        text.push_str(&format!(
            "\n{}\n$ {}\n{}",
            check.describe(),
            check.command,
            tail(&check.output_tail, CHECK_TAIL_BYTES)
        ));
        if !text.ends_with('\n') {
            text.push('\n');
        }
    }
    text
}

fn clean(text: &str) -> String {
    neutralize_chars(text)
}

#[cfg(test)]
mod tests {
    use quick_junit::{Report, TestCaseStatus};

    use super::*;
    use crate::core::outcome::Reason;
    use crate::report::testdata::{self, records_two_files};

    fn run(records: &[EventRecord]) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out/junit.xml");
        let out = OutDir::open(&dir.path().join("out"), dir.path()).unwrap();
        let mut sink = JunitSink::new(out, "junit.xml");
        for record in records {
            sink.event(record).unwrap();
        }
        sink.finish().unwrap();
        let xml = std::fs::read_to_string(&path).unwrap();
        (dir, xml)
    }

    fn property<'a>(case: &'a quick_junit::TestCase, name: &str) -> Option<&'a str> {
        case.properties
            .iter()
            .find(|property| property.name.as_str() == name)
            .map(|property| property.value.as_str())
    }

    #[test]
    fn one_suite_per_file_one_case_per_task() {
        let (_dir, xml) = run(&records_two_files());
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.tests, 3);
        assert_eq!(report.failures, 1);
        assert_eq!(report.errors, 1);
        let suites: Vec<_> = report.test_suites.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(suites, ["a", "b"]);
        let a = &report.test_suites[0];
        let cases: Vec<_> = a.test_cases.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(cases, ["alpha", "gamma"]);
        assert_eq!(a.test_cases[0].classname.as_deref(), Some("a"));
        assert_eq!(a.test_cases[0].time, Some(Duration::from_millis(61_500)));
        assert!(matches!(
            a.test_cases[0].status,
            TestCaseStatus::Success { .. }
        ));
        assert_eq!(
            property(&a.test_cases[0], "commit"),
            Some("89abcdef0123456789")
        );
        assert_eq!(property(&a.test_cases[0], "cost"), Some("0.0123"));
        assert_eq!(property(&a.test_cases[0], "input_tokens"), Some("1200"));
        assert_eq!(property(&a.test_cases[0], "model"), Some("gpt-4.1-mini"));
        assert_eq!(a.properties[0].value.as_str(), "tasks/a.yaml");
    }

    #[test]
    fn failures_name_the_check_and_carry_its_output() {
        let (_dir, xml) = run(&records_two_files());
        let report = Report::deserialize_from_str(&xml).unwrap();
        let beta = &report.test_suites[1].test_cases[0];
        assert_eq!(property(beta, "cost"), Some("unknown"));
        assert_eq!(property(beta, "commit"), None);
        let TestCaseStatus::NonSuccess {
            kind,
            message,
            ty,
            description,
            ..
        } = &beta.status
        else {
            panic!("{:?}", beta.status);
        };
        assert_eq!(*kind, NonSuccessKind::Failure);
        assert_eq!(
            message.as_deref(),
            Some("checks_failed: check `builds` exited 1 (expected 0)")
        );
        assert_eq!(ty.as_deref(), Some("checks_failed"));
        let description = description.as_deref().unwrap();
        assert!(description.contains("$ cargo build"), "{description}");
        assert!(description.contains("]]> <b>&amp;</b>"), "{description}");
        assert!(!description.contains('\x1b') && !description.contains('\0'));

        let gamma = &report.test_suites[0].test_cases[1];
        let TestCaseStatus::NonSuccess { kind, message, .. } = &gamma.status else {
            panic!("{:?}", gamma.status);
        };
        assert_eq!(*kind, NonSuccessKind::Error);
        assert_eq!(
            message.as_deref(),
            Some("provider_error: HTTP 500 <html>| bad gateway …")
        );
    }

    #[test]
    fn paused_tasks_are_skipped() {
        let (_dir, xml) = run(&[
            testdata::started("p", "p.yaml", 1),
            testdata::finished(
                "p",
                2,
                Status::Paused,
                Reason::AwaitingInput,
                Some("waiting on call-7"),
                crate::core::usage::Cost::Unknown,
            ),
        ]);
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.test_suites[0].skipped, 1);
        let TestCaseStatus::Skipped { message, .. } = &report.test_suites[0].test_cases[0].status
        else {
            panic!();
        };
        assert_eq!(message.as_deref(), Some("paused: waiting on call-7"));
    }

    #[test]
    fn hostile_text_stays_well_formed_xml() {
        let nasty =
            "\x1b[31mred\x1b[0m \0 \x07 ]]> ]]]]><![CDATA[ <x a=\"&\"> \u{fffe}\u{ffff} \u{202e}";
        let mut records = vec![testdata::started("x", "x.yaml", 1)];
        records.push(testdata::check("x", 2, nasty, 1, nasty));
        records.push(testdata::finished(
            "x",
            3,
            Status::Failed,
            Reason::ChecksFailed,
            Some(nasty),
            crate::core::usage::Cost::Unknown,
        ));
        let (dir, xml) = run(&records);
        Report::deserialize_from_str(&xml).unwrap();
        assert!(!xml.contains('\x1b') && !xml.contains('\0') && !xml.contains('\u{fffe}'));
        // An independent parser agrees, where one is installed.
        let python = std::process::Command::new("python3")
            .arg("-c")
            .arg("import xml.dom.minidom,sys; xml.dom.minidom.parse(sys.argv[1])")
            .arg(dir.path().join("out/junit.xml"))
            .output();
        if let Ok(output) = python {
            assert!(
                output.status.success(),
                "{}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
    }

    #[test]
    fn an_empty_run_is_still_a_report() {
        let (_dir, xml) = run(&[]);
        let report = Report::deserialize_from_str(&xml).unwrap();
        assert_eq!(report.tests, 0);
    }

    #[test]
    fn shards_are_recorded_even_when_empty() {
        let shard = Some("2/8".parse().unwrap());
        let report = junit_report(&[], &RunScope::shard(shard));
        assert_eq!(report.tests, 0);
        assert_eq!(report.test_suites.len(), 1);
        assert_eq!(report.test_suites[0].properties[0].name.as_str(), "shard");
        assert_eq!(report.test_suites[0].properties[0].value.as_str(), "2/8");
        let xml = junit_xml(&[], &RunScope::shard(shard)).unwrap();
        Report::deserialize_from_str(&xml).unwrap();

        let mut collector = ResultCollector::new();
        for record in records_two_files() {
            collector.push(&record);
        }
        let report = junit_report(&collector.results(), &RunScope::shard(shard));
        assert_eq!(report.test_suites.len(), 2);
        for suite in &report.test_suites {
            let shard = suite.properties.iter().find(|p| p.name.as_str() == "shard");
            assert_eq!(shard.map(|p| p.value.as_str()), Some("2/8"));
        }
    }
}
