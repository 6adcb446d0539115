//! Stage 1 of task assembly: the directory a task runs in, inside its
//! repository or an allowed root, and the files in it no tool may write.

use std::path::{Path, PathBuf};

use crate::config::Config;
use crate::core::Environ;
use crate::core::exit::Failure;
use crate::task::TaskSpec;

use super::super::RunContext;
use super::super::error::{PrepareError, SetupError};

/// The directory `task` runs in, canonical. It must lie inside the
/// repository the task file belongs to (the git work tree holding it, or
/// the directory ybs was started in when there is none) or inside a root
/// the operator lists in `safety.allowed_workdirs`: a task file cannot
/// move the run's root to `/` or the home directory (docs/security.md S5).
pub fn task_workdir(
    config: &Config,
    cwd: &Path,
    home: Option<&Path>,
    task: &TaskSpec,
) -> Result<PathBuf, PrepareError> {
    let workdir = resolve_workdir(cwd, task.workdir.as_deref()).map_err(|error| PrepareError {
        file: task.file.clone(),
        span: task.workdir_span,
        task: task.id.clone(),
        message: error.to_string(),
        hint: error.hint(),
    })?;
    check_workdir_root(config, cwd, home, task, &workdir)?;
    Ok(workdir)
}

/// The check of [`task_workdir`] on an already canonical `workdir`.
pub fn check_workdir_root(
    config: &Config,
    cwd: &Path,
    home: Option<&Path>,
    task: &TaskSpec,
    workdir: &Path,
) -> Result<(), PrepareError> {
    let repository = task_repository(cwd, &task.file);
    let allowed: Vec<PathBuf> = config
        .safety
        .allowed_workdirs
        .iter()
        .filter_map(|root| {
            cwd.join(expand_home(Path::new(root), home))
                .canonicalize()
                .ok()
        })
        .collect();
    if workdir.starts_with(&repository) || allowed.iter().any(|root| workdir.starts_with(root)) {
        return Ok(());
    }
    let written = task
        .workdir
        .as_deref()
        .map_or_else(|| ".".to_owned(), |dir| dir.display().to_string());
    Err(PrepareError {
        file: task.file.clone(),
        span: task.workdir_span,
        task: task.id.clone(),
        message: format!(
            "`workdir` `{written}` resolves to `{}`, outside `{}`, the repository the task file belongs to",
            workdir.display(),
            repository.display()
        ),
        hint: Some(
            "use a directory inside the repository, or list the root in `safety.allowed_workdirs` in the operator config (~/.config/ybs/config.json or --config)"
                .to_owned(),
        ),
    })
}

/// The git work tree holding `file` (the nearest directory above it with
/// a `.git` entry), or `cwd` when there is none; canonical.
pub(super) fn task_repository(cwd: &Path, file: &Path) -> PathBuf {
    let cwd = cwd.canonicalize().unwrap_or_else(|_| cwd.to_owned());
    let Ok(file) = cwd.join(file).canonicalize() else {
        return cwd;
    };
    file.ancestors()
        .skip(1)
        .find(|dir| dir.join(".git").symlink_metadata().is_ok())
        .map_or(cwd, Path::to_owned)
}

pub(super) fn resolve_workdir(cwd: &Path, workdir: Option<&Path>) -> Result<PathBuf, SetupError> {
    let path = match workdir {
        Some(dir) if dir.is_absolute() => dir.to_owned(),
        Some(dir) => cwd.join(dir),
        None => cwd.to_owned(),
    };
    let canonical = path.canonicalize().map_err(|error| SetupError::Workdir {
        message: format!("workdir `{}` cannot be used: {error}", path.display()),
    })?;
    if !canonical.is_dir() {
        return Err(SetupError::Workdir {
            message: format!("workdir `{}` is not a directory", path.display()),
        });
    }
    Ok(canonical)
}

/// `~` at the start of `path` as the home directory.
pub fn expand_home(path: &Path, home: Option<&Path>) -> PathBuf {
    match (path.strip_prefix("~"), home) {
        (Ok(rest), Some(home)) => home.join(rest),
        _ => path.to_owned(),
    }
}

