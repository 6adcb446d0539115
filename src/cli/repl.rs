//! Terminal checks: only on a terminal is stdin read (docs/security.md S3); a
//! missing TTY is a usage error before anything runs, so nothing ever
//! waits on a pipe.

use std::io::IsTerminal;

use crate::runner::RunError;

/// Why `--interactive` cannot prompt here: `None` when stdin and stderr
/// are both terminals.
pub fn missing_terminal() -> Option<&'static str> {
    if !std::io::stdin().is_terminal() {
        Some("stdin is not a TTY")
    } else if !std::io::stderr().is_terminal() {
        Some("stderr is not a TTY")
    } else {
        None
    }
}

/// The usage error for `ybs chat` without a terminal on stdin, stdout
/// (the line editor) and stderr.
pub fn require_chat_terminal() -> Result<(), RunError> {
    let why = missing_terminal()
        .or_else(|| (!std::io::stdout().is_terminal()).then_some("stdout is not a TTY"));
    match why {
        None => Ok(()),
        Some(why) => Err(RunError::usage(
            format!("ybs chat needs a terminal ({why})"),
            Some(
                "run it from a terminal; to run an agent without one, write a task file and use `ybs run`",
            ),
        )),
    }
}

/// The usage error for `--interactive` without a terminal: the message and
/// its hint.
pub fn require_terminal() -> Result<(), RunError> {
    match missing_terminal() {
        None => Ok(()),
        Some(why) => Err(RunError::usage(
            format!("--interactive needs a terminal ({why})"),
            Some(
                "run it from a terminal, or drop --interactive: a headless run resolves `ask` \
                 decisions by policy.on_ask and never waits on a human",
            ),
        )),
    }
}
