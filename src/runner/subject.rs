//! The commit message of a task's work (docs/git.md): the task's
//! `commit.message`, else the model's last answer when it reads as a
//! summary, else a subject built from the task's changed files.

use std::path::PathBuf;

/// The longest first line of an answer taken as the subject.
pub const MAX_SUBJECT_CHARS: usize = 100;

/// The message for `git::commit`: its first line follows
/// `<prefix> <task-id>: `. An answer that is JSON (a tool result echoed,
/// a call written as text) or empty gives way to a subject naming the
/// changed files; one whose first line is over [`MAX_SUBJECT_CHARS`]
/// keeps its text as the body under that subject.
pub fn commit_message(
    configured: Option<&str>,
    answer: Option<&str>,
    changed: &[PathBuf],
) -> String {
    if let Some(message) = configured.map(str::trim).filter(|m| !m.is_empty()) {
        return message.to_owned();
    }
    let answer = answer.map(str::trim).unwrap_or_default();
    if answer.is_empty() || is_json(answer) {
        return files_subject(changed);
    }
    let first = answer.lines().next().unwrap_or_default();
    if first.chars().count() > MAX_SUBJECT_CHARS {
        return format!("{}\n\n{answer}", files_subject(changed));
    }
    answer.to_owned()
}

/// True for a text that is one JSON object or array, bare or in a code
/// fence.
fn is_json(text: &str) -> bool {
    let inner = text
        .strip_prefix("```")
        .and_then(|rest| rest.strip_suffix("```"))
        .map_or(text, |inner| {
            inner.split_once('\n').map_or(inner, |(_, body)| body)
        })
        .trim();
    (inner.starts_with('{') || inner.starts_with('['))
        && serde_json::from_str::<serde_json::Value>(inner).is_ok()
}

/// `update hello.txt`, `update a.rs, b.rs`, `update 5 files: a, b, c, …`.
fn files_subject(changed: &[PathBuf]) -> String {
    let names: Vec<String> = changed
        .iter()
        .map(|path| path.display().to_string())
        .collect();
    match names.len() {
        0 => "changes".to_owned(),
        1..=3 => format!("update {}", names.join(", ")),
        count => format!("update {count} files: {}, …", names[..3].join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(names: &[&str]) -> Vec<PathBuf> {
        names.iter().map(PathBuf::from).collect()
    }

    #[test]
    fn configured_message_wins() {
        let changed = paths(&["a.txt"]);
        assert_eq!(commit_message(Some("Add a"), Some("{}"), &changed), "Add a");
    }

    #[test]
    fn a_prose_answer_is_the_message() {
        let answer = "Created hello.txt with the codename.\n\nDetails follow.";
        assert_eq!(commit_message(None, Some(answer), &[]), answer);
    }

    #[test]
    fn json_or_empty_answers_give_a_subject_from_the_files() {
        let one = paths(&["hello.txt"]);
        for answer in [
            r#"{"path":"hello.txt","bytes_written":7}"#,
            "```json\n{\"name\": \"write_file\", \"arguments\": {}}\n```",
            "[1, 2]",
            "   ",
        ] {
            assert_eq!(
                commit_message(None, Some(answer), &one),
                "update hello.txt",
                "{answer}"
            );
        }
        assert_eq!(commit_message(None, None, &[]), "changes");
        let many = paths(&["a", "b", "c", "d", "e"]);
        assert_eq!(
            commit_message(None, Some(""), &many),
            "update 5 files: a, b, c, …"
        );
        // Braces in prose are prose.
        assert_eq!(
            commit_message(None, Some("{fixed} the build"), &one),
            "{fixed} the build"
        );
    }

    #[test]
    fn a_long_first_line_moves_to_the_body() {
        let long = "word ".repeat(40);
        let message = commit_message(None, Some(&long), &paths(&["a.rs", "b.rs"]));
        assert!(message.starts_with("update a.rs, b.rs\n\n"), "{message}");
        assert!(message.ends_with(long.trim()), "{message}");
    }
}
