//! The runner's rooms as a graph: which room uses which, resolved down
//! to the stages of task assembly (`runner::prepare::sandbox`, not only
//! `prepare`). The engine's arrows form no loop, and each stage of
//! `prepare/` uses only the stages before it, in the order its `mod.rs`
//! runs them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use super::architecture::{
    Named, RUNNER_ENGINE, Source, crate_files, fixture, named_paths, resolve, sources,
};

/// The stages of task assembly, in the order `runner/prepare/mod.rs`
/// runs them: each uses only the ones before it.
const PREPARE_STAGES: &[&str] = &[
    "workdir", "worktree", "sandbox", "policy", "provider", "tools",
];

/// A room's arrows: the room it uses → where first (`file:line`).
type Arrows = BTreeMap<String, BTreeMap<String, String>>;

/// The room a runner module is in: `runner::front` → `front`,
/// `runner::prepare::sandbox` → `prepare::sandbox`, `runner` → `mod`.
fn room_of_module(module: &[String]) -> Option<String> {
    if module.first().map(String::as_str) != Some("runner") {
        return None;
    }
    Some(match (module.get(1), module.get(2)) {
        (None, _) => "mod".to_owned(),
        (Some(prepare), Some(stage)) if prepare == "prepare" => format!("prepare::{stage}"),
        (Some(room), _) => room.clone(),
    })
}

/// What each runner module re-exports: (module, name) → the path named.
fn reexports(runner: &[&Source]) -> BTreeMap<(Vec<String>, String), Vec<String>> {
    let mut map = BTreeMap::new();
    for source in runner {
        for named in named_paths(&source.text, &source.module, &source.children) {
            if !named.exported || named.module != source.module {
                continue;
            }
            let Some(path) = resolve(&named, &source.children) else {
                continue;
            };
            if let Some(name) = path.last() {
                map.insert((source.module.clone(), name.clone()), path);
            }
        }
    }
    map
}

/// The runner module a path names, re-exports followed: the longest
/// prefix of it that is a module.
fn module_named(
    path: &[String],
    modules: &BTreeSet<Vec<String>>,
    reexports: &BTreeMap<(Vec<String>, String), Vec<String>>,
) -> Vec<String> {
    let mut path = path.to_vec();
    // Bounded: a re-export of a re-export, never a loop.
    for _ in 0..8 {
        let mut module = path.clone();
        while !module.is_empty() && !modules.contains(&module) {
            module.pop();
        }
        match path.get(module.len()) {
            Some(name) if reexports.contains_key(&(module.clone(), name.clone())) => {
                let rest = path[module.len() + 1..].to_vec();
                path = reexports[&(module, name.clone())].clone();
                path.extend(rest);
            }
            _ => return module,
        }
    }
    path
}

/// Whether a path is named in test code: a `tests` module, inline or a
/// file, or a file `test_modules` lists (`#[cfg(test)] mod fixture;`).
fn in_tests(source: &Source, named: &Named, test_modules: &[Vec<String>]) -> bool {
    source
        .module
        .iter()
        .chain(&named.module)
        .any(|m| m == "tests")
        || test_modules
            .iter()
            .any(|test| source.module.starts_with(test))
}

/// The modules declared test-only in a file of their own:
/// `#[cfg(test)]` on the line before `mod name;`.
fn test_modules(sources: &[&Source]) -> Vec<Vec<String>> {
    let mut modules = Vec::new();
    for source in sources {
        let lines: Vec<&str> = source.text.lines().map(str::trim).collect();
        for pair in lines.windows(2) {
            if pair[0] == "#[cfg(test)]"
                && let Some(name) = pair[1]
                    .strip_prefix("mod ")
                    .and_then(|rest| rest.strip_suffix(';'))
            {
                let mut module = source.module.clone();
                module.push(name.to_owned());
                modules.push(module);
            }
        }
    }
    modules
}

/// Every arrow between the runner's rooms in production code. The root
/// declares and re-exports: its `pub use` items are no arrows.
fn room_arrows(files: &[(PathBuf, String)]) -> Arrows {
    let sources = sources(files);
    let runner: Vec<&Source> = sources
        .iter()
        .filter(|s| s.module.first().map(String::as_str) == Some("runner"))
        .collect();
    let modules: BTreeSet<Vec<String>> = runner.iter().map(|s| s.module.clone()).collect();
    let reexports = reexports(&runner);
    let test_modules = test_modules(&runner);
    let mut arrows = Arrows::new();
    for source in &runner {
        let Some(room) = room_of_module(&source.module) else {
            continue;
        };
        for named in named_paths(&source.text, &source.module, &source.children) {
            if in_tests(source, &named, &test_modules) || (room == "mod" && named.exported) {
                continue;
            }
            let Some(path) = resolve(&named, &source.children) else {
                continue;
            };
            let Some(used) = room_of_module(&module_named(&path, &modules, &reexports)) else {
                continue;
            };
            if used == room
                // A room's own parts: `prepare` runs its stages.
                || (room == "prepare" && used.starts_with("prepare::"))
            {
                continue;
            }
            arrows
                .entry(room.clone())
                .or_default()
                .entry(used)
                .or_insert_with(|| format!("{}:{}", source.file.display(), named.line()));
        }
    }
    arrows
}

