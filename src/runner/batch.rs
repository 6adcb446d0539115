//! One run's batch of prepared tasks: up to `--jobs` at once, the quota
//! breaker and `--max-cost-usd` before each start, interrupts, and the
//! outputs at the end. `ybs run` and `ybs resume` both come through
//! [`execute`].

use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;

use super::lazy::Feed;
use super::parallel::{interrupted_worktree, shares_workdir};
use super::{PreparedTask, RedactingSink, RunContext, RunReport, TaskResult};
use super::{breaker, discard, pause, task_run};
use crate::agent::Emitter;
use crate::core::event::{Event, EventRecord, EventSink, LlmResponse, TaskFinished};
use crate::core::{Cost, Reason, Redactor, Status, Usage};
use crate::report;

/// Runs the prepared tasks, up to `run.jobs` at once, writing every
/// output. SIGINT/SIGTERM stop every running task (each gets
/// `task.finished` with reason `interrupted`); outputs are still written.
///
/// Before a task starts, [`breaker::Gate`] may stop it: a quota or
/// authentication error that ended an earlier task against the same
/// provider, or `--max-cost-usd` reached. A task not started (that way,
/// or because of an interrupt) is reported as `skipped`, with the reason
/// (docs/ci.md#when-the-batch-stops). Under `--record`, each task's own
/// interactions are written to `OUT/<task>/cassette.json` at the end.
///
/// Tasks start in their order, so the reports list them as with
/// `--jobs 1`. All of them are polled from this one future and emit
/// through one [`RedactingSink`]; a task's events stay in order. A task
/// that is not in its own worktree waits while an earlier task runs in
/// its workdir (or one containing or inside it): two tasks never share
/// a directory at the same time.
///
/// Outputs go through `outputs`, opened before: at the end of each task
/// and of the run ybs checks that its files are still the ones it wrote
/// (see [`report::OutDir::check`]). What it finds is reported on the
/// console, in the transcript (a note) and the summary, and fails the
/// task (reason `output_tampered`) that would otherwise pass.
///
/// `ybs resume` comes in here too, with [`pause::Resuming`]: each
/// prepared task goes on from its state, its transcript and report primed
/// with its earlier halves (and the run's other tasks as they ended);
/// spans are exported for the resumed halves only, and a task that is
/// answered spends its state.
///
/// A task checked with a deferred worktree (`--jobs N`, N > 1) takes it
/// from `feed` once its slot is free, and runs in it.
pub async fn execute(
    run: &RunContext,
    (prepared, feed): (&[PreparedTask], Option<&Feed>),
    resuming: Option<pause::Resuming<'_>>,
    paths: &report::OutputLayout,
    outputs: &report::OpenOutputs,
    redactor: Redactor,
    console: &mut dyn EventSink,
) -> RunReport {
    let mut report = RunReport::default();
    let out = &outputs.out;
    let (mut sinks, resumed) = open_sinks(run, prepared, resuming, (paths, outputs), &mut report);
    let sink = Mutex::new(RedactingSink::new(redactor, vec![&mut sinks, console]));
    // What each task has done so far, read from its events: an interrupt
    // drops the task, and its `task.finished` still reports this.
    // A resumed task's earlier halves count too.
    let progress: Vec<Mutex<Progress>> = (0..prepared.len())
        .map(|index| Mutex::new(Progress::carried(resumed.get(index))))
        .collect();
    // The tasks as they run: a deferred one's, made when its slot came.
    let ready: Vec<OnceLock<PreparedTask>> = prepared.iter().map(|_| OnceLock::new()).collect();
    let mut batch = Batch::new(run, prepared, feed, &ready);
    let mut running = FuturesUnordered::new();
    let mut interrupt = Box::pin(interrupted());
    loop {
        while let Some(index) = batch.next_start(&progress, &sink) {
            let item = resumed.get(index);
            let slot = (index, &ready[index]);
            let started = start_made(
                run,
                (&prepared[index], feed, slot),
                out,
                (&sink, &progress[index]),
                item,
            );
            running.push(async move { (index, started.await) });
        }
        if running.is_empty() {
            break;
        }
        tokio::select! {
            Some((index, result)) = running.next() => batch.completed(index, result),
            signal = &mut interrupt => {
                running.clear();
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                batch.interrupted(signal, (resumed, out), &progress, &mut *sink);
                report.interrupted = true;
                break;
            }
        }
    }
    drop(running);
    report.results = batch.results.into_iter().flatten().collect();
    let sink = sink.into_inner().unwrap_or_else(PoisonError::into_inner);
    close(run, prepared, sink, &mut report, out);
    report.warnings.extend(sinks.take_otel_warning());
    // The reports just written, too.
    out.check(None);
    report.tampering = out.findings();
    if !Arc::ptr_eq(out, &outputs.junit_dir) {
        outputs.junit_dir.check(None);
        report.tampering.extend(outputs.junit_dir.findings());
    }
    report
}

