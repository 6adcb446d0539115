//! The answers a paused task goes on with: from `--answer`, `--approve`
//! and `--deny` flags, or a results file, each matched to a pending call
//! and checked before anything resumes.

use std::collections::BTreeMap;
use std::io::Read as _;

use serde_json::Value;

use super::super::RunError;
use super::super::pause::Resumed;
use super::super::state;
use super::{PausedTask, ResultsInput, ResumeFlags, read_plain, resumed_task};
use crate::agent::Answer;
use crate::core::event::{PendingCall, PendingKind};

/// A results file or stdin is read up to this size.
const MAX_RESULTS_BYTES: u64 = 16 << 20;

/// One pending call, for `ybs resume --list` and before an approval is
/// given: `ID  KIND  TOOL ARGUMENTS  (rule RULE)`, the arguments masked
/// and cut to 500 characters.
pub fn describe_pending(call: &PendingCall, redactor: &crate::core::Redactor) -> String {
    let mut arguments = call.arguments.clone();
    redactor.redact_value(&mut arguments);
    let arguments = crate::core::text::truncate_middle(&arguments.to_string(), 500).0;
    format!(
        "{}  {}  {} {}  (rule {})",
        call.id,
        call.kind.as_str(),
        call.name,
        redactor.redact(&arguments),
        call.rule
    )
}

