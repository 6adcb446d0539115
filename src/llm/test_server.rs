//! A scripted HTTP/1.1 server on 127.0.0.1 for driving the `ybs` binary
//! against real sockets: each request gets the next scripted reply, written
//! as chunks with optional pauses (or cut off mid-body), and every request
//! is recorded (method, path, headers, body) for the test to assert on.
//! The server stops when dropped.
//!
//! The one test server: the library's provider tests use it as
//! `crate::llm::test_server`, the integration tests include this file as
//! `support::server`.
// The unit tests use some parts, the integration tests others.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;

/// One piece of a reply body.
#[derive(Debug, Clone)]
pub enum Step {
    /// One HTTP chunk.
    Send(Vec<u8>),
    Sleep(Duration),
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub steps: Vec<Step>,
    /// Close the connection after the steps without ending the body.
    pub cut: bool,
}

impl Reply {
    pub fn new(status: u16, content_type: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            steps: Vec::new(),
            cut: false,
        }
    }

    /// A whole JSON body.
    pub fn json(status: u16, body: &Value) -> Self {
        Self::new(status, "application/json").send(body.to_string())
    }

    /// An SSE body in one chunk.
    pub fn sse(text: &str) -> Self {
        Self::new(200, "text/event-stream").send(text)
    }

    /// An SSE body written `size` bytes per chunk, with a short pause
    /// between chunks so the client reads them separately.
    pub fn sse_in_pieces(text: &str, size: usize) -> Self {
        let mut reply = Self::new(200, "text/event-stream");
        for piece in text.as_bytes().chunks(size) {
            reply = reply.send(piece.to_vec()).pause(Duration::from_micros(200));
        }
        reply
    }

    /// An NDJSON body, one chunk per line.
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

    /// Closes the connection after the steps, mid-body.
    pub fn cut(mut self) -> Self {
        self.cut = true;
        self
    }
}

/// One request as the server received it.
#[derive(Debug, Clone)]
pub struct Request {
    pub method: String,
    pub path: String,
    /// Names lowercased.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// When the request was complete.
    pub at: Instant,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers
            .iter()
            .find(|(key, _)| *key == name)
            .map(|(_, value)| value.as_str())
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|error| {
            panic!(
                "request body is not JSON ({error}): {}",
                String::from_utf8_lossy(&self.body)
            )
        })
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

struct Shared {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Request>>,
    stop: AtomicBool,
    gate: Option<Gate>,
    /// Checks each request first: a reply it returns is sent instead of
    /// the next scripted one (a server's own refusals, say).
    check: Option<Check>,
}

/// A server's check of a request: `Some(reply)` refuses it.
pub type Check = Box<dyn Fn(&Request) -> Option<Reply> + Send + Sync>;

/// A barrier for the first `count` requests: each is held until all of
/// them have arrived, so only clients that send them at the same time get
/// their replies. One that waits `patience` in vain breaks the gate: it
/// and every request held or still to come before `count` get a 400
/// saying how many arrived.
struct Gate {
    count: usize,
    patience: Duration,
    /// Requests arrived so far, and whether the gate broke.
    state: Mutex<(usize, bool)>,
    changed: Condvar,
}

impl Gate {
    /// Waits at the gate; `Err` with the text of the 400 when it broke.
    fn pass(&self) -> Result<(), String> {
        let mut state = self.state.lock().unwrap();
        state.0 += 1;
        if state.0 > self.count {
            return Ok(());
        }
        self.changed.notify_all();
        let until = Instant::now() + self.patience;
        while state.0 < self.count && !state.1 {
            let now = Instant::now();
            if now >= until {
                state.1 = true;
                self.changed.notify_all();
                break;
            }
            state = self.changed.wait_timeout(state, until - now).unwrap().0;
        }
        if state.0 >= self.count {
            return Ok(());
        }
        Err(format!(
            "test server: only {} of {} requests arrived within {:?}: the clients did not send them at the same time",
            state.0, self.count, self.patience
        ))
    }
}

