//! Finding external tools and their schemas (docs/tools.md).
//!
//! Places, first match of a name wins: the operator's `tools.external`
//! entries, `~/.ybs/tools` and `tools.search_paths`; then the
//! repository's: paths a task lists, the repository config's entries,
//! `./tools` (of the directory ybs runs in). A later tool of a name
//! already found is kept as shadowed, for `ybs tools list`. A directory contributes its executable files
//! (not subdirectories, not dot files, not `*.tool.json`); a
//! non-executable file is listed (as `not-executable`) only when it has a
//! sidecar, so READMEs and data files stay out of the list.
//!
//! Trust: an executable from the repository (`./tools`, a repository
//! config entry) is never run, not even with `--schema`, unless something
//! enables it: the task naming it, `ybs tools invoke NAME`, or an allow
//! rule of the policy. Tools the operator installed (`~/.ybs/tools`,
//! `tools.search_paths`, operator `tools.external`) are enabled as found.
//! A sidecar `TOOL.tool.json` is read without executing anything.
//!
//! A `--schema` answer is cached by path, size and mtime
//! ([`super::cache`]), so an unchanged tool is spawned for its schema once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use futures_util::future::join_all;
use serde_json::Value;

use super::cache::{FileStamp, SchemaCache, SchemaProbe};
use super::entry::{Catalog, Entry, Source, Status};
use super::schema::{SchemaError, ToolSchema};
use crate::tools::ChildEnv;
use crate::tools::process::ProcessSpec;

/// How long `TOOL --schema` may take.
pub const SCHEMA_TIMEOUT: Duration = Duration::from_secs(5);
/// The default timeout of one call (docs/tools.md).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest schema read (sidecar or `--schema` output).
const MAX_SCHEMA_BYTES: usize = 1 << 20;
/// The variable every tool process gets.
pub const MODE_VAR: (&str, &str) = ("YBS_TOOL_MODE", "subprocess");

/// A tool declared in config (`tools.external`).
#[derive(Debug, Clone, PartialEq)]
pub struct Declared {
    pub name: String,
    /// Absolute, or relative to the directory ybs runs in; `~/` expands.
    pub path: PathBuf,
    pub description: Option<String>,
    /// Inline schema parameters (seed map or JSON Schema).
    pub parameters: Option<Value>,
    pub timeout: Duration,
    pub enabled: bool,
    /// [`Source::Config`] or [`Source::RepositoryConfig`].
    pub source: Source,
}

/// Where to look.
#[derive(Debug, Clone, Default)]
pub struct DiscoverySettings {
    /// The directory ybs runs in: `./tools` and relative paths.
    pub cwd: PathBuf,
    pub home: Option<PathBuf>,
    pub search_paths: Vec<PathBuf>,
    pub declared: Vec<Declared>,
    /// ybs's cache directory; `None` disables the schema cache.
    pub cache_dir: Option<PathBuf>,
    /// Confines `TOOL --schema` like a call (docs/security.md S1).
    pub sandbox: Option<std::sync::Arc<crate::tools::sandbox::Sandbox>>,
}

/// What enables tools beyond the operator's own: names (a task's
/// `tools.external`, `ybs tools invoke NAME`) and the policy.
pub struct Enable<'a> {
    /// Names or paths (an entry containing `/` is a path).
    pub names: &'a [String],
    /// Why those names are enabled: `task` or `invoke`.
    pub named_by: &'static str,
    /// True if the policy allows calling the tool by an explicit rule.
    pub policy: &'a dyn Fn(&str) -> bool,
}

impl Enable<'_> {
    /// Nothing beyond the operator's tools.
    pub fn none() -> Enable<'static> {
        Enable {
            names: &[],
            named_by: "task",
            policy: &|_| false,
        }
    }
}

