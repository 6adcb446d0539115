//! `ybs run --repeat N` and `--models a,b,c` (docs/ci.md, "Flakiness
//! and model matrices"): each selected task becomes one copy per model
//! and run, each a task of its own with its own id, output directory,
//! worktree under `--jobs`, transcript and JUnit entry.
//!
//! A copy's id is the task id, `@<model>` for a model of `--models` (the
//! name with every character but letters, digits, `.`, `_` and `-` made
//! a `-`), and `#<k>` for run k of `--repeat`: `fix@gpt-4o#2`. Task ids
//! hold neither `@` nor `#`, so copy ids never clash with task ids, and
//! the reports read the task, model and run back from the id
//! ([`crate::report::rates`]).

use std::collections::HashMap;

use super::RunError;
use crate::report::rates::{MODEL_MARK, RUN_MARK, Verdict, rates};
use crate::task::TaskSpec;

/// What `--repeat`, `--models` and `--min-pass-rate` asked.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Matrix {
    /// `--models`: each task once per model, in this order.
    pub models: Vec<String>,
    /// `--repeat N`: each task (per model) N times; 0 and 1 mean once.
    pub repeat: u16,
    /// `--min-pass-rate R`, 0 to 1.
    pub min_pass_rate: Option<f64>,
}

/// What the run needs to know of the copies.
#[derive(Debug, Clone, Default)]
pub struct Copies {
    /// The model of each copy made for `--models`, by copy id.
    models: HashMap<String, String>,
    /// `--min-pass-rate R`.
    pub min_pass_rate: Option<f64>,
    /// The tasks were copied: each copy runs in a worktree of its own
    /// where it can, whatever `--jobs` is.
    pub expanded: bool,
}

impl Copies {
    /// The model copy `id` runs with, over every other setting.
    pub fn model(&self, id: &str) -> Option<&str> {
        self.models.get(id).map(String::as_str)
    }
}

/// The id part of a model: its name with every character but ASCII
/// letters, digits, `.`, `_` and `-` made a `-`, with no `..` (git
/// refuses it in a branch name) and no `.` at the end.
pub fn model_part(model: &str) -> String {
    let mut part: String = model
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    while part.contains("..") {
        part = part.replace("..", ".");
    }
    part.trim_end_matches('.').to_owned()
}

/// The copies of `tasks`: per model (in `--models` order), each task (in
/// its order), each run. Without `--models` and `--repeat` the tasks as
/// they are.
pub fn expand(tasks: Vec<TaskSpec>, matrix: &Matrix) -> Result<(Vec<TaskSpec>, Copies), RunError> {
    let repeat = matrix.repeat.max(1);
    if matrix.min_pass_rate.is_some() && repeat < 2 {
        return Err(RunError::usage(
            "--min-pass-rate needs --repeat N with N of 2 or more",
            Some("add --repeat, e.g. `--repeat 5 --min-pass-rate 0.8`"),
        ));
    }
    let mut copies = Copies {
        models: HashMap::new(),
        min_pass_rate: matrix.min_pass_rate,
        expanded: false,
    };
    if matrix.models.is_empty() && repeat == 1 {
        return Ok((tasks, copies));
    }
    copies.expanded = true;
    let mut parts: Vec<(String, &str)> = Vec::new();
    for model in &matrix.models {
        let part = model_part(model);
        if model.trim().is_empty() || part.is_empty() {
            return Err(RunError::usage(
                format!("--models: `{model}` is not a model name"),
                Some("pass model names separated by commas, e.g. `--models gpt-4o,gpt-4o-mini`"),
            ));
        }
        if let Some((_, other)) = parts.iter().find(|(seen, _)| *seen == part) {
            let message = if other == model {
                format!("--models: `{model}` is named twice")
            } else {
                format!(
                    "--models: `{other}` and `{model}` give the same id part `{part}`: their outputs would be one"
                )
            };
            return Err(RunError::usage(message, Some("name each model once")));
        }
        parts.push((part, model));
    }
    let axis: Vec<Option<(&str, &str)>> = if parts.is_empty() {
        vec![None]
    } else {
        parts
            .iter()
            .map(|(part, model)| Some((part.as_str(), *model)))
            .collect()
    };
    let mut expanded = Vec::with_capacity(tasks.len() * axis.len() * usize::from(repeat));
    for model in &axis {
        for task in &tasks {
            for run in 1..=repeat {
                let mut id = task.id.clone();
                if let Some((part, _)) = model {
                    id = format!("{id}{MODEL_MARK}{part}");
                }
                if repeat > 1 {
                    id = format!("{id}{RUN_MARK}{run}");
                }
                if let Some((_, name)) = model {
                    copies.models.insert(id.clone(), (*name).to_owned());
                }
                let mut copy = task.clone();
                copy.id = id;
                expanded.push(copy);
            }
        }
    }
    Ok((expanded, copies))
}

