//! `OUT/summary.md` (docs/outputs.md): a Markdown table of the run's tasks, notes
//! on each task that did not pass, and what happened in git. Appended to
//! `$GITHUB_STEP_SUMMARY` too when that is set.
//!
//! Text from the model or tools is either escaped inline (`|`, newlines,
//! markup and HTML characters) or fenced in a code block whose fence is
//! longer than any backtick run in it, so it cannot break the table or
//! inject links, images or HTML.

use crate::core::text::human_ms;
use std::fmt::Write as _;
use std::fs::OpenOptions;
use std::io::{self, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::PathBuf;
use std::sync::Arc;

use crate::core::event::{EventRecord, EventSink};
use crate::core::outcome::{Reason, Status};
use crate::core::text::{tail, truncate_middle};

use super::fsutil::with_path;
use super::log::neutralize_chars;
use super::outdir::OutDir;
use super::rates;
use super::results::{ResultCollector, RunTotals, TaskResult};
use super::scope::RunScope;

/// How much of a failing check's output the summary shows, in bytes.
/// GitHub caps a step summary at 1 MiB.
const CHECK_TAIL_BYTES: usize = 2 * 1024;
/// How much of a task's message the summary shows, in characters.
const MESSAGE_CHARS: usize = 2000;
/// How much of a task's answer the summary shows, in characters.
const ANSWER_CHARS: usize = 16_000;
/// Answers longer than this many lines are folded in `<details>`.
const ANSWER_LINES: usize = 20;

/// Collects every task's result; writes the summary at `finish()`.
#[derive(Debug)]
pub struct SummarySink {
    dir: Arc<OutDir>,
    name: String,
    github_step_summary: Option<PathBuf>,
    scope: RunScope,
    results: ResultCollector,
}

impl SummarySink {
    /// Writes `name` (normally `summary.md`) in `dir` and, when given, appends
    /// the same Markdown to `github_step_summary` (`$GITHUB_STEP_SUMMARY`).
    ///
    /// The file is written through the held directory `dir`; what the
    /// directory found tampered with is listed among the warnings.
    pub fn new(
        dir: Arc<OutDir>,
        name: impl Into<String>,
        github_step_summary: Option<PathBuf>,
    ) -> Self {
        Self {
            dir,
            name: name.into(),
            github_step_summary,
            scope: RunScope::default(),
            results: ResultCollector::new(),
        }
    }

    /// Records the run's scope (its shard, or the merged shards).
    #[must_use]
    pub fn with_scope(mut self, scope: RunScope) -> Self {
        self.scope = scope;
        self
    }
}

impl EventSink for SummarySink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        self.results.push(record);
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        let mut scope = self.scope.clone();
        scope.warnings.extend(
            self.dir
                .findings()
                .into_iter()
                .map(|finding| format!("output tampering: {finding}")),
        );
        let results = self.results.results();
        let markdown = summary_markdown(&results, &scope);
        let written = self
            .dir
            .write_atomic(None, &self.name, markdown.as_bytes())
            .map(drop);
        // For the next run's `--shard-by durations` (docs/ci.md).
        let durations = super::durations::Durations::of(&results);
        let written = written.and(
            self.dir
                .write_atomic(None, super::durations::DURATIONS_FILE, &durations.to_json())
                .map(drop),
        );
        // The runner's file: its own path, but never through a link.
        let appended = match &self.github_step_summary {
            Some(path) => OpenOptions::new()
                .create(true)
                .append(true)
                .custom_flags(nix::libc::O_NOFOLLOW)
                .open(path)
                .and_then(|mut file| file.write_all(markdown.as_bytes()))
                .map_err(|err| with_path(err, path)),
            None => Ok(()),
        };
        written.and(appended)
    }
}

/// The summary of these results, as Markdown.
pub fn summary_markdown(results: &[TaskResult], scope: &RunScope) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; the results are ignored below.
    let _ = write_summary(&mut out, results, scope);
    out
}

