//! Conversation compaction: summarise old messages, keep recent ones, never orphan a tool
//! result.
//!
//! When the conversation passes a token or message threshold, the messages before a cut point
//! are summarised by the model and replaced by one summary message; the messages after it are
//! kept. The cut point never separates an assistant message from its tool results (the
//! anchor's open bug leaves orphan tool results that providers reject). `todos`, `files` and
//! `async_tasks` live in their own channels and are untouched.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::agent::{AgentState, Hook, HookResult, HookUpdate, Middleware, Runtime};
use crate::bounded::BoundedMap;
use crate::message::{Message, Role};
use crate::model::{ChatModel, ModelError, ModelRequest, estimate_message_chars};
use crate::state::Overwrite;

/// The `metadata` key marking a summary message (`{"kit_source": "compaction"}`).
pub const SOURCE_KEY: &str = "kit_source";

const SUMMARY_PROMPT: &str = "You condense conversations between a user and an AI agent so \
the agent can continue the work with less context. Write a summary with these sections:\n\
## Goal — what the user wants, in their terms.\n\
## Progress — what has been done and learned, with the concrete facts, numbers, names, file \
paths and decisions the agent will need.\n\
## Artifacts — files, tasks or resources created or referenced.\n\
## Next steps — what remains to be done.\n\
Be specific and complete; do not add anything that is not in the conversation.";

/// Summarises old messages when the conversation grows past a threshold.
///
/// The threshold counts tokens — the provider's reported usage of the last model call when
/// known, an estimate (four characters per token) otherwise — or messages, whichever is set.
/// Defaults: 85% of the model's context window when its profile knows it, else 170,000
/// tokens; keep the last 6 messages.
///
/// A failed summary call does not end the run: the conversation carries on uncompacted. A
/// passing failure (rate limit, server error, timeout, connection) is tried again at the next
/// model call; any other (the summary request itself too long, a bad request) once the
/// conversation has grown by a quarter (at least by `keep_messages` messages), not at every
/// model call, which would pay for a failing call over the whole history each time.
///
/// ```
/// use kit::middleware::compaction::CompactionMiddleware;
/// let compaction = CompactionMiddleware::new().trigger_messages(40).keep_messages(10);
/// # let _ = compaction;
/// ```
#[derive(Debug, Clone)]
pub struct CompactionMiddleware {
    trigger_tokens: Option<u64>,
    trigger_messages: Option<usize>,
    keep_messages: usize,
    summary_budget_chars: usize,
    /// Conversations whose last summary failed, shared by the clones of this middleware.
    failures: Arc<Failures>,
}

impl Default for CompactionMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl CompactionMiddleware {
    /// Compaction with the default thresholds.
    pub fn new() -> Self {
        CompactionMiddleware {
            trigger_tokens: None,
            trigger_messages: None,
            keep_messages: 6,
            summary_budget_chars: 400_000,
            failures: Arc::default(),
        }
    }

    /// Compact when the conversation reaches this many tokens.
    #[must_use]
    pub fn trigger_tokens(mut self, tokens: u64) -> Self {
        self.trigger_tokens = Some(tokens);
        self
    }

    /// Compact when the conversation reaches this many messages.
    #[must_use]
    pub fn trigger_messages(mut self, messages: usize) -> Self {
        self.trigger_messages = Some(messages);
        self
    }

    /// Keep (at least) this many recent messages verbatim.
    #[must_use]
    pub fn keep_messages(mut self, messages: usize) -> Self {
        self.keep_messages = messages;
        self
    }

    fn token_threshold(&self, model: &dyn ChatModel) -> u64 {
        self.trigger_tokens.unwrap_or_else(|| {
            model
                .profile()
                .max_input_tokens
                .map(|max| max / 100 * 85 + max % 100 * 85 / 100)
                .unwrap_or(170_000)
        })
    }

    fn due(&self, messages: &[Message], model: &dyn ChatModel) -> bool {
        if let Some(n) = self.trigger_messages
            && messages.len() >= n
        {
            return true;
        }
        conversation_tokens(messages) >= self.token_threshold(model)
    }
}

