//! The export thread: queued spans posted to the collector, a bounded
//! flush at the end.

use std::io;
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::{Ids, OtelError, Protocol, Settings, Span, ToolFacts, tool_span, wire};

/// Spans that end within this window of the first go in one request.
const BATCH_WINDOW: Duration = Duration::from_secs(1);
/// At most this many spans in one request.
const MAX_BATCH: usize = 512;
/// After a failed request, spans are dropped for this long: a collector
/// that is down costs one timeout, not one per batch.
const PAUSE_AFTER_FAILURE: Duration = Duration::from_secs(30);

/// One tool call as `ybs tools serve` (or any caller outside a run)
/// records it: names and numbers only, never arguments or output.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallSpan {
    pub name: String,
    pub call_id: String,
    /// `allow`, `deny`, `ask`, ...
    pub verdict: String,
    pub ok: bool,
    /// Whether the tool ran at all (a refused call did not).
    pub ran: bool,
    pub exit_code: Option<i32>,
    pub started: SystemTime,
    pub duration: Duration,
}

/// What the export thread reports when it ends.
#[derive(Debug, Default)]
struct Delivery {
    sent: usize,
    dropped: usize,
    error: Option<ExportError>,
}

/// Why spans were not delivered (shared by every batch after a setup
/// failure, hence the `Arc`s).
#[derive(Debug, Clone, thiserror::Error)]
enum ExportError {
    #[error("cannot start the export runtime: {0}")]
    Runtime(Arc<io::Error>),
    #[error("cannot build the HTTP client: {0}")]
    Client(Arc<reqwest::Error>),
    /// The request failed: the error and its causes (`Connection
    /// refused`); the URL, which may hold credentials, is left out.
    #[error("{}", causes(.0))]
    Send(Arc<reqwest::Error>),
    #[error("the collector answered HTTP {0}")]
    Status(reqwest::StatusCode),
}

/// `error: cause: cause …`.
fn causes(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// Posts spans to the collector from a thread of its own, so the run
/// never waits on the network until [`Exporter::shutdown`], and then at
/// most the configured timeout. Spans that end within a second go in
/// one request. A failed request is not retried; for
/// `PAUSE_AFTER_FAILURE` after it, spans are dropped (and counted).
///
/// Shared by reference (`Arc<Exporter>`): every method takes `&self`.
pub struct Exporter {
    sender: Mutex<Option<mpsc::Sender<Vec<Span>>>>,
    done: Mutex<mpsc::Receiver<Delivery>>,
    thread: Mutex<Option<JoinHandle<()>>>,
    endpoint: String,
    timeout: Duration,
    parent: Option<([u8; 16], [u8; 8])>,
    ids: Ids,
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("endpoint", &self.endpoint)
            .finish_non_exhaustive()
    }
}

impl Exporter {
    /// From ybs's environment (`env` looks a variable up): `Ok(None)`
    /// when no endpoint is set (nothing starts), an error when a variable
    /// cannot be used or the export thread cannot start.
    pub fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Result<Option<Self>, OtelError> {
        let Some(settings) = Settings::from_env(env)? else {
            return Ok(None);
        };
        Self::start(settings).map(Some).map_err(OtelError::Thread)
    }

    /// Starts the export thread for `settings`.
    pub fn start(settings: Settings) -> io::Result<Self> {
        let (sender, receiver) = mpsc::channel::<Vec<Span>>();
        let (done_sender, done) = mpsc::channel();
        let mut endpoint = settings.endpoint.clone();
        // Credentials in the URL stay out of warnings.
        let _ = endpoint.set_username("");
        let _ = endpoint.set_password(None);
        endpoint.set_query(None);
        let timeout = settings.timeout;
        let parent = settings.parent;
        let thread = std::thread::Builder::new()
            .name("ybs-otel".into())
            .spawn(move || {
                let delivery = deliver(&settings, &receiver);
                let _ = done_sender.send(delivery);
            })?;
        Ok(Self {
            sender: Mutex::new(Some(sender)),
            done: Mutex::new(done),
            thread: Mutex::new(Some(thread)),
            endpoint: endpoint.to_string(),
            timeout,
            parent,
            ids: Ids::new(),
        })
    }

    /// Queues finished spans for export.
    pub fn export(&self, spans: Vec<Span>) {
        if let Some(sender) = &*lock(&self.sender)
            && !spans.is_empty()
        {
            let _ = sender.send(spans);
        }
    }

    /// The `TRACEPARENT` span its traces hang under, if any.
    pub fn parent(&self) -> Option<([u8; 16], [u8; 8])> {
        self.parent
    }

