//! The client side: start runs, read their interrupts, resume, cancel, wait for results.

use kit::State;
use kit::graph::{Graph, Interrupt, Resume};
use serde::Serialize;
use serde_json::Value;
use temporalio_client::errors::{
    WorkflowGetResultError, WorkflowInteractionError, WorkflowQueryError, WorkflowStartError,
};
use temporalio_client::{
    WorkflowCancelOptions, WorkflowDescribeOptions, WorkflowExecutionStatus,
    WorkflowFetchHistoryOptions, WorkflowGetResultOptions, WorkflowQueryOptions,
    WorkflowSignalOptions, WorkflowStartOptions,
};

use crate::connection::TemporalConnection;
use crate::error::TemporalError;
use crate::workflow::{
    KitGraphWorkflow, NODE_ACTIVITY, NodeActivityOptions, NodeInput, Progress, ResumeSignal,
    ResumeValue, RunInput,
};

/// Runs of kit graphs on Temporal, on one task queue: start, inspect, resume, cancel, and wait
/// for results. A run's id is its Temporal workflow id (and the thread id its nodes see).
///
/// ```no_run
/// # #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
/// # struct S { answer: String }
/// # async fn demo(graph: kit::Graph<S>) -> Result<(), kit_temporal::TemporalError> {
/// use kit_temporal::{TemporalConnection, TemporalRuns};
///
/// let connection = TemporalConnection::connect("127.0.0.1:7233", "default").await?;
/// let runs = TemporalRuns::new(&connection, "kit-graphs");
/// runs.start(&graph, "order-42", SUpdate::new()).await?;
/// if !runs.pending_interrupts("order-42").await?.is_empty() {
///     runs.resume("order-42", serde_json::json!("approve")).await?;
/// }
/// let state: S = runs.result("order-42").await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct TemporalRuns {
    connection: TemporalConnection,
    task_queue: String,
    activity: NodeActivityOptions,
    recursion_limit: Option<usize>,
}

impl TemporalRuns {
    /// Runs on `task_queue` (where [`TemporalWorker`](crate::TemporalWorker)s poll).
    pub fn new(connection: &TemporalConnection, task_queue: impl Into<String>) -> Self {
        TemporalRuns {
            connection: connection.clone(),
            task_queue: task_queue.into(),
            activity: NodeActivityOptions::default(),
            recursion_limit: None,
        }
    }

    /// How the node activities of runs started from now on are scheduled (timeouts, retries).
    #[must_use]
    pub fn node_activity(mut self, options: NodeActivityOptions) -> Self {
        self.activity = options;
        self
    }

    /// The recursion limit of runs started from now on (else the graph's, else kit's default).
    #[must_use]
    pub fn recursion_limit(mut self, limit: usize) -> Self {
        self.recursion_limit = Some(limit);
        self
    }

    /// Starts a run of `graph` (registered under its name on the workers) on `input`, with the
    /// run id `id`. Returns once the server recorded it; the workers run it.
    pub async fn start<S: State>(
        &self,
        graph: &Graph<S>,
        id: &str,
        input: S::Update,
    ) -> Result<(), TemporalError> {
        self.start_named(graph.name(), id, &input).await
    }

    /// Starts a run of the graph registered as `graph`, its input given as any value that
    /// serializes to the graph's update type.
    pub async fn start_named(
        &self,
        graph: &str,
        id: &str,
        input: &impl Serialize,
    ) -> Result<(), TemporalError> {
        let input = serde_json::to_value(input).map_err(|e| TemporalError::Serde {
            what: "the input",
            type_name: std::any::type_name_of_val(input),
            message: e.to_string(),
        })?;
        let run = RunInput {
            graph: graph.to_string(),
            input,
            recursion_limit: self.recursion_limit,
            activity: self.activity.clone(),
        };
        let options = WorkflowStartOptions::new(self.task_queue.clone(), id.to_string()).build();
        match self
            .connection
            .client()
            .start_workflow(KitGraphWorkflow::run, run, options)
            .await
        {
            Ok(_) => Ok(()),
            Err(WorkflowStartError::AlreadyStarted { .. }) => {
                Err(TemporalError::AlreadyStarted { id: id.to_string() })
            }
            Err(e) => Err(self.rpc("start", id, e)),
        }
    }

    /// The interrupts run `id` waits for (empty when it is running or finished).
    pub async fn pending_interrupts(&self, id: &str) -> Result<Vec<Interrupt>, TemporalError> {
        // A closed run waits for nothing: no need for a worker to replay it for a query.
        if !self.is_open(id).await? {
            return Ok(Vec::new());
        }
        Ok(self.progress(id).await?.interrupts)
    }

    /// Whether run `id` is still open (running or paused), from the server alone.
    async fn is_open(&self, id: &str) -> Result<bool, TemporalError> {
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        let description = handle
            .describe(WorkflowDescribeOptions::default())
            .await
            .map_err(|e| self.interaction("describe", id, e))?;
        Ok(matches!(
            description.status(),
            WorkflowExecutionStatus::Running | WorkflowExecutionStatus::Unspecified
        ))
    }

    /// The superstep run `id` is at.
    pub async fn step(&self, id: &str) -> Result<i64, TemporalError> {
        Ok(self.progress(id).await?.step)
    }

    /// Resume signals run `id` received and did not apply (a value meant for an earlier pause,
    /// a value that fits none of the pending interrupts), each with the reason.
    pub async fn rejected_resumes(&self, id: &str) -> Result<Vec<String>, TemporalError> {
        Ok(self.progress(id).await?.rejected)
    }