/// The run's report sinks, the output directory prepared (its
/// `.gitignore`, `--shard`'s `shard.json`), primed with a resumed run's
/// earlier halves, the OpenTelemetry export attached; and the resumed
/// tasks, in the order of the prepared ones (none for `ybs run`).
fn open_sinks<'r>(
    run: &RunContext,
    prepared: &[PreparedTask],
    resuming: Option<pause::Resuming<'r>>,
    (paths, outputs): (&report::OutputLayout, &report::OpenOutputs),
    report: &mut RunReport,
) -> (report::RunSinks, &'r [pause::Resumed]) {
    let out = &outputs.out;
    if let Err(error) = prepare_out_dir(out) {
        report.output_error = Some(format!("{}: {error}", paths.out_dir.display()));
    }
    if let Some(shard) = run.shard {
        let file = report::ShardFile {
            shard: shard.to_string(),
            source: run.shard_source.clone(),
            durations: run.shard_split.clone(),
            run_id: run.run_id.clone(),
            tasks: prepared.iter().map(|task| task.task.id.clone()).collect(),
        };
        if let Err(error) = file.write(out) {
            report.output_error.get_or_insert(error.to_string());
        }
    }
    let mut scope = report::RunScope::shard(run.shard);
    scope.shard_source.clone_from(&run.shard_source);
    scope.min_pass_rate = run.copies.min_pass_rate;
    scope.source_url = report::RunScope::source_url(&|name| run.environ.var(name));
    report.min_pass_rate = run.copies.min_pass_rate;
    // Only with an endpoint set does anything start (docs/observability.md).
    let mut sinks = report::RunSinks::run(paths, outputs, scope);
    let resumed: &[pause::Resumed] = match resuming {
        Some(resuming) => {
            resuming.prime(out, &mut sinks, report);
            resuming.resumed
        }
        None => &[],
    };
    (with_otel(sinks, &run.environ, report), resumed)
}

