//! The workflow (the superstep loop) and the activity (one node task).
//!
//! Workflow code must be deterministic: it runs the kit step driver (pure: reducers, routing,
//! joins, interrupts), schedules activities, and waits on signals — no clock, no randomness,
//! no I/O. Everything that talks to the world runs in the `kit-node` activity.

#![allow(missing_docs)] // The macros generate public marker types without docs.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use kit::graph::{CancelToken, DriverNext, Interrupt, Resume, RunOptions, StepTask, TaskResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use temporalio_common::data_converters::PayloadConversionError;
use temporalio_common::error::ApplicationFailure;
use temporalio_common::{ActivityCloseTimeouts, RetryPolicy};
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{
    ActivityCancellationType, ActivityExecutionError, ActivityOptions, SyncWorkflowContext,
    WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use crate::registry::{Registry, StartError, failed};

/// The workflow type name kit runs graphs under.
pub const WORKFLOW_TYPE: &str = "kit-graph";
/// The activity type name of one node task.
pub const NODE_ACTIVITY: &str = "kit-node";

/// The patch (Temporal's versioning marker) under which node activities carry ids derived from
/// their task (`<task id>#<n>`) and echo the task id in their result. Histories recorded before
/// it (ids were sequence numbers, results bare) replay as they were recorded.
const TASK_IDS_PATCH: &str = "kit-task-activity-ids";

/// Temporal's default limit on one payload (a server refuses a larger one).
const PAYLOAD_LIMIT: usize = 2 * 1024 * 1024;

/// The size check of a payload: the error text when `size` bytes of JSON is over Temporal's limit.
fn too_large(what: &str, size: usize) -> Option<String> {
    (size > PAYLOAD_LIMIT).then(|| {
        format!(
            "{what} is {} KB as JSON, over Temporal's 2 MB payload limit ({} KB): the Temporal \
             server would refuse it; keep large data in the store (or a file) and only its key \
             in the state",
            size.div_ceil(1024),
            PAYLOAD_LIMIT / 1024
        )
    })
}

/// How node activities are scheduled: their timeouts and Temporal's retries (a worker that
/// dies, a timeout). Part of a run's input, so every worker replays the same schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NodeActivityOptions {
    /// How long one attempt of a node may run (Temporal's start-to-close timeout).
    pub start_to_close: Duration,
    /// How long a node may take in all, its attempts and the pauses between them included
    /// (Temporal's schedule-to-close timeout).
    #[serde(default = "default_schedule_to_close")]
    pub schedule_to_close: Duration,
    /// How long a node may go without a heartbeat before Temporal counts its worker as dead
    /// and retries it elsewhere. The activity heartbeats three times per period while the node
    /// runs (in a task of its own; nodes must still not block: `spawn_blocking`); a worker's
    /// death is noticed within this time, and a cancellation reaches the node with the answer
    /// to its next heartbeat.
    pub heartbeat: Duration,
    /// Attempts of one node before the run fails (default 3; 0: unlimited, which retries a
    /// node that can never succeed forever). Node *errors* are not retried by Temporal: the
    /// node's own kit `RetryPolicy` retries those inside the attempt; these attempts cover dead
    /// workers, timeouts and workers that do not have the graph yet (a rolling deploy).
    pub max_attempts: u32,
    /// The first pause before a retry (doubled each time, at most a minute).
    pub initial_retry_interval: Duration,
}

fn default_schedule_to_close() -> Duration {
    Duration::from_secs(3600)
}

impl Default for NodeActivityOptions {
    fn default() -> Self {
        NodeActivityOptions {
            start_to_close: Duration::from_secs(600),
            schedule_to_close: default_schedule_to_close(),
            heartbeat: Duration::from_secs(30),
            max_attempts: 3,
            initial_retry_interval: Duration::from_secs(1),
        }
    }
}

impl NodeActivityOptions {
    /// Sets the start-to-close timeout of one attempt.
    #[must_use]
    pub fn start_to_close(mut self, timeout: Duration) -> Self {
        self.start_to_close = timeout;
        self
    }

