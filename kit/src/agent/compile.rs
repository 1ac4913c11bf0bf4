//! Compiling an agent to a graph: hook nodes, the model node, the tools node, and routing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::middleware::{
    Hook, JumpTo, Middleware, ModelExecution, ModelNext, Runtime, ToolNext, run_hook,
};
use super::{AgentError, AgentState, AgentStateUpdate};
use crate::event::EventKind;
use crate::graph::{
    END, Graph, GraphBuilder, NodeContext, NodeError, NodeOutput, Pause, START, Send,
};
use crate::message::{Message, Role, ToolCall};
use crate::model::{
    ChatModel, ModelChunk, ModelOptions, ModelRequest, ModelResponse, ResponseFormat,
    StreamAssembler, ToolChoice,
};
use crate::state::{DynSchema, Overwrite, Write};
use crate::tool::{Tool, ToolContext, ToolExecution};

/// An agent error as a node error: the interrupt signal of [`Runtime::interrupt`] pauses the
/// run; everything else fails the node (and reaches the caller unchanged).
fn node_error(e: AgentError) -> NodeError {
    match e {
        AgentError::Interrupted(pause) => pause.into(),
        other => other.into(),
    }
}

/// Everything the agent's nodes share.
pub(crate) struct AgentCore {
    pub(crate) name: Arc<str>,
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) tools: Vec<Tool>,
    pub(crate) tool_index: HashMap<String, usize>,
    pub(crate) middleware: Vec<Arc<dyn Middleware>>,
    pub(crate) system_prompt: Option<String>,
    pub(crate) model_opts: ModelOptions,
    pub(crate) response_format: Option<ResponseFormat>,
    pub(crate) recursion_limit: Option<usize>,
}

/// The node names of the loop, resolved once.
struct Layout {
    loop_start: String,
    exit_start: String,
    before_agent: Vec<(usize, String)>,
    before_model: Vec<(usize, String)>,
    after_model: Vec<(usize, String)>,
    after_agent: Vec<(usize, String)>,
}

fn hook_nodes(mws: &[Arc<dyn Middleware>], hook: Hook, reverse: bool) -> Vec<(usize, String)> {
    let mut nodes: Vec<(usize, String)> = mws
        .iter()
        .enumerate()
        .filter(|(_, m)| m.hooks().contains(&hook))
        .map(|(i, m)| (i, format!("{}.{}", m.name(), hook.as_str())))
        .collect();
    if reverse {
        nodes.reverse();
    }
    nodes
}

