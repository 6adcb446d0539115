//! One module per subcommand. Each returns the process exit code.

pub mod adhoc;
pub mod chat;
pub mod clean;
pub mod common;
pub mod completions;
pub mod policy;
pub mod report;
pub mod resume;
pub mod run;
pub mod sandbox;
pub mod schema;
pub mod tools;
pub mod validate;

use crate::core::Environ;

use super::args::{Cli, Command, PolicyCommand, ReportCommand, SandboxCommand};

/// Runs `cli`'s command with `environ`, the process environment the entry
/// read once: every command and the runner take their variables from it.
pub fn dispatch(cli: Cli, environ: &Environ) -> u8 {
    match cli.command {
        Command::Run(args) => run::run(&args, environ),
        Command::Resume(args) => resume::resume(&args, environ),
        Command::Validate(args) => validate::validate(&args, environ),
        Command::Policy(PolicyCommand::Explain(args)) => policy::explain(&args, environ),
        Command::Tools(args) => tools::tools(&args, environ),
        Command::Report(ReportCommand::Merge(args)) => report::merge(&args, environ),
        Command::Report(ReportCommand::Fixture(args)) => report::fixture(&args, environ),
        Command::Report(ReportCommand::Html(args)) => report::html(&args, environ),
        Command::Schema(args) => schema::schema(&args, environ),
        Command::Sandbox(SandboxCommand::Check(args)) => sandbox::check(&args, environ),
        Command::Chat(args) => chat::chat(&args, environ),
        Command::Clean(args) => clean::clean(&args, environ),
        Command::Completions(args) => completions::completions(&args, environ),
        Command::Man(args) => completions::man(&args, environ),
    }
}