    /// Sets the schedule-to-close timeout: how long a node may take, all its attempts included.
    #[must_use]
    pub fn schedule_to_close(mut self, timeout: Duration) -> Self {
        self.schedule_to_close = timeout;
        self
    }

    /// Sets the heartbeat timeout (how fast a dead worker is noticed).
    #[must_use]
    pub fn heartbeat(mut self, timeout: Duration) -> Self {
        self.heartbeat = timeout;
        self
    }

    /// Sets the attempts per node (0: unlimited).
    #[must_use]
    pub fn max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts;
        self
    }

    /// Sets the first pause before a retry.
    #[must_use]
    pub fn initial_retry_interval(mut self, interval: Duration) -> Self {
        self.initial_retry_interval = interval;
        self
    }

    fn to_temporal(&self) -> ActivityOptions {
        ActivityOptions::with_close_timeouts(ActivityCloseTimeouts::ScheduleAndStartToClose {
            schedule_to_close: self.schedule_to_close,
            start_to_close: self.start_to_close,
        })
        .heartbeat_timeout(self.heartbeat)
        // The workflow learns a node is cancelled only once the node stopped.
        .cancellation_type(ActivityCancellationType::WaitCancellationCompleted)
        .retry_policy(
            RetryPolicy::builder()
                .initial_interval(self.initial_retry_interval)
                .maximum_interval(Duration::from_secs(60))
                .maximum_attempts(self.max_attempts)
                .build(),
        )
        .build()
    }
}

/// The input of a run's workflow.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RunInput {
    pub(crate) graph: String,
    pub(crate) input: Value,
    #[serde(default)]
    pub(crate) recursion_limit: Option<usize>,
    #[serde(default)]
    pub(crate) activity: NodeActivityOptions,
}

/// A resume value on the wire.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub(crate) enum ResumeValue {
    Continue,
    Value { value: Value },
    ByIds { values: HashMap<String, Value> },
}

impl From<Resume> for ResumeValue {
    fn from(resume: Resume) -> Self {
        match resume {
            Resume::Continue => ResumeValue::Continue,
            Resume::Value(value) => ResumeValue::Value { value },
            Resume::ByIds(values) => ResumeValue::ByIds { values },
        }
    }
}

impl From<ResumeValue> for Resume {
    fn from(value: ResumeValue) -> Self {
        match value {
            ResumeValue::Continue => Resume::Continue,
            ResumeValue::Value { value } => Resume::Value(value),
            ResumeValue::ByIds { values } => Resume::ByIds(values),
        }
    }
}

/// The `resume` signal: the value, and the interrupt ids the sender saw pending (a resume
/// meant for an earlier pause is not applied to a later one).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ResumeSignal {
    pub(crate) answers: Vec<String>,
    pub(crate) value: ResumeValue,
}

/// What the `progress` query answers.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// The last superstep started.
    pub(crate) step: i64,
    /// What the run waits for (empty unless paused).
    pub(crate) interrupts: Vec<Interrupt>,
    /// Resume signals the run did not apply, and why.
    pub(crate) rejected: Vec<String>,
}

/// The input of one node activity.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodeInput {
    pub(crate) graph: String,
    pub(crate) state: Value,
    pub(crate) task: StepTask,
}

/// What one node activity returns: the task's result, and the id of the task it ran (so a
/// result is never paired with another task on replay).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct NodeResult {
    /// The id of the task run (absent in results recorded before [`TASK_IDS_PATCH`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) task: Option<String>,
    #[serde(flatten)]
    pub(crate) result: TaskResult,
}

/// A kit graph run as a Temporal workflow: the superstep loop.
#[workflow]
pub(crate) struct KitGraphWorkflow {
    graphs: Arc<Registry>,
    progress: Progress,
    resumes: VecDeque<ResumeSignal>,
}

impl KitGraphWorkflow {
    pub(crate) fn new(graphs: Arc<Registry>) -> Self {
        KitGraphWorkflow {
            graphs,
            progress: Progress::default(),
            resumes: VecDeque::new(),
        }
    }
}