pub(crate) fn build_graph(
    core: Arc<AgentCore>,
    schema: DynSchema,
    checkpointer: Option<Arc<dyn crate::checkpoint::Checkpointer>>,
) -> Result<Graph<AgentState>, AgentError> {
    let mws = &core.middleware;
    let before_agent = hook_nodes(mws, Hook::BeforeAgent, false);
    let before_model = hook_nodes(mws, Hook::BeforeModel, false);
    let after_model = hook_nodes(mws, Hook::AfterModel, true);
    let after_agent = hook_nodes(mws, Hook::AfterAgent, true);
    let layout = Arc::new(Layout {
        loop_start: before_model
            .first()
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| "model".to_string()),
        exit_start: after_agent
            .first()
            .map(|(_, n)| n.clone())
            .unwrap_or_else(|| END.to_string()),
        before_agent,
        before_model,
        after_model,
        after_agent,
    });

    let mut g = GraphBuilder::<AgentState>::new(core.name.to_string())
        .schema(schema)
        .error_kind(super::error_kind);
    if let Some(cp) = checkpointer {
        g = g.checkpointer(cp);
    }
    let entry = layout
        .before_agent
        .first()
        .map(|(_, n)| n.clone())
        .unwrap_or_else(|| layout.loop_start.clone());
    g = g.edge(START, entry);

    // Hook chains: each hook routes itself (next hook, or its jump target).
    let chains: [(Hook, &Vec<(usize, String)>); 4] = [
        (Hook::BeforeAgent, &layout.before_agent),
        (Hook::BeforeModel, &layout.before_model),
        (Hook::AfterModel, &layout.after_model),
        (Hook::AfterAgent, &layout.after_agent),
    ];
    for (hook, chain) in chains {
        for (pos, (mw_index, name)) in chain.iter().enumerate() {
            let next = match chain.get(pos + 1) {
                Some((_, n)) => Next::Node(n.clone()),
                None => match hook {
                    Hook::BeforeAgent => Next::Node(layout.loop_start.clone()),
                    Hook::BeforeModel => Next::Node("model".to_string()),
                    Hook::AfterModel => Next::AfterModelRoute,
                    Hook::AfterAgent => Next::Node(END.to_string()),
                },
            };
            let node = HookNode {
                core: core.clone(),
                layout: layout.clone(),
                mw: *mw_index,
                hook,
                next,
                name: Arc::from(name.as_str()),
            };
            let node = Arc::new(node);
            g = g.node(
                name.clone(),
                move |state: Arc<AgentState>, ctx: NodeContext| {
                    let node = node.clone();
                    async move { node.run(state, ctx).await }
                },
            );
            g = g.destinations(name.clone(), destinations(&layout));
        }
    }

    let model_core = core.clone();
    let model_layout = layout.clone();
    g = g
        .node("model", move |state: Arc<AgentState>, ctx: NodeContext| {
            let core = model_core.clone();
            let layout = model_layout.clone();
            async move { model_node(core, layout, state, ctx).await }
        })
        .destinations("model", destinations(&layout));

    let tools_core = core.clone();
    g = g
        .node("tools", move |state: Arc<AgentState>, ctx: NodeContext| {
            let core = tools_core.clone();
            async move { tools_node(core, state, ctx).await }
        })
        .edge("tools", layout.loop_start.clone());

    g.compile()
        .map_err(|e| AgentError::Build(format!("the agent's graph is invalid: {e}")))
}

/// Every node an agent node may route to.
fn destinations(layout: &Layout) -> Vec<String> {
    let mut all: Vec<String> = layout
        .before_agent
        .iter()
        .chain(&layout.before_model)
        .chain(&layout.after_model)
        .chain(&layout.after_agent)
        .map(|(_, n)| n.clone())
        .collect();
    all.extend(["model".to_string(), "tools".to_string(), END.to_string()]);
    all
}

enum Next {
    Node(String),
    /// After the model and its after-hooks: tools for pending calls, else the exit.
    AfterModelRoute,
}

struct HookNode {
    core: Arc<AgentCore>,
    layout: Arc<Layout>,
    mw: usize,
    hook: Hook,
    next: Next,
    name: Arc<str>,
}

