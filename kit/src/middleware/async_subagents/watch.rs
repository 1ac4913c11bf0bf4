//! Hearing of remote tasks without polling: when a task starts (or gets a follow-up), the
//! middleware follows its run through the client's stream
//! ([`RunClient::follow`](crate::protocol::RunClient::follow)); the outcome is kept for the
//! tools (`check_async_task` and `list_async_tasks` answer from it without a request) and
//! announced to [`AsyncSubagentMiddleware::notices`](super::AsyncSubagentMiddleware::notices).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::broadcast;

use crate::agent::AsyncTask;
use crate::bounded::BoundedMap;
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

/// How many tasks' outcomes are kept (each may hold a run's final values). Beyond that the
/// oldest are forgotten, and the tools ask the worker about those tasks instead: a supervisor
/// that runs for months starts tasks without end.
const HEARD: usize = 1024;

/// How many runs are followed at once (each holds a stream to its worker open). A task
/// started beyond that is not followed: the tools ask the worker about it instead.
pub(super) const MAX_FOLLOWING: usize = 256;

/// The outcomes heard so far, by task id (the latest run of each), and their listeners.
pub(super) struct Watches {
    heard: Mutex<Heard>,
    notices: broadcast::Sender<TaskNotice>,
    /// Runs followed right now.
    following: Arc<AtomicUsize>,
}

/// Counts one followed run while it lives.
struct Following(Arc<AtomicUsize>);

impl Drop for Following {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The outcomes kept, by task id; the tasks first heard of go first.
#[derive(Default)]
struct Heard {
    by_task: BoundedMap<TaskNotice, HEARD>,
}

impl Heard {
    fn insert(&mut self, notice: TaskNotice) {
        self.by_task.insert(notice.task_id.clone(), notice);
    }
}

impl Default for Watches {
    fn default() -> Self {
        Watches {
            heard: Mutex::new(Heard::default()),
            notices: broadcast::channel(CAPACITY).0,
            following: Arc::new(AtomicUsize::new(0)),
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
        if self.following.fetch_add(1, Ordering::AcqRel) >= MAX_FOLLOWING {
            self.following.fetch_sub(1, Ordering::AcqRel);
            tracing::debug!(%task_id, "{MAX_FOLLOWING} runs followed already; the tools will poll this one");
            return;
        }
        let guard = Following(self.following.clone());
        let watches = self.clone();
        tokio::spawn(async move {
            let _guard = guard;
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
        lock(&self.heard).insert(notice.clone());
        let _ = self.notices.send(notice);
    }

    /// Applies what was heard about the task's current run; false when nothing was.
    pub(super) fn apply(&self, task: &mut AsyncTask) -> bool {
        let heard = lock(&self.heard).by_task.get(&task.task_id).cloned();
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
        task.remote = Some(super::tasks::kept_of(&remote));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notice(task: usize, run: &str) -> TaskNotice {
        TaskNotice {
            task_id: format!("t{task}"),
            run_id: run.to_string(),
            outcome: RunOutcome::Completed { values: None },
        }
    }

    /// Outcomes of more tasks than are kept: the oldest tasks are forgotten, a task heard of
    /// again keeps its place and its latest run, and the map never holds more than the bound.
    #[test]
    fn the_outcomes_kept_are_bounded_and_the_oldest_go_first() {
        let mut heard = Heard::default();
        heard.insert(notice(0, "a"));
        heard.insert(notice(0, "b"));
        for task in 1..HEARD + 10 {
            heard.insert(notice(task, "a"));
            assert!(heard.by_task.len() <= HEARD);
        }
        assert_eq!(heard.by_task.len(), HEARD);
        assert_eq!(heard.by_task.order_len(), HEARD);
        // Ten too many: the first ten tasks heard of are gone.
        assert!(heard.by_task.get("t0").is_none() && heard.by_task.get("t9").is_none());
        assert!(heard.by_task.get("t10").is_some());
        let run_of = |heard: &Heard, task: &str| heard.by_task.get(task).map(|n| n.run_id.clone());
        assert_eq!(
            run_of(&heard, &format!("t{}", HEARD + 9)).as_deref(),
            Some("a")
        );
        heard.insert(notice(10, "c"));
        assert_eq!(run_of(&heard, "t10").as_deref(), Some("c"));
        assert_eq!(heard.by_task.len(), HEARD);
    }

    /// A worker whose streams never end: at most `MAX_FOLLOWING` runs are followed at once,
    /// the rest are left to the tools; a run that ends frees its place.
    #[tokio::test]
    async fn at_most_so_many_runs_are_followed_at_once() {
        struct Endless(tokio::sync::Semaphore);
        #[crate::async_trait]
        impl RunClient for Endless {
            async fn start(
                &self,
                _: &Endpoint,
                _: Value,
            ) -> Result<Value, crate::protocol::RunClientError> {
                Ok(json!({}))
            }
            async fn check(
                &self,
                _: &Endpoint,
                _: &str,
            ) -> Result<Value, crate::protocol::RunClientError> {
                Ok(json!({}))
            }
            async fn update(
                &self,
                _: &Endpoint,
                _: &str,
                _: &str,
            ) -> Result<Value, crate::protocol::RunClientError> {
                Ok(json!({}))
            }
            async fn cancel(
                &self,
                _: &Endpoint,
                _: &str,
            ) -> Result<Value, crate::protocol::RunClientError> {
                Ok(json!({}))
            }
            async fn follow(
                &self,
                _: &Endpoint,
                _: &str,
                _: &str,
            ) -> Option<Result<RunOutcome, crate::protocol::RunClientError>> {
                let _ = self.0.acquire().await;
                Some(Ok(RunOutcome::Completed { values: None }))
            }
        }
        let client = Arc::new(Endless(tokio::sync::Semaphore::new(0)));
        let watches = Arc::new(Watches::default());
        let endpoint = Endpoint::new("w", "g");
        for i in 0..MAX_FOLLOWING + 50 {
            watches.follow(
                client.clone(),
                endpoint.clone(),
                format!("t{i}"),
                "r".into(),
            );
        }
        assert_eq!(watches.following.load(Ordering::Acquire), MAX_FOLLOWING);
        // The streams end: every place is free again, and the ends were heard.
        client.0.add_permits(MAX_FOLLOWING);
        for _ in 0..100 {
            if watches.following.load(Ordering::Acquire) == 0 {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(watches.following.load(Ordering::Acquire), 0);
        assert_eq!(lock(&watches.heard).by_task.len(), MAX_FOLLOWING);
    }
}
