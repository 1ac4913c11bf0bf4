//! The five tools at work: starting, checking, updating, cancelling and listing remote tasks.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::{AsyncSpec, Inner, is_terminal, remote};
use crate::agent::{AgentStateUpdate, AsyncTask};
use crate::ids;
use std::sync::Arc;

use crate::protocol::{RunClient, RunClientError};
use crate::tool::{ToolContext, ToolError, ToolOutput};

#[derive(Deserialize)]
pub(super) struct StartArgs {
    pub(super) description: String,
    #[serde(default)]
    pub(super) subagent_name: Option<String>,
    #[serde(default)]
    pub(super) subagent_type: Option<String>,
}

#[derive(Deserialize)]
pub(super) struct TaskArgs {
    pub(super) task_id: String,
}

#[derive(Deserialize)]
pub(super) struct UpdateArgs {
    pub(super) task_id: String,
    pub(super) message: String,
}

#[derive(Deserialize)]
pub(super) struct ListArgs {
    #[serde(default)]
    pub(super) status_filter: Option<String>,
}

pub(super) fn record_update(task: AsyncTask) -> AgentStateUpdate {
    AgentStateUpdate::new().async_tasks(BTreeMap::from([(task.task_id.clone(), task)]))
}

pub(super) fn json_output(value: Value) -> ToolOutput {
    ToolOutput::text(value.to_string())
}

/// The most bytes of a worker's answer a task record keeps (it is saved with the thread on
/// every refresh).
const MAX_REMOTE_BYTES: usize = 64 << 10;

/// The most refreshes `list_async_tasks` has in flight.
const MAX_REFRESHING: usize = 8;

/// The most follow-up messages a task record keeps (the newest).
const MAX_UPDATES: usize = 64;

/// The most bytes of pending interrupts a trimmed record keeps (a review of a large write
/// shows its arguments; the model needs them to answer).
const MAX_INTERRUPT_BYTES: usize = 256 << 10;

