//! L3 agent: one task's loop (docs/agent-loop.md). No output files, no git.
//!
//! The agent sends the conversation to the provider, decides each tool
//! call with policy, runs the allowed ones, and repeats until the model
//! answers without a tool call or a limit stops it. Everything it does is
//! an event; outputs are the runner's business.

pub mod answer_tool;
pub mod approve;
pub mod context;
pub mod emitter;
pub mod limits;
pub mod loop_guard;
pub mod prompt;
pub mod run;

pub use approve::{Approval, Approver};
pub use context::ContextWindow;
pub use emitter::Emitter;
pub use limits::Limits;
pub use run::{Agent, AgentSetup, Answer, Stop};
