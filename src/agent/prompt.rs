//! The system prompt: role, workdir, tools, policy, the repository's
//! `AGENTS.md` instructions (read and bounded by the runner), the task's
//! `system`.
//! Short on purpose: the fixed part of every request stays under 1,500
//! tokens with the six tool schemas (docs/performance.md).

use std::path::Path;

/// `text` ending with a full stop. The policy summary names itself
/// (`Policy: …`) and usually ends with one already.
fn sentence(text: &str) -> String {
    let text = text.trim_end();
    if text.ends_with('.') {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

/// What the task is held to, for the system prompt: an output contract
/// (the answer goes through the final-answer tool) and the checks that
/// decide it (name and command, masked).
#[derive(Debug, Clone, Copy, Default)]
pub struct Contract<'a> {
    pub output: bool,
    pub checks: &'a [(String, String)],
}

/// Builds the system prompt. `instructions` is the text of the
/// repository's `AGENTS.md` files, already masked and bounded.
///
/// The prompt names no absolute path: the workdir is "the current
/// directory" and every path the model sees is relative to it, so the
/// same task from two checkouts at different places is the same prompt
/// (the same answer at temperature 0, and a warm provider prompt cache).
/// `_workdir` stays in the signature for the callers; it is not said.
pub fn system_prompt(
    _workdir: &Path,
    tools: &[String],
    policy_summary: &str,
    task_system: Option<&str>,
    instructions: Option<&str>,
    contract: Contract<'_>,
) -> String {
    let finish = if contract.output {
        format!(
            "When the task is done, {}; its schema is the tool's.",
            super::answer_tool::HOW
        )
    } else {
        "When the task is done, reply with a short summary and no tool call.".to_owned()
    };
    let mut prompt = format!(
        "You are ybs, a coding agent running unattended in CI. Work in the repository in the current directory. \
Use the tools to inspect and change files; paths are relative to that directory. \
Nobody can answer questions: decide, act, and verify your work. \
{finish}\n\
Tools: {}.\n\
{} A denied call returns an explanation; do not retry it, find another way.",
        tools.join(", "),
        sentence(policy_summary)
    );
    if let Some(text) = instructions.filter(|s| !s.trim().is_empty()) {
        prompt.push_str(
            "\n\nThe repository's instructions for agents (AGENTS.md); the task and the policy above take precedence:\n\n",
        );
        prompt.push_str(text.trim_end());
    }
    if let Some(extra) = task_system.filter(|s| !s.trim().is_empty()) {
        prompt.push_str("\n\n");
        prompt.push_str(extra.trim());
    }
    // Last: the rest is the same for every task of a repository.
    if !contract.checks.is_empty() {
        prompt.push_str(
            "\n\nWhen you answer, these checks run and decide the task; run them yourself first:",
        );
        for (name, command) in contract.checks {
            prompt.push_str(&format!("\n- {name}: `{}`", command.trim()));
        }
    }
    prompt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_prompt_names_no_absolute_path() {
        let tools = ["read_file".to_owned()];
        let here = system_prompt(
            Path::new("/home/ci/a/repo"),
            &tools,
            "Policy: x.",
            None,
            None,
            Contract::default(),
        );
        let there = system_prompt(
            Path::new("/srv/b/repo"),
            &tools,
            "Policy: x.",
            None,
            None,
            Contract::default(),
        );
        assert_eq!(here, there);
        assert!(!here.contains("/home") && !here.contains("repo."), "{here}");
        assert!(here.contains("current directory"), "{here}");
        assert!(here.contains("short summary"), "{here}");
        assert!(!here.contains("final_answer") && !here.contains("checks"));
    }

    #[test]
    fn an_output_task_is_told_how_to_answer_and_checks_come_last() {
        let checks = [("tests".to_owned(), "cargo test --quiet\n".to_owned())];
        let prompt = system_prompt(
            Path::new("/w"),
            &["read_file".to_owned()],
            "Policy: x.",
            Some("Be brief."),
            None,
            Contract {
                output: true,
                checks: &checks,
            },
        );
        assert!(prompt.contains("calling `final_answer`"), "{prompt}");
        assert!(!prompt.contains("short summary"), "{prompt}");
        assert!(
            prompt.ends_with("Be brief.\n\nWhen you answer, these checks run and decide the task; run them yourself first:\n- tests: `cargo test --quiet`"),
            "{prompt}"
        );
    }
}
