//! `ybs run` behind the CLI: select, prepare, open the outputs, execute,
//! and say how it went.

use super::load::Loaded;
use super::options::{Entry, RunFlags, RunOptions};
use super::session::{self, Session, Threads};
use super::{RunError, RunReport};
use crate::core::Status;
use crate::report::{Console, PlannedTask};
use crate::task::TaskSpec;

/// Runs the selected tasks of `loaded` with `options`; every line for
/// the person running it goes to `console`.
pub fn run(
    loaded: Loaded,
    options: RunOptions,
    console: &mut dyn Console,
) -> Result<RunReport, RunError> {
    let (tasks, predicted) = selected(&loaded, &options.flags)?;
    if let Some(line) = predicted {
        console.error(&line);
    }
    let (tasks, copies) = super::matrix::expand(tasks, &options.flags.matrix)?;
    let entry = Entry {
        tasks: tasks.iter().map(|task| task.id.clone()).collect(),
        copies,
        resuming: None,
    };
    let session = Session::open(loaded, options, entry, Threads::Two, console)?;
    let context = &session.context;
    let (prepared, outputs) = session.prepare(
        &tasks,
        budget_priced,
        "remove the link, or pass --out (or --junit) a path without symbolic links",
    )?;
    session::warn_unconfined(console, &prepared);
    for note in super::parallel::serial_notes(&prepared) {
        console.error(&note);
    }
    for note in super::saved_work_notes(context, &prepared) {
        console.error(&format!("ybs: {note}"));
    }
    if let Some(note) = super::clean::leftover_note(&context.cwd, &context.run_id) {
        console.error(&format!("ybs: note: {note}"));
    }
    console.planned(
        &prepared
            .iter()
            .map(|task| PlannedTask {
                id: task.task.id.clone(),
                max_steps: task.limits.max_iterations,
            })
            .collect::<Vec<_>>(),
    );
    let report = session.execute(prepared, None, &outputs, console)?;
    let lines = super::matrix::model_lines(&report.results, &context.copies);
    for line in lines.into_iter().chain(super::matrix::console_lines(
        &report.results,
        report.min_pass_rate,
    )) {
        console.error(&line);
    }
    session.finish(console, &report, totals(&session, &report));
    Ok(report)
}

/// The tasks `--filter` and `--shard` select; none is a usage error.
/// With `--shard-by durations`, also the line predicting the shards'
/// times.
fn selected(
    loaded: &Loaded,
    flags: &RunFlags,
) -> Result<(Vec<TaskSpec>, Option<String>), RunError> {
    let tasks = super::select(&loaded.files, &flags.filter)?;
    if tasks.is_empty() {
        return Err(RunError::usage(
            "no task matches the given paths and --filter",
            Some(
                "--filter matches task ids (globs like `fix-*`); `ybs validate PATHS` lists how many tasks load",
            ),
        ));
    }
    Ok(match (flags.shard, &flags.shard_split) {
        (Some(shard), Some(split)) => {
            let ids: Vec<&str> = tasks.iter().map(|task| task.id.as_str()).collect();
            let (placed, loads) = split.durations.split(&ids, shard.total());
            let longest = loads.iter().copied().max().unwrap_or(0);
            let mean = loads.iter().sum::<u64>() / u64::from(shard.total().max(1));
            let line = format!(
                "ybs: shard {shard} by durations: predicted longest shard {}, mean {}, this one {}",
                crate::core::text::human_ms(longest),
                crate::core::text::human_ms(mean),
                crate::core::text::human_ms(
                    loads
                        .get(usize::try_from(shard.index() - 1).unwrap_or(0))
                        .copied()
                        .unwrap_or(0)
                ),
            );
            let mine = tasks
                .into_iter()
                .filter(|task| placed.get(&task.id) == Some(&shard.index()))
                .collect();
            (mine, Some(line))
        }
        (Some(shard), None) => (super::shard(tasks, shard, &loaded.cwd), None),
        (None, _) => (tasks, None),
    })
}

