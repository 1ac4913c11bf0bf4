//! The worker: polls a task queue and runs the workflow (the loop) and the node activities of
//! the graphs registered on it.

use std::sync::Arc;

use kit::State;
use kit::graph::Graph;
use temporalio_sdk::{Runtime, Worker, WorkerOptions};

use crate::connection::TemporalConnection;
use crate::error::TemporalError;
use crate::registry::Registry;
use crate::workflow::{KitActivities, KitGraphWorkflow};

/// A Temporal worker for kit graphs: register graphs, then [`run`](Self::run) it.
///
/// Every worker polling one task queue must register the same graphs (the same code): any of
/// them may replay a run's workflow or run one of its nodes. A run survives the death of any
/// worker process — another worker takes its workflow and its node activities over.
///
/// ```no_run
/// # async fn demo(graph: kit::Graph<kit::state::DynState>) -> Result<(), kit_temporal::TemporalError> {
/// use kit_temporal::{TemporalConnection, TemporalWorker};
///
/// let connection = TemporalConnection::connect("127.0.0.1:7233", "default").await?;
/// TemporalWorker::new(&connection, "kit-graphs")
///     .graph(graph)?
///     .run()
///     .await?;
/// # Ok(()) }
/// ```
pub struct TemporalWorker {
    connection: TemporalConnection,
    task_queue: String,
    graphs: Registry,
    max_cached_workflows: usize,
}

impl std::fmt::Debug for TemporalWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TemporalWorker")
            .field("task_queue", &self.task_queue)
            .field("graphs", &self.graphs.names())
            .finish()
    }
}

impl TemporalWorker {
    /// A worker for `task_queue` (the queue [`TemporalRuns`](crate::TemporalRuns) starts runs
    /// on), with no graph yet.
    pub fn new(connection: &TemporalConnection, task_queue: impl Into<String>) -> Self {
        TemporalWorker {
            connection: connection.clone(),
            task_queue: task_queue.into(),
            graphs: Registry::default(),
            max_cached_workflows: 1000,
        }
    }

    /// Registers a graph under its name ([`Graph::name`]). An agent's graph registers the same
    /// way (`agent.graph().clone()`): its model and tools nodes are then activities.
    pub fn graph<S: State>(self, graph: Graph<S>) -> Result<Self, TemporalError> {
        let name = graph.name().to_string();
        self.graph_named(name, graph)
    }

    /// Registers a graph under another name.
    pub fn graph_named<S: State>(
        mut self,
        name: impl Into<String>,
        graph: Graph<S>,
    ) -> Result<Self, TemporalError> {
        let name = name.into();
        if !self.graphs.insert(name.clone(), graph) {
            return Err(TemporalError::DuplicateGraph(name));
        }
        Ok(self)
    }

    /// How many runs' workflows the worker keeps in memory between their workflow tasks
    /// (default 1000, the SDK's). An evicted run is rebuilt by replaying its history; 0 replays
    /// every run's history on every workflow task — slow, but a good test that a graph's code
    /// inside the workflow is deterministic.
    #[must_use]
    pub fn max_cached_workflows(mut self, runs: usize) -> Self {
        self.max_cached_workflows = runs;
        self
    }

    /// The worker's task queue.
    pub fn task_queue(&self) -> &str {
        &self.task_queue
    }

    /// Polls the task queue until the worker fails: runs the workflows and node activities
    /// given to it. Needs a tokio runtime; the future is not `Send` (the Temporal SDK's worker
    /// is not), so `.await` it where it is (in `main`, say) or use [`spawn`](Self::spawn).
    pub async fn run(self) -> Result<(), TemporalError> {
        let task_queue = self.task_queue.clone();
        let (_runtime, mut worker) = self.build()?;
        worker.run().await.map_err(|e| TemporalError::Worker {
            task_queue,
            message: e.to_string(),
        })
    }

    /// Runs the worker on a thread of its own (with its own tokio runtime) until
    /// [`WorkerHandle::shutdown`] or until the handle is dropped.
    pub fn spawn(self) -> Result<WorkerHandle, TemporalError> {
        let task_queue = self.task_queue.clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let name = format!("kit-temporal worker {task_queue}");
        let thread_queue = task_queue.clone();
        let thread = std::thread::Builder::new()
            .name(name)
            .spawn(move || -> Result<(), TemporalError> {
                let worker_error = |message: String| TemporalError::Worker {
                    task_queue: thread_queue.clone(),
                    message,
                };
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| worker_error(format!("could not start a tokio runtime: {e}")))?;
                runtime.block_on(async move {
                    let (_runtime, mut worker) = self.build()?;
                    let shutdown = worker.shutdown_handle();
                    let run = worker.run();
                    tokio::pin!(run);
                    let result = tokio::select! {
                        result = &mut run => result,
                        _ = stopped => {
                            shutdown();
                            run.await
                        }
                    };
                    result.map_err(|e| worker_error(e.to_string()))
                })
            })
            .map_err(|e| TemporalError::Worker {
                task_queue: task_queue.clone(),
                message: format!("could not start the worker thread: {e}"),
            })?;
        Ok(WorkerHandle {
            task_queue,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The SDK runtime and worker, the graphs registered.
    fn build(self) -> Result<(Runtime, Worker), TemporalError> {
        let task_queue = self.task_queue.clone();
        let worker_error = |message: String| TemporalError::Worker {
            task_queue: task_queue.clone(),
            message,
        };
        let runtime = Runtime::from_current_tokio(Default::default())
            .map_err(|e| worker_error(format!("no runtime: {e}")))?;
        let graphs = Arc::new(self.graphs);
        let factory_graphs = graphs.clone();
        let options = WorkerOptions::new(self.task_queue.clone())
            .register_workflow_with_factory::<KitGraphWorkflow, _>(move || {
                KitGraphWorkflow::new(factory_graphs.clone())
            })
            .map_err(|e| worker_error(format!("registering the workflow: {e}")))?
            .register_activities(KitActivities { graphs })
            .max_cached_workflows(self.max_cached_workflows)
            .build();
        let worker = Worker::new(&runtime, self.connection.client().clone(), options)
            .map_err(|e| worker_error(format!("creating the worker: {e}")))?;
        Ok((runtime, worker))
    }
}

/// A worker running on its own thread ([`TemporalWorker::spawn`]). Dropping it asks the worker
/// to stop without waiting for it.
#[derive(Debug)]
pub struct WorkerHandle {
    task_queue: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), TemporalError>>>,
}

impl WorkerHandle {
    /// The worker's task queue.
    pub fn task_queue(&self) -> &str {
        &self.task_queue
    }

    /// True once the worker stopped (it failed, or was asked to stop).
    pub fn is_finished(&self) -> bool {
        self.thread.as_ref().is_none_or(|t| t.is_finished())
    }

    /// Stops the worker gracefully (running nodes finish first) and waits for it; its error if
    /// it failed.
    pub async fn shutdown(mut self) -> Result<(), TemporalError> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let task_queue = self.task_queue.clone();
        let joined = tokio::task::spawn_blocking(move || thread.join()).await;
        match joined {
            Ok(Ok(result)) => result,
            Ok(Err(_)) | Err(_) => Err(TemporalError::Worker {
                task_queue,
                message: "the worker thread panicked".to_string(),
            }),
        }
    }
}

impl Drop for WorkerHandle {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
