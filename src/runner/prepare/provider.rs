//! Stage 5 of task assembly: the provider the task's settings name, a
//! cassette's replay, or a recorder around it.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::config::{Config, Origin, TaskSettings};
use crate::llm::cassette::{Cassette, CassetteError};
use crate::llm::failing::Failing;
use crate::llm::record::Recorder;
use crate::llm::replay::Replay;
use crate::llm::{self, Provider, ProviderConfig, ProviderError};
use crate::task::TaskSpec;

use super::super::RunContext;
use super::super::error::SetupError;

/// Opened cassettes, shared by the tasks that replay them.
#[derive(Default)]
pub struct Cassettes {
    open: HashMap<PathBuf, Arc<Cassette>>,
}

impl Cassettes {
    fn get(&mut self, path: &Path) -> Result<Arc<Cassette>, CassetteError> {
        if let Some(cassette) = self.open.get(path) {
            return Ok(cassette.clone());
        }
        let cassette = Cassette::open(path)?;
        self.open.insert(path.to_owned(), cassette.clone());
        Ok(cassette)
    }

    /// The cassette `path` beside `task_file`, opened as every file a task
    /// file names is: beneath its repository, through no link, never a
    /// blocked path (docs/security.md S8).
    fn get_beside(
        &mut self,
        run: &RunContext,
        task_file: &Path,
        path: &Path,
    ) -> Result<Arc<Cassette>, CassetteError> {
        if let Some(cassette) = self.open.get(path) {
            return Ok(cassette.clone());
        }
        let named = crate::core::named::NamedFiles::new(
            &run.config.safety.blocked_paths,
            run.home.as_deref(),
        );
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        let text = named
            .read_text(&run.cwd.join(task_file), &name)
            .map_err(|source| CassetteError::Named {
                path: path.to_owned(),
                source,
            })?;
        let cassette = Cassette::from_text(path, &text)?;
        self.open.insert(path.to_owned(), cassette.clone());
        Ok(cassette)
    }
}

/// The provider `settings` name (the replay provider reads the cassette).
pub fn build_provider(
    run: &RunContext,
    cassettes: &mut Cassettes,
    task: &TaskSpec,
    settings: &TaskSettings,
) -> Result<Box<dyn Provider>, SetupError> {
    if settings.provider == "replay" {
        let cassette = match &run.cassette {
            Some(path) => cassettes.get(path),
            None => {
                // In `ybs validate`'s words: "no model to run with" unless
                // the replay provider was chosen.
                let path = sibling_cassette(&run.cwd, &task.file).ok_or_else(|| {
                    let (message, _) = missing_model(
                        &run.config,
                        &run.cwd,
                        task,
                        None,
                    )
                    .unwrap_or_else(|| {
                        (
                            format!(
                                "provider `replay` needs a cassette, and `{}` has none beside it",
                                task.file.display()
                            ),
                            String::new(),
                        )
                    });
                    SetupError::Provider {
                        message,
                        hint: Some(NO_MODEL_HINT),
                    }
                })?;
                cassettes.get_beside(run, &task.file, &path)
            }
        };
        let cassette = cassette.map_err(|error| SetupError::Provider {
            message: error.to_string(),
            hint: None,
        })?;
        return Ok(Box::new(Replay::new(cassette, task.id.clone())));
    }
    let mut config = ProviderConfig::new(settings.provider.clone(), settings.model.clone());
    config.endpoint = settings.endpoint.clone();
    config.text_tool_calls = settings.text_tool_calls;
    config.streaming = settings.stream;
    config.request_timeout = settings.llm_timeout;
    config.idle_timeout = settings.llm_idle_timeout;
    config.total_timeout = settings.llm_total_timeout;
    config.max_response_bytes = run.config.llm.max_response_bytes;
    config.prompt_cache = llm::PromptCache {
        enabled: run.config.llm.prompt_cache,
        one_hour: run.config.llm.prompt_cache_1h,
        key: Some(llm::PromptCache::task_key(
            task.file.strip_prefix(&run.cwd).unwrap_or(&task.file),
            &task.id,
        )),
        key_anywhere: run.config.llm.prompt_cache_key,
    };
    // docs/security.md S5: an endpoint chosen by the repository (task file or
    // ./.ybs.json) never receives the operator's key.
    config.endpoint_from_repository = matches!(
        settings.endpoint_origin,
        Origin::TaskFile | Origin::Repository
    );
    let env = |name: &str| run.environ.var(name);
    let provider = match llm::build(&config, &env) {
        Ok(provider) => provider,
        Err(
            error @ (ProviderError::MissingKey { .. }
            | ProviderError::KeyWithheld { .. }
            | ProviderError::Auth { .. }),
        ) => Box::new(Failing::new(settings.provider.clone(), error)),
        Err(error) => {
            return Err(SetupError::Provider {
                message: error.to_string(),
                hint: None,
            });
        }
    };
    Ok(match &run.recorder {
        Some(writer) => Box::new(Recorder::new(provider, writer.clone(), task.id.clone())),
        None => provider,
    })
}