/// The line of totals of `ybs run`.
fn totals(session: &Session, report: &RunReport) -> String {
    let (context, options) = (&session.context, &session.options);
    let flags = &options.flags;
    let flaky = super::matrix::flaky_count(&report.results, report.min_pass_rate);
    let accepted = super::matrix::accepted_flaky_count(&report.results, report.min_pass_rate);
    let total = report.results.len();
    format!(
        "ybs: {}{total} task{}: {} passed, {} failed, {}{}{}{}{}{} — outputs in {}",
        flags
            .shard
            .map(|shard| format!("shard {shard}: "))
            .unwrap_or_default(),
        if total == 1 { "" } else { "s" },
        report.count(Status::Passed),
        report.count(Status::Failed),
        crate::core::text::count_of(report.count(Status::Error) as u64, "error"),
        match (flaky, accepted, report.min_pass_rate) {
            (0, 0, _) => String::new(),
            (0, accepted, Some(min)) => format!(
                " ({accepted} flaky, passing at or above --min-pass-rate {min}: the failed runs do not fail the run)"
            ),
            (flaky, ..) => format!(" ({flaky} flaky)"),
        },
        match report.count(Status::Paused) {
            0 => String::new(),
            paused => format!(
                ", {paused} paused ({})",
                resume_command(
                    (&context.cwd, &context.environ),
                    &options.out_dir,
                    &flags.resume_args,
                )
            ),
        },
        match report.count(Status::Skipped) {
            0 => String::new(),
            skipped => format!(", {skipped} skipped (not started)"),
        },
        if report.interrupted {
            " (interrupted)"
        } else {
            ""
        },
        if flags.dry_run {
            " (dry run: nothing was executed or committed)"
        } else {
            ""
        },
        options.out_dir.display()
    )
}

/// `--max-cost-usd` counts what the run spends: every task's model needs
/// a known price, or the budget could not be enforced.
fn budget_priced(
    context: &super::RunContext,
    prepared: &[super::PreparedTask],
) -> Result<(), RunError> {
    let Some(budget) = context.max_cost_usd else {
        return Ok(());
    };
    match prepared
        .iter()
        .find(|task| context.pricing.price(&task.settings.model).is_none())
    {
        Some(task) => Err(RunError::usage(
            format!(
                "--max-cost-usd {budget}: the price of model `{}` (task `{}`) is not known, so the run's spending could not be counted",
                task.settings.model, task.task.id
            ),
            Some(
                "give the price in the operator's config: `llm.price: {input_per_mtok: 1.25, output_per_mtok: 10}` (USD per million tokens)",
            ),
        )),
        None => Ok(()),
    }
}

/// The command that goes on with the run's paused tasks, from the
/// directory ybs ran in: `ybs resume OUT`, the flags of this run it needs
/// again, and how the pending calls are answered (`--results` for caller
/// tools, `--approve`/`--deny` for approvals), read from the states just
/// written.
pub(super) fn resume_command(
    (cwd, environ): (&std::path::Path, &crate::core::Environ),
    out_dir: &std::path::Path,
    args: &[String],
) -> String {
    use crate::core::event::PendingKind;
    let mut words = vec![
        "ybs".to_owned(),
        "resume".to_owned(),
        out_dir.display().to_string(),
    ];
    words.extend(args.iter().cloned());
    let kinds: Vec<PendingKind> = super::resume::find_paused(cwd, out_dir, None, environ)
        .map(|paused| {
            paused
                .iter()
                .flat_map(|task| task.state.pending.iter().map(|call| call.kind))
                .collect()
        })
        .unwrap_or_default();
    let caller = kinds.contains(&PendingKind::Caller);
    let approval = kinds.contains(&PendingKind::Approval);
    if caller {
        words.push("--results".to_owned());
        words.push("RESULTS.json".to_owned());
    }
    if approval {
        words.push("--approve".to_owned());
        words.push("all".to_owned());
    }
    let command: Vec<String> = words.iter().map(|word| shell_word(word)).collect();
    let mut text = format!("go on with `{}`", command.join(" "));
    if approval {
        text.push_str(" or `--deny all`");
    }
    if caller {
        text.push_str(
            r#", RESULTS.json answering each pending call: {"results": [{"id": "…", "output": …}]}"#,
        );
    }
    text
}

/// `word` as one shell word: as it is when it holds only characters no
/// shell treats specially, else in single quotes.
fn shell_word(word: &str) -> String {
    let plain = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:=@%+,".contains(c));
    if plain {
        word.to_owned()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}