fn write_summary(out: &mut String, results: &[TaskResult], scope: &RunScope) -> std::fmt::Result {
    let run_ids: Vec<&str> = results.iter().map(|r| r.run_id.as_str()).collect();
    match run_ids.first() {
        Some(first) if !first.is_empty() && run_ids.iter().all(|id| id == first) => {
            writeln!(out, "# ybs run {}\n", code_span(first))?;
        }
        _ => writeln!(out, "# ybs run\n")?,
    }
    write_scope(out, results, scope)?;
    if results.iter().any(|result| result.dry_run) {
        writeln!(
            out,
            "**Dry run**: tool calls were decided and recorded, not executed; no command or check ran; nothing was committed.\n"
        )?;
    }
    writeln!(out, "{}\n", RunTotals::of(results))?;
    if results.is_empty() {
        return Ok(());
    }
    let mut usage = crate::core::Usage::default();
    for result in results {
        usage.add(result.usage);
    }
    writeln!(
        out,
        "Tokens {} · cost {} · time {}\n",
        tokens(usage),
        total_cost(results),
        human_ms(wall_ms(results)),
    )?;
    writeln!(
        out,
        "| task | status | reason | iterations | tokens | cost | time | commit |"
    )?;
    writeln!(out, "| --- | --- | --- | ---: | ---: | ---: | ---: | --- |")?;
    for result in results {
        let commit = result.commit().map_or_else(
            || "—".to_owned(),
            |commit| {
                let short: String = commit
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .take(12)
                    .collect();
                format!("`{short}`")
            },
        );
        writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            escape_inline(&result.task),
            result.status,
            result.reason,
            result.iterations,
            tokens(result.usage),
            result.cost,
            human_ms(result.duration_ms),
            commit,
        )?;
    }
    write_models(out, results)?;
    write_rates(out, results, scope)?;
    write_sandbox(out, results)?;
    write_warnings(out, results)?;
    write_answers(out, results)?;
    write_failures(out, results, scope.source_url.as_deref())?;
    write_git(out, results)
}

/// Tokens used, with the share of the input read from the provider's
/// prompt cache when there was any (`12,345 (62% of input cached)`).
fn tokens(usage: crate::core::Usage) -> String {
    let total = thousands(usage.total());
    match usage.cache_hit_share() {
        Some(share) if usage.cache_read_input_tokens > 0 => {
            format!("{total} ({:.0}% of input cached)", share * 100.0)
        }
        _ => total,
    }
}

/// The shard this run was, or the shards it merges, and any warning
/// about the run as a whole.
fn write_scope(out: &mut String, results: &[TaskResult], scope: &RunScope) -> std::fmt::Result {
    if let Some(shard) = scope.shard {
        let from = scope
            .shard_source
            .as_ref()
            .map(|source| format!(" ({})", escape_inline(&source.to_string())))
            .unwrap_or_default();
        if results.is_empty() {
            writeln!(out, "Shard {shard}{from}: no tasks fell in this shard.\n")?;
        } else {
            writeln!(out, "Shard {shard}{from}.\n")?;
        }
    }
    if !scope.merged_from.is_empty() {
        let dirs: Vec<String> = scope.merged_from.iter().map(|dir| code_span(dir)).collect();
        write!(out, "Merged from {}", dirs.join(", "))?;
        if !scope.merged_shards.is_empty() {
            let shards: Vec<String> = scope
                .merged_shards
                .iter()
                .map(ToString::to_string)
                .collect();
            write!(out, " (shards {})", shards.join(", "))?;
        }
        writeln!(out, ".\n")?;
    }
    for warning in &scope.warnings {
        writeln!(out, "⚠ {}\n", escape_inline(warning))?;
    }
    Ok(())
}

/// `--models`: the models side by side: pass rate, tokens, cost and the
/// time their tasks took.
fn write_models(out: &mut String, results: &[TaskResult]) -> std::fmt::Result {
    if !rates::has_models(results.iter().map(|result| result.task.as_str())) {
        return Ok(());
    }
    let mut models: Vec<(&str, Vec<TaskResult>)> = Vec::new();
    for result in results {
        match models.iter_mut().find(|(model, _)| *model == result.model) {
            Some((_, members)) => members.push(result.clone()),
            None => models.push((&result.model, vec![result.clone()])),
        }
    }
    writeln!(out, "\n## Models\n")?;
    writeln!(
        out,
        "| model | runs | passed | pass rate | tokens | cost | task time |"
    )?;
    writeln!(out, "| --- | ---: | ---: | ---: | ---: | ---: | ---: |")?;
    for (model, members) in &models {
        let passed = members
            .iter()
            .filter(|result| result.status == Status::Passed)
            .count();
        writeln!(
            out,
            "| {} | {} | {passed} | {} | {} | {} | {} |",
            escape_inline(model),
            members.len(),
            rates::percent(rates::ratio(passed, members.len())),
            thousands(
                members
                    .iter()
                    .fold(0u64, |sum, r| sum.saturating_add(r.usage.total()))
            ),
            total_cost(members),
            human_ms(
                members
                    .iter()
                    .fold(0u64, |sum, r| sum.saturating_add(r.duration_ms))
            ),
        )?;
    }
    Ok(())
}

