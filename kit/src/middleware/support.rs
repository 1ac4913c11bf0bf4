//! What the prebuilt middleware share: reporting what they did (an event and a trace run),
//! models given by value or by `provider:model` name, and counters kept per thread and per run.

use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::agent::{AgentError, ModelSource, Runtime};
use crate::event::{EventData, EventKind};
use crate::model::ChatModel;

/// Sends a `middleware` event named `<middleware>.<what>` with `data`, when someone listens,
/// and notes it on the current trace run (`<what>` in its metadata).
pub(crate) async fn report(rt: &Runtime, middleware: &str, what: &str, data: Value) {
    if let Some(run) = crate::trace::current() {
        run.add_metadata(&format!("{middleware}.{what}"), data.clone());
    }
    if let Some(sink) = rt.node().events_of(EventKind::Middleware) {
        let event = rt
            .node()
            .event(format!("{middleware}.{what}"), EventData::Middleware(data));
        sink.send(event).await;
    }
}

/// Runs `work` as a `middleware` trace run named `name` (a child of the current run, when one
/// is recorded), failed with the error's text when it fails.
pub(crate) async fn traced<T, E: std::fmt::Display>(
    name: &str,
    inputs: impl FnOnce() -> Value,
    work: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let Some(parent) = crate::trace::current() else {
        return work.await;
    };
    let run = parent.child(name, crate::trace::RunKind::Middleware, inputs);
    let result = run.clone().scope(work).await;
    match &result {
        Ok(_) => run.finish(Value::Null),
        Err(e) => run.fail(&e.to_string()),
    }
    result
}

/// Models given to a middleware: values, or `provider:model` names resolved (from the
/// environment's configuration) when the agent is built.
pub(crate) struct Models {
    sources: Vec<ModelSource>,
    resolved: OnceLock<Vec<Arc<dyn ChatModel>>>,
}

impl std::fmt::Debug for Models {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(&self.sources).finish()
    }
}

impl Clone for Models {
    fn clone(&self) -> Self {
        let resolved = OnceLock::new();
        if let Some(models) = self.resolved.get() {
            let _ = resolved.set(models.clone());
        }
        Models {
            sources: self.sources.clone(),
            resolved,
        }
    }
}

impl Models {
    pub(crate) fn new(sources: Vec<ModelSource>) -> Self {
        let resolved = OnceLock::new();
        let values: Option<Vec<_>> = sources
            .iter()
            .map(|s| match s {
                ModelSource::Model(m) => Some(m.clone()),
                ModelSource::Name(_) => None,
            })
            .collect();
        if let Some(values) = values {
            let _ = resolved.set(values);
        }
        Models { sources, resolved }
    }

    pub(crate) fn len(&self) -> usize {
        self.sources.len()
    }

    pub(crate) fn push(&mut self, source: ModelSource) {
        let mut sources = std::mem::take(&mut self.sources);
        sources.push(source);
        *self = Models::new(sources);
    }

    /// Resolves the names (once); `who` names the middleware in the error.
    pub(crate) fn resolve(&self, who: &str) -> Result<(), AgentError> {
        if self.resolved.get().is_some() {
            return Ok(());
        }
        let config = crate::config::Config::from_env();
        let mut models = Vec::with_capacity(self.sources.len());
        for source in &self.sources {
            models.push(match source {
                ModelSource::Model(m) => m.clone(),
                ModelSource::Name(spec) => {
                    crate::model::init(spec, &config, crate::model::ModelOptions::default())
                        .map_err(|e| {
                            AgentError::Build(format!(
                                "middleware `{who}` could not set up model `{spec}`: {e}"
                            ))
                        })?
                }
            });
        }
        let _ = self.resolved.set(models);
        Ok(())
    }

    /// The models, once resolved (an empty list before the agent is built).
    pub(crate) fn get(&self) -> &[Arc<dyn ChatModel>] {
        self.resolved.get().map_or(&[], Vec::as_slice)
    }
}

