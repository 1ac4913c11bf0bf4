//! Model fallback: when the model call fails, the same request goes to the next model of a
//! list (LangChain's `ModelFallbackMiddleware`).

use std::sync::Arc;

use serde_json::json;

use super::support::{Models, report, traced};
use crate::agent::{
    AgentError, BuildContext, Hook, IntoModelSource, Middleware, ModelExecution, ModelNext, Runtime,
};
use crate::model::{ModelError, ModelRequest};

type FallBackOn = dyn Fn(&ModelError) -> bool + Send + Sync;

/// Tries the agent's model, then each fallback model in order, until one answers.
///
/// A model is passed over when its call fails with a [`ModelError`] that
/// [`fall_back_on`](Self::fall_back_on) accepts (by default every model error: a rate limit,
/// an overloaded or failing server, a timeout, a refused request, a context the model cannot
/// hold). Other failures (a guardrail that stopped the run, a pause for review) are not model
/// failures and pass through. When every model failed, the run fails with the last model's
/// error.
///
/// Each fallback attempt is its own `middleware` trace run (named
/// `ModelFallbackMiddleware:<model>`) under the `model` run, which names the model that answered; a
/// `ModelFallbackMiddleware.fallback` event reports each switch. The wrappers after this one run for
/// every attempt; put retry *after* fallback to retry each model before moving on, or *before*
/// it to retry the whole list.
///
/// ```
/// use kit::agent::Agent;
/// use kit::middleware::fallback::ModelFallbackMiddleware;
/// use kit::model::ModelError;
/// use kit::testing::{ScriptStep, ScriptedModel};
/// use kit::Message;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
/// let primary = ScriptedModel::new([ScriptStep::Fail(ModelError::Server {
///     provider: "scripted".into(), status: 529, message: "Overloaded".into(),
/// })]);
/// let backup = ScriptedModel::new([Message::assistant("Answered by the backup.")]);
/// let agent = Agent::builder()
///     .model(primary)
///     .middleware(ModelFallbackMiddleware::new([backup]))
///     .build()?;
/// let out = agent.invoke("Hi").await?;
/// assert_eq!(out.state().final_text(), "Answered by the backup.");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ModelFallbackMiddleware {
    models: Models,
    fall_back_on: Option<Arc<FallBackOn>>,
}

impl std::fmt::Debug for ModelFallbackMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFallbackMiddleware")
            .field("models", &self.models)
            .finish_non_exhaustive()
    }
}

impl ModelFallbackMiddleware {
    /// Falls back to these models, in order: values, `Arc<dyn ChatModel>`s, or
    /// `provider:model` names (resolved from the environment when the agent is built).
    pub fn new<M: IntoModelSource>(models: impl IntoIterator<Item = M>) -> Self {
        ModelFallbackMiddleware {
            models: Models::new(
                models
                    .into_iter()
                    .map(IntoModelSource::into_model_source)
                    .collect(),
            ),
            fall_back_on: None,
        }
    }

    /// Adds a fallback model at the end of the list.
    #[must_use]
    pub fn model(mut self, model: impl IntoModelSource) -> Self {
        self.models.push(model.into_model_source());
        self
    }

    /// Falls back only on the errors `predicate` accepts (e.g.
    /// [`ModelError::is_transient`]); other errors fail the run at once.
    #[must_use]
    pub fn fall_back_on(
        mut self,
        predicate: impl Fn(&ModelError) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.fall_back_on = Some(Arc::new(predicate));
        self
    }

    fn falls_back(&self, e: &ModelError) -> bool {
        self.fall_back_on.as_ref().is_none_or(|p| p(e))
    }
}

#[crate::async_trait]
impl Middleware for ModelFallbackMiddleware {
    fn name(&self) -> &str {
        "ModelFallbackMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn on_build(&self, _agent: &BuildContext<'_>) -> Result<(), AgentError> {
        if self.models.len() == 0 {
            return Err(AgentError::Build(
                "ModelFallbackMiddleware has no fallback models: give it at least one".into(),
            ));
        }
        self.models.resolve(self.name())
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let mut failed = next.model().clone();
        let mut error = match next.call(request.clone()).await {
            Err(AgentError::Model(e)) if self.falls_back(&e) => e,
            other => return other,
        };
        for model in self.models.get() {
            report(
                rt,
                self.name(),
                "fallback",
                json!({
                    "failed": failed.model_name(),
                    "error": error.kind(),
                    "message": error.to_string(),
                    "next": model.model_name(),
                }),
            )
            .await;
            let attempt = next.with_model(model.clone());
            let name = format!("ModelFallbackMiddleware:{}", model.model_name());
            let result = traced(
                &name,
                || json!({"model": model.model_name(), "after": error.kind()}),
                attempt.call(request.clone()),
            )
            .await;
            error = match result {
                Err(AgentError::Model(e)) if self.falls_back(&e) => e,
                other => return other,
            };
            failed = model.clone();
        }
        Err(AgentError::Model(error))
    }
}
