//! L2: talking to models. The `Provider` trait, the wire protocols, the
//! `replay` provider, recording, retries and pricing.
//!
//! Providers know nothing of tasks, tools or policy: they turn one
//! `ChatRequest` into one complete `ChatResponse`. Streaming, reassembly of
//! tool-call fragments and protocol quirks stay inside each provider, so the
//! agent only ever sees whole turns (tools run only after a complete turn).
//!
//! How the runner drives a task's model:
//!
//! ```text
//! let env = |name: &str| std::env::var(name).ok();
//! redactor.add(each of llm::api_key_values(&env));          // docs/security.md S7
//! let provider = match cassette {                          // --cassette FILE
//!     Some(cassette) => Box::new(Replay::new(cassette.clone(), task_id)),
//!     None => llm::build(&provider_config, &env)?,          // MissingKey → auth_error
//! };
//! let provider = match &record_writer {                     // --record FILE
//!     Some(writer) => Box::new(Recorder::new(provider, writer.clone(), task_id)),
//!     None => provider,
//! };
//! // every turn: retries outside the recorder, so each attempt (errors
//! // included) is recorded and a replay retries the same way
//! retry::complete(&*provider, &request, retry_settings, &mut |notice| emit(notice))
//! ```

pub mod anthropic;
pub mod apple;
pub mod cassette;
pub mod error;
pub mod failing;
pub mod http;
pub mod ollama;
pub mod openai;
pub mod pricing;
pub mod record;
pub mod replay;
pub mod retry;
mod stream;
pub mod text_calls;
pub mod tokens;
mod turn;

#[cfg(test)]
mod test_fixtures;
#[cfg(test)]
mod test_server;

use std::time::Duration;

use futures_util::future::BoxFuture;
use reqwest::Url;
use serde::{Deserialize, Serialize};

use crate::core::{Message, ToolCall, ToolSpec, Usage};

pub use error::ProviderError;
pub use http::{ApiKey, Deadlines};

/// One request to a model: the whole conversation so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// When the task's time runs out: a stream still arriving then is cut
    /// and its turn returned as far as it came, with
    /// [`FinishReason::Interrupted`]. Not part of the request sent.
    #[serde(skip)]
    pub deadline: Option<std::time::Instant>,
}

/// Why the model stopped producing this turn.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    #[default]
    Stop,
    ToolCalls,
    /// Cut off by the output token limit.
    Length,
    /// The model refused (Anthropic `stop_reason: refusal`, an OpenAI
    /// message with `refusal` text).
    Refusal,
    /// The provider's content filter ended the turn (OpenAI
    /// `finish_reason: content_filter`).
    ContentFilter,
    Other,
    /// The request's deadline (the task's time) passed while the turn
    /// streamed: the text so far, no tool calls.
    Interrupted,
    /// The provider paused a long turn (Anthropic `stop_reason:
    /// pause_turn`): not an answer; the turn goes on when its content is
    /// sent back as the last assistant message.
    Paused,
}

impl FinishReason {
    /// The wire name, as `llm_calls[].finish_reason` records it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::ToolCalls => "tool_calls",
            Self::Length => "length",
            Self::Refusal => "refusal",
            Self::ContentFilter => "content_filter",
            Self::Other => "other",
            Self::Interrupted => "interrupted",
            Self::Paused => "paused",
        }
    }
}

/// One complete model turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    #[serde(default)]
    pub content: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_id: Option<String>,
    #[serde(default)]
    pub finish_reason: FinishReason,
    /// The provider's id of the request (`x-request-id`, `request-id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<String>,
    /// `usage` is ybs's own estimate, not the server's count (a server
    /// that reports zero tokens: Apple's `fm serve`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub usage_estimated: bool,
}

/// A model endpoint. One required method: produce one complete turn.
pub trait Provider: Send + Sync {
    /// The provider's name as configured (`openai`, `anthropic`, `ollama`, `replay`).
    fn name(&self) -> &str;

    /// Sends one request and returns the complete turn. A provider that
    /// streams collects the stream before returning. No retries here:
    /// `retry::complete` wraps this.
    fn complete<'a>(
        &'a self,
        request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>>;