    /// Records one tool call as an `execute_tool` span of its own trace
    /// (or of `TRACEPARENT`'s), for callers outside a run such as
    /// `ybs tools serve`. The caller passes names and codes only.
    pub fn record_tool_call(&self, call: &ToolCallSpan) {
        let (trace_id, parent) = match self.parent {
            Some((trace, span)) => (trace, Some(span)),
            None => (self.ids.trace(), None),
        };
        let start_ns = call.started.duration_since(UNIX_EPOCH).map_or(0, |since| {
            u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
        });
        let end_ns =
            start_ns.saturating_add(u64::try_from(call.duration.as_nanos()).unwrap_or(u64::MAX));
        let span = tool_span(
            trace_id,
            self.ids.span(),
            parent,
            &ToolFacts {
                name: &call.name,
                call_id: &call.call_id,
                verdict: Some(&call.verdict),
                rule: None,
                ok: call.ok,
                ran: call.ran,
                truncated: false,
                exit_code: call.exit_code,
                duration_ms: u64::try_from(call.duration.as_millis()).unwrap_or(u64::MAX),
            },
            start_ns,
            end_ns,
        );
        self.export(vec![span]);
    }

    /// Delivers what is queued, waiting at most the timeout. Returns a
    /// warning line when spans were not delivered; never fails. Spans
    /// exported after it are dropped; a second call returns `None`.
    pub fn shutdown(&self) -> Option<String> {
        // Closing the queue ends the thread once it has posted the rest.
        let sender = lock(&self.sender).take()?;
        drop(sender);
        let outcome = lock(&self.done).recv_timeout(self.timeout + Duration::from_millis(500));
        let warning = match outcome {
            Ok(delivery) => delivery.error.map(|error| {
                format!(
                    "warning: OpenTelemetry: {} of {} span{} not delivered to {}: {error}",
                    delivery.dropped,
                    delivery.dropped + delivery.sent,
                    if delivery.dropped + delivery.sent == 1 {
                        ""
                    } else {
                        "s"
                    },
                    self.endpoint
                )
            }),
            Err(_) => Some(format!(
                "warning: OpenTelemetry: spans not delivered to {} within {:.1}s; gave up",
                self.endpoint,
                self.timeout.as_secs_f64()
            )),
        };
        if warning.is_none()
            && let Some(thread) = lock(&self.thread).take()
        {
            let _ = thread.join();
        }
        // Otherwise the thread is left to the process's exit.
        warning
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The export thread: posts each batch (everything queued at once in
/// one request) until the queue closes.
fn deliver(settings: &Settings, receiver: &mpsc::Receiver<Vec<Span>>) -> Delivery {
    let mut delivery = Delivery::default();
    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|error| ExportError::Runtime(Arc::new(error)))
        .and_then(|runtime| {
            crate::core::tls::install();
            let client = reqwest::Client::builder()
                .timeout(settings.timeout)
                .connect_timeout(settings.timeout)
                .build()
                .map_err(|error| ExportError::Client(Arc::new(error)))?;
            Ok((runtime, client))
        });
    let mut paused_until: Option<Instant> = None;
    while let Ok(mut batch) = receiver.recv() {
        // What ends within the window goes in the same request; once the
        // queue is closed (the end of the run), everything left at once.
        let until = Instant::now() + BATCH_WINDOW;
        while let Ok(more) = receiver.recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            batch.extend(more);
        }
        for chunk in batch.chunks(MAX_BATCH) {
            if paused_until.is_some_and(|until| Instant::now() < until) {
                delivery.dropped += chunk.len();
                continue;
            }
            let result = match &client {
                Ok((runtime, client)) => runtime.block_on(post(settings, client, chunk)),
                Err(error) => Err(error.clone()),
            };
            match result {
                Ok(()) => delivery.sent += chunk.len(),
                Err(error) => {
                    delivery.dropped += chunk.len();
                    delivery.error.get_or_insert(error);
                    paused_until = Some(Instant::now() + PAUSE_AFTER_FAILURE);
                }
            }
        }
    }
    delivery
}

async fn post(
    settings: &Settings,
    client: &reqwest::Client,
    spans: &[Span],
) -> Result<(), ExportError> {
    let (body, content_type) = match settings.protocol {
        Protocol::Protobuf => (
            wire::protobuf_body(&settings.resource, spans),
            "application/x-protobuf",
        ),
        Protocol::Json => (
            wire::json_body(&settings.resource, spans),
            "application/json",
        ),
    };
    let mut request = client
        .post(settings.endpoint.clone())
        .header(reqwest::header::CONTENT_TYPE, content_type)
        .body(body);
    for (key, value) in &settings.headers {
        request = request.header(key.as_str(), value.as_str());
    }
    let response = request
        .send()
        .await
        .map_err(|error| ExportError::Send(Arc::new(error.without_url())))?;
    let status = response.status();
    if status.is_success() {
        Ok(())
    } else {
        Err(ExportError::Status(status))
    }
}
