//! Process exit codes: a public contract (docs/cli.md). Never renumber; only add.

/// Every selected task passed or matched its `expect`.
pub const OK: u8 = 0;
/// At least one task failed: a check, a limit, a loop, a required step
/// denied; under `--repeat`, a task that failed some of its runs (flaky)
/// unless `--min-pass-rate` accepts its pass rate.
pub const TASK_FAILED: u8 = 1;
/// Usage, config or task-file error: nothing was run.
pub const USAGE: u8 = 2;
/// The run paused awaiting tool results or approvals.
pub const PAUSED: u8 = 3;
/// Infrastructure error (provider, auth, quota, git), or a task skipped
/// because the batch stopped before it, and no task failed.
pub const INFRA: u8 = 4;
/// Interrupted by SIGINT/SIGTERM; outputs were still written.
pub const INTERRUPTED: u8 = 130;

/// An error that knows the exit code it ends the process with, and the
/// hint that helps fix it. The CLI prints every failure the same way:
/// `error: ` and the message (a diagnostic, which names its
/// `file:line:col`, as it is), each `caused by:` of its source chain, then
/// the hint.
pub trait Failure: std::error::Error {
    fn exit_code(&self) -> u8;
    fn hint(&self) -> Option<String> {
        None
    }
    /// The message is a diagnostic (`file:line:col: ...`, hints included)
    /// and printed without the `error: ` prefix.
    fn is_diagnostic(&self) -> bool {
        false
    }
}
