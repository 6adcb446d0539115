//! The admission table: one call of a fake tool, through the agent's own
//! admission (resolve → decide → gate → execute or pause), for each row
//! of verdict × `on_ask` × approver × resumed answer × caller tool × dry
//! run × inside a script. A row states what the call came to, what the
//! decision record says, and whether a human was asked. The last rows
//! drive the whole loop with a scripted provider.

use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::future::BoxFuture;
use serde_json::{Value, json};

use super::admission::Admitted;
use super::{Agent, AgentSetup, Answer, Stop};
use crate::agent::approve::{Approval, Approver};
use crate::agent::{ContextWindow, Emitter, Limits};
use crate::core::event::{Event, EventRecord, EventSink, PendingKind, ToolDecided};
use crate::core::{Message, Reason, Redactor, ToolCall, ToolSpec};
use crate::llm::pricing::PriceTable;
use crate::llm::retry::RetrySettings;
use crate::llm::{ChatRequest, ChatResponse, Provider, ProviderError};
use crate::policy::{CallView, Decision, GuardSettings, OnAsk, Policy, PolicySpec, Rule, Verdict};
use crate::tools::{ChildEnv, Registry, Target, Tool, ToolCtx, ToolError, ToolOutput};

/// The task's turns, in order; an answer once they run out.
struct Scripted(Mutex<VecDeque<ChatResponse>>);

impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }

    fn complete<'a>(
        &'a self,
        _request: &'a ChatRequest,
    ) -> BoxFuture<'a, Result<ChatResponse, ProviderError>> {
        let next = self.0.lock().unwrap().pop_front();
        Box::pin(async move {
            Ok(next.unwrap_or_else(|| ChatResponse {
                content: "done".to_owned(),
                ..ChatResponse::default()
            }))
        })
    }
}

/// A tool that acts on its `path` argument and counts its runs.
struct FakeTool {
    spec: ToolSpec,
    caller: bool,
    runs: AtomicUsize,
}

impl Tool for FakeTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn is_caller(&self) -> bool {
        self.caller
    }

    fn target(&self, args: &Value, _ctx: &ToolCtx) -> Result<Target, ToolError> {
        match args.get("path").and_then(Value::as_str) {
            Some(path) => Ok(Target {
                path: Some(path.to_owned()),
                command: None,
            }),
            None => Err(ToolError::Model("`path` is required".to_owned())),
        }
    }

    fn call<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            Ok(ToolOutput {
                content: "ran".to_owned(),
                changed: Vec::new(),
            })
        })
    }
}

/// The human at the terminal: always gives the same answer.
struct FakeApprover {
    answer: Approval,
    asked: AtomicUsize,
}

impl Approver for FakeApprover {
    fn approve<'a>(
        &'a self,
        _call: &'a ToolCall,
        _view: &'a CallView<'a>,
        _decision: &'a Decision,
    ) -> BoxFuture<'a, Approval> {
        self.asked.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move { self.answer })
    }

    fn follow_up<'a>(&'a self, _outcome: &'a str) -> BoxFuture<'a, Option<String>> {
        Box::pin(async { None })
    }
}

#[derive(Default)]
struct Sink(Vec<Event>);

impl EventSink for Sink {
    fn event(&mut self, record: &EventRecord) -> std::io::Result<()> {
        self.0.push(record.event.clone());
        Ok(())
    }
}

/// One row's inputs. The call acts on `<verdict>/x`, which the policy
/// allows, denies or asks about.
#[derive(Clone, Copy)]
struct Case {
    verdict: Verdict,
    on_ask: OnAsk,
    approver: Option<Approval>,
    /// `ybs resume` answered the call: approved or denied.
    resumed: Option<bool>,
    caller: bool,
    dry_run: bool,
    /// A tool command inside a `script` call.
    in_script: bool,
}

const BASE: Case = Case {
    verdict: Verdict::Allow,
    on_ask: OnAsk::Deny,
    approver: None,
    resumed: None,
    caller: false,
    dry_run: false,
    in_script: false,
};

