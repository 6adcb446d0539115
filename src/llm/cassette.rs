//! The cassette format: recorded request/response pairs, read by the
//! `replay` provider and written by `--record`. Documented in docs/providers.md (Recording and replay).
//!
//! ```json
//! {"version": 1, "interactions": [
//!   {"task": "demo",
//!    "request": {"model": "...", "system": "...", "messages": [], "tools": []},
//!    "response": {"content": "", "tool_calls": [{"id": "c1", "name": "read_file",
//!                 "arguments": {"path": "x"}}], "usage": {"input_tokens": 10, "output_tokens": 5}}},
//!   {"error": {"kind": "status", "status": 500, "message": "boom"}}
//! ]}
//! ```
//! `request` is informational (replay answers in order); `task` is
//! optional: when any interaction names a task, each task is answered only
//! by the interactions naming it.

use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ChatRequest, ChatResponse, ProviderError};
use crate::core::Redactor;

pub const CASSETTE_VERSION: u32 = 1;

/// A whole cassette file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CassetteFile {
    pub version: u32,
    #[serde(default)]
    pub interactions: Vec<Interaction>,
}

/// One request and what came back.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interaction {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<ChatRequest>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<ChatResponse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

/// A failed request, replayed as the same error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RecordedError {
    /// `status`, `auth`, `missing_key`, `connect`, `timeout`, `stream`,
    /// `response_too_large` or `protocol`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<u16>,
    #[serde(default)]
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// A 429 that meant the quota was exhausted (replayed as not retryable).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub quota_exhausted: bool,
    /// The server's `x-should-retry`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub should_retry: Option<bool>,
}

impl RecordedError {
    pub fn from_error(error: &ProviderError) -> Self {
        let mut should_retry = None;
        let (kind, status, retry_after_ms, quota_exhausted) = match error {
            ProviderError::Auth { status, .. } => ("auth", Some(*status), None, false),
            ProviderError::MissingKey { .. } => ("missing_key", None, None, false),
            ProviderError::Status {
                status,
                retry_after,
                quota_exhausted,
                should_retry: retry,
                ..
            } => {
                should_retry = *retry;
                (
                    "status",
                    Some(*status),
                    retry_after.map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)),
                    *quota_exhausted,
                )
            }
            ProviderError::Connect { .. } => ("connect", None, None, false),
            ProviderError::Timeout(_) => ("timeout", None, None, false),
            ProviderError::Stream(_) => ("stream", None, None, false),
            ProviderError::ResponseTooLarge { .. } => ("response_too_large", None, None, false),
            ProviderError::KeyWithheld { .. }
            | ProviderError::WaitTooLong { .. }
            | ProviderError::Protocol(_)
            | ProviderError::Cassette(_)
            | ProviderError::Config(_) => ("protocol", None, None, false),
        };
        // The inner message, so a replayed error prints as the original did.
        let message = match error {
            ProviderError::MissingKey { var } => var.clone(),
            ProviderError::ResponseTooLarge { limit } => limit.to_string(),
            ProviderError::Auth { message, .. }
            | ProviderError::Status { message, .. }
            | ProviderError::Connect { message, .. }
            | ProviderError::Timeout(message)
            | ProviderError::Stream(message)
            | ProviderError::Protocol(message) => message.clone(),
            ProviderError::KeyWithheld { .. }
            | ProviderError::WaitTooLong { .. }
            | ProviderError::Cassette(_)
            | ProviderError::Config(_) => error.to_string(),
        };
        Self {
            kind: kind.to_owned(),
            status,
            message,
            retry_after_ms,
            quota_exhausted,
            should_retry,
        }
    }

    pub fn to_error(&self) -> ProviderError {
        let message = self.message.clone();
        match self.kind.as_str() {
            "auth" => ProviderError::Auth {
                status: self.status.unwrap_or(401),
                message,
            },
            "status" => ProviderError::Status {
                status: self.status.unwrap_or(500),
                message,
                retry_after: self.retry_after_ms.map(Duration::from_millis),
                quota_exhausted: self.quota_exhausted,
                should_retry: self.should_retry,
            },
            "response_too_large" => ProviderError::ResponseTooLarge {
                limit: message.parse().unwrap_or_default(),
            },
            "connect" => ProviderError::Connect {
                endpoint: "replay".to_owned(),
                message,
            },
            "missing_key" => ProviderError::MissingKey { var: message },
            "timeout" => ProviderError::Timeout(message),
            "stream" => ProviderError::Stream(message),
            _ => ProviderError::Protocol(message),
        }
    }
}

