//! L2 policy: decides, before any tool call runs, whether it may run.
//!
//! Pure and synchronous: it reads nothing but canonical paths and never
//! prompts. The agent turns `ask` into deny, pause or fail (SPEC §4).

pub mod decide;
pub mod guards;
mod pathshape;
pub mod rule;
pub mod shell;

pub use decide::{CallView, Decision, Policy, RuleRef};
pub use rule::{Examples, OnAsk, PolicySpec, Rule, RuleParseError, Verdict};