/// What the call came to.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Got {
    /// The tool ran.
    Ran,
    /// Recorded, not run: `--dry-run`.
    DryRun,
    /// Refused with a result the model sees.
    Refused,
    /// Waits for `ybs resume`.
    Paused(PendingKind),
    /// The task failed (`on_ask: fail`).
    Failed,
}

#[derive(Debug)]
struct Outcome {
    got: Got,
    /// The decision record: verdict and rule.
    verdict: String,
    rule: String,
    /// What the model (or the task's failure) is told.
    text: String,
    asked: usize,
    runs: usize,
    parent: Option<String>,
}

fn policy(on_ask: OnAsk) -> Policy {
    let rules = |text: &str| vec![Rule::parse(text).unwrap()];
    let spec = PolicySpec {
        allow: rules("tool(allow/**)"),
        deny: rules("tool(deny/**)"),
        ask: rules("tool(ask/**)"),
        on_ask: Some(on_ask),
        ..PolicySpec::default()
    };
    Policy::build(None, &[spec], GuardSettings::new("/w", None)).unwrap()
}

fn tool_ctx() -> ToolCtx {
    ToolCtx {
        workdir: PathBuf::from("/w"),
        allowed_roots: vec![PathBuf::from("/w")],
        blocked_paths: Vec::new(),
        protected_paths: Vec::new(),
        env: ChildEnv::default(),
        shell_timeout: Duration::from_secs(10),
        max_shell_timeout: Duration::from_secs(10),
        output_cap_bytes: 10_000,
        sandbox: None,
        shell_sandbox: None,
    }
}

fn fake_tool(caller: bool) -> Arc<FakeTool> {
    Arc::new(FakeTool {
        spec: ToolSpec {
            name: "tool".to_owned(),
            description: "acts on a path".to_owned(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        },
        caller,
        runs: AtomicUsize::new(0),
    })
}

/// Everything an agent borrows, owned by the test.
struct World {
    provider: Scripted,
    tool: Arc<FakeTool>,
    tools: Registry,
    ctx: ToolCtx,
    policy: Policy,
    pricing: PriceTable,
    redactor: Redactor,
    approver: Option<FakeApprover>,
    dry_run: bool,
    limits: Limits,
    output_schema: Option<serde_json::Value>,
}

impl World {
    fn new(case: Case, turns: Vec<ChatResponse>) -> Self {
        let tool = fake_tool(case.caller);
        let mut tools = Registry::new();
        tools.add(tool.clone());
        Self {
            provider: Scripted(Mutex::new(turns.into())),
            tool,
            tools,
            ctx: tool_ctx(),
            policy: policy(case.on_ask),
            pricing: PriceTable::new(std::collections::BTreeMap::new()),
            redactor: Redactor::new(),
            approver: case.approver.map(|answer| FakeApprover {
                answer,
                asked: AtomicUsize::new(0),
            }),
            dry_run: case.dry_run,
            output_schema: None,
            limits: Limits::default(),
        }
    }

    fn agent(&self) -> Agent<'_> {
        let setup = AgentSetup {
            provider: &self.provider,
            tools: &self.tools,
            ctx: &self.ctx,
            policy: &self.policy,
            pricing: &self.pricing,
            model: "fake".to_owned(),
            system_prompt: "system".to_owned(),
            temperature: None,
            max_tokens: None,
            limits: self.limits.clone(),
            context: ContextWindow::new(None, 0.8),
            retry: RetrySettings::default(),
            dry_run: self.dry_run,
            redactor: &self.redactor,
            approver: self.approver.as_ref().map(|a| a as &dyn Approver),
            output_schema: self.output_schema.as_ref(),
        };
        Agent::resume(setup, Vec::new())
    }

    fn asked(&self) -> usize {
        self.approver
            .as_ref()
            .map_or(0, |a| a.asked.load(Ordering::SeqCst))
    }

    fn runs(&self) -> usize {
        self.tool.runs.load(Ordering::SeqCst)
    }
}

fn call(id: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: "tool".to_owned(),
        arguments,
        invalid_arguments: None,
        from_text: false,
    }
}

fn path_of(verdict: Verdict) -> String {
    format!("{}/x", verdict.as_str())
}