/// One task, started: its progress kept from its events, and, once
/// answered, its state spent (a task that paused again wrote a new one).
async fn start(
    run: &RunContext,
    task: &PreparedTask,
    out: &report::OutDir,
    (sink, progress): (&Mutex<RedactingSink<'_>>, &Mutex<Progress>),
    item: Option<&pause::Resumed>,
) -> TaskResult {
    progress
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .started = Some(std::time::Instant::now());
    let mut shared = SharedSink { sink, progress };
    let result = task_run::run_or_resume(run, task, out, &mut shared, item).await;
    if item.is_some() && result.status != Status::Paused {
        pause::remove_state(out, &task.task.id);
    }
    result
}

/// A task started when its slot came: a deferred one once its worktree
/// is made ([`Feed::made`]).
async fn start_made(
    run: &RunContext,
    (checked, feed, slot): (
        &PreparedTask,
        Option<&Feed>,
        (usize, &OnceLock<PreparedTask>),
    ),
    out: &report::OutDir,
    (sink, progress): (&Mutex<RedactingSink<'_>>, &Mutex<Progress>),
    item: Option<&pause::Resumed>,
) -> TaskResult {
    match Feed::made(feed, run, checked, slot, sink).await {
        Ok(task) => start(run, task, out, (sink, progress), item).await,
        Err(skipped) => skipped,
    }
}

/// Which tasks have started, are running, and how each ended.
struct Batch<'b> {
    run: &'b RunContext,
    prepared: &'b [PreparedTask],
    /// Makes the deferred tasks' worktrees; `ready` holds them made.
    feed: Option<&'b Feed>,
    ready: &'b [OnceLock<PreparedTask>],
    results: Vec<Option<TaskResult>>,
    active: Vec<usize>,
    /// The first task not started yet.
    next: usize,
    /// The quota breaker and the run's budget: whether the next task starts.
    gate: breaker::Gate,
}

impl<'b> Batch<'b> {
    fn new(
        run: &'b RunContext,
        prepared: &'b [PreparedTask],
        feed: Option<&'b Feed>,
        ready: &'b [OnceLock<PreparedTask>],
    ) -> Self {
        Self {
            run,
            prepared,
            feed,
            ready,
            results: prepared.iter().map(|_| None).collect(),
            active: Vec::new(),
            next: 0,
            gate: breaker::Gate::new(run.max_cost_usd),
        }
    }

    /// The next task to start, now counted as running; `None` while
    /// `--jobs` tasks run, or the next shares a workdir with a running
    /// one, or none is left. The tasks the gate stops on the way are
    /// reported as skipped.
    fn next_start(
        &mut self,
        progress: &[Mutex<Progress>],
        sink: &Mutex<RedactingSink<'_>>,
    ) -> Option<usize> {
        let prepared = self.prepared;
        while self.next < prepared.len() && self.active.len() < self.run.jobs.max(1) {
            let index = self.next;
            if let Some((reason, message)) = self.gate.stop(&prepared[index], spent_usd(progress)) {
                let mut sink = sink.lock().unwrap_or_else(PoisonError::into_inner);
                let result = breaker::skip(self.run, &prepared[index], reason, message, &mut *sink);
                discard(&prepared[index..=index]);
                if let Some(feed) = self.feed {
                    feed.drop_task(index);
                }
                self.results[index] = Some(result);
                self.next += 1;
                continue;
            }
            if self
                .active
                .iter()
                .any(|&other| shares_workdir(&prepared[index], &prepared[other]))
            {
                return None;
            }
            self.active.push(index);
            self.next += 1;
            return Some(index);
        }
        None
    }

    fn completed(&mut self, index: usize, result: TaskResult) {
        self.active.retain(|&other| other != index);
        // Its worktree went with the task (or stays, kept, and no longer
        // counts): the feed may make another.
        if let Some(feed) = self
            .feed
            .filter(|_| self.prepared[index].deferred.is_some())
        {
            feed.release();
        }
        self.gate.record(&self.prepared[index], &result);
        self.results[index] = Some(result);
    }

    /// `signal` arrived: each running task ends as interrupted, saying
    /// what it had done; the tasks not started are skipped.
    fn interrupted(
        &mut self,
        signal: &str,
        (resumed, out): (&[pause::Resumed], &report::OutDir),
        progress: &[Mutex<Progress>],
        sink: &mut dyn EventSink,
    ) {
        let message = format!(
            "interrupted by {signal}{}",
            if resumed.is_empty() {
                ""
            } else {
                " after the resume"
            }
        );
        // No worktree is made any more; those made and not taken go.
        if let Some(feed) = self.feed {
            feed.stop();
        }
        self.active.sort_unstable();
        for index in std::mem::take(&mut self.active) {
            let task = self.ready[index].get().unwrap_or(&self.prepared[index]);
            // Its answers may have been acted on: the state is spent.
            if resumed.get(index).is_some() {
                pause::remove_state(out, &task.task.id);
            }
            let done = progress[index]
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clone();
            let result =
                interrupted_task(task, format!("{message} {}", done.describe()), &done, sink);
            self.results[index] = Some(result);
        }
        // Tasks that never started leave nothing behind (a reopened
        // worktree holds a paused task's work: it stays), and are
        // reported as skipped.
        discard(&self.prepared[self.next..]);
        for index in self.next..self.prepared.len() {
            let message = format!("not started: interrupted by {signal}");
            let result = breaker::skip(
                self.run,
                &self.prepared[index],
                Reason::Interrupted,
                message,
                sink,
            );
            self.results[index] = Some(result);
        }
    }
}

/// A running task stopped by an interrupt: `task.finished` with what it
/// had done, and where its worktree's changes are.
fn interrupted_task(
    task: &PreparedTask,
    message: String,
    done: &Progress,
    sink: &mut dyn EventSink,
) -> TaskResult {
    let message = match &task.worktree {
        Some(worktree) => interrupted_worktree(worktree, message),
        None => message,
    };
    let mut emitter = Emitter::new(&task.task.id, sink);
    emitter.emit(Event::TaskFinished(TaskFinished {
        status: Status::Failed,
        reason: Reason::Interrupted,
        message: Some(message.clone()),
        expect: task.task.expect.as_str().to_owned(),
        iterations: done.iterations,
        usage: done.usage,
        cost: done.cost,
        duration_ms: done.elapsed_ms(),
    }));
    TaskResult {
        id: task.task.id.clone(),
        status: Status::Failed,
        reason: Reason::Interrupted,
        message: Some(message),
    }
}

/// The end of the batch: `--record`'s cassettes, tasks whose files were
/// forged once they ended, and the sinks closed.
fn close(
    run: &RunContext,
    prepared: &[PreparedTask],
    mut sink: RedactingSink<'_>,
    report: &mut RunReport,
    out: &report::OutDir,
) {
    if let Err(error) = write_task_cassettes(run, prepared, out) {
        report.output_error.get_or_insert(error.to_string());
    }
    // Files of tasks that already ended (a later task forging an earlier
    // one's transcript): the task fails; the summary lists it.
    for (task, finding) in out.check_owned(None) {
        if let Some(result) = report
            .results
            .iter_mut()
            .find(|result| Some(&result.id) == task.as_ref())
            && result.status == Status::Passed
        {
            result.status = Status::Failed;
            result.reason = Reason::OutputTampered;
            result.message = Some(format!("output tampering: {finding}"));
        }
    }
    if let Err(error) = sink.finish() {
        report.output_error.get_or_insert(error.to_string());
    }
}

/// `--record`: each task's own interactions in `OUT/<task>/cassette.json`,
/// masked, for `ybs report fixture` (docs/outputs.md).
fn write_task_cassettes(
    run: &RunContext,
    prepared: &[PreparedTask],
    out: &report::OutDir,
) -> std::io::Result<()> {
    let Some(recorder) = &run.recorder else {
        return Ok(());
    };
    for task in prepared {
        let id = &task.task.id;
        if let Some(bytes) = recorder.task_cassette(id)? {
            out.write_atomic(Some(id), report::CASSETTE_FILE, &bytes)?;
        }
    }
    Ok(())
}

/// What the run has spent so far, in USD: every task's answers with a
/// known price, the running ones' included.
fn spent_usd(progress: &[Mutex<Progress>]) -> f64 {
    progress
        .iter()
        .map(|task| {
            task.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .spent_usd
        })
        .sum()
}

/// What a running task has done so far, as its events tell it.
#[derive(Debug, Clone)]
struct Progress {
    started: Option<std::time::Instant>,
    /// The running time of a resumed task's earlier halves.
    earlier_ms: u64,
    /// Provider requests answered.
    iterations: u32,
    usage: Usage,
    /// As the agent counts it: unknown once one answer's price is.
    cost: Cost,
    /// The answers with a known price, for the run's budget.
    spent_usd: f64,
}

impl Default for Progress {
    fn default() -> Self {
        Self {
            started: None,
            earlier_ms: 0,
            iterations: 0,
            usage: Usage::default(),
            cost: Cost::Usd(0.0),
            spent_usd: 0.0,
        }
    }
}

impl Progress {
    /// A task's progress before it starts: what a resumed one's earlier
    /// halves spent, else nothing.
    fn carried(resumed: Option<&pause::Resumed>) -> Self {
        resumed.map_or_else(Self::default, |item| {
            let spent = item.state.spent;
            Self {
                started: None,
                earlier_ms: spent.elapsed_ms,
                iterations: spent.iterations,
                usage: spent.usage,
                cost: spent.cost,
                spent_usd: spent.cost.usd().unwrap_or(0.0),
            }
        })
    }

    fn record(&mut self, event: &Event) {
        if let Event::LlmResponse(LlmResponse {
            iteration,
            usage,
            cost,
            ..
        }) = event
        {
            self.iterations = self.iterations.max(*iteration);
            self.usage.add(*usage);
            self.cost = self.cost.plus(*cost);
            self.spent_usd += cost.usd().unwrap_or(0.0);
        }
    }

    fn elapsed_ms(&self) -> u64 {
        self.started
            .map_or(0, |started| {
                u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
            })
            .saturating_add(self.earlier_ms)
    }

    /// `after 2 iterations, 240 tokens, $0.0012, 3.4s`.
    fn describe(&self) -> String {
        format!(
            "after {} iteration{}, {} tokens, cost {}, {:.1}s",
            self.iterations,
            if self.iterations == 1 { "" } else { "s" },
            self.usage.total(),
            self.cost,
            Duration::from_millis(self.elapsed_ms()).as_secs_f64()
        )
    }
}

/// One running task's way into the run's sink. Every task is polled by
/// [`execute`]'s one future and an event is handed over whole, so the
/// lock is never contended and a task's events keep their order. Keeps
/// the task's [`Progress`] as the events pass.
struct SharedSink<'s, 'a> {
    sink: &'s Mutex<RedactingSink<'a>>,
    progress: &'s Mutex<Progress>,
}

impl EventSink for SharedSink<'_, '_> {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        self.progress
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .record(&record.event);
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(record)
    }

    fn text(&mut self, task: &str, line: &str) {
        self.sink
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .text(task, line);
    }
}

