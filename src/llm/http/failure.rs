//! How a failed exchange becomes a [`ProviderError`]: the status and body,
//! whether and when to retry, the request id, the error chain; and the
//! labels messages name an endpoint and a duration by.

use std::time::{Duration, SystemTime};

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName};
use serde_json::Value;

use super::MAX_QUOTED_CHARS;
use crate::llm::ProviderError;

pub(super) fn sse_error(error: sse_stream::Error) -> ProviderError {
    match error {
        sse_stream::Error::Body(inner) => match inner.downcast::<ProviderError>() {
            Ok(error) => *error,
            Err(other) => ProviderError::Stream(other.to_string()),
        },
        other => ProviderError::Protocol(format!("malformed event stream: {other}")),
    }
}

/// The error for an HTTP status outside 2xx: 401/403 are `Auth`, anything
/// else `Status` with the provider's own message, the wait it asked for
/// (`retry-after-ms`, `Retry-After` in seconds or as an HTTP date) and
/// whether the body says the quota or credit is exhausted.
pub(in crate::llm) fn status_error(
    status: u16,
    headers: &HeaderMap,
    body: &[u8],
    scrub: impl Fn(&str) -> String,
) -> ProviderError {
    let json: Option<Value> = serde_json::from_slice(body).ok();
    let message = json
        .as_ref()
        .and_then(error_message)
        .unwrap_or_else(|| quote(&String::from_utf8_lossy(body)));
    let message = if message.is_empty() {
        reqwest::StatusCode::from_u16(status)
            .ok()
            .and_then(|code| code.canonical_reason())
            .unwrap_or("no message")
            .to_owned()
    } else {
        scrub(&message)
    };
    if matches!(status, 401 | 403) {
        return ProviderError::Auth { status, message };
    }
    ProviderError::Status {
        status,
        retry_after: retry_after(headers, SystemTime::now()),
        quota_exhausted: json.as_ref().is_some_and(says_quota_exhausted),
        should_retry: should_retry(headers),
        message,
    }
}