/// The tool message's text, classified.
fn done(message: &Message, runs: usize) -> (Got, String) {
    match message {
        Message::Tool { content, .. } if runs > 0 => (Got::Ran, content.clone()),
        Message::Tool { content, .. } if content.starts_with("[dry-run]") => {
            (Got::DryRun, content.clone())
        }
        Message::Tool { content, .. } => (Got::Refused, content.clone()),
        other => panic!("not a tool result: {other:?}"),
    }
}

fn stopped(stop: Stop) -> (Got, String) {
    match stop {
        Stop::Paused { pending } => (Got::Paused(pending[0].kind), pending[0].rule.clone()),
        Stop::Failed {
            reason: Reason::PolicyDenied,
            message,
        } => (Got::Failed, message),
        other => panic!("unexpected stop: {other:?}"),
    }
}

/// Admits one call of the fake tool under `case`: directly, as a tool
/// command of script `s1`, or as the answer `ybs resume` gave.
async fn admit(case: Case) -> Outcome {
    admit_call(case, call("c1", json!({"path": path_of(case.verdict)}))).await
}

async fn admit_call(case: Case, call: ToolCall) -> Outcome {
    let world = World::new(case, Vec::new());
    let mut sink = Sink::default();
    let (got, text) = {
        let mut emitter = Emitter::new("t", &mut sink);
        let mut agent = world.agent();
        if case.in_script {
            agent.parent = Some("s1".to_owned());
        }
        match case.resumed {
            Some(yes) => {
                agent.messages.push(Message::Assistant {
                    content: String::new(),
                    tool_calls: vec![call.clone()],
                });
                let answers = HashMap::from([(call.id.clone(), Answer::Approved(yes))]);
                match agent.answer(&answers, "ci-bot", &mut emitter).await {
                    Some(stop) => stopped(stop),
                    None => done(agent.messages.last().unwrap(), world.runs()),
                }
            }
            None => match agent.handle(&call, &mut emitter).await {
                Ok(Admitted::Done(message)) => done(&message, world.runs()),
                Ok(Admitted::Pending(pending)) => (Got::Paused(pending.kind), pending.rule),
                Err(stop) => stopped(stop),
            },
        }
    };
    let decided = sink.0.iter().find_map(|event| match event {
        Event::ToolDecided(ToolDecided {
            verdict,
            rule,
            parent,
            ..
        }) => Some((verdict.clone(), rule.clone(), parent.clone())),
        _ => None,
    });
    let (verdict, rule, parent) = decided.unwrap_or_default();
    Outcome {
        got,
        verdict,
        rule,
        text,
        asked: world.asked(),
        runs: world.runs(),
        parent,
    }
}

/// One row: the case, what it came to, the recorded verdict, words the
/// rule and the text contain, and how often a human was asked.
macro_rules! rows {
    ($($name:ident: $case:expr => $got:expr, $verdict:literal, $rule:literal, $text:literal, asked $asked:literal;)*) => {
        $(
            #[tokio::test]
            async fn $name() {
                let outcome = admit($case).await;
                assert_eq!(outcome.got, $got, "{outcome:#?}");
                assert_eq!(outcome.verdict, $verdict, "{outcome:#?}");
                assert!(outcome.rule.contains($rule), "rule: {outcome:#?}");
                assert!(outcome.text.contains($text), "text: {outcome:#?}");
                assert_eq!(outcome.asked, $asked, "asked: {outcome:#?}");
                assert_eq!(outcome.runs, usize::from(outcome.got == Got::Ran), "{outcome:#?}");
            }
        )*
    };
}

use Got::{DryRun, Failed, Paused, Ran, Refused};
use PendingKind::{Approval as ForApproval, Caller as ForCaller};
use Verdict::{Allow, Ask, Deny};

