//! Process exit codes: a public contract (SPEC §1). Never renumber; only add.

/// Every selected task passed or matched its `expect`.
pub const OK: u8 = 0;
/// At least one task failed: a check, a limit, a loop, a required step denied.
pub const TASK_FAILED: u8 = 1;
/// Usage, config or task-file error: nothing was run.
pub const USAGE: u8 = 2;
/// The run paused awaiting tool results or approvals.
pub const PAUSED: u8 = 3;
/// Infrastructure error (provider, auth, quota, git) and no task failed.
pub const INFRA: u8 = 4;
/// Interrupted by SIGINT/SIGTERM; outputs were still written.
pub const INTERRUPTED: u8 = 130;