    /// As [`complete`](Self::complete), handing the turn's text to
    /// `on_text` piece by piece as it streams in, for a live view
    /// (docs/progress.md). The default streams nothing: the text comes
    /// with the whole turn.
    fn complete_streaming<'a>(
        &'a self,
        request: &'a ChatRequest,
        on_text: &'a mut (dyn FnMut(&str) + Send),
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        let _ = on_text;
        self.complete(request)
    }
}

/// The environment variable holding the OpenAI (or compatible) API key.
pub const OPENAI_API_KEY: &str = "OPENAI_API_KEY";
/// The environment variable holding the Anthropic API key.
pub const ANTHROPIC_API_KEY: &str = "ANTHROPIC_API_KEY";

/// One provider ybs knows (codex's `ModelProviderInfo`): its name, where
/// its endpoint and key come from, and how it is built.
#[derive(Debug, Clone, Copy)]
pub struct ModelProviderInfo {
    pub name: &'static str,
    /// Its endpoint and key; `None` for `replay`, which answers from a
    /// cassette.
    pub vendor: Option<Vendor>,
    /// The model when nothing names one (`apple`: `system`); `None`: the
    /// built-in default.
    pub default_model: Option<&'static str>,
    connect: Option<Connect>,
}

/// Builds a provider from resolved settings.
type Connect = fn(Settings) -> Result<Box<dyn Provider>, ProviderError>;

fn connect<W: stream::Wire>(settings: Settings) -> Result<Box<dyn Provider>, ProviderError> {
    Ok(Box::new(stream::Streaming::<W>::new(settings)?))
}

/// Every provider ybs knows (docs/providers.md): the one list the task and config
/// checks, the schemas, `--provider` and the redactor's key variables
/// follow.
pub const PROVIDERS: &[ModelProviderInfo] = &[
    ModelProviderInfo {
        name: "openai",
        vendor: Some(Vendor {
            base_url_var: "OPENAI_BASE_URL",
            default_endpoint: "https://api.openai.com/v1",
            vendor_host: Some("api.openai.com"),
            key_var: Some(OPENAI_API_KEY),
            bare_host: false,
        }),
        default_model: None,
        connect: Some(connect::<openai::OpenAi>),
    },
    ModelProviderInfo {
        name: "anthropic",
        vendor: Some(Vendor {
            base_url_var: "ANTHROPIC_BASE_URL",
            default_endpoint: "https://api.anthropic.com",
            vendor_host: Some("api.anthropic.com"),
            key_var: Some(ANTHROPIC_API_KEY),
            bare_host: false,
        }),
        default_model: None,
        connect: Some(connect::<anthropic::Anthropic>),
    },
    ModelProviderInfo {
        name: "ollama",
        vendor: Some(Vendor {
            base_url_var: "OLLAMA_HOST",
            default_endpoint: "http://localhost:11434",
            vendor_host: None,
            key_var: None,
            bare_host: true,
        }),
        default_model: None,
        connect: Some(connect::<ollama::Ollama>),
    },
    // Apple's on-device model behind `fm serve` (macOS 27) or a bridge
    // such as `apfel`: the OpenAI wire, no key, the model `system`.
    ModelProviderInfo {
        name: "apple",
        vendor: Some(Vendor {
            base_url_var: apple::BASE_URL_VAR,
            default_endpoint: apple::DEFAULT_ENDPOINT,
            vendor_host: None,
            key_var: None,
            bare_host: false,
        }),
        default_model: Some(apple::DEFAULT_MODEL),
        connect: Some(connect::<apple::Apple>),
    },
    ModelProviderInfo {
        name: "replay",
        vendor: None,
        default_model: None,
        connect: None,
    },
];

/// The names of [`PROVIDERS`], in order.
pub const PROVIDER_NAMES: [&str; PROVIDERS.len()] = {
    let mut names = [""; PROVIDERS.len()];
    let mut index = 0;
    while index < PROVIDERS.len() {
        names[index] = PROVIDERS[index].name;
        index += 1;
    }
    names
};

/// The provider called `name`.
pub fn provider_info(name: &str) -> Option<&'static ModelProviderInfo> {
    PROVIDERS.iter().find(|info| info.name == name)
}

/// Every environment variable that may hold an API key.
pub fn api_key_vars() -> impl Iterator<Item = &'static str> {
    PROVIDERS
        .iter()
        .filter_map(|info| info.vendor.and_then(|vendor| vendor.key_var))
}

