//! Command-line types. Doc comments are the `--help` text.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::core::shard::ShardArg;

/// `ybs --version`: the crate version and the commit it was built from
/// (short sha, or `unknown` when built outside git; see build.rs).
pub const VERSION: &str = concat!(env!("CARGO_PKG_VERSION"), " (", env!("YBS_COMMIT"), ")");

/// Run LLM coding agents the way CI runs tests.
///
/// ybs reads YAML task files, drives an agent loop (LLM + tools) against a
/// provider, answers every confirmation from a declared policy, verifies the
/// result with checks, and reports like a test runner: JSON transcripts,
/// JSONL events, JUnit XML, a Markdown summary and an honest exit code.
///
/// Exit codes: 0 every task passed (or matched `expect`), 1 a task failed,
/// 2 usage/config/task-file error (nothing ran), 3 a task paused awaiting
/// tool results or approvals (`ybs resume`) and none failed, 4
/// infrastructure error (provider, auth, quota, git) or a task skipped
/// (the batch stopped before it) and no task failed, 130 interrupted.
#[derive(Debug, Parser)]
#[command(name = "ybs", version = VERSION, about, long_about, max_term_width = 100)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run task files (directories are searched for *.yaml and *.yml).
    Run(Box<RunArgs>),
    /// Go on with the paused tasks of a run (exit 3) once their pending
    /// calls are answered: caller tool results and approvals.
    Resume(ResumeArgs),
    /// Check task files and config without running anything; reports every error.
    Validate(ValidateArgs),
    /// Inspect policy decisions.
    #[command(subcommand)]
    Policy(PolicyCommand),
    /// External tools: list them, print a schema, invoke one, serve them over MCP.
    Tools(ToolsArgs),
    /// Reports: merge the outputs of shards, a task as a regression
    /// fixture, the HTML page of an output directory.
    #[command(subcommand)]
    Report(ReportCommand),
    /// Print the JSON Schema (draft 2020-12) of a file format ybs reads or writes.
    Schema(SchemaArgs),
    /// The kernel confinement on this machine.
    #[command(subcommand)]
    Sandbox(SandboxCommand),
    /// Interactive REPL with the same tools and policy as a task, starting
    /// empty. Needs a terminal; `/help` lists the commands.
    Chat(ChatArgs),
    /// Remove what earlier runs left in this repository: ybs's worktrees
    /// (`.ybs-worktrees/<run-id>/<task-id>`) and branches
    /// (`ybs/<run-id>/<task-id>`) that hold no work. A worktree with
    /// uncommitted changes, or a branch whose commits no other branch has,
    /// is kept unless `--force`; salvage refs are always kept.
    Clean(CleanArgs),
    /// Print a shell completion script on stdout, e.g.
    /// `ybs completions bash > ~/.local/share/bash-completion/completions/ybs`.
    Completions(CompletionsArgs),
    /// Print the man page (roff) on stdout, e.g. `ybs man | man -l -`;
    /// `ybs man run` prints ybs-run(1).
    Man(ManArgs),
}

#[derive(Debug, Subcommand)]
pub enum SandboxCommand {
    /// Probe each layer (namespaces, Landlock, seccomp) and print what
    /// works, what is missing and why, and the fix when AppArmor's
    /// restriction of user namespaces is the cause. Exit 0 when every
    /// layer works, 4 when one is missing.
    Check(SandboxCheckArgs),
}

