//! Model routing: a cheap decision model picks which model serves the user's request
//! (LangChain 1.5's `ModelRoutingMiddleware`).

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::python::py_json;
use super::support::{Models, ask_json, last_user_message, report, with_custom};
use crate::agent::{
    AgentError, BuildContext, Hook, IntoModelSource, Middleware, ModelExecution, ModelNext, Runtime,
};
use crate::message::Message;
use crate::model::{ChatModel, ModelRequest};
use crate::state::DynReducer;

/// LangChain's default instructions for the decision model.
pub const DEFAULT_SYSTEM_PROMPT: &str =
    "Choose the least expensive model likely to complete the user's task.";

/// The state channel holding the route of the current request.
pub const ROUTE_KEY: &str = "model_route";

/// The decision model answered with a route that is not configured, and there is no fallback
/// route (kind `model_routing`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Model routing selection must be a configured route name: got {got}, routes are {}; set a \
     `fallback_route`, or use a more capable decision model",
    routes.join(", ")
)]
pub struct InvalidRoute {
    /// What the decision model answered.
    pub got: String,
    /// The configured routes.
    pub routes: Vec<String>,
}

/// The route recorded in the state: which route, chosen for which user message.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Recorded {
    route: String,
    message_id: String,
}

/// Routes each user request to one of several models, chosen by a cheap decision model.
///
/// Each route has a name, a model and the criteria that say when to use it. On the first
/// model call after a user message, the decision model gets the instructions, the criteria
/// (as JSON) and that message, and answers (structured output) with a route name; every
/// model call until the next user message goes to that route's model, so a tool loop keeps
/// one model, and so does a run resumed after a pause. The route is kept in the state
/// channel [`ROUTE_KEY`] (`{"route", "message_id"}`); a new user message routes again.
///
/// An unknown answer goes to the [`fallback_route`](Self::fallback_route) if one is set, and
/// otherwise fails the run with [`InvalidRoute`]. The decision call is its own `model` trace
/// run (`ModelRoutingMiddleware`); a `ModelRoutingMiddleware.route` event reports the
/// choice, and the `model` run of each call names the model that answered. Place it before
/// a fallback so fallbacks follow the chosen model. The candidate models must handle the
/// agent's tools and response format.
///
/// ```
/// use kit::agent::Agent;
/// use kit::middleware::router::ModelRoutingMiddleware;
/// use kit::testing::ScriptedModel;
/// use kit::Message;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::agent::AgentError> {
/// let decider = ScriptedModel::new([Message::assistant(r#"{"route": "reasoning"}"#)]);
/// let fast = ScriptedModel::new([Message::assistant("fast answer")]);
/// let deep = ScriptedModel::new([Message::assistant("a careful answer")]);
/// let agent = Agent::builder()
///     .model(fast.clone())
///     .middleware(
///         ModelRoutingMiddleware::new(decider)
///             .route("fast", fast, "Direct lookups and short answers")
///             .route("reasoning", deep, "Architectural trade-offs, multi-step plans"),
///     )
///     .build()?;
/// let out = agent.invoke("Should we shard the database?").await?;
/// assert_eq!(out.state().final_text(), "a careful answer");
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct ModelRoutingMiddleware {
    decider: Models,
    routes: Vec<(String, Models, String)>,
    system_prompt: String,
    fallback_route: Option<String>,
}

impl std::fmt::Debug for ModelRoutingMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRoutingMiddleware")
            .field(
                "routes",
                &self.routes.iter().map(|r| &r.0).collect::<Vec<_>>(),
            )
            .field("fallback_route", &self.fallback_route)
            .finish_non_exhaustive()
    }
}

impl ModelRoutingMiddleware {
    /// Routing decided by `decision_model` (a cheap model, a value or a `provider:model`
    /// name). Add the routes with [`route`](Self::route).
    pub fn new(decision_model: impl IntoModelSource) -> Self {
        ModelRoutingMiddleware {
            decider: Models::new(vec![decision_model.into_model_source()]),
            routes: Vec::new(),
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            fallback_route: None,
        }
    }

    /// Adds a route: its name, its model, and when to choose it.
    #[must_use]
    pub fn route(
        mut self,
        name: impl Into<String>,
        model: impl IntoModelSource,
        criteria: impl Into<String>,
    ) -> Self {
        self.routes.push((
            name.into(),
            Models::new(vec![model.into_model_source()]),
            criteria.into(),
        ));
        self
    }

    /// The decision model's instructions (default [`DEFAULT_SYSTEM_PROMPT`]).
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// The route taken when the decision model's answer is not a route.
    #[must_use]
    pub fn fallback_route(mut self, route: impl Into<String>) -> Self {
        self.fallback_route = Some(route.into());
        self
    }

