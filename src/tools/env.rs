//! The scrubbed environment every subprocess gets (SPEC §5.1, SECURITY S7).

/// Environment variables for child processes, with what was removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    pub vars: Vec<(String, String)>,
    /// Names of the variables that were stripped.
    pub removed: Vec<String>,
    /// Values of the stripped variables, for the redactor.
    pub secret_values: Vec<String>,
}