/// The answers for every pending call of `paused`, from the results
/// input and the flags; every call must be answered exactly once.
pub fn gather_answers(
    paused: &[PausedTask],
    flags: &ResumeFlags,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<Resumed>, RunError> {
    let mut answers: BTreeMap<String, Answer> = BTreeMap::new();
    let pending: Vec<&PendingCall> = paused.iter().flat_map(|task| &task.state.pending).collect();
    let digest = match &flags.results {
        Some(input) => {
            let (bytes, name) = read_results(input)?;
            result_answers(&bytes, &name, &pending, &mut answers)?;
            Some(state::sha256(&bytes))
        }
        None => None,
    };
    flag_answers(flags, &pending, &mut answers)?;
    all_answered(&pending, &answers)?;
    let approved_any = answers
        .values()
        .any(|answer| matches!(answer, Answer::Approved(_)));
    let approver = flags
        .by
        .clone()
        .or_else(|| env("GITHUB_ACTOR"))
        .filter(|name| !name.trim().is_empty())
        .unwrap_or_else(|| "cli".to_owned());
    let mut by = Vec::new();
    if let Some(digest) = &digest {
        by.push(format!("results:{digest}"));
    }
    if approved_any {
        by.push(format!("approver:{approver}"));
    }
    let by = by.join(" ");
    paused
        .iter()
        .map(|task| resumed_task(task, &answers, &by, &approver))
        .collect()
}

/// The kind of the pending call `id`: it must be pending in exactly one
/// task.
fn kind_of(pending: &[&PendingCall], id: &str) -> Result<PendingKind, RunError> {
    let found: Vec<&&PendingCall> = pending.iter().filter(|call| call.id == id).collect();
    match found.as_slice() {
        [one] => Ok(one.kind),
        [] => Err(RunError::usage(
            format!("`{id}` is not a pending call of the paused run"),
            Some("the pending calls are listed in OUT/<task>/state.json `pending`"),
        )),
        _ => Err(RunError::usage(
            format!("`{id}` is pending in more than one task"),
            Some("resume one task at a time with --task ID"),
        )),
    }
}

/// The bytes of `--results FILE` (or `-`, stdin) and the name to show for
/// them, at most [`MAX_RESULTS_BYTES`].
fn read_results(input: &ResultsInput) -> Result<(Vec<u8>, String), RunError> {
    match input {
        ResultsInput::File(path) => Ok((
            read_plain(path, MAX_RESULTS_BYTES)
                .map_err(|error| RunError::usage(format!("{}: {error}", path.display()), Some("pass the JSON file the caller wrote (docs/resume.md, \"Answering caller tools\"), or - for stdin")))?,
            path.display().to_string(),
        )),
        ResultsInput::Stdin => {
            let mut bytes = Vec::new();
            std::io::stdin()
                .take(MAX_RESULTS_BYTES + 1)
                .read_to_end(&mut bytes)
                .map_err(|error| RunError::usage(format!("stdin: {error}"), Some("pass the JSON file the caller wrote (docs/resume.md, \"Answering caller tools\"), or - for stdin")))?;
            if bytes.len() as u64 > MAX_RESULTS_BYTES {
                return Err(RunError::usage(
                    "stdin: the results pass 16 MiB",
                    Some("answer each caller tool with its result only, or write them to a file"),
                ));
            }
            Ok((bytes, "stdin".to_owned()))
        }
    }
}

/// The answers of the results input `name`: each names a pending call
/// once and fits its kind (a caller tool's output or error, an approval).
fn result_answers(
    bytes: &[u8],
    name: &str,
    pending: &[&PendingCall],
    answers: &mut BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    for (id, answer) in parse_results(bytes, name)? {
        let kind = kind_of(pending, &id)?;
        let fits = matches!(
            (kind, &answer),
            (PendingKind::Caller, Answer::Output(_) | Answer::Error(_))
                | (PendingKind::Approval, Answer::Approved(_))
        );
        if !fits {
            return Err(RunError::usage(
                format!(
                    "{name}: `{id}` is a pending {} and needs {}",
                    kind.as_str(),
                    match kind {
                        PendingKind::Caller => "`output` or `error`",
                        PendingKind::Approval => "`approved`",
                    }
                ),
                None,
            ));
        }
        if answers.insert(id.clone(), answer).is_some() {
            return Err(RunError::usage(
                format!("{name}: `{id}` is answered twice"),
                None,
            ));
        }
    }
    Ok(())
}

/// `--approve ID|all` and `--deny ID|all`: approvals only, each answered
/// once (`all`: every approval not answered yet).
fn flag_answers(
    flags: &ResumeFlags,
    pending: &[&PendingCall],
    answers: &mut BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    for (ids, yes, flag) in [
        (&flags.approve, true, "--approve"),
        (&flags.deny, false, "--deny"),
    ] {
        for id in ids {
            let targets: Vec<String> = if id == "all" {
                pending
                    .iter()
                    .filter(|call| call.kind == PendingKind::Approval)
                    .filter(|call| !answers.contains_key(&call.id))
                    .map(|call| call.id.clone())
                    .collect()
            } else {
                if kind_of(pending, id)? != PendingKind::Approval {
                    return Err(RunError::usage(
                        format!(
                            "{flag} {id}: `{id}` is a caller tool call; its result goes in --results"
                        ),
                        None,
                    ));
                }
                if answers.contains_key(id) {
                    return Err(RunError::usage(
                        format!("{flag} {id}: `{id}` is answered twice"),
                        None,
                    ));
                }
                vec![id.clone()]
            };
            for target in targets {
                answers.insert(target, Answer::Approved(yes));
            }
        }
    }
    Ok(())
}

/// Every pending call has its answer.
fn all_answered(
    pending: &[&PendingCall],
    answers: &BTreeMap<String, Answer>,
) -> Result<(), RunError> {
    let missing: Vec<&str> = pending
        .iter()
        .filter(|call| !answers.contains_key(&call.id))
        .map(|call| call.id.as_str())
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(RunError::usage(
        format!(
            "every pending call must be answered; missing: {}",
            missing.join(", ")
        ),
        Some(
            "give caller results with --results FILE and decide approvals with --approve/--deny ID|all",
        ),
    ))
}

/// `{"results": [{"id", "output"} | {"id", "error"} | {"id", "approved"}]}`.
fn parse_results(bytes: &[u8], name: &str) -> Result<Vec<(String, Answer)>, RunError> {
    let bad = |detail: String| {
        RunError::usage(
            format!("{name}: {detail}"),
            Some(
                r#"expected {"results": [{"id": "...", "output": ...} | {"id": "...", "error": "..."} | {"id": "...", "approved": true|false}]}"#,
            ),
        )
    };
    let value: Value =
        serde_json::from_slice(bytes).map_err(|error| bad(format!("not JSON: {error}")))?;
    let Some(object) = value.as_object() else {
        return Err(bad("not a JSON object".to_owned()));
    };
    if let Some(key) = object.keys().find(|key| *key != "results") {
        return Err(bad(format!("unknown field `{key}`")));
    }
    let Some(results) = object.get("results").and_then(Value::as_array) else {
        return Err(bad("`results` must be a list".to_owned()));
    };
    results
        .iter()
        .enumerate()
        .map(|(index, entry)| {
            let at = |detail: &str| bad(format!("results[{index}]: {detail}"));
            let Some(entry) = entry.as_object() else {
                return Err(at("not an object"));
            };
            let Some(id) = entry.get("id").and_then(Value::as_str) else {
                return Err(at("`id` (a string) is missing"));
            };
            if let Some(key) = entry
                .keys()
                .find(|key| !["id", "output", "error", "approved"].contains(&key.as_str()))
            {
                return Err(at(&format!("unknown field `{key}`")));
            }
            let answers: Vec<Answer> = [
                entry.get("output").cloned().map(Answer::Output),
                match entry.get("error") {
                    Some(Value::String(text)) => Some(Answer::Error(text.clone())),
                    Some(_) => return Err(at("`error` must be a string")),
                    None => None,
                },
                match entry.get("approved") {
                    Some(Value::Bool(yes)) => Some(Answer::Approved(*yes)),
                    Some(_) => return Err(at("`approved` must be true or false")),
                    None => None,
                },
            ]
            .into_iter()
            .flatten()
            .collect();
            match <[Answer; 1]>::try_from(answers) {
                Ok([answer]) => Ok((id.to_owned(), answer)),
                Err(_) => Err(at("needs exactly one of `output`, `error`, `approved`")),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_files_are_checked_entry_by_entry() {
        let ok = parse_results(
            br#"{"results": [{"id": "a", "output": {"url": "u"}}, {"id": "b", "error": "x"}, {"id": "c", "approved": false}]}"#,
            "r.json",
        )
        .unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok[2], ("c".to_owned(), Answer::Approved(false)));
        for bad in [
            &br#"[]"#[..],
            br#"{"results": [{"id": "a"}]}"#,
            br#"{"results": [{"id": "a", "output": 1, "error": "x"}]}"#,
            br#"{"results": [{"id": "a", "outptu": 1}]}"#,
            br#"{"results": [], "extra": 1}"#,
            br#"{"results": [{"id": "a", "approved": "yes"}]}"#,
        ] {
            assert!(
                parse_results(bad, "r.json").is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
