//! External tools: any executable speaking JSON on stdin/stdout becomes a
//! tool (docs/tools.md).
//!
//! - [`discover`]: where tools are found, who enables them (trust), their
//!   statuses, schemas from sidecars, config or `TOOL --schema`;
//! - [`entry`]: what discovery finds (source, status, schema);
//! - [`schema`]: the declared parameters, the JSON Schema offered to the
//!   model, and checking a call before any process starts;
//! - [`cache`]: schemas cached by path + size + mtime, persisted metrics;
//! - [`call`]: [`ExternalTool`], one process per call;
//! - [`metrics`]: calls, successes, failures, timeouts, p50/p95.
//!
//! This module decides nothing about policy: the caller says which names
//! the policy enables ([`Enable`]), and every call of an [`ExternalTool`]
//! in the agent goes through policy like any tool.

pub mod cache;
pub mod call;
pub mod discover;
pub mod entry;
pub mod metrics;
pub mod schema;

#[cfg(test)]
mod tests;

pub use call::{ExternalTool, Invocation};
pub use discover::{DEFAULT_TIMEOUT, Declared, DiscoverySettings, Enable, discover};
pub use entry::{Catalog, Entry, Source, Status};
pub use metrics::{Metrics, Outcome, ToolStats};
pub use schema::ToolSchema;
