//! What every way into a run shares at its start and its end: the
//! unconfined warning before anything runs, the OpenTelemetry export
//! while it runs, and one ending for `ybs run`, `ybs resume` and
//! `ybs report merge` alike: output errors, tampering and warnings, the
//! line of totals, and `$GITHUB_OUTPUT` (docs/progress.md). The step
//! summary is written by the run's report sinks.

use std::path::Path;

use super::{PreparedTask, RunReport};
use crate::report::{self, Console, OutputLayout};

/// The run's report sinks with the OpenTelemetry export attached when an
/// endpoint is set (docs/observability.md); a variable that cannot be
/// used is a warning in `report`, and the run goes on without export.
pub(crate) fn with_otel(
    sinks: report::RunSinks,
    environ: &crate::core::Environ,
    report: &mut RunReport,
) -> report::RunSinks {
    let otel =
        report::OtelSink::from_env(&|name: &str| environ.var(name)).unwrap_or_else(|error| {
            report
                .warnings
                .push(format!("warning: OpenTelemetry disabled: {error}"));
            None
        });
    sinks.with_otel(otel)
}

/// How a run ends, beyond its report.
pub struct Ending<'a> {
    /// The line of totals (stdout).
    pub totals: String,
    /// The exit code the run ends with, as the step outputs' `status`.
    pub code: u8,
    pub layout: &'a OutputLayout,
    /// `$GITHUB_OUTPUT`, when set.
    pub github_output: Option<&'a Path>,
    /// Seeds the delimiter of multi-line step outputs: the run id.
    pub seed: &'a str,
}

/// The one end of a run: output errors, tampering and warnings (stderr),
/// the totals (stdout), and the step outputs.
pub fn finish(console: &dyn Console, report: &RunReport, ending: &Ending<'_>) {
    if let Some(error) = &report.output_error {
        console.error(&format!("error: could not write all outputs: {error}"));
    }
    for finding in &report.tampering {
        console.error(&format!("warning: output tampering: {finding}"));
    }
    for warning in &report.warnings {
        console.error(warning);
    }
    console.result(&ending.totals);
    if let Some(path) = ending.github_output {
        let outputs = report.github_outputs(ending.code, ending.layout);
        let text = report::github_output_text(&outputs, ending.seed);
        if let Err(error) = report::append_github_output(path, &text) {
            console.error(&format!("error: could not write the step outputs: {error}"));
        }
    }
}

/// One warning line on stderr when children run unconfined (docs/security.md S1).
pub(crate) fn warn_unconfined(console: &dyn Console, prepared: &[PreparedTask]) {
    let mut reasons: Vec<&str> = prepared
        .iter()
        .filter(|task| !task.sandbox.confined())
        .map(|task| task.sandbox.reason.as_deref().unwrap_or("unknown reason"))
        .collect();
    reasons.dedup();
    if !reasons.is_empty() {
        // Not `warn`: shown even with --quiet.
        console.error(&format!(
            "warning: no sandbox: shell commands and external tools run UNCONFINED ({})",
            reasons.join("; ")
        ));
    }
    let mut missing: Vec<String> = prepared
        .iter()
        .filter(|task| task.sandbox.confined())
        .flat_map(|task| task.sandbox.missing.iter().cloned())
        .collect();
    missing.dedup();
    if !missing.is_empty() {
        console.error(&format!(
            "warning: reduced sandbox (safety.sandbox_require: landlock): missing layer: {}",
            missing.join("; ")
        ));
    }
    let mut unbounded: Vec<String> = prepared
        .iter()
        .filter(|task| task.sandbox.confined())
        .flat_map(|task| task.sandbox.missing_bounds.iter().cloned())
        .collect();
    unbounded.dedup();
    if !unbounded.is_empty() {
        console.error(&format!(
            "warning: sandbox without a bound: {}",
            unbounded.join("; ")
        ));
    }
}