/// `--repeat`: each task's runs, its pass rate and verdict (`flaky` when
/// some runs passed and no `--min-pass-rate` decided it).
fn write_rates(out: &mut String, results: &[TaskResult], scope: &RunScope) -> std::fmt::Result {
    if !rates::has_runs(results.iter().map(|result| result.task.as_str())) {
        return Ok(());
    }
    let rates = rates::rates(
        results
            .iter()
            .map(|result| (result.task.as_str(), result.status)),
        scope.min_pass_rate,
    );
    writeln!(out, "\n## Pass rates\n")?;
    if let Some(min) = scope.min_pass_rate {
        writeln!(
            out,
            "`--min-pass-rate {min}`: a task that passed some runs passes at this rate or above, and fails below it.\n"
        )?;
    }
    writeln!(out, "| task | runs | passed | pass rate | status |")?;
    writeln!(out, "| --- | ---: | ---: | ---: | --- |")?;
    for rate in &rates {
        let status = match (rate.verdict, rate.mixed) {
            (rates::Verdict::Flaky, _) => "**flaky**".to_owned(),
            (verdict, true) => format!("{verdict} (flaky)"),
            (verdict, false) => verdict.to_string(),
        };
        writeln!(
            out,
            "| {} | {} | {} | {} | {status} |",
            escape_inline(&rate.key),
            rate.runs,
            rate.passed,
            rates::percent(rate.rate()),
        )?;
    }
    Ok(())
}

/// Which tasks ran their shell commands, external tools and checks
/// without kernel confinement (docs/security.md S1): always said, never hidden.
fn write_sandbox(out: &mut String, results: &[TaskResult]) -> std::fmt::Result {
    let unconfined: Vec<_> = results
        .iter()
        .filter_map(|result| Some((result, result.sandbox.as_ref()?)))
        .filter(|(_, sandbox)| !sandbox.complete())
        .collect();
    if unconfined.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n## Sandbox\n")?;
    for (result, sandbox) in unconfined {
        writeln!(
            out,
            "- ⚠ {}: sandbox {}",
            escape_inline(&result.task),
            escape_inline(&sandbox.describe())
        )?;
    }
    Ok(())
}

/// What tasks declared and went on without (a tool or MCP server that
/// could not start): always said, never only in the transcript.
fn write_warnings(out: &mut String, results: &[TaskResult]) -> std::fmt::Result {
    if results.iter().all(|result| result.warnings.is_empty()) {
        return Ok(());
    }
    writeln!(out, "\n## Warnings\n")?;
    for result in results {
        for warning in &result.warnings {
            writeln!(
                out,
                "- ⚠ {}: {}",
                escape_inline(&result.task),
                escape_inline(&truncate_middle(warning, MESSAGE_CHARS).0)
            )?;
        }
    }
    Ok(())
}

/// Each task's final answer (`OUT/<task>/output.md`), fenced so model
/// text cannot become markup; a long one is folded in `<details>`, and
/// one longer than [`ANSWER_CHARS`] is cut in the middle (the file has it
/// whole). Under an output contract the JSON value is shown instead.
fn write_answers(out: &mut String, results: &[TaskResult]) -> std::fmt::Result {
    let answered: Vec<_> = results
        .iter()
        .filter_map(|result| Some((result, result.output.as_deref()?)))
        .filter(|(_, text)| !text.trim().is_empty())
        .collect();
    if answered.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n## Answers")?;
    for (result, text) in answered {
        writeln!(out, "\n### {}\n", escape_inline(&result.task))?;
        let (shown, info) = match &result.output_json {
            Some(value) => (
                serde_json::to_string_pretty(value).unwrap_or_else(|_| text.to_owned()),
                "json",
            ),
            None => (text.to_owned(), "text"),
        };
        let (cut, was_cut) = truncate_middle(shown.trim_end(), ANSWER_CHARS);
        let block = fenced_as(&cut, info);
        let lines = shown.lines().count();
        if lines > ANSWER_LINES || was_cut {
            writeln!(
                out,
                "<details><summary>{lines} lines{}</summary>\n\n{block}\n\n</details>",
                if was_cut {
                    ", cut in the middle: the whole answer is in output.md"
                } else {
                    ""
                }
            )?;
        } else {
            writeln!(out, "{block}")?;
        }
    }
    Ok(())
}

