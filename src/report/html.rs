//! `OUT/report.html` (docs/outputs.md): one self-contained page over the
//! run — CSS, script and data inline, nothing loaded from anywhere — built
//! from the already-masked transcripts, task by task.
//!
//! Safety: every text is data, never markup. Each task is one
//! `<script type="application/json">` block whose `<`, `>`, `&`, U+2028
//! and U+2029 are written as `\u003c`…, so no text can close the block;
//! control and bidi characters are made visible before that; the page's
//! script renders with `textContent` only. A `Content-Security-Policy`
//! allows the one inline script and the one inline style by their SHA-256
//! and nothing else (`default-src 'none'`).
//!
//! Size: each model text, tool result, argument and check output is cut
//! to at most [`TEXT_BYTES`] (head and tail, the full size and the
//! transcript named); once a task has spent [`TASK_BUDGET`] bytes of text,
//! its further texts are cut to [`SMALL_BYTES`]. So a task adds a bounded
//! amount to the page, and writing holds one transcript at a time.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::log::neutralize_chars;
use super::outdir::OutDir;
use super::rates;
use super::scope::RunScope;
use super::transcript::{TRANSCRIPT_FILE, ToolCallEntry, Transcript};
use crate::core::Status;
use crate::core::event::{EventRecord, EventSink};
use crate::core::message::Message;
use crate::core::usage::Cost;

/// `OUT/report.html`.
pub const HTML_FILE: &str = "report.html";
/// `OUT/<task>/changes.patch`, as the runner names it.
const PATCH_FILE: &str = "changes.patch";
/// The most of one text the page holds, in bytes.
pub const TEXT_BYTES: usize = 4096;
/// Text bytes a task may spend at [`TEXT_BYTES`] a text.
pub const TASK_BUDGET: usize = 16 * 1024;
/// The most of one text once the task's budget is spent.
pub const SMALL_BYTES: usize = 256;

const STYLE: &str = include_str!("html/report.css");
const SCRIPT: &str = include_str!("html/report.js");

/// What the page says about the run as a whole.
#[derive(Debug, Clone, Default)]
pub struct PageInfo {
    pub title: String,
    pub scope: RunScope,
}

/// Writes `OUT/report.html` at `finish()`, over the tasks it saw, in the
/// order it first saw them; it runs after the transcript sink, so each
/// transcript is on disk by then.
#[derive(Debug)]
pub struct HtmlSink {
    out: Arc<OutDir>,
    info: PageInfo,
    tasks: Vec<String>,
    seen: HashSet<String>,
}

impl HtmlSink {
    pub fn new(out: Arc<OutDir>, scope: RunScope) -> Self {
        Self {
            out,
            info: PageInfo {
                title: "ybs run".to_owned(),
                scope,
            },
            tasks: Vec::new(),
            seen: HashSet::new(),
        }
    }
}

impl EventSink for HtmlSink {
    fn event(&mut self, record: &EventRecord) -> io::Result<()> {
        if !self.seen.contains(&record.task) {
            self.seen.insert(record.task.clone());
            self.tasks.push(record.task.clone());
        }
        Ok(())
    }

    fn finish(&mut self) -> io::Result<()> {
        write_report(&self.out, &self.tasks, &self.info)
    }
}

/// Writes `OUT/report.html` through the held directory, streaming: one
/// task's data in memory at a time.
pub fn write_report(out: &OutDir, tasks: &[String], info: &PageInfo) -> io::Result<()> {
    write_report_to(out, tasks, info, out, HTML_FILE)
}

/// [`write_report`] into `name` in the held directory `to` (created there,
/// never through a link).
fn write_report_to(
    out: &OutDir,
    tasks: &[String],
    info: &PageInfo,
    to: &OutDir,
    name: &str,
) -> io::Result<()> {
    let file = to.create(None, name, false)?;
    let mut counted = Counted {
        inner: io::BufWriter::new(file),
        bytes: 0,
    };
    let written = write_page(out, tasks, info, &mut counted);
    to.wrote(None, name, counted.bytes);
    written
}

