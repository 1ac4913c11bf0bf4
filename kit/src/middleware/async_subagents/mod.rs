//! Async subagents: background work on remote workers, tracked in the `async_tasks` channel.
//!
//! The supervisor gets five tools — `start_async_task`, `check_async_task`,
//! `update_async_task`, `cancel_async_task`, `list_async_tasks` — and a task id at once. Task
//! records live in the `async_tasks` state channel (merged by task id), outside `messages`, so
//! they survive compaction and are restored with the thread by the checkpointer.
//!
//! Rules (spec §2–§4, §7):
//! * the task id is the first present of the worker's `thread_id`, `task_id`, `id`, `run_id`,
//!   else a generated `async-…` id;
//! * the result is the response's `result`, else the content of the last non-empty message in
//!   `values.messages`;
//! * terminal statuses: `cancelled`, `success`, `error`, `timeout`, `interrupted`, `complete`,
//!   `completed` — a terminal task is never polled again;
//! * a task is followed through its worker's thread stream once started (and after each
//!   follow-up): its end, or its pause for a human (status `waiting`, with the pending
//!   `interrupts`), is heard without polling, and the tools answer from it
//!   ([`AsyncSubagentMiddleware::notices`] tells the application);
//! * an id that is not tracked checks as status `unknown`;
//! * a name that matches no spec is an error beginning `Unknown async subagent type`;
//! * every failure to reach a worker (transport, status code, malformed JSON) becomes an error
//!   result for the model; the task record stays intact (with `last_error` set).

mod spec;
mod tasks;
mod watch;
pub use spec::{AsyncSpec, TERMINAL_STATUSES, is_terminal};
use tasks::{parse, start_description};
pub use watch::TaskNotice;

use std::sync::Arc;

use serde_json::json;

use crate::agent::{Hook, Middleware};
use crate::protocol::HttpRunClient;
use crate::tool::Tool;

/// Adds the five async-task tools for a set of [`AsyncSpec`]s.
pub struct AsyncSubagentMiddleware {
    inner: Arc<Inner>,
}

struct Inner {
    specs: Vec<AsyncSpec>,
    http: Arc<HttpRunClient>,
    watches: Arc<watch::Watches>,
}

impl AsyncSubagentMiddleware {
    /// The middleware for these specs. Names must be unique.
    pub fn new(specs: Vec<AsyncSpec>) -> Result<Self, crate::AgentError> {
        check_specs(&specs)?;
        Ok(Self::unchecked(specs))
    }

    /// The middleware before its specs are checked (the builder adds specs across calls and
    /// checks them when the agent is built).
    pub(crate) fn unchecked(specs: Vec<AsyncSpec>) -> Self {
        AsyncSubagentMiddleware {
            inner: Arc::new(Inner {
                specs,
                http: Arc::new(HttpRunClient::new()),
                watches: Arc::new(watch::Watches::default()),
            }),
        }
    }

    /// What the supervisor hears about its tasks, as it happens: a run that ended, failed, was
    /// cancelled or paused for a human (`waiting`, with the pending interrupts). Each started
    /// task (and each follow-up) is followed through the worker's thread stream, so nothing
    /// polls; the tools answer from what was heard. Clients that cannot stream
    /// ([`RunClient::follow`](crate::protocol::RunClient::follow) answers `None`) send
    /// nothing here.
    ///
    /// ```no_run
    /// use kit::middleware::async_subagents::{AsyncSpec, AsyncSubagentMiddleware};
    /// # async fn run() -> Result<(), kit::AgentError> {
    /// let middleware = AsyncSubagentMiddleware::new(vec![
    ///     AsyncSpec::new("researcher", "Deep research.", "research").url("http://127.0.0.1:8787"),
    /// ])?;
    /// let mut notices = middleware.notices();
    /// tokio::spawn(async move {
    ///     while let Ok(notice) = notices.recv().await {
    ///         println!("task {} is now {}", notice.task_id, notice.status());
    ///     }
    /// });
    /// # Ok(()) }
    /// ```
    pub fn notices(&self) -> tokio::sync::broadcast::Receiver<TaskNotice> {
        self.inner.watches.subscribe()
    }

    /// Adds specs; only while the builder still owns the middleware alone.
    pub(crate) fn extend(&mut self, specs: impl IntoIterator<Item = AsyncSpec>) {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            inner.specs.extend(specs);
        }
    }
}

/// Names must be unique, and there must be at least one spec.
fn check_specs(specs: &[AsyncSpec]) -> Result<(), crate::AgentError> {
    if specs.is_empty() {
        return Err(crate::AgentError::Build(
            "at least one async subagent must be specified".into(),
        ));
    }
    let mut names: Vec<&str> = specs.iter().map(|s| s.name()).collect();
    names.sort_unstable();
    let duplicates: Vec<&str> = names
        .windows(2)
        .filter(|w| w[0] == w[1])
        .map(|w| w[0])
        .collect();
    if !duplicates.is_empty() {
        return Err(crate::AgentError::Build(format!(
            "duplicate async subagent names: {}; each needs a unique name",
            duplicates.join(", ")
        )));
    }
    Ok(())
}