/// `safety.allowed_paths`, expanded and canonical; missing ones dropped.
pub(super) fn allowed_roots(config: &Config, home: Option<&Path>) -> Vec<PathBuf> {
    config
        .safety
        .allowed_paths
        .iter()
        .filter_map(|p| expand_home(Path::new(p), home).canonicalize().ok())
        .collect()
}

/// Files no tool may write: the run's task file, the policy file and the
/// runner's GitHub control files (docs/security.md S6).
pub(super) fn protected_paths(run: &RunContext, task: &TaskSpec) -> Vec<PathBuf> {
    protected_files(
        &run.cwd,
        &task.file,
        run.policy_file.as_deref(),
        &run.environ,
    )
}

/// What the file tools and the shell guard never write
/// (docs/security.md S6): `protected`, the workdir's control files and
/// `./.ybs.json` (the sandbox binds these read-only on its own), every
/// task and config file the run read, and ybs's outputs (hidden in the
/// sandbox, but the built-in tools run outside it).
pub(super) fn guarded_paths(
    run: &RunContext,
    workdir: &Path,
    protected: &[PathBuf],
    control: &[PathBuf],
) -> Vec<PathBuf> {
    let canonical = |path: PathBuf| path.canonicalize().unwrap_or(path);
    let mut paths = protected.to_vec();
    paths.extend(control.iter().cloned());
    paths.push(canonical(run.cwd.join(".ybs.json")));
    paths.extend(
        run.task_files
            .iter()
            .map(|file| canonical(run.cwd.join(file))),
    );
    paths.extend(
        run.config
            .files
            .iter()
            .map(|file| canonical(run.cwd.join(file))),
    );
    // An output directory holding the workdir (`--out .`) would refuse
    // every write.
    paths.extend(
        run.outputs
            .iter()
            .map(|path| canonical(run.cwd.join(path)))
            .filter(|path| !workdir.starts_with(path)),
    );
    paths.sort();
    paths.dedup();
    paths
}

/// The protected files for a task file and an optional policy file.
pub fn protected_files(
    cwd: &Path,
    task_file: &Path,
    policy_file: Option<&Path>,
    environ: &Environ,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = vec![cwd.join(task_file)];
    paths.extend(policy_file.map(|p| cwd.join(p)));
    for var in crate::policy::guards::PROTECTED_VARIABLES {
        if let Some(value) = environ.var_os(var) {
            paths.push(PathBuf::from(value));
        }
    }
    paths
        .into_iter()
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect()
}

/// The control files of a workdir no child may change, existing or not
/// (docs/security.md S6): `.git` (and, for a worktree's gitfile, the git
/// directory it names), `.github/workflows`, `.github/actions`,
/// `.ybs.json`, each submodule's `.git`.
pub fn control_paths(workdir: &Path) -> Vec<PathBuf> {
    control_paths_with(workdir, crate::git::submodule_paths(workdir))
}

