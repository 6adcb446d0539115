//! The human view of the event stream: the console line of each event
//! that shows.

use crate::core::Status;
use crate::core::event::{
    CheckCompleted, Event, EventRecord, Git, Note, TaskFinished, TaskStarted, ToolCompleted,
    ToolDecided,
};

use crate::report::log::neutralize;

/// One console line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HumanLine {
    pub text: String,
    /// A task that did not pass: shown even with `--quiet`.
    pub failed: bool,
    /// A task that did not pass: the `::error` title and message for
    /// GitHub Actions.
    pub annotation: Option<(String, String)>,
}

/// The console's line for `record`; `None` when it shows nothing.
/// `verbose`: every tool call, check, note and git step shows too.
pub fn human_line(record: &EventRecord, verbose: bool) -> Option<HumanLine> {
    let task = &record.task;
    let line = |text: String| {
        Some(HumanLine {
            text,
            failed: false,
            annotation: None,
        })
    };
    match &record.event {
        Event::TaskStarted(TaskStarted {
            provider, model, ..
        }) if verbose => line(format!(
            "RUN   {task}  ({}/{})",
            inline(provider),
            inline(model)
        )),
        Event::ToolDecided(ToolDecided {
            name,
            arguments,
            verdict,
            rule,
            ..
        }) if verbose => {
            let name = inline(&clip(name, 80));
            let args = inline(&clip(&arguments.to_string(), 160));
            line(format!("  → {name} {args}  [{verdict}: {}]", inline(rule)))
        }
        Event::ToolCompleted(ToolCompleted {
            ok,
            ran,
            duration_ms,
            truncated,
            output,
            ..
        }) if verbose => {
            let mark = if *ok { "✓" } else { "✗" };
            let first = output.lines().next().unwrap_or_default();
            let first = neutralize(&clip(first, 120));
            let note = match (*ran, *truncated) {
                (false, _) => " (not run)",
                (true, true) => " (truncated)",
                (true, false) => "",
            };
            line(format!("    {mark} {duration_ms}ms{note}  {first}"))
        }
        Event::CheckCompleted(CheckCompleted {
            name,
            passed,
            exit_code,
            ..
        }) if verbose => {
            let state = if *passed { "passed" } else { "FAILED" };
            let code = exit_code.map_or("none".to_owned(), |c| c.to_string());
            line(format!(
                "  check `{}`: {state} (exit {code})",
                neutralize(name)
            ))
        }
        Event::Note(Note { message })
            if verbose
                || message.starts_with(crate::core::event::HINT)
                || message.starts_with(crate::core::event::WARNING) =>
        {
            line(format!("  note: {}", neutralize(message)))
        }
        Event::Git(Git { outcome }) if verbose => {
            line(format!("  git: {}", neutralize(&outcome.note)))
        }
        Event::TaskFinished(end) => Some(finished_line(task, end)),
        _ => None,
    }
}

/// A task's last line: its status, reason and totals (and, when it did not
/// pass, its annotation).
fn finished_line(task: &str, end: &TaskFinished) -> HumanLine {
    let TaskFinished {
        status,
        reason,
        message,
        iterations,
        usage,
        cost,
        duration_ms,
        ..
    } = end;
    let label = match status {
        Status::Passed => "PASS ",
        Status::Failed => "FAIL ",
        Status::Error => "ERROR",
        Status::Paused => "PAUSE",
        Status::Skipped => "SKIP ",
    };
    let why = message
        .as_deref()
        .map(|m| format!("  {}", neutralize(&one_line(m))))
        .unwrap_or_default();
    #[expect(clippy::cast_precision_loss, reason = "display only")]
    let seconds = *duration_ms as f64 / 1000.0;
    // A task never started spent nothing: no totals, only why.
    let line = if *status == Status::Skipped {
        format!("{label} {task}  {reason}{why}")
    } else {
        format!(
            "{label} {task}  {reason}  {} · {} · cost {cost} · {seconds:.1}s{why}",
            crate::core::text::count_of(*iterations, "iteration"),
            crate::core::text::count_of(usage.total(), "token")
        )
    };
    let failed = *status != Status::Passed;
    let detail = message.as_deref().unwrap_or_default();
    HumanLine {
        text: line,
        failed,
        // A task never started is no error of its own: the one that
        // stopped the batch has its annotation.
        annotation: (failed && *status != Status::Skipped)
            .then(|| (format!("ybs {task}"), format!("{reason}: {detail}"))),
    }
}

/// `text` neutralised and kept on one line: a line break in a name or an
/// argument would otherwise start a line of its own in the log.
pub(super) fn inline(text: &str) -> String {
    neutralize(text).replace('\n', "\\n")
}

/// The first `max` characters of `text`, with `…` when cut.
pub(super) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((index, _)) => format!("{}…", &text[..index]),
        None => text.to_owned(),
    }
}

fn one_line(text: &str) -> String {
    let first = text.lines().next().unwrap_or_default();
    if text.lines().nth(1).is_some() {
        format!("{first} …")
    } else {
        first.to_owned()
    }
}