/// Finds every tool, reads sidecars and config schemas, and asks the
/// enabled tools without one for `--schema` (cached). Never fails: what
/// cannot be used is listed with its status and reason.
pub async fn discover(
    settings: &DiscoverySettings,
    enable: &Enable<'_>,
    env: &ChildEnv,
) -> Catalog {
    let mut catalog = scan(settings, enable);
    let mut cache = SchemaCache::open(settings.cache_dir.as_deref());
    let mut env = env.clone();
    env.set(MODE_VAR.0, MODE_VAR.1);
    let mut pending = Vec::new();
    for (index, entry) in catalog.entries.iter_mut().enumerate() {
        if entry.status != Status::SchemaUnknown || entry.schema_from.is_some() {
            continue;
        }
        let Some(stamp) = entry.stamp else { continue };
        // Only a schema is cached: a probe that failed (a program the
        // sandbox could not reach, a busy machine) is tried again.
        match cache.get(&entry.canonical, stamp) {
            Some(probe @ SchemaProbe::Printed { .. }) => apply_probe(entry, probe.clone()),
            _ => pending.push(index),
        }
    }
    let probes = join_all(pending.iter().map(|&index| {
        probe_schema(
            &catalog.entries[index].path,
            &settings.cwd,
            &env,
            settings.sandbox.as_ref(),
        )
    }))
    .await;
    for (index, probe) in pending.into_iter().zip(probes) {
        let entry = &mut catalog.entries[index];
        if let Some(stamp) = entry.stamp
            && matches!(probe, SchemaProbe::Printed { .. })
        {
            cache.put(&entry.canonical, stamp, probe.clone());
        }
        apply_probe(entry, probe);
    }
    // A cache that cannot be written only costs a re-probe next time.
    let _ = cache.save();
    catalog
}

/// Everything that needs no process: candidates, statuses, sidecars.
/// Enabled tools still lacking a schema are left `schema-unknown` with no
/// `schema_from`, to be probed.
pub fn scan(settings: &DiscoverySettings, enable: &Enable<'_>) -> Catalog {
    let mut catalog = Catalog::default();
    let push = |catalog: &mut Catalog, mut entry: Entry| match catalog.get(&entry.name) {
        None => catalog.entries.push(entry),
        Some(winner) => {
            entry.detail = Some(format!(
                "shadowed by `{}` from {} ({})",
                winner.name,
                winner.source.as_str(),
                winner.path.display()
            ));
            catalog.shadowed.push(entry);
        }
    };
    let expand = |path: &Path| absolute(path, &settings.cwd, settings.home.as_deref());
    // The operator's tools first, so a repository tool of the same name
    // never replaces one (docs/security.md S5).
    for declared in settings
        .declared
        .iter()
        .filter(|d| d.source == Source::Config)
    {
        push(
            &mut catalog,
            declared_entry(declared, expand(&declared.path)),
        );
    }
    let mut operator_dirs = Vec::new();
    if let Some(home) = &settings.home {
        operator_dirs.push((home.join(".ybs").join("tools"), Source::User));
    }
    for dir in &settings.search_paths {
        operator_dirs.push((expand(dir), Source::SearchPath));
    }
    for (dir, source) in operator_dirs {
        for entry in scan_dir(&dir, source) {
            push(&mut catalog, entry);
        }
    }
    for named in enable.names.iter().filter(|name| name.contains('/')) {
        let path = expand(Path::new(named));
        if let Some(name) = tool_name(&path) {
            push(
                &mut catalog,
                file_entry(name, path, Source::Task, DEFAULT_TIMEOUT, None),
            );
        }
    }
    for declared in settings
        .declared
        .iter()
        .filter(|d| d.source != Source::Config)
    {
        push(
            &mut catalog,
            declared_entry(declared, expand(&declared.path)),
        );
    }
    for entry in scan_dir(&settings.cwd.join("tools"), Source::Repository) {
        push(&mut catalog, entry);
    }
    for named in enable.names.iter().filter(|name| !name.contains('/')) {
        if catalog.get(named).is_none() {
            let mut entry = file_entry(
                named.clone(),
                settings.cwd.join("tools").join(named),
                Source::Task,
                DEFAULT_TIMEOUT,
                None,
            );
            entry.status = Status::MissingBinary;
            entry.detail = Some(
                "not found in ./tools, ~/.ybs/tools, tools.search_paths or tools.external"
                    .to_owned(),
            );
            push(&mut catalog, entry);
        }
    }
    for entry in &mut catalog.entries {
        settle(entry, enable);
    }
    catalog
}

