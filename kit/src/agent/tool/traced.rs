//! A tool call as a trace run: its tags and safe metadata, and direct calls with their own
//! trace options.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Tool, ToolContext, ToolExecution};
use crate::graph::Pause;
use crate::message::ToolCall;
use crate::trace::{Run, RunKind, ToolInfo, TraceOptions};

impl Tool {
    /// Tags every trace run of this tool carries (with the agent's and the call's).
    ///
    /// ```
    /// use kit::tool::Tool;
    /// let t = Tool::from_fn("ping", "Replies pong.", serde_json::json!({"type": "object"}),
    ///     |_, _| async { Ok::<_, kit::tool::ToolError>("pong") })
    ///     .tags(["network"])
    ///     .trace_metadata("team", "infra");
    /// assert_eq!(t.trace_tags(), ["network"]);
    /// ```
    #[must_use]
    pub fn tags<I, S>(mut self, tags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut all: Vec<String> = self.tags.to_vec();
        all.extend(tags.into_iter().map(Into::into));
        self.tags = Arc::from(all);
        self
    }

    /// A metadata entry every trace run of this tool carries. Like every trace field it is
    /// redacted first (secret-looking keys and values never leave).
    #[must_use]
    pub fn trace_metadata(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        Arc::make_mut(&mut self.metadata).insert(key.into(), value.into());
        self
    }

    /// The tags of this tool's trace runs.
    pub fn trace_tags(&self) -> &[String] {
        &self.tags
    }

    /// Describes a started tool run: the tool, the call, its tags and metadata (`tool_name`,
    /// `tool_call_id`, and the tool's own).
    pub(crate) fn describe_run(&self, run: &Run, call: &ToolCall) {
        if !run.is_recording() && run.span().is_disabled() {
            return;
        }
        run.set_tool(ToolInfo {
            name: call.name.clone(),
            call_id: call.id.clone(),
            description: self.description().to_string(),
        });
        if run.is_recording() {
            run.add_metadata("tool_name", Value::from(call.name.clone()));
            run.add_metadata("tool_call_id", Value::from(call.id.clone()));
            for (k, v) in self.metadata.iter() {
                run.add_metadata(k, v.clone());
            }
            run.add_tags(self.tags.iter().cloned());
        }
    }

    /// Runs the tool on a call, as [`execute`](Self::execute) does, as one trace run with
    /// these options: a child of the current run (or a root of the global tracer), named
    /// after the tool, with the options' metadata; `TraceOptions::disabled()` records nothing
    /// for it and everything it starts.
    ///
    /// ```
    /// use kit::tool::{Tool, ToolContext};
    /// use kit::trace::TraceOptions;
    /// use kit::ToolCall;
    ///
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// let echo = Tool::from_fn("echo", "Echoes.", serde_json::json!({"type": "object"}),
    ///     |args, _| async move { Ok::<_, kit::tool::ToolError>(args.to_string()) });
    /// let call = ToolCall::new("echo", serde_json::json!({"x": 1}));
    /// let done = echo
    ///     .execute_traced(&call, ToolContext::detached(), &TraceOptions::new().metadata("purpose", "demo"))
    ///     .await
    ///     .ok();
    /// assert_eq!(done.map(|d| d.message.text()).as_deref(), Some("{\"x\":1}"));
    /// # }
    /// ```
    pub async fn execute_traced(
        &self,
        call: &ToolCall,
        ctx: ToolContext,
        options: &TraceOptions,
    ) -> Result<ToolExecution, Pause> {
        let run = crate::trace::global().start(
            &call.name,
            RunKind::Tool,
            || call.args.clone(),
            Some(options),
        );
        self.describe_run(&run, call);
        let execution = run.clone().scope(self.execute(call, ctx)).await;
        finish_tool_run(&run, &execution);
        execution
    }
}

/// Ends a tool run with what the call came to.
pub(crate) fn finish_tool_run(run: &Run, execution: &Result<ToolExecution, Pause>) {
    // A failure also marks the run's `tracing` span; the outputs only matter when recorded.
    let failed = matches!(execution, Ok(done) if done.message.is_error());
    if !failed && !run.is_recording() {
        return;
    }
    match execution {
        Err(_) => run.finish(json!({"interrupted": true})),
        Ok(done) if done.message.is_error() => run.fail(&done.message.text()),
        Ok(done) => run.finish(json!({ "result": done.message.content })),
    }
}