/// Why a cassette cannot be read or written; each names the file.
#[derive(Debug, thiserror::Error)]
pub enum CassetteError {
    #[error("{}: cannot read cassette: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// Not JSON, or not a cassette: at the parser's line and column.
    #[error("{}:{}:{}: invalid cassette: {source}", path.display(), source.line(), source.column())]
    Invalid {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    #[error(
        "{}: unsupported cassette version {version} (this ybs reads version {CASSETTE_VERSION})",
        path.display()
    )]
    Version { path: PathBuf, version: u32 },
    #[error("{}: interaction {index} needs exactly one of `response` or `error`", path.display())]
    Interaction { path: PathBuf, index: usize },
    /// The cassette beside a task file, refused or unreadable beneath
    /// its repository (docs/security.md S8).
    #[error("{}: cannot read cassette: {source}", path.display())]
    Named {
        path: PathBuf,
        #[source]
        source: crate::core::named::NamedFileError,
    },
    #[error("{}: cannot write cassette: {source}", path.display())]
    Write {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl CassetteFile {
    /// Reads and parses a cassette; errors name the file and the position.
    pub fn load(path: &Path) -> Result<Self, CassetteError> {
        let text = std::fs::read_to_string(path).map_err(|source| CassetteError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses a cassette's `text`, read from `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, CassetteError> {
        let file: CassetteFile =
            serde_json::from_str(text).map_err(|source| CassetteError::Invalid {
                path: path.to_owned(),
                source,
            })?;
        if file.version != CASSETTE_VERSION {
            return Err(CassetteError::Version {
                path: path.to_owned(),
                version: file.version,
            });
        }
        for (index, interaction) in file.interactions.iter().enumerate() {
            if interaction.response.is_some() == interaction.error.is_some() {
                return Err(CassetteError::Interaction {
                    path: path.to_owned(),
                    index,
                });
            }
        }
        Ok(file)
    }
}

/// A cassette shared by every task of a run, with its replay position.
#[derive(Debug)]
pub struct Cassette {
    path: PathBuf,
    interactions: Vec<Interaction>,
    tagged: bool,
    used: Mutex<Vec<bool>>,
}

impl Cassette {
    pub fn open(path: &Path) -> Result<Arc<Self>, CassetteError> {
        Ok(Self::of_file(path, CassetteFile::load(path)?))
    }

    /// A cassette of `text`, read from `path` by the caller (the cassette
    /// beside a task file, opened beneath its repository).
    pub fn from_text(path: &Path, text: &str) -> Result<Arc<Self>, CassetteError> {
        Ok(Self::of_file(path, CassetteFile::parse(path, text)?))
    }

    fn of_file(path: &Path, file: CassetteFile) -> Arc<Self> {
        let tagged = file.interactions.iter().any(|i| i.task.is_some());
        let used = Mutex::new(vec![false; file.interactions.len()]);
        Arc::new(Self {
            path: path.to_owned(),
            interactions: file.interactions,
            tagged,
            used,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next unused interaction for `task`, marked used.
    pub fn next_for(
        &self,
        task: &str,
    ) -> Result<Result<ChatResponse, ProviderError>, ProviderError> {
        let mut used = self
            .used
            .lock()
            .map_err(|_| ProviderError::Cassette("poisoned".into()))?;
        let found = self
            .interactions
            .iter()
            .enumerate()
            .find(|(index, interaction)| {
                !used[*index] && (!self.tagged || interaction.task.as_deref() == Some(task))
            });
        let Some((index, interaction)) = found else {
            // Recorded under other task ids only: say so, with the ids.
            if self.tagged
                && !self
                    .interactions
                    .iter()
                    .any(|interaction| interaction.task.as_deref() == Some(task))
            {
                let mut ids: Vec<&str> = self
                    .interactions
                    .iter()
                    .filter_map(|interaction| interaction.task.as_deref())
                    .collect();
                ids.dedup();
                ids.truncate(5);
                return Err(ProviderError::Cassette(format!(
                    "{}: nothing was recorded for task `{task}`; the cassette holds the tasks `{}` \
                     (was it recorded under another task id?)",
                    self.path.display(),
                    ids.join("`, `")
                )));
            }
            let served = used.iter().filter(|u| **u).count();
            return Err(ProviderError::Cassette(format!(
                "{}: no recorded answer left for task `{task}` ({served} of {} interactions used); \
                 the run asked the model more often than when it was recorded",
                self.path.display(),
                self.interactions.len()
            )));
        };
        used[index] = true;
        Ok(match (&interaction.response, &interaction.error) {
            (Some(response), _) => Ok(response.clone()),
            (None, Some(error)) => Err(error.to_error()),
            (None, None) => Err(ProviderError::Cassette("empty interaction".into())),
        })
    }
}

/// Collects interactions during `--record` and rewrites the file after each
/// one, so a crash loses nothing already answered. A cassette is an output
/// like any other: every secret the redactor knows is masked in it, even
/// one a server or model sent back in a response (docs/security.md S7).
///
/// The file is written beneath its directory, opened once when the run
/// starts (before any task, as the operator named it), never through a
/// link: a new exclusively created temporary name beside it, then a
/// rename over it ([`crate::core::beneath`]). A link planted at the file
/// or at a temporary name is replaced or skipped, never followed
/// (docs/security.md S8).
#[derive(Debug)]
pub struct CassetteWriter {
    path: PathBuf,
    dir: std::os::fd::OwnedFd,
    name: String,
    file: Mutex<CassetteFile>,
    redactor: Redactor,
}

impl CassetteWriter {
    pub fn create(path: &Path, redactor: Redactor) -> Result<Arc<Self>, CassetteError> {
        let failed = |source: std::io::Error| CassetteError::Write {
            path: path.to_owned(),
            source,
        };
        let name = path
            .file_name()
            .and_then(|name| name.to_str())
            .filter(|name| !name.is_empty() && *name != "..")
            .ok_or_else(|| failed(std::io::Error::other("not a file name")))?
            .to_owned();
        let parent = match path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let dir = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY | nix::libc::O_CLOEXEC)
            .open(parent)
            .map_err(failed)?;
        let writer = Self {
            path: path.to_owned(),
            dir: dir.into(),
            name,
            redactor,
            file: Mutex::new(CassetteFile {
                version: CASSETTE_VERSION,
                interactions: Vec::new(),
            }),
        };
        writer.flush().map_err(failed)?;
        Ok(Arc::new(writer))
    }

    pub fn append(
        &self,
        task: &str,
        request: &ChatRequest,
        result: &Result<ChatResponse, ProviderError>,
    ) -> std::io::Result<()> {
        {
            let mut file = self
                .file
                .lock()
                .map_err(|_| std::io::Error::other("poisoned"))?;
            file.interactions.push(Interaction {
                task: Some(task.to_owned()),
                request: Some(request.clone()),
                response: result.as_ref().ok().cloned(),
                error: result.as_ref().err().map(RecordedError::from_error),
            });
        }
        self.flush()
    }

    fn flush(&self) -> std::io::Result<()> {
        let file = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let mut value = serde_json::to_value(&*file).map_err(std::io::Error::other)?;
        self.redactor.redact_value(&mut value);
        let text = serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?;
        crate::core::beneath::replace_file(
            std::os::fd::AsFd::as_fd(&self.dir),
            &self.name,
            (text + "\n").as_bytes(),
        )
        .map(drop)
    }

    /// The file as the operator named it.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A cassette of `task`'s interactions alone, masked like the file:
    /// what `ybs report fixture` replays (docs/outputs.md). `None` when
    /// the task asked the provider nothing.
    pub fn task_cassette(&self, task: &str) -> std::io::Result<Option<Vec<u8>>> {
        let file = self
            .file
            .lock()
            .map_err(|_| std::io::Error::other("poisoned"))?;
        let interactions: Vec<&Interaction> = file
            .interactions
            .iter()
            .filter(|interaction| interaction.task.as_deref() == Some(task))
            .collect();
        if interactions.is_empty() {
            return Ok(None);
        }
        let mut value = serde_json::json!({
            "version": CASSETTE_VERSION,
            "interactions": interactions,
        });
        self.redactor.redact_value(&mut value);
        let text = serde_json::to_string_pretty(&value).map_err(std::io::Error::other)?;
        Ok(Some((text + "\n").into_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_masks_every_known_secret() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("c.json");
        let mut redactor = Redactor::new();
        redactor.add("sk-secret-123");
        let writer = CassetteWriter::create(&path, redactor).unwrap();
        let request = ChatRequest {
            model: "m".into(),
            system: "s".into(),
            messages: vec![crate::core::Message::user("my key is sk-secret-123")],
            tools: vec![],
            temperature: None,
            max_tokens: None,
            deadline: None,
        };
        let answer = ChatResponse {
            content: "echo: sk-secret-123".into(),
            ..ChatResponse::default()
        };
        writer.append("t", &request, &Ok(answer)).unwrap();
        let error = ProviderError::Stream("cut at sk-secret-123".into());
        writer.append("t", &request, &Err(error)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("sk-secret-123"), "{text}");
        assert_eq!(text.matches("[REDACTED]").count(), 4, "{text}");
        assert_eq!(CassetteFile::load(&path).unwrap().interactions.len(), 2);
    }

    #[test]
    fn recorded_errors_replay_as_recorded() {
        let errors = [
            ProviderError::Status {
                status: 429,
                message: "quota".into(),
                retry_after: Some(Duration::from_secs(2)),
                quota_exhausted: true,
                should_retry: None,
            },
            ProviderError::Status {
                status: 529,
                message: "Overloaded".into(),
                retry_after: None,
                quota_exhausted: false,
                should_retry: Some(false),
            },
            ProviderError::ResponseTooLarge { limit: 1000 },
            ProviderError::Auth {
                status: 401,
                message: "bad key".into(),
            },
            ProviderError::Timeout("idle".into()),
            ProviderError::Stream("cut".into()),
            ProviderError::MissingKey {
                var: "OPENAI_API_KEY".into(),
            },
        ];
        for error in errors {
            let recorded = RecordedError::from_error(&error);
            let text = serde_json::to_string(&recorded).unwrap();
            let back: RecordedError = serde_json::from_str(&text).unwrap();
            let replayed = back.to_error();
            assert_eq!(replayed.to_string(), error.to_string());
            assert_eq!(replayed.is_retryable(), error.is_retryable());
            assert_eq!(replayed.retry_after(), error.retry_after());
            assert_eq!(replayed.reason(), error.reason());
        }
    }
}
