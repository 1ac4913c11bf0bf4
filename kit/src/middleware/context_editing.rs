//! Context editing: clearing old tool results from what the model sees once the conversation
//! grows past a token budget (LangChain's `ContextEditingMiddleware` with `ClearToolUsesEdit`,
//! the strategy of Anthropic's context management).

use serde_json::{Map, Value, json};

use super::support::report;
use crate::agent::{AgentError, Hook, Middleware, ModelExecution, ModelNext, Runtime};
use crate::hash::FastMap;
use crate::message::{Message, Role};
use crate::model::{ModelRequest, estimate_message_chars};

/// The metadata key marking a cleared tool result (`{"cleared": true, "strategy":
/// "clear_tool_uses"}`), as LangChain marks it.
pub const CLEARED_KEY: &str = "context_editing";

/// Clears the oldest tool results when the request is over a token budget.
///
/// Only the request sent to the model is edited: the state keeps every result, so a later
/// turn (or a person reading the thread) still has them. When the request's estimated size is
/// over [`trigger`](Self::trigger) tokens, tool results are cleared oldest first, except the
/// [`keep`](Self::keep) most recent ones and those of [`exclude_tools`](Self::exclude_tools):
/// each keeps its place, its call id and its tool name, and its content becomes the
/// [`placeholder`](Self::placeholder) (`[cleared]`), so every tool call still has its
/// result and the conversation stays valid for the provider. With
/// [`clear_at_least`](Self::clear_at_least), clearing stops once that many tokens were freed;
/// with [`clear_tool_inputs`](Self::clear_tool_inputs), the arguments of the cleared calls
/// go too.
///
/// Defaults are LangChain's: trigger 100,000 tokens, keep 3, clear everything else, keep
/// the inputs. Tokens are estimated at four characters each.
///
/// ```
/// use kit::middleware::context_editing::ContextEditingMiddleware;
///
/// let editing = ContextEditingMiddleware::new()
///     .trigger(50_000)
///     .keep(5)
///     .exclude_tools(["read_file"]);
/// # drop(editing);
/// ```
#[derive(Debug, Clone)]
pub struct ContextEditingMiddleware {
    trigger: u64,
    clear_at_least: u64,
    keep: usize,
    clear_tool_inputs: bool,
    exclude_tools: Vec<String>,
    placeholder: String,
}

impl Default for ContextEditingMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl ContextEditingMiddleware {
    /// LangChain's `ClearToolUsesEdit()` defaults.
    pub fn new() -> Self {
        ContextEditingMiddleware {
            trigger: 100_000,
            clear_at_least: 0,
            keep: 3,
            clear_tool_inputs: false,
            exclude_tools: Vec::new(),
            placeholder: "[cleared]".into(),
        }
    }

    /// Edits only requests of more than this many tokens (default 100,000).
    #[must_use]
    pub fn trigger(mut self, tokens: u64) -> Self {
        self.trigger = tokens;
        self
    }

    /// Stops clearing once this many tokens were freed (default 0: clear every candidate).
    #[must_use]
    pub fn clear_at_least(mut self, tokens: u64) -> Self {
        self.clear_at_least = tokens;
        self
    }

    /// Keeps this many most recent tool results whole (default 3).
    #[must_use]
    pub fn keep(mut self, results: usize) -> Self {
        self.keep = results;
        self
    }

    /// Also clears the arguments of the cleared calls (default off).
    #[must_use]
    pub fn clear_tool_inputs(mut self, on: bool) -> Self {
        self.clear_tool_inputs = on;
        self
    }

    /// Never clears the results of these tools.
    #[must_use]
    pub fn exclude_tools<S: Into<String>>(mut self, tools: impl IntoIterator<Item = S>) -> Self {
        self.exclude_tools = tools.into_iter().map(Into::into).collect();
        self
    }

    /// What a cleared result says instead (default `[cleared]`).
    #[must_use]
    pub fn placeholder(mut self, text: impl Into<String>) -> Self {
        self.placeholder = text.into();
        self
    }

