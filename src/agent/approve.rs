//! The approval hook for `ask` decisions (docs/policy.md, docs/interactive.md).
//!
//! The agent knows nothing of terminals: under `--interactive` the CLI
//! hands it an [`Approver`], which asks a human. Without one, `ask`
//! resolves by `policy.on_ask` and nothing waits on anyone (docs/security.md S3).

use futures_util::future::BoxFuture;

use crate::core::ToolCall;
use crate::policy::{CallView, Decision};

/// A human's answer to one `ask` decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Run this call.
    Yes,
    /// Do not run it; the model is told the user declined.
    No,
    /// Run it, and every later call the same rule asks about in this run.
    Always,
}

impl Approval {
    /// What the decision record adds to the rule.
    pub fn note(self) -> &'static str {
        match self {
            Self::Yes => "approved interactively",
            Self::No => "declined interactively",
            Self::Always => "approved interactively, always",
        }
    }
}

/// The human at the terminal under `--interactive`: answers `ask`
/// decisions and may continue the conversation when a task stops.
/// Implemented by the CLI.
pub trait Approver: Send + Sync {
    /// Asks about `call`, which `decision` (verdict `ask`) stopped; `view`
    /// is what the policy decided on (the command, or the resolved path).
    fn approve<'a>(
        &'a self,
        call: &'a ToolCall,
        view: &'a CallView<'a>,
        decision: &'a Decision,
    ) -> BoxFuture<'a, Approval>;

    /// The task stopped with `outcome` (the model's answer, or why the
    /// checks failed): the user's next message, or `None` to finish.
    fn follow_up<'a>(&'a self, outcome: &'a str) -> BoxFuture<'a, Option<String>>;
}
