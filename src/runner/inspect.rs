//! The commands that look without running, on a [`Session`] whose
//! runtime never starts: `ybs validate` (every error of the task files,
//! the config and the policies, with no model and no side effects) and
//! `ybs policy explain` (the verdict for one call and the rule that made
//! it). See docs/cli.md and docs/policy.md.

use std::path::{Path, PathBuf};

use super::load::Loaded;
use super::options::{Entry, RunFlags, RunOptions};
use super::prepare::policy::{EXAMPLES_HINT, build_policy};
use super::prepare::provider::missing_model;
use super::prepare::sandbox::sandbox_mode;
use super::prepare::workdir::task_workdir;
use super::session::{Session, Threads};
use super::{PolicyInputs, PrepareError, RunError, protected_files, task_policy};
use crate::policy::{self, PolicySpec, SandboxMode};
use crate::report::Console;
use crate::task::TaskSpec;

/// What `ybs validate` found valid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Validated {
    pub files: usize,
    pub tasks: usize,
}

impl std::fmt::Display for Validated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        write!(
            f,
            "ok: {} file{}, {} task{} valid",
            self.files,
            plural(self.files),
            self.tasks,
            plural(self.tasks)
        )
    }
}

/// Opens the session of `ybs validate` or `ybs policy explain`: `flags`
/// carry `--policy`, and for validate `--filter` and `--cassette`. Its
/// runtime is never started, and nothing is written.
pub fn open(
    loaded: Loaded,
    flags: RunFlags,
    console: &mut dyn Console,
) -> Result<Session, RunError> {
    let options = RunOptions::local(flags, &loaded);
    Session::open(loaded, options, Entry::default(), Threads::Current, console)
}

impl Session {
    /// `ybs validate`: checks the workdir, the policy and the model of
    /// every task `--filter` selects (the files themselves were checked by
    /// [`super::load`]); every problem is in the error.
    pub fn validate(&self) -> Result<Validated, RunError> {
        let mut errors: Vec<PrepareError> = Vec::new();
        let selected = super::select(&self.files, &self.options.flags.filter)?;
        for file in &self.files {
            for task in file.tasks.iter().filter(|task| selected.contains(task)) {
                self.validate_task(&file.path, task, &mut errors);
            }
        }
        if !errors.is_empty() {
            return Err(RunError::Prepare(errors));
        }
        Ok(Validated {
            files: self.files.len(),
            tasks: selected.len(),
        })
    }

    /// Every problem of `task`, of the file at `path`, into `errors`.
    fn validate_task(&self, path: &Path, task: &TaskSpec, errors: &mut Vec<PrepareError>) {
        let (context, flags) = (&self.context, &self.options.flags);
        let policy_file = flags.policy_file.as_deref();
        // What `ybs run` refuses when it prepares the task.
        if let Some((message, hint)) = missing_model(
            &context.config,
            &context.cwd,
            task,
            flags.cassette.as_deref(),
        ) {
            errors.push(PrepareError {
                file: path.to_owned(),
                span: None,
                task: task.id.clone(),
                message,
                hint: Some(hint),
            });
        }
        // The workdir as `ybs run` refuses it before its first task: one
        // that does not exist or is no directory, or one outside the task
        // file's repository; in the same words.
        if let Err(error) =
            task_workdir(&context.config, &context.cwd, context.home.as_deref(), task)
        {
            errors.push(PrepareError {
                file: path.to_owned(),
                ..error
            });
            return;
        }
        let workdir = self.workdir(Some(task));
        // A required external tool nothing finds, which `ybs run` ends
        // the task with (`tool_unavailable`).
        for (message, span) in super::tools::required_not_found(context, task) {
            errors.push(PrepareError {
                file: path.to_owned(),
                span: Some(span),
                task: task.id.clone(),
                message,
                hint: Some(
                    "install it, point `tools.search_paths` or `tools.external` at it, or drop `required: true`"
                        .to_owned(),
                ),
            });
        }
        let mode = sandbox_mode(&context.config);
        match self.policy_of(Some(task), &workdir, mode, build_policy) {
            Err(error) => errors.push(PrepareError {
                file: path.to_owned(),
                span: None,
                task: task.id.clone(),
                message: error.to_string(),
                hint: error.hint_text().map(str::to_owned),
            }),
            // Each failing example on its own line, at the place it is
            // written (the task file, else the `--policy` file).
            Ok(policy) => {
                for failure in policy.check_examples(policy.examples()) {
                    let (file, span) =
                        example_place(&context.cwd, path, policy_file, &failure.call);
                    errors.push(PrepareError {
                        file,
                        span,
                        task: task.id.clone(),
                        message: format!("policy example fails: {failure}"),
                        hint: Some(EXAMPLES_HINT.to_owned()),
                    });
                }
            }
        }
    }