    /// Answers run `id`'s pending interrupts (a `Resume`, or any JSON value for the single
    /// pending one): sends the `resume` signal, after checking the value fits what is pending.
    pub async fn resume(&self, id: &str, resume: impl Into<Resume>) -> Result<(), TemporalError> {
        let resume = resume.into();
        let pending = self.pending_interrupts(id).await?;
        if pending.is_empty() {
            return Err(TemporalError::NothingPending { id: id.to_string() });
        }
        let ids: Vec<String> = pending.iter().map(|i| i.id.clone()).collect();
        match &resume {
            Resume::Value(_) if pending.len() > 1 => {
                return Err(TemporalError::BadResume {
                    id: id.to_string(),
                    message: format!(
                        "{} interrupts are pending ({}); resume with values keyed by interrupt \
                         id (Resume::ByIds)",
                        pending.len(),
                        ids.join(", ")
                    ),
                });
            }
            Resume::ByIds(values) if !values.keys().any(|k| ids.contains(k)) => {
                return Err(TemporalError::BadResume {
                    id: id.to_string(),
                    message: format!(
                        "none of the given ids matches a pending interrupt; pending: {}",
                        ids.join(", ")
                    ),
                });
            }
            _ => {}
        }
        let signal = ResumeSignal {
            answers: ids,
            value: ResumeValue::from(resume),
        };
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        handle
            .signal(
                KitGraphWorkflow::resume,
                signal,
                WorkflowSignalOptions::default(),
            )
            .await
            .map_err(|e| self.interaction("signal", id, e))
    }

    /// Cancels run `id` (Temporal's cancellation): a running node's cancel token fires and its
    /// future is dropped; the run ends cancelled ([`TemporalError::Cancelled`] from
    /// [`result`](Self::result)).
    pub async fn cancel(&self, id: &str) -> Result<(), TemporalError> {
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        handle
            .cancel(WorkflowCancelOptions::default())
            .await
            .map_err(|e| self.interaction("cancel", id, e))
    }

    /// Waits for run `id` to finish and returns its final state.
    pub async fn result<S: State>(&self, id: &str) -> Result<S, TemporalError> {
        let value = self.result_json(id).await?;
        serde_json::from_value(value).map_err(|e| TemporalError::Serde {
            what: "the final state",
            type_name: std::any::type_name::<S>(),
            message: e.to_string(),
        })
    }

    /// Waits for run `id` to finish and returns its final state as JSON.
    pub async fn result_json(&self, id: &str) -> Result<Value, TemporalError> {
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        match handle.get_result(WorkflowGetResultOptions::default()).await {
            Ok(value) => Ok(value),
            Err(WorkflowGetResultError::Failed(failure)) => Err(TemporalError::RunFailed {
                id: id.to_string(),
                message: failure.to_string(),
            }),
            Err(WorkflowGetResultError::Cancelled { .. }) => {
                Err(TemporalError::Cancelled { id: id.to_string() })
            }
            Err(WorkflowGetResultError::NotFound(_)) => Err(self.unknown(id)),
            Err(
                e @ (WorkflowGetResultError::Terminated { .. }
                | WorkflowGetResultError::TimedOut
                | WorkflowGetResultError::ContinuedAsNew),
            ) => Err(TemporalError::Ended {
                id: id.to_string(),
                message: e.to_string(),
            }),
            Err(e) => Err(self.rpc("result", id, e)),
        }
    }

    /// The node tasks run `id` scheduled as activities so far, in order (from its Temporal
    /// history): for an agent, its `model` and `tools` nodes, one activity per model call and
    /// per round of tool calls. A retried activity (a dead worker) counts once.
    pub async fn node_activities(&self, id: &str) -> Result<Vec<String>, TemporalError> {
        use temporalio_common::protos::temporal::api::history::v1::history_event::Attributes;
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        let events = handle
            .fetch_history(WorkflowFetchHistoryOptions::default())
            .into_events()
            .await
            .map_err(|e| self.interaction("history", id, e))?;
        let mut nodes = Vec::new();
        for event in events {
            let Some(Attributes::ActivityTaskScheduledEventAttributes(scheduled)) =
                event.attributes
            else {
                continue;
            };
            if scheduled.activity_type.as_ref().map(|t| t.name.as_str()) != Some(NODE_ACTIVITY) {
                continue;
            }
            let node = scheduled
                .input
                .and_then(|input| input.payloads.into_iter().next())
                .and_then(|payload| serde_json::from_slice::<NodeInput>(&payload.data).ok())
                .map_or_else(|| "?".to_string(), |input| input.task.node);
            nodes.push(node);
        }
        Ok(nodes)
    }

    async fn progress(&self, id: &str) -> Result<Progress, TemporalError> {
        let handle = self
            .connection
            .client()
            .get_workflow_handle::<KitGraphWorkflow>(id);
        match handle
            .query(
                KitGraphWorkflow::progress,
                (),
                WorkflowQueryOptions::default(),
            )
            .await
        {
            Ok(progress) => Ok(progress),
            Err(WorkflowQueryError::NotFound(_)) => Err(self.unknown(id)),
            Err(e) => Err(self.rpc("query", id, e)),
        }
    }

    fn unknown(&self, id: &str) -> TemporalError {
        TemporalError::UnknownRun {
            id: id.to_string(),
            namespace: self.connection.namespace().to_string(),
        }
    }

    fn interaction(
        &self,
        operation: &'static str,
        id: &str,
        e: WorkflowInteractionError,
    ) -> TemporalError {
        match e {
            WorkflowInteractionError::NotFound(_) => self.unknown(id),
            e => self.rpc(operation, id, e),
        }
    }

    fn rpc(&self, operation: &'static str, id: &str, e: impl std::fmt::Display) -> TemporalError {
        TemporalError::Rpc {
            operation,
            id: id.to_string(),
            message: e.to_string(),
        }
    }
}
