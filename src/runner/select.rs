//! Which tasks of the loaded files run: `--filter` and `--shard`.

use globset::{Glob, GlobSetBuilder};

use crate::core::Shard;
use crate::core::shard::shard_key;
use crate::task::{TaskFile, TaskSpec};

use super::error::RunError;

/// The tasks of `files` whose id matches any of `filters` (all when none);
/// a filter that is no glob is a usage error.
pub fn select(files: &[TaskFile], filters: &[String]) -> Result<Vec<TaskSpec>, RunError> {
    let mut builder = GlobSetBuilder::new();
    for filter in filters {
        builder.add(Glob::new(filter).map_err(|e| {
            RunError::usage(
                format!("invalid --filter `{filter}`: {}", e.kind()),
                Some("a filter is a glob over task ids, like `fix-*` or `lint-{a,b}`"),
            )
        })?);
    }
    let set = builder
        .build()
        .map_err(|e| RunError::usage(e.to_string(), None))?;
    Ok(files
        .iter()
        .flat_map(|file| file.tasks.iter())
        .filter(|task| filters.is_empty() || set.is_match(&task.id))
        .cloned()
        .collect())
}

/// The tasks of `shard`, in their order. A task belongs to the shard its
/// key `file#id` hashes to ([`Shard::of_key`]), with the file as the run
/// reports it relative to `cwd`: every machine of a split must run from
/// the same directory with the same paths and `--filter`. An empty result
/// is not an error: hashing may leave a shard without tasks.
pub fn shard(tasks: Vec<TaskSpec>, shard: Shard, cwd: &std::path::Path) -> Vec<TaskSpec> {
    tasks
        .into_iter()
        .filter(|task| shard.contains(&task_shard_key(task, cwd)))
        .collect()
}

/// `file#id`, the file relative to `cwd` with `/` separators and no
/// leading `./`, so the key does not depend on where the checkout is.
pub fn task_shard_key(task: &TaskSpec, cwd: &std::path::Path) -> String {
    shard_key(&portable_file(&task.file, cwd), &task.id)
}

fn portable_file(file: &std::path::Path, cwd: &std::path::Path) -> String {
    let relative = file.strip_prefix(cwd).unwrap_or(file);
    if relative.is_absolute() {
        return relative.to_string_lossy().into_owned();
    }
    let parts: Vec<String> = relative
        .components()
        .filter(|part| !matches!(part, std::path::Component::CurDir))
        .map(|part| part.as_os_str().to_string_lossy().into_owned())
        .collect();
    parts.join("/")
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::portable_file;

    #[test]
    fn shard_keys_do_not_depend_on_the_checkout() {
        let cwd = Path::new("/home/runner/work/repo");
        for file in [
            "tasks/a.yaml",
            "./tasks/a.yaml",
            "/home/runner/work/repo/tasks/a.yaml",
        ] {
            assert_eq!(
                portable_file(Path::new(file), cwd),
                "tasks/a.yaml",
                "{file}"
            );
        }
        assert_eq!(
            portable_file(Path::new("/elsewhere/a.yaml"), cwd),
            "/elsewhere/a.yaml"
        );
    }
}