/// The `x-should-retry` header both vendors send: `true` or `false`.
pub(super) fn should_retry(headers: &HeaderMap) -> Option<bool> {
    let value = headers.get(HeaderName::from_static("x-should-retry"))?;
    match value.to_str().ok()?.trim() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

/// The provider's id of a request: `x-request-id` (OpenAI and most
/// others), else `request-id` (Anthropic). Printable ASCII only, at most
/// 200 characters.
pub(in crate::llm) fn request_id(headers: &HeaderMap) -> Option<String> {
    ["x-request-id", "request-id"]
        .into_iter()
        .filter_map(|name| headers.get(HeaderName::from_static(name)))
        .filter_map(|value| value.to_str().ok())
        .map(str::trim)
        .find(|id| !id.is_empty())
        .map(|id| {
            id.chars()
                .filter(char::is_ascii_graphic)
                .take(200)
                .collect()
        })
}

/// The error for an error object received inside a stream (an OpenAI
/// chunk's `error`, an Anthropic `error` event, an Ollama `error` line).
/// Known error types and numeric codes become the status they stand for,
/// so that `overloaded_error` is a retryable 529 and `invalid_request_error`
/// a final 400; anything else is an interrupted stream (retryable).
pub(in crate::llm) fn stream_error(error: &Value, scrub: impl Fn(&str) -> String) -> ProviderError {
    let wrapped = serde_json::json!({ "error": error });
    let message = scrub(&error_message(&wrapped).unwrap_or_else(|| error.to_string()));
    let kind = error
        .get("type")
        .and_then(Value::as_str)
        .or_else(|| error.get("code").and_then(Value::as_str))
        .unwrap_or_default();
    let numeric = error
        .get("code")
        .and_then(Value::as_u64)
        .and_then(|code| u16::try_from(code).ok())
        .filter(|code| (400..600).contains(code));
    let status = numeric.or(match kind {
        "overloaded_error" => Some(529),
        "api_error" | "server_error" => Some(500),
        "rate_limit_error" | "rate_limit_exceeded" | "insufficient_quota" => Some(429),
        "billing_error" => Some(402),
        "invalid_request_error" => Some(400),
        "authentication_error" => Some(401),
        "permission_error" => Some(403),
        "not_found_error" => Some(404),
        "request_too_large" => Some(413),
        "timeout_error" => Some(504),
        _ => None,
    });
    match status {
        Some(status @ (401 | 403)) => ProviderError::Auth { status, message },
        Some(status) => ProviderError::Status {
            status,
            message,
            retry_after: None,
            quota_exhausted: says_quota_exhausted(&wrapped),
            should_retry: None,
        },
        None => ProviderError::Stream(format!("the provider reported an error: {message}")),
    }
}

/// The provider's own message: `error.message`, `error` as a string,
/// `message` or `detail`.
pub(super) fn error_message(body: &Value) -> Option<String> {
    let error = body.get("error");
    error
        .and_then(|error| error.get("message"))
        .or_else(|| error.filter(|error| error.is_string()))
        .or_else(|| body.get("message"))
        .or_else(|| body.get("detail"))
        .and_then(Value::as_str)
        .map(|message| message.trim().to_owned())
}

/// True if and only if an error body says the account is out of quota or
/// credit (OpenAI `insufficient_quota`, Anthropic `billing_error`, and the
/// same words elsewhere): waiting will not help, so it is not retried.
pub(super) fn says_quota_exhausted(body: &Value) -> bool {
    let error = body.get("error").unwrap_or(body);
    let field = |name: &str| {
        error
            .get(name)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_ascii_lowercase()
    };
    let codes = [field("type"), field("code"), field("status")];
    if codes.iter().any(|code| {
        matches!(
            code.as_str(),
            "insufficient_quota"
                | "billing_error"
                | "billing_hard_limit_reached"
                | "quota_exceeded"
        )
    }) {
        return true;
    }
    let message = error_message(body).unwrap_or_default().to_ascii_lowercase();
    // Anthropic says a spend limit in a 429: "You have reached your
    // specified workspace API usage limits".
    [
        "insufficient_quota",
        "exceeded your current quota",
        "credit balance",
        "billing",
        "usage limit",
        "spend limit",
        "spending limit",
        "out of credits",
    ]
    .iter()
    .any(|phrase| message.contains(phrase))
}

/// The wait a server asked for: `retry-after-ms` (OpenAI), else
/// `Retry-After` as seconds or as an HTTP date.
pub(super) fn retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &'static str| {
        headers
            .get(HeaderName::from_static(name))
            .and_then(|value| value.to_str().ok())
            .map(str::trim)
    };
    if let Some(ms) = header("retry-after-ms").and_then(|value| value.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(saturating_seconds(ms / 1000.0));
    }
    let value = header("retry-after")?;
    if let Ok(value) = value.parse::<f64>() {
        return (value.is_finite() && value >= 0.0).then(|| saturating_seconds(value));
    }
    let at = parse_http_date(value)?;
    Some(at.duration_since(now).unwrap_or_default())
}

/// A finite, non-negative number of seconds; a wait too long for a
/// `Duration` (`Retry-After: 1e300`) is the longest one, which the retry
/// cap then refuses, instead of a panic.
pub(super) fn saturating_seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX)
}

/// Parses an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, and the two
/// obsolete forms) with `httpdate`, already built for hyper.
pub(super) fn parse_http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text.trim()).ok()
}

/// A reqwest error with its causes, without the URL.
pub(super) fn chain(error: &reqwest::Error) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(current) = source {
        let text = current.to_string();
        if parts.last().is_some_and(|last| last.contains(&text)) {
            source = current.source();
            continue;
        }
        parts.push(text);
        source = current.source();
    }
    // reqwest prints the URL in its top-level message; the endpoint is
    // named separately, without credentials or query.
    if let Some(url) = error.url() {
        let url = url.as_str();
        for part in &mut parts {
            *part = part
                .replace(&format!(" for url ({url})"), "")
                .replace(url, "<url>");
        }
    }
    parts.join(": ")
}

/// How an endpoint is named in messages: no credentials, no query.
pub(in crate::llm) fn label(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// True if and only if `url` points at this machine.
pub(super) fn is_loopback(url: &Url) -> bool {
    let Some(host) = url.host_str() else {
        return false;
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// A snippet of a body for a message: trimmed, cut at a char boundary.
pub(super) fn quote(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

pub(super) fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs >= 1.0 && duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{secs:.1} s")
    }
}
