//! `ybs clean`: what earlier runs left in the repository (docs/git.md,
//! "What a run leaves"), removed where it holds no work.

use std::path::Path;

use super::RunError;
use crate::git::{Leftover, Workspace, lock_repository};

/// What `ybs clean` did (or, with `--dry-run`, would do).
#[derive(Debug, Default)]
pub struct Cleaned {
    pub removed: Vec<Leftover>,
    pub kept: Vec<Leftover>,
}

/// Finds what runs left in the repository holding `cwd` (only `run`'s
/// when given) and removes what holds no work (everything but salvage
/// refs with `force`); `dry_run` removes nothing. Takes the repository's
/// run lock first, so a run in progress is never cleaned under.
pub fn clean(
    cwd: &Path,
    run: Option<&str>,
    dry_run: bool,
    force: bool,
) -> Result<Cleaned, RunError> {
    let git = |error: crate::git::GitError| RunError::usage(error.to_string(), None);
    let Some(workspace) = Workspace::open(cwd).map_err(git)? else {
        return Err(RunError::usage(
            format!("{} is not in a git repository", cwd.display()),
            Some("run `ybs clean` in the repository the runs worked in"),
        ));
    };
    lock_repository(cwd, true).map_err(|error| {
        RunError::usage(
            error.to_string(),
            Some("wait for the other ybs run to end, then clean"),
        )
    })?;
    let mut leftovers = workspace.leftovers(None).map_err(git)?;
    if let Some(run) = run {
        leftovers.retain(|leftover| leftover.run_id == run);
    }
    if dry_run {
        let (removed, kept) = crate::git::clean_plan(&leftovers, force);
        return Ok(Cleaned { removed, kept });
    }
    let (removed, kept) = workspace.clean(&leftovers, force).map_err(git)?;
    Ok(Cleaned { removed, kept })
}

/// The note at a run's start naming what earlier runs left in the
/// repository holding `cwd` (not `run_id`'s own); `None` when nothing,
/// or no repository.
pub fn leftover_note(cwd: &Path, run_id: &str) -> Option<String> {
    let workspace = Workspace::open(cwd).ok().flatten()?;
    let leftovers = workspace.leftovers(Some(run_id)).ok()?;
    crate::git::leftover_note(&leftovers)
}
