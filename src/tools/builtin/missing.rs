//! The error for a file tool's path that names nothing, made to get a
//! model unstuck: a glob (`*`, `?`, `[`) is not expanded, and the error
//! names up to ten files it matches; a plain path that does not exist
//! names the nearest existing ones (same name elsewhere, or a close
//! spelling). Both look only where the walk of `list_files` looks
//! (ignore rules honoured, `.git/` and blocked paths never named).

use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};

use ignore::WalkState;
use serde_json::Value;

use super::args::Args;
use super::path_tool::{PathArg, Reach};
use super::walk::{self, PathGlob, WalkCtx};
use crate::core::text::edit_distance;
use crate::tools::paths::{self, Access, Resolved};
use crate::tools::{ToolCtx, ToolError};

/// The most matching files an error names.
const MAX_NAMED: usize = 10;
/// The most nearest existing paths an error names.
const MAX_NEAREST: usize = 5;
/// The most entries one of these walks looks at: an error is not worth
/// a long walk.
const WALK_LIMIT: usize = 20_000;

/// The characters that make a path look like a glob.
const GLOB_CHARS: [char; 3] = ['*', '?', '['];

/// What the entries of a walk may be, for the tool at hand.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wanted {
    Files,
    Dirs,
    Either,
}

impl Wanted {
    fn of(reach: Reach) -> Self {
        match reach {
            Reach::Read => Self::Either,
            Reach::Write => Self::Files,
            Reach::Dir => Self::Dirs,
        }
    }

    fn accepts(self, is_dir: bool) -> bool {
        match self {
            Self::Files => !is_dir,
            Self::Dirs => is_dir,
            Self::Either => true,
        }
    }
}

/// The error for the call's path when it names nothing and the tool
/// needs it to exist, or when it is a glob; `None` to let the tool run
/// (and report any other problem itself).
pub(super) async fn explain(args: &Value, ctx: &ToolCtx, path: PathArg) -> Option<ToolError> {
    let parsed = Args::new(args, path.spec).ok()?;
    let raw = match path.default {
        Some(default) => parsed.opt_string(path.name).ok()?.unwrap_or(default),
        None => parsed.string(path.name).ok()?,
    }
    .to_owned();
    // A path the tool may not use at all is refused by the tool, for that
    // reason, whether it exists or not.
    let access = if path.reach == Reach::Write {
        Access::Write
    } else {
        Access::Read
    };
    let resolved = paths::resolve(ctx, &raw, access).ok()?;
    if resolved.kind.is_some() {
        return None;
    }
    let wanted = Wanted::of(path.reach);
    if raw.contains(GLOB_CHARS) {
        // A new file may have brackets in its name (`pages/[id].tsx`);
        // one with `*` or `?` is never meant.
        let literal = path.reach == Reach::Write && !raw.contains(['*', '?']);
        // What a glob matches is named whatever it is: the listing is
        // the help, even for a tool that wants a directory.
        let wanted = if wanted == Wanted::Dirs {
            Wanted::Either
        } else {
            wanted
        };
        let matches = glob_matches(ctx, &raw, wanted).await;
        if literal && matches.total == 0 {
            return None;
        }
        let mut message = glob_message(&raw, &matches);
        if path.reach == Reach::Dir && matches.total > 0 {
            message.push_str(" (or give the directory as `path` and the glob as `pattern`)");
        }
        return Some(ToolError::Model(message));
    }
    if !path.must_exist {
        return None;
    }
    let nearest = nearest(ctx, &resolved, wanted).await;
    Some(ToolError::Model(missing_message(&resolved, &nearest)))
}

/// Files (or directories) a glob matches: the first [`MAX_NAMED`] in
/// sorted order, and how many in all.
#[derive(Default)]
struct Matches {
    names: Vec<String>,
    total: usize,
}

fn glob_message(raw: &str, matches: &Matches) -> String {
    let mut message = format!(
        "`{raw}`: paths are not expanded (`*`, `?` and `[` are taken literally, and nothing has that name)"
    );
    if matches.total == 0 {
        message.push_str("; no file matches it either; list_files finds files by pattern");
        return message;
    }
    let names: Vec<String> = matches
        .names
        .iter()
        .map(|name| format!("`{name}`"))
        .collect();
    message.push_str(&format!("; it matches {}", names.join(", ")));
    if matches.total > matches.names.len() {
        message.push_str(&format!(
            " and {} more",
            matches.total - matches.names.len()
        ));
    }
    message.push_str("; call the tool with one path at a time");
    message
}

fn missing_message(resolved: &Resolved, nearest: &[String]) -> String {
    let mut message = format!("`{}` does not exist", resolved.display);
    if nearest.is_empty() {
        message.push_str("; list_files shows what is there");
    } else {
        let names: Vec<String> = nearest.iter().map(|name| format!("`{name}`")).collect();
        message.push_str(&format!("; the nearest existing: {}", names.join(", ")));
    }
    message
}

/// The workdir-relative (or absolute) spelling of the glob, and the
/// directory to walk: the part of the path before its first component
/// with a glob character, resolved like any path.
fn glob_root(ctx: &ToolCtx, raw: &str) -> Option<(PathBuf, String)> {
    let path = Path::new(raw);
    let mut base = PathBuf::new();
    let mut rest = PathBuf::new();
    for component in path.components() {
        let globbed = component.as_os_str().to_string_lossy().contains(GLOB_CHARS);
        if rest.as_os_str().is_empty() && !globbed {
            base.push(component);
        } else {
            if matches!(component, Component::ParentDir) {
                // `..` after a glob: nothing to match against.
                return None;
            }
            rest.push(component);
        }
    }
    let base_raw = if base.as_os_str().is_empty() {
        ".".to_owned()
    } else {
        base.to_string_lossy().into_owned()
    };
    let root = paths::resolve_dir(ctx, &base_raw).ok()?;
    let pattern = if root.display == "." {
        rest.to_string_lossy().into_owned()
    } else {
        Path::new(&root.display)
            .join(&rest)
            .to_string_lossy()
            .into_owned()
    };
    Some((root.abs, pattern))
}

