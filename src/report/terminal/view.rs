//! The live view of a run (docs/progress.md), read from the event stream:
//! what each running task is doing now ([`TaskActivity`], one progress
//! bar's text) and the lines of a plain log ([`LogView`]: task started,
//! each tool call on one line with its verdict and duration, checks, the
//! result). Nothing here writes: the CLI prints.

use std::collections::HashMap;

use crate::core::event::{
    CheckCompleted, Event, EventRecord, Git, LlmResponse, LlmRetry, MessageAppended, Note,
    ToolCompleted, ToolDecided,
};
use crate::core::{Cost, Message};

use super::lines::{HumanLine, clip, human_line, inline};
use crate::report::log::neutralize;

/// What one running task has done and is doing, for its progress bar.
#[derive(Debug, Clone)]
pub struct TaskActivity {
    /// The task's `limits.max_iterations`, when known.
    pub max_steps: Option<u32>,
    /// Model answers received.
    pub step: u32,
    pub tokens: u64,
    pub cost: Cost,
    doing: Doing,
}

#[derive(Debug, Clone, PartialEq)]
enum Doing {
    Model,
    Retry(u32),
    Tool(String),
    Finishing,
    Check(String),
    Git,
}

impl TaskActivity {
    pub fn new(max_steps: Option<u32>) -> Self {
        Self {
            max_steps,
            step: 0,
            tokens: 0,
            cost: Cost::Usd(0.0),
            doing: Doing::Model,
        }
    }

    /// Takes in one event of the task.
    pub fn record(&mut self, event: &Event) {
        match event {
            Event::LlmResponse(LlmResponse {
                iteration,
                usage,
                cost,
                tool_calls,
                ..
            }) => {
                self.step = self.step.max(*iteration);
                self.tokens = self.tokens.saturating_add(usage.total());
                self.cost = self.cost.plus(*cost);
                self.doing = if *tool_calls == 0 {
                    Doing::Finishing
                } else {
                    Doing::Model
                };
            }
            Event::LlmRetry(LlmRetry { attempt, .. }) => self.doing = Doing::Retry(*attempt),
            Event::ToolDecided(ToolDecided { name, .. }) => {
                self.doing = Doing::Tool(inline(&clip(name, 40)))
            }
            Event::ToolCompleted(_) => self.doing = Doing::Model,
            Event::CheckCompleted(CheckCompleted { name, .. }) => {
                self.doing = Doing::Check(neutralize(&clip(name, 40)));
            }
            Event::Git(_) => self.doing = Doing::Git,
            _ => {}
        }
    }

    /// `step 2/25 · 1840 tokens · cost $0.0012 · run_shell`.
    pub fn status(&self) -> String {
        let max = self
            .max_steps
            .map_or_else(|| "?".to_owned(), |max| max.to_string());
        let doing = match &self.doing {
            Doing::Model => "waiting for the model".to_owned(),
            Doing::Retry(attempt) => format!("retrying the model (attempt {attempt})"),
            Doing::Tool(name) => name.clone(),
            Doing::Finishing => "checks".to_owned(),
            Doing::Check(name) => format!("check `{name}` done"),
            Doing::Git => "git".to_owned(),
        };
        format!(
            "step {}/{max} · {} tokens · cost {} · {doing}",
            self.step, self.tokens, self.cost
        )
    }
}

/// A tool call policy decided, waiting for its result.
#[derive(Debug)]
struct Decided {
    name: String,
    arguments: String,
    verdict: String,
    rule: String,
}

/// The lines of a plain log, one task's lines in order. Without
/// `verbose`: task started, one line per tool call (verdict and
/// duration), each check, the result. With it, also the first line of
/// each tool's output, notes, git, and the model's text.
#[derive(Debug, Default)]
pub struct LogView {
    verbose: bool,
    decided: HashMap<(String, String), Decided>,
    /// Per task: lines of the model's current turn already shown as they
    /// streamed in; its `message` shows the rest.
    streamed: HashMap<String, usize>,
}

impl LogView {
    pub fn new(verbose: bool) -> Self {
        Self {
            verbose,
            decided: HashMap::new(),
            streamed: HashMap::new(),
        }
    }

    /// A whole line of `task`'s model text as it streams in (`-v` only).
    pub fn streamed_line(&mut self, task: &str, text: &str) -> Option<HumanLine> {
        if !self.verbose {
            return None;
        }
        *self.streamed.entry(task.to_owned()).or_default() += 1;
        model_line(task, text)
    }

