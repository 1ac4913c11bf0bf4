//! Hearing of remote tasks without polling: when a task starts (or gets a follow-up), the
//! middleware follows its run through the client's stream
//! ([`RunClient::follow`](crate::protocol::RunClient::follow)); the outcome is kept for the
//! tools (`check_async_task` and `list_async_tasks` answer from it without a request) and
//! announced to [`AsyncSubagentMiddleware::notices`](super::AsyncSubagentMiddleware::notices).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::agent::AsyncTask;
use crate::protocol::{Endpoint, RunClient, RunOutcome};

/// What a supervisor hears about one of its tasks: the run ended or paused.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskNotice {
    /// The task.
    pub task_id: String,
    /// The run of the task that ended or paused.
    pub run_id: String,
    /// How.
    pub outcome: RunOutcome,
}

impl TaskNotice {
    /// The task status it means: `success`, `error`, `cancelled`, or `waiting` (deepagents'
    /// state for a task that paused for a human, with its pending interrupts).
    pub fn status(&self) -> &'static str {
        match &self.outcome {
            RunOutcome::Completed { .. } => "success",
            RunOutcome::Waiting { .. } => "waiting",
            RunOutcome::Failed {
                cancelled: true, ..
            } => "cancelled",
            RunOutcome::Failed { .. } => "error",
        }
    }
}

/// How many notices a slow listener may fall behind by.
const CAPACITY: usize = 256;

/// The outcomes heard so far, by task id (the latest run of each), and their listeners.
pub(super) struct Watches {
    heard: Mutex<HashMap<String, TaskNotice>>,
    notices: broadcast::Sender<TaskNotice>,
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            heard: Mutex::new(HashMap::new()),
            notices: broadcast::channel(CAPACITY).0,
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Watches {
    pub(super) fn subscribe(&self) -> broadcast::Receiver<TaskNotice> {
        self.notices.subscribe()
    }

    /// Follows run `run_id` of task `task_id` in the background, when the client can.
    pub(super) fn follow(
        self: &Arc<Self>,
        client: Arc<dyn RunClient>,
        endpoint: Endpoint,
        task_id: String,
        run_id: String,
    ) {
        let watches = self.clone();
        tokio::spawn(async move {
            match client.follow(&endpoint, &task_id, &run_id).await {
                Some(Ok(outcome)) => watches.record(TaskNotice {
                    task_id,
                    run_id,
                    outcome,
                }),
                Some(Err(e)) => {
                    tracing::warn!(%task_id, error = %e, "could not follow an async task's stream; the tools will poll it");
                }
                None => {}
            }
        });
    }

    fn record(&self, notice: TaskNotice) {
        lock(&self.heard).insert(notice.task_id.clone(), notice.clone());
        let _ = self.notices.send(notice);
    }

    /// Applies what was heard about the task's current run; false when nothing was.
    pub(super) fn apply(&self, task: &mut AsyncTask) -> bool {
        let heard = lock(&self.heard).get(&task.task_id).cloned();
        let Some(notice) = heard.filter(|n| task.run_id.as_deref() == Some(n.run_id.as_str()))
        else {
            return false;
        };
        let now = crate::ids::now_rfc3339();
        let status = notice.status().to_string();
        if task.status != status {
            task.last_updated_at = Some(now.clone());
        }
        task.status = status;
        task.last_checked_at = Some(now);
        task.last_error = None;
        let mut remote = json!({"status": task.status, "run_id": notice.run_id});
        match notice.outcome {
            RunOutcome::Completed { values } => {
                if let Some(values) = values {
                    remote["values"] = values;
                }
                if let Some(result) = super::remote::result(&remote) {
                    task.result = Some(result);
                }
            }
            RunOutcome::Waiting { interrupts, values } => {
                remote["interrupts"] = Value::Array(interrupts);
                if let Some(values) = values {
                    remote["values"] = values;
                }
            }
            RunOutcome::Failed { error, .. } => remote["error"] = json!(error),
        }
        task.remote = Some(remote);
        true
    }
}