impl HookNode {
    async fn run(
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
        if let Some(sink) = ctx.events() {
            let data = json!({
                "middleware": mw.name(),
                "hook": self.hook.as_str(),
                "update": &hook_update.update,
                "jump_to": hook_update.jump_to.map(JumpTo::as_str),
            });
            sink.send(ctx.event(EventKind::Middleware, self.name.to_string(), data))
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
                out.and_goto(target)
            }
            Some(JumpTo::Model) => out.and_goto(layout.loop_start.clone()),
            Some(JumpTo::Tools) => route_pending(out, layout, state, update_messages.as_ref()),
            None => match &self.next {
                Next::Node(n) => out.and_goto(n.clone()),
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
    // Upserts by id replace earlier messages: the newest version of each id counts. Only the
    // messages after the last assistant message matter, so scan backwards.
    let replaced = |m: &Message| extra.iter().any(|e| e.id == m.id);
    let mut answered: Vec<&str> = Vec::new();
    let mut last_ai: Option<&Message> = None;
    for m in extra
        .iter()
        .rev()
        .filter(|m| m.role != Role::Remove)
        .chain(base.iter().rev().filter(|m| !replaced(m)))
    {
        match m.role {
            Role::Assistant => {
                last_ai = Some(m);
                break;
            }
            Role::Tool => {
                if let Some(id) = m.tool_call_id.as_deref() {
                    answered.push(id);
                }
            }
            _ => {}
        }
    }
    match last_ai {
        Some(ai) => (
            ai.tool_calls
                .iter()
                .filter(|c| !answered.contains(&c.id.as_str()))
                .cloned()
                .collect(),
            !ai.tool_calls.is_empty(),
        ),
        None => (Vec::new(), false),
    }
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
        return out.and_goto(layout.loop_start.clone());
    }
    send_calls(out, layout, calls)
}

fn send_calls(
    mut out: NodeOutput<AgentState>,
    layout: &Layout,
    calls: Vec<ToolCall>,
) -> NodeOutput<AgentState> {
    if calls.is_empty() {
        return out.and_goto(layout.exit_start.clone());
    }
    for call in calls {
        out = out.and_send(Send::new("tools", call));
    }
    out
}

/// Error results for tool calls that never got one (a cancelled or abandoned run), placed
/// right after the message that made them, so providers accept the history.
fn patch_dangling_calls(messages: &[Message]) -> Option<Vec<Message>> {
    // Fast path (every model call): results normally follow their calls directly.
    let answered_in_place = messages.iter().enumerate().all(|(i, m)| {
        m.role != Role::Assistant
            || m.tool_calls.iter().all(|c| {
                messages[i + 1..]
                    .iter()
                    .take_while(|r| r.role == Role::Tool)
                    .any(|r| r.tool_call_id.as_deref() == Some(c.id.as_str()))
            })
    });
    if answered_in_place {
        return None;
    }
    let answered: HashSet<&str> = messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    let dangling = messages.iter().any(|m| {
        m.role == Role::Assistant
            && m.tool_calls
                .iter()
                .any(|c| !answered.contains(c.id.as_str()))
    });
    if !dangling {
        return None;
    }
    // Patches go after the tool results that do exist for the same assistant message.
    let mut patched = Vec::with_capacity(messages.len() + 2);
    let mut owed: Vec<Message> = Vec::new();
    for m in messages {
        if m.role != Role::Tool {
            patched.append(&mut owed);
        }
        patched.push(m.clone());
        if m.role == Role::Assistant {
            for c in &m.tool_calls {
                if !answered.contains(c.id.as_str()) {
                    owed.push(
                        Message::tool_error(
                            &c.id,
                            format!(
                                "Tool call {} with id {} did not complete - no result was \
                                 recorded. It may have been cancelled or interrupted.",
                                c.name, c.id
                            ),
                        )
                        .with_name(&c.name),
                    );
                }
            }
        }
    }
    patched.append(&mut owed);
    Some(patched)
}

async fn model_node(
    core: Arc<AgentCore>,
    layout: Arc<Layout>,
    state: Arc<AgentState>,
    ctx: NodeContext,
) -> Result<NodeOutput<AgentState>, NodeError> {
    let patched = patch_dangling_calls(&state.messages);
    let messages = patched.clone().unwrap_or_else(|| state.messages.clone());
    let request = ModelRequest {
        system: core.system_prompt.clone(),
        messages,
        tools: core.tools.iter().map(|t| t.spec().clone()).collect(),
        tool_choice: ToolChoice::Auto,
        response_format: core.response_format.clone(),
        options: core.model_opts.clone(),
    };
    let rt = Runtime {
        node: ctx.clone(),
        agent: core.name.clone(),
        model: core.model.clone(),
    };
    let base_core = core.clone();
    let base_ctx = ctx.clone();
    let base = move |request: ModelRequest| -> BoxFuture<'_, Result<ModelExecution, AgentError>> {
        let core = base_core.clone();
        let ctx = base_ctx.clone();
        Box::pin(async move { call_model(&core, request, &ctx).await.map(Into::into) })
    };
    let wrappers: Vec<Arc<dyn Middleware>> = core.middleware.clone();
    let next = ModelNext {
        chain: &wrappers,
        base: &base,
        rt: &rt,
    };
    let trace = ModelTrace::new(&core, &request);
    let execution = traced_model_chain(&core, trace, &ctx, next.call(request))
        .await
        .map_err(node_error)?;
    let mut message = execution.response.message;
    if message.name.is_none() {
        message.name = Some(core.name.to_string());
    }
    // A wrapper's update comes first; its messages write (overflow recovery's compacted
    // conversation, say) takes the answer, and replaces the dangling-call patch it was built on.
    let mut update = execution.update.unwrap_or_default();
    let patched = match update.messages.take() {
        Some(Write::Overwrite(all)) => Some(all),
        Some(Write::Value(added)) => {
            let mut all = patched.unwrap_or_else(|| state.messages.clone());
            all.extend(added);
            Some(all)
        }
        None => patched,
    };
    if core.response_format.is_some() && message.tool_calls.is_empty() {
        let text = message.text();
        let parsed: Value = serde_json::from_str(text.trim())
            .map_err(|e| AgentError::StructuredOutput(format!("{e}; the answer was: {text}")))?;
        update = update.structured_response(Some(parsed));
    }
    // A new assistant message has no results yet: all its calls are pending.
    let calls = message.tool_calls.clone();
    update = match patched {
        Some(mut all) => {
            all.push(message);
            update.messages(Overwrite(all))
        }
        None => update.messages(vec![message]),
    };
    let out = NodeOutput::update(update);
    Ok(match layout.after_model.first() {
        Some((_, first)) => out.and_goto(first.clone()),
        None => send_calls(out, &layout, calls),
    })
}