/// A loop among the engine's rooms, as `a → b (file:line) → … → a`, if any.
fn engine_loop(arrows: &Arrows) -> Option<String> {
    let engine = |room: &str| RUNNER_ENGINE.contains(&room.split("::").next().unwrap_or(room));
    // Depth first; `path` is the rooms on the way, each with its arrow.
    fn visit(
        room: &str,
        arrows: &Arrows,
        engine: &dyn Fn(&str) -> bool,
        path: &mut Vec<(String, String)>,
        done: &mut BTreeSet<String>,
    ) -> Option<String> {
        if let Some(at) = path.iter().position(|(r, _)| r == room) {
            let mut words: Vec<String> = path[at..]
                .iter()
                .map(|(r, how)| format!("{r} ({how})"))
                .collect();
            words.push(room.to_owned());
            return Some(words.join(" → "));
        }
        if !done.insert(room.to_owned()) {
            return None;
        }
        for (used, at) in arrows.get(room).into_iter().flatten() {
            if !engine(used) {
                continue;
            }
            path.push((room.to_owned(), format!("{at}: uses {used}")));
            let found = visit(used, arrows, engine, path, done);
            path.pop();
            if found.is_some() {
                return found;
            }
        }
        None
    }
    let mut done = BTreeSet::new();
    for room in arrows.keys().filter(|room| engine(room)) {
        let mut path = Vec::new();
        if let Some(found) = visit(room, arrows, &engine, &mut path, &mut done) {
            return Some(found);
        }
    }
    None
}

/// Every arrow from a stage of `prepare/` to a later stage, or to the
/// `prepare` root that runs them all.
fn stage_violations(arrows: &Arrows) -> Vec<String> {
    let order = |room: &str| {
        room.strip_prefix("prepare::")
            .map(|stage| PREPARE_STAGES.iter().position(|s| *s == stage))
    };
    let mut violations = Vec::new();
    for (room, used) in arrows {
        let Some(own) = order(room) else {
            continue;
        };
        for (target, at) in used {
            let later = match (own, order(target)) {
                (_, None) if target == "prepare" => true,
                (Some(own), Some(Some(other))) => other >= own,
                (None, _) | (_, Some(None)) => true,
                _ => false,
            };
            if later {
                violations.push(format!(
                    "{at}: the prepare stage `{room}` uses `{target}`, which is not before it ({})",
                    PREPARE_STAGES.join(" → ")
                ));
            }
        }
    }
    violations
}

#[test]
fn the_runners_engine_rooms_form_no_loop() {
    let arrows = room_arrows(&crate_files());
    if let Some(found) = engine_loop(&arrows) {
        panic!("the runner's engine rooms use each other in a loop: {found}");
    }
}

#[test]
fn the_runners_errors_use_no_room() {
    let arrows = room_arrows(&crate_files());
    let used: Vec<String> = arrows
        .get("error")
        .into_iter()
        .flatten()
        .map(|(room, at)| format!("{at}: uses `{room}`"))
        .collect();
    assert!(
        used.is_empty(),
        "runner/error.rs uses rooms of the runner:\n{}",
        used.join("\n")
    );
}

#[test]
fn the_prepare_stages_point_only_backwards() {
    let arrows = room_arrows(&crate_files());
    let violations = stage_violations(&arrows);
    assert!(
        violations.is_empty(),
        "a prepare stage uses a later one:\n{}",
        violations.join("\n")
    );
}

#[test]
fn every_prepare_stage_is_listed_in_order() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/runner/prepare");
    let mut found: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        // The root, and the test-only fixture of the stages' unit tests.
        .filter(|path| {
            path.file_stem()
                .is_some_and(|stem| stem != "mod" && stem != "fixture")
        })
        .map(|path| path.file_stem().unwrap().to_string_lossy().into_owned())
        .collect();
    found.sort();
    let mut listed: Vec<String> = PREPARE_STAGES.iter().map(|s| (*s).to_owned()).collect();
    listed.sort();
    assert_eq!(found, listed, "src/runner/prepare/ against PREPARE_STAGES");
}

#[test]
fn paths_resolve_to_the_prepare_stages() {
    let arrows = room_arrows(&crate_files());
    // Named by a room outside `prepare/`, through its path or a re-export.
    let users: BTreeSet<&String> = arrows
        .values()
        .flat_map(|used| used.keys())
        .filter(|room| room.starts_with("prepare::"))
        .collect();
    for stage in ["prepare::workdir", "prepare::sandbox", "prepare::policy"] {
        assert!(
            users.contains(&stage.to_owned()),
            "no arrow into `{stage}` seen: {users:?}"
        );
    }
}

