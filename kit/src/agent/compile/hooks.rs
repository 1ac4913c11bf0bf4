//! The hook nodes and the routing after them: next hook, jump target, or the pending tool calls.

use std::sync::Arc;

use serde_json::json;

use crate::agent::middleware::{Hook, JumpTo, Runtime, run_hook};
use crate::agent::{AgentError, AgentState, AgentStateUpdate};
use crate::event::{EventData, EventKind};
use crate::graph::{END, NodeContext, NodeError, NodeOutput, Send};
use crate::message::{Message, ToolCall};
use crate::state::Write;

use super::{AgentCore, Layout, node_error};

pub(super) enum Next {
    Node(String),
    /// After the model and its after-hooks: tools for pending calls, else the exit.
    AfterModelRoute,
}

pub(super) struct HookNode {
    pub(super) core: Arc<AgentCore>,
    pub(super) layout: Arc<Layout>,
    pub(super) mw: usize,
    pub(super) hook: Hook,
    pub(super) next: Next,
    pub(super) name: Arc<str>,
}

impl HookNode {
    pub(super) async fn run(
        &self,
        state: Arc<AgentState>,
        ctx: NodeContext,
    ) -> Result<NodeOutput<AgentState>, NodeError> {
        let mw = &self.core.middleware[self.mw];
        if let Some(run) = crate::trace::current() {
            run.set_kind(crate::trace::RunKind::Middleware);
        }
        let rt = Runtime {
            node: ctx.clone(),
            agent: self.core.name.clone(),
            model: self.core.model.clone(),
            state: state.clone(),
        };
        let result = run_hook(mw.as_ref(), self.hook, &state, &rt)
            .await
            .map_err(node_error)?;
        let Some(hook_update) = result else {
            let out = NodeOutput::new();
            return Ok(self.route(out, &state, None, None));
        };
        if let Some(target) = hook_update.jump_to
            && !mw.can_jump_to(self.hook).contains(&target)
        {
            return Err(AgentError::UndeclaredJump {
                middleware: mw.name().to_string(),
                hook: self.hook.as_str().to_string(),
                target: target.as_str().to_string(),
            }
            .into());
        }
        if let Some(sink) = ctx.events_of(EventKind::Middleware) {
            let data = json!({
                "middleware": mw.name(),
                "hook": self.hook.as_str(),
                "update": &hook_update.update,
                "jump_to": hook_update.jump_to.map(JumpTo::as_str),
            });
            sink.send(ctx.event(self.name.to_string(), EventData::Middleware(data)))
                .await;
        }
        let update_messages = updated_messages(&hook_update.update);
        let jump = hook_update.jump_to;
        let out = NodeOutput::update(hook_update.update);
        Ok(self.route(out, &state, update_messages, jump))
    }

    fn route(
        &self,
        out: NodeOutput<AgentState>,
        state: &AgentState,
        update_messages: Option<UpdatedMessages>,
        jump: Option<JumpTo>,
    ) -> NodeOutput<AgentState> {
        let layout = &self.layout;
        match jump {
            Some(JumpTo::End) => {
                let target = if self.hook == Hook::AfterAgent {
                    // Already in the exit chain: finish.
                    END.to_string()
                } else {
                    layout.exit_start.clone()
                };
                out.with_goto(target)
            }
            Some(JumpTo::Model) => out.with_goto(layout.loop_start.clone()),
            Some(JumpTo::Tools) => route_pending(out, layout, state, update_messages.as_ref()),
            None => match &self.next {
                Next::Node(n) => out.with_goto(n.clone()),
                Next::AfterModelRoute => {
                    route_pending(out, layout, state, update_messages.as_ref())
                }
            },
        }
    }
}

/// The messages an update writes: appended (reduced) or replacing the list.
enum UpdatedMessages {
    Appended(Vec<Message>),
    Replaced(Vec<Message>),
}

fn updated_messages(update: &AgentStateUpdate) -> Option<UpdatedMessages> {
    match &update.messages {
        Some(Write::Value(v)) => Some(UpdatedMessages::Appended(v.clone())),
        Some(Write::Overwrite(v)) => Some(UpdatedMessages::Replaced(v.clone())),
        None => None,
    }
}

/// Tool calls of the last assistant message that have no result, as the state will be once
/// `update` is applied, and whether that message made any call at all.
fn pending_calls(state: &AgentState, update: Option<&UpdatedMessages>) -> (Vec<ToolCall>, bool) {
    let (base, extra): (&[Message], &[Message]) = match update {
        None => (&state.messages, &[]),
        Some(UpdatedMessages::Appended(v)) => (&state.messages, v.as_slice()),
        Some(UpdatedMessages::Replaced(v)) => (v.as_slice(), &[]),
    };
    let (calls, made_calls) = crate::agent::state::pending_calls(base, extra);
    (calls.into_iter().cloned().collect(), made_calls)
}

/// Sends each pending tool call to the tools node. When the model made calls but hooks
/// answered all of them (a human rejected them, a guard refused them), the model is called
/// again to see the answers, as LangChain does; with no calls at all, the run goes to the exit.
fn route_pending(
    out: NodeOutput<AgentState>,
    layout: &Layout,
    state: &AgentState,
    update: Option<&UpdatedMessages>,
) -> NodeOutput<AgentState> {
    let (calls, made_calls) = pending_calls(state, update);
    if calls.is_empty() && made_calls {
        return out.with_goto(layout.loop_start.clone());
    }
    send_calls(out, layout, calls)
}

pub(super) fn send_calls(
    mut out: NodeOutput<AgentState>,
    layout: &Layout,
    calls: Vec<ToolCall>,
) -> NodeOutput<AgentState> {
    if calls.is_empty() {
        return out.with_goto(layout.exit_start.clone());
    }
    for call in calls {
        out = out.with_send(Send::new("tools", call));
    }
    out
}
