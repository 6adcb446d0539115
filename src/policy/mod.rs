//! L2 policy: decides, before any tool call runs, whether it may run
//! (docs/policy.md; docs/security.md S3–S6, S13).
//!
//! Pure and synchronous: it reads nothing (paths are compared lexically,
//! the caller passes the workdir and home in [`GuardSettings`]) and never
//! prompts — except, when the caller passes a `PATH` in
//! [`GuardSettings::program_path`], the `stat` of programs on it, to know
//! a denied program under another name ([`opaque`]). The agent turns `ask` into deny, pause or fail per
//! [`Policy::on_ask`].
//!
//! # Using it
//!
//! ```
//! use ybs::policy::{CallView, GuardSettings, Policy, PolicySpec, Rule, Verdict};
//!
//! let mut task = PolicySpec::default();
//! task.allow.push(Rule::parse("run_shell(cargo test*)").unwrap());
//! let guards = GuardSettings::new("/work/repo", Some("/home/ci".into()));
//! let policy = Policy::build(None, &[task], guards).unwrap();
//!
//! let decision = policy.decide(&CallView::shell("cargo test && curl x"));
//! assert_eq!(decision.verdict, Verdict::Deny);
//! assert_eq!(decision.rule.to_string(), "default");
//! assert_eq!(decision.detail.as_deref(), Some("`curl x` matches no allow rule"));
//! ```
//!
//! # How a call is decided
//!
//! 1. **Guards** ([`guards`]): blocked commands, blocked paths, writes to
//!    protected paths, file paths outside the workdir. A guard makes the
//!    call `deny` whatever the rules say.
//! 2. **`deny`**, then 3. **`ask`**: the first rule, operator rules before
//!    task rules, that hits *any* part of the call. For `run_shell`, a
//!    command glob is tried on every simple command (nested ones in
//!    `$(…)`, `bash -c '…'`, `env X=1 cmd`, `find -exec` … included), on
//!    its text with and without `NAME=value` prefixes and with the
//!    command word's directory stripped, and on the raw command.
//! 4. **`allow`**: a file call needs one rule matching tool and path; a
//!    shell call needs *every* simple command matched (by its full text,
//!    prefixes included) by some allow rule, and no hazard at all
//!    ([`shell::HazardKind`]; substitutions, `eval`, `sh -c`, wrappers,
//!    redirections outside the workdir, unparseable input …).
//!    While any `deny` or `ask` rule names `run_shell` commands, a part
//!    the analysis cannot see through ([`opaque`]: a program run by a
//!    path that may be a copy or link, a script or module given to an
//!    interpreter) is not allowed by a wildcard rule (one that would match
//!    with any other word in that place): it gets `policy.opaque`,
//!    `ask` unless set.
//! 5. **`default`**: `deny` unless set. A default of `allow` never lets a
//!    command with hazards through: it becomes `ask`; nor an opaque part
//!    while a rule to dodge exists: it gets `policy.opaque`.
//!
//! Rules: `"*"` matches any tool. Path globs match the path relative to
//! the workdir (absolute when outside it), `*` staying inside one
//! directory (`src/*` is not `src/a/b`; `src/**` is). Command globs span
//! the whole simple command (`cargo test*` matches `cargo test -p a/b`).
//! A rule with path globs never matches a shell call, nor a rule with
//! command globs a file call.
//!
//! # Operator ceiling (S5)
//!
//! [`Policy::build`] takes the operator policy (`--policy FILE`, config
//! outside the repo) apart from the task layers (`defaults:` then the
//! task's `policy:`, merged in order). Then:
//!
//! - operator `deny` and `ask` rules always apply, before the task's;
//! - a call is `allow`ed only if the task allows it (by a rule or its
//!   default) **and** the operator allows it (by a rule or its default):
//!   steps 4–5 run on each side and the stricter verdict wins
//!   (allow < ask < deny), naming the operator's rule when it is the
//!   stricter, with a detail saying the task alone would have allowed it;
//! - the task's default is its own, else the operator's, else `deny`; the
//!   operator's default (else `deny`) caps it;
//! - `on_ask` is the task's, else the operator's, else `deny`; a task may
//!   not pick `pause` (a human approves) when the operator set `deny` or
//!   `fail`.
//!
//! So a task can only narrow: add denies and asks, allow less, default
//! stricter. Without an operator policy the task layers alone decide.

pub mod decide;
pub mod examples;
pub mod explain;
pub mod guards;
pub mod opaque;
mod pathshape;
pub mod rule;
pub mod shell;
mod summary;
mod unknowns;

pub use decide::{CallView, Decision, Layer, Policy, PolicyError, RuleRef};
pub use examples::{CallParseError, ExampleFailure, parse_call};
pub use explain::{AssumedSandbox, Explanation, PartExplanation, explain};
pub use guards::{GuardError, GuardSettings, SandboxMode};
pub use rule::{Examples, OnAsk, PolicySpec, Rule, RuleParseError, RulePlace, Verdict};
pub use shell::{Hazard, HazardKind, ParsedCommand, SimpleCommand};

#[cfg(test)]
mod tests;
