//! Retries around `Provider::complete` (SPEC §6, SECURITY S11).
//!
//! Exponential backoff with jitter from `backon`; a server's `Retry-After`
//! wins when given, up to a cap. Each retry is reported to the caller, which
//! records it as an event. A retried request is the same request: tools run
//! only after a complete turn, so nothing is ever run twice.

use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};

use super::{ChatRequest, ChatResponse, Provider, ProviderError};

/// How hard to try.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetrySettings {
    /// Retries after the first attempt (`agent.retry_attempts`).
    pub attempts: u32,
    /// First backoff delay (`agent.retry_backoff_base_ms`).
    pub base_delay: Duration,
    /// Longest wait between attempts, also the cap on `Retry-After`.
    pub max_delay: Duration,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(60),
        }
    }
}

/// A retry about to happen: which attempt comes next, after what wait, and why.
#[derive(Debug, Clone)]
pub struct RetryNotice {
    pub attempt: u32,
    pub delay: Duration,
    pub error: ProviderError,
}

/// Calls `provider.complete(request)`, retrying retryable errors
/// (`ProviderError::is_retryable`: connect errors, timeouts, interrupted
/// streams, 408, 409, 429 unless the quota is exhausted, 5xx, 529) at most
/// `settings.attempts` times. Anything else, and the last error once the
/// attempts are used up, is returned as is. `on_retry` hears of each retry
/// before its wait.
pub async fn complete(
    provider: &dyn Provider,
    request: &ChatRequest,
    settings: RetrySettings,
    on_retry: &mut (dyn FnMut(&RetryNotice) + Send),
) -> Result<ChatResponse, ProviderError> {
    let mut delays = ExponentialBuilder::new()
        .with_min_delay(settings.base_delay)
        .with_max_delay(settings.max_delay)
        .with_factor(2.0)
        .with_jitter()
        .with_max_times(settings.attempts as usize)
        .build();
    let mut attempt = 0;
    loop {
        let error = match provider.complete(request).await {
            Ok(response) => return Ok(response),
            Err(error) => error,
        };
        if !error.is_retryable() {
            return Err(error);
        }
        let Some(backoff) = delays.next() else {
            return Err(error);
        };
        attempt += 1;
        // backon's jitter adds up to the delay again; the cap holds for
        // the jittered delay too. A server's `Retry-After` replaces the
        // backoff (no jitter: it named the time), up to the same cap.
        let delay = error
            .retry_after()
            .unwrap_or(backoff)
            .min(settings.max_delay);
        on_retry(&RetryNotice {
            attempt,
            delay,
            error,
        });
        tokio::time::sleep(delay).await;
    }
}