/// One line for the console per task whose runs did not all end alike:
/// `ybs: fix: flaky, passed 2/3 (67%) of its runs`.
pub fn console_lines(results: &[super::TaskResult], min_pass_rate: Option<f64>) -> Vec<String> {
    rates(
        results
            .iter()
            .map(|result| (result.id.as_str(), result.status)),
        min_pass_rate,
    )
    .into_iter()
    .filter(|rate| rate.mixed)
    .map(|rate| {
        let decided = match (rate.verdict, min_pass_rate) {
            (Verdict::Flaky, _) | (_, None) => String::new(),
            (Verdict::Passed, Some(min)) => format!(": passes, at or above --min-pass-rate {min}"),
            (_, Some(min)) => format!(": fails, below --min-pass-rate {min}"),
        };
        format!(
            "ybs: {}: flaky, passed {} of its runs{decided}",
            rate.key,
            rate.describe()
        )
    })
    .collect()
}

/// `--models`: one line per model for the console, in `--models` order:
/// `ybs: model gpt-4o: 3/4 runs passed (75%)` (the summary has the rest).
pub fn model_lines(results: &[super::TaskResult], copies: &Copies) -> Vec<String> {
    let mut models: Vec<(&str, usize, usize)> = Vec::new();
    for result in results {
        let Some(model) = copies.model(&result.id) else {
            continue;
        };
        let passed = usize::from(result.status == crate::core::Status::Passed);
        match models.iter_mut().find(|(name, _, _)| *name == model) {
            Some((_, runs, passes)) => {
                *runs += 1;
                *passes += passed;
            }
            None => models.push((model, 1, passed)),
        }
    }
    models
        .into_iter()
        .map(|(model, runs, passed)| {
            format!(
                "ybs: model {model}: {passed}/{runs} runs passed ({})",
                crate::report::rates::percent(crate::report::rates::ratio(passed, runs))
            )
        })
        .collect()
}

/// How many tasks (runs counted as one) were flaky and left undecided.
pub fn flaky_count(results: &[super::TaskResult], min_pass_rate: Option<f64>) -> usize {
    rates(
        results
            .iter()
            .map(|result| (result.id.as_str(), result.status)),
        min_pass_rate,
    )
    .iter()
    .filter(|rate| rate.verdict == Verdict::Flaky)
    .count()
}

/// How many tasks of `results` are flaky (some runs passed, some not)
/// and pass all the same, at or above `--min-pass-rate`.
pub fn accepted_flaky_count(results: &[super::TaskResult], min_pass_rate: Option<f64>) -> usize {
    if min_pass_rate.is_none() {
        return 0;
    }
    rates(
        results
            .iter()
            .map(|result| (result.id.as_str(), result.status)),
        min_pass_rate,
    )
    .iter()
    .filter(|rate| rate.mixed && rate.verdict == Verdict::Passed)
    .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Status;

    #[test]
    fn model_names_become_safe_id_parts() {
        assert_eq!(model_part("gpt-4o"), "gpt-4o");
        assert_eq!(model_part("openai/gpt-4o"), "openai-gpt-4o");
        assert_eq!(model_part("llama3.1:8b"), "llama3.1-8b");
        assert_eq!(model_part("a..b."), "a.b");
    }

    #[test]
    fn a_pass_is_a_pass() {
        let result = |id: &str, status| super::super::TaskResult {
            id: id.to_owned(),
            status,
            reason: crate::core::Reason::Completed,
            message: None,
        };
        let results = [
            result("a#1", Status::Passed),
            result("a#2", Status::Failed),
            result("b#1", Status::Passed),
            result("b#2", Status::Passed),
        ];
        assert_eq!(
            console_lines(&results, None),
            ["ybs: a: flaky, passed 1/2 (50%) of its runs"]
        );
        assert_eq!(flaky_count(&results, None), 1);
        assert_eq!(flaky_count(&results, Some(0.5)), 0);
    }
}
