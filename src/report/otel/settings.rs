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

/// An `OTEL_*` variable that cannot be used: one line naming it, never
/// echoing a header or resource entry (it may be a credential).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SettingsError {
    #[error("{variable}: `{value}` is not an http(s) URL")]
    NotAUrl {
        variable: &'static str,
        value: String,
    },
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL=`{0}` is not supported: ybs exports over OTLP/HTTP, `http/protobuf` or `http/json`"
    )]
    Protocol(String),
    #[error("{variable}=`{value}` is not a positive number of milliseconds")]
    Timeout {
        variable: &'static str,
        value: String,
    },
    #[error(
        "OTEL_EXPORTER_OTLP_HEADERS: `{0}` is not a valid HTTP header name, or its value is not a valid header value"
    )]
    Header(String),
    #[error("{0}: an entry is not of the form key=value")]
    NotKeyValue(&'static str),
    #[error("{0}: an entry has an empty key")]
    EmptyKey(&'static str),
}

/// Why OpenTelemetry export does not start: the run goes on without it,
/// with this as a warning.
#[derive(Debug, thiserror::Error)]
pub enum OtelError {
    #[error(transparent)]
    Settings(#[from] SettingsError),
    #[error("cannot start the export thread: {0}")]
    Thread(std::io::Error),
}

impl Settings {
    /// The settings `var` (an environment lookup) asks for: `None` when
    /// no endpoint is set, or `OTEL_SDK_DISABLED=true`, or
    /// `OTEL_TRACES_EXPORTER=none`. A value that cannot be used is an
    /// error (one line naming the variable); the caller warns and runs
    /// without exporting.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, SettingsError> {
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
        let Some(endpoint) = endpoint(&get)? else {
            return Ok(None);
        };
        Ok(Some(Self {
            endpoint,
            protocol: protocol(&get)?,
            timeout: timeout(&get)?,
            headers: headers(&get)?,
            resource: resource(&get)?,
            parent: get("TRACEPARENT").and_then(|value| traceparent(&value)),
        }))
    }
}

/// Looks up a variable, trimmed, `None` when unset or empty.
type Get<'a> = dyn Fn(&str) -> Option<String> + 'a;

/// The traces endpoint: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, or
/// `OTEL_EXPORTER_OTLP_ENDPOINT` with `/v1/traces` appended.
fn endpoint(get: &Get<'_>) -> Result<Option<reqwest::Url>, SettingsError> {
    if let Some(url) = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
        return parse_url("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url).map(Some);
    }
    let Some(base) = get("OTEL_EXPORTER_OTLP_ENDPOINT") else {
        return Ok(None);
    };
    let base = parse_url("OTEL_EXPORTER_OTLP_ENDPOINT", &base)?;
    let path = format!("{}/v1/traces", base.path().trim_end_matches('/'));
    let mut url = base;
    url.set_path(&path);
    Ok(Some(url))
}

fn protocol(get: &Get<'_>) -> Result<Protocol, SettingsError> {
    match get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| get("OTEL_EXPORTER_OTLP_PROTOCOL"))
        .as_deref()
    {
        None | Some("http/protobuf") => Ok(Protocol::Protobuf),
        Some("http/json") => Ok(Protocol::Json),
        Some(other) => Err(SettingsError::Protocol(other.to_owned())),
    }
}

fn timeout(get: &Get<'_>) -> Result<Duration, SettingsError> {
    let given = [
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
        "OTEL_EXPORTER_OTLP_TIMEOUT",
    ]
    .into_iter()
    .find_map(|variable| get(variable).map(|value| (variable, value)));
    match given {
        None => Ok(DEFAULT_TIMEOUT),
        Some((variable, value)) => match value.parse::<u64>() {
            Ok(ms) if ms > 0 => Ok(Duration::from_millis(ms)),
            _ => Err(SettingsError::Timeout { variable, value }),
        },
    }
}

/// `OTEL_EXPORTER_OTLP_HEADERS`, then `…_TRACES_HEADERS` over it (a name
/// given twice, in any case, keeps the later value).
fn headers(get: &Get<'_>) -> Result<Vec<(String, String)>, SettingsError> {
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
            return Err(SettingsError::Header(key.clone()));
        }
    }
    Ok(headers)
}

/// `service.name` first (`OTEL_SERVICE_NAME`, else the resource's, else
/// `ybs`), the attributes of `OTEL_RESOURCE_ATTRIBUTES`, the version and
/// the SDK's name and language.
fn resource(get: &Get<'_>) -> Result<Vec<(String, AttrValue)>, SettingsError> {
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
    Ok(resource)
}

fn parse_url(variable: &'static str, value: &str) -> Result<reqwest::Url, SettingsError> {
    match reqwest::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.has_host() => Ok(url),
        _ => Err(SettingsError::NotAUrl {
            variable,
            value: value.to_owned(),
        }),
    }
}

/// `key1=value1,key2=value2`, values percent-decoded (the W3C baggage
/// format the OTel specification uses for headers and resources).
fn key_values(name: &'static str, text: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut pairs = Vec::new();
    for item in text
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
    {
        let Some((key, value)) = item.split_once('=') else {
            // Never echo the item: it may be a credential.
            return Err(SettingsError::NotKeyValue(name));
        };
        let key = percent_decode(key.trim());
        if key.is_empty() {
            return Err(SettingsError::EmptyKey(name));
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
