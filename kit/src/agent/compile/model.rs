//! The model node: the model-call chain, its trace run, and token streaming.

use std::sync::Arc;

use futures::StreamExt;
use futures::future::BoxFuture;
use serde_json::{Value, json};

use crate::agent::middleware::{ModelExecution, ModelNext, Runtime};
use crate::agent::structured::Verdict;
use crate::agent::{AgentError, AgentState, StructuredStrategy};
use crate::event::{EventData, EventKind, ModelDelta, ToolCallDelta};
use crate::graph::{NodeContext, NodeError, NodeOutput};
use crate::model::{
    ChatModel, ModelChunk, ModelRequest, ModelResponse, StreamAssembler, ToolChoice,
};
use crate::state::{Messages, Overwrite, Write};

use super::dangling::patch_dangling_calls;
use super::hooks::send_calls;
use super::{AgentCore, Layout, node_error};

pub(super) async fn model_node(
    core: Arc<AgentCore>,
    layout: Arc<Layout>,
    state: Arc<AgentState>,
    ctx: NodeContext,
) -> Result<NodeOutput<AgentState>, NodeError> {
    // The request shares the state's conversation (no copy), unless calls left without a
    // result had to be patched (rare: a cancelled or abandoned run).
    let patched = patch_dangling_calls(&state.messages).map(Messages::from);
    let messages = patched.clone().unwrap_or_else(|| state.messages.clone());
    let request = ModelRequest {
        system: core.system_prompt.clone(),
        messages,
        tools: core.tool_specs.clone(),
        tool_choice: ToolChoice::Auto,
        response_format: match &core.structured {
            Some((s, StructuredStrategy::Provider)) => Some(s.format.clone()),
            _ => None,
        },
        options: core.model_opts.clone(),
    };
    let rt = Runtime {
        node: ctx.clone(),
        agent: core.name.clone(),
        model: core.model.clone(),
        state: state.clone(),
    };
    let base_ctx = ctx.clone();
    // The model that answered, when a wrapper chose another than the agent's (fallback,
    // router): the trace run and the events name it.
    let served: Arc<std::sync::Mutex<Option<Arc<dyn ChatModel>>>> = Arc::default();
    let served_by = served.clone();
    let agent_model = core.model.clone();
    let limit = core.max_calls_per_answer;
    let base = move |request: ModelRequest,
                     model: Arc<dyn ChatModel>|
          -> BoxFuture<'_, Result<ModelExecution, AgentError>> {
        let ctx = base_ctx.clone();
        if !Arc::ptr_eq(&model, &agent_model)
            && let Ok(mut slot) = served_by.lock()
        {
            *slot = Some(model.clone());
        }
        Box::pin(async move {
            call_model(model.as_ref(), request, &ctx, limit)
                .await
                .map(Into::into)
        })
    };
    let next = ModelNext {
        chain: &core.middleware,
        base: &base,
        rt: &rt,
        model: None,
    };
    let trace = ModelTrace::new(&core, &request);
    let execution = traced_model_chain(&core, trace, &ctx, &served, next.call(request))
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
        Some(Write::Overwrite(all)) => Some(Messages::from(all)),
        Some(Write::Value(added)) => {
            let mut all = patched.unwrap_or_else(|| state.messages.clone());
            all.extend(added);
            Some(all)
        }
        None => patched,
    };
    // A structured answer is checked before anything routes on it.
    let verdict = match &core.structured {
        Some((s, strategy)) => {
            let history = patched.as_deref().unwrap_or(&state.messages);
            s.judge(*strategy, &message, history).map_err(node_error)?
        }
        None => Verdict::NotFinal,
    };
    // A new assistant message has no results yet: all its calls are pending.
    let calls = message.tool_calls.clone();
    let mut added = vec![message];
    let next = match verdict {
        Verdict::NotFinal => None,
        Verdict::Valid { value, ack } => {
            update = update.structured_response(Some(value));
            // Answered through the format tool: done, whatever the hooks would route.
            (!ack.is_empty()).then(|| {
                added.extend(ack);
                layout.exit_start.clone()
            })
        }
        Verdict::Retry(feedback) => {
            added.extend(feedback);
            Some(layout.loop_start.clone())
        }
    };
    update = match patched {
        Some(mut all) => {
            all.extend(added);
            update.messages(Overwrite(all.into_vec()))
        }
        None => update.messages(added),
    };
    let out = NodeOutput::update(update);
    Ok(match (next, layout.after_model.first()) {
        (Some(node), _) => out.with_goto(node),
        (None, Some((_, first))) => out.with_goto(first.clone()),
        (None, None) => send_calls(out, &layout, calls),
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
                    // Only what is new since the model last answered: the messages before are
                    // in the earlier model runs' inputs and outputs, and recording them again
                    // on every call would make a conversation's trace grow with its square.
                    let earlier = request
                        .messages
                        .iter()
                        .rposition(|m| m.role == crate::message::Role::Assistant)
                        .map_or(0, |i| i + 1);
                    let tools: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
                    let mut inputs = json!({"system": request.system,
                        "messages": &request.messages[earlier..], "tools": tools});
                    if earlier > 0 {
                        inputs["earlier_messages"] = json!(earlier);
                    }
                    inputs
                },
            )
        });
        let mut info = crate::trace::ModelInfo::default();
        if run.as_ref().is_some_and(reported) {
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
    served: &std::sync::Mutex<Option<Arc<dyn ChatModel>>>,
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
    let served = served.lock().ok().and_then(|mut slot| slot.take());
    if let (Some(model), Some(run)) = (&served, &run) {
        run.set_name(model.model_name());
        info.provider = model.provider().to_string();
        info.model = model.model_name().to_string();
    }
    if let Some(run) = run.filter(reported) {
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
    if let (Some(sink), Ok(execution)) = (ctx.events_of(EventKind::ModelEnd), &result) {
        let end = EventData::ModelEnd {
            message: Box::new(execution.response.message.clone()),
            usage: execution.response.message.usage,
        };
        let model_name = served
            .as_ref()
            .map_or_else(|| core.model.model_name(), |m| m.model_name());
        sink.send(ctx.event(model_name, end)).await;
    }
    result
}

/// Whether a model run's details are wanted: it is recorded, or its `tracing` span has a
/// listener. Otherwise nothing reads them, and a call builds none.
fn reported(run: &crate::trace::Run) -> bool {
    run.is_recording() || !run.span().is_disabled()
}

/// Calls the model, streaming tokens as events when someone listens for them.
async fn call_model(
    model: &dyn ChatModel,
    request: ModelRequest,
    ctx: &NodeContext,
    limit: usize,
) -> Result<ModelResponse, AgentError> {
    if let Some(sink) = ctx.events_of(EventKind::ModelStart) {
        let start = EventData::ModelStart {
            provider: model.provider().to_string(),
            model: model.model_name().to_string(),
            messages: request.messages.len(),
            tools: request.tools.iter().map(|t| t.name.clone()).collect(),
        };
        sink.send(ctx.event(model.model_name(), start)).await;
    }
    let Some(sink) = ctx.events_of(EventKind::ModelDelta) else {
        return within_call_limit(model, model.generate(&request).await?, limit);
    };
    let model_name = model.model_name().to_string();
    let mut stream = model.stream(&request).await?;
    let mut assembler = StreamAssembler::new();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk?;
        let delta = match &chunk {
            ModelChunk::Text { text } => Some(ModelDelta::Text { text: text.clone() }),
            ModelChunk::Reasoning { part, .. } if !part.text.is_empty() => {
                Some(ModelDelta::Reasoning {
                    reasoning: part.text.clone(),
                })
            }
            ModelChunk::ToolCall {
                index,
                id,
                name,
                args,
            } => Some(ModelDelta::ToolCall {
                tool_call: ToolCallDelta {
                    index: *index,
                    id: id.clone(),
                    name: name.clone(),
                    args: args.clone(),
                },
            }),
            _ => None,
        };
        if let Some(delta) = delta {
            sink.send(ctx.event(model_name.clone(), EventData::ModelDelta(delta)))
                .await;
        }
        assembler.push(&chunk);
    }
    within_call_limit(model, assembler.finish(), limit)
}

/// The answer, unless it asks for more tool calls than the agent runs from one.
fn within_call_limit(
    model: &dyn ChatModel,
    response: ModelResponse,
    limit: usize,
) -> Result<ModelResponse, AgentError> {
    let calls = response.message.tool_calls.len();
    if calls <= limit {
        return Ok(response);
    }
    Err(crate::model::ModelError::MalformedResponse {
        provider: model.provider().to_string(),
        message: format!(
            "the answer asks for {calls} tool calls at once, more than the {limit} the agent \
             runs from one answer; none was run — ask the model for fewer calls per turn, or \
             raise `max_calls_per_answer`"
        ),
    }
    .into())
}