/// Why `ybs report html` wrote no page.
#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("`{}` is not a directory", dir.display())]
    NotADirectory { dir: PathBuf },
    #[error("`{}` holds no task directory with a {TRANSCRIPT_FILE}", dir.display())]
    NoTasks { dir: PathBuf },
    #[error(transparent)]
    Open(#[from] super::outdir::OpenError),
    #[error("cannot read `{}`: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("cannot write `{}`: {source}", path.display())]
    Write { path: PathBuf, source: io::Error },
}

impl crate::core::exit::Failure for HtmlError {
    /// 2 for a directory with nothing to show, 4 when reading or writing
    /// failed.
    fn exit_code(&self) -> u8 {
        match self {
            Self::NotADirectory { .. } | Self::NoTasks { .. } => crate::core::exit::USAGE,
            Self::Open(_) | Self::Read { .. } | Self::Write { .. } => crate::core::exit::INFRA,
        }
    }
    fn hint(&self) -> Option<String> {
        matches!(self, Self::NoTasks { .. }).then(|| {
            "pass the --out directory of a `ybs run`, `resume` or `report merge`".to_owned()
        })
    }
}

/// `ybs report html DIR [--to FILE]`: the page of an existing output
/// directory (every task directory in it with a transcript, by name),
/// written to `to` or to `DIR/report.html`; returns where it went and
/// how many tasks it shows.
pub fn report_dir(
    dir: &Path,
    to: Option<&Path>,
    cwd: &Path,
) -> Result<(PathBuf, usize), HtmlError> {
    if !cwd.join(dir).is_dir() {
        return Err(HtmlError::NotADirectory {
            dir: dir.to_owned(),
        });
    }
    let read_error = |source| HtmlError::Read {
        path: dir.to_owned(),
        source,
    };
    let mut tasks: Vec<String> = std::fs::read_dir(cwd.join(dir))
        .map_err(read_error)?
        .filter_map(Result::ok)
        .filter(|entry| entry.file_type().is_ok_and(|kind| kind.is_dir()))
        .filter(|entry| entry.path().join(TRANSCRIPT_FILE).is_file())
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|name| !name.starts_with('.'))
        .collect();
    if tasks.is_empty() {
        return Err(HtmlError::NoTasks {
            dir: dir.to_owned(),
        });
    }
    tasks.sort();
    let out = OutDir::open(dir, cwd)?;
    let info = PageInfo {
        title: format!("ybs report: {}", dir.display()),
        scope: RunScope::default(),
    };
    match to {
        None => {
            let path = dir.join(HTML_FILE);
            write_report(&out, &tasks, &info).map_err(|source| HtmlError::Write {
                path: path.clone(),
                source,
            })?;
            Ok((path, tasks.len()))
        }
        Some(path) => {
            let write_error = |source| HtmlError::Write {
                path: path.to_owned(),
                source,
            };
            // Like `--junit FILE`: its directory opened beneath the
            // working directory, the file created there, no link followed.
            let name = path
                .file_name()
                .and_then(|name| name.to_str())
                .ok_or_else(|| write_error(io::Error::other("not a file name")))?;
            let parent = path
                .parent()
                .filter(|parent| !parent.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let to = OutDir::open(parent, cwd)?;
            write_report_to(&out, &tasks, &info, &to, name).map_err(write_error)?;
            Ok((path.to_owned(), tasks.len()))
        }
    }
}

/// Counts the bytes written through it.
struct Counted<W> {
    inner: W,
    bytes: usize,
}

impl<W: Write> Write for Counted<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.bytes += n;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Writes the page for `tasks` (their directories in `out`) to `sink`.
/// A task without a readable transcript is listed as such.
pub fn write_page(
    out: &OutDir,
    tasks: &[String],
    info: &PageInfo,
    sink: &mut dyn Write,
) -> io::Result<()> {
    write_head(sink, info)?;
    let mut seen = Vec::with_capacity(tasks.len());
    for task in tasks {
        let (value, status) = task_value(out, task);
        seen.push(Seen {
            id: task.clone(),
            status,
            shard: value["shard"].clone(),
            duration_ms: value["duration_ms"].as_u64().unwrap_or(0),
        });
        sink.write_all(b"<script type=\"application/json\" class=\"ybs-task\">")?;
        write_json(sink, &value)?;
        sink.write_all(b"</script>\n")?;
    }
    sink.write_all(b"<script type=\"application/json\" id=\"ybs-groups\">")?;
    write_json(sink, &groups_value(&seen, info.scope.min_pass_rate))?;
    sink.write_all(b"</script>\n<script>")?;
    sink.write_all(SCRIPT.as_bytes())?;
    sink.write_all(b"</script>\n</body>\n</html>\n")?;
    sink.flush()
}

