//! How a task ended: a status and, unless it passed cleanly, a reason
//! (docs/agent-loop.md). Both are wire names relied on by users; never rename.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The final state of one task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Passed,
    Failed,
    Error,
    Paused,
    /// Never started: the batch stopped before its turn (a quota or
    /// authentication error, `--max-cost-usd`, an interrupt).
    Skipped,
}

impl Status {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Passed => "passed",
            Self::Failed => "failed",
            Self::Error => "error",
            Self::Paused => "paused",
            Self::Skipped => "skipped",
        }
    }
}

impl std::fmt::Display for Status {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why a task stopped the way it did. Machine-readable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// The model answered; nothing more to report.
    Completed,
    ChecksFailed,
    MaxIterations,
    Timeout,
    TokenBudget,
    CostBudget,
    LoopDetected,
    PolicyDenied,
    ExpectationNotMet,
    ProviderError,
    AuthError,
    /// The provider says the account's quota, credit or spend limit is
    /// exhausted (OpenAI `insufficient_quota`, Anthropic billing errors):
    /// waiting does not help, and the batch stops (docs/ci.md).
    QuotaExhausted,
    GitError,
    InternalError,
    Interrupted,
    AwaitingInput,
    /// A file the task would commit holds a credential (docs/security.md S12).
    SecretInCommit,
    /// A model response passed the response-size limit while it arrived.
    ResponseTooLarge,
    /// The model refused (Anthropic `stop_reason: refusal`).
    Refusal,
    /// The provider's content filter ended the turn.
    ContentFilter,
    /// ybs's own output files were tampered with while the task ran.
    OutputTampered,
    /// A tool or MCP server the task marks `required: true` could not be
    /// started or offered.
    ToolUnavailable,
    /// The task has an output contract (`output.schema`) and the model's
    /// final answer never met it.
    OutputInvalid,
    /// The model gave an empty reply (no text, no call) again after it
    /// was told to call a tool or give its answer.
    EmptyAnswer,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Completed => "completed",
            Self::ChecksFailed => "checks_failed",
            Self::MaxIterations => "max_iterations",
            Self::Timeout => "timeout",
            Self::TokenBudget => "token_budget",
            Self::CostBudget => "cost_budget",
            Self::LoopDetected => "loop_detected",
            Self::PolicyDenied => "policy_denied",
            Self::ExpectationNotMet => "expectation_not_met",
            Self::ProviderError => "provider_error",
            Self::AuthError => "auth_error",
            Self::QuotaExhausted => "quota_exhausted",
            Self::GitError => "git_error",
            Self::InternalError => "internal_error",
            Self::Interrupted => "interrupted",
            Self::AwaitingInput => "awaiting_input",
            Self::SecretInCommit => "secret_in_commit",
            Self::ResponseTooLarge => "response_too_large",
            Self::Refusal => "refusal",
            Self::ContentFilter => "content_filter",
            Self::OutputTampered => "output_tampered",
            Self::ToolUnavailable => "tool_unavailable",
            Self::OutputInvalid => "output_invalid",
            Self::EmptyAnswer => "empty_answer",
        }
    }

    /// True if and only if the reason is a limit that stopped a run early;
    /// such tasks keep their changes and get a salvage ref (docs/agent-loop.md).
    pub fn is_limit(self) -> bool {
        matches!(
            self,
            Self::MaxIterations
                | Self::Timeout
                | Self::TokenBudget
                | Self::CostBudget
                | Self::LoopDetected
                | Self::ResponseTooLarge
        )
    }

    /// True if and only if a task that ended for this reason stops the
    /// batch: the next task would hit the same wall (a rejected key, an
    /// exhausted quota), so the tasks not yet started are skipped.
    pub fn stops_batch(self) -> bool {
        matches!(self, Self::AuthError | Self::QuotaExhausted)
    }

    /// The status a task gets when it stops for this reason, before any
    /// `expect: fail` inversion.
    pub fn status(self) -> Status {
        match self {
            Self::Completed => Status::Passed,
            Self::ProviderError
            | Self::AuthError
            | Self::QuotaExhausted
            | Self::GitError
            | Self::InternalError
            | Self::ToolUnavailable => Status::Error,
            Self::AwaitingInput => Status::Paused,
            Self::ChecksFailed
            | Self::MaxIterations
            | Self::Timeout
            | Self::TokenBudget
            | Self::CostBudget
            | Self::LoopDetected
            | Self::PolicyDenied
            | Self::ExpectationNotMet
            | Self::Interrupted
            | Self::SecretInCommit
            | Self::ResponseTooLarge
            | Self::Refusal
            | Self::ContentFilter
            | Self::OutputTampered
            | Self::OutputInvalid
            | Self::EmptyAnswer => Status::Failed,
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
