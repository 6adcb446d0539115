//! Where ybs keeps and looks for things: its own directories (the state
//! directory with the resume keys, the cache directory with tool schemas
//! and metrics) and where external tools are looked for.

use std::path::{Path, PathBuf};

use crate::config::ToolsSettings;
use crate::core::Environ;
use crate::tools::external::cache;
use crate::tools::external::{Declared, DiscoverySettings, Source};

/// ybs's own directories, hidden from every confined program and blocked
/// for the built-in file tools whatever `safety.blocked_paths` says
/// (docs/sandbox.md): the state directory (`$XDG_STATE_HOME/ybs`, else
/// `~/.local/state/ybs`: the resume keys) and the cache directory
/// (`$XDG_CACHE_HOME/ybs`, else `~/.cache/ybs`: tool schemas, metrics).
pub fn own_dirs(home: Option<&Path>, environ: &Environ) -> Vec<PathBuf> {
    let home = home.map(|home| home.display().to_string());
    let env = |name: &str| match name {
        "HOME" => home.clone(),
        _ => environ.var(name),
    };
    super::state::key_dir(&env)
        .and_then(|keys| keys.parent().map(Path::to_path_buf))
        .into_iter()
        .chain(cache_dir(home.as_deref().map(Path::new), environ))
        .collect()
}

/// ybs's cache directory: `$XDG_CACHE_HOME/ybs` or `~/.cache/ybs`.
pub fn cache_dir(home: Option<&Path>, environ: &Environ) -> Option<PathBuf> {
    let xdg = environ.var_os("XDG_CACHE_HOME").map(PathBuf::from);
    cache::cache_dir(xdg.as_deref(), home)
}

/// Where external tools are looked for, from the `tools` settings, the
/// directory ybs runs in and the home directory.
pub fn discovery_settings(
    tools: &ToolsSettings,
    cwd: &Path,
    (home, environ): (Option<&Path>, &Environ),
) -> DiscoverySettings {
    DiscoverySettings {
        cwd: cwd.to_owned(),
        home: home.map(Path::to_owned),
        search_paths: tools.search_paths.clone(),
        declared: tools
            .external
            .iter()
            .map(|tool| Declared {
                name: tool.name.clone(),
                path: tool.path.clone(),
                description: tool.description.clone(),
                parameters: tool.parameters.clone(),
                timeout: tool.timeout,
                enabled: tool.enabled,
                source: if tool.from_repository {
                    Source::RepositoryConfig
                } else {
                    Source::Config
                },
            })
            .collect(),
        cache_dir: cache_dir(home, environ),
        sandbox: None,
    }
}
