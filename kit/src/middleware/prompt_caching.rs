//! Prompt caching for Anthropic models: cache breakpoints placed on every model request
//! (LangChain's `AnthropicPromptCachingMiddleware`).

use serde_json::json;

use crate::agent::{AgentError, Hook, Middleware, ModelExecution, ModelNext, Runtime};
use crate::model::ModelRequest;
use crate::model::anthropic::{CacheTtl, REQUEST_CACHE_CONTROL};

/// What the middleware does when the model answering is not an Anthropic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnsupportedModel {
    /// Send the request unchanged, silently.
    Ignore,
    /// Send the request unchanged and log a warning (the default).
    #[default]
    Warn,
    /// Fail the run with [`PromptCachingUnsupported`].
    Raise,
}

/// The model answering cannot cache prompts this way ([`UnsupportedModel::Raise`]; kind
/// `prompt_caching_unsupported`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "AnthropicPromptCachingMiddleware only supports Anthropic models, not `{provider}:{model}`; \
     use an `anthropic:` model, or set `unsupported_model_behavior` to `Ignore` or `Warn`"
)]
pub struct PromptCachingUnsupported {
    /// The provider of the model.
    pub provider: String,
    /// The model.
    pub model: String,
}

/// Marks every request to an Anthropic model with cache breakpoints: the system prompt, the
/// tool definitions and the last message (Anthropic caches the prefix up to each), so each
/// turn of a conversation reads what the turn before wrote. Usage reports the cache reads and
/// writes (`cache_read_tokens`, `cache_creation_tokens`), and cost counts them at their price.
///
/// Requests with fewer than [`min_messages_to_cache`](Self::min_messages_to_cache) messages
/// (the system prompt counts as one) are sent unmarked. The model is the one that answers the
/// call: after a fallback or a router picked a non-Anthropic model, the request goes unmarked
/// as [`UnsupportedModel`] says (put this middleware after them).
///
/// It works through the request (the `kit_cache_control` hint of
/// [`REQUEST_CACHE_CONTROL`]), so the model's own
/// [`PromptCache`](crate::model::anthropic::PromptCache) setting is not needed.
///
/// ```
/// use kit::middleware::prompt_caching::AnthropicPromptCachingMiddleware;
/// use kit::model::anthropic::CacheTtl;
///
/// let caching = AnthropicPromptCachingMiddleware::new().ttl(CacheTtl::OneHour);
/// # drop(caching);
/// ```
#[derive(Debug, Clone, Default)]
pub struct AnthropicPromptCachingMiddleware {
    ttl: CacheTtl,
    min_messages_to_cache: usize,
    unsupported_model_behavior: UnsupportedModel,
}

impl AnthropicPromptCachingMiddleware {
    /// Five-minute entries, every request marked, a warning for other models.
    pub fn new() -> Self {
        Self::default()
    }

    /// The entries' lifetime (default five minutes).
    #[must_use]
    pub fn ttl(mut self, ttl: CacheTtl) -> Self {
        self.ttl = ttl;
        self
    }

    /// Marks only requests of at least this many messages, the system prompt counted
    /// (default 0).
    #[must_use]
    pub fn min_messages_to_cache(mut self, n: usize) -> Self {
        self.min_messages_to_cache = n;
        self
    }

    /// What to do for a model that is not Anthropic's (default [`UnsupportedModel::Warn`]).
    #[must_use]
    pub fn unsupported_model_behavior(mut self, behavior: UnsupportedModel) -> Self {
        self.unsupported_model_behavior = behavior;
        self
    }
}

#[crate::async_trait]
impl Middleware for AnthropicPromptCachingMiddleware {
    fn name(&self) -> &str {
        "AnthropicPromptCachingMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let model = next.model();
        if model.provider() != "anthropic" {
            match self.unsupported_model_behavior {
                UnsupportedModel::Ignore => {}
                UnsupportedModel::Warn => tracing::warn!(
                    provider = model.provider(),
                    model = model.model_name(),
                    "AnthropicPromptCachingMiddleware: not an Anthropic model; the request is \
                     sent without cache breakpoints"
                ),
                UnsupportedModel::Raise => {
                    return Err(AgentError::middleware_error(
                        self.name(),
                        "prompt_caching_unsupported",
                        PromptCachingUnsupported {
                            provider: model.provider().to_string(),
                            model: model.model_name().to_string(),
                        },
                    ));
                }
            }
            return next.call(request).await;
        }
        let count = request.messages.len() + usize::from(request.system.is_some());
        if count < self.min_messages_to_cache {
            return next.call(request).await;
        }
        let control = match self.ttl {
            CacheTtl::FiveMinutes => json!({"type": "ephemeral"}),
            CacheTtl::OneHour => json!({"type": "ephemeral", "ttl": "1h"}),
        };
        request
            .options
            .extra
            .insert(REQUEST_CACHE_CONTROL.to_string(), control);
        next.call(request).await
    }
}
