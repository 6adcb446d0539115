//! Loading task files (docs/task-files.md): the single-task form (task fields at the
//! top level, `id` defaults to the file stem) and the list form
//! (`version`, `name`, `defaults`, `vars`, `tasks`). Every diagnostic of
//! every file is collected before anything is returned.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use crate::core::ids::is_valid_task_id;
use crate::core::named::NamedFiles;
use crate::core::span::Span;
use crate::core::text::closest;

use super::discover::{discover, duplicate_ids_across_files};
use super::layer::{CheckLayer, TASK_FIELDS, TaskLayer, decode_vars, defaults_fields};
use super::model::{CheckSpec, TaskFile, TaskSpec, ToolsSpec};
use super::vars::substitute;
use crate::core::decode::yaml::{Node, NodeKind, parse};
use crate::core::decode::{Decoder, Fields, Spanned};
use crate::core::decode::{Diagnostic, Diagnostics};

/// Top-level keys of the list form.
pub const FILE_FIELDS: &[&str] = &["version", "name", "defaults", "vars", "tasks"];

/// Said wherever a file tries to hold an API key.
pub const API_KEY_MESSAGE: &str =
    "API keys come from the environment (OPENAI_API_KEY, ANTHROPIC_API_KEY), never from files";

/// Loads every task file under `paths` (files, or directories searched
/// recursively for `*.yaml` and `*.yml`, in sorted order). `cli_vars`
/// (`--var KEY=VALUE`) override every file's `vars`. Returns every
/// diagnostic of every file, including task ids used twice in the run.
/// A file over `max_bytes` is refused before it is parsed, having read at
/// most `max_bytes + 1` bytes of it.
pub fn load(
    paths: &[PathBuf],
    cli_vars: &[(String, String)],
    max_bytes: u64,
) -> Result<Vec<TaskFile>, Diagnostics> {
    let (loaded, diagnostics) = load_each(paths, cli_vars, max_bytes, &NamedFiles::default());
    if diagnostics.is_empty() {
        Ok(loaded)
    } else {
        Err(Diagnostics(diagnostics))
    }
}

/// [`load`], keeping the files that loaded when others did not (so
/// `ybs validate` can check their policies too): those files, and every
/// diagnostic. The files a task file names are read by `named`'s rules.
pub fn load_each(
    paths: &[PathBuf],
    cli_vars: &[(String, String)],
    max_bytes: u64,
    named: &NamedFiles,
) -> (Vec<TaskFile>, Vec<Diagnostic>) {
    let (files, mut diagnostics) = discover(paths);
    let mut loaded = Vec::new();
    for path in files {
        let text = match read_bounded(&path, max_bytes) {
            Ok(text) => text,
            Err(diagnostic) => {
                diagnostics.push(*diagnostic);
                continue;
            }
        };
        match load_str_with(&path, &text, cli_vars, named) {
            Ok(file) => loaded.push(file),
            Err(errors) => diagnostics.extend(errors),
        }
    }
    diagnostics.extend(duplicate_ids_across_files(&loaded));
    (loaded, diagnostics)
}

