//! The graphs a worker runs, by name, with their state type erased to JSON at the edges.

use std::collections::HashMap;
use std::sync::Arc;

use futures::future::BoxFuture;
use kit::State;
use kit::graph::{DriverNext, Graph, Resume, RunOptions, StepDriver, StepTask, TaskResult};
use serde_json::Value;

/// The deterministic half of a run (inside the workflow), with JSON at its edges.
pub(crate) trait Driver {
    fn advance(&mut self) -> Result<DriverNext, kit::GraphError>;
    fn complete(&mut self, results: Vec<(String, TaskResult)>) -> Result<(), kit::GraphError>;
    fn resume(&mut self, resume: Resume) -> Result<(), kit::GraphError>;
    fn state(&self) -> Result<Value, String>;
    fn step(&self) -> i64;
}

/// Why a driver could not start.
#[derive(Debug)]
pub(crate) enum StartError {
    /// The input does not fit this worker's build of the graph (its update type): another
    /// worker, of another build, may have the right one (a rolling deploy). Retryable.
    Mismatch(String),
    /// The graph failed to start (its input, the recursion limit, ...): the run fails.
    Graph(String),
}

/// A registered graph, its state type erased.
pub(crate) trait ErasedGraph: Send + Sync {
    /// Starts a driver on a JSON input (the graph's update type).
    fn start(&self, input: Value, opts: &RunOptions) -> Result<Box<dyn Driver>, StartError>;
    /// Runs one task on a JSON state (an activity). `Err`: the state does not fit this
    /// worker's state type (another build of the graph; retryable elsewhere).
    fn run_task<'a>(
        &'a self,
        state: Value,
        task: &'a StepTask,
        opts: RunOptions,
    ) -> BoxFuture<'a, Result<TaskResult, String>>;
}

struct Typed<S: State>(Graph<S>);

impl<S: State> Driver for StepDriver<S> {
    fn advance(&mut self) -> Result<DriverNext, kit::GraphError> {
        StepDriver::advance(self)
    }

    fn complete(&mut self, results: Vec<(String, TaskResult)>) -> Result<(), kit::GraphError> {
        StepDriver::complete(self, results)
    }

    fn resume(&mut self, resume: Resume) -> Result<(), kit::GraphError> {
        StepDriver::resume(self, resume)
    }

    fn state(&self) -> Result<Value, String> {
        serde_json::to_value(StepDriver::state(self))
            .map_err(|e| format!("the state does not serialize to JSON: {e}"))
    }

    fn step(&self) -> i64 {
        StepDriver::step(self)
    }
}

impl<S: State> ErasedGraph for Typed<S> {
    fn start(&self, input: Value, opts: &RunOptions) -> Result<Box<dyn Driver>, StartError> {
        let input: S::Update = serde_json::from_value(input).map_err(|e| {
            StartError::Mismatch(format!(
                "the input does not match the update type of graph `{}` on this worker ({}): \
                 {e}; if the workers are being deployed, deploy workers that register the \
                 graph `{}` of the build that started the run (the workflow task is retried \
                 until one takes it)",
                self.0.name(),
                std::any::type_name::<S::Update>(),
                self.0.name(),
            ))
        })?;
        let driver =
            StepDriver::new(&self.0, input, opts).map_err(|e| StartError::Graph(e.to_string()))?;
        Ok(Box::new(driver))
    }

    fn run_task<'a>(
        &'a self,
        state: Value,
        task: &'a StepTask,
        opts: RunOptions,
    ) -> BoxFuture<'a, Result<TaskResult, String>> {
        Box::pin(async move {
            match serde_json::from_value::<S>(state) {
                Ok(state) => Ok(self.0.run_task(state, task, &opts).await),
                Err(e) => Err(format!(
                    "the state sent to node `{}` does not match the state type of graph `{}` \
                     on this worker ({}): {e}; deploy workers that register the graph `{}` of \
                     the build that started the run (the node is retried, on any worker)",
                    task.node,
                    self.0.name(),
                    std::any::type_name::<S>(),
                    self.0.name(),
                )),
            }
        })
    }
}

/// A failed task result.
pub(crate) fn failed(error: String) -> TaskResult {
    TaskResult::Failed { error }
}

/// The graphs of a worker, by name.
#[derive(Default, Clone)]
pub(crate) struct Registry {
    graphs: HashMap<String, Arc<dyn ErasedGraph>>,
}

impl Registry {
    pub(crate) fn insert<S: State>(&mut self, name: String, graph: Graph<S>) -> bool {
        if self.graphs.contains_key(&name) {
            return false;
        }
        self.graphs.insert(name, Arc::new(Typed(graph)));
        true
    }

    pub(crate) fn get(&self, name: &str) -> Option<Arc<dyn ErasedGraph>> {
        self.graphs.get(name).cloned()
    }

    pub(crate) fn names(&self) -> String {
        let mut names: Vec<&str> = self.graphs.keys().map(String::as_str).collect();
        names.sort_unstable();
        names.join(", ")
    }
}
