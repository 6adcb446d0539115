//! Loop detection: the same call with the same arguments three times
//! running stops the task with `loop_detected` (docs/agent-loop.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::core::ToolCall;

/// How many identical calls in a row count as a loop.
pub const REPEATS: u32 = 3;

/// Remembers the last call signature and how often it repeated. A paused
/// task carries it in its state (docs/resume.md), so the calls before and
/// after the pause count as one run of calls.
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoopGuard {
    /// `sha256:<hex>` of the last call's signature (its name and
    /// arguments): a call may carry megabytes of arguments, and the guard
    /// keeps no copy of them.
    pub last: Option<String>,
    /// How many times in a row that call was made.
    pub count: u32,
}

impl LoopGuard {
    /// Records a call; true if and only if it completes a loop.
    pub fn record(&mut self, call: &ToolCall) -> bool {
        let digest = Sha256::digest(call.signature().as_bytes());
        let signature = format!("sha256:{}", crate::core::text::hex(&digest));
        if self.last.as_deref() == Some(signature.as_str()) {
            self.count += 1;
        } else {
            self.last = Some(signature);
            self.count = 1;
        }
        self.count >= REPEATS
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn three_identical_calls_in_a_row() {
        let mut guard = LoopGuard::default();
        let a = ToolCall::new("1", "read_file", json!({"path": "a"}));
        let b = ToolCall::new("2", "read_file", json!({"path": "b"}));
        assert!(!guard.record(&a));
        assert!(!guard.record(&a));
        assert!(!guard.record(&b));
        assert!(!guard.record(&a));
        assert!(!guard.record(&a));
        assert!(guard.record(&a));
    }
}