/// How to reach one model endpoint: what the runner resolves from flags,
/// environment, config files and the task before building a provider.
#[derive(Debug, Clone, PartialEq)]
pub struct ProviderConfig {
    /// `openai`, `anthropic` or `ollama` (`replay` is built from a cassette).
    pub name: String,
    /// The model, used when a request names none.
    pub model: String,
    /// The base URL as the vendor SDKs take it (`https://api.openai.com/v1`,
    /// `https://api.anthropic.com`, `http://localhost:11434`). `None`: from
    /// the environment (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`,
    /// `OLLAMA_HOST`), else the vendor's default.
    pub endpoint: Option<String>,
    /// The endpoint was named by the repository (its `./.ybs.json` or a
    /// task file), not by the operator: it never receives a key, whatever
    /// its host (docs/security.md S5).
    pub endpoint_from_repository: bool,
    /// Stream responses (`true` by default).
    pub streaming: bool,
    /// Recover tool calls printed as JSON text (`llm.text_tool_calls`).
    pub text_tool_calls: bool,
    /// Until the response headers arrive (for a non-streaming request:
    /// until the whole turn is generated).
    pub request_timeout: Duration,
    /// The longest silence inside a response body.
    pub idle_timeout: Duration,
    /// The whole request.
    pub total_timeout: Duration,
    /// The largest response read, in bytes as they arrive (stream framing
    /// included); a larger one ends with `ResponseTooLarge`.
    pub max_response_bytes: u64,
    /// Prompt caching (docs/providers.md, "Prompt caching").
    pub prompt_cache: PromptCache,
}

/// Prompt caching: what ybs asks of the provider so that a task pays for
/// each token of its stable prefix once (docs/providers.md).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptCache {
    /// Anthropic: `cache_control` breakpoints on the tools, the system
    /// prompt and the last message (`llm.prompt_cache`, default on).
    pub enabled: bool,
    /// Anthropic: write for an hour instead of five minutes
    /// (`llm.prompt_cache_ttl: 1h`).
    pub one_hour: bool,
    /// The task's `prompt_cache_key` (from its id and file, never a
    /// secret), sent on the OpenAI wire.
    pub key: Option<String>,
    /// Send the key to an OpenAI-compatible endpoint that is not OpenAI's
    /// own (`llm.prompt_cache_key: true`); OpenAI's own always gets it.
    pub key_anywhere: bool,
}

impl Default for PromptCache {
    fn default() -> Self {
        Self {
            enabled: true,
            one_hour: false,
            key: None,
            key_anywhere: false,
        }
    }
}

impl PromptCache {
    /// The key a task sends: `ybs-` and 16 hex digits of the SHA-256 of
    /// its file's path and its id.
    pub fn task_key(file: &std::path::Path, id: &str) -> String {
        use sha2::Digest as _;
        let mut hasher = sha2::Sha256::new();
        hasher.update(file.to_string_lossy().as_bytes());
        hasher.update([0]);
        hasher.update(id.as_bytes());
        let digest = hasher.finalize();
        let hex: String = digest[..8]
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect();
        format!("ybs-{hex}")
    }

    /// The `cache_control` of a breakpoint, `None` when caching is off.
    fn control(&self) -> Option<serde_json::Value> {
        self.enabled.then(|| {
            if self.one_hour {
                serde_json::json!({"type": "ephemeral", "ttl": "1h"})
            } else {
                serde_json::json!({"type": "ephemeral"})
            }
        })
    }
}

/// `llm.max_response_bytes` when nobody sets it: 8 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 8 << 20;

impl ProviderConfig {
    /// A config with the defaults: streaming on, text tool calls off,
    /// 120 s to the response headers, 60 s idle, 10 min in total.
    pub fn new(name: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            model: model.into(),
            endpoint: None,
            endpoint_from_repository: false,
            streaming: true,
            text_tool_calls: false,
            request_timeout: Duration::from_secs(120),
            idle_timeout: Duration::from_secs(60),
            total_timeout: Duration::from_secs(600),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            prompt_cache: PromptCache::default(),
        }
    }

    fn deadlines(&self) -> Deadlines {
        Deadlines {
            request: self.request_timeout,
            idle: self.idle_timeout,
            total: self.total_timeout,
        }
    }
}