/// Decides enablement. A tool nobody enabled is `disabled`, unless
/// something already known without running it says more (missing,
/// not executable, invalid sidecar).
fn settle(entry: &mut Entry, enable: &Enable<'_>) {
    if entry.status == Status::Disabled {
        return;
    }
    let named = enable.names.iter().any(|name| {
        if name.contains('/') {
            entry.source == Source::Task
                && tool_name(Path::new(name)).as_deref() == Some(&entry.name)
        } else {
            name == &entry.name
        }
    });
    entry.enabled_by = if entry.source.operator() {
        Some("operator")
    } else if named {
        Some(enable.named_by)
    } else if (enable.policy)(&entry.name) {
        Some("policy")
    } else {
        None
    };
    if entry.enabled_by.is_none() && matches!(entry.status, Status::Ready | Status::SchemaUnknown) {
        entry.status = Status::Disabled;
        entry.detail = Some(
            "repository tool, not run until enabled by a task's tools.external, the policy or the operator config"
                .to_owned(),
        );
    }
}

/// An entry for a config declaration.
fn declared_entry(declared: &Declared, path: PathBuf) -> Entry {
    let inline = declared
        .parameters
        .as_ref()
        .map(|parameters| ToolSchema::from_config(declared.description.as_deref(), parameters));
    let mut entry = file_entry(
        declared.name.clone(),
        path,
        declared.source,
        declared.timeout,
        declared.description.clone(),
    );
    if !declared.enabled {
        entry.status = Status::Disabled;
        entry.detail = Some("`enabled: false` in the config".to_owned());
        return entry;
    }
    if entry.status == Status::SchemaUnknown
        && let Some(inline) = inline
    {
        entry.sidecar_schema(inline, "config");
    }
    entry
}

/// An entry for an executable at `path`: `missing-binary`,
/// `not-executable`, or (pending a schema) `schema-unknown`; a sidecar
/// beside it is read here.
fn file_entry(
    name: String,
    path: PathBuf,
    source: Source,
    timeout: Duration,
    description: Option<String>,
) -> Entry {
    let mut entry = Entry {
        name,
        canonical: path.canonicalize().unwrap_or_else(|_| path.clone()),
        path,
        source,
        status: Status::SchemaUnknown,
        detail: None,
        enabled_by: None,
        schema: None,
        schema_from: None,
        timeout,
        description_override: description,
        stamp: None,
    };
    match std::fs::metadata(&entry.path) {
        Err(error) => {
            entry.status = Status::MissingBinary;
            entry.detail = Some(format!("`{}`: {error}", entry.path.display()));
            return entry;
        }
        Ok(metadata) if !is_executable(&metadata) => {
            entry.status = Status::NotExecutable;
            entry.detail = Some(format!(
                "`{}` is not an executable file",
                entry.path.display()
            ));
        }
        Ok(metadata) => entry.stamp = Some(FileStamp::of(&metadata)),
    }
    if let Some(sidecar) = sidecar(&entry.path) {
        let schema = read_sidecar(&sidecar);
        let not_executable = entry.status == Status::NotExecutable;
        entry.sidecar_schema(schema, "sidecar");
        if not_executable {
            entry.status = Status::NotExecutable;
        }
        entry.adopt_schema_timeout();
    }
    entry
}

/// The tools of one directory, by file name.
fn scan_dir(dir: &Path, source: Source) -> Vec<Entry> {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut files: Vec<PathBuf> = listing
        .flatten()
        .map(|item| item.path())
        .filter(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| !name.starts_with('.') && !name.ends_with(".tool.json"))
        })
        .collect();
    files.sort();
    let mut entries = Vec::new();
    for path in files {
        let Some(name) = tool_name(&path) else {
            continue;
        };
        let metadata = std::fs::metadata(&path);
        let listed = match &metadata {
            Ok(metadata) if metadata.is_dir() => false,
            Ok(metadata) => is_executable(metadata) || sidecar(&path).is_some(),
            // A dangling symlink: shown, as missing-binary.
            Err(_) => std::fs::symlink_metadata(&path).is_ok(),
        };
        if listed {
            entries.push(file_entry(name, path, source, DEFAULT_TIMEOUT, None));
        }
    }
    entries
}

/// The tool name for a file: its name without the last extension, if it
/// is a valid tool name (`[A-Za-z0-9_-]{1,64}`).
pub fn tool_name(path: &Path) -> Option<String> {
    let stem = path.file_stem()?.to_str()?;
    valid_tool_name(stem).then(|| stem.to_owned())
}

