//! Which files a run loads: files as given, directories searched
//! recursively; and the one check that spans files (task ids).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::model::{TaskFile, TaskSpec};
use crate::core::decode::Diagnostic;

/// Files named by `paths`: files as given, directories searched
/// recursively (hidden entries and symlinked directories skipped), each
/// directory's files sorted; the same file named twice is loaded once.
pub(super) fn discover(paths: &[PathBuf]) -> (Vec<PathBuf>, Vec<Diagnostic>) {
    let mut files = Vec::new();
    let mut diagnostics = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                diagnostics.push(
                    Diagnostic::whole_file(path, "no such file or directory").with_hint(
                        "give task files or directories relative to the directory ybs runs in \
                         (with no path, `ybs run` reads tasks/ if it exists, else `.`)",
                    ),
                );
            }
            Err(error) => diagnostics.push(Diagnostic::whole_file(
                path,
                format!("cannot read: {error}"),
            )),
            Ok(meta) if meta.is_dir() => {
                let before = files.len();
                walk(path, &mut files, &mut diagnostics);
                if files.len() == before {
                    diagnostics.push(
                        Diagnostic::whole_file(
                            path,
                            "no task files (*.yaml, *.yml) in this directory",
                        )
                        .with_hint(
                            "task files end in .yaml or .yml (docs/task-files.md); or give the \
                             task on the command line: ybs run -p 'PROMPT' --allow TOOL --check CMD",
                        ),
                    );
                }
            }
            Ok(_) => files.push(path.clone()),
        }
    }
    let mut seen = HashSet::new();
    files.retain(|file| seen.insert(std::fs::canonicalize(file).unwrap_or_else(|_| file.clone())));
    (files, diagnostics)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>, diagnostics: &mut Vec<Diagnostic>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(error) => {
            diagnostics.push(Diagnostic::whole_file(
                dir,
                format!("cannot read the directory: {error}"),
            ));
            return;
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|entry| entry.path())
        .filter(|path| {
            !path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    for path in paths {
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() {
            walk(&path, files, diagnostics);
        } else if path
            .extension()
            .is_some_and(|ext| ext == "yaml" || ext == "yml")
            && std::fs::metadata(&path).is_ok_and(|meta| meta.is_file())
        {
            files.push(path);
        }
    }
}

/// Outputs go to `OUT/<task-id>/`, so an id may appear once per run.
pub(super) fn duplicate_ids_across_files(files: &[TaskFile]) -> Vec<Diagnostic> {
    let mut first: HashMap<&str, &TaskSpec> = HashMap::new();
    let mut diagnostics = Vec::new();
    for task in files.iter().flat_map(|file| &file.tasks) {
        match first.get(task.id.as_str()) {
            Some(earlier) => diagnostics.push(
                Diagnostic::new(
                    &task.file,
                    task.span,
                    format!(
                        "duplicate task id `{}`: also used in {}:{}",
                        task.id,
                        earlier.file.display(),
                        earlier.span
                    ),
                )
                .with_hint("outputs go to OUT/<task-id>/, so task ids must be unique across the files of a run"),
            ),
            None => {
                first.insert(&task.id, task);
            }
        }
    }
    diagnostics
}
