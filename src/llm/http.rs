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
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt, stream};
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use serde_json::Value;
use sse_stream::{Sse, SseByteStream};
use tokio::time::Instant;

use super::ProviderError;
use crate::core::redact::MASK;

mod failure;
use failure::{chain, is_loopback, quote, seconds, sse_error};
pub(super) use failure::{label, request_id, status_error, stream_error};

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

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use reqwest::header::HeaderName;

    use super::failure::{parse_http_date, retry_after};
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