    /// `ybs policy explain`: the explanation of each call under the
    /// policy of `task_id` (or of the only task loaded, or of the
    /// operator's policy alone when no task file was given); with `json`,
    /// one JSON object a line (docs/policy.md). `sandbox`: the mode to
    /// assume (`full`, `reduced`, `none`) and the flag that said so;
    /// `None` assumes what the probe finds.
    pub fn explain(
        &self,
        task_id: Option<&str>,
        calls: &[String],
        json: bool,
        sandbox: Option<(String, String)>,
    ) -> Result<String, RunError> {
        let tasks: Vec<&TaskSpec> = self.files.iter().flat_map(|f| f.tasks.iter()).collect();
        let task = match (task_id, tasks.as_slice()) {
            (None, []) => None,
            (None, [only]) => Some(*only),
            (None, _) => {
                return Err(RunError::usage(
                    "the task file holds several tasks",
                    Some("name one: --task FILE#TASK-ID"),
                ));
            }
            (Some(id), tasks) => match tasks.iter().find(|t| t.id == id) {
                Some(task) => Some(*task),
                None => {
                    let known: Vec<&str> = tasks.iter().map(|t| t.id.as_str()).collect();
                    return Err(RunError::usage(
                        format!("no task `{id}` in the file"),
                        Some(&format!("tasks: {}", known.join(", "))),
                    ));
                }
            },
        };
        let workdir = self.workdir(task);
        let sandbox = sandbox
            .map(|(mode, by)| match SandboxMode::parse(&mode) {
                Some(mode) => Ok((mode, by)),
                None => Err(RunError::usage(
                    format!("unknown sandbox mode `{mode}`"),
                    Some("give full, reduced or none"),
                )),
            })
            .transpose()?;
        let (mode, by) = sandbox.unwrap_or_else(|| {
            let mode = sandbox_mode(&self.context.config);
            let by = if self.context.config.safety.sandbox_enabled {
                "probed"
            } else {
                "safety.sandbox_enabled: false"
            };
            (mode, by.to_owned())
        });
        let policy = self
            .policy_of(task, &workdir, mode, task_policy)
            .map_err(|error| RunError::usage(error.to_string(), error.hint_text()))?;
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let explained = policy::explain(&policy, call).map(|mut explanation| {
                explanation.sandbox.by.clone_from(&by);
                explanation
            });
            match explained {
                Ok(explanation) if json => out.push(
                    serde_json::to_string(&explanation)
                        .map_err(|error| RunError::usage(error.to_string(), None))?,
                ),
                Ok(explanation) => out.push(explanation.to_string().trim_end().to_owned()),
                Err(error) => {
                    return Err(RunError::usage(
                        error.to_string(),
                        Some(
                            "write the call as tool(argument), e.g. 'run_shell(cargo test)' or 'edit_file(src/lib.rs)'",
                        ),
                    ));
                }
            }
        }
        // Without a task the task's side is an empty policy (every call
        // denied by its default): say so, or `why` reads as if the
        // operator's rules did not count.
        if task.is_none() && !json && self.context.operator_policy.is_some() {
            out.push(
                "note: no task given: the task's side is an empty policy, which denies every \
                 call; the operator's policy only bounds a task's. Decide with a task's policy: \
                 --task FILE#ID"
                    .to_owned(),
            );
        }
        Ok(out.join("\n"))
    }

    /// The directory `task` names, as given (the current one without a task).
    fn workdir(&self, task: Option<&TaskSpec>) -> PathBuf {
        self.context.cwd.join(
            task.and_then(|t| t.workdir.as_deref())
                .unwrap_or(Path::new(".")),
        )
    }

    /// `build` given the policy inputs of `task` as `ybs run` would
    /// gather them (the operator's policy alone without a task):
    /// `task_policy` builds the policy as a run would, `build_policy`
    /// without checking its examples.
    fn policy_of<T>(
        &self,
        task: Option<&TaskSpec>,
        workdir: &Path,
        sandbox: SandboxMode,
        build: impl FnOnce(&PolicyInputs<'_>) -> T,
    ) -> T {
        let context = &self.context;
        let policy_file = self.options.flags.policy_file.as_deref();
        let empty: Vec<PolicySpec> = Vec::new();
        build(&PolicyInputs {
            config: &context.config,
            home: context.home.as_deref(),
            environ: &context.environ,
            operator: context.operator_policy.as_ref(),
            workdir,
            protected: task.map_or_else(Vec::new, |t| {
                protected_files(&context.cwd, &t.file, policy_file, &context.environ)
            }),
            layers: task.map_or(&empty, |t| &t.policy),
            sandbox,
        })
    }
}

/// Where the example `call` is written: the first line of the task file
/// holding it (quoted or not), else of the `--policy` file; the task file
/// with no position when neither holds it verbatim.
fn example_place(
    cwd: &Path,
    task_file: &Path,
    policy_file: Option<&Path>,
    call: &str,
) -> (PathBuf, Option<crate::core::span::Span>) {
    let candidates = std::iter::once(task_file).chain(policy_file);
    for file in candidates {
        let Ok(text) = std::fs::read_to_string(cwd.join(file)) else {
            continue;
        };
        for (number, line) in text.lines().enumerate() {
            // After `#`, a comment; an example lies after a `[`, `-`, `,` or quote.
            let code = line.split(" #").next().unwrap_or(line);
            if let Some(at) = code.find(call) {
                let before = code[..at].trim_end();
                if before.ends_with(['[', '-', ',', '"', '\'', ':']) {
                    let column = code[..at].chars().count() + 1;
                    let column = if before.ends_with(['"', '\'']) {
                        column - 1
                    } else {
                        column
                    };
                    let line = u32::try_from(number + 1).unwrap_or(u32::MAX);
                    let column = u32::try_from(column).unwrap_or(u32::MAX);
                    return (
                        file.to_owned(),
                        Some(crate::core::span::Span::new(line, column)),
                    );
                }
            }
        }
    }
    (task_file.to_owned(), None)
}