    /// Clears what the rules say in `messages`; returns how many results were cleared and the
    /// tokens freed.
    fn edit(&self, messages: &mut [Message]) -> (usize, u64) {
        let results = messages.iter().filter(|m| m.role == Role::Tool).count();
        let take = results.saturating_sub(self.keep);
        let mut cleared = 0;
        let mut freed = 0u64;
        for Origin {
            result: i,
            answer: ai,
            call: at,
        } in origins(messages, take)
        {
            let tool = messages[i]
                .name
                .clone()
                .unwrap_or_else(|| messages[ai].tool_calls[at].name.clone());
            if self.exclude_tools.contains(&tool) {
                continue;
            }
            // What clearing frees, counted on what changes only: the result, and the one call's
            // arguments (re-estimating the calling message would cost all its calls' arguments
            // again for each of its results).
            let result = &mut messages[i];
            let mut before = estimate_message_chars(result);
            result.content = self.placeholder.clone().into();
            result.metadata.insert(
                CLEARED_KEY.into(),
                json!({"cleared": true, "strategy": "clear_tool_uses"}),
            );
            let mut after = estimate_message_chars(result);
            if self.clear_tool_inputs {
                let request = &mut messages[ai];
                let call = &mut request.tool_calls[at];
                let args = std::mem::replace(&mut call.args, Value::Object(Map::new()));
                before += args.to_string().len();
                after += "{}".len();
                let call_id = Value::from(call.id.as_str());
                let ids = request
                    .metadata
                    .get_mut(CLEARED_KEY)
                    .and_then(|v| v.get_mut("cleared_tool_inputs"))
                    .and_then(Value::as_array_mut);
                match ids {
                    Some(ids) => ids.push(call_id),
                    None => {
                        request.metadata.insert(
                            CLEARED_KEY.into(),
                            json!({"cleared_tool_inputs": [call_id]}),
                        );
                    }
                }
            }
            freed += (before.saturating_sub(after) as u64).div_ceil(4);
            cleared += 1;
            if self.clear_at_least > 0 && freed >= self.clear_at_least {
                break;
            }
        }
        (cleared, freed)
    }
}

/// Where a tool result came from: the assistant message before it and the call there with its
/// id (the first, if two share it).
struct Origin {
    result: usize,
    answer: usize,
    call: usize,
}

/// The origins of the first `take` tool results that are not cleared yet and whose call is
/// found, in one pass: an answer with thousands of calls is indexed once, not searched once
/// per result.
fn origins(messages: &[Message], take: usize) -> Vec<Origin> {
    let mut found = Vec::new();
    let mut answer = None;
    let mut index: Option<(usize, FastMap<&str, usize>)> = None;
    let mut seen = 0;
    for (i, message) in messages.iter().enumerate() {
        match message.role {
            Role::Assistant => answer = Some(i),
            Role::Tool if seen < take => {
                seen += 1;
                if message.metadata.contains_key(CLEARED_KEY) {
                    continue;
                }
                let (Some(ai), Some(id)) = (answer, message.tool_call_id.as_deref()) else {
                    continue;
                };
                let calls = &messages[ai].tool_calls;
                let call = if calls.len() <= SEARCH_UP_TO {
                    calls.iter().position(|c| c.id == id)
                } else {
                    if index.as_ref().is_none_or(|(indexed, _)| *indexed != ai) {
                        let mut by_id = FastMap::default();
                        for (at, c) in calls.iter().enumerate() {
                            by_id.entry(c.id.as_str()).or_insert(at);
                        }
                        index = Some((ai, by_id));
                    }
                    index.as_ref().and_then(|(_, by_id)| by_id.get(id).copied())
                };
                if let Some(call) = call {
                    found.push(Origin {
                        result: i,
                        answer: ai,
                        call,
                    });
                }
            }
            Role::Tool => break,
            _ => {}
        }
    }
    found
}

/// Up to this many calls in one answer, a result's call is found by a search.
const SEARCH_UP_TO: usize = 16;

