//! L4 runner: one run of many tasks: selection, preparation, execution
//! with checks, git and outputs, interrupts.

pub mod adhoc;
mod agents_md;
mod answer;
pub mod approve;
mod batch;
mod breaker;
pub mod chat;
mod checks;
pub mod clean;
mod context;
mod dirs;
mod error;
mod front;
pub mod inspect;
mod lazy;
mod load;
mod matrix;
mod options;
mod parallel;
mod pause;
mod prepare;
mod redacting;
mod results;
pub mod resume;
mod rule_tools;
pub mod sandbox_check;
pub mod schemas;
pub mod scratch;
mod select;
mod session;
mod state;
mod subject;
mod task_run;
pub mod toolbox;
mod tools;
mod workspace;

// What the CLI takes: the doors' entry points and the types it passes.
pub use error::{LoadErrors, RunError};
pub use front::run;
pub use load::{Loaded, load, load_selected, load_text};
pub use matrix::Matrix;
pub use options::{Entry, MakeApprover, RunFlags, RunOptions, ShardSplit, StepOutputs, harden};
pub use pause::Resumed;
pub use results::{RunReport, TaskResult};
pub use session::{Ending, Session, Threads, finish};

// Shared by the rooms.
pub(crate) use batch::execute;
pub(crate) use context::RunContext;
pub(crate) use error::{PrepareError, SetupError};
pub(crate) use options::redactor;
pub(crate) use prepare::policy::{PolicyInputs, task_policy};
pub(crate) use prepare::workdir::{protected_files, task_workdir};
pub(crate) use prepare::{PreparedTask, discard, materialize, prepare_all, saved_work_notes};
pub(crate) use redacting::RedactingSink;
pub(crate) use select::{select, shard};