/// A failure that ends the run (not retried: the same history would fail the same way).
fn fail(message: impl std::fmt::Display) -> WorkflowTermination {
    WorkflowTermination::failed_application(
        ApplicationFailure::builder(message.to_string())
            .type_name("KitGraphError".to_string())
            .non_retryable(true)
            .build(),
    )
}

/// Fails the workflow *task*, not the run: Temporal retries it, on any worker of the task
/// queue, until one can go on (a worker that has the graph, of the right build) — what a
/// rolling deploy needs. The run stays open meanwhile; its history shows the failures.
fn retry_task(message: impl std::fmt::Display) -> WorkflowTermination {
    // The SDK fails the workflow task (rather than the run) on a payload conversion error.
    WorkflowTermination::from(PayloadConversionError::EncodingError(Box::new(
        std::io::Error::other(message.to_string()),
    )))
}

/// Runs driver code — the user code that runs inside the workflow: routing functions, edge
/// conditions, reducers, the state's initial values and its serde — a panic failing the run
/// rather than the workflow task (which Temporal would retry forever).
fn unpanicked<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, WorkflowTermination> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let text = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".to_string());
        fail(format!(
            "graph code run inside the workflow (a routing function, an edge condition, a \
             reducer, the state's initial value or its serde) panicked while {what}: {text}"
        ))
    })
}