#[crate::async_trait]
impl Middleware for ContextEditingMiddleware {
    fn name(&self) -> &str {
        "ContextEditingMiddleware"
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        let tokens = request.estimate_tokens();
        if tokens <= self.trigger {
            return next.call(request).await;
        }
        // The state's conversation is shared with the request: edit a copy.
        let (cleared, freed) = self.edit(request.messages.make_mut());
        if cleared > 0 {
            report(
                rt,
                self.name(),
                "cleared",
                json!({"cleared": cleared, "tokens_before": tokens, "tokens_freed": freed}),
            )
            .await;
        }
        next.call(request).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    fn turn(id: &str, tool: &str, result: &str) -> Vec<Message> {
        vec![
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(id, tool, json!({"q": "x"}))],
            ),
            Message::tool(id, result).with_name(tool),
        ]
    }

    fn conversation() -> Vec<Message> {
        let mut m = vec![Message::user("go")];
        m.extend(turn("a", "search", &"A".repeat(400)));
        m.extend(turn("b", "read_file", &"B".repeat(400)));
        m.extend(turn("c", "search", &"C".repeat(400)));
        m.extend(turn("d", "search", &"D".repeat(400)));
        m
    }

    #[test]
    fn clears_old_results_keeps_recent_and_excluded_ones_and_the_pairing() {
        let mw = ContextEditingMiddleware::new()
            .keep(1)
            .exclude_tools(["read_file"]);
        let mut messages = conversation();
        let (cleared, freed) = mw.edit(&mut messages);
        assert_eq!(cleared, 2, "a and c; b is excluded, d is kept");
        assert!(freed > 150);
        let texts: Vec<String> = messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .map(Message::text)
            .collect();
        assert_eq!(texts[0], "[cleared]");
        assert_eq!(texts[1], "B".repeat(400));
        assert_eq!(texts[2], "[cleared]");
        assert_eq!(texts[3], "D".repeat(400));
        // Every call still has its result, in place, with its id and name.
        assert_eq!(messages[2].tool_call_id.as_deref(), Some("a"));
        assert_eq!(messages[2].name.as_deref(), Some("search"));
        assert_eq!(
            messages[1].tool_calls[0].args,
            json!({"q": "x"}),
            "inputs kept"
        );
        // Clearing twice changes nothing more.
        let (again, _) = mw.edit(&mut messages);
        assert_eq!(again, 0);
    }

    #[test]
    fn clear_at_least_stops_early_and_inputs_can_go_too() {
        let mw = ContextEditingMiddleware::new()
            .keep(0)
            .clear_at_least(50)
            .clear_tool_inputs(true)
            .placeholder("(old result removed)");
        let mut messages = conversation();
        let (cleared, _) = mw.edit(&mut messages);
        assert_eq!(cleared, 1, "one result frees more than 50 tokens");
        assert_eq!(messages[2].text(), "(old result removed)");
        assert_eq!(messages[1].tool_calls[0].args, json!({}));
        assert_eq!(messages[4].text(), "B".repeat(400), "the rest untouched");
    }

    /// One answer with many calls, then their results: each clear counts only what it changes
    /// (the result and its call's arguments), and the calling message lists every cleared
    /// input, in order.
    #[test]
    fn many_calls_in_one_answer_are_cleared_one_by_one() {
        for n in [10, 2000] {
            let calls: Vec<ToolCall> = (0..n)
                .map(|i| {
                    ToolCall::with_id(format!("c{i}"), "search", json!({"q": "x".repeat(200)}))
                })
                .collect();
            let mut messages = vec![
                Message::user("go"),
                Message::assistant_with_tool_calls("", calls),
            ];
            messages.extend((0..n).map(|i| Message::tool(format!("c{i}"), "R".repeat(300))));
            let mw = ContextEditingMiddleware::new()
                .keep(0)
                .clear_tool_inputs(true);
            let placeholder = Message::tool("c0", "[cleared]");
            let each = estimate_message_chars(&messages[2]) - estimate_message_chars(&placeholder)
                + json!({"q": "x".repeat(200)}).to_string().len()
                - 2;
            let (cleared, freed) = mw.edit(&mut messages);
            assert_eq!(cleared, n);
            assert_eq!(freed, (each as u64).div_ceil(4) * n as u64);
            let ids = &messages[1].metadata[CLEARED_KEY]["cleared_tool_inputs"];
            let expected: Vec<String> = (0..n).map(|i| format!("c{i}")).collect();
            assert_eq!(ids, &json!(expected));
            assert!(messages[1].tool_calls.iter().all(|c| c.args == json!({})));
        }
    }

    /// The edit as it was written before the index: a search back for the answer and through
    /// its calls for every result. The reference the randomized test holds the index to.
    fn edit_by_search(mw: &ContextEditingMiddleware, messages: &mut [Message]) -> (usize, u64) {
        let candidates: Vec<usize> = messages
            .iter()
            .enumerate()
            .filter(|(_, m)| m.role == Role::Tool)
            .map(|(i, _)| i)
            .collect();
        let take = candidates.len().saturating_sub(mw.keep);
        let (mut cleared, mut freed) = (0, 0u64);
        for &i in &candidates[..take] {
            if messages[i].metadata.contains_key(CLEARED_KEY) {
                continue;
            }
            let Some(call_id) = messages[i].tool_call_id.clone() else {
                continue;
            };
            let Some(ai) = messages[..i]
                .iter()
                .rposition(|m| m.role == Role::Assistant)
            else {
                continue;
            };
            let Some(call) = messages[ai].tool_calls.iter().find(|c| c.id == call_id) else {
                continue;
            };
            let tool = messages[i]
                .name
                .clone()
                .unwrap_or_else(|| call.name.clone());
            if mw.exclude_tools.contains(&tool) {
                continue;
            }
            let result = &mut messages[i];
            let mut before = estimate_message_chars(result);
            result.content = mw.placeholder.clone().into();
            result.metadata.insert(
                CLEARED_KEY.into(),
                json!({"cleared": true, "strategy": "clear_tool_uses"}),
            );
            let mut after = estimate_message_chars(result);
            if mw.clear_tool_inputs {
                let request = &mut messages[ai];
                if let Some(call) = request.tool_calls.iter_mut().find(|c| c.id == call_id) {
                    let args = std::mem::replace(&mut call.args, Value::Object(Map::new()));
                    before += args.to_string().len();
                    after += "{}".len();
                }
                let ids = request
                    .metadata
                    .get_mut(CLEARED_KEY)
                    .and_then(|v| v.get_mut("cleared_tool_inputs"))
                    .and_then(Value::as_array_mut);
                match ids {
                    Some(ids) => ids.push(Value::from(call_id.as_str())),
                    None => {
                        request.metadata.insert(
                            CLEARED_KEY.into(),
                            json!({"cleared_tool_inputs": [call_id]}),
                        );
                    }
                }
            }
            freed += (before.saturating_sub(after) as u64).div_ceil(4);
            cleared += 1;
            if mw.clear_at_least > 0 && freed >= mw.clear_at_least {
                break;
            }
        }
        (cleared, freed)
    }

    /// Random conversations: answers with few or many calls (past the search limit), ids
    /// repeated or missing, results before any answer, without a call or a name, already
    /// cleared, of excluded tools; every setting. The index clears what the search cleared.
    #[test]
    fn the_index_clears_what_a_search_per_result_cleared() {
        let mut rng = fastrand::Rng::with_seed(31);
        for _ in 0..3_000 {
            let mut messages = Vec::new();
            for _ in 0..rng.usize(0..8) {
                match rng.u8(0..10) {
                    0 => messages.push(Message::user("u")),
                    1 => messages.push(Message::tool(format!("c{}", rng.u8(0..40)), "early")),
                    _ => {
                        let n = if rng.bool() {
                            rng.usize(0..4)
                        } else {
                            rng.usize(15..40)
                        };
                        let calls: Vec<ToolCall> = (0..n)
                            .map(|_| {
                                let tool = ["search", "read_file"][rng.usize(0..2)];
                                let id = format!("c{}", rng.u8(0..40));
                                ToolCall::with_id(
                                    id,
                                    tool,
                                    json!({"q": "x".repeat(rng.usize(0..50))}),
                                )
                            })
                            .collect();
                        messages.push(Message::assistant_with_tool_calls("", calls));
                        for _ in 0..rng.usize(0..n + 3) {
                            let mut result = Message::tool(
                                format!("c{}", rng.u8(0..40)),
                                "R".repeat(rng.usize(0..300)),
                            );
                            if rng.u8(0..4) == 0 {
                                result = result.with_name("read_file");
                            }
                            if rng.u8(0..8) == 0 {
                                result.tool_call_id = None;
                            }
                            if rng.u8(0..10) == 0 {
                                result
                                    .metadata
                                    .insert(CLEARED_KEY.into(), json!({"cleared": true}));
                            }
                            messages.push(result);
                        }
                    }
                }
            }
            let mut mw = ContextEditingMiddleware::new()
                .keep(rng.usize(0..6))
                .clear_tool_inputs(rng.bool())
                .clear_at_least(if rng.bool() { 0 } else { rng.u64(1..200) });
            if rng.bool() {
                mw = mw.exclude_tools(["read_file"]);
            }
            let mut indexed = messages.clone();
            let mut searched = messages;
            assert_eq!(mw.edit(&mut indexed), edit_by_search(&mw, &mut searched));
            assert_eq!(indexed, searched);
        }
    }

    /// 20,000 calls in one answer, then their results: cleared in one pass.
    #[test]
    fn twenty_thousand_results_of_one_answer() {
        let n = 20_000;
        let calls: Vec<ToolCall> = (0..n)
            .map(|i| ToolCall::with_id(format!("c{i}"), "search", json!({})))
            .collect();
        let mut messages = vec![Message::assistant_with_tool_calls("", calls)];
        messages.extend(
            (0..n)
                .rev()
                .map(|i| Message::tool(format!("c{i}"), "R".repeat(40))),
        );
        let mw = ContextEditingMiddleware::new()
            .keep(0)
            .clear_tool_inputs(true);
        let (cleared, _) = mw.edit(&mut messages);
        assert_eq!(cleared, n);
        let ids = messages[0].metadata[CLEARED_KEY]["cleared_tool_inputs"]
            .as_array()
            .unwrap();
        assert_eq!(ids.first(), Some(&json!(format!("c{}", n - 1))));
        assert_eq!(ids.len(), n);
    }
}