#[test]
fn a_planted_loop_of_engine_rooms_is_caught() {
    let files = fixture(&[
        (
            "runner/mod.rs",
            "mod prepare;\nmod workspace;\nmod state;\npub use workspace::TaskGit;\n",
        ),
        (
            "runner/workspace.rs",
            "use super::state::State;\npub struct TaskGit;\n",
        ),
        (
            "runner/state.rs",
            "fn f() {\n    let _ = super::TaskGit;\n}\n",
        ),
        ("runner/prepare/mod.rs", "mod workdir;\n"),
        (
            "runner/prepare/workdir.rs",
            "use super::super::state::State;\n",
        ),
    ]);
    let arrows = room_arrows(&files);
    assert_eq!(
        engine_loop(&arrows).as_deref(),
        Some(
            "state (runner/state.rs:2: uses workspace) → workspace (runner/workspace.rs:1: uses state) → state"
        )
    );
    // Without the arrow back, no loop.
    let files = fixture(&[
        ("runner/mod.rs", "mod workspace;\nmod state;\n"),
        ("runner/workspace.rs", "use super::state::State;\n"),
        (
            "runner/state.rs",
            "pub struct State;\n#[cfg(test)]\nmod tests {\n    use super::super::workspace::TaskGit;\n}\n",
        ),
    ]);
    assert_eq!(engine_loop(&room_arrows(&files)), None);
}

#[test]
fn a_planted_backwards_stage_is_caught() {
    let files = fixture(&[
        ("runner/mod.rs", "mod prepare;\n"),
        (
            "runner/prepare/mod.rs",
            "pub mod workdir;\npub mod sandbox;\npub mod policy;\npub use sandbox::SandboxPaths;\nuse self::policy::task_policy;\n",
        ),
        (
            "runner/prepare/workdir.rs",
            "fn f() {\n    let _ = super::SandboxPaths::default();\n}\n",
        ),
        (
            "runner/prepare/sandbox.rs",
            "use super::workdir::expand_home;\nuse crate::runner::prepare::policy::PolicyInputs;\n",
        ),
        (
            "runner/prepare/policy.rs",
            "use super::sandbox::sandbox_mode;\n",
        ),
    ]);
    let arrows = room_arrows(&files);
    assert_eq!(
        stage_violations(&arrows),
        [
            "runner/prepare/sandbox.rs:2: the prepare stage `prepare::sandbox` uses `prepare::policy`, which is not before it (workdir → worktree → sandbox → policy → provider → tools)",
            "runner/prepare/workdir.rs:2: the prepare stage `prepare::workdir` uses `prepare::sandbox`, which is not before it (workdir → worktree → sandbox → policy → provider → tools)",
        ]
    );
    // And a loop of stages is a loop of rooms too.
    assert!(engine_loop(&arrows).is_some());
}

/// Every engine room (or a part of one) declared `pub mod` or
/// `pub(crate) mod`: the runner's engine is private, so the compiler
/// keeps the CLI on the doors.
fn public_engine_rooms(files: &[(PathBuf, String)]) -> Vec<String> {
    let mut found = Vec::new();
    for source in sources(files) {
        let Some(room) = room_of_module(&source.module) else {
            continue;
        };
        let root = room == "mod";
        if !root && !RUNNER_ENGINE.contains(&room.split("::").next().unwrap_or(&room)) {
            continue;
        }
        for (index, line) in source.text.lines().enumerate() {
            let line = line.trim();
            let Some(rest) = line
                .strip_prefix("pub mod ")
                .or_else(|| line.strip_prefix("pub(crate) mod "))
            else {
                continue;
            };
            let name = rest.trim_end_matches([';', ' ', '{']);
            if !root || RUNNER_ENGINE.contains(&name) {
                found.push(format!(
                    "{}:{}: `{name}` is engine and `{line}`",
                    source.file.display(),
                    index + 1
                ));
            }
        }
    }
    found
}

#[test]
fn the_runners_engine_rooms_are_private() {
    let found = public_engine_rooms(&crate_files());
    assert!(
        found.is_empty(),
        "engine rooms the CLI could reach past the doors:\n{}",
        found.join("\n")
    );
}

#[test]
fn a_planted_public_engine_room_is_caught() {
    let files = fixture(&[
        (
            "runner/mod.rs",
            "pub mod front;\nmod prepare;\npub mod session;\npub(crate) mod state;\n",
        ),
        ("runner/front.rs", ""),
        ("runner/session.rs", ""),
        ("runner/state.rs", ""),
        (
            "runner/prepare/mod.rs",
            "pub(super) mod workdir;\npub mod sandbox;\n",
        ),
        ("runner/prepare/workdir.rs", ""),
        ("runner/prepare/sandbox.rs", ""),
    ]);
    assert_eq!(
        public_engine_rooms(&files),
        [
            "runner/mod.rs:3: `session` is engine and `pub mod session;`",
            "runner/mod.rs:4: `state` is engine and `pub(crate) mod state;`",
            "runner/prepare/mod.rs:2: `sandbox` is engine and `pub mod sandbox;`",
        ]
    );
}
