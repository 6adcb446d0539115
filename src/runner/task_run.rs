//! One task from start to finish: prompt, loop, checks and fix attempts,
//! `expect`, and the final event. Every stop writes its outputs.

use std::time::Instant;

use super::checks::run_checks;
use super::prepare::PreparedTask;
use super::results::TaskResult;
use super::RunContext;
use crate::agent::{prompt, Agent, AgentSetup, Emitter, Stop};
use crate::core::event::{Event, EventSink};
use crate::core::{Reason, Status};
use crate::task::Expect;

/// Runs one prepared task; the last event it emits is `task.finished`.
pub async fn run_task(run: &RunContext, prepared: &PreparedTask, sink: &mut dyn EventSink) -> TaskResult {
    let task = &prepared.task;
    let mut emitter = Emitter::new(&task.id, sink);
    let started = Instant::now();
    let tool_names = prepared.registry.names();
    let system_prompt = prompt::system_prompt(
        &prepared.tool_ctx.workdir,
        &tool_names,
        &prepared.policy.summary(),
        task.system.as_deref(),
    );
    emitter.emit(Event::TaskStarted {
        file: task.file.display().to_string(),
        suite: task.suite.clone(),
        run_id: run.run_id.clone(),
        ybs_version: env!("CARGO_PKG_VERSION").to_owned(),
        provider: prepared.settings.provider.clone(),
        model: prepared.settings.model.clone(),
        temperature: prepared.settings.temperature,
        seed: None,
        workdir: prepared.tool_ctx.workdir.display().to_string(),
        policy_hash: prepared.policy_hash.clone(),
        base_commit: None,
        system_prompt: system_prompt.clone(),
        tools: tool_names,
        dry_run: run.dry_run,
    });
    let setup = AgentSetup {
        provider: prepared.provider.as_ref(),
        tools: &prepared.registry,
        ctx: &prepared.tool_ctx,
        policy: &prepared.policy,
        pricing: &run.pricing,
        model: prepared.settings.model.clone(),
        system_prompt,
        temperature: prepared.settings.temperature,
        max_tokens: prepared.settings.max_tokens,
        limits: prepared.limits.clone(),
        retry: run.retry,
        dry_run: run.dry_run,
    };
    let mut agent = Agent::new(setup, &task.prompt, &mut emitter);
    let mut attempt = 0;
    let (reason, message) = loop {
        match agent.run(&mut emitter).await {
            Stop::Answered { .. } if task.checks.is_empty() => break (Reason::Completed, None),
            Stop::Answered { .. } => {
                let outcome =
                    run_checks(&task.checks, &prepared.tool_ctx.workdir, &prepared.tool_ctx.env, attempt, &mut emitter)
                        .await;
                if outcome.passed {
                    break (Reason::Completed, None);
                }
                if attempt < task.fix_attempts {
                    attempt += 1;
                    emitter.note(format!("checks failed; fix attempt {attempt} of {}", task.fix_attempts));
                    let feedback = format!(
                        "The checks failed. Fix the problem, then answer again.\n\n{}",
                        outcome.failures.join("\n\n")
                    );
                    agent.push_user(&feedback, &mut emitter);
                    continue;
                }
                let summary = outcome.failures.first().map(|f| f.lines().next().unwrap_or_default().to_owned());
                break (Reason::ChecksFailed, summary);
            }
            Stop::Limit { reason, message } | Stop::Failed { reason, message } | Stop::Error { reason, message } => {
                break (reason, Some(message));
            }
        }
    };
    let (status, reason, message) = apply_expect(task.expect, reason, message);
    emitter.emit(Event::TaskFinished {
        status,
        reason,
        message: message.clone(),
        expect: task.expect.as_str().to_owned(),
        iterations: agent.iterations(),
        usage: agent.usage(),
        cost: agent.cost(),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    });
    TaskResult { id: task.id.clone(), status, reason, message }
}

/// `expect: fail` turns a failed task into a pass and a pass into
/// `expectation_not_met`; errors stay errors.
fn apply_expect(expect: Expect, reason: Reason, message: Option<String>) -> (Status, Reason, Option<String>) {
    let natural = reason.status();
    match (expect, natural) {
        (Expect::Fail, Status::Failed) => {
            let note = message.map_or_else(
                || format!("failed as expected ({reason})"),
                |m| format!("failed as expected ({reason}): {m}"),
            );
            (Status::Passed, reason, Some(note))
        }
        (Expect::Fail, Status::Passed) => (
            Status::Failed,
            Reason::ExpectationNotMet,
            Some("the task was expected to fail (`expect: fail`) but it passed".to_owned()),
        ),
        _ => (natural, reason, message),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expect_fail_inverts_failures_only() {
        assert_eq!(apply_expect(Expect::Fail, Reason::PolicyDenied, None).0, Status::Passed);
        assert_eq!(apply_expect(Expect::Fail, Reason::Completed, None).1, Reason::ExpectationNotMet);
        assert_eq!(apply_expect(Expect::Fail, Reason::ProviderError, None).0, Status::Error);
        assert_eq!(apply_expect(Expect::Pass, Reason::ChecksFailed, None).0, Status::Failed);
    }
}