/// [`control_paths`] with the repository's submodules already read.
pub(super) fn control_paths_with(workdir: &Path, submodules: Vec<PathBuf>) -> Vec<PathBuf> {
    let git = workdir.join(".git");
    let mut paths = vec![git.clone()];
    if git.is_file()
        && let Ok(text) = std::fs::read_to_string(&git)
        && let Some(dir) = text.trim().strip_prefix("gitdir:")
    {
        let dir = workdir.join(dir.trim());
        if let Ok(common) = std::fs::read_to_string(dir.join("commondir")) {
            paths.push(dir.join(common.trim()));
        }
        paths.push(dir);
    }
    paths.extend([
        workdir.join(".github/workflows"),
        workdir.join(".github/actions"),
        workdir.join(".ybs.json"),
    ]);
    // A submodule's `.git` (or, not checked out, its whole directory: a
    // `.git` made there would be one).
    for submodule in submodules {
        if submodule.starts_with(workdir) {
            let git = submodule.join(".git");
            paths.push(if git.symlink_metadata().is_ok() {
                git
            } else {
                submodule
            });
        }
    }
    paths
        .into_iter()
        .map(|path| path.canonicalize().unwrap_or(path))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::exit;
    use crate::runner::prepare::fixture::{Site, TASK_FILE};

    #[test]
    fn an_unusable_workdir_is_a_usage_error_with_its_message() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let error = resolve_workdir(dir.path(), Some(Path::new("file"))).unwrap_err();
        assert_eq!(
            error,
            SetupError::Workdir {
                message: format!("workdir `{}` is not a directory", file.display())
            }
        );
        assert_eq!(error.exit_code(), exit::USAGE);
        assert!(error.hint().unwrap().contains("fix the task's `workdir`"));
        let missing = resolve_workdir(dir.path(), Some(Path::new("missing"))).unwrap_err();
        assert!(
            missing.to_string().starts_with(&format!(
                "workdir `{}` cannot be used: ",
                dir.path().join("missing").display()
            )),
            "{missing}"
        );
    }

    #[test]
    fn a_workdir_outside_the_repository_is_refused_at_its_field() {
        let site = Site::new();
        let outside = site.dir("elsewhere");
        let task = site.task("id: t\nprompt: p\nworkdir: ../elsewhere\n");
        let config = &site.run.config;
        let error = task_workdir(config, &site.repo, Some(&site.home), &task).unwrap_err();
        assert_eq!(error.file, Path::new(TASK_FILE));
        assert_eq!(error.span, task.workdir_span);
        assert!(error.span.is_some());
        assert_eq!(
            error.message,
            format!(
                "`workdir` `../elsewhere` resolves to `{}`, outside `{}`, the repository the task file belongs to",
                outside.display(),
                site.repo.display()
            )
        );
        assert!(error.hint.unwrap().contains("safety.allowed_workdirs"));
    }

    #[test]
    fn a_workdir_inside_the_repository_or_an_allowed_root_is_taken() {
        let mut site = Site::new();
        let sub = site.dir("repo/sub");
        let task = site.task("id: t\nprompt: p\nworkdir: sub\n");
        let workdir = task_workdir(&site.run.config, &site.repo, Some(&site.home), &task);
        assert_eq!(workdir.unwrap(), sub);
        // The operator lists a root beside the repository, `~` expanded.
        let shared = site.dir("home/shared");
        site.run.config.safety.allowed_workdirs = vec!["~/shared".to_owned()];
        let task = site.task(&format!(
            "id: t\nprompt: p\nworkdir: {}\n",
            shared.display()
        ));
        let workdir = task_workdir(&site.run.config, &site.repo, Some(&site.home), &task);
        assert_eq!(workdir.unwrap(), shared);
    }

    #[test]
    fn the_guarded_paths_hold_the_runs_files_but_not_an_output_around_the_workdir() {
        let mut site = Site::new();
        let task = site.task("id: t\nprompt: p\n");
        site.run.outputs = vec![PathBuf::from("ybs-out"), PathBuf::from(".")];
        let protected = protected_paths(&site.run, &task);
        assert_eq!(protected, [site.repo.join(TASK_FILE)]);
        let control = control_paths(&site.repo);
        let guarded = guarded_paths(&site.run, &site.repo, &protected, &control);
        for path in [
            site.repo.join(TASK_FILE),
            site.repo.join(".git"),
            site.repo.join(".github/workflows"),
            site.repo.join(".ybs.json"),
            site.repo.join("ybs-out"),
        ] {
            assert!(
                guarded.contains(&path),
                "{} not in {guarded:?}",
                path.display()
            );
        }
        // `--out .` holds the workdir: guarding it would refuse every write.
        assert!(!guarded.contains(&site.repo), "{guarded:?}");
    }

    #[test]
    fn a_worktrees_gitfile_brings_its_git_directories() {
        let site = Site::new();
        let checkout = site.dir("checkout");
        let gitdir = site.dir("repo/.git/worktrees/w");
        std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
        std::fs::write(
            checkout.join(".git"),
            format!("gitdir: {}\n", gitdir.display()),
        )
        .unwrap();
        let paths = control_paths_with(&checkout, Vec::new());
        assert_eq!(
            paths[..3],
            [
                checkout.join(".git"),
                site.repo.join(".git"),
                gitdir.clone()
            ]
        );
    }
}
