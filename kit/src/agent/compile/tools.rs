//! The tools node: one task per tool call, through the tool-call chain.

use std::sync::Arc;

use futures::future::BoxFuture;

use crate::agent::middleware::{Runtime, ToolNext};
use crate::agent::{AgentState, AgentStateUpdate};
use crate::event::{EventData, EventKind};
use crate::graph::{NodeContext, NodeError, NodeOutput, Pause};
use crate::message::ToolCall;
use crate::tool::{Tool, ToolContext, ToolExecution};

use super::AgentCore;

pub(super) async fn tools_node(
    core: Arc<AgentCore>,
    state: Arc<AgentState>,
    ctx: NodeContext,
) -> Result<NodeOutput<AgentState>, NodeError> {
    // Borrowed when it can be: the chain below takes its own copy of the call.
    let sent: ToolCall;
    let call: &ToolCall = match ctx.arg_ref::<ToolCall>() {
        Some(call) => call,
        None => {
            sent = ctx.arg()?;
            &sent
        }
    };
    let rt = Runtime {
        node: ctx.clone(),
        agent: core.name.clone(),
        model: core.model.clone(),
        state: state.clone(),
    };
    let tool_ctx = ToolContext::new(call.id.clone(), state.clone(), Some(ctx.clone()));
    if let Some(sink) = ctx.events_of(EventKind::ToolStart) {
        let data = EventData::ToolStart {
            args: call.args.clone(),
            tool_call_id: call.id.clone(),
        };
        let mut event = ctx.event(call.name.clone(), data);
        event.metadata.tool_call_id = Some(call.id.clone());
        sink.send(event).await;
    }
    let base_core = core.clone();
    let base =
        move |call: ToolCall, tctx: ToolContext| -> BoxFuture<'_, Result<ToolExecution, Pause>> {
            let core = base_core.clone();
            Box::pin(async move { run_tool(&core, &call, tctx).await })
        };
    let next = ToolNext {
        chain: &core.middleware,
        base: &base,
        rt: &rt,
    };
    let tool_run = crate::trace::current().map(|parent| {
        let run = parent.child(&call.name, crate::trace::RunKind::Tool, || {
            call.args.clone()
        });
        match core.tool_index.get(&call.name) {
            Some(&i) => core.tools[i].describe_run(&run, call),
            None => run.set_tool(crate::trace::ToolInfo {
                name: call.name.clone(),
                call_id: call.id.clone(),
                description: String::new(),
            }),
        }
        run
    });
    // With no wrappers the call goes straight to the tool, borrowed; a wrapper may change the
    // call, so the chain takes its own copy.
    let execution = if core.middleware.is_empty() {
        let direct = run_tool(&core, call, tool_ctx);
        match &tool_run {
            Some(run) => run.clone().scope(direct).await,
            None => direct.await,
        }
    } else {
        match &tool_run {
            Some(run) => run.clone().scope(next.call(call.clone(), tool_ctx)).await,
            None => next.call(call.clone(), tool_ctx).await,
        }
    };
    if let Some(run) = &tool_run {
        crate::agent::tool::finish_tool_run(run, &execution);
    }
    let execution = execution?;
    if let Some(sink) = ctx.events_of(EventKind::ToolEnd) {
        let data = EventData::ToolEnd {
            result: execution.message.content.clone(),
            status: execution.message.status,
            tool_call_id: call.id.clone(),
        };
        let mut event = ctx.event(call.name.clone(), data);
        event.metadata.tool_call_id = Some(call.id.clone());
        sink.send(event).await;
    }
    let mut out = NodeOutput::new();
    if let Some(update) = execution.update {
        out = out.with_update(update);
    }
    Ok(out.with_update(AgentStateUpdate::new().messages(vec![execution.message])))
}

/// Runs one call against the agent's tools; an unknown tool is an error result listing the
/// real ones.
async fn run_tool(
    core: &AgentCore,
    call: &ToolCall,
    ctx: ToolContext,
) -> Result<ToolExecution, Pause> {
    match core.tool_index.get(&call.name) {
        Some(&i) => core.tools[i].execute(call, ctx).await,
        None => {
            let names: Vec<&str> = core.tools.iter().map(Tool::name).collect();
            Ok(ToolExecution::error(
                call,
                format!(
                    "Error: {} is not a valid tool, try one of [{}].",
                    call.name,
                    names.join(", ")
                ),
            ))
        }
    }
}