/// Reads the remote fields the protocol promises (spec §2.3).
pub mod remote {
    use serde_json::Value;

    /// The task id in a worker response: the first present of `thread_id`, `task_id`, `id`,
    /// `run_id`.
    pub fn task_id(response: &Value) -> Option<String> {
        ["thread_id", "task_id", "id", "run_id"]
            .iter()
            .find_map(|k| text(response, k))
    }

    /// The final result: `result` when present, else the content of the last non-empty message
    /// in `values.messages`.
    pub fn result(response: &Value) -> Option<String> {
        if let Some(r) = response.get("result").filter(|r| !r.is_null()) {
            return Some(match r {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            });
        }
        let messages = response.get("values")?.get("messages")?.as_array()?;
        messages.iter().rev().find_map(|m| {
            let content = m.get("content")?;
            let text = match content {
                Value::String(s) => s.clone(),
                Value::Array(parts) => parts
                    .iter()
                    .filter_map(|p| p.get("text").and_then(Value::as_str))
                    .collect::<Vec<_>>()
                    .join(""),
                _ => return None,
            };
            (!text.is_empty()).then_some(text)
        })
    }

    /// A string (or number) field.
    pub fn text(response: &Value, key: &str) -> Option<String> {
        match response.get(key)? {
            Value::String(s) if !s.is_empty() => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

#[crate::async_trait]
impl Middleware for AsyncSubagentMiddleware {
    fn name(&self) -> &str {
        "AsyncSubagents"
    }

    fn placement(&self) -> crate::agent::Placement {
        crate::agent::Placement::ASYNC_SUBAGENTS
    }

    fn on_build(&self, _agent: &crate::agent::BuildContext<'_>) -> Result<(), crate::AgentError> {
        check_specs(&self.inner.specs)
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn tools(&self) -> Vec<Tool> {
        let names: Vec<&str> = self.inner.specs.iter().map(|s| s.name()).collect();
        let name_hint = format!("The async subagent to use: one of {}.", names.join(", "));
        let task_id = json!({
            "type": "string",
            "description": "The exact task_id string returned by start_async_task. Pass it verbatim."
        });
        let stale = " Statuses earlier in the conversation may be stale; this tool fetches the \
                     current one.";
        let i = self.inner.clone();
        let start = Tool::from_fn(
            "start_async_task",
            start_description(&self.inner.specs),
            json!({
                "type": "object",
                "properties": {
                    "description": {
                        "type": "string",
                        "description": "A detailed description of the task: the goal, the context, and the expected output."
                    },
                    "subagent_name": {"type": "string", "description": name_hint},
                    "subagent_type": {"type": "string", "description": "Same as subagent_name (either is accepted)."}
                },
                "required": ["description"],
                "additionalProperties": false
            }),
            move |args, _ctx| {
                let i = i.clone();
                async move { i.start(parse(args)?).await }
            },
        );
        let i = self.inner.clone();
        let check = Tool::from_fn(
            "check_async_task",
            format!(
                "Get the current status of an async task, and its result when it is done.{stale}"
            ),
            json!({"type": "object", "properties": {"task_id": task_id}, "required": ["task_id"], "additionalProperties": false}),
            move |args, ctx| {
                let i = i.clone();
                async move { i.check(parse(args)?, &ctx).await }
            },
        );
        let i = self.inner.clone();
        let update = Tool::from_fn(
            "update_async_task",
            "Send follow-up instructions to an async task. The task keeps its task_id.",
            json!({
                "type": "object",
                "properties": {"task_id": task_id, "message": {"type": "string", "description": "The new instructions."}},
                "required": ["task_id", "message"],
                "additionalProperties": false
            }),
            move |args, ctx| {
                let i = i.clone();
                async move { i.update(parse(args)?, &ctx).await }
            },
        );
        let i = self.inner.clone();
        let cancel = Tool::from_fn(
            "cancel_async_task",
            "Cancel an async task.",
            json!({"type": "object", "properties": {"task_id": task_id}, "required": ["task_id"], "additionalProperties": false}),
            move |args, ctx| {
                let i = i.clone();
                async move { i.cancel(parse(args)?, &ctx).await }
            },
        );
        let i = self.inner.clone();
        let list = Tool::from_fn(
            "list_async_tasks",
            format!(
                "List the tracked async tasks with their current status (unfinished ones are \
                 refreshed). Use it to recall task ids.{stale}"
            ),
            json!({
                "type": "object",
                "properties": {"status_filter": {
                    "type": ["string", "null"],
                    "description": "Only tasks with this cached status: running, pending, waiting, success, error, cancelled, or all (default)."
                }},
                "additionalProperties": false
            }),
            move |args, ctx| {
                let i = i.clone();
                async move { i.list(parse(args)?, &ctx).await }
            },
        );
        vec![start, check, update, cancel, list]
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests;