/// What the `model` trace run of a call records about the request, taken only when the
/// run is recorded (no copy of the conversation otherwise).
struct ModelTrace {
    run: Option<crate::trace::Run>,
    info: crate::trace::ModelInfo,
}

impl ModelTrace {
    fn new(core: &AgentCore, request: &ModelRequest) -> ModelTrace {
        let run = crate::trace::current().map(|parent| {
            parent.child(
                core.model.model_name(),
                crate::trace::RunKind::Model,
                || {
                    json!({"system": request.system, "messages": request.messages,
                       "tools": request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()})
                },
            )
        });
        let mut info = crate::trace::ModelInfo::default();
        if run.is_some() {
            info.provider = core.model.provider().to_string();
            info.model = core.model.model_name().to_string();
        }
        if run.as_ref().is_some_and(crate::trace::Run::is_recording) {
            info.structured_output = request
                .response_format
                .as_ref()
                .map(|_| "provider".to_string());
            if let Ok(Value::Object(params)) = serde_json::to_value(&request.options) {
                info.params = params;
            }
        }
        ModelTrace { run, info }
    }
}

/// Runs the model-call chain (wrappers included) inside a `model` trace run, so the run
/// records what the agent keeps (after guardrails such as PII have scrubbed it), then reports
/// `model_end`.
async fn traced_model_chain<F>(
    core: &AgentCore,
    trace: ModelTrace,
    ctx: &NodeContext,
    chain: F,
) -> Result<ModelExecution, AgentError>
where
    F: std::future::Future<Output = Result<ModelExecution, AgentError>>,
{
    let ModelTrace { run, mut info } = trace;
    let result = match &run {
        Some(run) => run.clone().scope(chain).await,
        None => chain.await,
    };
    // Recorded runs, and `tracing` spans someone listens to, get the call's details.
    if let Some(run) = run.filter(|r| r.is_recording() || !r.span().is_disabled()) {
        match &result {
            Ok(execution) => {
                let response = &execution.response;
                info.usage = response.message.usage;
                info.cost = response
                    .message
                    .metadata
                    .get("cost_usd")
                    .and_then(Value::as_f64)
                    .or_else(|| {
                        response
                            .message
                            .usage
                            .and_then(|u| crate::model::pricing::cost(&info.model, &u))
                    });
                info.finish_reason = serde_json::to_value(&response.finish_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from));
                run.set_model(info);
                run.finish(json!({ "message": response.message }));
            }
            Err(e) => {
                run.set_model(info);
                run.fail(&e.to_string());
            }
        }
    }
    if let (Some(sink), Ok(execution)) = (ctx.events(), &result) {
        let end = json!({"message": execution.response.message, "usage": execution.response.message.usage});
        sink.send(ctx.event(
            EventKind::ModelEnd,
            core.model.model_name().to_string(),
            end,
        ))
        .await;
    }
    result
}

