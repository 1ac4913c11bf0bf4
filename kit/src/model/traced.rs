//! A direct model call as one trace run, with its own trace options.

use serde_json::{Value, json};

use super::{ChatModel, ModelError, ModelRequest, ModelResponse};
use crate::trace::{ModelInfo, RunKind, TraceOptions};

/// Calls `model` as one `model` trace run with these options (spec §2.6's `trace:` on model
/// calls): a child of the current run, or a root of the global tracer named by the options,
/// recording the request, the answer (text, reasoning, tool calls), the provider and model,
/// the parameters, usage and cost, or the error. `TraceOptions::disabled()` records nothing.
///
/// Agents trace their model calls themselves; this is for calls made outside an agent.
///
/// ```no_run
/// use kit::model::{self, ModelRequest};
/// use kit::trace::TraceOptions;
/// use kit::Message;
/// # async fn demo(model: &dyn kit::model::ChatModel) -> Result<(), kit::model::ModelError> {
/// let request = ModelRequest::new(vec![Message::user("Summarise this.")]);
/// let answer = model::generate_traced(model, &request, &TraceOptions::new().name("summary").user_id("u-7")).await?;
/// // A call that must not appear in traces (it sees secrets, say):
/// let quiet = ModelRequest::new(vec![Message::user("…")]);
/// model::generate_traced(model, &quiet, &TraceOptions::disabled()).await?;
/// # let _ = answer; Ok(()) }
/// ```
pub async fn generate_traced(
    model: &dyn ChatModel,
    request: &ModelRequest,
    options: &TraceOptions,
) -> Result<ModelResponse, ModelError> {
    let run = crate::trace::global().start(
        model.model_name(),
        RunKind::Model,
        || {
            json!({"system": request.system, "messages": request.messages,
                   "tools": request.tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>()})
        },
        Some(options),
    );
    let described = run.is_recording() || !run.span().is_disabled();
    let mut info = ModelInfo::default();
    if described {
        info.provider = model.provider().to_string();
        info.model = model.model_name().to_string();
        info.structured_output = request.response_format.as_ref().map(|_| "provider".into());
        if let Ok(Value::Object(params)) = serde_json::to_value(&request.options) {
            info.params = params;
        }
    }
    let result = run.clone().scope(model.generate(request)).await;
    if described {
        match &result {
            Ok(response) => {
                let message = &response.message;
                info.usage = message.usage;
                info.cost = message
                    .metadata
                    .get("cost_usd")
                    .and_then(Value::as_f64)
                    .or_else(|| {
                        message
                            .usage
                            .and_then(|u| super::pricing::cost(&info.model, &u))
                    });
                info.finish_reason = serde_json::to_value(&response.finish_reason)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from));
                run.set_model(info);
                run.finish(json!({ "message": message }));
            }
            Err(e) => {
                run.set_model(info);
                run.fail(&e.to_string());
            }
        }
    }
    result
}
