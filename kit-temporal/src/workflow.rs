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
use temporalio_common::RetryPolicy;
use temporalio_common::error::ApplicationFailure;
use temporalio_macros::{activities, workflow, workflow_methods};
use temporalio_sdk::activities::{ActivityContext, ActivityError};
use temporalio_sdk::{
    ActivityCancellationType, ActivityExecutionError, ActivityOptions, SyncWorkflowContext,
    WorkflowContext, WorkflowContextView, WorkflowResult, WorkflowTermination,
};

use crate::registry::{Registry, failed};

/// The workflow type name kit runs graphs under.
pub const WORKFLOW_TYPE: &str = "kit-graph";
/// The activity type name of one node task.
pub const NODE_ACTIVITY: &str = "kit-node";

/// How node activities are scheduled: their timeouts and Temporal's retries (a worker that
/// dies, a timeout). Part of a run's input, so every worker replays the same schedule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct NodeActivityOptions {
    /// How long one attempt of a node may run (Temporal's start-to-close timeout).
    pub start_to_close: Duration,
    /// How long a node may go without a heartbeat before Temporal counts its worker as dead
    /// and retries it elsewhere. The activity heartbeats three times per period while the node
    /// runs; a worker's death is noticed within this time.
    pub heartbeat: Duration,
    /// Attempts of one node before the run fails (0: unlimited, Temporal's default). Node
    /// *errors* are not retried by Temporal: the node's own kit `RetryPolicy` retries those
    /// inside the attempt; these attempts cover dead workers and timeouts.
    pub max_attempts: u32,
    /// The first pause before a retry (doubled each time, at most a minute).
    pub initial_retry_interval: Duration,
}

impl Default for NodeActivityOptions {
    fn default() -> Self {
        NodeActivityOptions {
            start_to_close: Duration::from_secs(600),
            heartbeat: Duration::from_secs(30),
            max_attempts: 0,
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
        ActivityOptions::with_start_to_close_timeout(self.start_to_close)
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

/// Runs driver code (kit's routing functions and edge conditions among it), a panic failing
/// the run rather than the workflow task (which Temporal would retry forever).
fn unpanicked<T>(what: &str, f: impl FnOnce() -> T) -> Result<T, WorkflowTermination> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|panic| {
        let text = panic
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic payload".to_string());
        fail(format!(
            "a routing function or edge condition panicked while {what}: {text}"
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
            return Err(fail(format!(
                "no graph named `{}` is registered on the workers of this task queue (they \
                 have: {}); register it with TemporalWorker::graph",
                run.graph,
                graphs.names()
            )));
        };
        let thread_id = ctx.info().workflow_id().to_string();
        let mut options = RunOptions::new().thread_id(thread_id);
        if let Some(limit) = run.recursion_limit {
            options = options.recursion_limit(limit);
        }
        let mut driver = graph.start(run.input.clone(), &options).map_err(fail)?;
        let activity = run.activity.to_temporal();
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
                    let state = driver.state().map_err(fail)?;
                    let calls = tasks.iter().map(|task| {
                        ctx.execute_activity(
                            KitActivities::run_node,
                            NodeInput {
                                graph: run.graph.clone(),
                                state: state.clone(),
                                task: task.clone(),
                            },
                            activity.clone(),
                        )
                    });
                    let results = temporalio_sdk::workflows::join_all(calls).await;
                    let mut done = Vec::with_capacity(tasks.len());
                    let mut cancelled = false;
                    for (task, result) in tasks.iter().zip(results) {
                        match result {
                            Ok(result) => done.push((task.id.clone(), result)),
                            Err(ActivityExecutionError::Cancelled(_)) => cancelled = true,
                            Err(e) => {
                                return Err(fail(format!(
                                    "node `{}` (task {}) could not run: {e}",
                                    task.node, task.id
                                )));
                            }
                        }
                    }
                    if cancelled {
                        return Err(WorkflowTermination::cancelled());
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
    ) -> Result<TaskResult, ActivityError> {
        let Some(graph) = self.graphs.get(&input.graph) else {
            return Ok(failed(format!(
                "no graph named `{}` is registered on this worker (it has: {}); every worker \
                 of a task queue must register the same graphs",
                input.graph,
                self.graphs.names()
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
        let heartbeats = async {
            loop {
                if let Err(e) = ctx.record_heartbeat(()).await {
                    tracing::warn!(error = %e, "could not record a heartbeat");
                }
                tokio::time::sleep(period).await;
            }
        };
        // The token fires before the node's future is dropped (select! drops the losing
        // branches before it runs the winner's handler), so the node sees it while it is alive.
        let cancelled = async {
            ctx.cancelled().await;
            cancel.cancel();
        };
        let node = graph.run_task(input.state, &input.task, options);
        tokio::select! {
            biased;
            () = cancelled => Err(ActivityError::cancelled()),
            result = node => Ok(result),
            () = heartbeats => Err(ActivityError::cancelled()),
        }
    }
}