    /// A call's line: its decision (kept from `tool.decided`), its mark,
    /// time and, with -v, the first line of its output.
    fn tool_completed(&mut self, record: &EventRecord, done: &ToolCompleted) -> Vec<HumanLine> {
        let task = &record.task;
        let decided = self.decided.remove(&(task.clone(), done.call_id.clone()));
        let (name, arguments, decision) = match &decided {
            Some(d) => (
                d.name.clone(),
                format!(" {}", d.arguments),
                format!("  [{}: {}]", d.verdict, d.rule),
            ),
            None => (inline(&clip(&done.name, 80)), String::new(), String::new()),
        };
        let mark = if done.ok { "✓" } else { "✗" };
        let note = match (done.ran, done.truncated) {
            (false, _) => " (not run)",
            (true, true) => " (truncated)",
            (true, false) => "",
        };
        let first = if self.verbose {
            let first = done.output.lines().next().unwrap_or_default();
            format!("  {}", neutralize(&clip(first, 120)))
        } else {
            String::new()
        };
        vec![plain(format!(
            "  {task} · {mark} {name}{arguments}{decision} {}ms{note}{first}",
            done.duration_ms
        ))]
    }

    /// The lines `record` adds to the log (none for most events).
    pub fn lines(&mut self, record: &EventRecord) -> Vec<HumanLine> {
        let task = &record.task;
        let line = plain;
        match &record.event {
            Event::TaskStarted(_) => human_line(record, true).into_iter().collect(),
            Event::ToolDecided(ToolDecided {
                call_id,
                name,
                arguments,
                verdict,
                rule,
                ..
            }) => {
                self.decided.insert(
                    (task.clone(), call_id.clone()),
                    Decided {
                        name: inline(&clip(name, 80)),
                        arguments: inline(&clip(&arguments.to_string(), 160)),
                        verdict: inline(verdict),
                        rule: inline(rule),
                    },
                );
                Vec::new()
            }
            Event::ToolCompleted(done) => self.tool_completed(record, done),
            Event::CheckCompleted(CheckCompleted {
                name,
                passed,
                exit_code,
                duration_ms,
                timed_out,
                ..
            }) => {
                let state = if *passed { "passed" } else { "FAILED" };
                let code = exit_code.map_or("none".to_owned(), |c| c.to_string());
                let timeout = if *timed_out { ", timed out" } else { "" };
                vec![line(format!(
                    "  {task} · check `{}`: {state} (exit {code}{timeout}) {duration_ms}ms",
                    inline(name)
                ))]
            }
            // A hint (e.g. the option a model needs) or a warning (a
            // declared tool that could not start) shows without -v.
            Event::Note(Note { message })
                if self.verbose
                    || message.starts_with(crate::core::event::HINT)
                    || message.starts_with(crate::core::event::WARNING) =>
            {
                vec![line(format!("  {task} · note: {}", inline(message)))]
            }
            Event::Git(Git { outcome }) if self.verbose => {
                vec![line(format!("  {task} · git: {}", inline(&outcome.note)))]
            }
            Event::LlmRetry(_) => {
                self.streamed.remove(task);
                Vec::new()
            }
            Event::MessageAppended(MessageAppended {
                message: Message::Assistant { content, .. },
            }) if self.verbose => {
                let shown = self.streamed.remove(task).unwrap_or(0);
                content
                    .lines()
                    .skip(shown)
                    .filter_map(|text| model_line(task, text))
                    .collect()
            }
            Event::TaskFinished(_) => {
                self.decided.retain(|(owner, _), _| owner != task);
                human_line(record, false).into_iter().collect()
            }
            _ => Vec::new(),
        }
    }
}

/// A line that is neither a failure nor an annotation.
fn plain(text: String) -> HumanLine {
    HumanLine {
        text,
        failed: false,
        annotation: None,
    }
}