/// Why `task` has no model to run with, when that is so: its provider is
/// `replay` (the built-in default when nothing names one) and there is no
/// cassette (`--cassette`, config `cassette`, or `<stem>.cassette.json`
/// beside its file). The message and its hint.
pub fn missing_model(
    config: &Config,
    cwd: &Path,
    task: &TaskSpec,
    cassette: Option<&Path>,
) -> Option<(String, String)> {
    let settings = config.task_settings(task);
    if settings.provider != "replay"
        || cassette.is_some()
        || config.cassette.is_some()
        || sibling_cassette(cwd, &task.file).is_some()
    {
        return None;
    }
    let chosen = task.llm.provider.is_some() || config.provider_override().is_some();
    let message = if chosen {
        format!(
            "provider `replay` needs a cassette, and `{}` has none beside it",
            task.file.display()
        )
    } else {
        "no model to run with: no provider is set (by `--provider`, `YBS_PROVIDER`, \
         the config's `llm.provider` or the task's `provider:`)"
            .to_owned()
    };
    Some((message, NO_MODEL_HINT.to_owned()))
}

/// The hint of [`missing_model`], in `ybs run` and `ybs validate` alike.
pub const NO_MODEL_HINT: &str = "pass --provider openai|anthropic|ollama --model NAME (or set \
     `llm.provider` and `llm.model` in ~/.config/ybs/config.json); to answer from a recording, \
     pass --cassette FILE or put <task-file-stem>.cassette.json beside the task file";

/// `tasks/x.yaml` → `tasks/x.cassette.json`, if there is an entry of
/// that name (a link there is refused when it is opened, not skipped).
pub(super) fn sibling_cassette(cwd: &Path, task_file: &Path) -> Option<PathBuf> {
    let stem = task_file.file_stem()?.to_string_lossy().to_string();
    let path = cwd
        .join(task_file)
        .with_file_name(format!("{stem}.cassette.json"));
    path.symlink_metadata().is_ok().then_some(path)
}

/// The note that a config file or a `YBS_*` variable replaced the
/// provider or model the task file pins: a `hint: ` on the console for the
/// first such task of the run, in every such task's transcript.
pub(super) fn pin_notes(run: &RunContext, task: &TaskSpec) -> Vec<String> {
    let Some(replaced) = run.config.replaced_pins(task) else {
        return Vec::new();
    };
    let first = !run
        .pins_noted
        .swap(true, std::sync::atomic::Ordering::Relaxed);
    let prefix = if first { crate::core::event::HINT } else { "" };
    vec![format!("{prefix}{replaced}")]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::prepare::fixture::{Site, TASK_FILE};

    #[test]
    fn no_provider_and_no_cassette_is_no_model_to_run_with() {
        let site = Site::new();
        let task = site.task("id: t\nprompt: p\n");
        let (message, hint) = missing_model(&site.run.config, &site.repo, &task, None).unwrap();
        assert!(message.starts_with("no model to run with: "), "{message}");
        assert_eq!(hint, NO_MODEL_HINT);
        let settings = site.run.config.task_settings(&task);
        let Err(error) = build_provider(&site.run, &mut Cassettes::default(), &task, &settings)
        else {
            panic!("a provider without a model");
        };
        assert_eq!(error.to_string(), message);
        assert_eq!(error.hint_text(), Some(NO_MODEL_HINT));
        // `--cassette` answers.
        let cassette = site.repo.join("run.cassette.json");
        assert_eq!(
            missing_model(&site.run.config, &site.repo, &task, Some(&cassette)),
            None
        );
    }

    #[test]
    fn a_cassette_beside_the_task_file_is_found_by_its_stem() {
        let site = Site::new();
        let task = site.task("id: t\nprompt: p\nprovider: replay\n");
        assert_eq!(sibling_cassette(&site.repo, Path::new(TASK_FILE)), None);
        let (message, _) = missing_model(&site.run.config, &site.repo, &task, None).unwrap();
        assert_eq!(
            message,
            format!("provider `replay` needs a cassette, and `{TASK_FILE}` has none beside it")
        );
        let beside = site.repo.join("tasks/t.cassette.json");
        std::fs::write(&beside, "not json").unwrap();
        assert_eq!(
            sibling_cassette(&site.repo, Path::new(TASK_FILE)),
            Some(beside)
        );
        assert_eq!(
            missing_model(&site.run.config, &site.repo, &task, None),
            None
        );
        // Opened when the provider is built: a cassette that does not
        // parse is the provider's error.
        let settings = site.run.config.task_settings(&task);
        let Err(error) = build_provider(&site.run, &mut Cassettes::default(), &task, &settings)
        else {
            panic!("a cassette that does not parse replayed");
        };
        assert!(
            matches!(error, SetupError::Provider { hint: None, .. }),
            "{error:?}"
        );
    }
}
