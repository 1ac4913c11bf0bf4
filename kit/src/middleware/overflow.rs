//! Overflow recovery: when the provider says the context is full, compact and retry once.

use super::compaction::compact;
use crate::agent::{
    AgentError, AgentStateUpdate, Hook, Middleware, ModelExecution, ModelNext, Runtime,
};
use crate::message::Role;
use crate::model::{ModelError, ModelRequest};
use crate::state::Overwrite;
use crate::tool::truncate_content;

/// Catches the provider's context-length error, compacts the request (summary of the older
/// messages, recent ones kept whole, oversized tool results clipped) and retries once. If the
/// compacted request is not smaller, or still does not fit, the run fails with a clear error.
///
/// The answer comes back with a state update that replaces `messages` by the compacted
/// conversation (the summary, then the kept messages whole), so the next turn does not
/// overflow again.
#[derive(Debug, Clone)]
pub struct OverflowRecoveryMiddleware {
    keep_messages: usize,
    max_tool_result_chars: usize,
}

impl Default for OverflowRecoveryMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl OverflowRecoveryMiddleware {
    /// Recovery keeping the last 6 messages and clipping tool results over 20,000 characters.
    pub fn new() -> Self {
        OverflowRecoveryMiddleware {
            keep_messages: 6,
            max_tool_result_chars: 20_000,
        }
    }

    /// Keep this many recent messages verbatim.
    #[must_use]
    pub fn keep_messages(mut self, n: usize) -> Self {
        self.keep_messages = n;
        self
    }
}

fn still_too_big(provider: &str) -> AgentError {
    AgentError::Model(ModelError::ContextLengthExceeded {
        provider: provider.to_string(),
        message: "Model input still does not fit after recovery; reduce input, tools, or \
                  configured output tokens"
            .to_string(),
    })
}

#[crate::async_trait]
impl Middleware for OverflowRecoveryMiddleware {
    fn name(&self) -> &str {
        "OverflowRecovery"
    }

    fn placement(&self) -> crate::agent::Placement {
        crate::agent::Placement::OVERFLOW_RECOVERY
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let original = request.clone();
        let error = match next.call(request).await {
            Err(AgentError::Model(e)) if e.is_context_overflow() => e,
            other => return other,
        };
        let provider = rt.model().provider().to_string();
        tracing::info!(error = %error, "context overflow: compacting and retrying once");
        let model = rt.model().as_ref();
        // The summary request itself must fit: give it at most half the failed request.
        let budget = (original.estimate_tokens() as usize)
            .saturating_mul(2)
            .max(4_000);
        // Keep the configured tail, but always summarise something: with few, huge messages,
        // keep only the last one.
        let keep = if super::compaction::safe_cutoff(&original.messages, self.keep_messages) == 0 {
            1
        } else {
            self.keep_messages
        };
        let compacted = compact(model, &original.messages, keep, budget)
            .await
            .map_err(|e| {
                if e.is_context_overflow() {
                    still_too_big(&provider)
                } else {
                    AgentError::Model(e)
                }
            })?;
        let mut retry = original.clone();
        let summary_info = match compacted {
            Some((summary, cut)) => {
                let mut messages = Vec::with_capacity(original.messages.len() - cut + 1);
                messages.push(summary.clone());
                messages.extend_from_slice(&original.messages[cut..]);
                retry.messages = messages.into();
                Some((summary, cut))
            }
            None => None,
        };
        for m in retry
            .messages
            .make_mut()
            .iter_mut()
            .filter(|m| m.role == Role::Tool)
        {
            if m.content.text_len() > self.max_tool_result_chars {
                truncate_content(&mut m.content, self.max_tool_result_chars);
            }
        }
        if retry.estimate_tokens() >= original.estimate_tokens() {
            return Err(still_too_big(&provider));
        }
        match next.call(retry).await {
            Ok(execution) => Ok(match summary_info {
                Some((summary, cut)) => {
                    let mut kept = Vec::with_capacity(original.messages.len() - cut + 1);
                    kept.push(summary);
                    kept.extend_from_slice(&original.messages[cut..]);
                    execution.with_update(AgentStateUpdate::new().messages(Overwrite(kept)))
                }
                None => execution,
            }),
            Err(AgentError::Model(e)) if e.is_context_overflow() => Err(still_too_big(&provider)),
            Err(e) => Err(e),
        }
    }
}