/// Returns true if and only if providers accept `name` as a tool name.
pub fn valid_tool_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|byte| byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-')
}

fn is_executable(metadata: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::PermissionsExt;
    metadata.is_file() && metadata.permissions().mode() & 0o111 != 0
}

/// `TOOL.tool.json` (the full file name) or `STEM.tool.json`, if present.
fn sidecar(path: &Path) -> Option<PathBuf> {
    let dir = path.parent()?;
    let file_name = path.file_name()?.to_str()?;
    let stem = path.file_stem()?.to_str()?;
    [file_name, stem]
        .into_iter()
        .map(|base| dir.join(format!("{base}.tool.json")))
        .find(|candidate| candidate.is_file())
}

fn read_sidecar(path: &Path) -> Result<ToolSchema, SchemaError> {
    let bytes = std::fs::read(path).map_err(|error| SchemaError::Read(error.to_string()))?;
    if bytes.len() > MAX_SCHEMA_BYTES {
        return Err(SchemaError::TooLarge(MAX_SCHEMA_BYTES));
    }
    let value: Value =
        serde_json::from_slice(&bytes).map_err(|error| SchemaError::NotJson(error.to_string()))?;
    ToolSchema::parse(&value)
}

/// `path` made absolute against `cwd`, with a leading `~/` expanded.
fn absolute(path: &Path, cwd: &Path, home: Option<&Path>) -> PathBuf {
    if let (Ok(rest), Some(home)) = (path.strip_prefix("~"), home) {
        return home.join(rest);
    }
    if path.is_absolute() {
        path.to_owned()
    } else {
        cwd.join(path)
    }
}

/// Runs `TOOL --schema` with the hygiene of a call and a short timeout.
async fn probe_schema(
    path: &Path,
    cwd: &Path,
    env: &ChildEnv,
    sandbox: Option<&std::sync::Arc<crate::tools::sandbox::Sandbox>>,
) -> SchemaProbe {
    let spec = ProcessSpec {
        program: path.as_os_str().to_owned(),
        args: vec!["--schema".into()],
        cwd: cwd.to_owned(),
        env,
        stdin: None,
        timeout: SCHEMA_TIMEOUT,
        output_cap: MAX_SCHEMA_BYTES,
        sandbox: sandbox.cloned(),
    };
    let unknown = |reason: String| SchemaProbe::Unknown { reason };
    let output = match super::call::run_retrying_busy(spec).await {
        Ok(output) => output,
        Err(error) => return unknown(format!("`--schema` could not start: {error}")),
    };
    if output.timed_out {
        return unknown(format!(
            "`--schema` timed out after {}s",
            SCHEMA_TIMEOUT.as_secs()
        ));
    }
    if output.exit_code != Some(0) {
        return unknown(format!(
            "`--schema` exited with {}",
            match (output.exit_code, output.signal) {
                (Some(code), _) => format!("code {code}"),
                (None, Some(signal)) => format!("signal {signal}"),
                (None, None) => "an unknown status".to_owned(),
            }
        ));
    }
    if output.stdout_truncated {
        return unknown(format!(
            "`--schema` printed more than {MAX_SCHEMA_BYTES} bytes"
        ));
    }
    match serde_json::from_str::<Value>(output.stdout.trim()) {
        Ok(schema) => SchemaProbe::Printed { schema },
        Err(_) if output.stdout.trim().is_empty() => {
            unknown("`--schema` printed nothing".to_owned())
        }
        Err(_) => unknown("`--schema` printed something that is not JSON".to_owned()),
    }
}

fn apply_probe(entry: &mut Entry, probe: SchemaProbe) {
    match probe {
        SchemaProbe::Unknown { reason } => {
            entry.status = Status::SchemaUnknown;
            entry.detail = Some(reason);
        }
        SchemaProbe::Printed { schema } => {
            let looks_like_schema = schema.as_object().is_none_or(|object| {
                ["name", "description", "parameters"]
                    .iter()
                    .any(|key| object.contains_key(*key))
            });
            if !looks_like_schema {
                entry.status = Status::SchemaUnknown;
                entry.detail = Some("`--schema` printed JSON that is not a schema".to_owned());
                return;
            }
            entry.sidecar_schema(ToolSchema::parse(&schema), "--schema");
            entry.adopt_schema_timeout();
        }
    }
}