/// The server. Once the scripted replies run out it answers 500.
pub struct Server {
    pub url: String,
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::start_with(replies, None)
    }

    /// As [`Self::start`], the first `count` requests held until all
    /// `count` are in (see [`Gate`]): the replies go out only to clients
    /// that run at the same time. Waiting longer than `patience` answers
    /// 400 `test server: only K of N requests arrived ...`.
    pub fn start_gated(replies: Vec<Reply>, count: usize, patience: Duration) -> Self {
        Self::start_with(
            replies,
            Some(Gate {
                count,
                patience,
                state: Mutex::new((0, false)),
                changed: Condvar::new(),
            }),
        )
    }

    /// A server that checks each request with `check` before answering
    /// it: a reply the check returns is sent instead of the next scripted
    /// one, which stays for the next request.
    pub fn start_checked(
        replies: Vec<Reply>,
        check: impl Fn(&Request) -> Option<Reply> + Send + Sync + 'static,
    ) -> Self {
        Self::start_full(replies, None, Some(Box::new(check)))
    }

    fn start_with(replies: Vec<Reply>, gate: Option<Gate>) -> Self {
        Self::start_full(replies, gate, None)
    }

    fn start_full(replies: Vec<Reply>, gate: Option<Gate>, check: Option<Check>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
            gate,
            check,
        });
        let state = Arc::clone(&shared);
        let accept = std::thread::spawn(move || {
            for socket in listener.incoming() {
                if state.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(socket) = socket else { continue };
                let state = Arc::clone(&state);
                std::thread::spawn(move || {
                    let _ = serve(socket, &state);
                });
            }
        });
        Self {
            url: format!("http://{addr}"),
            addr,
            shared,
            accept: Some(accept),
        }
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// Replies not yet used.
    pub fn replies_left(&self) -> usize {
        self.shared.replies.lock().unwrap().len()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
    }
}

fn serve(mut socket: TcpStream, shared: &Shared) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    socket.set_read_timeout(Some(Duration::from_secs(10)))?;
    let Some(request) = read_request(&mut socket)? else {
        return Ok(());
    };
    if let Some(gate) = &shared.gate
        && let Err(text) = gate.pass()
    {
        shared.requests.lock().unwrap().push(request);
        return write_reply(
            &mut socket,
            &Reply::new(400, "text/plain").send(text),
            shared,
        );
    }
    // Taken once the request is complete: replies follow request order.
    let refused = shared.check.as_ref().and_then(|check| check(&request));
    let reply = refused.or_else(|| shared.replies.lock().unwrap().pop_front());
    shared.requests.lock().unwrap().push(request);
    let reply = reply.unwrap_or_else(|| {
        Reply::new(500, "text/plain").send("test server: no scripted reply left")
    });
    write_reply(&mut socket, &reply, shared)
}

fn write_reply(socket: &mut TcpStream, reply: &Reply, shared: &Shared) -> std::io::Result<()> {
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes())?;
    socket.flush()?;
    for step in &reply.steps {
        if shared.stop.load(Ordering::SeqCst) {
            return Ok(());
        }
        match step {
            Step::Send(bytes) if bytes.is_empty() => {}
            Step::Send(bytes) => {
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(bytes);
                chunk.extend_from_slice(b"\r\n");
                socket.write_all(&chunk)?;
                socket.flush()?;
            }
            Step::Sleep(duration) => sleep_unless_stopped(*duration, shared),
        }
    }
    if !reply.cut {
        socket.write_all(b"0\r\n\r\n")?;
        socket.flush()?;
    }
    socket.shutdown(std::net::Shutdown::Both)
}

/// Sleeps in small steps so a dropped server does not keep threads busy.
fn sleep_unless_stopped(duration: Duration, shared: &Shared) {
    let until = Instant::now() + duration;
    while !shared.stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= until {
            return;
        }
        std::thread::sleep((until - now).min(Duration::from_millis(20)));
    }
}

/// One request from `socket` (a plain or a TLS stream): `None` when it
/// closes first.
pub fn read_request(socket: &mut impl Read) -> std::io::Result<Option<Request>> {
    let mut buffer = Vec::new();
    let mut chunk = [0_u8; 16384];
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        let read = socket.read(&mut chunk)?;
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
        let read = socket.read(&mut chunk)?;
        if read == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..read]);
    }
    Ok(Some(Request {
        method,
        path,
        headers,
        body,
        at: Instant::now(),
    }))
}

#[cfg(test)]
mod tests {
    use futures_util::StreamExt;

    use super::*;

    #[tokio::test]
    async fn pieces_reach_the_client_separately() {
        let text = "data: {}\n\n".repeat(20);
        let server = Server::start(vec![Reply::sse_in_pieces(&text, 1)]);
        // reqwest has no TLS provider of its own (Cargo.toml): the one ybs
        // installs (`core::tls`), here where this file is a test's too.
        let _ = rustls::crypto::ring::default_provider().install_default();
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