/// Calls the model, streaming tokens as events when someone listens.
async fn call_model(
    core: &AgentCore,
    request: ModelRequest,
    ctx: &NodeContext,
) -> Result<ModelResponse, AgentError> {
    let Some(sink) = ctx.events() else {
        return Ok(core.model.generate(request).await?);
    };
    let model_name = core.model.model_name().to_string();
    let start = json!({
        "provider": core.model.provider(),
        "model": model_name,
        "messages": request.messages.len(),
        "tools": request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
    });
    sink.send(ctx.event(EventKind::ModelStart, model_name.clone(), start))
        .await;
    let mut stream = core.model.stream(request).await?;
    let mut assembler = StreamAssembler::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let data = match &chunk {
            ModelChunk::Text { text } => Some(json!({ "text": text })),
            ModelChunk::ToolCall {
                index,
                id,
                name,
                args,
            } => Some(json!({"tool_call": {"index": index, "id": id, "name": name, "args": args}})),
            _ => None,
        };
        if let Some(data) = data {
            sink.send(ctx.event(EventKind::ModelDelta, model_name.clone(), data))
                .await;
        }
        assembler.push(&chunk);
    }
    Ok(assembler.finish())
}

async fn tools_node(
    core: Arc<AgentCore>,
    state: Arc<AgentState>,
    ctx: NodeContext,
) -> Result<NodeOutput<AgentState>, NodeError> {
    let call: ToolCall = ctx.arg()?;
    let rt = Runtime {
        node: ctx.clone(),
        agent: core.name.clone(),
        model: core.model.clone(),
    };
    let tool_ctx = ToolContext::new(call.id.clone(), state.clone(), Some(ctx.clone()));
    if let Some(sink) = ctx.events() {
        let mut event = ctx.event(
            EventKind::ToolStart,
            call.name.clone(),
            json!({"args": call.args, "tool_call_id": call.id}),
        );
        event.metadata.tool_call_id = Some(call.id.clone());
        sink.send(event).await;
    }
    let base_core = core.clone();
    let base =
        move |call: ToolCall, tctx: ToolContext| -> BoxFuture<'_, Result<ToolExecution, Pause>> {
            let core = base_core.clone();
            Box::pin(async move { run_tool(&core, &call, tctx).await })
        };
    let wrappers: Vec<Arc<dyn Middleware>> = core.middleware.clone();
    let next = ToolNext {
        chain: &wrappers,
        base: &base,
        rt: &rt,
    };
    let tool_run = crate::trace::current().map(|parent| {
        let run = parent.child(&call.name, crate::trace::RunKind::Tool, || {
            call.args.clone()
        });
        run.set_tool(crate::trace::ToolInfo {
            name: call.name.clone(),
            call_id: call.id.clone(),
            description: core
                .tool_index
                .get(&call.name)
                .map(|&i| core.tools[i].description().to_string())
                .unwrap_or_default(),
        });
        run
    });
    let execution = match &tool_run {
        Some(run) => run.clone().scope(next.call(call.clone(), tool_ctx)).await,
        None => next.call(call.clone(), tool_ctx).await,
    };
    if let Some(run) = &tool_run {
        match &execution {
            Err(_) => run.finish(json!({"interrupted": true})),
            Ok(done) if done.message.is_error() => run.fail(&done.message.text()),
            Ok(done) => run.finish(json!({ "result": done.message.content })),
        }
    }
    let execution = execution?;
    if let Some(sink) = ctx.events() {
        let mut event = ctx.event(
            EventKind::ToolEnd,
            call.name.clone(),
            json!({
                "result": execution.message.content,
                "status": execution.message.status,
                "tool_call_id": call.id,
            }),
        );
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dangling_calls_get_error_results_in_place() {
        let ai = Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id("a", "t", json!({})),
                ToolCall::with_id("b", "t", json!({})),
            ],
        );
        let messages = vec![
            Message::user("q"),
            ai,
            Message::tool("a", "ok"),
            Message::user("never mind"),
        ];
        let patched = patch_dangling_calls(&messages).unwrap();
        let roles: Vec<Role> = patched.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::User,
                Role::Assistant,
                Role::Tool,
                Role::Tool,
                Role::User
            ]
        );
        assert_eq!(patched[3].tool_call_id.as_deref(), Some("b"));
        assert!(patched[3].text().contains("did not complete"));
        assert!(patch_dangling_calls(&patched).is_none());
    }
}