/// What the page keeps of each task once its block is written: enough
/// for the pass rates, the model matrix and the shards.
struct Seen {
    id: String,
    status: Option<Status>,
    shard: Value,
    duration_ms: u64,
}

/// The run's groups (docs/outputs.md): `rates`, the runs of each task of
/// `--repeat` with its pass rate and verdict; `matrix`, each task's
/// verdict per model of `--models`; `shards`, each shard of the run (or
/// of the merged runs) with its engine and tasks. Each is empty where it
/// does not apply.
fn groups_value(seen: &[Seen], min_pass_rate: Option<f64>) -> Value {
    let finished: Vec<(&str, Status)> = seen
        .iter()
        .filter_map(|task| Some((task.id.as_str(), task.status?)))
        .collect();
    let ids = || finished.iter().map(|(id, _)| *id);
    let all = rates::rates(finished.iter().copied(), min_pass_rate);
    let rate_value = |rate: &rates::Rate| {
        json!({
            "key": neutralize_chars(&rate.key),
            "runs": rate.runs,
            "passed": rate.passed,
            "verdict": rate.verdict.as_str(),
            "mixed": rate.mixed,
            "describe": rate.describe(),
            "ids": rate.members.iter().map(|&index| finished[index].0).collect::<Vec<_>>(),
        })
    };
    let repeated: Vec<Value> = if rates::has_runs(ids()) {
        all.iter()
            .filter(|rate| rate.runs > 1)
            .map(rate_value)
            .collect()
    } else {
        Vec::new()
    };
    let matrix = rates::has_models(ids()).then(|| {
        let mut models: Vec<&str> = Vec::new();
        let mut rows: Vec<&str> = Vec::new();
        for rate in &all {
            if let Some((base, model)) = rate.key.split_once(rates::MODEL_MARK) {
                if !models.contains(&model) {
                    models.push(model);
                }
                if !rows.contains(&base) {
                    rows.push(base);
                }
            }
        }
        let rows: Vec<Value> = rows
            .iter()
            .map(|base| {
                let cells: Vec<Value> = models
                    .iter()
                    .map(|model| {
                        let key = format!("{base}{}{model}", rates::MODEL_MARK);
                        all.iter()
                            .find(|rate| rate.key == key)
                            .map_or(Value::Null, rate_value)
                    })
                    .collect();
                json!({"task": neutralize_chars(base), "cells": cells})
            })
            .collect();
        json!({
            "models": models.iter().map(|model| neutralize_chars(model)).collect::<Vec<_>>(),
            "rows": rows,
        })
    });
    let mut shards: Vec<(String, Value, Vec<&str>, u64)> = Vec::new();
    for task in seen {
        let Some(name) = task.shard["shard"].as_str() else {
            continue;
        };
        match shards.iter_mut().find(|(shard, ..)| shard == name) {
            Some((_, _, ids, total)) => {
                ids.push(&task.id);
                *total += task.duration_ms;
            }
            None => shards.push((
                name.to_owned(),
                task.shard.clone(),
                vec![&task.id],
                task.duration_ms,
            )),
        }
    }
    shards.sort_by_key(|(name, ..)| {
        name.split_once('/')
            .and_then(|(index, _)| index.parse::<u32>().ok())
            .unwrap_or(u32::MAX)
    });
    let shards: Vec<Value> = shards
        .into_iter()
        .map(|(_, record, ids, total)| {
            json!({
                "shard": record["shard"],
                "engine": record["engine"],
                "split": if record["durations"].is_string() { "durations" } else { "hash" },
                "tasks": ids,
                "duration_ms": total,
            })
        })
        .collect();
    json!({"rates": repeated, "matrix": matrix, "shards": shards})
}