/// Writes a `.gitignore` of `*` in the output directory, so a run inside
/// a repository never sees its own outputs as changes to commit, as a
/// dirty tree, or in `list_files`/`search_files` results.
/// One already there (`--out .` in a repository) is left alone.
fn prepare_out_dir(out: &report::OutDir) -> std::io::Result<()> {
    out.create_new(
        ".gitignore",
        b"# Written by ybs: its outputs are never part of the repository.\n*\n",
    )
}

/// Resolves when SIGINT or SIGTERM arrives; names the signal. The
/// handlers are installed when this is called, not when the future is
/// first polled: a signal that arrives while the first tasks start is
/// not the default action (death without outputs).
pub(crate) fn interrupted() -> impl std::future::Future<Output = &'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let signals = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    );
    async move {
        let (Ok(mut int), Ok(mut term)) = signals else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    }
}

/// The run's report sinks with the OpenTelemetry export attached when an
/// endpoint is set (docs/observability.md); a variable that cannot be
/// used is a warning in `report`, and the run goes on without export.
pub(crate) fn with_otel(
    sinks: report::RunSinks,
    environ: &crate::core::Environ,
    report: &mut RunReport,
) -> report::RunSinks {
    let otel =
        report::OtelSink::from_env(&|name: &str| environ.var(name)).unwrap_or_else(|error| {
            report
                .warnings
                .push(format!("warning: OpenTelemetry disabled: {error}"));
            None
        });
    sinks.with_otel(otel)
}
