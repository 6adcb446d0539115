//! L1: the vocabulary every other module shares. Plain data, no I/O
//! beyond `std`, no knowledge of tasks, providers or files on disk.
//! `decode` reads YAML/JSON text into spanned values with diagnostics;
//! `task` and `config` both read their files with it.

pub mod beneath;
pub mod decode;
pub mod environ;
pub mod event;
pub mod exit;
pub mod ids;
pub mod message;
pub mod named;
pub mod outcome;
pub mod redact;
pub mod secrets;
pub mod shard;
pub mod span;
pub mod text;
pub mod tls;
pub mod usage;

pub use environ::Environ;
pub use event::{Event, EventSink};
pub use message::{Message, ToolCall, ToolSpec};
pub use outcome::{Reason, Status};
pub use redact::Redactor;
pub use shard::Shard;
pub use usage::{Cost, Usage};