/// `sha256-…` of an inline block, as a CSP source.
fn csp_hash(text: &str) -> String {
    let digest = Sha256::digest(text.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The page's Content-Security-Policy.
pub fn content_security_policy() -> String {
    format!(
        "default-src 'none'; script-src {}; style-src {}; img-src 'none'; \
         base-uri 'none'; form-action 'none'",
        csp_hash(SCRIPT),
        csp_hash(STYLE)
    )
}

fn write_head(sink: &mut dyn Write, info: &PageInfo) -> io::Result<()> {
    let title = escape_html(&neutralize_chars(&info.title));
    write!(
        sink,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n\
         <noscript><p>This report needs JavaScript; the data is in each task's transcript.json.</p></noscript>\n",
        content_security_policy()
    )?;
    let scope = &info.scope;
    let run = json!({
        "title": neutralize_chars(&info.title),
        "ybs_version": env!("CARGO_PKG_VERSION"),
        "shard": scope.shard.as_ref().map(ToString::to_string),
        "merged_from": scope.merged_from.iter().map(|dir| neutralize_chars(dir)).collect::<Vec<_>>(),
        "warnings": scope.warnings.iter().map(|warning| neutralize_chars(warning)).collect::<Vec<_>>(),
    });
    sink.write_all(b"<script type=\"application/json\" id=\"ybs-run\">")?;
    write_json(sink, &run)?;
    sink.write_all(b"</script>\n")
}

/// `value` as JSON that cannot end the `<script>` block it is in, nor
/// start a comment or markup there.
fn write_json(sink: &mut dyn Write, value: &Value) -> io::Result<()> {
    let text = serde_json::to_string(value).map_err(io::Error::other)?;
    sink.write_all(escape_json_for_script(&text).as_bytes())
}

/// `<`, `>`, `&`, U+2028, U+2029 and bidi controls as JSON escapes: they
/// only occur inside strings, where the escape means the same.
pub fn escape_json_for_script(json: &str) -> String {
    let mut out = String::with_capacity(json.len() + json.len() / 16);
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '&' => out.push_str("\\u0026"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            // Bidi controls (in raw task ids): not raw in the file either.
            c @ ('\u{061C}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}') => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out
}

fn escape_html(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Cuts texts of one task to the page's limits, naming its transcript.
struct Cutter {
    transcript: String,
    budget: usize,
}

impl Cutter {
    fn new(task: &str) -> Self {
        Self {
            transcript: format!("{}/{TRANSCRIPT_FILE}", neutralize_chars(task)),
            budget: TASK_BUDGET,
        }
    }

    /// `text`, neutralized, cut in the middle when over the limit.
    fn cut(&mut self, text: &str) -> String {
        let text = neutralize_chars(text);
        let limit = if self.budget > 0 {
            TEXT_BYTES
        } else {
            SMALL_BYTES
        };
        let shown = cut_middle(&text, limit, &self.transcript);
        self.budget = self.budget.saturating_sub(shown.len());
        shown
    }

    fn cut_json(&mut self, value: &Value) -> String {
        match value {
            Value::String(text) => self.cut(text),
            other => self.cut(&serde_json::to_string_pretty(other).unwrap_or_default()),
        }
    }
}

/// `text` whole when it fits in `limit` bytes; else its head and tail with
/// a line saying how much was cut and where the whole text is. The result
/// is never longer than `limit` (for limits of at least 200 bytes).
pub fn cut_middle(text: &str, limit: usize, transcript: &str) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let note = format!(
        "\n[… cut: {} bytes in all; the whole text is in {transcript} …]\n",
        text.len()
    );
    let room = limit.saturating_sub(note.len().min(limit / 2));
    let mut head = room / 2;
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len() - (room - room / 2);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    let note = if note.len() > limit / 2 {
        format!("\n[… cut: {} bytes in all …]\n", text.len())
    } else {
        note
    };
    format!("{}{note}{}", &text[..head], &text[tail..])
}

/// One task's data for the page, and its status when it finished.
fn task_value(out: &OutDir, task: &str) -> (Value, Option<Status>) {
    let transcript = out
        .read_file(Some(task), TRANSCRIPT_FILE)
        .map_err(|error| error.to_string())
        .and_then(|bytes| {
            serde_json::from_slice::<Transcript>(&bytes).map_err(|error| error.to_string())
        });
    let mut cutter = Cutter::new(task);
    let mut patch_of = |name: &str| {
        out.read_file(Some(task), name)
            .ok()
            .map(|bytes| cutter.cut(&String::from_utf8_lossy(&bytes)))
    };
    let patch = patch_of(PATCH_FILE);
    let commit_patch = patch_of(super::sinks::COMMIT_PATCH_FILE);
    match transcript {
        Ok(transcript) => {
            let mut value = transcript_value(task, &transcript, &mut cutter);
            value["patch"] = json!(patch);
            value["commit_patch"] = json!(commit_patch);
            (value, transcript.status)
        }
        Err(error) => (
            json!({
                "id": task,
                "name": neutralize_chars(task),
                "status": "unknown",
                "reason": null,
                "message": neutralize_chars(&format!("no readable {TRANSCRIPT_FILE}: {error}")),
                "transcript": cutter.transcript,
                "patch": patch,
                "commit_patch": commit_patch,
            }),
            None,
        ),
    }
}

fn cost_value(cost: Cost) -> Value {
    match cost {
        Cost::Usd(usd) => json!(usd),
        Cost::Unknown => Value::Null,
    }
}

fn transcript_value(task: &str, transcript: &Transcript, cutter: &mut Cutter) -> Value {
    let pending = transcript
        .pauses
        .last()
        .filter(|pause| pause.resumed_at.is_none())
        .map(|pause| {
            pause
                .pending
                .iter()
                .map(|call| {
                    json!({
                        "name": neutralize_chars(&call.name),
                        "kind": call.kind.as_str(),
                        "rule": neutralize_chars(&call.rule),
                        "arguments": cutter.cut_json(&call.arguments),
                    })
                })
                .collect::<Vec<_>>()
        })
        .unwrap_or_default();
    let checks: Vec<Value> = transcript
        .checks
        .iter()
        .map(|check| {
            json!({
                "name": neutralize_chars(&check.name),
                "command": cutter.cut(&check.command),
                "passed": check.passed,
                "exit_code": check.exit_code,
                "expected_exit": check.expected_exit,
                "timed_out": check.timed_out,
                "duration_ms": check.duration_ms,
                "attempt": check.attempt,
                "output": cutter.cut(&check.output_tail),
                "locations": check.locations.iter().map(|at| {
                    let column = at.column.map(|column| format!(":{column}")).unwrap_or_default();
                    neutralize_chars(&format!("{}:{}{column}: {}", at.file, at.line, at.message))
                }).collect::<Vec<_>>(),
            })
        })
        .collect();
    let git = transcript.git.as_ref().map(|git| {
        json!({
            "commit": git.commit,
            "branch": git.branch.as_deref().map(neutralize_chars),
            "salvage_ref": git.salvage_ref.as_deref().map(neutralize_chars),
            "files": git.files.iter().map(|file| neutralize_chars(file)).collect::<Vec<_>>(),
            "note": neutralize_chars(&git.note),
        })
    });
    let usage = &transcript.usage;
    json!({
        "id": task,
        "name": neutralize_chars(task),
        "file": neutralize_chars(&transcript.task.file),
        "status": transcript.status.map_or("unfinished", |status| status.as_str()),
        "reason": transcript.reason.map(|reason| reason.as_str()),
        "message": transcript.message.as_deref().map(|message| cutter.cut(message)),
        "model": neutralize_chars(&transcript.manifest.model),
        "shard": transcript.manifest.shard.as_ref().map(|record| json!({
            "shard": neutralize_chars(&record.shard),
            "engine": record.engine.as_deref().map(neutralize_chars),
            "durations": record.durations.as_deref().map(neutralize_chars),
        })),
        "provider": neutralize_chars(&transcript.manifest.provider),
        "duration_ms": transcript.timings.duration_ms,
        "iterations": transcript.iterations,
        "steps": transcript.tool_calls.len(),
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_tokens": usage.cache_read_input_tokens,
        "cost_usd": cost_value(transcript.cost),
        "notes": transcript.notes.iter().map(|note| cutter.cut(note)).collect::<Vec<_>>(),
        "pending": pending,
        "checks": checks,
        "git": git,
        "output": transcript.output.as_deref().map(|output| cutter.cut(output)),
        "output_json": transcript.output_json.as_ref().map(|value| cutter.cut_json(value)),
        "turns": turns(transcript, cutter),
        "transcript": cutter.transcript,
    })
}

/// The conversation as turns: each user message (the prompt, nudges,
/// answers) and each model turn with its tool calls, joined with their
/// decisions and results by call id.
fn turns(transcript: &Transcript, cutter: &mut Cutter) -> Vec<Value> {
    let mut calls: HashMap<&str, &ToolCallEntry> = transcript
        .tool_calls
        .iter()
        .map(|call| (call.id.as_str(), call))
        .collect();
    let mut turns = Vec::new();
    for message in &transcript.messages {
        match message {
            Message::User { content } => {
                turns.push(json!({"role": "user", "text": cutter.cut(content), "calls": []}));
            }
            Message::Assistant {
                content,
                tool_calls,
            } => {
                let shown: Vec<Value> = tool_calls
                    .iter()
                    .filter_map(|call| calls.remove(call.id.as_str()))
                    .map(|entry| call_value(entry, cutter))
                    .collect();
                turns.push(json!({"role": "model", "text": cutter.cut(content), "calls": shown}));
            }
            Message::Tool { .. } => {}
        }
    }
    // Calls no model turn names (a script's tool commands), in order.
    let rest: Vec<Value> = transcript
        .tool_calls
        .iter()
        .filter(|entry| calls.contains_key(entry.id.as_str()))
        .map(|entry| call_value(entry, cutter))
        .collect();
    if !rest.is_empty() {
        turns.push(json!({"role": "tools", "text": "", "calls": rest}));
    }
    turns
}

fn call_value(entry: &ToolCallEntry, cutter: &mut Cutter) -> Value {
    let decision = entry.decision.as_ref();
    let result = entry.result.as_ref();
    json!({
        "name": neutralize_chars(&entry.name),
        "arguments": cutter.cut_json(&entry.arguments),
        "verdict": decision.map(|decision| neutralize_chars(&decision.verdict)),
        "rule": decision.map(|decision| neutralize_chars(&decision.rule)),
        "detail": decision.and_then(|decision| decision.detail.as_deref()).map(neutralize_chars),
        "duration_ms": entry.duration_ms,
        "ok": result.map(|result| result.ok),
        "ran": result.map(|result| result.ran),
        "output": result.map(|result| cutter.cut(&result.output)),
        "parent": entry.parent,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_in_a_script_block_cannot_close_it() {
        let value =
            json!({"text": "</script><script>alert(1)</script><!-- & \u{2028}\u{2029}\u{202e}"});
        let mut bytes = Vec::new();
        write_json(&mut bytes, &value).unwrap();
        let text = String::from_utf8(bytes).unwrap();
        for bad in ["<", ">", "&", "\u{2028}", "\u{2029}", "\u{202e}"] {
            assert!(!text.contains(bad), "{bad:?} in {text}");
        }
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back, value);
    }

    #[test]
    fn a_long_text_keeps_head_and_tail_within_the_limit_and_names_the_transcript() {
        let text = format!("{}{}", "a".repeat(10_000), "é".repeat(5_000));
        let cut = cut_middle(&text, TEXT_BYTES, "t/transcript.json");
        assert!(cut.len() <= TEXT_BYTES, "{}", cut.len());
        assert!(cut.starts_with("aaaa") && cut.ends_with('é'));
        assert!(cut.contains("20000 bytes in all; the whole text is in t/transcript.json"));
        assert_eq!(cut_middle("short", TEXT_BYTES, "x"), "short");
        let small = cut_middle(&text, SMALL_BYTES, "t/transcript.json");
        assert!(small.len() <= SMALL_BYTES, "{}", small.len());
    }

    #[test]
    fn a_task_spends_its_budget_then_gets_small_cuts() {
        let mut cutter = Cutter::new("t");
        let big = "x".repeat(100_000);
        let mut total = 0;
        for _ in 0..60 {
            total += cutter.cut(&big).len();
        }
        assert!(
            total <= TASK_BUDGET + TEXT_BYTES + 60 * SMALL_BYTES,
            "{total}"
        );
        assert!(cutter.cut("\u{202e}evil\u{7}").contains("\\u{202e}"));
    }

    /// A transcript of `steps` turns, each with a model text and a tool
    /// result of `bytes` bytes (and planted markup).
    fn synthetic(steps: usize, bytes: usize) -> Transcript {
        let records = crate::report::testdata::records_two_files();
        let mut transcript = super::super::build_transcript(
            &records
                .into_iter()
                .filter(|record| record.task == records_task())
                .collect::<Vec<_>>(),
        );
        let text = format!("</script><img src=x onerror=alert(1)>{}", "m".repeat(bytes));
        for step in 0..steps {
            let id = format!("call_{step}");
            transcript.messages.push(Message::Assistant {
                content: text.clone(),
                tool_calls: vec![
                    serde_json::from_value(json!({"id": id, "name": "run_shell", "arguments": {"command": "make test"}}))
                        .unwrap(),
                ],
            });
            transcript.tool_calls.push(
                serde_json::from_value(json!({
                    "id": id, "name": "run_shell", "arguments": {"command": "make test"},
                    "decision": {"verdict": "allow", "rule": "allow[0] run_shell(make *)", "detail": null, "resolved": null},
                    "result": {"ok": true, "ran": true, "output": "o".repeat(bytes), "truncated": false},
                    "duration_ms": 12
                }))
                .unwrap(),
            );
        }
        transcript
    }

    fn records_task() -> String {
        crate::report::testdata::records_two_files()[0].task.clone()
    }

    /// 200 tasks × 30 steps, every text far over the cut: under 10 MB,
    /// and the planted markup stays data.
    #[test]
    fn a_run_of_200_tasks_of_30_steps_stays_under_10_mb() {
        let dir = tempfile::tempdir().unwrap();
        let out = OutDir::open(Path::new("out"), dir.path()).unwrap();
        let json = serde_json::to_vec(&synthetic(30, 20_000)).unwrap();
        std::fs::write(dir.path().join("first.json"), &json).unwrap();
        let tasks: Vec<String> = (0..200).map(|n| format!("task-{n:03}")).collect();
        for task in &tasks {
            std::fs::create_dir(dir.path().join("out").join(task)).unwrap();
            std::fs::hard_link(
                dir.path().join("first.json"),
                dir.path().join("out").join(task).join(TRANSCRIPT_FILE),
            )
            .unwrap();
        }
        let mut page = Vec::new();
        write_page(&out, &tasks, &PageInfo::default(), &mut page).unwrap();
        let page = String::from_utf8(page).unwrap();
        assert!(page.len() < 10_000_000, "{} bytes", page.len());
        assert_eq!(page.matches("class=\"ybs-task\"").count(), 200);
        assert!(page.contains("the whole text is in task-199/transcript.json"));
        assert!(!page.contains("<img") && page.matches("</script>").count() == 203);
        eprintln!("200 × 30 steps: {} bytes", page.len());
    }

    #[test]
    fn the_policy_hashes_the_inline_script_and_style() {
        let csp = content_security_policy();
        assert!(csp.starts_with("default-src 'none'; script-src 'sha256-"));
        assert!(csp.contains(&csp_hash(SCRIPT)) && csp.contains(&csp_hash(STYLE)));
        assert!(csp.contains("img-src 'none'"));
        assert!(!SCRIPT.contains("</script") && !STYLE.contains("</style"));
    }
}