#[workflow_methods(factory_only)]
impl KitGraphWorkflow {
    #[run(name = "kit-graph")]
    pub(crate) async fn run(
        ctx: &mut WorkflowContext<Self>,
        run: RunInput,
    ) -> WorkflowResult<Value> {
        let graphs = ctx.state(|s| s.graphs.clone());
        let Some(graph) = graphs.get(&run.graph) else {
            // Not the run's failure: a worker of another build may have it (a rolling deploy).
            return Err(retry_task(format!(
                "no graph named `{}` is registered on this worker (it has: {}); the workflow \
                 task is retried until a worker that has it takes it: deploy workers that \
                 register graph `{}` (TemporalWorker::graph) on this task queue",
                run.graph,
                graphs.names(),
                run.graph,
            )));
        };
        let thread_id = ctx.info().workflow_id().to_string();
        let mut options = RunOptions::new().thread_id(thread_id);
        if let Some(limit) = run.recursion_limit {
            options = options.recursion_limit(limit);
        }
        // START's routing, the initial values and the input's reducers run here.
        let started = unpanicked("starting the run", || {
            graph.start(run.input.clone(), &options)
        })?;
        let mut driver = match started {
            Ok(driver) => driver,
            Err(StartError::Mismatch(message)) => return Err(retry_task(message)),
            Err(StartError::Graph(message)) => return Err(fail(message)),
        };
        let activity = run.activity.to_temporal();
        let task_ids = ctx.patched(TASK_IDS_PATCH);
        // Activities scheduled so far: with the task id, a unique and deterministic activity
        // id (a resumed task runs again under its id).
        let mut scheduled: u64 = 0;
        loop {
            let next = unpanicked("planning the next step", || driver.advance())?.map_err(fail)?;
            ctx.state_mut(|s| s.progress.step = driver.step());
            match next {
                DriverNext::Done => return driver.state().map_err(fail),
                DriverNext::Paused(interrupts) => {
                    let ids: Vec<String> = interrupts.iter().map(|i| i.id.clone()).collect();
                    ctx.state_mut(|s| s.progress.interrupts = interrupts);
                    loop {
                        // Cancellation while waiting ends the run as cancelled.
                        ctx.wait_condition(|s| !s.resumes.is_empty()).await?;
                        let Some(signal) = ctx.state_mut(|s| s.resumes.pop_front()) else {
                            continue;
                        };
                        let rejected = if signal.answers.iter().any(|a| !ids.contains(a)) {
                            Some(format!(
                                "a resume for interrupts {:?} arrived while {:?} are pending; \
                                 it was meant for an earlier pause and was dropped",
                                signal.answers, ids
                            ))
                        } else {
                            driver
                                .resume(signal.value.into())
                                .err()
                                .map(|e| e.to_string())
                        };
                        match rejected {
                            Some(reason) => ctx.state_mut(|s| s.progress.rejected.push(reason)),
                            None => break,
                        }
                    }
                    ctx.state_mut(|s| s.progress.interrupts.clear());
                }
                DriverNext::Run(tasks) => {
                    let state =
                        unpanicked("serializing the state", || driver.state())?.map_err(fail)?;
                    let mut calls = Vec::with_capacity(tasks.len());
                    for task in &tasks {
                        let input = NodeInput {
                            graph: run.graph.clone(),
                            state: state.clone(),
                            task: task.clone(),
                        };
                        let size = serde_json::to_vec(&input).map_or(0, |json| json.len());
                        if let Some(message) = too_large(
                            &format!(
                                "the input of node `{}` (task {}), the state",
                                task.node, task.id
                            ),
                            size,
                        ) {
                            return Err(fail(message));
                        }
                        let mut options = activity.clone();
                        if task_ids {
                            // sdk-core checks a replayed activity's id against the history:
                            // a divergence fails the workflow task instead of pairing results
                            // with the wrong tasks.
                            options.activity_id = Some(format!("{}#{scheduled}", task.id));
                        }
                        scheduled += 1;
                        calls.push(ctx.execute_activity(KitActivities::run_node, input, options));
                    }
                    let results = temporalio_sdk::workflows::join_all(calls).await;
                    let mut done = Vec::with_capacity(tasks.len());
                    let mut cancelled = ctx.cancellation_token().is_cancelled();
                    let mut failure = None;
                    for (task, result) in tasks.iter().zip(results) {
                        match result {
                            Ok(NodeResult { task: ran, result }) => {
                                if (task_ids || ran.is_some()) && ran.as_ref() != Some(&task.id) {
                                    return Err(retry_task(format!(
                                        "the history does not match this worker's graph: the \
                                         result recorded for task {} is that of task {}; are \
                                         all workers running the build that started the run?",
                                        task.id,
                                        ran.as_deref().unwrap_or("(none)")
                                    )));
                                }
                                done.push((task.id.clone(), result));
                            }
                            Err(ActivityExecutionError::Cancelled(_)) => cancelled = true,
                            Err(e) => {
                                failure.get_or_insert_with(|| {
                                    format!(
                                        "node `{}` (task {}) could not run: {e}",
                                        task.node, task.id
                                    )
                                });
                            }
                        }
                    }
                    // A cancelled run reports cancelled, even when a node failed meanwhile.
                    if cancelled {
                        return Err(WorkflowTermination::cancelled());
                    }
                    if let Some(failure) = failure {
                        return Err(fail(failure));
                    }
                    unpanicked("applying the step", || driver.complete(done))?.map_err(fail)?;
                }
            }
        }
    }

    /// Answers the run's pending interrupts.
    #[signal(name = "resume")]
    pub(crate) fn resume(&mut self, _ctx: &mut SyncWorkflowContext<Self>, signal: ResumeSignal) {
        self.resumes.push_back(signal);
    }

    /// The run's step, pending interrupts and rejected resumes.
    #[query(name = "progress")]
    pub(crate) fn progress(&self, _ctx: &WorkflowContextView) -> Progress {
        self.progress.clone()
    }
}

/// The activity that runs one node task on a worker.
pub(crate) struct KitActivities {
    pub(crate) graphs: Arc<Registry>,
}

