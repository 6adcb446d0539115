//! Diagnostics for task, policy and config files: one line naming
//! `file:line:col` and what was expected, plus an optional hint.
//!
//! Loaders collect every diagnostic instead of stopping at the first, so
//! `ybs validate` can report all errors of all files in one go (docs/task-files.md).

use std::fmt;
use std::path::{Path, PathBuf};

use crate::core::exit;
use crate::core::span::Span;

/// One problem in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub path: PathBuf,
    /// Where the problem is. A span with line 0 means "the file as a whole"
    /// (missing file, unreadable file): Display then omits `line:col`.
    pub span: Span,
    /// One line, lowercase, no trailing period.
    pub message: String,
    /// Shown by the CLI on its own line as `hint: ...`.
    pub hint: Option<String>,
}

impl Diagnostic {
    pub fn new(path: &Path, span: Span, message: impl Into<String>) -> Self {
        Self {
            path: path.to_path_buf(),
            span,
            message: message.into(),
            hint: None,
        }
    }

    /// A problem with the file as a whole (no line or column).
    pub fn whole_file(path: &Path, message: impl Into<String>) -> Self {
        Self::new(path, Span::default(), message)
    }

    #[must_use]
    pub fn with_hint(mut self, hint: impl Into<String>) -> Self {
        self.hint = Some(hint.into());
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.span.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.path.display(), self.span, self.message)
        }
    }
}

impl std::error::Error for Diagnostic {}

/// Every diagnostic of a load, in file order, then position order.
///
/// Display renders each diagnostic on its own line, each followed by its
/// `hint: ...` line when it has one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diagnostics(pub Vec<Diagnostic>);

impl Diagnostics {
    /// Task, policy and config file errors are usage errors: nothing ran.
    pub fn exit_code(&self) -> u8 {
        exit::USAGE
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Diagnostic> {
        self.0.iter()
    }
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, diagnostic) in self.0.iter().enumerate() {
            if index > 0 {
                writeln!(f)?;
            }
            write!(f, "{diagnostic}")?;
            if let Some(hint) = &diagnostic.hint {
                write!(f, "\nhint: {hint}")?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl From<Vec<Diagnostic>> for Diagnostics {
    fn from(diagnostics: Vec<Diagnostic>) -> Self {
        Self(diagnostics)
    }
}

impl IntoIterator for Diagnostics {
    type Item = Diagnostic;
    type IntoIter = std::vec::IntoIter<Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

impl<'a> IntoIterator for &'a Diagnostics {
    type Item = &'a Diagnostic;
    type IntoIter = std::slice::Iter<'a, Diagnostic>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_with_location_and_separate_hint() {
        let diagnostic = Diagnostic::new(Path::new("tasks/x.yaml"), Span::new(3, 1), "bad")
            .with_hint("did you mean `prompt`?");
        assert_eq!(diagnostic.to_string(), "tasks/x.yaml:3:1: bad");
        let whole = Diagnostic::whole_file(Path::new("t.yaml"), "no such file");
        assert_eq!(whole.to_string(), "t.yaml: no such file");
        let all = Diagnostics(vec![diagnostic, whole]);
        assert_eq!(
            all.to_string(),
            "tasks/x.yaml:3:1: bad\nhint: did you mean `prompt`?\nt.yaml: no such file"
        );
    }
}
