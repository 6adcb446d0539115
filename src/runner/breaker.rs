//! When the batch stops starting tasks (docs/ci.md#when-the-batch-stops):
//! the quota breaker, the run's budget (`--max-cost-usd`) and an
//! interrupt. A task the batch does not start is still reported: its
//! manifest (`task.started`) and straight after a `task.finished` with
//! status `skipped` and the reason, so JUnit (`<skipped>`), the summary,
//! the events and a later `ybs report merge` list every selected task.

use crate::agent::Emitter;
use crate::core::event::{Event, EventSink, TaskFinished, TaskStarted};
use crate::core::{Cost, Reason, Status, Usage};

use super::{PreparedTask, RunContext, TaskResult};

/// How much of the tripping task's message a skipped task repeats.
const CAUSE_CHARS: usize = 300;

/// Decides, task by task, whether the batch still starts it.
#[derive(Debug, Default)]
pub(crate) struct Gate {
    /// `--max-cost-usd`: the run's budget in USD.
    max_cost_usd: Option<f64>,
    /// The breakers that tripped, one per provider and endpoint.
    tripped: Vec<Trip>,
}

/// A quota or authentication error that ended a task: every task not
/// yet started against the same provider and endpoint is skipped.
#[derive(Debug)]
struct Trip {
    key: ProviderKey,
    task: String,
    reason: Reason,
    cause: String,
}

/// Which account a task spends: its provider and endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ProviderKey {
    provider: String,
    endpoint: Option<String>,
}

impl ProviderKey {
    fn of(task: &PreparedTask) -> Self {
        Self {
            provider: task.settings.provider.clone(),
            endpoint: task.settings.endpoint.clone(),
        }
    }

    /// `openai`, or `openai at http://…`.
    fn describe(&self) -> String {
        match &self.endpoint {
            Some(endpoint) => format!("{} at {endpoint}", self.provider),
            None => self.provider.clone(),
        }
    }
}

impl Gate {
    pub(crate) fn new(max_cost_usd: Option<f64>) -> Self {
        Self {
            max_cost_usd,
            tripped: Vec::new(),
        }
    }

    /// A task ended: a quota or authentication error trips the breaker
    /// of its provider and endpoint (the first one only: it names the
    /// cause).
    pub(crate) fn record(&mut self, task: &PreparedTask, result: &TaskResult) {
        if result.status != Status::Error || !result.reason.stops_batch() {
            return;
        }
        let key = ProviderKey::of(task);
        if self.tripped.iter().any(|trip| trip.key == key) {
            return;
        }
        let first = result
            .message
            .as_deref()
            .and_then(|message| message.lines().next())
            .unwrap_or_default()
            .trim();
        let cause = match first.char_indices().nth(CAUSE_CHARS) {
            Some((at, _)) => format!("{}…", &first[..at]),
            None => first.to_owned(),
        };
        self.tripped.push(Trip {
            key,
            task: result.id.clone(),
            reason: result.reason,
            cause,
        });
    }

    /// Why `task` must not start, if it must not: its provider's breaker
    /// tripped, or the run has spent `spent_usd` of a budget it reached.
    pub(crate) fn stop(&self, task: &PreparedTask, spent_usd: f64) -> Option<(Reason, String)> {
        let key = ProviderKey::of(task);
        if let Some(trip) = self.tripped.iter().find(|trip| trip.key == key) {
            let cause = if trip.cause.is_empty() {
                String::new()
            } else {
                format!(": {}", trip.cause)
            };
            return Some((
                trip.reason,
                format!(
                    "not started: task `{}` ended with {} from {}{cause}; the batch stopped starting tasks against it",
                    trip.task,
                    trip.reason,
                    key.describe()
                ),
            ));
        }
        let budget = self.max_cost_usd?;
        (spent_usd >= budget).then(|| {
            (
                Reason::CostBudget,
                format!(
                    "not started: the run has spent {} of its budget of ${budget} (--max-cost-usd)",
                    Cost::Usd(spent_usd)
                ),
            )
        })
    }
}

/// Reports `task` as never started: its manifest, then `task.finished`
/// with status `skipped`, `reason` and `message`.
pub(crate) fn skip(
    run: &RunContext,
    task: &PreparedTask,
    reason: Reason,
    message: String,
    sink: &mut dyn EventSink,
) -> TaskResult {
    let spec = &task.task;
    let mut emitter = Emitter::new(&spec.id, sink);
    emitter.emit(Event::TaskStarted(TaskStarted {
        file: spec.file.display().to_string(),
        suite: spec.suite.clone(),
        run_id: run.run_id.clone(),
        ybs_version: env!("CARGO_PKG_VERSION").to_owned(),
        provider: task.settings.provider.clone(),
        model: task.settings.model.clone(),
        temperature: task.settings.temperature,
        seed: None,
        workdir: task.tool_ctx.workdir.display().to_string(),
        policy_hash: task.policy_hash.clone(),
        base_commit: None,
        // Never built: the task's tools were not started.
        system_prompt: String::new(),
        tools: Vec::new(),
        dry_run: run.dry_run,
        sandbox: Some(Box::new(task.sandbox.clone())),
        context_files: Vec::new(),
        shard: run.shard.map(|shard| {
            crate::core::shard::ShardRecord::of(
                shard,
                run.shard_source.as_ref(),
                run.shard_split.as_deref(),
            )
        }),
    }));
    emitter.emit(Event::TaskFinished(TaskFinished {
        status: Status::Skipped,
        reason,
        message: Some(message.clone()),
        expect: spec.expect.as_str().to_owned(),
        iterations: 0,
        usage: Usage::default(),
        cost: Cost::Usd(0.0),
        duration_ms: 0,
    }));
    TaskResult {
        id: spec.id.clone(),
        status: Status::Skipped,
        reason,
        message: Some(message),
    }
}
