//! How `ybs run` shows a run while it works (docs/progress.md): progress
//! bars on a terminal, plain lines in a log, `::group::` blocks under
//! GitHub Actions. [`Printer`](super::printer::Printer) feeds it the
//! events and writes what it decides.

use std::collections::HashMap;
use std::io::IsTerminal as _;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::TaskActivity;

/// What the environment allows, read once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Terminal {
    pub github: bool,
    pub stdout_tty: bool,
    pub stderr_tty: bool,
    /// `TERM=dumb`: no bars, no colour.
    pub dumb: bool,
    /// `NO_COLOR` set and not empty.
    pub no_color: bool,
    /// `CLICOLOR_FORCE` set and not `0`.
    pub force_color: bool,
}

impl Terminal {
    /// This process's terminal, with the settings of `environ`.
    pub fn detect(environ: &crate::core::Environ) -> Self {
        let var = |name: &str| environ.var_os(name).filter(|value| !value.is_empty());
        Self {
            github: environ
                .var_os("GITHUB_ACTIONS")
                .is_some_and(|v| v == "true"),
            stdout_tty: std::io::stdout().is_terminal(),
            stderr_tty: std::io::stderr().is_terminal(),
            dumb: environ.var_os("TERM").is_some_and(|term| term == "dumb"),
            no_color: var("NO_COLOR").is_some(),
            force_color: var("CLICOLOR_FORCE").is_some_and(|value| value != "0"),
        }
    }

    /// Progress bars on stderr: a terminal that is not dumb, outside CI.
    pub fn bars(&self) -> bool {
        self.stderr_tty && !self.dumb && !self.github
    }

    /// Colour on stdout: on a terminal that is not dumb, or anywhere
    /// with `CLICOLOR_FORCE`; never with `NO_COLOR`, which wins.
    pub fn color_stdout(&self) -> bool {
        !self.no_color && (self.force_color || (self.stdout_tty && !self.dumb))
    }

    /// Colour in the bars (stderr).
    pub fn color_stderr(&self) -> bool {
        !self.no_color && (self.force_color || (self.stderr_tty && !self.dumb))
    }
}

/// One bar per running task on stderr, redrawn at most 20 times a second
/// (indicatif's rate limit), the spinner turning on its own.
pub struct Bars {
    multi: MultiProgress,
    style: ProgressStyle,
    max_steps: HashMap<String, u32>,
    running: HashMap<String, (ProgressBar, TaskActivity)>,
}

impl Bars {
    pub fn new(color: bool) -> Self {
        let template = if color {
            "{spinner:.cyan} {prefix:.bold} {wide_msg} {elapsed:>4}"
        } else {
            "{spinner} {prefix} {wide_msg} {elapsed:>4}"
        };
        let style = ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_spinner());
        Self {
            multi: MultiProgress::with_draw_target(ProgressDrawTarget::stderr()),
            style,
            max_steps: HashMap::new(),
            running: HashMap::new(),
        }
    }

    pub fn plan(&mut self, task: &str, max_steps: u32) {
        self.max_steps.insert(task.to_owned(), max_steps);
    }

    /// A task started: its bar appears under the others.
    pub fn start(&mut self, task: &str) {
        let bar = self.multi.add(
            ProgressBar::new_spinner()
                .with_style(self.style.clone())
                .with_prefix(task.to_owned()),
        );
        let activity = TaskActivity::new(self.max_steps.get(task).copied());
        bar.set_message(activity.status());
        bar.enable_steady_tick(Duration::from_millis(120));
        self.running.insert(task.to_owned(), (bar, activity));
    }

    /// An event of a running task: its bar's text follows. `clean` makes
    /// the text safe to print (masks secrets, drops escapes).
    pub fn update(
        &mut self,
        task: &str,
        event: &crate::core::Event,
        clean: &dyn Fn(&str) -> String,
    ) {
        if let Some((bar, activity)) = self.running.get_mut(task) {
            activity.record(event);
            bar.set_message(clean(&activity.status()));
        }
    }

    /// The task ended: its bar goes, and `print` (the result line) is
    /// written in its place.
    pub fn finish(&mut self, task: &str, print: impl FnOnce()) {
        if let Some((bar, _)) = self.running.remove(task) {
            bar.finish_and_clear();
            self.multi.remove(&bar);
        }
        self.multi.suspend(print);
    }

    /// Writes a line above the bars.
    pub fn suspend(&self, print: impl FnOnce()) {
        self.multi.suspend(print);
    }

    /// The run ended: every bar left goes.
    pub fn clear(&mut self) {
        for (_, (bar, _)) in self.running.drain() {
            bar.finish_and_clear();
        }
        let _ = self.multi.clear();
    }
}

/// GitHub Actions: each task's lines inside `::group::<task>` and
/// `::endgroup::`, its result after. One task's group is open at a time,
/// its lines shown as they come; the lines of tasks running beside it
/// wait, and their group follows when it closes, so groups never
/// interleave.
#[derive(Debug, Default)]
pub struct Groups {
    /// The task whose group is open.
    open: Option<String>,
    /// Tasks waiting for their turn, in the order they first printed.
    waiting: Vec<Waiting>,
}

#[derive(Debug)]
struct Waiting {
    task: String,
    inside: Vec<String>,
    /// The result lines, once the task ended.
    after: Option<Vec<String>>,
}

