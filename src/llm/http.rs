//! HTTP plumbing shared by the wire protocols: one reqwest client per
//! provider, deadlines, status codes mapped to `ProviderError`, and SSE or
//! NDJSON read from a byte stream that enforces the idle and total
//! deadlines (docs/providers.md, docs/security.md S11).
//!
//! API keys travel in an [`ApiKey`], whose `Debug` and `Display` print
//! `[REDACTED]`, and are scrubbed from every message a server sends back
//! before it becomes an error (docs/security.md S7).

use std::fmt;
use std::pin::Pin;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{Stream, StreamExt, stream};
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use sse_stream::{Sse, SseByteStream};
use tokio::time::Instant;

use super::ProviderError;
use crate::core::redact::MASK;

/// How long to wait for a TCP (and TLS) connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How much of an error response is read to find the provider's message.
const MAX_ERROR_BODY: usize = 64 << 10;
/// How much of a non-JSON error body is quoted in a message.
const MAX_QUOTED_CHARS: usize = 300;

/// An API key. Printing it in any way shows `[REDACTED]`; only
/// [`ApiKey::expose`] gives the value, to put it in a request header.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    /// A key from a raw value; `None` for an empty or blank one.
    pub fn new(value: impl Into<String>) -> Option<Self> {
        let value = value.into().trim().to_owned();
        (!value.is_empty()).then_some(Self(value))
    }

    /// The secret value. Only for building request headers and redactors.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// A header value holding `prefix` + the key, marked sensitive so that
    /// hyper and reqwest never print it.
    pub(super) fn header_value(
        &self,
        prefix: &str,
        var: &str,
    ) -> Result<HeaderValue, ProviderError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", self.0)).map_err(|_| {
            ProviderError::Config(format!(
                "`{var}` contains characters that cannot be sent in an HTTP header"
            ))
        })?;
        value.set_sensitive(true);
        Ok(value)
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

impl fmt::Display for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(MASK)
    }
}

/// The three clocks of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// Until the response headers arrive (connecting included). A
    /// non-streaming server sends its headers only once the whole turn is
    /// generated, so this also bounds a non-streaming generation.
    pub request: Duration,
    /// The longest gap between two pieces of a response body.
    pub idle: Duration,
    /// The whole request, from sending to the last byte.
    pub total: Duration,
}

/// A client for one endpoint, with its deadlines, the largest response
/// it reads, and the key to scrub.
pub(super) struct Http {
    client: reqwest::Client,
    deadlines: Deadlines,
    max_response_bytes: u64,
    key: Option<ApiKey>,
}

impl fmt::Debug for Http {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Http")
            .field("deadlines", &self.deadlines)
            .field("max_response_bytes", &self.max_response_bytes)
            .field("key", &self.key)
            .finish_non_exhaustive()
    }
}

