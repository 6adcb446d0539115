//! Provider errors know whether to retry, how long to wait, and which
//! reason a task reports when they end it.

use std::time::Duration;

use crate::core::Reason;

/// A failed provider request.
#[derive(Debug, Clone, thiserror::Error)]
pub enum ProviderError {
    /// No API key where one is required; detected before any request.
    #[error("missing API key: set `{var}`")]
    MissingKey { var: String },
    /// The repository named a vendor's own endpoint; the operator's key
    /// is not sent where the repository says (docs/security.md S5).
    #[error(
        "`{var}` is not sent to `{endpoint}`: the repository named that endpoint \
         (./.ybs.json or the task file), and keys go only to endpoints the operator names \
         (--endpoint, YBS_ENDPOINT or the operator's config)"
    )]
    KeyWithheld { var: String, endpoint: String },
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
        /// The body says the quota or credit is exhausted (OpenAI
        /// `insufficient_quota`, Anthropic billing errors): never retried.
        quota_exhausted: bool,
        /// The server's `x-should-retry` header: `false` forbids a retry,
        /// `true` asks for one (within `agent.retry_*`).
        should_retry: Option<bool>,
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
    /// The response passed `llm.max_response_bytes` while it arrived; the
    /// rest was not read.
    #[error(
        "the model's response passed the limit of {limit} bytes (llm.max_response_bytes); \
         the rest was not read"
    )]
    ResponseTooLarge { limit: u64 },
    /// A retry would have to wait past the task's remaining time (or
    /// longer than the retry cap): it fails now instead.
    #[error(
        "{error}; not retried: {source_name} asks to wait {}, {why}",
        seconds(*wait)
    )]
    WaitTooLong {
        error: Box<ProviderError>,
        wait: Duration,
        /// `Retry-After` or `backoff`.
        source_name: &'static str,
        /// What the wait passes: "past the task's remaining time of 12 s".
        why: String,
    },
    /// The replay cassette has no answer for this request.
    #[error("cassette: {0}")]
    Cassette(String),
    /// Misconfiguration found when building the provider.
    #[error("{0}")]
    Config(String),
}

impl ProviderError {
    /// True if and only if docs/providers.md says this error may be retried:
    /// connect errors, timeouts, interrupted streams, 408, 409, 429 (not
    /// quota), 5xx and 529.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Status {
                status,
                quota_exhausted,
                should_retry,
                ..
            } => {
                !quota_exhausted
                    && should_retry.unwrap_or(matches!(status, 408 | 409 | 429 | 500..=599))
            }
            Self::Connect { .. } | Self::Timeout(_) | Self::Stream(_) => true,
            Self::MissingKey { .. }
            | Self::KeyWithheld { .. }
            | Self::Auth { .. }
            | Self::Protocol(_)
            | Self::ResponseTooLarge { .. }
            | Self::WaitTooLong { .. }
            | Self::Cassette(_)
            | Self::Config(_) => false,
        }
    }

    /// True for errors found before any request was sent (no key, a
    /// key withheld, a bad configuration, a cassette without the
    /// answer): no model was asked.
    pub fn before_request(&self) -> bool {
        matches!(
            self,
            Self::MissingKey { .. }
                | Self::KeyWithheld { .. }
                | Self::Config(_)
                | Self::Cassette(_)
        )
    }

    /// The server's requested wait, if it gave one.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            Self::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The same error with the provider's request id (`x-request-id`,
    /// `request-id`) in its message, which is what vendor support asks for.
    #[must_use]
    pub fn with_request_id(mut self, id: Option<&str>) -> Self {
        let Some(id) = id.filter(|id| !id.is_empty()) else {
            return self;
        };
        match &mut self {
            Self::Auth { message, .. }
            | Self::Status { message, .. }
            | Self::Timeout(message)
            | Self::Stream(message)
            | Self::Protocol(message)
                if !message.contains(id) =>
            {
                message.push_str(&format!(" (request id {id})"));
            }
            _ => {}
        }
        self
    }

    /// The reason a task reports when this error ends it.
    pub fn reason(&self) -> Reason {
        match self {
            Self::ResponseTooLarge { .. } => Reason::ResponseTooLarge,
            Self::WaitTooLong { .. } => Reason::ProviderError,
            Self::MissingKey { .. } | Self::KeyWithheld { .. } | Self::Auth { .. } => {
                Reason::AuthError
            }
            Self::Status {
                quota_exhausted: true,
                ..
            } => Reason::QuotaExhausted,
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

/// `3600 s`, `1.5 s`.
fn seconds(duration: Duration) -> String {
    if duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{:.1} s", duration.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_exhausted_quota_has_its_own_reason_and_stops_the_batch() {
        let status = |quota_exhausted| ProviderError::Status {
            status: 429,
            message: "m".into(),
            retry_after: None,
            quota_exhausted,
            should_retry: None,
        };
        assert_eq!(status(true).reason(), Reason::QuotaExhausted);
        assert_eq!(status(false).reason(), Reason::ProviderError);
        let auth = ProviderError::Auth {
            status: 401,
            message: "m".into(),
        };
        for (error, stops) in [(status(true), true), (auth, true), (status(false), false)] {
            assert_eq!(error.reason().stops_batch(), stops, "{error:?}");
        }
        assert_eq!(Reason::QuotaExhausted.status(), crate::core::Status::Error);
    }
}
