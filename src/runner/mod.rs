//! L4 runner: one run of many tasks: discovery, scheduling, checks, git,
//! outputs.

pub mod redacting;
pub mod results;

pub use results::{RunReport, TaskResult};