impl Http {
    /// A client for `endpoint`: rustls, a connect timeout, no overall
    /// timeout (the deadlines do that), no redirects (a redirect would
    /// carry the key elsewhere), no transparent retries (`retry.rs` owns
    /// them, so each one is reported), and no proxy for loopback hosts
    /// (nor root certificates, when they are spoken to over plain HTTP).
    pub(super) fn new(
        endpoint: &Url,
        deadlines: Deadlines,
        max_response_bytes: u64,
        key: Option<ApiKey>,
    ) -> Result<Self, ProviderError> {
        crate::core::tls::install();
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT.min(deadlines.request))
            .redirect(reqwest::redirect::Policy::none())
            .retry(reqwest::retry::never())
            .user_agent(concat!("ybs/", env!("CARGO_PKG_VERSION")));
        if is_loopback(endpoint) {
            builder = builder.no_proxy();
            // Plain HTTP to loopback, with no proxy, never speaks TLS: no
            // root store, so start-up reads no system certificates (about
            // 140 files; docs/performance.md). An `https` endpoint, or
            // plain HTTP elsewhere (a proxy may be `https`), loads them.
            if endpoint.scheme() == "http" {
                builder = builder.tls_certs_only(std::iter::empty());
            }
        }
        let client = builder.build().map_err(|error| {
            ProviderError::Config(format!("cannot build HTTP client: {}", chain(&error)))
        })?;
        Ok(Self {
            client,
            deadlines,
            max_response_bytes,
            key,
        })
    }

    /// Replaces the key, wherever it appears in `text`, with `[REDACTED]`.
    pub(super) fn scrub(&self, text: &str) -> String {
        match &self.key {
            Some(key) if text.contains(key.expose()) => text.replace(key.expose(), MASK),
            _ => text.to_owned(),
        }
    }

    /// POSTs `body` as JSON. A success status gives the body to read; any
    /// other status, a connect failure or the request deadline gives the
    /// matching error.
    pub(super) async fn post_json(
        &self,
        url: &Url,
        headers: HeaderMap,
        body: &Value,
    ) -> Result<ResponseBody, ProviderError> {
        let started = Instant::now();
        let total_at = started + self.deadlines.total;
        let headers_at = (started + self.deadlines.request).min(total_at);
        let payload = serde_json::to_vec(body)
            .map_err(|error| ProviderError::Protocol(format!("cannot encode request: {error}")))?;
        let send = self
            .client
            .post(url.clone())
            .headers(headers)
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"))
            .body(payload)
            .send();
        let response = match tokio::time::timeout_at(headers_at, send).await {
            Err(_) => {
                return Err(ProviderError::Timeout(format!(
                    "no response from {} within {}",
                    label(url),
                    seconds(headers_at - started)
                )));
            }
            Ok(Err(error)) => return Err(self.send_error(url, &error)),
            Ok(Ok(response)) => response,
        };
        let status = response.status().as_u16();
        let request_id = request_id(response.headers()).map(|id| self.scrub(&id));
        let body = ResponseBody {
            response,
            idle: self.deadlines.idle,
            total: self.deadlines.total,
            total_at,
            limit: self.max_response_bytes,
            request_id,
        };
        if (200..300).contains(&status) {
            return Ok(body);
        }
        let headers = body.response.headers().clone();
        let request_id = body.request_id.clone();
        let text = body.collect_up_to(MAX_ERROR_BODY).await.unwrap_or_default();
        Err(
            status_error(status, &headers, &text, |text| self.scrub(text))
                .with_request_id(request_id.as_deref()),
        )
    }

    fn send_error(&self, url: &Url, error: &reqwest::Error) -> ProviderError {
        let message = self.scrub(&chain(error));
        if error.is_connect() {
            // "error sending request: client error (Connect): tcp connect
            // error: Connection refused": the root cause says it all.
            let mut root: &dyn std::error::Error = error;
            while let Some(source) = root.source() {
                root = source;
            }
            let message = self.scrub(&root.to_string());
            ProviderError::Connect {
                endpoint: label(url),
                message,
            }
        } else if error.is_timeout() {
            ProviderError::Timeout(format!("{}: {message}", label(url)))
        } else {
            ProviderError::Stream(format!("request to {} failed: {message}", label(url)))
        }
    }
}

/// A turn read from a response, or the error that ended it, carrying the
/// provider's request id `id` (the turn in `request_id`, the error in its
/// message).
pub(super) fn with_request_id(
    result: Result<super::ChatResponse, ProviderError>,
    id: Option<String>,
) -> Result<super::ChatResponse, ProviderError> {
    match result {
        Ok(mut turn) => {
            turn.request_id = id;
            Ok(turn)
        }
        Err(error) => Err(error.with_request_id(id.as_deref())),
    }
}

/// A successful response whose body is still to be read under the idle
/// and total deadlines.
pub(super) struct ResponseBody {
    response: reqwest::Response,
    idle: Duration,
    total: Duration,
    total_at: Instant,
    /// `llm.max_response_bytes`.
    limit: u64,
    /// The provider's id of this request, from the response headers.
    pub request_id: Option<String>,
}

/// A response body as a stream of byte chunks, deadlines enforced.
pub(super) type ByteStream = Pin<Box<dyn Stream<Item = Result<Bytes, ProviderError>> + Send>>;
/// A response body as server-sent events.
pub(super) type EventStream = Pin<Box<dyn Stream<Item = Result<Sse, ProviderError>> + Send>>;
/// A response body as non-empty lines (NDJSON).
pub(super) type LineStream = Pin<Box<dyn Stream<Item = Result<String, ProviderError>> + Send>>;

