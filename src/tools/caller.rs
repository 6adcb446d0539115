//! Caller tools (`tools.caller:` in a task): offered to the model and
//! decided by policy like any tool, but never run by ybs. The agent
//! pauses the task with the call pending; whoever runs ybs executes it
//! and hands the result to `ybs resume` (docs/resume.md).

use futures_util::future::BoxFuture;
use serde_json::Value;

use super::{Target, Tool, ToolCtx, ToolError, ToolOutput};
use crate::core::ToolSpec;

/// One declared caller tool.
#[derive(Debug, Clone)]
pub struct CallerTool {
    spec: ToolSpec,
}

impl CallerTool {
    /// `parameters` is the JSON Schema of the arguments; `None` means any
    /// object.
    pub fn new(name: &str, description: &str, parameters: Option<Value>) -> Self {
        Self {
            spec: ToolSpec {
                name: name.to_owned(),
                description: description.to_owned(),
                parameters: parameters
                    .unwrap_or_else(|| serde_json::json!({"type": "object", "properties": {}})),
            },
        }
    }
}

impl Tool for CallerTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn is_caller(&self) -> bool {
        true
    }

    /// Nothing to resolve: the policy decides on the tool's name.
    fn target(&self, _args: &Value, _ctx: &ToolCtx) -> Result<Target, ToolError> {
        Ok(Target::default())
    }

    /// The agent pauses instead of calling; reaching this is a ybs bug.
    fn call<'a>(
        &'a self,
        _args: Value,
        _ctx: &'a ToolCtx,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        let name = self.spec.name.clone();
        Box::pin(async move {
            Err(ToolError::Fatal(format!(
                "caller tool `{name}` is run by the caller, not by ybs"
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_caller_tool_is_offered_but_never_runs() {
        let tool = CallerTool::new("deploy", "Deploy it", None);
        assert!(tool.is_caller());
        assert_eq!(tool.spec().parameters["type"], "object");
        let fixture = crate::tools::testing::Fixture::new();
        let result = futures_util::FutureExt::now_or_never(tool.call(Value::Null, &fixture.ctx));
        assert!(matches!(result, Some(Err(ToolError::Fatal(_)))));
    }
}
