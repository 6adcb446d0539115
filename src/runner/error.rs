//! The runner's errors, each knowing its exit code (see
//! [`crate::core::exit::Failure`]).

use std::fmt;
use std::path::PathBuf;

use crate::config::ConfigError;
use crate::core::exit::{self, Failure};
use crate::core::span::Span;
use crate::task::Diagnostics;

/// Why a run (or a chat) cannot start or finish.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// Tasks that cannot run (each with its hint); nothing ran.
    #[error("{}", prepare_lines(.0))]
    Prepare(Vec<PrepareError>),
    /// Bad flags or inputs found before anything ran.
    #[error("{message}")]
    Usage {
        message: String,
        hint: Option<String>,
    },
    /// The async runtime, the line editor, the terminal.
    #[error("{0}")]
    Infra(String),
}

impl From<PrepareError> for RunError {
    fn from(error: PrepareError) -> Self {
        Self::Prepare(vec![error])
    }
}

impl RunError {
    pub fn usage(message: impl Into<String>, hint: Option<&str>) -> Self {
        Self::Usage {
            message: message.into(),
            hint: hint.map(str::to_owned),
        }
    }
}

fn prepare_lines(errors: &[PrepareError]) -> String {
    let lines: Vec<String> = errors
        .iter()
        .map(|error| match &error.hint {
            Some(hint) => format!("{error}\n  hint: {hint}"),
            None => error.to_string(),
        })
        .collect();
    lines.join("\n")
}

impl Failure for RunError {
    fn exit_code(&self) -> u8 {
        match self {
            Self::Prepare(_) | Self::Usage { .. } => exit::USAGE,
            Self::Infra(_) => exit::INFRA,
        }
    }

    fn hint(&self) -> Option<String> {
        match self {
            Self::Usage { hint, .. } => hint.clone(),
            Self::Prepare(_) | Self::Infra(_) => None,
        }
    }

    fn is_diagnostic(&self) -> bool {
        matches!(self, Self::Prepare(_))
    }
}

/// Every problem of a load, in the order found: the current directory,
/// the operator policy, the config, the task files. Diagnostics keep their
/// `file:line:col` and hint lines and end with a count.
impl<L> fmt::Display for LoadErrors<L> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut lines: Vec<String> = Vec::new();
        if let Some(error) = &self.cwd {
            lines.push(format!("error: cannot read the current directory: {error}"));
        }
        for error in [&self.policy, &self.config].into_iter().flatten() {
            match error {
                ConfigError::Files(diagnostics) => diagnostic_lines(&mut lines, diagnostics),
                other => {
                    lines.push(format!("error: {other}"));
                    if let Some(hint) = other.hint() {
                        lines.push(format!("  hint: {hint}"));
                    }
                }
            }
        }
        if let Some(diagnostics) = &self.files {
            diagnostic_lines(&mut lines, diagnostics);
        }
        f.write_str(&lines.join("\n"))
    }
}

fn diagnostic_lines(lines: &mut Vec<String>, diagnostics: &Diagnostics) {
    for diagnostic in diagnostics {
        lines.push(diagnostic.to_string());
        if let Some(hint) = &diagnostic.hint {
            lines.push(format!("  hint: {hint}"));
        }
    }
    let count = diagnostics.len();
    lines.push(format!(
        "{count} error{} found",
        if count == 1 { "" } else { "s" }
    ));
}

impl<L: fmt::Debug> std::error::Error for LoadErrors<L> {}

impl<L: fmt::Debug> Failure for LoadErrors<L> {
    fn exit_code(&self) -> u8 {
        exit::USAGE
    }

    /// Each line already carries its own `error: ` or `file:line:col: `.
    fn is_diagnostic(&self) -> bool {
        true
    }
}

