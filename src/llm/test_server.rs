//! A scripted HTTP/1.1 server on 127.0.0.1 for provider tests: it records
//! each request (method, path, headers, body) and answers with the next
//! scripted reply, written piece by piece with optional pauses, so chunk
//! boundaries, stalls and cut connections are under the test's control.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// One piece of a reply body.
#[derive(Debug, Clone)]
pub enum Step {
    Send(Vec<u8>),
    Sleep(Duration),
    /// Lets the runtime poll its I/O driver (and so the client) first.
    Yield,
}

/// How a reply body ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The chunked body is terminated properly.
    Complete,
    /// The connection is closed mid-body (no terminating chunk).
    Cut,
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
    pub end: End,
}

impl Reply {
    pub fn new(status: u16, content_type: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            steps: Vec::new(),
            end: End::Complete,
        }
    }

    /// A whole JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::new(status, "application/json").send(body.to_string())
    }

    /// An SSE body in one piece.
    pub fn sse(text: impl Into<String>) -> Self {
        Self::new(200, "text/event-stream").send(text.into())
    }

    /// An SSE body whose bytes are written `size` at a time, yielding
    /// between pieces so the client reads them separately.
    pub fn sse_in_pieces(text: &str, size: usize) -> Self {
        let mut reply = Self::new(200, "text/event-stream");
        for piece in text.as_bytes().chunks(size) {
            reply = reply.send(piece.to_vec());
            reply.steps.push(Step::Yield);
        }
        reply
    }

    /// An NDJSON body, one line per value.
    pub fn ndjson(lines: &[Value]) -> Self {
        let mut reply = Self::new(200, "application/x-ndjson");
        for line in lines {
            reply = reply.send(format!("{line}\n"));
        }
        reply
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn send(mut self, bytes: impl Into<Vec<u8>>) -> Self {
        self.steps.push(Step::Send(bytes.into()));
        self
    }

    pub fn pause(mut self, duration: Duration) -> Self {
        self.steps.push(Step::Sleep(duration));
        self
    }

    /// Closes the connection after the steps, without ending the body.
    pub fn cut(mut self) -> Self {
        self.end = End::Cut;
        self
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).expect("request body is JSON")
    }

    /// The whole request as text, to search for things that must not be there.
    pub fn text(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}"))
            .collect();
        format!(
            "{} {}\n{}\n\n{}",
            self.method,
            self.path,
            headers.join("\n"),
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// The server. Dropping it leaves the task to end with the test's runtime.
pub struct TestServer {
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl TestServer {
    /// Starts a server answering requests with `replies`, in order; once
    /// they run out it answers 500.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let queue = Arc::new(Mutex::new(VecDeque::from(replies)));
        let recorded = Arc::clone(&requests);
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let recorded = Arc::clone(&recorded);
                let queue = Arc::clone(&queue);
                tokio::spawn(async move {
                    let _ = serve(socket, &recorded, &queue).await;
                });
            }
        });
        Self { url, requests }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().expect("lock").clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    recorded: &Mutex<Vec<Recorded>>,
    queue: &Mutex<VecDeque<Reply>>,
) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let Some(request) = read_request(&mut socket).await? else {
        return Ok(());
    };
    // The reply is taken when the request is complete, so replies follow
    // the order in which requests arrive.
    let reply = queue.lock().expect("lock").pop_front();
    recorded.lock().expect("lock").push(request);
    let reply = reply.unwrap_or_else(|| {
        Reply::new(500, "text/plain").send("test server: no scripted reply left")
    });
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for step in &reply.steps {
        match step {
            Step::Send(bytes) => {
                if bytes.is_empty() {
                    continue;
                }
                socket
                    .write_all(format!("{:x}\r\n", bytes.len()).as_bytes())
                    .await?;
                socket.write_all(bytes).await?;
                socket.write_all(b"\r\n").await?;
                socket.flush().await?;
            }
            Step::Sleep(duration) => tokio::time::sleep(*duration).await,
            Step::Yield => tokio::task::yield_now().await,
        }
    }
    if reply.end == End::Complete {
        socket.write_all(b"0\r\n\r\n").await?;
    }
    socket.flush().await?;
    socket.shutdown().await
}

