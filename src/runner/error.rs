//! The runner's errors, each knowing its exit code (see
//! [`crate::core::exit::Failure`]).

use super::prepare::PrepareError;
use crate::core::exit::{self, Failure};

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