#[derive(Debug, Clone, Args)]
pub struct SandboxCheckArgs {
    /// Print one JSON object on stdout instead of the lines.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Args)]
pub struct CleanArgs {
    /// Only what the run with this id left (`ybs/<run-id>/…`).
    #[arg(long, value_name = "RUN_ID")]
    pub run: Option<String>,
    /// List what would be removed and what kept; remove nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Also remove worktrees with uncommitted changes and branches with
    /// commits no other branch has (salvage refs stay).
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

#[derive(Debug, Clone, Args)]
pub struct ManArgs {
    /// A subcommand, for its own page (`ybs-run(1)`); none for ybs(1).
    #[arg(value_name = "SUBCOMMAND")]
    pub command: Option<String>,
}

#[derive(Debug, Clone, Args)]
pub struct ChatArgs {
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Run shell commands and external tools without kernel confinement (namespaces, Landlock, seccomp).
    #[arg(long)]
    pub no_sandbox: bool,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Merge the output directories of `ybs run --shard K/N` (or of any
    /// runs) into one: junit.xml, summary.md and every task's directory.
    ///
    /// The per-task transcripts are the source of truth. Exit codes follow
    /// the merged tasks as `run`'s do: 0 all passed, 1 a task failed, 3 a
    /// task paused, 4 a task errored (or a shard or task is missing) and
    /// none failed; 2 bad inputs (no transcripts, a task in two
    /// directories), nothing written.
    Merge(MergeArgs),
    /// Make a regression fixture of one task of a run recorded with
    /// `--record`: DIR/<task>.yaml (the task alone, on the `replay`
    /// provider) and DIR/<task>.cassette.json (its masked interactions),
    /// so that `ybs run DIR/<task>.yaml` replays it offline to the same
    /// end. Run it from the directory the run ran in. Exit 0, or 2 when
    /// the task's directory has no transcript or no cassette.
    Fixture(FixtureArgs),
    /// Write the HTML report of an output directory: one self-contained
    /// page (no network, works from file://) over every task directory
    /// in it that holds a transcript.json. `ybs run`, `resume` and
    /// `report merge` write OUT/report.html themselves. Exit 0, or 2 when
    /// DIR holds no transcript.
    Html(HtmlArgs),
}

#[derive(Debug, Clone, Args)]
pub struct HtmlArgs {
    /// The output directory (a `--out` of `ybs run`).
    #[arg(value_name = "OUT")]
    pub dir: PathBuf,
    /// Where the page goes. Default: OUT/report.html.
    #[arg(long, value_name = "FILE")]
    pub to: Option<PathBuf>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct FixtureArgs {
    /// The task's output directory, OUT/<task-id>.
    #[arg(value_name = "OUT/TASK")]
    pub dir: PathBuf,
    /// Where the fixture goes (created when missing).
    #[arg(long, value_name = "DIR")]
    pub to: PathBuf,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// The output directories to merge (each a `--out` of `ybs run`).
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// Where the merged outputs go.
    #[arg(long, value_name = "DIR")]
    pub out: PathBuf,
    /// As `run --min-pass-rate`: a task its `--repeat` runs found flaky
    /// passes at a pass rate of at least R (0 to 1), fails below it.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub min_pass_rate: Option<f64>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct SchemaArgs {
    /// The format.
    #[arg(value_enum)]
    pub format: SchemaFormat,
}

/// The formats `ybs schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchemaFormat {
    /// OUT/<task-id>/transcript.json: the whole run of one task.
    Transcript,
    /// A task file (YAML): one task at the top level, or `tasks:` with `defaults:`.
    Task,
    /// One line of OUT/<task-id>/events.jsonl (and of `run --json` stdout).
    Events,
    /// OUT/<task-id>/state.json: a paused task, for `ybs resume`.
    State,
}

/// `--config` and `--policy`, shared by every command that reads config.
#[derive(Debug, Clone, Args)]
pub struct ConfigArgs {
    /// Extra config file, applied after /etc/ybs/config.json, ~/.config/ybs/config.json, ~/.ybs.json and ./.ybs.json.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Operator policy file: a ceiling that task files can narrow but never widen
    /// (its allow rules also enable repository tools).
    #[arg(long, value_name = "FILE")]
    pub policy: Option<PathBuf>,
}

/// The provider flags of `run` and `chat`.
#[derive(Debug, Clone, Args)]
pub struct ProviderArgs {
    /// Provider: openai, anthropic, ollama, apple or replay.
    #[arg(long, value_name = "NAME")]
    pub provider: Option<String>,
    /// Model name, as the provider knows it.
    #[arg(long, value_name = "NAME")]
    pub model: Option<String>,
    /// Provider base URL (https://api.openai.com/v1, https://api.anthropic.com, http://localhost:11434, apple: http://127.0.0.1:1976/v1).
    #[arg(long, value_name = "URL")]
    pub endpoint: Option<String>,
    /// Answer from this cassette (replay provider; no network).
    #[arg(long, value_name = "FILE")]
    pub cassette: Option<PathBuf>,
}

/// Output verbosity, shared by commands.
#[derive(Debug, Clone, Args)]
pub struct Verbosity {
    /// Print only failures and the final line.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print more: of a run (`run`, `resume`, `chat`), also the model's
    /// text as it streams in, each tool's first output line, notes and git
    /// steps.
    #[arg(short, long, global = true)]
    pub verbose: bool,
}

#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Task files or directories. Default: `tasks/` if it exists.
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Output directory for transcripts, events, JUnit and summary.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// JUnit XML file. Default: OUT/junit.xml.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Set a task variable, overriding the file's `vars` (repeatable).
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Run only tasks whose id matches this glob (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub filter: Vec<String>,
    /// Run only shard K of N (1 ≤ K ≤ N) of the selected tasks, e.g. `2/8`;
    /// or `auto` (`auto/N`): K and N from the CI engine's variables
    /// (GitLab `CI_NODE_INDEX`/`CI_NODE_TOTAL`, CircleCI, Buildkite, a
    /// Kubernetes Indexed Job's `JOB_COMPLETION_INDEX` with `auto/N`,
    /// else `YBS_SHARD_INDEX` from 0 and `YBS_SHARD_TOTAL`). A task's
    /// shard is a stable hash of `file#id`; a shard may be empty. Merge
    /// the shards' outputs with `ybs report merge`.
    #[arg(long, value_name = "K/N|auto", value_parser = parse_shard)]
    pub shard: Option<ShardArg>,
    /// How `--shard` splits the tasks: `hash` (the default: a task never
    /// moves when others are added) or `durations`, balanced by the past
    /// durations in `--durations FILE` (longest first onto the least
    /// loaded shard).
    #[arg(long, value_name = "hash|durations", requires = "shard", value_parser = ["hash", "durations"])]
    pub shard_by: Option<String>,
    /// The past durations for `--shard-by durations`: an earlier run's or
    /// merge's `durations.json`, or its `junit.xml`.
    #[arg(long, value_name = "FILE")]
    pub durations: Option<PathBuf>,
    /// Run up to N tasks at once (default 1). With N > 1 a task that
    /// commits runs in its own git worktree on branch `ybs/<run-id>/<task-id>`.
    #[arg(long, value_name = "N", env = "YBS_JOBS", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..))]
    pub jobs: u16,
    /// Run each task N times (each run in its own worktree under --jobs):
    /// the reports give each task's pass rate, and a task that passed some
    /// runs but not all is `flaky` (a failure, exit 1, unless --min-pass-rate
    /// accepts its pass rate).
    /// Run k of task `t` is `t#k` in the outputs.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1000))]
    pub repeat: u16,
    /// With --repeat: a flaky task passes at a pass rate of at least R
    /// (0 to 1) and fails below it.
    #[arg(long, value_name = "R", value_parser = parse_rate)]
    pub min_pass_rate: Option<f64>,
    /// Run the tasks once per model, comma-separated: `--models a,b`. Task
    /// `t` with model `a` is `t@a` in the outputs; JUnit has one suite per
    /// model and the summary compares them.
    #[arg(
        long,
        value_name = "MODEL,...",
        value_delimiter = ',',
        conflicts_with = "model"
    )]
    pub models: Vec<String>,
    /// The whole run's budget in USD: once its spending reaches it, no
    /// new task starts (running ones finish) and the rest are reported
    /// as skipped. Needs the models' prices (`llm.price`).
    #[arg(long, value_name = "USD", value_parser = parse_budget)]
    pub max_cost_usd: Option<f64>,
    /// Decide and record tool calls without executing them.
    #[arg(long)]
    pub dry_run: bool,
    /// Never commit: leave every change in the work tree.
    #[arg(long)]
    pub no_commit: bool,
    /// Run in a temporary copy of the current directory (its files as git
    /// sees them, without `.git`), removed afterwards: the checkout stays
    /// as it is and nothing is committed; the outputs go to --out as usual.
    #[arg(long)]
    pub scratch: bool,
    /// Run even if the work tree has uncommitted changes; they stay out of the task's commit.
    #[arg(long)]
    pub allow_dirty: bool,
    /// Record every provider request and response to this cassette, to replay later with --cassette.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Print JSONL events on stdout and nothing else.
    #[arg(long)]
    pub json: bool,
    /// After the run, print each task's final answer (OUT/<task>/output.md)
    /// on stdout; the progress and result lines go to stderr instead.
    /// With --json the answers are in the `task.output` events.
    #[arg(long, conflicts_with = "json")]
    pub print_output: bool,
    /// Run shell commands and external tools without kernel confinement (namespaces, Landlock, seccomp); every output says so.
    #[arg(long)]
    pub no_sandbox: bool,
    /// Answer `ask` decisions at a `[y]es / [n]o / [a]lways` prompt instead
    /// of `policy.on_ask`. Needs a terminal on stdin and stderr; without
    /// one it is an error (exit 2), never a wait.
    #[arg(long)]
    pub interactive: bool,
    #[command(flatten)]
    pub adhoc: AdHocArgs,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

/// `ybs run --prompt TEXT`: one task without a task file
/// (docs/task-files.md, "Ad-hoc runs").
#[derive(Debug, Clone, Args)]
pub struct AdHocArgs {
    /// Run one task with this prompt instead of task files (`-` reads it
    /// from stdin); it runs as the task file `--save` writes would.
    #[arg(short = 'p', long, value_name = "TEXT", conflicts_with = "paths")]
    pub prompt: Option<String>,
    /// The ad-hoc task's id (default `prompt`).
    #[arg(long, value_name = "ID", requires = "prompt")]
    pub id: Option<String>,
    /// Allow calls matching RULE, e.g. 'run_shell(cargo test*)' (repeatable).
    #[arg(long, value_name = "RULE", requires = "prompt")]
    pub allow: Vec<String>,
    /// Deny calls matching RULE, e.g. 'run_shell(git push*)' (repeatable).
    #[arg(long, value_name = "RULE", requires = "prompt")]
    pub deny: Vec<String>,
    /// A check: a command that must exit 0 after the agent stops (repeatable).
    #[arg(long = "check", value_name = "CMD", requires = "prompt")]
    pub checks: Vec<String>,
    /// Write the equivalent task file to FILE and exit without running it
    /// (`ybs run FILE` then runs the same task).
    #[arg(long, value_name = "FILE", requires = "prompt")]
    pub save: Option<PathBuf>,
}

/// `ybs resume OUT`: answers every pending call of the paused tasks in
/// OUT, then goes on with them under the policy, config and limits read
/// again. Exit codes as for `run`; 2 when an answer is missing or wrong
/// or the state was edited (nothing runs then, the state is untouched).
#[derive(Debug, Clone, Args)]
pub struct ResumeArgs {
    /// The output directory of the run that paused (its `--out`).
    #[arg(value_name = "OUT")]
    pub out: PathBuf,
    /// Resume only this task (default: every paused task in OUT).
    #[arg(long, value_name = "ID")]
    pub task: Option<String>,
    /// Results of caller tool calls (and approvals): a JSON file, or `-` for stdin:
    /// {"results": [{"id": ..., "output": <JSON>} | {"id": ..., "error": "..."} | {"id": ..., "approved": true|false}]}.
    #[arg(long, value_name = "FILE|-")]
    pub results: Option<PathBuf>,
    /// Approve a pending approval by call id, or `all` (repeatable).
    #[arg(long, value_name = "ID|all")]
    pub approve: Vec<String>,
    /// Deny a pending approval by call id, or `all` (repeatable).
    #[arg(long, value_name = "ID|all")]
    pub deny: Vec<String>,
    /// Who approves, for the transcript (default: $GITHUB_ACTOR, else `cli`).
    #[arg(long, value_name = "NAME")]
    pub by: Option<String>,
    /// Resume even though the task file or the policy changed since the pause.
    #[arg(long)]
    pub allow_changed: bool,
    /// Print each paused task's pending calls (id, kind, tool, arguments
    /// with secrets masked, rule) and exit 0, resuming nothing.
    #[arg(long, conflicts_with_all = ["results", "approve", "deny"])]
    pub list: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// JUnit XML file. Default: OUT/junit.xml.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Set a task variable, as given to the run that paused (repeatable).
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    /// Print JSONL events on stdout and nothing else.
    #[arg(long)]
    pub json: bool,
    /// Run shell commands and external tools without kernel confinement (Landlock + seccomp).
    #[arg(long)]
    pub no_sandbox: bool,
    /// Never commit: leave every change in the work tree. A run that
    /// paused under --no-commit or --scratch resumes so without it.
    #[arg(long)]
    pub no_commit: bool,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct ValidateArgs {
    /// Task files or directories. Default: `tasks/` if it exists.
    pub paths: Vec<PathBuf>,
    #[command(flatten)]
    pub config: ConfigArgs,
    /// The provider flags `ybs run` would get: a task with no model to run
    /// with (no provider, no cassette) is an error, as it is for `run`.
    #[command(flatten)]
    pub provider: ProviderArgs,
    /// Check what `ybs run` would refuse only for the tasks whose id
    /// matches this glob, as `run --filter` (repeatable).
    #[arg(long, value_name = "GLOB")]
    pub filter: Vec<String>,
    /// Set a task variable (repeatable), as for `run`.
    #[arg(long = "var", value_name = "KEY=VALUE", value_parser = parse_var)]
    pub vars: Vec<(String, String)>,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsArgs {
    #[command(subcommand)]
    pub command: ToolsCommand,
}

/// External tools are executables in ./tools, ~/.ybs/tools, `tools.search_paths`
/// or `tools.external` that read one JSON object on stdin and print one JSON
/// envelope. A tool from the repository (./tools) runs only once enabled: by a
/// task, by the operator config, by the policy, or by naming it here.
#[derive(Debug, Clone, Subcommand)]
pub enum ToolsCommand {
    /// List every external tool with its status, source and call metrics.
    List(ToolsListArgs),
    /// Print the JSON Schema of a tool as the model is offered it.
    Schema(ToolsSchemaArgs),
    /// Run a tool once through the same path as the agent, policy included,
    /// and print its envelope. Exit 0 on success, 1 on tool failure, 2 on bad input.
    Invoke(ToolsInvokeArgs),
    /// Serve the tools over MCP on stdio, or Streamable HTTP with --listen
    /// (docs/mcp.md): every call decided by --policy (without one, every
    /// call is denied) and run confined; tools added to the discovery
    /// directories appear within seconds. Ends on EOF, SIGTERM or SIGINT.
    Serve(ToolsServeArgs),
    /// Per-tool call metrics (calls, failures, p50/p95) of every running
    /// `ybs tools serve`.
    Status(ToolsListArgs),
}

/// Options shared by the `tools` subcommands.
#[derive(Debug, Clone, Args)]
pub struct ToolsCommon {
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Run external tools (and the `TOOL --schema` call that asks one for its arguments) without kernel confinement (namespaces, Landlock, seccomp); the output says so.
    #[arg(long)]
    pub no_sandbox: bool,
    #[command(flatten)]
    pub verbosity: Verbosity,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsListArgs {
    /// Print JSON (one document) instead of a table.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub common: ToolsCommon,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsSchemaArgs {
    /// The tool's name: a built-in's (`read_file`), or an external tool's
    /// (its file name without extension, or its config name).
    pub name: String,
    #[command(flatten)]
    pub common: ToolsCommon,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsServeArgs {
    /// Serve the built-in file tools too (read_file, write_file, edit_file,
    /// list_files, search_files).
    #[arg(long)]
    pub builtin: bool,
    /// Serve over Streamable HTTP at http://ADDR/mcp instead of stdio, on a
    /// loopback address only (port 0 picks a free one; the address is
    /// printed on stdout). Ends on SIGTERM or SIGINT.
    #[arg(long, value_name = "127.0.0.1:PORT", value_parser = parse_listen)]
    pub listen: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub common: ToolsCommon,
}

#[derive(Debug, Clone, Args)]
pub struct ToolsInvokeArgs {
    /// The tool's name.
    pub name: String,
    /// The parameters, one JSON object (`-` reads it from stdin).
    #[arg(long, value_name = "JSON", default_value = "{}")]
    pub input: String,
    #[command(flatten)]
    pub common: ToolsCommon,
}

/// A flag's value that does not parse; clap prints it after the flag.
#[derive(Debug, thiserror::Error)]
enum BadValue {
    #[error("expected 127.0.0.1:PORT, [::1]:PORT or localhost:PORT")]
    Listen,
    #[error("expected an amount in USD above 0, like 2.50, got `{0}`")]
    Budget(String),
    /// The shard's own message.
    #[error("{0}")]
    Shard(String),
    #[error("expected a pass rate from 0 to 1, e.g. 0.8, got `{0}`")]
    Rate(String),
    #[error("expected KEY=VALUE, got `{0}`")]
    Var(String),
}

/// `127.0.0.1:PORT`, `[::1]:PORT` or `localhost:PORT`.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, BadValue> {
    let localhost = text
        .strip_prefix("localhost:")
        .and_then(|port| port.parse::<u16>().ok())
        .map(|port| std::net::SocketAddr::from(([127, 0, 0, 1], port)));
    localhost
        .or_else(|| text.parse().ok())
        .ok_or(BadValue::Listen)
}

fn parse_budget(text: &str) -> Result<f64, BadValue> {
    match text.trim().parse::<f64>() {
        Ok(usd) if usd.is_finite() && usd > 0.0 => Ok(usd),
        _ => Err(BadValue::Budget(text.to_owned())),
    }
}

fn parse_shard(text: &str) -> Result<ShardArg, BadValue> {
    text.parse().map_err(BadValue::Shard)
}

/// A pass rate: a number from 0 to 1.
fn parse_rate(text: &str) -> Result<f64, BadValue> {
    match text.trim().parse::<f64>() {
        Ok(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        _ => Err(BadValue::Rate(text.to_owned())),
    }
}

fn parse_var(text: &str) -> Result<(String, String), BadValue> {
    match text.split_once('=') {
        Some((key, value)) if !key.trim().is_empty() => {
            Ok((key.trim().to_owned(), value.to_owned()))
        }
        _ => Err(BadValue::Var(text.to_owned())),
    }
}

#[derive(Debug, Subcommand)]
pub enum PolicyCommand {
    /// Print how a call is decided and the rule that decides it, e.g.
    /// `ybs policy explain 'run_shell(cargo test && curl x)'`.
    Explain(ExplainArgs),
}

#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The call in string form: `tool(argument)`, e.g. `edit_file(src/lib.rs)`;
    /// `-` reads calls from stdin, one JSON string a line.
    pub call: String,
    /// Print the explanation as one JSON object (a line per call), with
    /// the parsed argv of every simple command.
    #[arg(long)]
    pub json: bool,
    /// Decide with this task's policy: `FILE` (single-task file) or `FILE#TASK-ID`.
    #[arg(long, value_name = "FILE#ID")]
    pub task: Option<String>,
    /// Decide as if shell commands ran under this sandbox: `full`
    /// (namespaces+landlock+seccomp), `reduced` (landlock+seccomp) or
    /// `none`. By default, what this machine's probe finds, as `ybs run`
    /// would (`none` with `safety.sandbox_enabled: false`).
    #[arg(long, value_name = "MODE", value_parser = ["full", "reduced", "none"])]
    pub sandbox: Option<String>,
    /// Decide as `ybs run --no-sandbox` would (`--sandbox none`).
    #[arg(long, conflicts_with = "sandbox")]
    pub no_sandbox: bool,
    #[command(flatten)]
    pub config: ConfigArgs,
}