impl Groups {
    /// A line of `task`'s group.
    pub fn line(&mut self, task: &str, line: String, out: &mut dyn FnMut(&str)) {
        if self.open.as_deref() == Some(task) {
            out(&line);
            return;
        }
        if self.open.is_none() && self.waiting.is_empty() {
            out(&format!("::group::{task}"));
            out(&line);
            self.open = Some(task.to_owned());
            return;
        }
        self.waiting_for(task).inside.push(line);
    }

    /// `task` ended with these result lines (shown after its group).
    pub fn finished(&mut self, task: &str, after: Vec<String>, out: &mut dyn FnMut(&str)) {
        if self.open.as_deref() == Some(task) {
            out("::endgroup::");
            for line in &after {
                out(line);
            }
            self.open = None;
            self.promote(out);
            return;
        }
        if self.open.is_none() && !self.waiting.iter().any(|w| w.task == task) {
            // Nothing inside (`--quiet`): the result alone.
            for line in &after {
                out(line);
            }
            return;
        }
        self.waiting_for(task).after = Some(after);
        if self.open.is_none() {
            self.promote(out);
        }
    }

    /// The run ended: whatever waits is written.
    pub fn flush(&mut self, out: &mut dyn FnMut(&str)) {
        if self.open.take().is_some() {
            out("::endgroup::");
        }
        for waiting in std::mem::take(&mut self.waiting) {
            write_group(&waiting, out);
            if !waiting.inside.is_empty() {
                out("::endgroup::");
            }
            for line in waiting.after.iter().flatten() {
                out(line);
            }
        }
    }

    fn waiting_for(&mut self, task: &str) -> &mut Waiting {
        let index = match self.waiting.iter().position(|w| w.task == task) {
            Some(index) => index,
            None => {
                self.waiting.push(Waiting {
                    task: task.to_owned(),
                    inside: Vec::new(),
                    after: None,
                });
                self.waiting.len() - 1
            }
        };
        &mut self.waiting[index]
    }

    /// No group is open: the tasks that waited come out in order, up to
    /// the first still running, whose group stays open.
    fn promote(&mut self, out: &mut dyn FnMut(&str)) {
        while !self.waiting.is_empty() {
            let waiting = self.waiting.remove(0);
            match &waiting.after {
                Some(after) => {
                    write_group(&waiting, out);
                    if !waiting.inside.is_empty() {
                        out("::endgroup::");
                    }
                    for line in after {
                        out(line);
                    }
                }
                None => {
                    out(&format!("::group::{}", waiting.task));
                    for line in &waiting.inside {
                        out(line);
                    }
                    self.open = Some(waiting.task);
                    return;
                }
            }
        }
    }
}

/// A waiting task's group, opened and filled (not closed).
fn write_group(waiting: &Waiting, out: &mut dyn FnMut(&str)) {
    if waiting.inside.is_empty() {
        return;
    }
    out(&format!("::group::{}", waiting.task));
    for line in &waiting.inside {
        out(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(steps: &[(&str, &str)]) -> Vec<String> {
        let mut groups = Groups::default();
        let mut printed = Vec::new();
        let mut out = |line: &str| printed.push(line.to_owned());
        for (task, line) in steps {
            match *line {
                "END" => groups.finished(task, vec![format!("PASS {task}")], &mut out),
                "FLUSH" => groups.flush(&mut out),
                _ => groups.line(task, (*line).to_owned(), &mut out),
            }
        }
        printed
    }

    #[test]
    fn groups_never_interleave() {
        let printed = run(&[
            ("a", "a1"),
            ("b", "b1"),
            ("a", "a2"),
            ("c", "c1"),
            ("c", "END"),
            ("b", "b2"),
            ("a", "END"),
            ("b", "b3"),
            ("b", "END"),
        ]);
        assert_eq!(
            printed,
            [
                "::group::a",
                "a1",
                "a2",
                "::endgroup::",
                "PASS a",
                "::group::b",
                "b1",
                "b2",
                "b3",
                "::endgroup::",
                "PASS b",
                "::group::c",
                "c1",
                "::endgroup::",
                "PASS c",
            ]
        );
        // The run ended with a task's group open and one waiting.
        let printed = run(&[("a", "a1"), ("b", "b1"), ("x", "FLUSH")]);
        assert_eq!(
            printed,
            [
                "::group::a",
                "a1",
                "::endgroup::",
                "::group::b",
                "b1",
                "::endgroup::"
            ]
        );
    }

    #[test]
    fn bars_and_colour_follow_the_terminal_and_the_variables() {
        let tty = Terminal {
            github: false,
            stdout_tty: true,
            stderr_tty: true,
            dumb: false,
            no_color: false,
            force_color: false,
        };
        assert!(tty.bars() && tty.color_stdout() && tty.color_stderr());
        let no_color = Terminal {
            no_color: true,
            force_color: true,
            ..tty
        };
        assert!(no_color.bars() && !no_color.color_stdout() && !no_color.color_stderr());
        let dumb = Terminal { dumb: true, ..tty };
        assert!(!dumb.bars() && !dumb.color_stdout());
        let github = Terminal {
            github: true,
            ..tty
        };
        assert!(!github.bars());
        let piped = Terminal {
            stdout_tty: false,
            stderr_tty: false,
            ..tty
        };
        assert!(!piped.bars() && !piped.color_stdout());
        let forced = Terminal {
            force_color: true,
            ..piped
        };
        assert!(!forced.bars() && forced.color_stdout());
    }

    #[test]
    fn a_task_with_nothing_inside_prints_its_result_alone() {
        assert_eq!(run(&[("a", "END")]), ["PASS a"]);
    }
}
