//! Retries around `Provider::complete` (docs/providers.md, docs/security.md S11).
//!
//! Exponential backoff with jitter from `backon`; a server's `Retry-After`
//! wins when given, up to a cap. Each retry is reported to the caller, which
//! records it as an event. A retried request is the same request: tools run
//! only after a complete turn, so nothing is ever run twice.

use std::time::{Duration, Instant};

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
    /// When the task's time runs out: a wait that would pass it is not
    /// waited (the error is returned at once, naming the wait).
    pub deadline: Option<Instant>,
}

impl Default for RetrySettings {
    fn default() -> Self {
        Self {
            attempts: 3,
            base_delay: Duration::from_millis(1000),
            max_delay: Duration::from_secs(60),
            deadline: None,
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
/// streams, 408, 409, 429 unless the quota is exhausted, 5xx, 529, and
/// whatever `x-should-retry` says) at most `settings.attempts` times.
/// Anything else, and the last error once the attempts are used up, is
/// returned as is. A wait that cannot be honoured is not waited: a
/// `Retry-After` longer than `settings.max_delay` (retrying sooner is
/// futile), or any wait that would pass `settings.deadline`, returns
/// `WaitTooLong` at once. `on_retry` hears of each retry before its wait.
pub async fn complete(
    provider: &dyn Provider,
    request: &ChatRequest,
    settings: RetrySettings,
    on_retry: &mut (dyn FnMut(&RetryNotice) + Send),
) -> Result<ChatResponse, ProviderError> {
    complete_live(provider, request, settings, &mut |progress| {
        if let Progress::Retry(notice) = progress {
            on_retry(notice);
        }
    })
    .await
}

/// What a request reports while it runs.
#[derive(Debug)]
pub enum Progress<'a> {
    /// A retry about to happen.
    Retry(&'a RetryNotice),
    /// A piece of the turn's text, as it streams in (streaming providers
    /// only; an attempt that fails may have sent some already).
    Text(&'a str),
}

/// As [`complete`], with the turn's text streamed to `on_progress` as it
/// arrives ([`Provider::complete_streaming`]), beside the retries.
pub async fn complete_live(
    provider: &dyn Provider,
    request: &ChatRequest,
    settings: RetrySettings,
    on_progress: &mut (dyn FnMut(Progress<'_>) + Send),
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
        let streamed = provider
            .complete_streaming(request, &mut |text| on_progress(Progress::Text(text)))
            .await;
        let error = match streamed {
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
        // backoff (no jitter: it named the time).
        let requested = error.retry_after();
        let source_name = if requested.is_some() {
            "Retry-After"
        } else {
            "backoff"
        };
        if let Some(wait) = requested.filter(|wait| *wait > settings.max_delay) {
            return Err(ProviderError::WaitTooLong {
                error: Box::new(error),
                wait,
                source_name,
                why: format!(
                    "longer than the longest retry wait of {} s",
                    settings.max_delay.as_secs_f64()
                ),
            });
        }
        // A server's wait below the backoff's first delay (`Retry-After:
        // 0`) is raised to it, as the vendors' SDKs do: a retry never
        // comes at once.
        let delay = requested
            .map_or(backoff, |wait| wait.max(settings.base_delay))
            .min(settings.max_delay);
        if let Some(deadline) = settings.deadline {
            let left = deadline.saturating_duration_since(Instant::now());
            if delay >= left {
                return Err(ProviderError::WaitTooLong {
                    error: Box::new(error),
                    wait: delay,
                    source_name,
                    why: format!(
                        "past the task's remaining time of {:.1} s (limits.timeout)",
                        left.as_secs_f64()
                    ),
                });
            }
        }
        on_progress(Progress::Retry(&RetryNotice {
            attempt,
            delay,
            error,
        }));
        tokio::time::sleep(delay).await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Instant;

    use serde_json::{Value, json};

    use super::*;
    use crate::llm::test_fixtures::{CANARY, config, env, first_request, sse_done};
    use crate::llm::test_server::{Reply, Server};
    use crate::llm::{ProviderConfig, build};

    fn fast() -> RetrySettings {
        RetrySettings {
            attempts: 3,
            base_delay: Duration::from_millis(10),
            max_delay: Duration::from_secs(5),
            deadline: None,
        }
    }

    fn openai(server: &Server, adjust: impl FnOnce(&mut ProviderConfig)) -> Box<dyn Provider> {
        let mut config = config("openai", &format!("{}/v1", server.url));
        adjust(&mut config);
        build(&config, &env(&[("OPENAI_API_KEY", CANARY)])).unwrap()
    }

    fn answer() -> Reply {
        Reply::sse(&sse_done(&[
            json!({"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": null}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        ]))
    }

    fn error_body(message: &str, kind: &str) -> Value {
        json!({"error": {"message": message, "type": kind}})
    }

    async fn run(
        provider: &dyn Provider,
        settings: RetrySettings,
    ) -> (Result<ChatResponse, ProviderError>, Vec<RetryNotice>) {
        let mut notices = Vec::new();
        let result = complete(provider, &first_request(), settings, &mut |notice| {
            notices.push(notice.clone());
        })
        .await;
        (result, notices)
    }

    #[tokio::test]
    async fn rate_limit_with_retry_after_waits_then_succeeds() {
        let server = Server::start(vec![
            Reply::json(429, &error_body("Rate limit reached", "requests"))
                .header("retry-after", "1"),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let started = Instant::now();
        let (result, notices) = run(&*provider, fast()).await;
        let waited = started.elapsed();
        assert_eq!(result.unwrap().content, "done");
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].attempt, 1);
        assert_eq!(notices[0].delay, Duration::from_secs(1));
        assert!(matches!(
            notices[0].error,
            ProviderError::Status { status: 429, .. }
        ));
        assert!(
            waited >= Duration::from_millis(990) && waited < Duration::from_millis(2500),
            "{waited:?}"
        );
        assert_eq!(server.requests().len(), 2);
    }

    #[tokio::test]
    async fn a_retry_after_past_the_cap_fails_at_once() {
        let server = Server::start(vec![
            Reply::json(503, &error_body("busy", "server_error"))
                .header("retry-after", "3600")
                .header("x-request-id", "req_wait1"),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let settings = RetrySettings {
            max_delay: Duration::from_millis(50),
            ..fast()
        };
        let started = Instant::now();
        let (result, notices) = run(&*provider, settings).await;
        let error = result.unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(2));
        assert!(notices.is_empty());
        assert!(
            matches!(error, ProviderError::WaitTooLong { .. }),
            "{error:?}"
        );
        assert!(!error.is_retryable());
        assert_eq!(error.reason(), crate::core::Reason::ProviderError);
        assert_eq!(
            error.to_string(),
            "HTTP 503: busy (request id req_wait1); not retried: Retry-After asks to wait \
             3600 s, longer than the longest retry wait of 0.05 s"
        );
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn a_wait_past_the_deadline_fails_at_once() {
        // Retry-After within the cap, backoff alike: both would pass the
        // task's remaining time.
        let server = Server::start(vec![
            Reply::json(429, &error_body("Rate limit reached", "requests"))
                .header("retry-after", "30"),
            Reply::json(500, &error_body("boom", "server_error")),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let deadline = Some(Instant::now() + Duration::from_secs(5));
        let settings = RetrySettings {
            max_delay: Duration::from_secs(60),
            deadline,
            ..fast()
        };
        let started = Instant::now();
        let (result, notices) = run(&*provider, settings).await;
        let message = result.unwrap_err().to_string();
        assert!(
            message.starts_with("HTTP 429: Rate limit reached; not retried: Retry-After asks to wait 30 s, past the task's remaining time of"),
            "{message}"
        );
        assert!(notices.is_empty());
        let settings = RetrySettings {
            base_delay: Duration::from_secs(20),
            max_delay: Duration::from_secs(60),
            deadline,
            ..fast()
        };
        let (result, _) = run(&*provider, settings).await;
        let message = result.unwrap_err().to_string();
        assert!(
            message.contains("not retried: backoff asks to wait")
                && message.contains("remaining time"),
            "{message}"
        );
        assert!(started.elapsed() < Duration::from_secs(2));
        // Time enough: the retry happens.
        let settings = RetrySettings {
            deadline: Some(Instant::now() + Duration::from_secs(60)),
            ..fast()
        };
        let server = Server::start(vec![
            Reply::json(500, &error_body("boom", "server_error")),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, settings).await;
        assert_eq!(result.unwrap().content, "done");
        assert_eq!(notices.len(), 1);
    }

    #[tokio::test]
    async fn x_should_retry_is_honoured() {
        let server = Server::start(vec![
            // A 500 the server says not to retry.
            Reply::json(500, &error_body("boom", "server_error")).header("x-should-retry", "false"),
            // A 400 the server says to retry, then success.
            Reply::json(400, &error_body("try again", "invalid_request_error"))
                .header("x-should-retry", "true"),
            answer(),
            // A quota error stays final whatever the header says.
            Reply::json(429, &json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}))
                .header("x-should-retry", "true"),
        ]);
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, fast()).await;
        assert_eq!(result.unwrap_err().to_string(), "HTTP 500: boom");
        assert!(notices.is_empty());
        let (result, notices) = run(&*provider, fast()).await;
        assert_eq!(result.unwrap().content, "done");
        assert_eq!(notices.len(), 1);
        let (result, notices) = run(&*provider, fast()).await;
        assert!(result.is_err());
        assert!(notices.is_empty());
        assert_eq!(server.requests().len(), 4);
    }

    #[tokio::test]
    async fn overloaded_529_is_retried() {
        let overloaded = json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let server = Server::start(vec![
            Reply::json(529, &overloaded),
            Reply::sse(
                "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":1,\"output_tokens\":1}}}\n\n\
                 event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"done\"}}\n\n\
                 event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":2}}\n\n\
                 event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
            ),
        ]);
        let provider = build(
            &config("anthropic", &server.url),
            &env(&[("ANTHROPIC_API_KEY", CANARY)]),
        )
        .unwrap();
        let (result, notices) = run(&*provider, fast()).await;
        assert_eq!(result.unwrap().content, "done");
        assert_eq!(notices.len(), 1);
        assert_eq!(notices[0].error.to_string(), "HTTP 529: Overloaded");
    }

    #[tokio::test]
    async fn three_server_errors_then_success() {
        let server = Server::start(vec![
            Reply::json(500, &error_body("boom", "server_error")),
            Reply::json(502, &json!({})),
            Reply::json(500, &error_body("boom", "server_error")),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, fast()).await;
        assert_eq!(result.unwrap().content, "done");
        let attempts: Vec<u32> = notices.iter().map(|notice| notice.attempt).collect();
        assert_eq!(attempts, [1, 2, 3]);
        // Exponential backoff with jitter: each wait within [base·2ⁿ, 2·base·2ⁿ].
        for (notice, base) in notices.iter().zip([10_u64, 20, 40]) {
            assert!(
                notice.delay >= Duration::from_millis(base)
                    && notice.delay <= Duration::from_millis(2 * base),
                "{:?}",
                notice.delay
            );
        }
        assert_eq!(server.requests().len(), 4);
    }

    #[tokio::test]
    async fn retries_exhausted_returns_the_last_error() {
        let server = Server::start(
            (0..5)
                .map(|_| Reply::json(500, &error_body("still broken", "server_error")))
                .collect(),
        );
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, fast()).await;
        let error = result.unwrap_err();
        assert_eq!(error.to_string(), "HTTP 500: still broken");
        assert_eq!(error.reason(), crate::core::Reason::ProviderError);
        assert_eq!(notices.len(), 3);
        assert_eq!(server.requests().len(), 4, "one try and three retries");
    }

    #[tokio::test]
    async fn stream_cut_mid_tool_call_then_a_good_retry() {
        let arguments = r#"{"path": "src/lib.rs"}"#;
        let full = sse_done(&[
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                "function": {"name": "read_file", "arguments": &arguments[..9]}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
                "function": {"arguments": &arguments[9..]}}]}}]}),
            json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        ]);
        let cut_at = full.find("src/lib").unwrap();
        let server = Server::start(vec![
            Reply::sse(&full[..cut_at]).cut(),
            Reply::sse(&full.clone()),
        ]);
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, fast()).await;
        // One complete turn comes back, with the call once: the loop runs
        // tools only on it, so the tool runs exactly once.
        let response = result.unwrap();
        assert_eq!(response.tool_calls.len(), 1);
        assert_eq!(
            response.tool_calls[0].arguments,
            json!({"path": "src/lib.rs"})
        );
        assert_eq!(notices.len(), 1);
        assert!(
            matches!(notices[0].error, ProviderError::Stream(_)),
            "{:?}",
            notices[0].error
        );
        assert_eq!(server.requests().len(), 2);
        assert_eq!(
            server.requests()[0].body,
            server.requests()[1].body,
            "the same request again"
        );
    }