/// Builds the provider `config` names. Keys and default endpoints come
/// from `env` (pass `|name| std::env::var(name).ok()`). A vendor's own
/// endpoint (`https://api.openai.com`, `https://api.anthropic.com`, on
/// the default port) without its key is a `MissingKey` error here, before
/// any request; any other endpoint the operator named gets the key when it
/// is set and works without one. An endpoint the repository named never
/// gets a key: for a vendor's own endpoint that is a `KeyWithheld` error.
pub fn build(
    config: &ProviderConfig,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn Provider>, ProviderError> {
    let Some(info) = provider_info(&config.name) else {
        let (last, rest) = PROVIDER_NAMES.split_last().unwrap_or((&"", &[]));
        return Err(ProviderError::Config(format!(
            "unknown provider `{}` (expected {} or `{last}`)",
            config.name,
            crate::core::text::list(rest)
        )));
    };
    match (info.vendor, info.connect) {
        (Some(vendor), Some(connect)) => connect(Settings::resolve(config, env, &vendor)?),
        _ => Err(ProviderError::Config(
            "the `replay` provider answers from a cassette: give `--cassette FILE`".into(),
        )),
    }
}

/// The value of every API key set in `env`, for the runner's redactor
/// (docs/security.md S7): whichever provider runs, no key may reach an output.
pub fn api_key_values(env: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    api_key_vars()
        .filter_map(|var| env(var).and_then(ApiKey::new))
        .map(|key| key.expose().to_owned())
        .collect()
}

/// Where a provider's endpoint and key come from.
#[derive(Debug, Clone, Copy)]
pub struct Vendor {
    /// The variable that may name the base URL.
    pub base_url_var: &'static str,
    /// The base URL when nothing names one.
    pub default_endpoint: &'static str,
    /// The host that requires a key, if any.
    pub vendor_host: Option<&'static str>,
    /// The variable holding the API key, if it takes one.
    pub key_var: Option<&'static str>,
    /// A base URL may be a bare `host[:port]` (Ollama's `OLLAMA_HOST`):
    /// `http://` and the port 11434 are implied.
    pub bare_host: bool,
}

/// A resolved config, as the protocol implementations take it.
#[derive(Debug)]
pub(crate) struct Settings {
    pub name: String,
    pub model: String,
    pub endpoint: Url,
    pub streaming: bool,
    pub text_tool_calls: bool,
    /// True for the vendor's own endpoint (not a compatible server).
    pub vendor: bool,
    pub key: Option<ApiKey>,
    pub deadlines: Deadlines,
    pub max_response_bytes: u64,
    pub prompt_cache: PromptCache,
}

impl Settings {
    fn resolve(
        config: &ProviderConfig,
        env: &dyn Fn(&str) -> Option<String>,
        vendor: &Vendor,
    ) -> Result<Self, ProviderError> {
        let from_env = env(vendor.base_url_var).filter(|value| !value.trim().is_empty());
        let (text, source) = match (&config.endpoint, from_env) {
            (Some(endpoint), _) => (endpoint.clone(), "endpoint"),
            (None, Some(value)) => (value, vendor.base_url_var),
            (None, None) => (vendor.default_endpoint.to_owned(), "endpoint"),
        };
        let endpoint = parse_endpoint(&text, vendor.bare_host).map_err(|problem| {
            ProviderError::Config(format!("invalid {source} `{text}`: {problem}"))
        })?;
        let is_vendor = is_vendor_endpoint(&endpoint, vendor.vendor_host);
        let from_repository = config.endpoint_from_repository && config.endpoint.is_some();
        let key = vendor
            .key_var
            .filter(|_| !from_repository)
            .and_then(env)
            .and_then(ApiKey::new);
        if is_vendor && key.is_none() {
            let var = vendor.key_var.unwrap_or_default().to_owned();
            return Err(if from_repository {
                ProviderError::KeyWithheld {
                    var,
                    endpoint: http::label(&endpoint),
                }
            } else {
                ProviderError::MissingKey { var }
            });
        }
        Ok(Self {
            name: config.name.clone(),
            model: config.model.clone(),
            endpoint,
            streaming: config.streaming,
            text_tool_calls: config.text_tool_calls,
            vendor: is_vendor,
            key,
            deadlines: config.deadlines(),
            max_response_bytes: config.max_response_bytes,
            prompt_cache: config.prompt_cache.clone(),
        })
    }

    /// The endpoint with `segments` appended to its path (its query kept).
    pub fn url(&self, segments: &[&str]) -> Result<Url, ProviderError> {
        let mut url = self.endpoint.clone();
        url.path_segments_mut()
            .map_err(|()| {
                ProviderError::Config(format!(
                    "endpoint `{}` cannot take a path",
                    http::label(&self.endpoint)
                ))
            })?
            .pop_if_empty()
            .extend(segments);
        Ok(url)
    }

    /// The request's model, or the configured one when it names none.
    pub fn model<'a>(&'a self, request: &'a ChatRequest) -> &'a str {
        if request.model.is_empty() {
            &self.model
        } else {
            &request.model
        }
    }
}

/// True if and only if `url` is the vendor's own endpoint: its host, over
/// `https`, on the default port. `http://api.openai.com:18080` is not: the
/// key would cross the network in clear, to whoever answers there.
fn is_vendor_endpoint(url: &Url, vendor_host: Option<&str>) -> bool {
    vendor_host.is_some_and(|host| {
        url.host_str()
            .is_some_and(|name| name.trim_end_matches('.').eq_ignore_ascii_case(host))
            && url.scheme() == "https"
            && url.port().is_none()
    })
}

/// Why a base URL is no endpoint.
#[derive(Debug, thiserror::Error)]
enum BadEndpoint {
    #[error("{0}")]
    Url(<Url as std::str::FromStr>::Err),
    #[error("the scheme must be `http` or `https`")]
    Scheme,
    #[error("no host")]
    NoHost,
}

/// Parses a base URL. With `bare_host` (Ollama's `OLLAMA_HOST` style), a
/// value without a scheme means `http://`, and without a port `:11434`.
fn parse_endpoint(text: &str, bare_host: bool) -> Result<Url, BadEndpoint> {
    let text = text.trim();
    let text = if bare_host && !text.contains("://") {
        let (host, path) = text.split_once('/').unwrap_or((text, ""));
        let host = if host.is_empty() { "localhost" } else { host };
        let host = if host.starts_with(':') {
            format!("localhost{host}")
        } else {
            host.to_owned()
        };
        let has_port = host.rsplit_once(':').is_some_and(|(name, port)| {
            !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) && !name.ends_with(':')
        }) && (!host.starts_with('[') || host.contains("]:"));
        let port = if has_port { "" } else { ":11434" };
        format!("http://{host}{port}/{path}")
    } else {
        text.to_owned()
    };
    let url = Url::parse(&text).map_err(BadEndpoint::Url)?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(BadEndpoint::Scheme);
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(BadEndpoint::NoHost);
    }
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::test_fixtures::{CANARY, config, env, first_request};
    use super::test_server::{Reply, Server};
    use super::*;

    #[test]
    fn every_registered_provider_builds_or_says_why_not() {
        assert_eq!(PROVIDER_NAMES.len(), PROVIDERS.len());
        for (info, name) in PROVIDERS.iter().zip(PROVIDER_NAMES) {
            assert_eq!(info.name, name);
            assert_eq!(info.vendor.is_some(), info.connect.is_some(), "{name}");
            match build(&config(name, "http://127.0.0.1:9"), &env(&[])) {
                Ok(provider) => assert_eq!(provider.name(), name),
                Err(error) => {
                    assert!(info.vendor.is_none(), "{name}: {error}");
                    assert!(error.to_string().contains("--cassette"), "{error}");
                }
            }
        }
        let unknown = build(&config("nope", "http://127.0.0.1:9"), &env(&[]))
            .err()
            .unwrap()
            .to_string();
        for name in PROVIDER_NAMES {
            assert!(unknown.contains(&format!("`{name}`")), "{unknown}");
        }
    }

    #[tokio::test]
    async fn missing_key_for_a_vendor_endpoint_fails_before_any_request() {
        let server = Server::start(vec![]);
        let cases = [
            ("openai", None, "OPENAI_API_KEY"),
            (
                "openai",
                Some("https://api.openai.com/v1"),
                "OPENAI_API_KEY",
            ),
            ("anthropic", None, "ANTHROPIC_API_KEY"),
            (
                "anthropic",
                Some("https://api.anthropic.com/"),
                "ANTHROPIC_API_KEY",
            ),
        ];
        for (name, endpoint, var) in cases {
            let mut config = ProviderConfig::new(name, "m");
            config.endpoint = endpoint.map(str::to_owned);
            // An empty variable is no key; a base URL from the
            // environment pointing at the test server is overridden by
            // the explicit vendor endpoint, or absent.
            let env = env(&[(var, "  ")]);
            let error = build(&config, &env)
                .err()
                .expect("no provider without a key");
            assert!(
                matches!(&error, ProviderError::MissingKey { var: missing } if missing == var),
                "{error:?}"
            );
            assert_eq!(error.reason(), crate::core::Reason::AuthError);
            assert!(!error.is_retryable());
        }
        // OPENAI_BASE_URL pointing at a vendor host counts too.
        let error = build(
            &ProviderConfig::new("openai", "m"),
            &env(&[("OPENAI_BASE_URL", "https://api.openai.com/v1")]),
        )
        .err()
        .expect("missing key");
        assert!(matches!(error, ProviderError::MissingKey { .. }));
        assert!(server.requests().is_empty());
    }

    #[tokio::test]
    async fn other_endpoints_send_the_key_only_when_set() {
        let answer = serde_json::json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "ok"}}]});
        let server = Server::start(vec![Reply::json(200, &answer), Reply::json(200, &answer)]);
        // The endpoint from OPENAI_BASE_URL, no key: no Authorization.
        let mut config = ProviderConfig::new("openai", "env-model");
        config.streaming = false;
        let provider = build(
            &config,
            &env(&[("OPENAI_BASE_URL", &format!("{}/v1/", server.url))]),
        )
        .unwrap();
        let mut request = first_request();
        request.model.clear();
        assert_eq!(provider.complete(&request).await.unwrap().content, "ok");
        // With a key: sent.
        let provider = build(
            &config,
            &env(&[
                ("OPENAI_BASE_URL", &format!("{}/v1", server.url)),
                ("OPENAI_API_KEY", CANARY),
            ]),
        )
        .unwrap();
        provider.complete(&first_request()).await.unwrap();
        let requests = server.requests();
        assert_eq!(requests[0].path, "/v1/chat/completions");
        assert!(requests[0].header("authorization").is_none());
        assert_eq!(
            requests[0].json()["model"],
            "env-model",
            "config model fills an empty request model"
        );
        assert_eq!(
            requests[1].header("authorization"),
            Some(&*format!("Bearer {CANARY}"))
        );
    }

    #[tokio::test]
    async fn the_key_never_appears_in_errors_or_debug() {
        // A hostile or careless server echoes the key in its error body.
        let echo = |status: u16| {
            Reply::json(
                status,
                &serde_json::json!({"error": {"message": format!("Incorrect API key provided: {CANARY}"),
                    "type": "invalid_request_error"}}),
            )
        };
        let server = Server::start(vec![
            echo(401),
            echo(400),
            Reply::sse(&format!(
                "data: {{\"error\": {{\"message\": \"bad {CANARY}\"}}}}\n\n"
            )),
            Reply::sse(&format!("data: {{\"broken\": \"{CANARY}\"\n\n")),
        ]);
        let provider = build(
            &config("openai", &server.url),
            &env(&[("OPENAI_API_KEY", CANARY)]),
        )
        .unwrap();
        assert!(
            !format!(
                "{:?}",
                Settings::resolve(
                    &config("openai", &server.url),
                    &env(&[("OPENAI_API_KEY", CANARY)]),
                    &Vendor {
                        base_url_var: "X",
                        default_endpoint: "http://x",
                        vendor_host: None,
                        key_var: Some(OPENAI_API_KEY),
                        bare_host: false,
                    },
                )
                .unwrap()
            )
            .contains(CANARY)
        );
        for expected_auth in [true, false, false, false] {
            let error = provider.complete(&first_request()).await.unwrap_err();
            let shown = format!("{error} {error:?}");
            assert!(!shown.contains(CANARY), "{shown}");
            assert!(shown.contains("[REDACTED]"), "{shown}");
            assert_eq!(
                matches!(error, ProviderError::Auth { .. }),
                expected_auth,
                "{error:?}"
            );
        }
        assert!(
            server
                .requests()
                .iter()
                .all(|request| request.text().contains(CANARY))
        );
    }

    #[test]
    fn unknown_and_replay_providers_are_config_errors() {
        let error = build(&ProviderConfig::new("gemini", "m"), &env(&[]))
            .err()
            .unwrap();
        assert!(error.to_string().contains("unknown provider `gemini`"));
        let error = build(&ProviderConfig::new("replay", "m"), &env(&[]))
            .err()
            .unwrap();
        assert!(error.to_string().contains("--cassette"));
        let mut config = ProviderConfig::new("openai", "m");
        config.endpoint = Some("ftp://example.com".into());
        let error = build(&config, &env(&[])).err().unwrap();
        assert!(matches!(error, ProviderError::Config(_)), "{error:?}");
    }

    #[test]
    fn every_key_goes_to_the_redactor() {
        let env = env(&[
            ("OPENAI_API_KEY", "sk-one"),
            ("ANTHROPIC_API_KEY", " sk-ant-two "),
            ("OTHER", "x"),
        ]);
        assert_eq!(api_key_values(&env), ["sk-one", "sk-ant-two"]);
    }

    #[test]
    fn ollama_host_forms() {
        let cases = [
            ("localhost", "http://localhost:11434/"),
            ("0.0.0.0", "http://0.0.0.0:11434/"),
            ("127.0.0.1:9999", "http://127.0.0.1:9999/"),
            (":8080", "http://localhost:8080/"),
            ("example.com/ollama", "http://example.com:11434/ollama"),
            ("[::1]", "http://[::1]:11434/"),
            ("[::1]:5000", "http://[::1]:5000/"),
            ("https://ollama.example.com", "https://ollama.example.com/"),
            ("http://10.0.0.2:11434", "http://10.0.0.2:11434/"),
        ];
        for (host, expected) in cases {
            let settings = Settings::resolve(
                &ProviderConfig::new("ollama", "m"),
                &env(&[("OLLAMA_HOST", host)]),
                &Vendor {
                    base_url_var: "OLLAMA_HOST",
                    default_endpoint: "http://localhost:11434",
                    vendor_host: None,
                    key_var: None,
                    bare_host: true,
                },
            )
            .unwrap();
            assert_eq!(settings.endpoint.as_str(), expected, "{host}");
        }
        let settings = Settings::resolve(
            &ProviderConfig::new("ollama", "m"),
            &env(&[]),
            &Vendor {
                base_url_var: "OLLAMA_HOST",
                default_endpoint: "http://localhost:11434",
                vendor_host: None,
                key_var: None,
                bare_host: true,
            },
        )
        .unwrap();
        assert_eq!(
            settings.url(&["api", "chat"]).unwrap().as_str(),
            "http://localhost:11434/api/chat"
        );
    }

    #[test]
    fn apple_defaults_to_fm_serve_with_no_key_and_the_system_model() {
        let info = provider_info("apple").unwrap();
        assert_eq!(info.default_model, Some("system"));
        let vendor = info.vendor.unwrap();
        let env = env(&[(OPENAI_API_KEY, CANARY)]);
        let settings =
            Settings::resolve(&ProviderConfig::new("apple", "system"), &env, &vendor).unwrap();
        assert_eq!(settings.endpoint.as_str(), "http://127.0.0.1:1976/v1");
        assert!(settings.key.is_none());
        assert!(!settings.vendor);
        // A bare host is no URL here (that is Ollama's form only).
        let mut config = ProviderConfig::new("apple", "system");
        config.endpoint = Some("localhost:1976".into());
        assert!(Settings::resolve(&config, &env, &vendor).is_err());
        let env = super::test_fixtures::env(&[("APPLE_FM_BASE_URL", "http://127.0.0.1:11434/v1")]);
        let settings =
            Settings::resolve(&ProviderConfig::new("apple", "system"), &env, &vendor).unwrap();
        assert_eq!(settings.endpoint.as_str(), "http://127.0.0.1:11434/v1");
    }

    #[test]
    fn paths_append_and_queries_stay() {
        let mut config = ProviderConfig::new("openai", "m");
        config.endpoint = Some("https://proxy.example.com/openai/v1/?api-version=2".into());
        let settings = Settings::resolve(
            &config,
            &env(&[]),
            &Vendor {
                base_url_var: "OPENAI_BASE_URL",
                default_endpoint: "https://api.openai.com/v1",
                vendor_host: Some("api.openai.com"),
                key_var: Some(OPENAI_API_KEY),
                bare_host: false,
            },
        )
        .unwrap();
        assert!(!settings.vendor);
        assert_eq!(
            settings.url(&["chat", "completions"]).unwrap().as_str(),
            "https://proxy.example.com/openai/v1/chat/completions?api-version=2"
        );
    }
}
