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
//! * an id that is not tracked checks as status `unknown`;
//! * a name that matches no spec is an error beginning `Unknown async subagent type`;
//! * every failure to reach a worker (transport, status code, malformed JSON) becomes an error
//!   result for the model; the task record stays intact (with `last_error` set).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use crate::agent::{AgentStateUpdate, AsyncTask, Hook, Middleware};
use crate::ids;
use crate::protocol::{Endpoint, HttpRunClient, RunClient, RunClientError};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Statuses after which a task never changes again.
pub const TERMINAL_STATUSES: &[&str] = &[
    "cancelled",
    "success",
    "error",
    "timeout",
    "interrupted",
    "complete",
    "completed",
];

/// True for a terminal status.
pub fn is_terminal(status: &str) -> bool {
    TERMINAL_STATUSES.contains(&status)
}

/// An async subagent: a remote graph reached through a [`RunClient`].
#[derive(Clone)]
pub struct AsyncSpec {
    /// What it is good for (shown to the model).
    pub description: String,
    /// Where the worker is: the subagent's name (the model passes it as `subagent_name` or
    /// `subagent_type`), the remote graph id, the URL and the headers.
    pub endpoint: Endpoint,
    /// A custom client; with a `url` and no client the built-in HTTP client is used.
    pub client: Option<Arc<dyn RunClient>>,
}

impl std::fmt::Debug for AsyncSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncSpec")
            .field("endpoint", &self.endpoint)
            .field("client", &self.client.is_some())
            .finish_non_exhaustive()
    }
}

impl AsyncSpec {
    /// A spec with a name, a description and the remote graph id.
    ///
    /// ```
    /// use kit::middleware::async_subagents::AsyncSpec;
    /// let researcher = AsyncSpec::new("researcher", "Deep research, takes minutes.", "research")
    ///     .url("http://127.0.0.1:8787")
    ///     .header("Authorization", "Bearer secret");
    /// # let _ = researcher;
    /// ```
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        graph_id: impl Into<String>,
    ) -> Self {
        AsyncSpec {
            description: description.into(),
            endpoint: Endpoint::new(name, graph_id),
            client: None,
        }
    }

    /// The subagent's unique name.
    pub fn name(&self) -> &str {
        &self.endpoint.name
    }

    /// The worker's base URL (selects the built-in HTTP client unless a client is set).
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.endpoint.url = Some(url.into());
        self
    }

    /// A custom client.
    pub fn client(mut self, client: impl RunClient) -> Self {
        self.client = Some(Arc::new(client));
        self
    }

    /// Adds a header sent on every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.endpoint.headers.insert(name.into(), value.into());
        self
    }

    /// The client to use: the custom one, the HTTP one for a `url`, or none.
    fn resolved_client(&self, http: &Arc<HttpRunClient>) -> Option<Arc<dyn RunClient>> {
        match (&self.client, &self.endpoint.url) {
            (Some(c), _) => Some(c.clone()),
            (None, Some(_)) => Some(http.clone() as Arc<dyn RunClient>),
            (None, None) => None,
        }
    }
}

/// Adds the five async-task tools for a set of [`AsyncSpec`]s.
pub struct AsyncSubagentMiddleware {
    inner: Arc<Inner>,
}

struct Inner {
    specs: Vec<AsyncSpec>,
    http: Arc<HttpRunClient>,
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
            }),
        }
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

#[derive(Deserialize)]
struct StartArgs {
    description: String,
    #[serde(default)]
    subagent_name: Option<String>,
    #[serde(default)]
    subagent_type: Option<String>,
}

#[derive(Deserialize)]
struct TaskArgs {
    task_id: String,
}

#[derive(Deserialize)]
struct UpdateArgs {
    task_id: String,
    message: String,
}

#[derive(Deserialize)]
struct ListArgs {
    #[serde(default)]
    status_filter: Option<String>,
}

fn record_update(task: AsyncTask) -> AgentStateUpdate {
    AgentStateUpdate::new().async_tasks(BTreeMap::from([(task.task_id.clone(), task)]))
}