fn write_failures(
    out: &mut String,
    results: &[TaskResult],
    source_url: Option<&str>,
) -> std::fmt::Result {
    let failures: Vec<_> = results
        .iter()
        .filter(|result| result.status != Status::Passed)
        .collect();
    if failures.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n## Tasks that did not pass")?;
    for result in failures {
        writeln!(
            out,
            "\n### {}: {} ({})\n",
            escape_inline(&result.task),
            result.status,
            result.reason
        )?;
        if let Some(salvage) = result.salvage_ref() {
            writeln!(out, "Changes saved at {}.\n", code_span(salvage))?;
        }
        let mut text = result.headline();
        let detail = text
            .split_once(": ")
            .map_or("", |(_, rest)| rest)
            .to_owned();
        if let Some(message) = result.message.as_ref().filter(|m| m.trim() != detail) {
            text.push_str("\n\n");
            text.push_str(&truncate_middle(message.trim_end(), MESSAGE_CHARS).0);
        }
        // One failing check is already named by the headline.
        let named = result.reason == Reason::ChecksFailed && result.failed_checks.len() == 1;
        for check in &result.failed_checks {
            text.push_str("\n\n");
            if !named {
                text.push_str(&check.describe());
                text.push('\n');
            }
            let _ = write!(
                text,
                "$ {}\n{}",
                check.command,
                tail(check.output_tail.trim_end(), CHECK_TAIL_BYTES)
            );
        }
        writeln!(out, "{}", fenced(&text))?;
        write_locations(out, result, source_url)?;
    }
    Ok(())
}

/// Where the failing checks' output points (docs/ci.md#annotations-on-the-failing-line):
/// one line each, a link to the line under GitHub Actions.
fn write_locations(
    out: &mut String,
    result: &TaskResult,
    source_url: Option<&str>,
) -> std::fmt::Result {
    let mut first = true;
    for check in &result.failed_checks {
        for location in &check.locations {
            if first {
                writeln!(out, "\nWhere the failing checks point:\n")?;
                first = false;
            }
            let place = match location.column {
                Some(column) => format!("{}:{}:{column}", location.file, location.line),
                None => format!("{}:{}", location.file, location.line),
            };
            let place = match source_url {
                Some(base) => format!(
                    "[{}]({base}{}#L{})",
                    code_span(&place),
                    url_path(&location.file),
                    location.line
                ),
                None => code_span(&place),
            };
            writeln!(
                out,
                "- {place} {} ({})",
                escape_inline(&location.message),
                code_span(&check.name)
            )?;
        }
    }
    Ok(())
}

/// A repository path in a URL: every byte outside the unreserved set
/// and `/` percent-encoded.
fn url_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'/' | b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

fn write_git(out: &mut String, results: &[TaskResult]) -> std::fmt::Result {
    let with_git: Vec<_> = results
        .iter()
        .filter(|result| result.git.is_some())
        .collect();
    if with_git.is_empty() {
        return Ok(());
    }
    writeln!(out, "\n## Git\n")?;
    for result in with_git {
        let Some(git) = &result.git else { continue };
        write!(
            out,
            "- {}: {}",
            escape_inline(&result.task),
            escape_inline(&git.note)
        )?;
        // The note usually names them already; say them once.
        if let Some(branch) = git
            .branch
            .as_ref()
            .filter(|b| !git.note.contains(b.as_str()))
        {
            write!(out, " on branch {}", code_span(branch))?;
        }
        if let Some(salvage) = git
            .salvage_ref
            .as_ref()
            .filter(|r| !git.note.contains(r.as_str()))
        {
            write!(out, "; changes saved at {}", code_span(salvage))?;
        }
        writeln!(out)?;
    }
    Ok(())
}

