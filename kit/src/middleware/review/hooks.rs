//! The review at work: the `after_model` hook that asks, and the tool wrapper that obeys.

use serde_json::{Map, Value, json};

use crate::agent::{
    AgentState, AgentStateUpdate, Hook, HookResult, HookUpdate, Middleware, Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::message::{Content, ContentPart, Message, ToolCall};
use crate::middleware::python::py_json;
use crate::state::{DynReducer, DynUpdate};
use crate::tool::{Tool, ToolContext, ToolError, ToolExecution};

use super::{
    Action, ActionRequest, Decision, EDITS_KEY, HumanReviewMiddleware, InterruptMode,
    InterruptOnConfig, NAME, ReviewConfig, ReviewError, ReviewRequest, TOOL_APPROVAL, ToolApproval,
};

/// The anchor's note before the result of an edited call.
fn edit_note(name: &str, args: &Value) -> String {
    format!(
        "Note: a human reviewer replaced this tool call before it ran. The call recorded in your \
         message is the one you produced, not the one that executed. This was intentional and \
         authorized. Do not re-issue your original call. Executed instead: {name} with arguments \
         {}.\n\nTool response:\n",
        py_json(args)
    )
}

#[crate::async_trait]
impl Middleware for HumanReviewMiddleware {
    fn name(&self) -> &str {
        NAME
    }

    fn hooks(&self) -> &[Hook] {
        match self.mode {
            InterruptMode::Batched => &[Hook::AfterModel],
            // Each reviewed call asks from its own tools task.
            InterruptMode::PerCall => &[],
        }
    }

    fn requires_checkpointer(&self) -> bool {
        true
    }

    fn for_subagent(&self) -> Option<std::sync::Arc<dyn Middleware>> {
        Some(std::sync::Arc::new(self.for_child()))
    }

    fn tools(&self) -> Vec<Tool> {
        self.tools.clone()
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        match self.mode {
            InterruptMode::Batched => vec![(EDITS_KEY.to_string(), None)],
            InterruptMode::PerCall => Vec::new(),
        }
    }

    /// Asks for a review of the reviewed calls of the model's last turn, then answers rejected
    /// and responded calls and stashes edited ones for the tools node.
    async fn after_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let Some(ai_index) = state.last_ai_index() else {
            return Ok(None);
        };
        let ai = &state.messages[ai_index];
        let reviewed: Vec<(&ToolCall, &InterruptOnConfig)> = state
            .pending_tool_calls()
            .into_iter()
            .filter_map(|call| {
                self.config_for(&call.name)
                    .filter(|config| config.applies(call, state))
                    .map(|config| (call, config))
            })
            .collect();
        let stale = state.custom.get(EDITS_KEY).is_some_and(|v| !v.is_null());
        if reviewed.is_empty() {
            // Edits of an earlier turn have been used: drop them from the state.
            return Ok(stale.then(|| {
                HookUpdate::new(
                    AgentStateUpdate::new().custom(DynUpdate::new().set(EDITS_KEY, Value::Null)),
                )
            }));
        }
        let request = ReviewRequest {
            action_requests: reviewed
                .iter()
                .map(|(call, config)| ActionRequest {
                    name: call.name.clone(),
                    args: call.args.clone(),
                    description: self.describe(call, config, state),
                })
                .collect(),
            review_configs: reviewed
                .iter()
                .map(|(call, config)| ReviewConfig {
                    action_name: call.name.clone(),
                    allowed_decisions: config.allowed.clone(),
                })
                .collect(),
            error: None,
        };
        // A wrong answer asks again (a further interrupt of this node, with the reason), so
        // the thread stays resumable; see the module documentation.
        let mut answer = rt.interrupt(&request)?;
        let mut wrong = 0;
        let decisions = loop {
            match request.accept(&answer) {
                Ok(decisions) => break decisions.into_iter().map(Ok).collect::<Vec<_>>(),
                Err(e) => {
                    wrong += 1;
                    if wrong == MAX_WRONG_ANSWERS {
                        break vec![Err(gave_up(&e)); reviewed.len()];
                    }
                    let again = ReviewRequest {
                        error: Some(e.to_string()),
                        ..request.clone()
                    };
                    answer = rt.interrupt(&again)?;
                }
            }
        };

        let mut results = Vec::new();
        let mut edits = Map::new();
        for ((call, _), decision) in reviewed.iter().zip(decisions) {
            match decision {
                Err(reason) => results.push(not_run(call, &reason)),
                Ok(Decision::Approve) => {}
                Ok(Decision::Edit { edited_action }) => {
                    edits.insert(
                        call.id.clone(),
                        json!({"name": edited_action.name, "args": edited_action.args}),
                    );
                }
                Ok(Decision::Reject { message }) => results.push(rejected(call, message)),
                Ok(Decision::Respond { message }) => {
                    results.push(Message::tool(&call.id, message).with_name(&call.name));
                }
            }
        }
        let mut update = AgentStateUpdate::new();
        if !results.is_empty() {
            update = update.messages(results);
        }
        if !edits.is_empty() {
            update = update.custom(
                DynUpdate::new().set(EDITS_KEY, json!({"message_id": ai.id, "edits": edits})),
            );
        } else if stale {
            update = update.custom(DynUpdate::new().set(EDITS_KEY, Value::Null));
        }
        Ok(Some(HookUpdate::new(update)))
    }

    /// Runs the reviewer's edited call in place of the model's, with the anchor's note before
    /// its result.
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if self.mode == InterruptMode::PerCall {
            return self.review_call(call, ctx, next).await;
        }
        match edit_for(ctx.state(), &call.id) {
            Some(edit) => run_edited(call.id, edit, ctx, next).await,
            None => next.call(call, ctx).await,
        }
    }
}

