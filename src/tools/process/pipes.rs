//! A child's pipes: stdin fed and closed, stdout and stderr read to their
//! end into a capped capture (the head and the tail kept).

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::CHUNK;

/// Writes `bytes` to the child's stdin, then closes it. A child that does
/// not read (broken pipe) is not an error.
pub(super) async fn feed<W: AsyncWrite + Unpin>(stdin: Option<W>, bytes: Option<Vec<u8>>) {
    if let (Some(mut stdin), Some(bytes)) = (stdin, bytes) {
        let _ = stdin.write_all(&bytes).await;
        let _ = stdin.shutdown().await;
    }
}

/// Reads `pipe` to its end into `capture`.
pub(super) async fn pump<R: AsyncRead + Unpin>(pipe: Option<R>, capture: &mut Capture) {
    let Some(mut pipe) = pipe else { return };
    let mut buffer = vec![0u8; CHUNK];
    loop {
        match pipe.read(&mut buffer).await {
            Ok(0) => break,
            Ok(read) => capture.push(&buffer[..read]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

/// A stream's captured bytes: everything up to `cap`; beyond, the first
/// and last `cap / 2` bytes and a count of what was dropped in between.
#[derive(Debug)]
pub(super) struct Capture {
    pub(super) head: Vec<u8>,
    pub(super) tail: Vec<u8>,
    pub(super) total: usize,
    pub(super) cap: usize,
    pub(super) overflowed: bool,
}

impl Capture {
    pub(super) fn new(cap: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: Vec::new(),
            total: 0,
            cap,
            overflowed: false,
        }
    }

    pub(super) fn head_keep(&self) -> usize {
        self.cap / 2
    }

    pub(super) fn tail_keep(&self) -> usize {
        self.cap - self.cap / 2
    }

    pub(super) fn push(&mut self, mut chunk: &[u8]) {
        self.total += chunk.len();
        if !self.overflowed {
            if self.head.len() + chunk.len() <= self.cap {
                self.head.extend_from_slice(chunk);
                return;
            }
            self.overflowed = true;
            let keep = self.head_keep();
            if self.head.len() > keep {
                self.tail.extend_from_slice(&self.head[keep..]);
                self.head.truncate(keep);
            } else {
                let fill = keep - self.head.len();
                self.head.extend_from_slice(&chunk[..fill]);
                chunk = &chunk[fill..];
            }
            self.head.shrink_to_fit();
        }
        self.tail.extend_from_slice(chunk);
        // Trim in batches so the copy cost stays linear in the output.
        let keep = self.tail_keep();
        if self.tail.len() > keep.saturating_mul(2).max(keep + CHUNK) {
            let cut = self.tail.len() - keep;
            self.tail.drain(..cut);
        }
    }

    /// The text (lossy UTF-8) and whether anything was dropped.
    pub(super) fn finish(mut self) -> (String, bool) {
        if !self.overflowed {
            return (into_string(self.head), false);
        }
        let keep = self.tail_keep();
        if self.tail.len() > keep {
            let cut = self.tail.len() - keep;
            self.tail.drain(..cut);
        }
        // Start the tail on a character boundary.
        let skip = self
            .tail
            .iter()
            .take(3)
            .take_while(|byte| (**byte & 0xC0) == 0x80)
            .count();
        let omitted = self.total - self.head.len() - self.tail.len() + skip;
        let mut text = String::from_utf8_lossy(&self.head).into_owned();
        text.push_str(&format!(
            "\n[... {omitted} of {} bytes of output omitted ...]\n",
            self.total
        ));
        text.push_str(&String::from_utf8_lossy(&self.tail[skip..]));
        (text, true)
    }
}

pub(super) fn into_string(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned())
}