/// The file's text, refused when it is longer than `max_bytes` (reading
/// at most one byte more, so memory stays bounded whatever its size).
fn read_bounded(path: &Path, max_bytes: u64) -> Result<String, Box<Diagnostic>> {
    use std::io::Read;
    let cannot = |error: std::io::Error| {
        Box::new(Diagnostic::whole_file(
            path,
            format!("cannot read the file: {error}"),
        ))
    };
    let file = std::fs::File::open(path).map_err(cannot)?;
    let mut bytes = Vec::new();
    file.take(max_bytes.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(cannot)?;
    if bytes.len() as u64 > max_bytes {
        return Err(Box::new(
            Diagnostic::whole_file(
                path,
                format!("the task file is larger than {max_bytes} bytes"),
            )
            .with_hint("split it into smaller files, or raise `safety.max_task_file_bytes` in the operator's config"),
        ));
    }
    String::from_utf8(bytes).map_err(|_| {
        Box::new(Diagnostic::whole_file(
            path,
            "cannot read the file: it is not UTF-8 text",
        ))
    })
}

/// Loads one task file from text; `path` names it in diagnostics and
/// gives the default suite name and (single-task form) task id.
pub fn load_str(
    path: &Path,
    text: &str,
    cli_vars: &[(String, String)],
) -> Result<TaskFile, Diagnostics> {
    load_str_with(path, text, cli_vars, &NamedFiles::default())
}

/// [`load_str`], the files the task file names read by `named`'s rules
/// (`safety.blocked_paths`).
pub fn load_str_with(
    path: &Path,
    text: &str,
    cli_vars: &[(String, String)],
    named: &NamedFiles,
) -> Result<TaskFile, Diagnostics> {
    let mut decoder = Decoder::new(path).with_named_files(named);
    let (root, errors) = parse(text);
    decoder.yaml_errors(errors);
    let file = match root {
        Some(root) => decode_file(&mut decoder, &root, cli_vars),
        None => {
            if decoder.error_count() == 0 {
                decoder.error_with_hint(
                    Span::new(1, 1),
                    "the task file is empty",
                    "a task needs at least `prompt:`",
                );
            }
            None
        }
    };
    let diagnostics = decoder.finish();
    match file {
        Some(file) if diagnostics.is_empty() => Ok(file),
        _ => Err(Diagnostics(diagnostics)),
    }
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn decode_file(
    decoder: &mut Decoder<'_>,
    root: &Node,
    cli_vars: &[(String, String)],
) -> Option<TaskFile> {
    if !matches!(root.kind, NodeKind::Map(_)) {
        decoder.expected(
            root,
            "task file",
            "a mapping of task fields, or `tasks:` with a list",
        );
        return None;
    }
    let stem = file_stem(decoder.path());
    let has_tasks = root.get("tasks").is_some();
    let (suite, tasks) = if has_tasks {
        decode_list_form(decoder, root, &stem, cli_vars)?
    } else {
        decode_single_form(decoder, root, &stem, cli_vars)?
    };
    Some(TaskFile {
        path: decoder.path().to_path_buf(),
        suite,
        tasks,
    })
}

/// Task fields plus `version` and `name` at the top level.
fn decode_single_form(
    decoder: &mut Decoder<'_>,
    root: &Node,
    stem: &str,
    cli_vars: &[(String, String)],
) -> Option<(String, Vec<TaskSpec>)> {
    let written_id = match root.get("id").map(|node| &node.kind) {
        Some(NodeKind::Str(id)) => Some(id.clone()),
        _ => None,
    };
    let context = format!("task `{}`", written_id.as_deref().unwrap_or(stem));
    let mut allowed = TASK_FIELDS.to_vec();
    allowed.extend(["version", "name"]);
    let fields = decoder.fields_with_hint(root, &context, &allowed, |key| match key {
        "defaults" => Some(
            "`defaults:` applies to a `tasks:` list; put the fields at the top level".to_owned(),
        ),
        _ => common_hint(key),
    })?;
    check_version(decoder, &fields);
    let suite = suite_name(decoder, &fields, stem);
    let layer = TaskLayer::decode(decoder, &fields);
    let id = match &layer.id {
        Some(id) => id.clone(),
        None => {
            if !is_valid_task_id(stem) {
                decoder.error_with_hint(
                    fields.span,
                    format!(
                        "the file name `{stem}` is not a valid task id (`[a-z0-9][a-z0-9._-]*`)"
                    ),
                    "set `id:` in the file, or rename it",
                );
                return None;
            }
            Spanned::new(stem.to_owned(), fields.span)
        }
    };
    let task = build_task(
        decoder,
        layer,
        &TaskLayer::default(),
        &BTreeMap::new(),
        cli_vars,
        Meta {
            id,
            suite: &suite,
            span: fields.span,
            prompt_typo: fields.has_typo_of("prompt", &allowed),
        },
    );
    Some((suite, task.into_iter().collect()))
}

/// `version`, `name`, `defaults`, `vars`, `tasks`.
fn decode_list_form(
    decoder: &mut Decoder<'_>,
    root: &Node,
    stem: &str,
    cli_vars: &[(String, String)],
) -> Option<(String, Vec<TaskSpec>)> {
    let fields = decoder.fields_with_hint(root, "the task file", FILE_FIELDS, |key| {
        if TASK_FIELDS.contains(&key) {
            Some(format!(
                "`{key}` goes under `defaults:` or in each entry of `tasks:`"
            ))
        } else {
            common_hint(key)
        }
    })?;
    check_version(decoder, &fields);
    let suite = suite_name(decoder, &fields, stem);
    let file_vars = fields
        .node("vars")
        .map(|node| decode_vars(decoder, node))
        .unwrap_or_default();
    let defaults = fields
        .node("defaults")
        .map(|node| decode_defaults(decoder, node))
        .unwrap_or_default();
    let items = match fields.node("tasks").map(|node| (node, &node.kind)) {
        Some((_, NodeKind::Seq(items))) if !items.is_empty() => items,
        Some((node, NodeKind::Seq(_) | NodeKind::Null)) => {
            decoder.error(
                node.span,
                "`tasks` is empty: a task file needs at least one task",
            );
            return None;
        }
        Some((node, _)) => {
            decoder.expected(node, "tasks", "a list of tasks");
            return None;
        }
        None => return None,
    };
    let mut seen: HashMap<String, Span> = HashMap::new();
    let mut tasks = Vec::new();
    for (index, item) in items.iter().enumerate() {
        let Some((layer, meta_id, prompt_typo)) = decode_list_task(decoder, item, index) else {
            continue;
        };
        if let Some(first) = seen.get(&meta_id.value) {
            decoder.error(
                meta_id.span,
                format!(
                    "duplicate task id `{}` (first used at line {}, column {})",
                    meta_id.value, first.line, first.col
                ),
            );
            continue;
        }
        seen.insert(meta_id.value.clone(), meta_id.span);
        let meta = Meta {
            id: meta_id,
            suite: &suite,
            span: item.span,
            prompt_typo,
        };
        tasks.extend(build_task(
            decoder, layer, &defaults, &file_vars, cli_vars, meta,
        ));
    }
    Some((suite, tasks))
}

/// One entry of `tasks:`; its `id` is required.
fn decode_list_task(
    decoder: &mut Decoder<'_>,
    item: &Node,
    index: usize,
) -> Option<(TaskLayer, Spanned<String>, bool)> {
    let context = match item.get("id").map(|node| &node.kind) {
        Some(NodeKind::Str(id)) => format!("task `{id}`"),
        _ => format!("task #{}", index + 1),
    };
    let fields = decoder.fields_with_hint(item, &context, TASK_FIELDS, common_hint)?;
    let layer = TaskLayer::decode(decoder, &fields);
    match &layer.id {
        Some(id) => {
            let id = id.clone();
            Some((layer, id, fields.has_typo_of("prompt", TASK_FIELDS)))
        }
        None => {
            if !fields.has("id") && !fields.has_typo_of("id", TASK_FIELDS) {
                decoder.error_with_hint(
                    item.span,
                    format!("missing required field `id` in {context}"),
                    "every task in a `tasks:` list needs an `id`",
                );
            }
            None
        }
    }
}

/// `defaults:`: every task field except `id` and `prompt`.
fn decode_defaults(decoder: &mut Decoder<'_>, node: &Node) -> TaskLayer {
    let allowed = defaults_fields();
    let Some(fields) =
        decoder.fields_accepting(node, "`defaults`", &allowed, &["id", "prompt"], common_hint)
    else {
        return TaskLayer::default();
    };
    for key in ["id", "prompt"] {
        if let Some((key, _)) = fields.entry(key) {
            decoder.error_with_hint(
                key.span,
                format!("`{}` cannot be set in `defaults`", key.name),
                format!("set `{}` in each entry of `tasks:`", key.name),
            );
        }
    }
    let mut layer = TaskLayer::decode(decoder, &fields);
    layer.id = None;
    layer.prompt = None;
    layer
}

fn common_hint(key: &str) -> Option<String> {
    (key == "api_key").then(|| API_KEY_MESSAGE.to_owned())
}

fn check_version(decoder: &mut Decoder<'_>, fields: &Fields<'_>) {
    if let Some(node) = fields.node("version") {
        let ok = match &node.kind {
            NodeKind::Int(version) => *version == 1,
            NodeKind::Str(version) => version == "1",
            _ => false,
        };
        if !ok {
            decoder.error_with_hint(
                node.span,
                format!(
                    "unsupported task file version {}, expected `1`",
                    node.describe()
                ),
                "this version of ybs reads task files of version 1",
            );
        }
    }
}

fn suite_name(decoder: &mut Decoder<'_>, fields: &Fields<'_>, stem: &str) -> String {
    let name: Option<String> = fields.get(decoder, "name");
    name.unwrap_or_else(|| stem.to_owned())
}

/// What a task is besides its fields.
struct Meta<'a> {
    id: Spanned<String>,
    suite: &'a str,
    /// Where the task starts.
    span: Span,
    /// An unknown key of the task is a typo of `prompt` (already reported
    /// with a hint, so a missing `prompt` is not reported again).
    prompt_typo: bool,
}

/// Merges `layer` over `defaults`, checks the id, substitutes vars.
fn build_task(
    decoder: &mut Decoder<'_>,
    layer: TaskLayer,
    defaults: &TaskLayer,
    file_vars: &BTreeMap<String, String>,
    cli_vars: &[(String, String)],
    meta: Meta<'_>,
) -> Option<TaskSpec> {
    let before = decoder.error_count();
    let merged = layer.over(defaults);
    if !is_valid_task_id(&meta.id.value) {
        decoder.error(
            meta.id.span,
            format!(
                "invalid task id `{}`: expected lowercase letters, digits, `.`, `_` or `-`, starting with a letter or digit",
                meta.id.value
            ),
        );
    }
    let mut vars = file_vars.clone();
    vars.extend(merged.vars.clone());
    vars.extend(cli_vars.iter().cloned());
    let prompt = match &merged.prompt {
        Some(prompt) if prompt.value.trim().is_empty() => {
            decoder.error(prompt.span, "invalid `prompt`: must not be empty");
            None
        }
        Some(prompt) => placeholders(decoder, &vars, prompt, "prompt"),
        None => None,
    };
    let system = merged
        .system
        .as_ref()
        .and_then(|system| placeholders(decoder, &vars, system, "system"));
    let workdir = merged
        .workdir
        .as_ref()
        .and_then(|workdir| placeholders(decoder, &vars, workdir, "workdir"));
    let checks: Vec<CheckSpec> = merged
        .checks
        .iter()
        .flatten()
        .filter_map(|check| build_check(decoder, &vars, check))
        .collect();
    if merged.prompt.is_none() && !meta.prompt_typo {
        decoder.error_with_hint(
            meta.span,
            format!(
                "missing required field `prompt` in task `{}`",
                meta.id.value
            ),
            "add `prompt:` with what the agent should do",
        );
    }
    if decoder.error_count() != before {
        return None;
    }
    Some(TaskSpec {
        id: meta.id.value,
        file: decoder.path().to_path_buf(),
        suite: meta.suite.to_owned(),
        span: meta.span,
        prompt: prompt?,
        system,
        workdir: workdir.map(PathBuf::from),
        workdir_span: merged.workdir.as_ref().map(|workdir| workdir.span),
        llm: merged.llm,
        tools: ToolsSpec {
            builtin: merged.builtin_tools,
            external: merged.external_tools.unwrap_or_default(),
            required_external: merged.required_external,
            script: merged.script_tool.unwrap_or(false),
            caller: merged.caller_tools.unwrap_or_default(),
            mcp: merged.mcp_servers.unwrap_or_default(),
        },
        policy: defaults
            .policy
            .iter()
            .chain(&merged.policy)
            .cloned()
            .collect(),
        limits: merged.limits,
        checks,
        fix_attempts: merged.fix_attempts.unwrap_or(0),
        commit: merged.commit.unwrap_or_default(),
        expect: merged.expect.unwrap_or_default(),
        context: merged.context.unwrap_or_default(),
        output: merged.output,
    })
}

fn build_check(
    decoder: &mut Decoder<'_>,
    vars: &BTreeMap<String, String>,
    check: &CheckLayer,
) -> Option<CheckSpec> {
    let run = placeholders(decoder, vars, &check.run, "run");
    let name = match &check.name {
        Some(name) => placeholders(decoder, vars, name, "name"),
        None => run.clone(),
    };
    Some(CheckSpec {
        name: name?,
        run: run?,
        timeout: check.timeout,
        expect_exit: check.expect_exit,
        network: check.network,
        network_span: check.network_span,
    })
}

/// Substitutes `{{name}}` placeholders; an unknown one is reported at the
/// field's position.
fn placeholders(
    decoder: &mut Decoder<'_>,
    vars: &BTreeMap<String, String>,
    text: &Spanned<String>,
    field: &str,
) -> Option<String> {
    match substitute(&text.value, vars) {
        Ok(text) => Some(text),
        Err(unknown) => {
            for name in unknown {
                let hint = match closest(&name, vars.keys().map(String::as_str)) {
                    Some(near) => format!("did you mean `{{{{{near}}}}}`?"),
                    None => format!("define it under `vars:` or pass `--var {name}=VALUE`"),
                };
                decoder.error_with_hint(
                    text.span,
                    format!("unknown placeholder `{{{{{name}}}}}` in `{field}`"),
                    hint,
                );
            }
            None
        }
    }
}
