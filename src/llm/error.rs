//! Provider errors know whether to retry, how long to wait, and which
//! reason a task reports when they end it (STYLE §8).

use std::time::Duration;

use crate::core::Reason;

/// A failed provider request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// No API key where one is required; detected before any request.
    #[error("missing API key: set `{var}`")]
    MissingKey { var: String },
    /// The endpoint rejected the credentials (401/403).
    #[error("authentication failed ({status}): {message}")]
    Auth { status: u16, message: String },
    /// Any other HTTP status.
    #[error("HTTP {status}: {message}")]
    Status {
        status: u16,
        message: String,
        /// From `Retry-After` / `retry-after-ms`.
        retry_after: Option<Duration>,
        /// A 429 that means the quota is exhausted, not a rate limit.
        quota_exhausted: bool,
    },
    /// Could not connect.
    #[error("cannot connect to {endpoint}: {message}")]
    Connect { endpoint: String, message: String },
    /// A deadline passed (request, stream idle or stream total).
    #[error("timed out: {0}")]
    Timeout(String),
    /// The stream ended early or carried an error event (retryable).
    #[error("stream interrupted: {0}")]
    Stream(String),
    /// The response could not be understood.
    #[error("invalid response: {0}")]
    Protocol(String),
    /// The replay cassette has no answer for this request.
    #[error("cassette: {0}")]
    Cassette(String),
    /// Misconfiguration found when building the provider.
    #[error("{0}")]
    Config(String),
}

impl ProviderError {
    /// True if and only if SPEC §6 says this error may be retried:
    /// connect errors, timeouts, interrupted streams, 408, 409, 429 (not
    /// quota), 5xx and 529.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status {
                status,
                quota_exhausted,
                ..
            } => matches!(status, 408 | 409 | 500..=599) || (*status == 429 && !quota_exhausted),
            Self::Connect { .. } | Self::Timeout(_) | Self::Stream(_) => true,
            Self::MissingKey { .. }
            | Self::Auth { .. }
            | Self::Protocol(_)
            | Self::Cassette(_)
            | Self::Config(_) => false,
        }
    }

    /// The server's requested wait, if it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The reason a task reports when this error ends it.
    pub fn reason(&self) -> Reason {
        match self {
            Self::MissingKey { .. } | Self::Auth { .. } => Reason::AuthError,
            Self::Status { .. }
            | Self::Connect { .. }
            | Self::Timeout(_)
            | Self::Stream(_)
            | Self::Protocol(_)
            | Self::Cassette(_)
            | Self::Config(_) => Reason::ProviderError,
        }
    }
}
