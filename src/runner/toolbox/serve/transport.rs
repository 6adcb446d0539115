//! The transports `ybs tools serve` answers on: stdin and stdout, or
//! streamable HTTP on a local address.

use std::sync::Arc;
use std::time::Duration;

use rmcp::service::ServiceExt;

use super::super::Toolbox;
use super::{HTTP_PATH, MAX_CONNECTIONS, Server, Shared};
use crate::runner::RunError;

/// One session on stdin/stdout, until EOF, a signal or the client ends it.
pub(super) async fn serve_stdio(
    shared: &Arc<Shared>,
    rescan: impl Future<Output = ()>,
    stopped: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let (stdin, stdout) = rmcp::transport::stdio_pipes();
    let eof = Arc::new(tokio::sync::Notify::new());
    let stdin = EofSignal {
        inner: stdin,
        eof: eof.clone(),
    };
    let service = Server(shared.clone())
        .serve((stdin, stdout))
        .await
        .map_err(|error| RunError::usage(format!("MCP session did not start: {error}"), None))?;
    let cancel = service.cancellation_token();
    tokio::select! {
        _ = service.waiting() => {}
        () = rescan => {}
        // The SDK would wait for calls in flight: end them now.
        () = eof.notified() => cancel.cancel(),
        () = stopped => cancel.cancel(),
    }
    Ok(())
}

/// Streamable HTTP on `addr` (`/mcp`), until a signal.
pub(super) async fn serve_http(
    session: &Toolbox,
    shared: &Arc<Shared>,
    addr: std::net::SocketAddr,
    rescan: impl Future<Output = ()>,
    stopped: impl Future<Output = ()>,
) -> Result<(), RunError> {
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };

    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|error| {
        RunError::usage(
            format!("--listen {addr}: cannot listen: {error}"),
            Some("pick a free port, or 127.0.0.1:0 for any"),
        )
    })?;
    let bound = listener
        .local_addr()
        .map_err(|error| RunError::usage(format!("--listen {addr}: {error}"), None))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    // The SDK's defaults accept loopback `Host`s only (DNS rebinding).
    let config = StreamableHttpServerConfig::default().with_cancellation_token(cancel.clone());
    let factory_shared = shared.clone();
    let mcp = StreamableHttpService::new(
        move || Ok(Server(factory_shared.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    // The one line on stdout: where to connect (the port, when 0 was asked).
    session
        .printer
        .result(&format!("listening on http://{bound}{HTTP_PATH}"));
    let connections = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    let accept = async {
        loop {
            // Closed never: the semaphore lives as long as this loop.
            let Ok(permit) = connections.clone().acquire_owned().await else {
                break;
            };
            let Ok((stream, _)) = listener.accept().await else {
                // Out of descriptors, say: wait for a connection to end
                // instead of spinning on the error.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            };
            // Answers go out as soon as they are written (an SSE answer
            // is several small writes; Nagle would hold them for the
            // client's delayed ACK, tens of milliseconds a call).
            let _ = stream.set_nodelay(true);
            let mcp = mcp.clone();
            let cancel = cancel.clone();
            tokio::spawn(async move {
                let service = hyper::service::service_fn(move |request| {
                    let mut mcp = mcp.clone();
                    async move {
                        if request.uri().path() == HTTP_PATH {
                            tower_service::Service::call(&mut mcp, request).await
                        } else {
                            Ok(not_found())
                        }
                    }
                });
                let connection = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
                tokio::select! {
                    _ = connection => {}
                    () = cancel.cancelled() => {}
                }
                drop(permit);
            });
        }
    };
    tokio::select! {
        () = accept => {}
        () = rescan => {}
        () = stopped => {}
    }
    cancel.cancel();
    Ok(())
}

type HttpBody = http_body_util::combinators::BoxBody<bytes::Bytes, std::convert::Infallible>;

fn not_found() -> http::Response<HttpBody> {
    use http_body_util::BodyExt as _;
    let body = http_body_util::Full::new(bytes::Bytes::from_static(
        b"not found: the MCP endpoint is /mcp\n",
    ))
    .boxed();
    let mut response = http::Response::new(body);
    *response.status_mut() = http::StatusCode::NOT_FOUND;
    response
}

/// stdin, telling `eof` when it ends.
struct EofSignal<R> {
    inner: R,
    eof: Arc<tokio::sync::Notify>,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for EofSignal<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let poll = std::pin::Pin::new(&mut self.inner).poll_read(cx, buf);
        let ended = match &poll {
            std::task::Poll::Ready(Ok(())) => buf.filled().len() == before && buf.remaining() > 0,
            std::task::Poll::Ready(Err(_)) => true,
            std::task::Poll::Pending => false,
        };
        if ended {
            self.eof.notify_one();
        }
        poll
    }
}