/// A line of the model's text; none for a blank one.
fn model_line(task: &str, text: &str) -> Option<HumanLine> {
    (!text.trim().is_empty()).then(|| HumanLine {
        text: format!("  {task} · model: {}", neutralize(text.trim_end())),
        failed: false,
        annotation: None,
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::core::event::TaskFinished;
    use crate::core::{Reason, Status, Usage};

    fn record(task: &str, event: Event) -> EventRecord {
        EventRecord {
            ts_ms: 0,
            task: task.to_owned(),
            event,
        }
    }

    fn decided(call_id: &str, name: &str) -> Event {
        Event::ToolDecided(ToolDecided {
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            arguments: json!({"command": "ls\nrm"}),
            verdict: "allow".to_owned(),
            rule: "default".to_owned(),
            detail: None,
            resolved: None,
            parent: None,
        })
    }

    fn completed(call_id: &str, name: &str, ok: bool) -> Event {
        Event::ToolCompleted(ToolCompleted {
            call_id: call_id.to_owned(),
            name: name.to_owned(),
            ok,
            ran: true,
            duration_ms: 12,
            truncated: false,
            output: "first\nsecond".to_owned(),
        })
    }

    #[test]
    fn a_tool_call_is_one_line_with_verdict_and_duration() {
        let mut view = LogView::new(false);
        assert!(
            view.lines(&record("a", decided("c1", "run_shell")))
                .is_empty()
        );
        assert!(
            view.lines(&record("b", decided("c1", "read_file")))
                .is_empty()
        );
        let lines = view.lines(&record("a", completed("c1", "run_shell", true)));
        assert_eq!(lines.len(), 1);
        assert_eq!(
            lines[0].text,
            r#"  a · ✓ run_shell {"command":"ls\nrm"}  [allow: default] 12ms"#
        );
        let lines = view.lines(&record("b", completed("c1", "read_file", false)));
        assert!(lines[0].text.starts_with("  b · ✗ read_file "), "{lines:?}");
        // Verbose: the first line of the output too.
        let mut view = LogView::new(true);
        view.lines(&record("a", decided("c1", "run_shell")));
        let lines = view.lines(&record("a", completed("c1", "run_shell", true)));
        assert!(lines[0].text.ends_with("12ms  first"), "{lines:?}");
    }

    #[test]
    fn model_text_shows_only_when_verbose_and_neutralised() {
        let message = record(
            "a",
            Event::MessageAppended(MessageAppended {
                message: Message::Assistant {
                    content: "Done.\n::set-output name=x::y\n\u{1b}[31mred".to_owned(),
                    tool_calls: Vec::new(),
                },
            }),
        );
        assert!(LogView::new(false).lines(&message).is_empty());
        let lines = LogView::new(true).lines(&message);
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0].text, "  a · model: Done.");
        for line in &lines {
            assert!(!line.text.contains('\u{1b}'), "{line:?}");
            assert!(!line.text.trim_start().starts_with("::"), "{line:?}");
        }
    }

    #[test]
    fn streamed_lines_are_not_shown_again_with_the_message() {
        let mut view = LogView::new(true);
        let streamed = view.streamed_line("a", "First line.").unwrap();
        assert_eq!(streamed.text, "  a · model: First line.");
        assert!(view.streamed_line("a", "").is_none());
        let message = record(
            "a",
            Event::MessageAppended(MessageAppended {
                message: Message::Assistant {
                    content: "First line.\n\nLast line".to_owned(),
                    tool_calls: Vec::new(),
                },
            }),
        );
        let rest = view.lines(&message);
        assert_eq!(rest.len(), 1);
        assert_eq!(rest[0].text, "  a · model: Last line");
        // The next turn starts afresh.
        assert_eq!(view.lines(&message).len(), 2);
        assert!(LogView::new(false).streamed_line("a", "x").is_none());
    }

    #[test]
    fn activity_counts_steps_tokens_cost_and_names_the_tool() {
        let mut activity = TaskActivity::new(Some(25));
        assert_eq!(
            activity.status(),
            "step 0/25 · 0 tokens · cost $0.0000 · waiting for the model"
        );
        activity.record(&Event::LlmResponse(LlmResponse {
            iteration: 1,
            response_id: None,
            request_id: None,
            usage: Usage::new(100, 20),
            cost: Cost::Usd(0.5),
            duration_ms: 3,
            tool_calls: 1,
            request_tokens_estimate: None,
            request_tokens_method: None,
            incomplete: None,
            finish_reason: None,
            usage_estimated: false,
        }));
        activity.record(&decided("c1", "run_shell"));
        assert_eq!(
            activity.status(),
            "step 1/25 · 120 tokens · cost $0.5000 · run_shell"
        );
        let finished = Event::TaskFinished(TaskFinished {
            status: Status::Passed,
            reason: Reason::Completed,
            message: None,
            expect: "pass".to_owned(),
            iterations: 1,
            usage: Usage::default(),
            cost: Cost::Usd(0.5),
            duration_ms: 5,
        });
        activity.record(&finished);
        assert!(TaskActivity::new(None).status().starts_with("step 0/? "));
    }
}