    fn model_of(&self, route: &str) -> Option<Arc<dyn ChatModel>> {
        self.routes
            .iter()
            .find(|r| r.0 == route)
            .and_then(|r| r.1.get().first().cloned())
    }

    fn validate(&self, got: Option<&str>) -> Result<String, AgentError> {
        if let Some(route) = got.filter(|g| self.routes.iter().any(|r| r.0 == *g)) {
            return Ok(route.to_string());
        }
        if let Some(fallback) = &self.fallback_route {
            tracing::warn!(
                answer = got.unwrap_or("(none)"),
                "invalid model routing selection; using the fallback route"
            );
            return Ok(fallback.clone());
        }
        Err(AgentError::middleware_error(
            self.name(),
            "model_routing",
            InvalidRoute {
                got: got.unwrap_or("(no route)").to_string(),
                routes: self.routes.iter().map(|r| r.0.clone()).collect(),
            },
        ))
    }

    async fn decide(&self, user: &Message) -> Result<String, AgentError> {
        let Some(decider) = self.decider.get().first() else {
            return Err(AgentError::Build(
                "ModelRoutingMiddleware: the decision model was not set up (was the agent \
                 built?)"
                    .into(),
            ));
        };
        // As Python's `json.dumps` writes the criteria dict, in the routes' order.
        let criteria: Vec<String> = self
            .routes
            .iter()
            .map(|r| {
                format!(
                    "{}: {}",
                    py_json(&Value::from(r.0.as_str())),
                    py_json(&Value::from(r.2.as_str()))
                )
            })
            .collect();
        let prompt = format!(
            "{}\n\nModel routing criteria:\n{{{}}}",
            self.system_prompt,
            criteria.join(", ")
        );
        let names: Vec<&str> = self.routes.iter().map(|r| r.0.as_str()).collect();
        let schema = json!({
            "title": "ModelRoutingResponse",
            "description": "Select a model route for the user's task.",
            "type": "object",
            "properties": {"route": {"type": "string", "enum": names,
                "description": "The selected model route."}},
            "required": ["route"],
            "additionalProperties": false,
        });
        let answer = ask_json(
            decider.as_ref(),
            self.name(),
            prompt,
            vec![Message::user(user.text())],
            "ModelRoutingResponse",
            schema,
        )
        .await?;
        self.validate(answer.get("route").and_then(Value::as_str))
    }
}

#[crate::async_trait]
impl Middleware for ModelRoutingMiddleware {
    fn name(&self) -> &str {
        "ModelRoutingMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn on_build(&self, _agent: &BuildContext<'_>) -> Result<(), AgentError> {
        if self.routes.is_empty() || self.routes.iter().any(|r| r.0.is_empty()) {
            return Err(AgentError::Build(
                "ModelRoutingMiddleware: give it routes with non-empty names (`.route(name, \
                 model, criteria)`)"
                    .into(),
            ));
        }
        if let Some(f) = &self.fallback_route
            && !self.routes.iter().any(|r| &r.0 == f)
        {
            return Err(AgentError::Build(format!(
                "ModelRoutingMiddleware: fallback_route `{f}` must be a configured route name"
            )));
        }
        self.decider.resolve(self.name())?;
        for (_, models, _) in &self.routes {
            models.resolve(self.name())?;
        }
        Ok(())
    }

    fn state_channels(&self) -> Vec<(String, Option<DynReducer>)> {
        vec![(ROUTE_KEY.to_string(), None)]
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let Some(user) = last_user_message(&request.messages) else {
            return next.call(request).await;
        };
        let recorded: Option<Recorded> = rt
            .state()
            .custom
            .get(ROUTE_KEY)
            .and_then(|v| serde_json::from_value(v.clone()).ok())
            .filter(|r: &Recorded| r.message_id == user.id);
        if let Some(recorded) = recorded {
            let route = self.validate(Some(&recorded.route))?;
            if let Some(model) = self.model_of(&route) {
                return next.with_model(model).call(request).await;
            }
        }
        let route = self.decide(user).await?;
        report(
            rt,
            self.name(),
            "route",
            json!({"route": route, "message_id": user.id}),
        )
        .await;
        let Some(model) = self.model_of(&route) else {
            return next.call(request).await;
        };
        let record = Recorded {
            route,
            message_id: user.id.clone(),
        };
        let execution = next.with_model(model).call(request).await?;
        Ok(with_custom(
            execution,
            ROUTE_KEY,
            serde_json::to_value(record).unwrap_or(Value::Null),
        ))
    }
}