/// Text safe inside a Markdown paragraph or table cell: one line, with the
/// characters that start markup, links, images, HTML or entities escaped.
fn escape_inline(text: &str) -> String {
    let text = neutralize_chars(text);
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\t' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '&' | '|' | '!' | '~' | '#' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

/// An inline code span that `text` cannot close; `|` escaped so it also
/// holds inside a table.
fn code_span(text: &str) -> String {
    let text = neutralize_chars(text).replace(['\n', '\t'], " ");
    let fence = "`".repeat(longest_run(&text, '`') + 1);
    let pad = if text.starts_with('`') || text.ends_with('`') {
        " "
    } else {
        ""
    };
    format!("{fence}{pad}{}{pad}{fence}", text.replace('|', "\\|"))
}

/// A fenced code block that `text` cannot close.
fn fenced(text: &str) -> String {
    fenced_as(text, "text")
}

/// [`fenced`] with another info string (`json`).
fn fenced_as(text: &str, info: &str) -> String {
    let text = neutralize_chars(text);
    let fence = "`".repeat((longest_run(&text, '`') + 1).max(3));
    format!("{fence}{info}\n{}\n{fence}", text.trim_end())
}

fn longest_run(text: &str, wanted: char) -> usize {
    let mut longest = 0;
    let mut current = 0;
    for c in text.chars() {
        current = if c == wanted { current + 1 } else { 0 };
        longest = longest.max(current);
    }
    longest
}

fn total_cost(results: &[TaskResult]) -> String {
    let known: f64 = results.iter().filter_map(|r| r.cost.usd()).sum();
    let unknown = results.iter().any(|r| r.cost.usd().is_none());
    let any_known = results.iter().any(|r| r.cost.usd().is_some());
    match (any_known, unknown) {
        (false, _) => "unknown".to_owned(),
        (true, false) => format!("${known:.4}"),
        (true, true) => format!("${known:.4} + unknown"),
    }
}

/// The wall-clock span of the run: parallel tasks overlap.
fn wall_ms(results: &[TaskResult]) -> u64 {
    let start = results.iter().map(|r| r.started_ms).min().unwrap_or(0);
    let end = results
        .iter()
        .map(|r| r.started_ms.saturating_add(r.duration_ms))
        .max()
        .unwrap_or(0);
    end.saturating_sub(start)
}

/// `12345` → `12,345`.
fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::usage::Cost;
    use crate::report::testdata::{self, records_two_files};

    fn run(records: &[EventRecord], step: bool) -> (tempfile::TempDir, String) {
        let dir = tempfile::tempdir().unwrap();
        let step_path = dir.path().join("step.md");
        std::fs::write(&step_path, "earlier step\n").unwrap();
        let out = OutDir::open(&dir.path().join("out"), dir.path()).unwrap();
        let mut sink = SummarySink::new(out, "summary.md", step.then(|| step_path.clone()));
        for record in records {
            sink.event(record).unwrap();
        }
        sink.finish().unwrap();
        let text = std::fs::read_to_string(dir.path().join("out/summary.md")).unwrap();
        (dir, text)
    }

    #[test]
    fn shards_and_merges_are_named() {
        let shard = Some("2/8".parse().unwrap());
        let text = summary_markdown(&[], &RunScope::shard(shard));
        assert!(
            text.contains("Shard 2/8: no tasks fell in this shard."),
            "{text}"
        );
        assert!(text.contains("0 tasks: 0 passed"), "{text}");
        let mut collector = ResultCollector::new();
        for record in records_two_files() {
            collector.push(&record);
        }
        let scope = RunScope {
            merged_from: vec!["out-1".to_owned(), "out-2".to_owned()],
            merged_shards: vec!["1/3".parse().unwrap(), "2/3".parse().unwrap()],
            warnings: vec!["shard 3/3 is missing".to_owned()],
            ..RunScope::default()
        };
        let text = summary_markdown(&collector.results(), &scope);
        assert!(
            text.contains("Merged from `out-1`, `out-2` (shards 1/3, 2/3)."),
            "{text}"
        );
        assert!(text.contains("⚠ shard 3/3 is missing"), "{text}");
    }

    #[test]
    fn table_totals_and_notes() {
        let (_dir, text) = run(&records_two_files(), false);
        let lines: Vec<_> = text.lines().collect();
        assert_eq!(lines[0], "# ybs run `20261122T155213Z-3f9a1c`");
        assert!(
            lines.contains(&"3 tasks: 1 passed, 1 failed, 1 errored"),
            "{text}"
        );
        assert!(
            lines.contains(
                &"| alpha | passed | completed | 2 | 1,234 | $0.0123 | 1m 01s | `89abcdef0123` |"
            ),
            "{text}"
        );
        assert!(
            lines.contains(&"| beta | failed | checks_failed | 2 | 1,234 | unknown | 1m 01s | — |"),
            "{text}"
        );
        assert!(
            text.contains("Tokens 3,702 · cost $0.0123 + unknown · time 1m 01s"),
            "{text}"
        );
        assert!(text.contains("### beta: failed (checks_failed)"), "{text}");
        assert!(
            text.contains("checks_failed: check `builds` exited 1 (expected 0)\n\n1 check failed\n\n$ cargo build\nerror: nul"),
            "{text}"
        );
        assert!(
            text.contains("- alpha: committed 1 file on branch `main`"),
            "{text}"
        );
        assert!(
            text.contains("- beta: changes left uncommitted in /repo"),
            "{text}"
        );
        // Every table row has exactly nine unescaped pipes.
        for row in lines.iter().filter(|line| line.starts_with("| ")) {
            let pipes = row.matches('|').count() - row.matches("\\|").count();
            assert_eq!(pipes, 9, "{row}");
        }
    }

    #[test]
    fn hostile_text_is_fenced_or_escaped() {
        let (_dir, text) = run(&records_two_files(), false);
        assert!(!text.contains('\x1b') && !text.contains('\0'));
        // gamma's message holds `<html>|` and a newline: fenced, unchanged.
        assert!(text.contains("```text\nprovider_error: HTTP 500 <html>| bad gateway …\n\nHTTP 500 <html>| bad gateway\nretry later\n```"), "{text}");
        // A fence inside the output cannot close the block.
        let tail = "```\n<img src=x onerror=alert(1)>\n````";
        let records = [
            testdata::started("t", "t.yaml", 1),
            testdata::check("t", 2, "b", 1, tail),
            testdata::finished(
                "t",
                3,
                Status::Failed,
                Reason::ChecksFailed,
                None,
                Cost::Unknown,
            ),
        ];
        let (_dir, text) = run(&records, false);
        assert!(text.contains("`````text\n"), "{text}");
        assert!(text.trim_end().ends_with("````\n`````"), "{text}");
    }

    #[test]
    fn inline_escaping() {
        assert_eq!(escape_inline("a|b\nc"), "a\\|b c");
        assert_eq!(
            escape_inline("![x](http://e) <b>&amp;"),
            "\\!\\[x\\](http://e) \\<b\\>\\&amp;"
        );
        assert_eq!(code_span("a`b|c"), "``a`b\\|c``");
        assert_eq!(code_span("`x"), "`` `x ``");
    }

    #[test]
    fn appends_to_github_step_summary() {
        let (dir, text) = run(&records_two_files(), true);
        let step = std::fs::read_to_string(dir.path().join("step.md")).unwrap();
        assert_eq!(step, format!("earlier step\n{text}"));
    }

    #[test]
    fn salvage_refs_are_named() {
        let mut git = testdata::record(
            "t",
            2,
            crate::core::event::Event::Git(crate::core::event::Git {
                outcome: crate::core::event::GitOutcome {
                    salvage_ref: Some("refs/ybs/salvage/run/t".to_owned()),
                    note: "changes kept in place".to_owned(),
                    ..Default::default()
                },
            }),
        );
        git.ts_ms = 2;
        let records = [
            testdata::started("t", "t.yaml", 1),
            git,
            testdata::finished(
                "t",
                3,
                Status::Failed,
                Reason::MaxIterations,
                None,
                Cost::Usd(0.5),
            ),
        ];
        let (_dir, text) = run(&records, false);
        assert!(
            text.contains("Changes saved at `refs/ybs/salvage/run/t`."),
            "{text}"
        );
        assert!(
            text.contains("; changes saved at `refs/ybs/salvage/run/t`"),
            "{text}"
        );
        assert!(text.contains("1 task: 0 passed, 1 failed"), "{text}");
    }

    #[test]
    fn formats() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(human_ms(400), "0.4s");
        assert_eq!(human_ms(12_345), "12.3s");
        assert_eq!(human_ms(245_000), "4m 05s");
        assert_eq!(human_ms(3_720_000), "1h 02m");
    }
}