/// The size of a conversation in tokens: the last model call's reported usage plus an estimate
/// for what came after it; an estimate of everything when no usage is known.
pub fn conversation_tokens(messages: &[Message]) -> u64 {
    let reported = messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(i, m)| m.usage.map(|u| (i, u.total_tokens())));
    let estimate = |ms: &[Message]| -> u64 {
        let chars = ms
            .iter()
            .map(estimate_message_chars)
            .fold(0usize, usize::saturating_add);
        u64::try_from(chars).unwrap_or(u64::MAX).div_ceil(4)
    };
    // Saturating: the reported usage is a provider's number.
    match reported {
        Some((i, tokens)) => tokens.saturating_add(estimate(&messages[i + 1..])),
        None => estimate(messages),
    }
}

/// Where to cut so that `messages[cut..]` keeps at least `keep` messages and no tool result in
/// the kept part belongs to an assistant message before the cut.
pub fn safe_cutoff(messages: &[Message], keep: usize) -> usize {
    let mut cut = messages.len().saturating_sub(keep);
    // Where each tool call was made.
    let mut origin: HashMap<&str, usize> = HashMap::new();
    for (i, m) in messages.iter().enumerate() {
        for c in &m.tool_calls {
            origin.insert(c.id.as_str(), i);
        }
    }
    // Walk back from the end once: `earliest` is where the earliest call answered in
    // `messages[scanned..]` was made; while that is before the cut, the cut moves to it and
    // the walk goes on from there, so every message is read once however the calls interleave.
    let mut earliest = usize::MAX;
    let mut scanned = messages.len();
    loop {
        for m in messages[cut..scanned].iter().rev() {
            if m.role == Role::Tool
                && let Some(&i) = m.tool_call_id.as_deref().and_then(|id| origin.get(id))
            {
                earliest = earliest.min(i);
            }
        }
        scanned = cut;
        if earliest >= cut {
            break;
        }
        cut = earliest;
    }
    // A tool result whose call is unknown cannot be kept at the head of the tail.
    while cut < messages.len() && messages[cut].role == Role::Tool {
        cut += 1;
    }
    cut
}

/// Renders messages as a compact transcript for the summariser, at most `budget_chars` long
/// (give or take the separators): the newest that fit, the oldest omitted; when the newest
/// alone is over the budget, its start and end.
fn transcript(messages: &[Message], budget_chars: usize) -> String {
    let render = |m: &Message| {
        let mut text = m.text();
        for c in &m.tool_calls {
            text.push_str(&format!("\n[calls {}({})]", c.name, c.args));
        }
        format!("<{0}>\n{1}\n</{0}>", m.role.as_str(), text)
    };
    // Newest first, until the budget is spent: what is omitted is never rendered.
    let mut kept: Vec<String> = Vec::new();
    let mut total = 0usize;
    for m in messages.iter().rev() {
        let part = render(m);
        if kept.is_empty() && part.len() > budget_chars {
            kept.push(clip_middle(&part, budget_chars));
            break;
        }
        if total + part.len() > budget_chars {
            break;
        }
        total += part.len();
        kept.push(part);
    }
    let dropped = messages.len() - kept.len();
    let mut out = String::new();
    if dropped > 0 {
        out.push_str(&format!("[... {dropped} earlier messages omitted ...]\n"));
    }
    kept.reverse();
    out.push_str(&kept.join("\n"));
    out
}

/// The first and last `budget / 2` bytes of `text` (on character boundaries), with how much
/// was left out between them.
fn clip_middle(text: &str, budget: usize) -> String {
    let half = budget / 2;
    let mut head = half.min(text.len());
    while !text.is_char_boundary(head) {
        head -= 1;
    }
    let mut tail = text.len().saturating_sub(half).max(head);
    while !text.is_char_boundary(tail) {
        tail += 1;
    }
    format!(
        "{}\n[... {} bytes omitted ...]\n{}",
        &text[..head],
        tail - head,
        &text[tail..]
    )
}

/// Summarises `messages` with `model`.
pub async fn summarize(
    model: &dyn ChatModel,
    messages: &[Message],
    budget_chars: usize,
) -> Result<String, ModelError> {
    if messages.is_empty() {
        return Ok("No previous conversation history.".to_string());
    }
    let request = ModelRequest::new(vec![Message::user(format!(
        "Summarise this conversation:\n\n<messages>\n{}\n</messages>",
        transcript(messages, budget_chars)
    ))])
    .system(SUMMARY_PROMPT);
    let response = model.generate(&request).await?;
    Ok(response.message.text())
}

