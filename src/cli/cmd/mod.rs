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

use super::args::{Cli, Command, PolicyCommand, ReportCommand, SandboxCommand};

pub fn dispatch(cli: Cli) -> u8 {
    match cli.command {
        Command::Run(args) => run::run(&args),
        Command::Resume(args) => resume::resume(&args),
        Command::Validate(args) => validate::validate(&args),
        Command::Policy(PolicyCommand::Explain(args)) => policy::explain(&args),
        Command::Tools(args) => tools::tools(&args),
        Command::Report(ReportCommand::Merge(args)) => report::merge(&args),
        Command::Report(ReportCommand::Fixture(args)) => report::fixture(&args),
        Command::Report(ReportCommand::Html(args)) => report::html(&args),
        Command::Schema(args) => schema::schema(&args),
        Command::Sandbox(SandboxCommand::Check(args)) => sandbox::check(&args),
        Command::Chat(args) => chat::chat(&args),
        Command::Clean(args) => clean::clean(&args),
        Command::Completions(args) => completions::completions(&args),
        Command::Man(args) => completions::man(&args),
    }
}