impl ResponseBody {
    /// The raw chunks. Each wait for the next chunk ends at the idle or the
    /// total deadline, whichever comes first; a body error is a `Stream`
    /// error (retryable). The bytes are counted as they arrive: the chunk
    /// that passes `llm.max_response_bytes` ends the body with
    /// `ResponseTooLarge`, so no more than the limit is ever held.
    pub(super) fn bytes(self) -> ByteStream {
        struct State {
            inner: Pin<Box<dyn Stream<Item = reqwest::Result<Bytes>> + Send>>,
            seen: u64,
        }
        let Self {
            response,
            idle,
            total,
            total_at,
            limit,
            request_id: _,
        } = self;
        let state = State {
            inner: Box::pin(response.bytes_stream()),
            seen: 0,
        };
        Box::pin(stream::unfold(Some(state), move |state| async move {
            let mut state = state?;
            let idle_at = Instant::now() + idle;
            let item =
                match tokio::time::timeout_at(idle_at.min(total_at), state.inner.next()).await {
                    Err(_) if total_at <= idle_at => Err(ProviderError::Timeout(format!(
                        "the response did not complete within the total deadline of {}",
                        seconds(total)
                    ))),
                    Err(_) => Err(ProviderError::Timeout(format!(
                        "no data from the server for {} (idle deadline)",
                        seconds(idle)
                    ))),
                    Ok(None) => return None,
                    Ok(Some(Err(error))) => Err(ProviderError::Stream(chain(&error))),
                    Ok(Some(Ok(bytes))) => {
                        state.seen = state
                            .seen
                            .saturating_add(u64::try_from(bytes.len()).unwrap_or(u64::MAX));
                        if state.seen > limit {
                            Err(ProviderError::ResponseTooLarge { limit })
                        } else {
                            return Some((Ok(bytes), Some(state)));
                        }
                    }
                };
            Some((item, None))
        }))
    }

    /// The whole body (room for it reserved once when its length is
    /// announced, within the limit).
    pub(super) async fn collect(self) -> Result<Vec<u8>, ProviderError> {
        let announced = self.response.content_length().unwrap_or(0).min(self.limit);
        let mut bytes = self.bytes();
        let mut body = Vec::with_capacity(usize::try_from(announced).unwrap_or(0));
        while let Some(chunk) = bytes.next().await {
            body.extend_from_slice(&chunk?);
        }
        Ok(body)
    }

    /// At most `limit` bytes of the body.
    async fn collect_up_to(self, limit: usize) -> Result<Vec<u8>, ProviderError> {
        let mut bytes = self.bytes();
        let mut body = Vec::new();
        while let Some(chunk) = bytes.next().await {
            // What arrived before a deadline or the size limit is enough
            // to quote.
            let Ok(chunk) = chunk else { break };
            body.extend_from_slice(&chunk);
            if body.len() >= limit {
                body.truncate(limit);
                break;
            }
        }
        Ok(body)
    }

    /// The whole body parsed as JSON.
    pub(super) async fn json(self) -> Result<Value, ProviderError> {
        let body = self.collect().await?;
        serde_json::from_slice(&body).map_err(|error| {
            ProviderError::Protocol(format!(
                "response is not JSON ({error}): {}",
                quote(&String::from_utf8_lossy(&body))
            ))
        })
    }

    /// The body as server-sent events (`sse-stream`); comments such as
    /// `: keep-alive` reset the idle clock but yield no event.
    pub(super) fn events(self) -> EventStream {
        Box::pin(SseByteStream::new(self.bytes()).map(|item| item.map_err(sse_error)))
    }

    /// The body as non-empty lines, `\r\n` or `\n` terminated; a last line
    /// without a newline is still a line.
    pub(super) fn lines(self) -> LineStream {
        struct State {
            bytes: ByteStream,
            buffer: Vec<u8>,
            ended: bool,
        }
        fn take_line(buffer: &mut Vec<u8>, ended: bool) -> Option<Vec<u8>> {
            if let Some(end) = buffer.iter().position(|byte| *byte == b'\n') {
                let mut line: Vec<u8> = buffer.drain(..=end).collect();
                line.pop();
                return Some(line);
            }
            (ended && !buffer.is_empty()).then(|| std::mem::take(buffer))
        }
        let state = State {
            bytes: self.bytes(),
            buffer: Vec::new(),
            ended: false,
        };
        Box::pin(stream::unfold(Some(state), |state| async move {
            let mut state = state?;
            loop {
                while let Some(line) = take_line(&mut state.buffer, state.ended) {
                    let line = String::from_utf8_lossy(&line).trim().to_owned();
                    if !line.is_empty() {
                        return Some((Ok(line), Some(state)));
                    }
                }
                if state.ended {
                    return None;
                }
                match state.bytes.next().await {
                    Some(Ok(chunk)) => state.buffer.extend_from_slice(&chunk),
                    Some(Err(error)) => return Some((Err(error), None)),
                    None => state.ended = true,
                }
            }
        }))
    }
}

