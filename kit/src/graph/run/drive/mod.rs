//! Driving a graph one superstep at a time from outside: the step loop of [`Exec`] with the
//! running of the nodes left to the caller (a durable-execution engine that runs each node as a
//! remote task, say, and replays the loop from its own history).
//!
//! The loop is the executor's own: the same input handling, reducers, routing, joins, `Send`s,
//! static interrupts, resume mapping and recursion limit. Only two things differ: nothing is
//! checkpointed (the engine keeps the history), and the nodes do not run here: the driver hands
//! out [`StepTask`]s, the caller runs each with [`Graph::run_task`] wherever it likes, and hands
//! the [`TaskResult`]s back.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{Exec, TaskSpec};
use crate::graph::Graph;
use crate::graph::error::GraphError;
use crate::graph::interrupt::{Interrupt, Resume};
use crate::graph::node::{
    NodeContext, NodeErrorKind, NodeOutput, RunContext, SendArg, TaskContext, task_id,
};
use crate::graph::options::{DEFAULT_RECURSION_LIMIT, RunOptions};
use crate::ids;
use crate::state::State;

/// One task of a superstep, as [`StepDriver::advance`] hands it out: everything needed to run the
/// node with [`Graph::run_task`], in another process if need be (it is plain serde data).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct StepTask {
    /// The task's id (`<step>:<node>`, or `<step>:<node>:<send index>`), stable across a resume.
    pub id: String,
    /// The node to run.
    pub node: String,
    /// The superstep.
    pub step: i64,
    /// The index among the step's `Send`s, for a task started by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub send_index: Option<usize>,
    /// The `Send` input, for a task started by one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arg: Option<Value>,
    /// Resume values for the task's interrupts, by interrupt id (a resumed step).
    #[serde(default, skip_serializing_if = "HashMap::is_empty")]
    pub resume: HashMap<String, Value>,
}

/// What running a [`StepTask`] gave: plain serde data, so it can come back from another
/// process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
#[non_exhaustive]
pub enum TaskResult {
    /// The node finished; its output (updates and gotos) in the form pending writes store.
    Done {
        /// The encoded output.
        output: Value,
    },
    /// The node paused for outside input.
    Interrupted {
        /// What it waits for.
        interrupts: Vec<Interrupt>,
    },
    /// The node failed (after its retry policy, if it has one, gave up).
    Failed {
        /// Why.
        error: String,
    },
}

/// What a [`StepDriver`] wants next.
#[derive(Debug, Clone, PartialEq)]
pub enum DriverNext {
    /// Run these tasks (concurrently, in any order), then call [`StepDriver::complete`] with
    /// their results. Tasks of a resumed step that already finished are not in the list: their
    /// outputs are kept.
    Run(Vec<StepTask>),
    /// The run is paused: answer with [`StepDriver::resume`].
    Paused(Vec<Interrupt>),
    /// The run finished: read [`StepDriver::state`].
    Done,
}

/// Runs a graph one superstep at a time with the nodes run by the caller: the deterministic
/// half of a run, for an outside engine (kit-temporal's workflow is one).
///
/// The driver is pure and synchronous — no I/O, no clock, no randomness in the loop itself —
/// so an engine that replays it from a history gets the same steps back, as long as the
/// graph's routing functions and conditions are deterministic too (they are plain functions of
/// the state). It keeps no checkpoints: the engine's history is the durability.
///
/// ```
/// use kit::graph::{DriverNext, GraphBuilder, RunOptions, StepDriver, TaskResult};
/// use kit::{END, START};
///
/// #[derive(kit::State, Clone, Default, serde::Serialize, serde::Deserialize)]
/// struct S { #[state(reducer = kit::reducers::append)] log: Vec<String> }
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
/// let graph = GraphBuilder::<S>::new("two")
///     .node("a", |_s, _ctx| async { SUpdate::new().log(vec!["a".into()]) })
///     .node("b", |_s, _ctx| async { SUpdate::new().log(vec!["b".into()]) })
///     .edge(START, "a")
///     .edge("a", "b")
///     .edge("b", END)
///     .compile()?;
/// let opts = RunOptions::new();
/// let mut driver = StepDriver::new(&graph, SUpdate::new(), &opts)?;
/// while let DriverNext::Run(tasks) = driver.advance()? {
///     let mut results = Vec::new();
///     for task in tasks {
///         // Anywhere: another task, another process, an activity of a workflow engine.
///         let result = graph.run_task(driver.state().clone(), &task, &opts).await;
///         results.push((task.id, result));
///     }
///     driver.complete(results)?;
/// }
/// assert_eq!(driver.state().log, ["a", "b"]);
/// # Ok(()) }
/// ```
pub struct StepDriver<S: State> {
    exec: Exec<S>,
    /// The tasks of the step handed out and not completed yet.
    running: Option<Vec<TaskSpec>>,
    /// The interrupts the run waits for, when it is paused.
    paused: Option<Vec<Interrupt>>,
    /// A resumed run does not pause again before the step it paused before.
    skip_before: bool,
    steps_run: usize,
    limit: usize,
    /// The error a step failed with: the run is over, and every later call returns it again
    /// (the state is the one before the failed step, not a result).
    failed: Option<Failure>,
}

