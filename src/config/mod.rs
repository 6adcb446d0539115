//! L4 config: files → `YBS_*` → flags, resolved once into [`Config`];
//! [`Config::task_settings`] adds a task's own fields below them (docs/cli.md,
//! docs/configuration.md). For keys that bound trust or spend the operator's values are
//! ceilings the repository may only narrow ([`Config::check_task`] and
//! `ceiling.rs`, docs/security.md S5).
//!
//! May use `core`, `task`, `policy`, and types of `llm` and `tools`.

mod ceiling;
mod env;
mod file;
mod layer;
mod load;
mod settings;

pub use env::{EnvError, VARIABLES};
pub use layer::Combine;
pub use load::{
    ConfigError, Overrides, SYSTEM_CONFIG, Sources, load, load_policy_file, parse_config,
    process_cwd, process_environ,
};
pub use settings::{
    AgentSettings, BuiltinToolSettings, Config, ContextSettings, ExternalToolConfig, GitAuthor,
    GitSettings, LlmSettings, Origin, SafetySettings, TaskSettings, ToolsSettings, defaults,
};

#[cfg(test)]
mod tests;
