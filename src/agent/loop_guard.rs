//! Loop detection: the same call with the same arguments three times
//! running stops the task with `loop_detected` (docs/agent-loop.md).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};

use crate::core::ToolCall;

/// How many identical calls in a row count as a loop.
pub const REPEATS: u32 = 3;

/// How many identical replies in a row that ybs could not act on (cut
/// off, or holding calls written as text that could not be run) count as
/// a loop. More than [`REPEATS`]: each of them was answered by ybs (asked
/// to continue, told to send one call), and the model may take a few
/// tries to follow.
pub const REPLY_REPEATS: u32 = 5;

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
        self.count_same(&call.signature()) >= REPEATS
    }

    /// Records a reply ybs could not act on, by its text and the calls
    /// read from it; true if and only if it completes a loop
    /// ([`REPLY_REPEATS`]).
    pub fn record_reply(&mut self, content: &str, calls: &[ToolCall]) -> bool {
        let mut signature = content.to_owned();
        for call in calls {
            signature.push('\n');
            signature.push_str(&call.signature());
        }
        self.count_same(&signature) >= REPLY_REPEATS
    }

    /// How many times in a row `signature` came, this time included.
    fn count_same(&mut self, signature: &str) -> u32 {
        let digest = Sha256::digest(signature.as_bytes());
        let signature = format!("sha256:{}", crate::core::text::hex(&digest));
        if self.last.as_deref() == Some(signature.as_str()) {
            self.count += 1;
        } else {
            self.last = Some(signature);
            self.count = 1;
        }
        self.count
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

    #[test]
    fn five_identical_replies_in_a_row() {
        let mut guard = LoopGuard::default();
        for _ in 1..REPLY_REPEATS {
            assert!(!guard.record_reply("same", &[]));
        }
        assert!(!guard.record_reply("other", &[]));
        for _ in 1..REPLY_REPEATS {
            assert!(!guard.record_reply("same", &[]));
        }
        assert!(guard.record_reply("same", &[]));
        // The calls read from a reply are part of it.
        let mut guard = LoopGuard::default();
        let a = ToolCall::new("1", "read_file", json!("a"));
        let b = ToolCall::new("1", "read_file", json!("b"));
        for _ in 1..REPLY_REPEATS {
            assert!(!guard.record_reply("", std::slice::from_ref(&a)));
        }
        assert!(!guard.record_reply("", &[b]));
    }
}
