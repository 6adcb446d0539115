//! Loop detection: the same call with the same arguments three times
//! running stops the task with `loop_detected` (docs/agent-loop.md).

use crate::core::ToolCall;

/// How many identical calls in a row count as a loop.
pub const REPEATS: u32 = 3;

/// Remembers the last call signature and how often it repeated.
#[derive(Debug, Default)]
pub struct LoopGuard {
    /// The last call's signature, hashed with its length: a call may carry
    /// megabytes of arguments, and the guard keeps no copy of them.
    last: Option<(u64, usize)>,
    count: u32,
}

impl LoopGuard {
    /// Records a call; true if and only if it completes a loop.
    pub fn record(&mut self, call: &ToolCall) -> bool {
        use std::hash::{DefaultHasher, Hash, Hasher};
        let text = call.signature();
        let mut hasher = DefaultHasher::new();
        text.hash(&mut hasher);
        let signature = (hasher.finish(), text.len());
        if self.last == Some(signature) {
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
