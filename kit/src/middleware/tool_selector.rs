//! An LLM tool selector: a cheap model picks the tools relevant to the user's request, and
//! only those are offered to the agent's model (LangChain's `LLMToolSelectorMiddleware`).

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::support::{Models, ask_json, last_user_message, report};
use crate::agent::{
    AgentError, BuildContext, Hook, IntoModelSource, Middleware, ModelExecution, ModelNext, Runtime,
};
use crate::message::Message;
use crate::model::{ModelRequest, ToolSpec};

/// LangChain's default instructions for the selecting model.
pub const DEFAULT_SYSTEM_PROMPT: &str =
    "Your goal is to select the most relevant tools for answering the user's query.";

/// The selecting model named a tool the agent does not have (kind `tool_selection`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Model selected invalid tools: {}; the selecting model must pick among the agent's tools \
     ({}) — use a more capable selection model, or check its instructions",
    invalid.join(", "),
    available.join(", ")
)]
pub struct InvalidToolSelection {
    /// The names that are not tools of the agent.
    pub invalid: Vec<String>,
    /// The tools it could pick from.
    pub available: Vec<String>,
}

/// Tools of `always_include` are not tools of the agent (kind `tool_selection`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "Tools in always_include not found in request: {}. Available tools: {}; fix the names \
     given to `always_include`",
    missing.join(", "),
    available.join(", ")
)]
pub struct AlwaysIncludeMissing {
    /// The names that are not tools of the agent.
    pub missing: Vec<String>,
    /// The agent's tools, sorted.
    pub available: Vec<String>,
}

/// A selection: the user message it was made for, and the tool names.
type Selection = (String, Vec<String>);

/// Lets a cheap model choose which tools the agent's model sees, for agents with many tools.
///
/// Before a model call, the selecting model gets the instructions and the user's latest
/// message, and answers (structured output) with the names of the relevant tools, most
/// relevant first; the agent's model then sees only those (at most
/// [`max_tools`](Self::max_tools)), plus the [`always_include`](Self::always_include) ones,
/// which are never counted nor offered for selection (the chosen tools come first, then those,
/// each in the agent's order). With no tools, none to choose from, or no user message (LangChain
/// fails there), nothing is asked and the request goes unchanged.
///
/// The selection is made once per user message (the tool loop of one request keeps its tools;
/// LangChain asks again before every call). As in LangChain, a name that is not one of the
/// agent's tools fails the run with [`InvalidToolSelection`], and an `always_include` name
/// that is not a tool with [`AlwaysIncludeMissing`]. The selecting call is its own `model`
/// trace run (of the selecting model), and an `LLMToolSelectorMiddleware.selected` event lists
/// the tools chosen.
///
/// ```
/// use kit::agent::Agent;
/// use kit::middleware::tool_selector::LLMToolSelectorMiddleware;
/// use kit::testing::ScriptedModel;
/// use kit::Message;
///
/// # fn main() -> Result<(), kit::agent::AgentError> {
/// let cheap = ScriptedModel::new([Message::assistant(r#"{"tools": ["weather"]}"#)]);
/// let selector = LLMToolSelectorMiddleware::new()
///     .model(cheap)
///     .max_tools(3)
///     .always_include(["search"]);
/// # let _ = selector; Ok(()) }
/// ```
#[derive(Clone)]
pub struct LLMToolSelectorMiddleware {
    model: Option<Models>,
    system_prompt: String,
    max_tools: Option<usize>,
    always_include: Vec<String>,
    /// The last selection.
    last: Arc<Mutex<Option<Selection>>>,
}

impl std::fmt::Debug for LLMToolSelectorMiddleware {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LLMToolSelectorMiddleware")
            .field("model", &self.model)
            .field("max_tools", &self.max_tools)
            .field("always_include", &self.always_include)
            .finish_non_exhaustive()
    }
}

impl Default for LLMToolSelectorMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl LLMToolSelectorMiddleware {
    /// Selection by the agent's own model, with the default instructions and no maximum.
    pub fn new() -> Self {
        LLMToolSelectorMiddleware {
            model: None,
            system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
            max_tools: None,
            always_include: Vec::new(),
            last: Arc::default(),
        }
    }

    /// The selecting model (a cheap one): a value or a `provider:model` name.
    #[must_use]
    pub fn model(mut self, model: impl IntoModelSource) -> Self {
        self.model = Some(Models::new(vec![model.into_model_source()]));
        self
    }