fn json_output(value: Value) -> ToolOutput {
    ToolOutput::text(value.to_string())
}

/// Applies a worker response to a record: status, ids, result, timestamps.
fn absorb(task: &mut AsyncTask, response: &Value) {
    let now = ids::now_rfc3339();
    let old_status = task.status.clone();
    let old_run = task.run_id.clone();
    if let Some(status) = remote::text(response, "status") {
        task.status = status;
    }
    if let Some(thread) = remote::text(response, "thread_id") {
        task.thread_id = Some(thread);
    }
    if let Some(run) = remote::text(response, "run_id") {
        task.run_id = Some(run);
    }
    if let Some(result) = remote::result(response) {
        task.result = Some(result);
    }
    task.remote = Some(response.clone());
    task.last_error = None;
    task.last_checked_at = Some(now.clone());
    if task.status != old_status || task.run_id != old_run {
        task.last_updated_at = Some(now);
    }
}

impl Inner {
    fn spec(&self, name: &str) -> Option<&AsyncSpec> {
        self.specs.iter().find(|s| s.name() == name)
    }

    /// The error result for a name that matches no spec. Its text begins with `Unknown async
    /// subagent type` (spec §7), without the `Error: ` prefix of failed tools.
    fn unknown_type(&self, name: &str) -> ToolOutput {
        let names: Vec<String> = self
            .specs
            .iter()
            .map(|s| format!("`{}`", s.name()))
            .collect();
        ToolOutput::error(format!(
            "Unknown async subagent type `{name}`. Available types: {}",
            names.join(", ")
        ))
    }

    fn client_error(&self, what: &str, task: Option<AsyncTask>, e: RunClientError) -> ToolOutput {
        let mut output = ToolOutput::error(format!("Error: {what}: {e}"));
        if let Some(mut task) = task {
            task.last_error = Some(e.to_string());
            output = output.with_update(record_update(task));
        }
        output
    }