/// What [`StepDriver::complete`] failed with, kept to be returned again.
#[derive(Debug, Clone)]
enum Failure {
    Node {
        node: String,
        step: i64,
        error: String,
    },
    Other(String),
}

impl Failure {
    fn of(error: &GraphError) -> Self {
        match error {
            GraphError::NodeFailed { node, step, source } => Failure::Node {
                node: node.clone(),
                step: *step,
                error: source.to_string(),
            },
            other => Failure::Other(other.to_string()),
        }
    }

    fn error(&self) -> GraphError {
        match self {
            Failure::Node { node, step, error } => GraphError::NodeFailed {
                node: node.clone(),
                step: *step,
                source: error.clone().into(),
            },
            Failure::Other(text) => {
                GraphError::Resume(format!("the run failed and cannot go on: {text}"))
            }
        }
    }
}

impl<S: State> std::fmt::Debug for StepDriver<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StepDriver")
            .field("graph", &self.exec.inner().name)
            .field("step", &self.exec.step)
            .field("paused", &self.paused)
            .finish()
    }
}

/// Completes a future that never waits (the executor's code paths without a checkpointer and
/// without an event stream); an error if it would.
fn ready<T>(fut: impl std::future::Future<Output = T>) -> Result<T, GraphError> {
    fut.now_or_never().ok_or_else(|| {
        GraphError::Resume(
            "the step driver hit a step that waits for I/O; run it without a checkpointer \
             and without an event stream"
                .to_string(),
        )
    })
}

impl<S: State> StepDriver<S> {
    /// Starts a run of `graph` on `input`: takes the input (step -1) and plans the first step.
    ///
    /// The options give the recursion limit, the thread id, the namespace and the store the
    /// nodes see; their checkpointer, checkpoint id and event sink are not used (the graph's
    /// default checkpointer neither).
    pub fn new(graph: &Graph<S>, input: S::Update, opts: &RunOptions) -> Result<Self, GraphError> {
        let detached = Graph {
            inner: graph.inner.clone(),
            checkpointer: None,
            cache: graph.cache.clone(),
            store: graph.store.clone(),
        };
        let mut opts = opts.clone();
        opts.checkpointer = None;
        opts.checkpoint_id = None;
        opts.events = None;
        opts.cancel = None;
        // No lease either: the engine decides which run owns a thread.
        opts.multitask = None;
        let limit = opts
            .recursion_limit
            .or(graph.inner.recursion_limit)
            .unwrap_or(DEFAULT_RECURSION_LIMIT);
        let mut exec = ready(Exec::start(&detached, &opts))??;
        exec.take_input(input)?;
        ready(exec.save(crate::checkpoint::CheckpointSource::Input))??;
        Ok(StepDriver {
            exec,
            running: None,
            paused: None,
            skip_before: false,
            steps_run: 0,
            limit,
            failed: None,
        })
    }

    /// The current state (after the last completed step).
    pub fn state(&self) -> &S {
        &self.exec.state
    }

    /// The last superstep started (-1 after the input).
    pub fn step(&self) -> i64 {
        self.exec.step
    }

    /// The interrupts the run waits for (empty when it is not paused).
    pub fn pending_interrupts(&self) -> &[Interrupt] {
        self.paused.as_deref().unwrap_or_default()
    }

    /// True when the run is paused.
    pub fn is_paused(&self) -> bool {
        self.paused.is_some()
    }