rows! {
    // Headless, the policy alone.
    allow_runs: Case { verdict: Allow, ..BASE } => Ran, "allow", "allow[0] tool(allow/**)", "ran", asked 0;
    deny_is_refused: Case { verdict: Deny, ..BASE } => Refused, "deny", "deny[0]", "denied by policy (rule `deny[0] tool(deny/**)`)", asked 0;
    ask_under_on_ask_deny_is_refused: Case { verdict: Ask, on_ask: OnAsk::Deny, ..BASE } => Refused, "ask", "ask[0]", "nobody can approve it in this headless run", asked 0;
    ask_under_on_ask_fail_fails_the_task: Case { verdict: Ask, on_ask: OnAsk::Fail, ..BASE } => Failed, "ask", "ask[0]", "policy.on_ask is fail", asked 0;
    ask_under_on_ask_pause_pauses: Case { verdict: Ask, on_ask: OnAsk::Pause, ..BASE } => Paused(ForApproval), "ask", "ask[0]", "ask[0]", asked 0;
    deny_under_on_ask_pause_is_refused: Case { verdict: Deny, on_ask: OnAsk::Pause, ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;

    // `--interactive`: a human answers `ask`, and only `ask`.
    ask_approved_by_the_human_runs: Case { verdict: Ask, approver: Some(Approval::Yes), ..BASE } => Ran, "allow", "(approved interactively)", "ran", asked 1;
    ask_approved_always_runs: Case { verdict: Ask, approver: Some(Approval::Always), ..BASE } => Ran, "allow", "(approved interactively, always)", "ran", asked 1;
    ask_declined_by_the_human_is_refused: Case { verdict: Ask, approver: Some(Approval::No), ..BASE } => Refused, "deny", "(declined interactively)", "the user declined this call", asked 1;
    allow_is_not_put_to_the_human: Case { verdict: Allow, approver: Some(Approval::No), ..BASE } => Ran, "allow", "allow[0]", "ran", asked 0;
    deny_is_not_put_to_the_human: Case { verdict: Deny, approver: Some(Approval::Yes), ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;
    the_human_answers_before_on_ask_pause: Case { verdict: Ask, on_ask: OnAsk::Pause, approver: Some(Approval::Yes), ..BASE } => Ran, "allow", "(approved interactively)", "ran", asked 1;
    a_human_decline_is_no_on_ask_fail: Case { verdict: Ask, on_ask: OnAsk::Fail, approver: Some(Approval::No), ..BASE } => Refused, "deny", "(declined interactively)", "the user declined", asked 1;

    // `ybs resume`: the answer stands in for a human where the policy,
    // read again, still asks; a denial stands wherever it would run.
    ask_approved_at_resume_runs: Case { verdict: Ask, on_ask: OnAsk::Pause, resumed: Some(true), ..BASE } => Ran, "allow", "(approved at resume by ci-bot)", "ran", asked 0;
    ask_denied_at_resume_is_refused: Case { verdict: Ask, on_ask: OnAsk::Pause, resumed: Some(false), ..BASE } => Refused, "deny", "(denied at resume by ci-bot)", "ci-bot denied it", asked 0;
    allow_approved_at_resume_runs_as_allowed: Case { verdict: Allow, resumed: Some(true), ..BASE } => Ran, "allow", "allow[0] tool(allow/**)", "ran", asked 0;
    allow_denied_at_resume_stays_denied: Case { verdict: Allow, resumed: Some(false), ..BASE } => Refused, "deny", "(denied at resume by ci-bot)", "the policy read again would allow it", asked 0;
    deny_approved_at_resume_stays_denied: Case { verdict: Deny, resumed: Some(true), ..BASE } => Refused, "deny", "but the policy read again denies it", "approved at resume by ci-bot, but the policy read again denies it", asked 0;
    deny_denied_at_resume_is_refused: Case { verdict: Deny, resumed: Some(false), ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;
    a_resumed_approval_is_not_put_to_the_human: Case { verdict: Ask, resumed: Some(true), approver: Some(Approval::No), ..BASE } => Ran, "allow", "(approved at resume by ci-bot)", "ran", asked 0;
    a_resumed_approval_outranks_on_ask_fail: Case { verdict: Ask, on_ask: OnAsk::Fail, resumed: Some(true), ..BASE } => Ran, "allow", "(approved at resume by ci-bot)", "ran", asked 0;

    // Caller tools: allowed, they wait for the caller; approval first.
    an_allowed_caller_tool_pauses_for_the_caller: Case { verdict: Allow, caller: true, ..BASE } => Paused(ForCaller), "allow", "allow[0]", "allow[0]", asked 0;
    a_denied_caller_tool_is_refused: Case { verdict: Deny, caller: true, ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;
    a_caller_tool_that_asks_pauses_for_approval_first: Case { verdict: Ask, on_ask: OnAsk::Pause, caller: true, ..BASE } => Paused(ForApproval), "ask", "ask[0]", "ask[0]", asked 0;
    a_caller_tool_the_human_approves_pauses_for_the_caller: Case { verdict: Ask, caller: true, approver: Some(Approval::Yes), ..BASE } => Paused(ForCaller), "allow", "(approved interactively)", "ask[0]", asked 1;
    a_caller_tool_approved_at_resume_pauses_again: Case { verdict: Ask, on_ask: OnAsk::Pause, caller: true, resumed: Some(true), ..BASE } => Paused(ForCaller), "allow", "(approved at resume by ci-bot)", "ask[0]", asked 0;
    a_caller_tool_under_dry_run_is_recorded_not_paused: Case { verdict: Allow, caller: true, dry_run: true, ..BASE } => DryRun, "allow", "allow[0]", "[dry-run] allowed by policy, not executed", asked 0;

    // `--dry-run`: decided and recorded, never run, never paused.
    allow_under_dry_run_is_not_run: Case { verdict: Allow, dry_run: true, ..BASE } => DryRun, "allow", "allow[0]", "not executed", asked 0;
    ask_under_dry_run_and_on_ask_pause_says_it_would_pause: Case { verdict: Ask, on_ask: OnAsk::Pause, dry_run: true, ..BASE } => DryRun, "ask", "ask[0]", "the run would pause for it", asked 0;
    deny_under_dry_run_is_refused: Case { verdict: Deny, dry_run: true, ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;
    ask_under_dry_run_and_on_ask_fail_still_fails: Case { verdict: Ask, on_ask: OnAsk::Fail, dry_run: true, ..BASE } => Failed, "ask", "ask[0]", "policy.on_ask is fail", asked 0;
    a_human_approval_under_dry_run_is_still_not_run: Case { verdict: Ask, approver: Some(Approval::Yes), dry_run: true, ..BASE } => DryRun, "allow", "(approved interactively)", "not executed", asked 1;

    // Inside a script: nothing pauses and nobody is asked.
    allow_inside_a_script_runs: Case { verdict: Allow, in_script: true, ..BASE } => Ran, "allow", "allow[0]", "ran", asked 0;
    ask_inside_a_script_cannot_pause: Case { verdict: Ask, on_ask: OnAsk::Pause, in_script: true, ..BASE } => Refused, "ask", "ask[0]", "a tool command inside a script cannot pause for it", asked 0;
    ask_inside_a_script_is_not_put_to_the_human: Case { verdict: Ask, approver: Some(Approval::Yes), in_script: true, ..BASE } => Refused, "ask", "ask[0]", "nobody can approve it", asked 0;
    ask_inside_a_script_under_on_ask_fail_fails: Case { verdict: Ask, on_ask: OnAsk::Fail, in_script: true, ..BASE } => Failed, "ask", "ask[0]", "policy.on_ask is fail", asked 0;
    a_caller_tool_inside_a_script_is_refused: Case { verdict: Allow, caller: true, in_script: true, ..BASE } => Refused, "allow", "allow[0]", "cannot be called from a script", asked 0;
    deny_inside_a_script_is_refused: Case { verdict: Deny, in_script: true, ..BASE } => Refused, "deny", "deny[0]", "denied by policy", asked 0;
}

#[tokio::test]
async fn a_tool_command_inside_a_script_names_its_script() {
    let outcome = admit(Case {
        in_script: true,
        ..BASE
    })
    .await;
    assert_eq!(outcome.parent.as_deref(), Some("s1"));
    assert_eq!(admit(BASE).await.parent, None);
}

#[tokio::test]
async fn an_unknown_tool_is_refused_before_policy() {
    let mut unknown = call("c1", json!({"path": "allow/x"}));
    unknown.name = "nope".to_owned();
    let outcome = admit_call(BASE, unknown).await;
    assert_eq!(
        (outcome.got, outcome.verdict.as_str(), outcome.rule.as_str()),
        (Refused, "invalid", "unknown_tool")
    );
    assert!(outcome.text.contains("the tools are tool"), "{outcome:#?}");
}

#[tokio::test]
async fn arguments_that_are_not_an_object_are_refused() {
    let outcome = admit_call(BASE, call("c1", json!(["allow/x"]))).await;
    assert_eq!(
        (outcome.got, outcome.verdict.as_str(), outcome.rule.as_str()),
        (Refused, "invalid", "arguments")
    );
}

#[tokio::test]
async fn arguments_the_provider_could_not_parse_are_refused() {
    let mut broken = call("c1", json!({}));
    broken.invalid_arguments = Some("cut off".to_owned());
    let outcome = admit_call(BASE, broken).await;
    assert_eq!(
        (outcome.got, outcome.verdict.as_str(), outcome.rule.as_str()),
        (Refused, "invalid", "arguments")
    );
    assert!(outcome.text.contains("cut off"), "{outcome:#?}");
}

#[tokio::test]
async fn a_call_the_tool_cannot_resolve_is_denied_by_the_arguments_guard() {
    let outcome = admit_call(BASE, call("c1", json!({}))).await;
    assert_eq!(
        (outcome.got, outcome.verdict.as_str(), outcome.rule.as_str()),
        (Refused, "deny", "guard:arguments")
    );
    assert!(outcome.text.contains("`path` is required"), "{outcome:#?}");
}

#[tokio::test]
async fn the_users_changed_file_is_refused_even_where_the_policy_allows() {
    let world = World::new(BASE, Vec::new());
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    agent.protect_user_changes([PathBuf::from("/w/allow/x")]);
    let result = agent
        .handle(&call("c1", json!({"path": "allow/x"})), &mut emitter)
        .await;
    let Ok(Admitted::Done(message)) = result else {
        panic!("not refused");
    };
    assert_eq!(done(&message, world.runs()).0, Refused);
    assert!(sink.0.iter().any(|event| matches!(
        event,
        Event::ToolDecided(ToolDecided { rule, .. }) if rule == "guard:user_changes"
    )));
}

fn turn(calls: Vec<ToolCall>) -> ChatResponse {
    ChatResponse {
        tool_calls: calls,
        ..ChatResponse::default()
    }
}

#[tokio::test]
async fn the_loop_runs_an_allowed_call_and_ends_on_the_answer() {
    let world = World::new(
        BASE,
        vec![turn(vec![call("c1", json!({"path": "allow/x"}))])],
    );
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    let stop = agent.run(&mut emitter).await;
    assert_eq!(
        stop,
        Stop::Answered {
            content: "done".to_owned()
        }
    );
    assert_eq!((world.runs(), agent.iterations()), (1, 2));
}

#[tokio::test]
async fn a_paused_call_lets_the_turns_other_calls_run_first() {
    let case = Case {
        on_ask: OnAsk::Pause,
        ..BASE
    };
    let world = World::new(
        case,
        vec![turn(vec![
            call("c1", json!({"path": "ask/x"})),
            call("c2", json!({"path": "allow/x"})),
        ])],
    );
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    let Stop::Paused { pending } = agent.run(&mut emitter).await else {
        panic!("did not pause");
    };
    assert_eq!(pending.len(), 1);
    assert_eq!(
        (pending[0].id.as_str(), pending[0].kind),
        ("c1", ForApproval)
    );
    assert_eq!(world.runs(), 1);
    let open: Vec<String> = agent.open_calls().into_iter().map(|c| c.id).collect();
    assert_eq!(open, ["c1"]);
}

#[tokio::test]
async fn calls_past_the_turns_limit_are_refused() {
    let mut world = World::new(
        BASE,
        vec![turn(vec![
            call("c1", json!({"path": "allow/x"})),
            call("c2", json!({"path": "allow/y"})),
        ])],
    );
    world.limits.max_tool_calls_per_turn = 1;
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    agent.run(&mut emitter).await;
    assert_eq!(world.runs(), 1);
    assert!(sink.0.iter().any(|event| matches!(
        event,
        Event::ToolDecided(ToolDecided { call_id, rule, .. }) if call_id == "c2" && rule == "limit:tool_calls_per_turn"
    )));
}

/// Answers the one open call `c1` of the fake caller tool as `ybs resume`
/// would, and returns what the agent said and the call's result.
async fn answer_caller(answer: Option<Answer>) -> (Option<Stop>, Option<Message>) {
    let world = World::new(
        Case {
            caller: true,
            ..BASE
        },
        Vec::new(),
    );
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    agent.messages.push(Message::Assistant {
        content: String::new(),
        tool_calls: vec![call("c1", json!({"path": "allow/x"}))],
    });
    let answers: HashMap<String, Answer> = answer
        .map(|answer| ("c1".to_owned(), answer))
        .into_iter()
        .collect();
    let stop = agent.answer(&answers, "ci-bot", &mut emitter).await;
    assert_eq!(world.runs(), 0, "a caller tool never runs here");
    let last = agent.messages.last().cloned();
    (stop, last.filter(|m| matches!(m, Message::Tool { .. })))
}

#[tokio::test]
async fn a_caller_tools_output_becomes_its_result() {
    let (stop, result) = answer_caller(Some(Answer::Output(json!({"n": 1})))).await;
    assert_eq!(stop, None);
    let Some(Message::Tool {
        content, is_error, ..
    }) = result
    else {
        panic!("no result");
    };
    assert_eq!((content.as_str(), is_error), (r#"{"n":1}"#, false));
}

#[tokio::test]
async fn a_caller_tools_error_becomes_a_failed_result() {
    let (stop, result) = answer_caller(Some(Answer::Error("no disk".to_owned()))).await;
    assert_eq!(stop, None);
    let Some(Message::Tool {
        content, is_error, ..
    }) = result
    else {
        panic!("no result");
    };
    assert_eq!((content.as_str(), is_error), ("error: no disk", true));
}

#[tokio::test]
async fn an_unanswered_pending_call_is_an_internal_error() {
    let (stop, result) = answer_caller(None).await;
    let Some(Stop::Error { reason, message }) = stop else {
        panic!("not an error: {stop:?}");
    };
    assert_eq!(reason, Reason::InternalError);
    assert!(message.contains("`c1` was not answered"), "{message}");
    assert!(result.is_none());
}

fn reply(content: &str, finish_reason: crate::llm::FinishReason) -> ChatResponse {
    ChatResponse {
        content: content.to_owned(),
        finish_reason,
        ..ChatResponse::default()
    }
}

#[tokio::test]
async fn an_empty_reply_is_told_once_per_task_fix_attempts_included() {
    use crate::llm::FinishReason::Stop as Said;
    let world = World::new(
        BASE,
        vec![
            reply("", Said),
            reply("first answer", Said),
            reply("", Said),
        ],
    );
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    let stop = agent.run(&mut emitter).await;
    assert_eq!(
        stop,
        Stop::Answered {
            content: "first answer".to_owned()
        }
    );
    assert_eq!(agent.iterations(), 2);
    // A check failed: the fix attempt's empty reply ends the task.
    agent.push_user("the check failed", &mut emitter);
    let stop = agent.run(&mut emitter).await;
    assert!(
        matches!(
            stop,
            Stop::Failed {
                reason: Reason::EmptyAnswer,
                ..
            }
        ),
        "{stop:?}"
    );
    assert_eq!(agent.iterations(), 3);
}

#[tokio::test]
async fn a_cut_reply_is_followed_by_a_request_to_go_on_each_time() {
    use crate::llm::FinishReason::Length as Cut;
    let world = World::new(BASE, vec![reply("part", Cut), reply("", Cut)]);
    let mut sink = Sink::default();
    let mut emitter = Emitter::new("t", &mut sink);
    let mut agent = world.agent();
    let stop = agent.run(&mut emitter).await;
    assert_eq!(
        stop,
        Stop::Answered {
            content: "done".to_owned()
        }
    );
    assert_eq!(agent.iterations(), 3);
    let asked = agent
        .messages()
        .iter()
        .filter(
            |message| matches!(message, Message::User { content } if content == super::nudge::CUT),
        )
        .count();
    assert_eq!(asked, 2);
}
