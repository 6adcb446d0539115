//! The standard `OTEL_*` variables, read into [`Settings`].

use std::time::Duration;

use super::AttrValue;
use crate::core::text::unhex;

/// The default per-request timeout (`OTEL_EXPORTER_OTLP_TIMEOUT`), which
/// also bounds the wait for delivery at the end of the run.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// The body encoding of the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf` (the default), `application/x-protobuf`.
    Protobuf,
    /// `http/json`, `application/json`.
    Json,
}

/// Where and how to export, from the standard `OTEL_*` variables.
#[derive(Clone, PartialEq)]
pub struct Settings {
    /// The full URL of the traces endpoint (`…/v1/traces`).
    pub endpoint: reqwest::Url,
    /// `OTEL_EXPORTER_OTLP_HEADERS` (and `…_TRACES_HEADERS`): often a
    /// credential, so never printed.
    pub headers: Vec<(String, String)>,
    pub protocol: Protocol,
    pub timeout: Duration,
    /// `service.name`, `service.version` and `OTEL_RESOURCE_ATTRIBUTES`.
    pub resource: Vec<(String, AttrValue)>,
    /// `TRACEPARENT`: task spans become children of this span.
    pub parent: Option<([u8; 16], [u8; 8])>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("endpoint", &self.endpoint.as_str())
            .field("headers", &format!("{} header(s)", self.headers.len()))
            .field("protocol", &self.protocol)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// The settings `var` (an environment lookup) asks for: `None` when
    /// no endpoint is set, or `OTEL_SDK_DISABLED=true`, or
    /// `OTEL_TRACES_EXPORTER=none`. A value that cannot be used is an
    /// error (one line naming the variable); the caller warns and runs
    /// without exporting.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, String> {
        let get = |name: &str| {
            var(name)
                .map(|value| value.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if get("OTEL_SDK_DISABLED").is_some_and(|value| value.eq_ignore_ascii_case("true"))
            || get("OTEL_TRACES_EXPORTER").is_some_and(|value| value.eq_ignore_ascii_case("none"))
        {
            return Ok(None);
        }
        let endpoint = if let Some(url) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            parse_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url)?
        } else if let Some(base) = get("OTEL_EXPORTER_OTLP_ENDPOINT") {
            let base = parse_url("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?;
            let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
            let mut url = base;
            url.set_path(&path);
            url
        } else {
            return Ok(None);
        };
        let protocol = match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .as_deref()
        {
            None | Some("http/protobuf") => Protocol::Protobuf,
            Some("http/json") => Protocol::Json,
            Some(other) => {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_PROTOCOL=`{other}` is not supported: ybs exports over OTLP/HTTP, `http/protobuf` or `http/json`"
                ));
            }
        };
        let timeout = match get("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
            .map(|value| ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", value))
            .or_else(|| {
                get("OTEL_EXPORTER_OTLP_TIMEOUT").map(|value| ("OTEL_EXPORTER_OTLP_TIMEOUT", value))
            }) {
            None => DEFAULT_TIMEOUT,
            Some((name, value)) => match value.parse::<u64>() {
                Ok(ms) if ms > 0 => Duration::from_millis(ms),
                _ => {
                    return Err(format!(
                        "{name}=`{value}` is not a positive number of milliseconds"
                    ));
                }
            },
        };
        let mut headers = Vec::new();
        for name in [
            "OTEL_EXPORTER_OTLP_HEADERS",
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
        ] {
            for (key, value) in key_values(name, get(name).as_deref().unwrap_or(""))? {
                headers.retain(|(other, _): &(String, String)| !other.eq_ignore_ascii_case(&key));
                headers.push((key, value));
            }
        }
        for (key, value) in &headers {
            if reqwest::header::HeaderName::from_bytes(key.as_bytes()).is_err()
                || reqwest::header::HeaderValue::from_str(value).is_err()
            {
                return Err(format!(
                    "OTEL_EXPORTER_OTLP_HEADERS: `{key}` is not a valid HTTP header name, or its value is not a valid header value"
                ));
            }
        }
        let mut resource: Vec<(String, AttrValue)> = Vec::new();
        for (key, value) in key_values(
            "OTEL_RESOURCE_ATTRIBUTES",
            get("OTEL_RESOURCE_ATTRIBUTES").as_deref().unwrap_or(""),
        )? {
            resource.push((key, AttrValue::Str(value)));
        }
        let service = get("OTEL_SERVICE_NAME").or_else(|| {
            resource
                .iter()
                .find(|(key, _)| key == "service.name")
                .and_then(|(_, value)| match value {
                    AttrValue::Str(name) => Some(name.clone()),
                    _ => None,
                })
        });
        resource.retain(|(key, _)| key != "service.name");
        resource.insert(
            0,
            (
                "service.name".into(),
                AttrValue::Str(service.unwrap_or_else(|| "ybs".into())),
            ),
        );
        if !resource.iter().any(|(key, _)| key == "service.version") {
            resource.push(("service.version".into(), env!("CARGO_PKG_VERSION").into()));
        }
        resource.push(("telemetry.sdk.name".into(), "ybs".into()));
        resource.push(("telemetry.sdk.language".into(), "rust".into()));
        let parent = get("TRACEPARENT").and_then(|value| traceparent(&value));
        Ok(Some(Self {
            endpoint,
            headers,
            protocol,
            timeout,
            resource,
            parent,
        }))
    }
}

fn parse_url(name: &str, value: &str) -> Result<reqwest::Url, String> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(url),
        _ => Err(format!("{name}: `{value}` is not an http(s) URL")),
    }
}

/// `key1=value1,key2=value2`, values percent-decoded (the W3C baggage
/// format the OTel specification uses for headers and resources).
fn key_values(name: &str, text: &str) -> Result<Vec<(String, String)>, String> {
    let mut pairs = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let Some((key, value)) = item.split_once('=') else {
            // Never echo the item: it may be a credential.
            return Err(format!("{name}: an entry is not of the form key=value"));
        };
        let key = percent_decode(key.trim());
        if key.is_empty() {
            return Err(format!("{name}: an entry has an empty key"));
        }
        pairs.push((key, percent_decode(value.trim())));
    }
    Ok(pairs)
}

/// `%XX` sequences decoded (`percent-encoding`, already built for URLs);
/// a `%` not followed by two hex digits stays as it is.
fn percent_decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text)
        .decode_utf8_lossy()
        .into_owned()
}

/// `00-<trace id>-<span id>-<flags>` (W3C Trace Context).
fn traceparent(value: &str) -> Option<([u8; 16], [u8; 8])> {
    let mut parts = value.split('-');
    let (version, trace, span) = (parts.next()?, parts.next()?, parts.next()?);
    if version.len() != 2 || version == "ff" {
        return None;
    }
    let trace: [u8; 16] = unhex(trace)?.try_into().ok()?;
    let span: [u8; 8] = unhex(span)?.try_into().ok()?;
    (trace != [0; 16] && span != [0; 8]).then_some((trace, span))
}