impl HumanReviewMiddleware {
    /// Per-call mode: asks about this call (if it is reviewed) from its own tools task, then
    /// carries out the decision.
    async fn review_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        let config = self
            .config_for(&call.name)
            .filter(|config| config.applies(&call, ctx.state()));
        let Some(config) = config else {
            return next.call(call, ctx).await;
        };
        let approval = ToolApproval {
            kind: TOOL_APPROVAL.to_string(),
            tool_call_id: call.id.clone(),
            name: call.name.clone(),
            args: call.args.clone(),
            description: self.describe(&call, config, ctx.state()),
            allowed_decisions: config.allowed.clone(),
            error: None,
        };
        // As in batched mode, a wrong answer asks again, so the thread stays resumable.
        let mut asked = approval.clone();
        let mut wrong = 0;
        let decision = loop {
            let answer = match ctx.interrupt(&asked) {
                Ok(answer) => answer,
                Err(ToolError::Interrupted(pause)) => return Err(pause),
                Err(e) => return Ok(ToolExecution::error(&call, e.for_model(&call.name))),
            };
            match approval.accept(&answer) {
                Ok(decision) => break decision,
                Err(e) => {
                    wrong += 1;
                    if wrong == MAX_WRONG_ANSWERS {
                        return Ok(ToolExecution {
                            message: not_run(&call, &gave_up(&e)),
                            update: None,
                        });
                    }
                    asked = ToolApproval {
                        error: Some(e.to_string()),
                        ..approval.clone()
                    }
                }
            }
        };
        let message = match decision {
            Decision::Approve => return next.call(call, ctx).await,
            Decision::Edit { edited_action } => {
                return run_edited(call.id, edited_action, ctx, next).await;
            }
            Decision::Reject { message } => rejected(&call, message),
            Decision::Respond { message } => Message::tool(&call.id, message).with_name(&call.name),
        };
        Ok(ToolExecution {
            message,
            update: None,
        })
    }
}

/// Wrong answers to one review after which it stops asking and does not run the calls (each
/// gets an error result saying why): each answer is kept (as the answer to an interrupt of the
/// node) and read again on every resume, so a client that keeps answering wrongly must not
/// grow the thread without end.
pub const MAX_WRONG_ANSWERS: usize = 16;

/// Why a call was not run once [`MAX_WRONG_ANSWERS`] answers could not be used.
fn gave_up(last: &ReviewError) -> String {
    format!(
        "its review got {MAX_WRONG_ANSWERS} answers in a row it could not use (the last: {last})"
    )
}

/// The error result of a reviewed call that no usable answer decided: nobody rejected it.
fn not_run(call: &ToolCall, reason: &str) -> Message {
    Message::tool_error(
        &call.id,
        format!(
            "The tool call for `{}` was not executed: {reason}. Do not retry it unless the user \
             asks again.",
            call.name
        ),
    )
    .with_name(&call.name)
}

/// The error result of a rejected call, in the anchor's words.
fn rejected(call: &ToolCall, reason: Option<String>) -> Message {
    let text = match reason {
        Some(reason) => format!(
            "User rejected the tool call for `{}` with reason: {reason}",
            call.name
        ),
        None => format!(
            "User rejected the tool call for `{}` with id {}. The tool was not executed. Do not \
             retry this tool call unless the user explicitly requests it.",
            call.name, call.id
        ),
    };
    Message::tool_error(&call.id, text).with_name(&call.name)
}

/// Runs the reviewer's edited call under the original call id, with the anchor's note before
/// its result.
async fn run_edited(
    call_id: String,
    edit: Action,
    ctx: ToolContext,
    next: ToolNext<'_>,
) -> Result<ToolExecution, Pause> {
    let note = edit_note(&edit.name, &edit.args);
    let executed = ToolCall {
        id: call_id,
        name: edit.name,
        args: edit.args,
    };
    let mut execution = next.call(executed, ctx).await?;
    match &mut execution.message.content {
        Content::Text(text) => text.insert_str(0, &note),
        Content::Parts(parts) => parts.insert(0, ContentPart::text(note)),
    }
    Ok(execution)
}

/// The reviewer's edit of `call_id`, if the last assistant message's calls were edited.
fn edit_for(state: &AgentState, call_id: &str) -> Option<Action> {
    let stash = state.custom.get(EDITS_KEY)?;
    let ai = &state.messages[state.last_ai_index()?];
    if stash.get("message_id").and_then(Value::as_str) != Some(ai.id.as_str()) {
        return None;
    }
    serde_json::from_value(stash.get("edits")?.get(call_id)?.clone()).ok()
}