/// The message that replaces summarised history.
pub fn summary_message(summary: &str) -> Message {
    let mut m = Message::user(format!(
        "Here is a summary of the conversation to date:\n\n{summary}"
    ));
    m.metadata
        .insert(SOURCE_KEY.to_string(), Value::String("compaction".into()));
    m
}

/// Compacts `messages`: the summary of the head, then the kept tail. `None` when there is
/// nothing to summarise.
pub async fn compact(
    model: &dyn ChatModel,
    messages: &[Message],
    keep: usize,
    budget_chars: usize,
) -> Result<Option<(Message, usize)>, ModelError> {
    let cut = safe_cutoff(messages, keep);
    if cut == 0 {
        return Ok(None);
    }
    let summary = summarize(model, &messages[..cut], budget_chars).await?;
    Ok(Some((summary_message(&summary), cut)))
}

#[crate::async_trait]
impl Middleware for CompactionMiddleware {
    fn name(&self) -> &str {
        "Compaction"
    }

    fn placement(&self) -> crate::agent::Placement {
        crate::agent::Placement::COMPACTION
    }

    fn hooks(&self) -> &[Hook] {
        &[Hook::BeforeModel]
    }

    async fn before_model(&self, state: &AgentState, rt: &Runtime) -> HookResult {
        let model = rt.model().as_ref();
        if !self.due(&state.messages, model) {
            return Ok(None);
        }
        let conversation = conversation_key(rt);
        let length = state.messages.len();
        if self.failures.waiting(&conversation, length) {
            return Ok(None);
        }
        match compact(
            model,
            &state.messages,
            self.keep_messages,
            self.summary_budget_chars,
        )
        .await
        {
            Ok(Some((summary, cut))) => {
                self.failures.forget(&conversation);
                let mut kept = Vec::with_capacity(state.messages.len() - cut + 1);
                kept.push(summary);
                kept.extend_from_slice(&state.messages[cut..]);
                if let Some(sink) = rt.node().events_of(crate::event::EventKind::Middleware) {
                    let data = json!({"summarized": cut, "kept": state.messages.len() - cut});
                    let event = rt.node().event(
                        "Compaction.summary",
                        crate::event::EventData::Middleware(data),
                    );
                    sink.send(event).await;
                }
                Ok(Some(HookUpdate::new(
                    crate::agent::AgentStateUpdate::new().messages(Overwrite(kept)),
                )))
            }
            Ok(None) => Ok(None),
            // A failed summary must not end the run: carry on uncompacted (overflow recovery,
            // if enabled, still guards the model call).
            Err(e) => {
                // Clipped: the text is a provider's, of any length.
                let error = crate::text::clip(&e.to_string(), 2000);
                // A passing failure (rate limit, server, timeout, connection) is tried again at
                // the next model call; any other would fail again on the same history.
                let retry_at = if e.is_transient() {
                    length
                } else {
                    self.failures
                        .record(conversation, length, self.keep_messages)
                };
                tracing::warn!(
                    %error,
                    retry_at,
                    "compaction skipped: the summary call failed; it is tried again once the \
                     conversation has {retry_at} messages"
                );
                if let Some(sink) = rt.node().events_of(crate::event::EventKind::Middleware) {
                    let data = json!({
                        "error": error,
                        "kind": e.kind(),
                        "messages": length,
                        "retry_at": retry_at,
                    });
                    let event = rt.node().event(
                        "Compaction.failed",
                        crate::event::EventData::Middleware(data),
                    );
                    sink.send(event).await;
                }
                Ok(None)
            }
        }
    }
}

/// The conversation a model call belongs to: its thread and namespace when it has a thread,
/// else its invocation (a conversation without a thread lasts one invocation).
fn conversation_key(rt: &Runtime) -> String {
    match rt.thread_id() {
        Some(thread) => format!("{thread}\u{1f}{}", rt.node().namespace().join("|")),
        None => format!("\u{1f}{}", rt.node().invocation_id()),
    }
}

/// The most conversations whose failed summary is remembered; past it the oldest is forgotten
/// (it tries again at its next model call).
const MAX_FAILURES: usize = 4096;

/// Conversations whose last summary failed: (length at the failure, length to try again at).
#[derive(Debug, Default)]
struct Failures {
    at: Mutex<BoundedMap<(usize, usize), MAX_FAILURES>>,
}

