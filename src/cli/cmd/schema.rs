//! `ybs schema transcript|task|events|state`: prints the JSON Schema (draft
//! 2020-12, pretty, keys in a stable order) of one format. The committed
//! copies in `docs/schema/` must equal this output (tests/suite/schema.rs).

use serde_json::Value;

use super::super::args::{SchemaArgs, SchemaFormat};
use super::super::printer::{Level, Printer};
use crate::core::exit;
use crate::{report, task};

pub fn schema(args: &SchemaArgs) -> u8 {
    Printer::new(Level::Normal, false).result(&render(args.format));
    exit::OK
}

/// The schema of `format` as pretty JSON, without a trailing newline.
pub fn render(format: SchemaFormat) -> String {
    format!("{:#}", value(format))
}

fn value(format: SchemaFormat) -> Value {
    match format {
        SchemaFormat::Transcript => report::schema::transcript(),
        SchemaFormat::Events => report::schema::events(),
        SchemaFormat::Task => task::schema::task(),
        SchemaFormat::State => crate::runner::state::schema(),
    }
}
