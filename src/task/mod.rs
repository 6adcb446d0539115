//! L3 task files: model, loader with spans, `vars`, validation that
//! collects every diagnostic.

pub mod model;

pub use model::{
    CheckSpec, CommitSpec, Expect, LimitsSpec, LlmSpec, TaskFile, TaskSpec, ToolsSpec,
};