/// Why a step of preparing a task failed, before the task and its file
/// are attached ([`PrepareError`]): each a usage or config error (exit 2,
/// nothing was run), with the hint that helps fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SetupError {
    /// The kernel confinement the task needs is unavailable.
    #[error("{message}")]
    Sandbox { message: String, hint: &'static str },
    /// The repository cannot take the task's commit (docs/git.md).
    #[error("{message}")]
    Git { message: String, hint: &'static str },
    /// The task's `workdir` cannot be used.
    #[error("{message}")]
    Workdir { message: String },
    /// The task's policy does not build or its examples fail.
    #[error("{message}")]
    Policy {
        message: String,
        hint: Option<&'static str>,
    },
    /// The task names a tool that can never work.
    #[error("{message}")]
    Tools { message: String },
    /// The task's provider cannot be built.
    #[error("{message}")]
    Provider {
        message: String,
        hint: Option<&'static str>,
    },
}

impl SetupError {
    /// The hint, as a static string.
    pub fn hint_text(&self) -> Option<&'static str> {
        match self {
            Self::Sandbox { hint, .. } | Self::Git { hint, .. } => Some(hint),
            Self::Policy { hint, .. } | Self::Provider { hint, .. } => *hint,
            Self::Workdir { .. } => Some(
                "a relative `workdir` is taken from the directory ybs runs in: create the directory, or fix the task's `workdir` (or the `--var` it names)",
            ),
            Self::Tools { .. } => None,
        }
    }
}

impl Failure for SetupError {
    fn exit_code(&self) -> u8 {
        exit::USAGE
    }
    fn hint(&self) -> Option<String> {
        self.hint_text().map(str::to_owned)
    }
}

/// Why a task cannot run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: task `{task}`: {message}", file.display(), span.map(|span| format!(":{span}")).unwrap_or_default())]
pub struct PrepareError {
    pub file: PathBuf,
    /// Where in `file` the problem is, when one field is to blame.
    pub span: Option<Span>,
    pub task: String,
    pub message: String,
    pub hint: Option<String>,
}

/// Everything wrong with the inputs, in the order it is printed: the
/// operator policy, the config, the task files. `L` is what did load
/// (the runner's `Loaded`).
#[derive(Debug)]
pub struct LoadErrors<L> {
    pub cwd: Option<std::io::Error>,
    pub policy: Option<ConfigError>,
    pub config: Option<ConfigError>,
    pub files: Option<Diagnostics>,
    /// With only task-file errors: the files that did load, with the
    /// config and policy (`ybs validate` checks their policies too).
    pub partial: Option<Box<L>>,
}

impl<L> Default for LoadErrors<L> {
    fn default() -> Self {
        Self {
            cwd: None,
            policy: None,
            config: None,
            files: None,
            partial: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;
    use crate::config::EnvError;
    use crate::core::span::Span;
    use crate::task::Diagnostic;

    #[test]
    fn load_errors_print_every_problem_with_hints_and_a_count() {
        let errors = LoadErrors::<()> {
            cwd: None,
            partial: None,
            policy: None,
            config: Some(ConfigError::Env(EnvError {
                name: "YBS_JOBS".into(),
                value: "many".into(),
                expected: "a number".into(),
                hint: Some("e.g. YBS_JOBS=4".into()),
            })),
            files: Some(Diagnostics(vec![
                Diagnostic::new(
                    Path::new("t.yaml"),
                    Span::new(3, 5),
                    "unknown field `promt`",
                )
                .with_hint("did you mean `prompt`?"),
                Diagnostic::whole_file(Path::new("u.yaml"), "cannot read the file"),
            ])),
        };
        assert_eq!(
            errors.to_string(),
            "error: invalid value `many` for environment variable YBS_JOBS: expected a number\n  \
             hint: e.g. YBS_JOBS=4\n\
             t.yaml:3:5: unknown field `promt`\n  hint: did you mean `prompt`?\n\
             u.yaml: cannot read the file\n\
             2 errors found"
        );
        assert_eq!(errors.exit_code(), exit::USAGE);
        assert!(errors.is_diagnostic());
    }

    #[test]
    fn a_setup_hint_is_the_one_the_user_sees() {
        let error = SetupError::Git {
            message: "git: broken".to_owned(),
            hint: "pass --no-commit to run without git",
        };
        assert_eq!(error.to_string(), "git: broken");
        assert_eq!(error.exit_code(), exit::USAGE);
        assert_eq!(
            error.hint().as_deref(),
            Some("pass --no-commit to run without git")
        );
        let tools = SetupError::Tools {
            message: "unknown built-in tool `x`".to_owned(),
        };
        assert_eq!(tools.hint(), None);
    }
}