async fn glob_matches(ctx: &ToolCtx, raw: &str, wanted: Wanted) -> Matches {
    let Some((root, pattern)) = glob_root(ctx, raw) else {
        return Matches::default();
    };
    let Ok(glob) = PathGlob::path("path", &pattern) else {
        return Matches::default();
    };
    let walk_ctx = WalkCtx::with_limit(ctx, root, WALK_LIMIT);
    walk::blocking(move || {
        let mut names: Vec<String> = entries(&walk_ctx)
            .into_iter()
            .filter(|(name, is_dir)| {
                wanted.accepts(*is_dir) && glob.is_match(Path::new(name), Path::new(name))
            })
            .map(|(name, _)| name)
            .collect();
        names.sort();
        let total = names.len();
        names.truncate(MAX_NAMED);
        Ok(Matches { names, total })
    })
    .await
    .unwrap_or_default()
}

/// The existing paths nearest to the missing `resolved`: the same name
/// elsewhere in the tree first (nearest path first), then close
/// spellings of the whole path.
async fn nearest(ctx: &ToolCtx, resolved: &Resolved, wanted: Wanted) -> Vec<String> {
    let missing = resolved.display.clone();
    let name = resolved
        .abs
        .file_name()
        .map(|name| name.to_string_lossy().into_owned());
    let walk_ctx = WalkCtx::with_limit(ctx, ctx.workdir.clone(), WALK_LIMIT);
    walk::blocking(move || {
        let mut ranked: Vec<(u8, usize, String)> = entries(&walk_ctx)
            .into_iter()
            .filter(|(_, is_dir)| wanted.accepts(*is_dir))
            .filter_map(|(path, _)| {
                let distance = edit_distance(&missing, &path);
                let same_name = name.as_deref().is_some_and(|name| {
                    Path::new(&path)
                        .file_name()
                        .is_some_and(|found| found.to_string_lossy() == name)
                });
                if same_name {
                    Some((0, distance, path))
                } else if distance <= 2.max(missing.chars().count() / 3) {
                    Some((1, distance, path))
                } else {
                    None
                }
            })
            .collect();
        ranked.sort();
        ranked.truncate(MAX_NEAREST);
        Ok(ranked.into_iter().map(|(_, _, path)| path).collect())
    })
    .await
    .unwrap_or_default()
}

/// Every entry of the walk below its root, as displayed (relative to the
/// workdir when inside it), and whether it is a directory.
fn entries(walk_ctx: &WalkCtx) -> Vec<(String, bool)> {
    let found = Arc::new(Mutex::new(Vec::new()));
    walk_ctx.walker().run(|| {
        let found = Arc::clone(&found);
        Box::new(move |entry| {
            if let Ok(entry) = entry
                && entry.depth() > 0
                && let Some(kind) = entry.file_type()
            {
                let item = (walk_ctx.display(entry.path()), kind.is_dir());
                found
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(item);
            }
            WalkState::Continue
        })
    });
    let mut found = found
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    std::mem::take(&mut *found)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::{EditFile, ReadFile, WriteFile};
    use crate::tools::Tool;
    use crate::tools::testing::{Fixture, model_error};

    #[tokio::test]
    async fn blocked_and_git_paths_are_never_named() {
        let fx = Fixture::new();
        fx.file("a/.env", "SECRET=1\n");
        fx.file("b/config.env", "x\n");
        fx.file(".git/config", "[core]\n");
        let message = model_error(ReadFile.call(json!({"path": "a/.e*"}), &fx.ctx).await);
        assert!(message.contains("no file matches"), "{message}");
        let message = model_error(ReadFile.call(json!({"path": "config"}), &fx.ctx).await);
        assert!(!message.contains(".git"), "{message}");
        let message = model_error(ReadFile.call(json!({"path": ".env"}), &fx.ctx).await);
        assert!(!message.contains("a/.env"), "{message}");
    }

    #[tokio::test]
    async fn a_literal_bracket_name_is_written_and_a_star_is_not() {
        let fx = Fixture::new();
        let write = |path: &str| json!({"path": path, "content": "x\n"});
        WriteFile
            .call(write("pages/[id].tsx"), &fx.ctx)
            .await
            .unwrap();
        assert_eq!(fx.read("pages/[id].tsx"), "x\n");
        // Once there, it is read and edited by its name.
        ReadFile
            .call(json!({"path": "pages/[id].tsx"}), &fx.ctx)
            .await
            .unwrap();
        let edit = json!({"path": "pages/[id].tsx", "old_text": "x", "new_text": "y"});
        EditFile.call(edit, &fx.ctx).await.unwrap();
        let message = model_error(WriteFile.call(write("pages/*.tsx"), &fx.ctx).await);
        assert!(
            message.contains("not expanded") && message.contains("`pages/[id].tsx`"),
            "{message}"
        );
        let message = model_error(WriteFile.call(write("new/*.txt"), &fx.ctx).await);
        assert!(message.contains("no file matches"), "{message}");
        assert!(!fx.work().join("new").exists());
    }
}
