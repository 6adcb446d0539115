//! L3 task files: model, loader with spans, `vars`, validation that
//! collects every diagnostic.
//!
//! May use `crate::core`, `crate::policy`, and the name lists of
//! `crate::llm` and `crate::tools`. Files are read with
//! `crate::core::decode`, as `config` reads its own.

mod discover;
mod layer;
mod loader;
pub mod model;
pub mod policy;
pub mod schema;
pub mod vars;

pub use crate::core::decode::{Diagnostic, Diagnostics};
pub use layer::{
    check_builtin_tool, check_endpoint, check_provider, decode_mcp_servers, output_limit,
};
pub use loader::{API_KEY_MESSAGE, load, load_each, load_str, load_str_with};
pub use model::{
    BUILTIN_TOOLS, CheckSpec, CommitSpec, ContextSpec, Expect, LimitSpans, LimitsSpec, LlmSpec,
    OutputSpec, PROVIDERS, TaskFile, TaskSpec, ToolsSpec,
};
pub use policy::{decode_policy, load_policy_str};

#[cfg(test)]
mod tests;