    /// Starts the next superstep and returns its tasks, or says the run is paused or done.
    ///
    /// Pauses before nodes marked `interrupt_before`; fails with
    /// [`GraphError::RecursionLimit`] past the recursion limit (counted from the start or the
    /// last resume, as an invocation counts it). After a step failed
    /// ([`complete`](Self::complete) returned an error) it returns that error again: the run is
    /// over, never [`DriverNext::Done`] with the state before the failed step.
    pub fn advance(&mut self) -> Result<DriverNext, GraphError> {
        if let Some(failure) = &self.failed {
            return Err(failure.error());
        }
        if self.running.is_some() {
            return Err(GraphError::Resume(
                "a step is running: complete it (StepDriver::complete) before asking for the next"
                    .to_string(),
            ));
        }
        if let Some(interrupts) = &self.paused {
            return Ok(DriverNext::Paused(interrupts.clone()));
        }
        if self.exec.next.is_empty() {
            return Ok(DriverNext::Done);
        }
        if !self.skip_before {
            let hits = self.exec.static_hits_before();
            if !hits.is_empty() {
                return Ok(DriverNext::Paused(self.pause_static(&hits, "before")));
            }
        }
        self.skip_before = false;
        self.steps_run += 1;
        if self.steps_run > self.limit {
            return Err(GraphError::RecursionLimit { limit: self.limit });
        }
        self.exec.step += 1;
        let tasks = std::mem::take(&mut self.exec.next);
        let step = self.exec.step;
        let mut out = Vec::with_capacity(tasks.len());
        for task in &tasks {
            let node = &self.exec.inner().nodes[task.node];
            let id = task_id(step, &node.name, task.send_index);
            let stored = self.exec.pending.get(&id);
            if stored.is_some_and(|p| p.output.is_some()) {
                continue;
            }
            out.push(StepTask {
                resume: stored.map(|p| p.resume.clone()).unwrap_or_default(),
                id,
                node: node.name.to_string(),
                step,
                send_index: task.send_index,
                arg: task.arg.as_ref().map(SendArg::to_json),
            });
        }
        self.running = Some(tasks);
        Ok(DriverNext::Run(out))
    }

    /// Ends the running step with its tasks' results, by task id: applies the updates through
    /// the reducers in task order (never completion order) and routes — or, when a task
    /// paused, keeps the others' outputs and pauses (a resume re-runs only the paused tasks).
    ///
    /// A failed task (or a missing result) fails the run with [`GraphError::NodeFailed`]. A
    /// failed run stays failed: every later call returns the error again.
    pub fn complete(
        &mut self,
        results: impl IntoIterator<Item = (String, TaskResult)>,
    ) -> Result<(), GraphError> {
        if let Some(failure) = &self.failed {
            return Err(failure.error());
        }
        let Some(tasks) = self.running.take() else {
            // A misuse, not a failure of the run.
            return Err(GraphError::Resume(
                "no step is running: call StepDriver::advance first".to_string(),
            ));
        };
        let result = self.complete_step(tasks, results);
        if let Err(e) = &result {
            self.failed = Some(Failure::of(e));
        }
        result
    }

    fn complete_step(
        &mut self,
        tasks: Vec<TaskSpec>,
        results: impl IntoIterator<Item = (String, TaskResult)>,
    ) -> Result<(), GraphError> {
        let mut results: HashMap<String, TaskResult> = results.into_iter().collect();
        let step = self.exec.step;
        let mut outputs: Vec<NodeOutput<S>> = Vec::with_capacity(tasks.len());
        let mut interrupts: Vec<(usize, Vec<Interrupt>)> = Vec::new();
        let mut failure: Option<(usize, String)> = None;
        for (i, task) in tasks.iter().enumerate() {
            let node = &self.exec.inner().nodes[task.node];
            let id = task_id(step, &node.name, task.send_index);
            let stored = self.exec.pending.get(&id).and_then(|p| p.output.clone());
            let result = match stored {
                Some(output) => TaskResult::Done { output },
                None => results.remove(&id).unwrap_or_else(|| TaskResult::Failed {
                    error: format!("no result was given for task `{id}`"),
                }),
            };
            match result {
                TaskResult::Done { output } => match super::codec::decode_output::<S>(output) {
                    Ok(out) => outputs.push(out),
                    Err(e) => {
                        outputs.push(NodeOutput::new());
                        failure.get_or_insert((i, e.to_string()));
                    }
                },
                TaskResult::Interrupted { interrupts: list } => {
                    outputs.push(NodeOutput::new());
                    interrupts.push((i, list));
                }
                TaskResult::Failed { error } => {
                    outputs.push(NodeOutput::new());
                    failure.get_or_insert((i, error));
                }
            }
        }
        if let Some((i, error)) = failure {
            return Err(GraphError::NodeFailed {
                node: self.exec.inner().nodes[tasks[i].node].name.to_string(),
                step,
                source: error.into(),
            });
        }
        if !interrupts.is_empty() {
            // What a checkpointed run keeps as pending writes: the finished tasks' outputs and
            // the paused tasks' interrupts; the step runs again on resume.
            let mut all = Vec::new();
            // By task, found once each: a step of thousands of tasks may pause in every one.
            let paused: std::collections::HashMap<usize, &Vec<Interrupt>> =
                interrupts.iter().map(|(at, list)| (*at, list)).collect();
            for (i, task) in tasks.iter().enumerate() {
                let node = &self.exec.inner().nodes[task.node];
                let id = task_id(step, &node.name, task.send_index);
                match paused.get(&i) {
                    Some(list) => {
                        all.extend(list.iter().cloned());
                        self.exec.pending.entry(id).or_default().interrupts = (*list).clone();
                    }
                    None => {
                        let output = super::codec::encode_output(&outputs[i]);
                        self.exec.pending.entry(id).or_default().output = Some(output);
                    }
                }
            }
            self.exec.next = tasks;
            self.exec.step -= 1;
            self.paused = Some(all);
            return Ok(());
        }
        ready(self.exec.finish_step(&tasks, outputs))??;
        self.exec.pending.clear();
        let hits = self.exec.static_hits_after(&tasks);
        if !hits.is_empty() {
            self.pause_static(&hits, "after");
        }
        Ok(())
    }