#[activities]
impl KitActivities {
    /// Runs one node task: heartbeats while the node runs, and stops it (its cancel token
    /// fires, its future is dropped) when Temporal cancels the activity.
    #[activity(name = "kit-node")]
    pub(crate) async fn run_node(
        self: Arc<Self>,
        ctx: ActivityContext,
        input: NodeInput,
    ) -> Result<NodeResult, ActivityError> {
        let Some(graph) = self.graphs.get(&input.graph) else {
            // Retryable: another worker (of another build) may have it.
            return Err(retryable(format!(
                "no graph named `{}` is registered on this worker (it has: {}); deploy workers \
                 that register graph `{}` (TemporalWorker::graph) on this task queue",
                input.graph,
                self.graphs.names(),
                input.graph,
            )));
        };
        let cancel = CancelToken::new();
        let options = RunOptions::new()
            .thread_id(ctx.info().workflow_id.clone().unwrap_or_default())
            .cancel_token(cancel.clone());
        let period = ctx
            .info()
            .heartbeat_timeout
            .map_or(Duration::from_secs(10), |t| t / 3)
            .max(Duration::from_millis(100));
        // Heartbeats run in a task of their own, so a node that holds its thread for a while
        // does not starve them (nodes must not block: `spawn_blocking` for blocking work).
        let heartbeat_ctx = ctx.clone();
        let _heartbeats = AbortOnDrop(tokio::spawn(async move {
            loop {
                if let Err(e) = heartbeat_ctx.record_heartbeat(()).await {
                    tracing::warn!(error = %e, "could not record a heartbeat");
                }
                tokio::time::sleep(period).await;
            }
        }));
        // Let the heartbeat task start before the node does: a freshly spawned task waits in
        // this thread's LIFO slot, which other threads cannot steal from, so a node that
        // blocked this thread right away would keep it from ever running.
        tokio::task::yield_now().await;
        // The token fires before the node's future is dropped (select! drops the losing
        // branches before it runs the winner's handler), so the node sees it while it is alive.
        let cancelled = async {
            ctx.cancelled().await;
            cancel.cancel();
        };
        let node = graph.run_task(input.state, &input.task, options);
        let result = tokio::select! {
            biased;
            () = cancelled => return Err(ActivityError::cancelled()),
            result = node => result.map_err(retryable)?,
        };
        let task = input.task;
        let mut out = NodeResult {
            task: Some(task.id.clone()),
            result,
        };
        // Too large a result would be refused by the server, and the activity retried forever.
        let size = serde_json::to_vec(&out).map_or(0, |json| json.len());
        if let Some(message) = too_large(
            &format!("the output of node `{}` (task {})", task.node, task.id),
            size,
        ) {
            out.result = failed(message);
        }
        Ok(out)
    }
}

/// A retryable activity failure: Temporal retries the node (on any worker of the queue).
fn retryable(message: String) -> ActivityError {
    ActivityError::application(
        ApplicationFailure::builder(message)
            .type_name("KitWorkerMismatch".to_string())
            .build(),
    )
}

/// Aborts a spawned task when dropped (the activity ended, or was dropped).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;

    #[test]
    fn a_node_result_carries_its_task_id_and_reads_results_recorded_without_one() {
        let result = NodeResult {
            task: Some("3:draft".into()),
            result: failed("no".into()),
        };
        let json = serde_json::to_value(&result).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"task": "3:draft", "status": "failed", "error": "no"})
        );
        // Recorded before the task-id patch: a bare task result.
        let old: NodeResult =
            serde_json::from_value(serde_json::json!({"status": "done", "output": {}})).unwrap();
        assert_eq!(old.task, None);
        assert!(matches!(old.result, TaskResult::Done { .. }));
    }

    #[test]
    fn the_default_activity_options_give_up_and_inputs_without_them_still_read() {
        let defaults = NodeActivityOptions::default();
        assert_eq!(defaults.max_attempts, 3);
        assert_eq!(defaults.schedule_to_close, Duration::from_secs(3600));
        let mut json = serde_json::to_value(&defaults).unwrap();
        json.as_object_mut().unwrap().remove("schedule_to_close");
        let read: NodeActivityOptions = serde_json::from_value(json).unwrap();
        assert_eq!(read.schedule_to_close, Duration::from_secs(3600));
    }

    #[test]
    fn only_payloads_over_two_megabytes_are_too_large() {
        assert_eq!(too_large("x", PAYLOAD_LIMIT), None);
        let text = too_large("the output of node `a`", PAYLOAD_LIMIT + 1).unwrap();
        assert!(
            text.starts_with("the output of node `a` is 2049 KB"),
            "{text}"
        );
        assert!(text.contains("keep large data in the store"), "{text}");
    }
}
