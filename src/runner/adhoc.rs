//! Ad-hoc runs (`ybs run --prompt TEXT`): one task without a task file.
//!
//! The flags are turned into the text of a task file, the very text
//! `--save FILE` writes, and that text is loaded like any task file
//! considered to lie in the directory ybs runs in (`<id>.yaml`). So a
//! prompt run and a run of its saved file are the same run: the same
//! task, policy, checks and outputs (docs/task-files.md, "Ad-hoc runs").

use std::path::PathBuf;

use crate::core::decode::yaml::{self, NodeKind};

/// The task id of an ad-hoc run without `--id`.
pub const DEFAULT_ID: &str = "prompt";

/// What `ybs run --prompt` was given, besides the options every run has.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AdHoc {
    pub prompt: String,
    /// `--id`, else [`DEFAULT_ID`].
    pub id: String,
    /// `--provider` and `--model`: written to the saved file so that it
    /// runs with the same model without the flags (`--endpoint` is not:
    /// an endpoint a task file names never receives the operator's key).
    pub provider: Option<String>,
    pub model: Option<String>,
    /// `--allow RULE` and `--deny RULE`, in the policy's string syntax.
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    /// `--check CMD`.
    pub checks: Vec<String>,
}

impl AdHoc {
    /// Where the task file is considered to be, relative to the directory
    /// ybs runs in: `<id>.yaml` (its stem gives the suite name, and a
    /// `<id>.cassette.json` beside it is found as for any file).
    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("{}.yaml", self.id))
    }

    /// The equivalent task file, in the single-task form.
    pub fn task_file(&self) -> String {
        let mut text = String::from(
            "# Written by `ybs run --prompt ... --save`; run it with `ybs run FILE`.\n",
        );
        text.push_str(&format!("id: {}\n", quoted(&self.id)));
        text.push_str(&format!("prompt:{}\n", prompt_value(&self.prompt)));
        if let Some(provider) = &self.provider {
            text.push_str(&format!("provider: {}\n", quoted(provider)));
        }
        if let Some(model) = &self.model {
            text.push_str(&format!("model: {}\n", quoted(model)));
        }
        if !self.allow.is_empty() || !self.deny.is_empty() {
            text.push_str("policy:\n");
            for (key, rules) in [("allow", &self.allow), ("deny", &self.deny)] {
                if !rules.is_empty() {
                    text.push_str(&format!("  {key}:\n"));
                    for rule in rules {
                        text.push_str(&format!("    - {}\n", quoted(rule)));
                    }
                }
            }
        }
        if !self.checks.is_empty() {
            text.push_str("checks:\n");
            for check in &self.checks {
                text.push_str(&format!("  - {}\n", quoted(check)));
            }
        }
        text
    }
}

/// A YAML double-quoted scalar (JSON's escapes are YAML's).
fn quoted(text: &str) -> String {
    serde_json::Value::String(text.to_owned()).to_string()
}

/// ` |` and an indented literal block when the prompt reads back the same
/// that way (the readable form for a multi-line prompt), else a quoted
/// scalar on the key's line.
fn prompt_value(prompt: &str) -> String {
    let plain = format!(" {}", quoted(prompt));
    if !prompt.contains('\n') || prompt.trim_end_matches('\n').is_empty() {
        return plain;
    }
    let body = prompt.strip_suffix('\n').unwrap_or(prompt);
    let chomp = if prompt.ends_with('\n') { "" } else { "-" };
    let mut block = format!(" |{chomp}\n");
    for line in body.split('\n') {
        if !line.is_empty() {
            block.push_str("  ");
        }
        block.push_str(line);
        block.push('\n');
    }
    let block = block.trim_end_matches('\n').to_owned();
    let reads_back = match yaml::parse(&format!("prompt:{block}\n")) {
        (Some(root), errors) if errors.is_empty() => {
            matches!(root.get("prompt").map(|n| &n.kind), Some(NodeKind::Str(s)) if s == prompt)
        }
        _ => false,
    };
    if reads_back { block } else { plain }
}

pub use super::prepare::provider::{NO_MODEL_HINT, missing_model};

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt_of(text: &str) -> String {
        let file = crate::task::load_str(std::path::Path::new("prompt.yaml"), text, &[]).unwrap();
        file.tasks[0].prompt.clone()
    }

    #[test]
    fn every_prompt_reads_back_as_given() {
        for prompt in [
            "fix it",
            "two\nlines",
            "two\nlines\n",
            "ends with blanks\n\n\n",
            "  indented first\nline",
            "tabs\tand \"quotes\" and \\ and: colons # hash",
            "\nstarts with a newline",
            "blank\n\nline inside\n",
            "trailing space \nline",
            "- a list?\n- no",
        ] {
            let adhoc = AdHoc {
                prompt: prompt.to_owned(),
                id: DEFAULT_ID.to_owned(),
                ..AdHoc::default()
            };
            assert_eq!(
                prompt_of(&adhoc.task_file()),
                prompt,
                "{}",
                adhoc.task_file()
            );
        }
    }

    #[test]
    fn a_multi_line_prompt_is_a_literal_block() {
        let adhoc = AdHoc {
            prompt: "Fix the typo.\nThen run the tests.\n".to_owned(),
            id: "fix".to_owned(),
            allow: vec!["run_shell(cargo test*)".to_owned()],
            checks: vec!["cargo test".to_owned()],
            ..AdHoc::default()
        };
        let text = adhoc.task_file();
        assert!(
            text.contains("prompt: |\n  Fix the typo.\n  Then run the tests.\n"),
            "{text}"
        );
        assert!(
            text.contains("    - \"run_shell(cargo test*)\"\n"),
            "{text}"
        );
    }
}