fn sse_error(error: sse_stream::Error) -> ProviderError {
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
pub(super) fn status_error(
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
fn should_retry(headers: &HeaderMap) -> Option<bool> {
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
pub(super) fn request_id(headers: &HeaderMap) -> Option<String> {
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
pub(super) fn stream_error(error: &Value, scrub: impl Fn(&str) -> String) -> ProviderError {
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
fn error_message(body: &Value) -> Option<String> {
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
fn says_quota_exhausted(body: &Value) -> bool {
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
fn saturating_seconds(value: f64) -> Duration {
    Duration::try_from_secs_f64(value).unwrap_or(Duration::MAX)
}

/// Parses an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`, and the two
/// obsolete forms) with `httpdate`, already built for hyper.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    httpdate::parse_http_date(text.trim()).ok()
}

/// A reqwest error with its causes, without the URL.
fn chain(error: &reqwest::Error) -> String {
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
pub(super) fn label(url: &Url) -> String {
    let mut url = url.clone();
    let _ = url.set_username("");
    let _ = url.set_password(None);
    url.set_query(None);
    url.set_fragment(None);
    url.to_string()
}

/// True if and only if `url` points at this machine.
fn is_loopback(url: &Url) -> bool {
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
fn quote(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(MAX_QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

fn seconds(duration: Duration) -> String {
    let secs = duration.as_secs_f64();
    if secs >= 1.0 && duration.subsec_millis() == 0 {
        format!("{} s", duration.as_secs())
    } else {
        format!("{secs:.1} s")
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                HeaderName::from_static(name),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    #[test]
    fn api_key_never_prints() {
        let key = ApiKey::new("sk-canary-123456").unwrap();
        assert_eq!(format!("{key}"), "[REDACTED]");
        assert_eq!(format!("{key:?}"), "[REDACTED]");
        assert_eq!(format!("{:?}", Some(key.clone())), "Some([REDACTED])");
        assert_eq!(key.expose(), "sk-canary-123456");
        assert!(ApiKey::new("  ").is_none());
        let value = key.header_value("Bearer ", "X").unwrap();
        assert!(value.is_sensitive());
        assert!(!format!("{value:?}").contains("canary"));
    }

    #[test]
    fn retry_after_forms() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1")]), now),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1.5")]), now),
            Some(Duration::from_millis(1500))
        );
        // An IMF-fixdate year has four digits; a longer one is no date
        // (it used to overflow into a panic), not a wait.
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 999999999999 08:49:37 GMT")]),
                now
            ),
            None
        );
        assert!(
            retry_after(
                &headers(&[("retry-after", "Fri, 31 Dec 9999 23:59:59 GMT")]),
                now
            )
            .is_some_and(|wait| wait > Duration::from_secs(86_400 * 365 * 8000))
        );
        for (name, huge) in [
            ("retry-after", "99999999999999999999999"),
            ("retry-after-ms", "1e300"),
        ] {
            assert_eq!(
                retry_after(&headers(&[(name, huge)]), now),
                Some(Duration::MAX)
            );
        }
        assert_eq!(
            retry_after(
                &headers(&[("retry-after-ms", "250"), ("retry-after", "9")]),
                now
            ),
            Some(Duration::from_millis(250))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:49:47 GMT")]),
                now
            ),
            Some(Duration::from_secs(10))
        );
        assert_eq!(
            retry_after(
                &headers(&[("retry-after", "Sun, 06 Nov 1994 08:40:00 GMT")]),
                now
            ),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(retry_after(&headers(&[("retry-after", "-3")]), now), None);
        assert_eq!(retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn http_date_epoch_math() {
        assert_eq!(
            parse_http_date("Thu, 01 Jan 1970 00:00:00 GMT"),
            Some(UNIX_EPOCH)
        );
        assert_eq!(
            parse_http_date("Sat, 29 Feb 2020 12:00:00 GMT"),
            Some(UNIX_EPOCH + Duration::from_secs(1_582_977_600))
        );
        assert_eq!(parse_http_date("Sat, 29 Feb 2020 12:00:00 CET"), None);
        assert_eq!(parse_http_date("Sat, 29 Foo 2020 12:00:00 GMT"), None);
    }

    #[test]
    fn statuses_map_to_errors() {
        let scrub = |text: &str| text.replace("sk-secret", MASK);
        let error = status_error(
            401,
            &HeaderMap::new(),
            br#"{"error":{"message":"Incorrect API key provided: sk-secret","type":"invalid_request_error"}}"#,
            scrub,
        );
        assert!(matches!(error, ProviderError::Auth { status: 401, .. }));
        assert!(!error.to_string().contains("sk-secret"), "{error}");
        assert!(!error.is_retryable());

        let error = status_error(
            429,
            &headers(&[("retry-after", "1")]),
            br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#,
            scrub,
        );
        assert!(error.is_retryable());
        assert_eq!(error.retry_after(), Some(Duration::from_secs(1)));
        assert_eq!(error.to_string(), "HTTP 429: Rate limit reached");

        let error = status_error(
            429,
            &HeaderMap::new(),
            br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","code":"insufficient_quota"}}"#,
            scrub,
        );
        assert!(matches!(
            error,
            ProviderError::Status {
                quota_exhausted: true,
                ..
            }
        ));
        assert!(!error.is_retryable());

        let error = status_error(
            529,
            &HeaderMap::new(),
            br#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
            scrub,
        );
        assert_eq!(error.to_string(), "HTTP 529: Overloaded");
        assert!(error.is_retryable());

        let error = status_error(
            404,
            &HeaderMap::new(),
            br#"{"error":"model 'x' not found"}"#,
            scrub,
        );
        assert_eq!(error.to_string(), "HTTP 404: model 'x' not found");
        assert!(!error.is_retryable());

        let error = status_error(502, &HeaderMap::new(), b"<html>bad gateway</html>", scrub);
        assert_eq!(error.to_string(), "HTTP 502: <html>bad gateway</html>");
        let error = status_error(503, &HeaderMap::new(), b"", scrub);
        assert_eq!(error.to_string(), "HTTP 503: Service Unavailable");
    }

    #[test]
    fn stream_errors_map_to_statuses() {
        let scrub = |text: &str| text.to_owned();
        let overloaded = stream_error(
            &serde_json::json!({"type": "overloaded_error", "message": "Overloaded"}),
            scrub,
        );
        assert!(matches!(
            overloaded,
            ProviderError::Status { status: 529, .. }
        ));
        assert!(overloaded.is_retryable());
        let invalid = stream_error(
            &serde_json::json!({"message": "too long", "type": "BadRequestError", "code": 400}),
            scrub,
        );
        assert!(matches!(invalid, ProviderError::Status { status: 400, .. }));
        assert!(!invalid.is_retryable());
        let unknown = stream_error(&serde_json::json!({"message": "boom"}), scrub);
        assert!(matches!(unknown, ProviderError::Stream(_)));
        assert!(unknown.is_retryable());
        let text = stream_error(&serde_json::json!("runner crashed"), scrub);
        assert_eq!(
            text.to_string(),
            "stream interrupted: the provider reported an error: runner crashed"
        );
    }

    #[test]
    fn labels_hide_credentials() {
        let url = Url::parse("https://user:pw@example.com/v1/chat?key=abc").unwrap();
        assert_eq!(label(&url), "https://example.com/v1/chat");
        assert!(is_loopback(&Url::parse("http://127.0.0.1:1/").unwrap()));
        assert!(is_loopback(&Url::parse("http://localhost:1/").unwrap()));
        assert!(is_loopback(&Url::parse("http://[::1]:1/").unwrap()));
        assert!(!is_loopback(
            &Url::parse("https://api.openai.com/").unwrap()
        ));
    }
}

/// One provider endpoint: the resolved settings, the request URL, the
/// protocol's headers and the HTTP client. What every protocol shares.
#[derive(Debug)]
pub(super) struct Endpoint {
    pub settings: super::Settings,
    pub http: Http,
    url: Url,
    headers: HeaderMap,
}

impl Endpoint {
    /// `path` is appended to the configured base URL.
    pub fn new(
        settings: super::Settings,
        path: &[&str],
        headers: HeaderMap,
    ) -> Result<Self, ProviderError> {
        let url = settings.url(path)?;
        let http = Http::new(
            &settings.endpoint,
            settings.deadlines,
            settings.max_response_bytes,
            settings.key.clone(),
        )?;
        Ok(Self {
            settings,
            http,
            url,
            headers,
        })
    }

    /// POSTs a JSON body to the endpoint.
    pub async fn post(&self, body: &Value) -> Result<ResponseBody, ProviderError> {
        self.http
            .post_json(&self.url, self.headers.clone(), body)
            .await
    }
}