impl Failures {
    fn lock(&self) -> std::sync::MutexGuard<'_, BoundedMap<(usize, usize), MAX_FAILURES>> {
        self.at.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `conversation` waits after a failure. One that shrank since (compacted or
    /// overwritten some other way) is another conversation: its failure is forgotten.
    fn waiting(&self, conversation: &str, length: usize) -> bool {
        let mut at = self.lock();
        match at.get(conversation) {
            None => false,
            Some(&(failed, _)) if length < failed => {
                at.remove(conversation);
                false
            }
            Some(&(_, retry_at)) => length < retry_at,
        }
    }

    /// Records a failure at `length`; returns the length at which to try again.
    fn record(&self, conversation: String, length: usize, keep: usize) -> usize {
        let retry_at = length.saturating_add((length / 4).max(keep).max(1));
        self.lock().insert(conversation, (length, retry_at));
        retry_at
    }

    /// Forgets `conversation`'s failure (its summary succeeded).
    fn forget(&self, conversation: &str) {
        self.lock().remove(conversation);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::ToolCall;

    #[test]
    fn a_failed_conversation_waits_for_a_quarter_more_messages_and_a_shrunk_one_does_not() {
        let failures = Failures::default();
        assert!(!failures.waiting("t", 40), "nothing failed yet");
        assert_eq!(failures.record("t".into(), 40, 6), 50, "a quarter of 40");
        assert!(failures.waiting("t", 40));
        assert!(failures.waiting("t", 49));
        assert!(!failures.waiting("t", 50));
        assert!(!failures.waiting("u", 45), "per conversation");
        assert!(!failures.waiting("t", 12), "shrunk: another conversation");
        assert!(!failures.waiting("t", 40), "and the failure is forgotten");
        // Short conversations wait for `keep` messages, and at least one.
        assert_eq!(failures.record("s".into(), 8, 6), 14);
        assert_eq!(failures.record("z".into(), 2, 0), 3);
        failures.record("t".into(), 40, 6);
        failures.forget("t");
        assert!(!failures.waiting("t", 45));
        assert_eq!(failures.lock().len(), 2);
    }

    #[test]
    fn remembered_failures_are_bounded_oldest_first() {
        let failures = Failures::default();
        for i in 0..MAX_FAILURES + 10 {
            failures.record(format!("c{i}"), 100, 6);
        }
        let at = failures.lock();
        assert_eq!(at.len(), MAX_FAILURES);
        assert_eq!(at.order_len(), MAX_FAILURES);
        assert!(at.get("c0").is_none() && at.get("c9").is_none());
        assert!(at.get("c10").is_some());
    }

    fn ai(calls: &[&str]) -> Message {
        Message::assistant_with_tool_calls(
            "",
            calls
                .iter()
                .map(|id| ToolCall::with_id(*id, "t", json!({})))
                .collect(),
        )
    }

    #[test]
    fn cut_moves_before_the_call_of_a_kept_result() {
        let messages = vec![
            Message::user("q"),
            ai(&["a", "b"]),
            Message::tool("a", "1"),
            Message::tool("b", "2"),
            Message::assistant("done"),
        ];
        // Keeping 2 would start at tool "b": the cut moves back to the assistant message.
        assert_eq!(safe_cutoff(&messages, 2), 1);
        assert_eq!(safe_cutoff(&messages, 1), 4);
        assert_eq!(safe_cutoff(&messages, 10), 0);
    }

    /// The cut as first written: rescan the kept part until no result in it answers a call
    /// before the cut (quadratic when each rescan moves the cut one step).
    fn cutoff_by_rescanning(messages: &[Message], keep: usize) -> usize {
        let mut cut = messages.len().saturating_sub(keep);
        let mut origin: HashMap<&str, usize> = HashMap::new();
        for (i, m) in messages.iter().enumerate() {
            for c in &m.tool_calls {
                origin.insert(c.id.as_str(), i);
            }
        }
        loop {
            let earliest = messages[cut..]
                .iter()
                .filter(|m| m.role == Role::Tool)
                .filter_map(|m| m.tool_call_id.as_deref())
                .filter_map(|id| origin.get(id).copied())
                .min();
            match earliest {
                Some(i) if i < cut => cut = i,
                _ => break,
            }
        }
        while cut < messages.len() && messages[cut].role == Role::Tool {
            cut += 1;
        }
        cut
    }

    #[test]
    fn the_cut_is_the_rescanning_cut_on_random_histories() {
        let mut rng = fastrand::Rng::with_seed(0xc07);
        let mut moved = 0;
        for _ in 0..3_000 {
            let mut messages = Vec::new();
            let mut open: Vec<String> = Vec::new();
            for i in 0..rng.usize(0..30) {
                match rng.u8(0..4) {
                    0 => messages.push(Message::user("q")),
                    1 => {
                        let id = format!("c{i}");
                        messages.push(ai(&[id.as_str()]));
                        open.push(id);
                    }
                    // A result for any open call, in any order, or for an unknown one.
                    2 if !open.is_empty() => {
                        let id = open.swap_remove(rng.usize(..open.len()));
                        messages.push(Message::tool(id, "r"));
                    }
                    _ => messages.push(Message::tool("unknown", "r")),
                }
            }
            let keep = rng.usize(0..=messages.len() + 1);
            let cut = safe_cutoff(&messages, keep);
            assert_eq!(cut, cutoff_by_rescanning(&messages, keep));
            moved += usize::from(cut < messages.len().saturating_sub(keep));
        }
        // The cut often has to move back past a call.
        assert!(moved > 300, "{moved}");
    }

    #[test]
    fn a_chain_of_interleaved_calls_is_cut_in_one_pass_at_any_length() {
        // Each call is answered after the next call is made, so the cut walks back one pair
        // at a time to the start. Rescanning made a 100,000-message chain quadratic.
        for pairs in [64, 50_000] {
            let mut messages = vec![Message::user("q"), ai(&["c0"])];
            for i in 1..pairs {
                messages.push(ai(&[format!("c{i}").as_str()]));
                messages.push(Message::tool(format!("c{}", i - 1), "r"));
            }
            assert_eq!(safe_cutoff(&messages, 2), 1, "{pairs} pairs");
            // Keeping one message (the last result) pulls in its call, whose turn holds the
            // previous call's result, and so on back to the first call.
            assert_eq!(safe_cutoff(&messages, 1), 1, "{pairs} pairs");
        }
    }

    #[test]
    fn the_transcript_drops_the_oldest_until_the_rest_fit() {
        // 200,000 messages: dropped one by one from the front, this was quadratic.
        let messages: Vec<Message> = (0..200_000)
            .map(|i| Message::user(format!("m{i}")))
            .collect();
        let text = transcript(&messages, 200);
        assert!(text.starts_with("[... "), "{text}");
        assert!(text.ends_with("<user>\nm199999\n</user>"), "{text}");
        assert!(!text.contains("<user>\nm0\n"));
        assert_eq!(
            transcript(&messages[..2], 1_000),
            "<user>\nm0\n</user>\n<user>\nm1\n</user>"
        );
    }

    /// The newest message alone over the budget (a tool result of a kibibyte or five
    /// megabytes against a budget of 400): its start and end, and nothing older.
    #[test]
    fn a_newest_message_over_the_budget_is_cut_in_its_middle() {
        for size in [1 << 10, 5 << 20] {
            let big = format!("start{}é{}end", "a".repeat(size / 2), "b".repeat(size / 2));
            let messages = vec![Message::user("old"), Message::tool("c1", big)];
            let text = transcript(&messages, 400);
            assert!(text.len() < 500, "{size}: {} bytes", text.len());
            assert!(text.starts_with("[... 1 earlier messages omitted ...]\n<tool>\nstart"));
            assert!(text.ends_with("bbend\n</tool>"), "{text}");
            assert!(text.contains("bytes omitted"));
        }
        // Multi-byte characters at the cut.
        assert_eq!(
            clip_middle(&"é".repeat(100), 8),
            "éé\n[... 192 bytes omitted ...]\néé"
        );
        assert_eq!(
            clip_middle(&"é".repeat(100), 7),
            "é\n[... 196 bytes omitted ...]\né"
        );
    }

    #[test]
    fn usage_counts_when_known() {
        let mut m = Message::assistant("x");
        m.usage = Some(crate::message::Usage {
            input_tokens: 1000,
            output_tokens: 10,
            ..Default::default()
        });
        assert!(conversation_tokens(&[Message::user("hi"), m]) >= 1010);
    }
}
