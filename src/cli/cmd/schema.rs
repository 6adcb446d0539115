//! `ybs schema transcript|task|events|state`: prints the JSON Schema (draft
//! 2020-12, pretty, keys in a stable order) of one format. The committed
//! copies in `docs/schema/` must equal this output (tests/suite/schema.rs).

use super::super::args::{SchemaArgs, SchemaFormat};
use crate::core::{Environ, exit};
use crate::report::Level;
use crate::runner::schemas::Schema;

pub fn schema(args: &SchemaArgs, environ: &Environ) -> u8 {
    let schema = match args.format {
        SchemaFormat::Transcript => Schema::Transcript,
        SchemaFormat::Events => Schema::Events,
        SchemaFormat::Task => Schema::Task,
        SchemaFormat::State => Schema::State,
    };
    super::common::printer(Level::Normal, false, environ).result(&schema.render());
    exit::OK
}