    #[tokio::test]
    async fn stall_past_the_idle_deadline_times_out() {
        let server = Server::start(vec![
            Reply::sse("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hel\"}}]}\n\n")
                .pause(Duration::from_secs(30)),
            answer(),
        ]);
        let provider = openai(&server, |config| {
            config.idle_timeout = Duration::from_millis(300)
        });
        let started = Instant::now();
        let (result, notices) = run(&*provider, fast()).await;
        assert_eq!(result.unwrap().content, "done");
        let error = &notices[0].error;
        assert!(matches!(error, ProviderError::Timeout(_)), "{error:?}");
        assert!(error.to_string().contains("idle"), "{error}");
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    #[tokio::test]
    async fn keep_alives_do_not_outlive_the_total_deadline() {
        let mut reply = Reply::sse(": keep-alive\n\n");
        for _ in 0..100 {
            reply = reply
                .pause(Duration::from_millis(50))
                .send(": keep-alive\n\n");
        }
        let server = Server::start(vec![reply]);
        let provider = openai(&server, |config| {
            config.idle_timeout = Duration::from_millis(200);
            config.total_timeout = Duration::from_millis(600);
        });
        let started = Instant::now();
        let (result, _) = run(
            &*provider,
            RetrySettings {
                attempts: 0,
                ..fast()
            },
        )
        .await;
        let error = result.unwrap_err();
        assert!(error.to_string().contains("total deadline"), "{error}");
        let elapsed = started.elapsed();
        assert!(
            elapsed >= Duration::from_millis(550) && elapsed < Duration::from_secs(2),
            "{elapsed:?}"
        );
    }

    #[tokio::test]
    async fn no_headers_within_the_request_deadline_times_out() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        tokio::spawn(async move {
            // Accept and never answer.
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        let mut config = config("openai", &url);
        config.request_timeout = Duration::from_millis(200);
        let provider = build(&config, &env(&[])).unwrap();
        let (result, notices) = run(
            &*provider,
            RetrySettings {
                attempts: 1,
                ..fast()
            },
        )
        .await;
        assert!(
            matches!(result, Err(ProviderError::Timeout(_))),
            "{result:?}"
        );
        assert_eq!(notices.len(), 1);
    }

    #[tokio::test]
    async fn auth_failure_is_not_retried() {
        let server = Server::start(vec![
            Reply::json(
                401,
                &error_body("Incorrect API key provided", "invalid_request_error"),
            ),
            answer(),
        ]);
        let provider = openai(&server, |_| {});
        let (result, notices) = run(&*provider, fast()).await;
        let error = result.unwrap_err();
        assert!(
            matches!(error, ProviderError::Auth { status: 401, .. }),
            "{error:?}"
        );
        assert_eq!(error.reason(), crate::core::Reason::AuthError);
        assert!(notices.is_empty());
        assert_eq!(server.requests().len(), 1);
    }

    #[tokio::test]
    async fn quota_and_other_client_errors_are_not_retried() {
        let server = Server::start(vec![
            Reply::json(
                429,
                &json!({"error": {"message": "You exceeded your current quota", "type": "insufficient_quota", "code": "insufficient_quota"}}),
            )
            .header("retry-after", "1"),
            Reply::json(400, &error_body("Invalid schema for function 'read_file'", "invalid_request_error")),
            Reply::json(404, &error_body("The model `nope` does not exist", "invalid_request_error")),
        ]);
        let provider = openai(&server, |_| {});
        for expected in [
            "HTTP 429: You exceeded your current quota",
            "HTTP 400: Invalid schema for function 'read_file'",
            "HTTP 404: The model `nope` does not exist",
        ] {
            let (result, notices) = run(&*provider, fast()).await;
            let message = result.unwrap_err().to_string();
            // A 404 also names the model and the endpoint (stream.rs).
            let found = expected
                .strip_prefix("HTTP 404: ")
                .map_or(message == expected, |said| {
                    message.contains(said) && message.contains("not found at")
                });
            assert!(found, "{expected}: {message}");
            assert!(notices.is_empty());
        }
        assert_eq!(server.requests().len(), 3);
    }

    #[tokio::test]
    async fn connect_errors_are_retried() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/v1", listener.local_addr().unwrap());
        drop(listener);
        let provider = build(&config("openai", &url), &env(&[])).unwrap();
        let (result, notices) = run(
            &*provider,
            RetrySettings {
                attempts: 2,
                ..fast()
            },
        )
        .await;
        let error = result.unwrap_err();
        assert!(matches!(error, ProviderError::Connect { .. }), "{error:?}");
        assert!(
            error
                .to_string()
                .starts_with(&format!("cannot connect to {url}")),
            "{error}"
        );
        assert_eq!(notices.len(), 2);
    }
}
