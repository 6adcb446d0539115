//! Checks: shell commands run in the workdir after the agent stops; all
//! must pass (SPEC §2–3). A failing check's output feeds `fix_attempts`.
//!
//! Checks are the task author's commands, trusted like the task file, and
//! run without the kernel sandbox (SECURITY S1 covers `run_shell` and
//! external tools): a check may write outside the workdir. Whatever a
//! check executes from the workdir (tests the model edited, build
//! scripts) runs unconfined too; see the README's `## Sandbox`.

use std::path::Path;
use std::time::Duration;

use crate::agent::Emitter;
use crate::core::event::Event;
use crate::core::text::tail;
use crate::task::CheckSpec;
use crate::tools::ChildEnv;
use crate::tools::process::{self, ProcessSpec};

/// Default check timeout when the task gives none.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);
/// Bytes of output kept per stream while a check runs.
const OUTPUT_CAP: usize = 1 << 20;
/// Characters of output kept in events and reports.
const TAIL_CHARS: usize = 4000;

/// The checks' verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChecksOutcome {
    pub passed: bool,
    /// For the failing checks: what ran, how it ended and its output tail.
    pub failures: Vec<String>,
}

/// Runs every check (not stopping at the first failure) and records each.
pub async fn run_checks(
    checks: &[CheckSpec],
    workdir: &Path,
    env: &ChildEnv,
    attempt: u32,
    emitter: &mut Emitter<'_>,
) -> ChecksOutcome {
    let mut failures = Vec::new();
    for check in checks {
        let timeout = check.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let spec = ProcessSpec::shell(&check.run, workdir.to_owned(), env, timeout, OUTPUT_CAP);
        let started = std::time::Instant::now();
        let (exit_code, timed_out, output) = match process::run(spec).await {
            Ok(out) => {
                let mut text = out.stdout;
                if !out.stderr.is_empty() {
                    if !text.is_empty() && !text.ends_with('\n') {
                        text.push('\n');
                    }
                    text.push_str(&out.stderr);
                }
                (out.exit_code, out.timed_out, text)
            }
            Err(error) => (None, false, format!("cannot start check: {error}")),
        };
        let passed = !timed_out && exit_code == Some(check.expect_exit);
        let output_tail = tail(&output, TAIL_CHARS).to_owned();
        emitter.emit(Event::CheckCompleted {
            name: check.name.clone(),
            command: check.run.clone(),
            exit_code,
            expected_exit: check.expect_exit,
            passed,
            timed_out,
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            output_tail: output_tail.clone(),
            attempt,
        });
        if !passed {
            let how = if timed_out {
                format!(
                    "timed out after {}s",
                    check.timeout.unwrap_or(DEFAULT_TIMEOUT).as_secs()
                )
            } else {
                match exit_code {
                    Some(code) => format!("exited {code} (expected {})", check.expect_exit),
                    None => "was killed by a signal".to_owned(),
                }
            };
            failures.push(format!(
                "check `{}` {how}\n$ {}\n{}",
                check.name,
                check.run,
                output_tail.trim_end()
            ));
        }
    }
    ChecksOutcome {
        passed: failures.is_empty(),
        failures,
    }
}