    /// The selecting model's instructions.
    #[must_use]
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.system_prompt = prompt.into();
        self
    }

    /// Offers at most this many selected tools (the first the model listed).
    #[must_use]
    pub fn max_tools(mut self, n: usize) -> Self {
        self.max_tools = Some(n);
        self
    }

    /// Tools always offered, whatever the selection.
    #[must_use]
    pub fn always_include<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.always_include = tools.into_iter().map(Into::into).collect();
        self
    }

    fn instructions(&self) -> String {
        match self.max_tools {
            Some(n) => format!(
                "{}\nIMPORTANT: List the tool names in order of relevance, with the most \
                 relevant first. If you exceed the maximum number of tools, only the first {n} \
                 will be used.",
                self.system_prompt
            ),
            None => self.system_prompt.clone(),
        }
    }

    /// The names chosen among `available`, in the model's order, at most `max_tools`.
    fn choose(&self, answer: &Value, available: &[&ToolSpec]) -> Result<Vec<String>, AgentError> {
        let names: Vec<String> = answer
            .get("tools")
            .and_then(Value::as_array)
            .map(|list| {
                list.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let known = |n: &str| available.iter().any(|t| t.name == n);
        let invalid: Vec<String> = names.iter().filter(|n| !known(n)).cloned().collect();
        if !invalid.is_empty() {
            return Err(AgentError::middleware_error(
                self.name(),
                "tool_selection",
                InvalidToolSelection {
                    invalid,
                    available: available.iter().map(|t| t.name.clone()).collect(),
                },
            ));
        }
        let mut chosen: Vec<String> = Vec::new();
        for n in names {
            if !chosen.contains(&n) && self.max_tools.is_none_or(|max| chosen.len() < max) {
                chosen.push(n);
            }
        }
        Ok(chosen)
    }
}

#[crate::async_trait]
impl Middleware for LLMToolSelectorMiddleware {
    fn name(&self) -> &str {
        "LLMToolSelectorMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn on_build(&self, _agent: &BuildContext<'_>) -> Result<(), AgentError> {
        match &self.model {
            Some(models) => models.resolve(self.name()),
            None => Ok(()),
        }
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        if request.tools.is_empty() {
            return next.call(request).await;
        }
        let missing: Vec<String> = self
            .always_include
            .iter()
            .filter(|name| !request.tools.iter().any(|t| &t.name == *name))
            .cloned()
            .collect();
        if !missing.is_empty() {
            let mut available: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
            available.sort();
            return Err(AgentError::middleware_error(
                self.name(),
                "tool_selection",
                AlwaysIncludeMissing { missing, available },
            ));
        }
        let available: Vec<&ToolSpec> = request
            .tools
            .iter()
            .filter(|t| !self.always_include.contains(&t.name))
            .collect();
        if available.is_empty() {
            return next.call(request).await;
        }
        let Some(user) = last_user_message(&request.messages) else {
            return next.call(request).await;
        };
        let cached = self
            .last
            .lock()
            .ok()
            .and_then(|last| last.clone())
            .filter(|(id, _)| *id == user.id)
            .map(|(_, names)| names);
        let chosen = match cached {
            Some(names) => names,
            None => {
                let model = match self.model.as_ref().and_then(|m| m.get().first()) {
                    Some(m) => m.clone(),
                    None => rt.model().clone(),
                };
                let items: Vec<Value> = available
                    .iter()
                    .map(|t| {
                        json!({"type": "string", "const": t.name, "description": t.description})
                    })
                    .collect();
                let schema = json!({
                    "type": "object",
                    "description": "Tools to use. Place the most relevant tools first.",
                    "properties": {"tools": {"type": "array", "items": {"anyOf": items},
                        "description": "Tools to use. Place the most relevant tools first."}},
                    "required": ["tools"],
                    "additionalProperties": false,
                });
                let asked = Message::user(user.text());
                let answer = ask_json(
                    model.as_ref(),
                    self.name(),
                    self.instructions(),
                    vec![asked],
                    "ToolSelectionResponse",
                    schema,
                )
                .await?;
                let chosen = self.choose(&answer, &available)?;
                report(
                    rt,
                    self.name(),
                    "selected",
                    json!({"tools": chosen, "from": available.len()}),
                )
                .await;
                if let Ok(mut last) = self.last.lock() {
                    *last = Some((user.id.clone(), chosen.clone()));
                }
                chosen
            }
        };
        // The chosen tools, then the always-included ones, each in the agent's order.
        let tools: Vec<ToolSpec> = request
            .tools
            .iter()
            .filter(|t| chosen.contains(&t.name))
            .chain(
                request
                    .tools
                    .iter()
                    .filter(|t| self.always_include.contains(&t.name)),
            )
            .cloned()
            .collect();
        request.tools = tools.into();
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_valid_choices_up_to_the_maximum() {
        let a = ToolSpec::new("a", "", json!({}));
        let b = ToolSpec::new("b", "", json!({}));
        let c = ToolSpec::new("c", "", json!({}));
        let available = [&a, &b, &c];
        let mw = LLMToolSelectorMiddleware::new().max_tools(2);
        let chosen = mw
            .choose(&json!({"tools": ["c", "c", "a", "b"]}), &available)
            .unwrap();
        assert_eq!(chosen, ["c", "a"]);
        let unbounded = LLMToolSelectorMiddleware::new();
        assert_eq!(
            unbounded.choose(&json!({"tools": []}), &available).unwrap(),
            Vec::<String>::new()
        );
        let err = mw
            .choose(&json!({"tools": ["a", "nope"]}), &available)
            .unwrap_err();
        let invalid = err.downcast_middleware::<InvalidToolSelection>().unwrap();
        assert_eq!(invalid.invalid, ["nope"]);
        assert!(
            err.to_string()
                .contains("Model selected invalid tools: nope")
        );
    }
}
