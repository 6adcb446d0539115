//! The `script` tool's calls: the script runs on its own thread, and each
//! tool command in it comes back here to be resolved, decided by the
//! policy, guarded, run and recorded exactly like a direct call (with the
//! script's call as its `parent`), then answered.

use std::time::Instant;

use super::{Agent, Emitter, Stop};
use crate::core::{Message, Reason, ToolCall};
use crate::tools::ToolError;
use crate::tools::script::{InnerCall, InnerReply, ScriptTool};

impl Agent<'_> {
    /// Runs an allowed `script` call to its end.
    pub(super) async fn run_script(
        &mut self,
        call: &ToolCall,
        script: &ScriptTool,
        emitter: &mut Emitter<'_>,
    ) -> Result<Message, Stop> {
        let started = Instant::now();
        let mut run = match script.start(&call.arguments, self.budget.remaining()) {
            Ok(run) => run,
            Err(ToolError::Model(message)) => {
                return Ok(self.completed(call, false, true, started.elapsed(), &message, emitter));
            }
            Err(ToolError::Fatal(message)) => {
                return Err(Stop::Error {
                    reason: Reason::InternalError,
                    message,
                });
            }
        };
        let deadline = self
            .budget
            .remaining()
            .map(|left| tokio::time::Instant::now() + left);
        let timer = async move {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::pin!(timer);
        let mut count = 0_usize;
        let mut open = true;
        let output = loop {
            tokio::select! {
                inner = run.calls.recv(), if open => match inner {
                    Some(inner) => {
                        count += 1;
                        match self.inner_call(call, count, &inner, emitter).await {
                            Ok(reply) => inner.reply(reply),
                            Err(stop) => {
                                inner.reply(InnerReply::End("the task stopped".to_owned()));
                                return Err(stop);
                            }
                        }
                    }
                    None => open = false,
                },
                output = &mut run.done => break output,
                () = &mut timer => return Err(self.limit_stop(Reason::Timeout)),
            }
        };
        let Ok(output) = output else {
            return Err(Stop::Error {
                reason: Reason::InternalError,
                message: "the script's interpreter stopped without a result".to_owned(),
            });
        };
        let text = output.to_json().to_string();
        let ok = output.exit_code == 0;
        Ok(self.completed(call, ok, true, started.elapsed(), &text, emitter))
    }

    /// Handles tool command `number` of the script `parent` like a direct
    /// call, recorded as `<parent id>.<number>` with `parent` set.
    async fn inner_call(
        &mut self,
        parent: &ToolCall,
        number: usize,
        inner: &InnerCall,
        emitter: &mut Emitter<'_>,
    ) -> Result<InnerReply, Stop> {
        let call = ToolCall {
            id: format!("{}.{number}", parent.id),
            name: inner.name.clone(),
            arguments: inner.arguments.clone(),
            invalid_arguments: None,
            from_text: false,
        };
        let previous = self.parent.replace(parent.id.clone());
        let result = async {
            match self.admit(&call, emitter).await? {
                Ok(tool) => self.run_tool(&call, tool.as_ref(), emitter).await,
                Err(refused) => Ok(refused),
            }
        }
        .await;
        self.parent = previous;
        match result? {
            Message::Tool {
                content, is_error, ..
            } => Ok(InnerReply::Done {
                ok: !is_error,
                content,
            }),
            _ => Ok(InnerReply::Done {
                ok: false,
                content: "no result".to_owned(),
            }),
        }
    }
}
