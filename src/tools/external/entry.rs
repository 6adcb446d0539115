//! What discovery finds: a tool's source, status and schema.

use std::path::PathBuf;
use std::time::Duration;

use super::cache::FileStamp;
use super::schema::{SchemaError, ToolSchema};

/// Where a tool was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// An operator config's `tools.external` entry.
    Config,
    /// A path a task lists in `tools.external`.
    Task,
    /// A `tools.external` entry of the repository's `./.ybs.json`.
    RepositoryConfig,
    /// `./tools` of the directory ybs runs in: repository content.
    Repository,
    /// `~/.ybs/tools`.
    User,
    /// A `tools.search_paths` directory.
    SearchPath,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Config => "config",
            Self::Task => "task",
            Self::RepositoryConfig => "repository-config",
            Self::Repository => "./tools",
            Self::User => "~/.ybs/tools",
            Self::SearchPath => "search-path",
        }
    }

    /// Returns true if and only if the operator put the tool there, so it
    /// is enabled without being named.
    pub fn operator(self) -> bool {
        match self {
            Self::Config | Self::User | Self::SearchPath => true,
            Self::Task | Self::RepositoryConfig | Self::Repository => false,
        }
    }
}

/// A tool's state (docs/tools.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Schema known and valid: offered to the model.
    Ready,
    /// Runs under `ybs tools invoke`, not offered to the model.
    SchemaUnknown,
    MissingBinary,
    InvalidSchema,
    NotExecutable,
    /// Not enabled (repository tool nobody enabled) or `enabled: false`.
    Disabled,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::SchemaUnknown => "schema-unknown",
            Self::MissingBinary => "missing-binary",
            Self::InvalidSchema => "invalid-schema",
            Self::NotExecutable => "not-executable",
            Self::Disabled => "disabled",
        }
    }
}

/// One tool as discovered.
#[derive(Debug, Clone)]
pub struct Entry {
    pub name: String,
    /// Absolute path of the executable.
    pub path: PathBuf,
    pub source: Source,
    pub status: Status,
    /// Why the status is what it is, for anything but `ready`.
    pub detail: Option<String>,
    /// `operator`, `task`, `invoke` or `policy`; `None` when not enabled.
    pub enabled_by: Option<&'static str>,
    pub schema: Option<ToolSchema>,
    /// `config`, `sidecar` or `--schema`.
    pub schema_from: Option<&'static str>,
    pub timeout: Duration,
    /// The path with symlinks resolved: the key of cache and metrics.
    pub canonical: PathBuf,
    /// Config description, which beats the schema's.
    pub(super) description_override: Option<String>,
    pub(super) stamp: Option<FileStamp>,
}

impl Entry {
    /// The description offered to the model.
    pub fn description(&self) -> String {
        self.description_override
            .clone()
            .filter(|text| !text.is_empty())
            .or_else(|| {
                self.schema
                    .as_ref()
                    .map(|schema| schema.description.clone())
                    .filter(|text| !text.is_empty())
            })
            .unwrap_or_else(|| format!("External tool `{}`.", self.name))
    }

    /// Returns true if and only if the tool may be run (`ready` or
    /// `schema-unknown`).
    pub fn runnable(&self) -> bool {
        matches!(self.status, Status::Ready | Status::SchemaUnknown)
    }
}

/// Every tool found, in precedence order, one per name.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub entries: Vec<Entry>,
    /// Tools found after one of the same name: never run, listed by
    /// `ybs tools list` as shadowed (an operator tool wins over a
    /// repository tool of its name, docs/security.md S5).
    pub shadowed: Vec<Entry>,
}

impl Catalog {
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.name == name)
    }
}

impl Entry {
    /// A schema's own `timeout_seconds` applies unless config set one.
    pub(super) fn adopt_schema_timeout(&mut self) {
        if let Some(timeout) = self.schema.as_ref().and_then(|schema| schema.timeout)
            && !matches!(self.source, Source::Config | Source::RepositoryConfig)
        {
            self.timeout = timeout;
        }
    }

    pub(super) fn sidecar_schema(
        &mut self,
        schema: Result<ToolSchema, SchemaError>,
        from: &'static str,
    ) {
        self.schema_from = Some(from);
        match schema {
            Ok(schema) => {
                self.status = Status::Ready;
                self.schema = Some(schema);
            }
            Err(reason) => {
                self.status = Status::InvalidSchema;
                self.detail = Some(format!("{from}: {reason}"));
            }
        }
    }
}