/// What a record keeps of a worker's answer: all of it up to [`MAX_REMOTE_BYTES`] (the
/// spec's "last raw remote response"). Over that, all but the thread's values (the result is
/// kept on its own); still over, the status, the ids, the stream link, the error (clipped)
/// and the pending interrupts (up to [`MAX_INTERRUPT_BYTES`]). A worker can answer with
/// megabytes, saved again with the thread on every refresh.
pub(super) fn kept_of(response: &Value) -> Value {
    // Deeper than a thread can save and read back (an answer from a client of the user's
    // own: kit's HTTP client refuses those) counts as too large.
    let readable = |v: &Value| crate::json::nests_within(v, crate::json::MAX_KEPT_DEPTH);
    let fits = |v: &Value| crate::json::approx_len(v) <= MAX_REMOTE_BYTES && readable(v);
    if fits(response) {
        return response.clone();
    }
    let Value::Object(map) = response else {
        return Value::Null;
    };
    let kept: Map<String, Value> = map
        .iter()
        .filter(|(k, _)| *k != "values")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let kept = Value::Object(kept);
    if fits(&kept) {
        return kept;
    }
    let mut small = Map::new();
    for key in ["status", "thread_id", "run_id", "task_id", "id"] {
        if let Some(text) = remote::text(response, key) {
            small.insert(
                key.to_string(),
                Value::String(crate::text::clip(&text, 256)),
            );
        }
    }
    if let Some(error) = response.get("error").filter(|e| !e.is_null()) {
        let text = match error {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        small.insert(
            "error".into(),
            Value::String(crate::text::clip(&text, 2000)),
        );
    }
    if let Some(stream) = response
        .get("links")
        .and_then(|l| l.get("stream"))
        .and_then(Value::as_str)
    {
        small.insert(
            "links".into(),
            json!({"stream": crate::text::clip(stream, 2000)}),
        );
    }
    if let Some(Value::Array(interrupts)) = response.get("interrupts") {
        // The pending interrupts that fit, in order; the rest are named as left out.
        let mut kept = Vec::new();
        let mut bytes = 0usize;
        for interrupt in interrupts {
            let size = crate::json::approx_len(interrupt);
            if bytes.saturating_add(size) > MAX_INTERRUPT_BYTES || !readable(interrupt) {
                small.insert("interrupts_truncated".into(), Value::Bool(true));
                break;
            }
            bytes += size;
            kept.push(interrupt.clone());
        }
        small.insert("interrupts".into(), Value::Array(kept));
    }
    small.insert("truncated".to_string(), Value::Bool(true));
    Value::Object(small)
}

/// Applies a worker response to a record: status, ids, result, timestamps.
pub(super) fn absorb(task: &mut AsyncTask, response: &Value) {
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
    task.remote = Some(kept_of(response));
    task.last_error = None;
    task.last_checked_at = Some(now.clone());
    if task.status != old_status || task.run_id != old_run {
        task.last_updated_at = Some(now);
    }
}

impl Inner {
    pub(super) fn spec(&self, name: &str) -> Option<&AsyncSpec> {
        self.specs.iter().find(|s| s.name() == name)
    }

    /// The error result for a name that matches no spec. Its text begins with `Unknown async
    /// subagent type` (spec §7), without the `Error: ` prefix of failed tools.
    pub(super) fn unknown_type(&self, name: &str) -> ToolOutput {
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

    pub(super) fn client_error(
        &self,
        what: &str,
        task: Option<AsyncTask>,
        e: RunClientError,
    ) -> ToolOutput {
        let mut output = ToolOutput::error(format!("Error: {what}: {e}"));
        if let Some(mut task) = task {
            task.last_error = Some(e.to_string());
            output = output.with_update(record_update(task));
        }
        output
    }

    pub(super) async fn start(&self, args: StartArgs) -> Result<ToolOutput, ToolError> {
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
            // Kept in state and traces: never with the URL's password.
            url: spec
                .endpoint
                .url
                .as_deref()
                .map(crate::http::redact_url_text),
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
                self.follow(spec, client, &task);
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

    /// Follows the task's current run in the background (see [`super::watch`]), when the
    /// worker said it streams (a kit worker's runs carry `links.stream`).
    fn follow(&self, spec: &AsyncSpec, client: Arc<dyn RunClient>, task: &AsyncTask) {
        let streams = task
            .remote
            .as_ref()
            .and_then(|r| r.get("links"))
            .and_then(|l| l.get("stream"))
            .is_some();
        if let (true, Some(run_id)) = (streams, &task.run_id) {
            self.watches.follow(
                client,
                spec.endpoint.clone(),
                task.task_id.clone(),
                run_id.clone(),
            );
        }
    }

    pub(super) async fn refresh(
        &self,
        mut task: AsyncTask,
    ) -> Result<AsyncTask, (AsyncTask, RunClientError)> {
        if is_terminal(&task.status) {
            return Ok(task);
        }
        // Heard through the stream: no request needed.
        if self.watches.apply(&mut task) {
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

    pub(super) fn status_json(task: &AsyncTask) -> Value {
        let mut out = Map::new();
        out.insert("task_id".into(), json!(task.task_id));
        out.insert("status".into(), json!(task.status));
        if let Some(result) = &task.result {
            out.insert("result".into(), json!(result));
        }
        if let Some(thread) = &task.thread_id {
            out.insert("thread_id".into(), json!(thread));
        }
        if task.status == "waiting"
            && let Some(interrupts) = task.remote.as_ref().and_then(|r| r.get("interrupts"))
        {
            out.insert("interrupts".into(), interrupts.clone());
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

    pub(super) async fn check(
        &self,
        args: TaskArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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

    pub(super) async fn update(
        &self,
        args: UpdateArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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
                if task.updates.len() > MAX_UPDATES {
                    let extra = task.updates.len() - MAX_UPDATES;
                    task.updates.drain(..extra);
                }
                let id = task.task_id.clone();
                absorb(&mut task, &response);
                // The task id never changes, whatever ids the worker reports.
                task.task_id = id;
                self.follow(spec, client.clone(), &task);
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

    pub(super) async fn cancel(
        &self,
        args: TaskArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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
            task.remote = Some(kept_of(r));
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

    pub(super) async fn list(
        &self,
        args: ListArgs,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
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
        // Refresh the non-terminal ones in parallel, a few at a time: thousands of tracked tasks
        // must not make thousands of requests at once.
        let refreshing = tasks
            .into_iter()
            .enumerate()
            .map(|(i, t)| async move { (i, self.refresh(t).await) });
        let mut refreshed: Vec<_> = futures::StreamExt::collect(
            futures::StreamExt::buffer_unordered(futures::stream::iter(refreshing), MAX_REFRESHING),
        )
        .await;
        refreshed.sort_by_key(|(i, _)| *i);
        let mut lines = Vec::new();
        let mut changed = BTreeMap::new();
        for (_, r) in refreshed {
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

pub(super) fn start_description(specs: &[AsyncSpec]) -> String {
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

pub(super) fn parse<T: serde::de::DeserializeOwned>(args: Value) -> Result<T, ToolError> {
    serde_json::from_value(args).map_err(ToolError::invalid_args)
}