async fn read_request(socket: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 8192];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            return Ok(None);
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next().unwrap_or_default().split(' ');
    let method = request_line.next().unwrap_or_default().to_owned();
    let path = request_line.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let read = socket.read(&mut chunk).await?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body,
    }))
}

/// Fixtures shared by the provider tests.
pub mod fixtures {
    use std::time::Duration;

    use serde_json::{Value, json};

    use crate::core::{Message, ToolCall, ToolSpec};
    use crate::llm::{ChatRequest, ProviderConfig};

    /// A key that must never show up anywhere but in the request header.
    pub const CANARY: &str = "sk-canary-7f3a9c1e5b";

    /// A provider config for `name` at `endpoint`, with short deadlines.
    pub fn config(name: &str, endpoint: &str) -> ProviderConfig {
        let mut config = ProviderConfig::new(name, "test-model");
        config.endpoint = Some(endpoint.to_owned());
        config.request_timeout = Duration::from_secs(5);
        config.idle_timeout = Duration::from_secs(2);
        config.total_timeout = Duration::from_secs(10);
        config
    }

    /// An environment with exactly these variables.
    pub fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(name, value)| ((*name).to_owned(), (*value).to_owned()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(key, _)| key == name)
                .map(|(_, value)| value.clone())
        }
    }

    pub fn read_file_tool() -> ToolSpec {
        ToolSpec {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({
                "type": "object",
                "properties": {"path": {"type": "string"}},
                "required": ["path"]
            }),
        }
    }

    /// The first request of a task: system prompt, one user message, tools.
    pub fn first_request() -> ChatRequest {
        ChatRequest {
            model: "test-model".into(),
            system: "You are ybs.".into(),
            messages: vec![Message::user("What does src/lib.rs say?")],
            tools: vec![read_file_tool()],
            temperature: Some(0.0),
            max_tokens: Some(512),
        }
    }

    /// The second request: the first plus the call and its result.
    pub fn second_request(calls: &[ToolCall]) -> ChatRequest {
        let mut request = first_request();
        request.messages.push(Message::Assistant {
            content: String::new(),
            tool_calls: calls.to_vec(),
        });
        for call in calls {
            request.messages.push(Message::Tool {
                call_id: call.id.clone(),
                name: call.name.clone(),
                content: format!("contents of {}", call.arguments["path"]),
                is_error: false,
            });
        }
        request
    }

    /// `data: <json>` events, then `data: [DONE]`.
    pub fn sse_done(chunks: &[Value]) -> String {
        let mut text: String = chunks
            .iter()
            .map(|chunk| format!("data: {chunk}\n\n"))
            .collect();
        text.push_str("data: [DONE]\n\n");
        text
    }

    /// Named events: `event: <type>` + `data: <json>`.
    pub fn sse_events(events: &[Value]) -> String {
        events
            .iter()
            .map(|event| {
                let name = event["type"].as_str().unwrap_or("message");
                format!("event: {name}\ndata: {event}\n\n")
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn pieces_reach_the_client_separately() {
        let text = "data: {}\n\n".repeat(20);
        let server = TestServer::start(vec![Reply::sse_in_pieces(&text, 1)]).await;
        let response = reqwest::get(&server.url).await.unwrap();
        let mut chunks = response.bytes_stream();
        let mut count = 0;
        let mut body = Vec::new();
        while let Some(chunk) = chunks.next().await {
            body.extend_from_slice(&chunk.unwrap());
            count += 1;
        }
        assert_eq!(body, text.as_bytes());
        assert!(
            count > text.len() / 2,
            "{count} reads for {} bytes",
            text.len()
        );
    }
}