    async fn start(&self, args: StartArgs) -> Result<ToolOutput, ToolError> {
        let Some(name) = args.subagent_name.or(args.subagent_type) else {
            return Err(ToolError::invalid_args(format!(
                "say which async subagent to start with `subagent_name`; available: {}",
                self.specs
                    .iter()
                    .map(|s| s.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        };
        let Some(spec) = self.spec(&name) else {
            return Ok(self.unknown_type(&name));
        };
        let now = ids::now_rfc3339();
        let mut task = AsyncTask {
            task_id: String::new(),
            subagent_name: spec.name().to_string(),
            graph_id: spec.endpoint.graph_id.clone(),
            url: spec.endpoint.url.clone(),
            status: "pending".to_string(),
            created_at: now.clone(),
            last_updated_at: Some(now),
            description: args.description.clone(),
            ..AsyncTask::default()
        };
        let Some(client) = spec.resolved_client(&self.http) else {
            // No worker: the task is only recorded (spec §2.1 rule 2).
            task.task_id = format!("async-{}", ids::random());
            let out = json!({
                "task_id": task.task_id,
                "status": task.status,
                "note": format!(
                    "async subagent `{}` has no url or client: the task is recorded but nothing \
                     runs it",
                    spec.name()
                ),
            });
            return Ok(json_output(out).with_update(record_update(task)));
        };
        let payload = json!({
            "assistant_id": spec.endpoint.graph_id,
            "input": {"messages": [{"role": "user", "content": args.description}]},
        });
        match client.start(&spec.endpoint, payload).await {
            Ok(response) => {
                task.task_id = remote::task_id(&response)
                    .unwrap_or_else(|| format!("async-{}", ids::random()));
                task.status = "running".to_string();
                absorb(&mut task, &response);
                let out = json!({
                    "task_id": task.task_id,
                    "status": task.status,
                    "subagent": task.subagent_name,
                    "message": format!("Launched async subagent. task_id: {}", task.task_id),
                });
                Ok(json_output(out).with_update(record_update(task)))
            }
            Err(e) => Ok(ToolOutput::error(format!(
                "Error: failed to launch async subagent '{name}': {e}"
            ))),
        }
    }

    async fn refresh(&self, mut task: AsyncTask) -> Result<AsyncTask, (AsyncTask, RunClientError)> {
        if is_terminal(&task.status) {
            return Ok(task);
        }
        let Some(spec) = self.spec(&task.subagent_name) else {
            return Err((
                task.clone(),
                RunClientError::Other(format!(
                    "async subagent `{}` is no longer configured",
                    task.subagent_name
                )),
            ));
        };
        let Some(client) = spec.resolved_client(&self.http) else {
            return Err((task, RunClientError::NoWorker(spec.name().to_string())));
        };
        match client.check(&spec.endpoint, &task.task_id).await {
            Ok(response) => {
                absorb(&mut task, &response);
                Ok(task)
            }
            Err(e) => Err((task, e)),
        }
    }

    fn status_json(task: &AsyncTask) -> Value {
        let mut out = Map::new();
        out.insert("task_id".into(), json!(task.task_id));
        out.insert("status".into(), json!(task.status));
        if let Some(result) = &task.result {
            out.insert("result".into(), json!(result));
        }
        if let Some(thread) = &task.thread_id {
            out.insert("thread_id".into(), json!(thread));
        }
        if task.status == "error" {
            let error = task
                .remote
                .as_ref()
                .and_then(|r| r.get("error"))
                .cloned()
                .unwrap_or_else(|| json!("The async subagent encountered an error."));
            out.insert("error".into(), error);
        }
        Value::Object(out)
    }

    async fn check(&self, args: TaskArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(task) = ctx.state().async_tasks.get(&args.task_id).cloned() else {
            return Ok(json_output(json!({
                "task_id": args.task_id,
                "status": "unknown",
                "error": format!("No tracked task found for task_id: '{}'", args.task_id),
            })));
        };
        match self.refresh(task).await {
            Ok(task) => Ok(json_output(Self::status_json(&task)).with_update(record_update(task))),
            Err((task, e)) => {
                Ok(self.client_error("failed to get the task's status", Some(task), e))
            }
        }
    }

    async fn update(&self, args: UpdateArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(mut task) = ctx.state().async_tasks.get(&args.task_id).cloned() else {
            return Ok(ToolOutput::error(format!(
                "Error: No tracked task found for task_id: '{}'",
                args.task_id
            )));
        };
        let Some(spec) = self.spec(&task.subagent_name) else {
            return Ok(self.unknown_type(&task.subagent_name));
        };
        let Some(client) = spec.resolved_client(&self.http) else {
            return Ok(self.client_error(
                "failed to update the task",
                Some(task),
                RunClientError::NoWorker(spec.name().to_string()),
            ));
        };
        match client
            .update(&spec.endpoint, &task.task_id, &args.message)
            .await
        {
            Ok(response) => {
                task.updates.push(args.message);
                let id = task.task_id.clone();
                absorb(&mut task, &response);
                // The task id never changes, whatever ids the worker reports.
                task.task_id = id;
                let out = json!({
                    "task_id": task.task_id,
                    "status": task.status,
                    "message": format!("Updated async subagent. task_id: {}", task.task_id),
                });
                Ok(json_output(out).with_update(record_update(task)))
            }
            Err(e) => Ok(self.client_error("failed to update the task", Some(task), e)),
        }
    }

    async fn cancel(&self, args: TaskArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(mut task) = ctx.state().async_tasks.get(&args.task_id).cloned() else {
            return Ok(ToolOutput::error(format!(
                "Error: No tracked task found for task_id: '{}'",
                args.task_id
            )));
        };
        let client = self
            .spec(&task.subagent_name)
            .and_then(|s| s.resolved_client(&self.http).map(|c| (s, c)));
        let response = match client {
            Some((spec, client)) => match client.cancel(&spec.endpoint, &task.task_id).await {
                Ok(r) => Some(r),
                Err(e) => return Ok(self.client_error("failed to cancel the task", Some(task), e)),
            },
            None => None,
        };
        let now = ids::now_rfc3339();
        let remote_status = response.as_ref().and_then(|r| remote::text(r, "status"));
        if let Some(r) = &response {
            task.remote = Some(r.clone());
        }
        task.status = match remote_status {
            Some(s) if is_terminal(&s) => s,
            _ => "cancelled".to_string(),
        };
        task.last_updated_at = Some(now.clone());
        task.last_checked_at = Some(now);
        let out = json!({
            "task_id": task.task_id,
            "status": task.status,
            "message": format!("Cancelled async subagent task: {}", task.task_id),
        });
        Ok(json_output(out).with_update(record_update(task)))
    }

    async fn list(&self, args: ListArgs, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let filter = args.status_filter.filter(|f| f != "all");
        let tasks: Vec<AsyncTask> = ctx
            .state()
            .async_tasks
            .values()
            .filter(|t| filter.as_deref().is_none_or(|f| t.status == f))
            .cloned()
            .collect();
        if tasks.is_empty() {
            return Ok(ToolOutput::text(match filter {
                Some(f) => format!("No async subagent tasks with status `{f}`."),
                None => "No async subagent tasks tracked.".to_string(),
            }));
        }
        // Refresh the non-terminal ones in parallel.
        let refreshed = futures::future::join_all(tasks.into_iter().map(|t| self.refresh(t))).await;
        let mut lines = Vec::new();
        let mut changed = BTreeMap::new();
        for r in refreshed {
            let (task, note) = match r {
                Ok(task) => (task, String::new()),
                Err((mut task, e)) => {
                    let note = format!("  (could not refresh: {e})");
                    task.last_error = Some(e.to_string());
                    (task, note)
                }
            };
            lines.push(format!(
                "- task_id: {}  agent: {}  status: {}{note}",
                task.task_id, task.subagent_name, task.status
            ));
            changed.insert(task.task_id.clone(), task);
        }
        let text = format!("{} tracked task(s):\n{}", lines.len(), lines.join("\n"));
        Ok(ToolOutput::text(text).with_update(AgentStateUpdate::new().async_tasks(changed)))
    }
}

fn start_description(specs: &[AsyncSpec]) -> String {
    let mut list = String::new();
    for s in specs {
        list.push_str(&format!("- {}: {}\n", s.name(), s.description));
    }
    format!(
        "Start a background task on a remote async subagent and get its task_id at once. \
         Available async subagents:\n{list}\n\
         - The call returns immediately; the work goes on in the background. Tell the user \
         briefly what you delegated.\n\
         - Do not check the status right away or in a loop; check when the user asks or when \
         you need the result.\n\
         - Several tasks can run at the same time.\n\
         - Use update_async_task to send new instructions to a running task.\n\
         - The remote agent has its own tools; describe the goal, not the steps."
    )
}

fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(ToolError::invalid_args)
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
mod tests {
    use super::*;

    #[test]
    fn task_id_choice_order_and_result_extraction() {
        let r = json!({"run_id": "r", "id": "i", "thread_id": "t"});
        assert_eq!(remote::task_id(&r).as_deref(), Some("t"));
        let r = json!({"run_id": "r", "id": "i"});
        assert_eq!(remote::task_id(&r).as_deref(), Some("i"));
        assert_eq!(remote::task_id(&json!({"status": "x"})), None);
        let r = json!({"values": {"messages": [
            {"role": "assistant", "content": "first"},
            {"role": "assistant", "content": "final"},
            {"role": "assistant", "content": ""}
        ]}});
        assert_eq!(remote::result(&r).as_deref(), Some("final"));
        let r = json!({"result": "explicit", "values": {"messages": [{"content": "x"}]}});
        assert_eq!(remote::result(&r).as_deref(), Some("explicit"));
    }

    #[test]
    fn duplicate_names_are_refused() {
        let err = AsyncSubagentMiddleware::new(vec![
            AsyncSpec::new("a", "x", "g"),
            AsyncSpec::new("a", "y", "g"),
        ])
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains("duplicate async subagent names: a")
        );
    }
}
