//! The tools offered to one task, by name.

use std::sync::Arc;

use crate::core::ToolSpec;

use super::Tool;

/// Name → tool, in the order offered to the model.
#[derive(Clone, Default)]
pub struct Registry {
    tools: Vec<Arc<dyn Tool>>,
    /// Tools of the task not offered to the model: the policy allows
    /// none of their calls. A call to one is still decided (and refused)
    /// by the policy, so the record names the rule.
    withheld: Vec<Arc<dyn Tool>>,
}

impl Registry {
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a tool; a later tool with the same name replaces the earlier.
    pub fn add(&mut self, tool: Arc<dyn Tool>) {
        let name = tool.spec().name.clone();
        self.tools.retain(|existing| existing.spec().name != name);
        self.tools.push(tool);
    }

    /// Keeps a tool out of the offer (see [`Registry::withheld`]).
    pub fn withhold(&mut self, tool: Arc<dyn Tool>) {
        self.withheld.push(tool);
    }

    /// A tool of the task that is not offered, by name.
    pub fn withheld(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.withheld.iter().find(|tool| tool.spec().name == name)
    }

    /// The names of the tools not offered.
    pub fn withheld_names(&self) -> Vec<String> {
        self.withheld
            .iter()
            .map(|tool| tool.spec().name.clone())
            .collect()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Tool>> {
        self.tools.iter().find(|tool| tool.spec().name == name)
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        self.tools.iter().map(|tool| tool.spec().clone()).collect()
    }

    pub fn names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|tool| tool.spec().name.clone())
            .collect()
    }
}