/// A count kept per thread (checkpointed with the state) and per run (reset when a new
/// invocation starts: `invoke`, `resume`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct Counter {
    /// Across the thread's runs.
    pub(crate) thread: u64,
    /// In the run `run_id`.
    pub(crate) run: u64,
    /// The invocation `run` counts.
    pub(crate) run_id: String,
}

impl Counter {
    /// The counter in the state channel `key`, with the run count at 0 if it was counted in
    /// another invocation.
    pub(crate) fn read(rt: &Runtime, key: &str) -> Counter {
        let mut counter: Counter = rt
            .state()
            .custom
            .get(key)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .unwrap_or_default();
        let current = rt.node().invocation_id();
        if counter.run_id != current {
            counter.run = 0;
            counter.run_id = current.to_string();
        }
        counter
    }

    /// Adds `n` to both counts.
    pub(crate) fn add(&mut self, n: u64) {
        self.thread = self.thread.saturating_add(n);
        self.run = self.run.saturating_add(n);
    }

    pub(crate) fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Adds a write of `value` to the state channel `key` to `update` (keeping the channel writes
/// it already has).
pub(crate) fn set_custom(update: &mut crate::agent::AgentStateUpdate, key: &str, value: Value) {
    use crate::state::{DynUpdate, Write};
    update.custom = Some(match update.custom.take() {
        Some(Write::Value(mut writes)) => {
            writes.writes.insert(key.to_string(), Write::Value(value));
            Write::Value(writes)
        }
        Some(Write::Overwrite(mut writes)) => {
            writes.writes.insert(key.to_string(), Write::Value(value));
            Write::Overwrite(writes)
        }
        None => Write::Value(DynUpdate::new().set(key, value)),
    });
}

/// `execution` with a write of `value` to the state channel `key` added to its update.
pub(crate) fn with_custom(
    mut execution: crate::agent::ModelExecution,
    key: &str,
    value: Value,
) -> crate::agent::ModelExecution {
    let mut update = execution.update.take().unwrap_or_default();
    set_custom(&mut update, key, value);
    execution.with_update(update)
}

/// Asks `model` for a JSON answer matching `schema` (a side call of a middleware: a tool
/// selection, a route), traced as a `model` run named `run_name`. The answer's text is parsed,
/// a code fence around it tolerated.
pub(crate) async fn ask_json(
    model: &dyn ChatModel,
    run_name: &str,
    system: String,
    messages: Vec<crate::message::Message>,
    format_name: &str,
    schema: Value,
) -> Result<Value, crate::model::ModelError> {
    let mut request = crate::model::ModelRequest::new(messages).system(system);
    request.response_format = Some(crate::model::ResponseFormat {
        name: format_name.to_string(),
        schema,
        strict: true,
    });
    let options = crate::trace::TraceOptions::new().name(run_name);
    let response = crate::model::generate_traced(model, &request, &options).await?;
    let text = response.message.text();
    let trimmed = text.trim();
    let body = trimmed
        .strip_prefix("```json")
        .or_else(|| trimmed.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .unwrap_or(trimmed)
        .trim();
    serde_json::from_str(body).map_err(|e| crate::model::ModelError::MalformedResponse {
        provider: model.provider().to_string(),
        message: format!(
            "the {format_name} answer is not the JSON asked for ({e}): {}",
            crate::text::clip(&text, 500)
        ),
    })
}

/// The last user message of a conversation.
pub(crate) fn last_user_message(
    messages: &[crate::message::Message],
) -> Option<&crate::message::Message> {
    messages
        .iter()
        .rev()
        .find(|m| m.role == crate::message::Role::User)
}

/// Runs CPU-bound work on tokio's blocking pool, so the runtime's workers keep running other
/// tasks; inline when there is no runtime, or when the pool could not run it (shutting down).
pub(crate) async fn offload<T: Send + 'static>(work: impl Fn() -> T + Send + Sync + 'static) -> T {
    let work = Arc::new(work);
    if let Ok(handle) = tokio::runtime::Handle::try_current() {
        let pooled = Arc::clone(&work);
        if let Ok(done) = handle.spawn_blocking(move || pooled()).await {
            return done;
        }
    }
    work()
}
