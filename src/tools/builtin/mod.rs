//! The six built-in tools (docs/tools.md).
//!
//! Each is a unit struct with a static spec. Schemas are kept terse on
//! purpose: the system prompt plus all six must stay under 1,500 tokens
//! (docs/performance.md), so descriptions say only what the names do not.

mod args;
mod edit_file;
mod list_files;
mod missing;
mod path_tool;
mod read_file;
mod run_shell;
mod search_files;
mod walk;
mod write_file;

use std::sync::Arc;

use super::Tool;

pub use edit_file::EditFile;
pub use list_files::ListFiles;
pub use read_file::ReadFile;
pub use run_shell::RunShell;
pub use search_files::SearchFiles;
pub use write_file::WriteFile;

/// Builds one built-in tool.
type Make = fn() -> Arc<dyn Tool>;

/// The built-in tools, in the order offered: the one list of their names
/// (`tools.builtin` in tasks and config, the task schema).
const TOOLS: &[(&str, Make)] = &[
    ("read_file", || Arc::new(ReadFile)),
    ("write_file", || Arc::new(WriteFile)),
    ("edit_file", || Arc::new(EditFile)),
    ("list_files", || Arc::new(ListFiles)),
    ("search_files", || Arc::new(SearchFiles)),
    ("run_shell", || Arc::new(RunShell)),
];

/// Names of the built-in tools, in the order offered.
pub const NAMES: [&str; TOOLS.len()] = {
    let mut names = [""; TOOLS.len()];
    let mut index = 0;
    while index < TOOLS.len() {
        names[index] = TOOLS[index].0;
        index += 1;
    }
    names
};

/// The built-in tool called `name`.
pub fn get(name: &str) -> Option<Arc<dyn Tool>> {
    TOOLS
        .iter()
        .find(|(known, _)| *known == name)
        .map(|(_, make)| make())
}

/// All built-in tools, in the order offered.
pub fn all() -> Vec<Arc<dyn Tool>> {
    NAMES.iter().filter_map(|name| get(name)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_has_its_tool() {
        let tools = all();
        assert_eq!(tools.len(), NAMES.len());
        for (tool, name) in tools.iter().zip(NAMES) {
            assert_eq!(tool.spec().name, *name);
            assert_eq!(tool.spec().parameters["type"], "object");
        }
        assert!(get("nope").is_none());
        let mutating: Vec<bool> = tools.iter().map(|tool| tool.is_mutating()).collect();
        assert_eq!(mutating, [false, true, true, false, false, true]);
    }

    /// docs/performance.md: system prompt + the six schemas under 1,500 tokens; the
    /// schemas get at most ~900 tokens (≈ 3,600 characters of JSON).
    #[test]
    fn schemas_stay_small() {
        let specs: Vec<_> = all().iter().map(|tool| tool.spec().clone()).collect();
        let size = serde_json::to_string(&specs).unwrap().len();
        assert!(size < 3600, "the six tool specs take {size} characters");
    }
}
