//! The JSON Schemas ybs publishes (docs/outputs.md, `ybs schema`), each
//! built from the types that write the format.

use serde_json::Value;

use crate::{report, task};

/// A format `ybs schema` describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    Transcript,
    Events,
    Task,
    State,
}

impl Schema {
    /// The schema (draft 2020-12) as pretty JSON, keys in a stable order,
    /// without a trailing newline.
    pub fn render(self) -> String {
        format!("{:#}", self.value())
    }

    pub fn value(self) -> Value {
        match self {
            Self::Transcript => report::schema::transcript(),
            Self::Events => report::schema::events(),
            Self::Task => task::schema::task(),
            Self::State => super::state::schema(),
        }
    }
}