    /// Answers the pending interrupts and un-pauses the run; the next [`advance`](Self::advance)
    /// re-runs the paused step (only its paused tasks) or goes on after a static pause.
    ///
    /// Fails, leaving the run paused, when nothing is pending or `resume` does not fit the
    /// pending interrupts (one value for several; ids that match none).
    pub fn resume(&mut self, resume: impl Into<Resume>) -> Result<(), GraphError> {
        if let Some(failure) = &self.failed {
            return Err(failure.error());
        }
        if self.paused.is_none() {
            return Err(GraphError::Resume(
                "nothing to resume: the run is not paused".to_string(),
            ));
        }
        ready(self.exec.assign_resume(resume.into()))??;
        self.paused = None;
        self.skip_before = true;
        self.steps_run = 0;
        Ok(())
    }

    /// Pauses at a static interrupt: records it as pending so a resume answers it.
    fn pause_static(&mut self, hits: &[(String, String)], when: &str) -> Vec<Interrupt> {
        let interrupts = self.exec.static_interrupts(hits, when);
        for ((_, task), interrupt) in hits.iter().zip(&interrupts) {
            let entry = self
                .exec
                .pending
                .entry(format!("{when}:{task}"))
                .or_default();
            entry.interrupts = vec![interrupt.clone()];
        }
        self.paused = Some(interrupts.clone());
        interrupts
    }
}

impl<S: State> Graph<S> {
    /// Runs one task a [`StepDriver`] handed out, on `state` (the driver's state when it
    /// handed the task out): the node with its retry and cache policies, a panic turned into a
    /// failure. Never errs: a failure is a [`TaskResult::Failed`].
    ///
    /// The options give what the node sees (thread id, namespace, store, cancel token).
    pub async fn run_task(&self, state: S, task: &StepTask, opts: &RunOptions) -> TaskResult {
        let Some(&index) = self.inner.index.get(task.node.as_str()) else {
            let mut known: Vec<&str> = self.inner.nodes.iter().map(|n| &*n.name).collect();
            known.sort_unstable();
            return TaskResult::Failed {
                error: format!(
                    "graph `{}` has no node `{}` (it has: {}); run the task on a worker whose \
                     graph is the one that planned it",
                    self.inner.name,
                    task.node,
                    known.join(", ")
                ),
            };
        };
        let node = &self.inner.nodes[index];
        let store = opts
            .store
            .clone()
            .or_else(|| self.store.clone())
            .or_else(|| opts.parent_store.clone());
        let mut options = opts.clone();
        // As in the executor: what a node runs inside must not wait for the thread's lease.
        options.multitask = None;
        let run = Arc::new(RunContext {
            graph_name: self.inner.name.clone(),
            options,
            store,
            ns: opts.namespace.clone(),
            run_id: ids::random(),
        });
        let ctx = NodeContext {
            task: Arc::new(TaskContext {
                node: node.name.clone(),
                step: task.step,
                send_index: task.send_index,
                run,
                resume: task.resume.clone(),
                interrupts_raised: AtomicUsize::new(0),
                arg: task.arg.clone().map(SendArg::Json),
                run_id: crate::graph::node::task_run_id(None),
            }),
        };
        let state = Arc::new(state);
        let fut = match node.retry.clone() {
            None => super::tasks::attempt(node, state.clone(), ctx, None, 1),
            Some(policy) => {
                super::tasks::retrying(self.inner.clone(), index, state.clone(), ctx, None, policy)
            }
        };
        let fut = match (&node.cache, &self.cache) {
            (Some(policy), Some(store)) => super::tasks::cached(
                fut,
                policy.clone(),
                store.clone(),
                format!("{}:{}", self.inner.name, node.name),
                state,
                task.arg.clone(),
            ),
            _ => fut,
        };
        match super::tasks::guarded(fut, node.name.clone()).await {
            Ok(out) => TaskResult::Done {
                output: super::codec::encode_output(&out),
            },
            Err(e) => match e.kind {
                NodeErrorKind::Interrupt(pause) => TaskResult::Interrupted {
                    interrupts: pause.into_interrupts(),
                },
                NodeErrorKind::Failed(source) => TaskResult::Failed {
                    error: source.to_string(),
                },
            },
        }
    }
}

#[cfg(test)]
mod tests;
