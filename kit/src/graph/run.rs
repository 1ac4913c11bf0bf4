//! The superstep executor.

use std::collections::{BTreeMap, HashMap};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use futures::FutureExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::error::GraphError;
use super::interrupt::{Interrupt, Interrupted, Outcome, Resume};
use super::node::{
    Goto, NodeContext, NodeError, NodeErrorKind, NodeOutput, RunContext, SendArg, TaskContext,
    interrupt_id, split_namespace, task_id,
};
use super::options::{DEFAULT_RECURSION_LIMIT, Durability, RunOptions};
use super::{END, Graph, GraphInner, Outgoing, StateSnapshot, Target};
use crate::checkpoint::{
    BlobKind, ChannelBlob, CheckpointError, CheckpointMeta, CheckpointSource, CheckpointWrite,
    Checkpointer, LoadedCheckpoint, PendingWrite, pending,
};
use crate::event::{Event, EventKind, EventMetadata};
use crate::ids;
use crate::state::{ChannelChange, State};

/// Deltas are written until they outweigh the last full value or this many bytes, whichever is
/// larger; then a full value is written. Keeps per-step writes amortised O(1) and reads short.
const MIN_SNAPSHOT_BYTES: u64 = 16 * 1024;

pub(crate) enum RunInput<S: State> {
    Input(S::Update),
    Resume(Resume),
}

/// A task due in the next superstep.
#[derive(Clone)]
struct TaskSpec {
    node: usize,
    send_index: Option<usize>,
    arg: Option<SendArg>,
}

/// Executor data stored with each checkpoint: the tasks due and the join barriers. Written
/// straight to bytes from borrowed data (no intermediate JSON tree).
#[derive(Serialize)]
struct BodyOut<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    next: &'a [TaskRecord],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    joins: &'a [u64],
}

#[derive(Deserialize, Default)]
struct Body {
    #[serde(default)]
    next: Vec<TaskRecord>,
    #[serde(default)]
    joins: Vec<u64>,
}

#[derive(Serialize, Deserialize)]
struct TaskRecord {
    node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    send: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    arg: Option<Value>,
}

/// A task output as stored in a pending write.
#[derive(Serialize, Deserialize)]
struct StoredOutput {
    updates: Vec<Value>,
    #[serde(default)]
    goto: Vec<StoredGoto>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum StoredGoto {
    Node { node: String },
    Send { node: String, arg: Value },
}

pub(crate) struct Exec<S: State> {
    graph: Graph<S>,
    opts: RunOptions,
    /// Set when the run persists: a checkpointer and a thread id.
    persist: Option<(Arc<dyn Checkpointer>, String)>,
    ns: String,
    state: Arc<S>,
    step: i64,
    next: Vec<TaskSpec>,
    joins: Vec<u64>,
    versions: BTreeMap<String, String>,
    stats: Vec<[u64; 2]>,
    /// The thread's head, expected by the next write.
    head: Option<String>,
    /// The checkpoint the next one follows (differs from `head` when running from an older
    /// checkpoint).
    parent: Option<String>,
    loaded: bool,
    /// Pending writes of the current checkpoint, by task id.
    pending: HashMap<String, TaskPending>,
    changes: Vec<ChannelChange>,
    /// Run ids of the current step's tasks (when streaming), so start and end events match.
    task_run_ids: Vec<String>,
    /// A checkpoint write of the async durability mode, polled while the next step runs.
    inflight: Option<futures::future::BoxFuture<'static, Result<(), CheckpointError>>>,
    /// This invocation's run in the trace tree.
    trace: crate::trace::Run,
    exit_buffer: Option<CheckpointWrite>,
    run: Arc<RunContext>,
}

#[derive(Default)]
struct TaskPending {
    output: Option<Value>,
    interrupts: Vec<Interrupt>,
    resume: HashMap<String, Value>,
    error: Option<String>,
}

impl<S: State> Exec<S> {
    /// Prepares a run: resolves the checkpointer and loads the thread.
    pub(crate) async fn start(graph: &Graph<S>, opts: &RunOptions) -> Result<Self, GraphError> {
        let checkpointer = opts
            .checkpointer
            .clone()
            .or_else(|| graph.checkpointer.clone());
        let persist = match (checkpointer, &opts.thread_id) {
            (Some(cp), Some(thread)) => Some((cp, thread.clone())),
            _ => None,
        };
        let ns = opts.namespace.clone();
        // Nodes see the checkpointer actually in use, so subgraphs they run inherit it.
        let mut node_options = opts.clone();
        if let Some((cp, _)) = &persist {
            node_options.checkpointer = Some(cp.clone());
        }
        let run = Arc::new(RunContext {
            graph_name: graph.inner.name.clone(),
            options: node_options,
            ns: ns.clone(),
            run_id: ids::random(),
        });
        let mut exec = Exec {
            graph: graph.clone(),
            opts: opts.clone(),
            persist,
            ns,
            state: Arc::new(S::default()),
            // The input of a new thread is step -1, its first superstep step 0.
            step: -2,
            next: Vec::new(),
            joins: vec![0; graph.inner.joins.len()],
            versions: BTreeMap::new(),
            stats: vec![[0, 0]; S::channels().len()],
            head: None,
            parent: None,
            loaded: false,
            pending: HashMap::new(),
            changes: Vec::new(),
            task_run_ids: Vec::new(),
            inflight: None,
            trace: crate::trace::Run::disabled(),
            exit_buffer: None,
            run,
        };
        if let Some((cp, thread)) = exec.persist.clone() {
            let loaded = cp
                .load(&thread, &exec.ns, opts.checkpoint_id.as_deref())
                .await?;
            if let Some(loaded) = loaded {
                exec.restore(loaded)?;
            }
        }
        Ok(exec)
    }

    fn inner(&self) -> &GraphInner<S> {
        &self.graph.inner
    }

    fn restore(&mut self, loaded: LoadedCheckpoint) -> Result<(), GraphError> {
        self.state = Arc::new(restore_state::<S>(&self.graph.inner.schema, &loaded)?);
        let body: Body = if loaded.body.is_empty() {
            Body::default()
        } else {
            serde_json::from_slice(&loaded.body).map_err(|e| {
                CheckpointError::Corrupt(format!("checkpoint {}: {e}", loaded.meta.id))
            })?
        };
        self.next = Vec::with_capacity(body.next.len());
        for record in body.next {
            let node = self.node_index(&record.node, "checkpoint")?;
            self.next.push(TaskSpec {
                node,
                send_index: record.send,
                arg: record.arg.map(SendArg::Json),
            });
        }
        if body.joins.len() == self.joins.len() {
            self.joins = body.joins;
        }
        // Snapshot statistics follow from the chains just loaded.
        for channel in &loaded.channels {
            if let Some(i) = crate::state::channel_index::<S>(&channel.name) {
                self.stats[i] = [
                    channel.full.as_ref().map_or(0, |f| f.len() as u64),
                    channel.deltas.iter().map(|d| d.len() as u64).sum(),
                ];
            }
        }
        self.step = loaded.meta.step;
        self.versions = loaded.channel_versions;
        self.head = Some(loaded.head.clone());
        self.parent = Some(loaded.meta.id.clone());
        for write in loaded.pending_writes {
            let entry = self.pending.entry(write.task_id.clone()).or_default();
            match write.channel.as_str() {
                pending::OUTPUT => entry.output = Some(write.value),
                pending::INTERRUPT => {
                    entry.interrupts = serde_json::from_value(write.value).unwrap_or_default()
                }
                pending::RESUME => {
                    entry.resume = serde_json::from_value(write.value).unwrap_or_default()
                }
                pending::ERROR => entry.error = write.value.as_str().map(String::from),
                _ => {}
            }
        }
        self.loaded = true;
        Ok(())
    }

    fn node_index(&self, name: &str, from: &str) -> Result<usize, GraphError> {
        self.inner()
            .index
            .get(name)
            .copied()
            .ok_or_else(|| GraphError::UnknownNode {
                from: from.to_string(),
                target: name.to_string(),
                known: self.known_nodes(),
            })
    }

    fn known_nodes(&self) -> String {
        let mut names: Vec<&str> = self.inner().nodes.iter().map(|n| &*n.name).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Runs to completion, an interrupt or an error, and reports the outcome on the stream.
    pub(crate) async fn run(mut self, input: RunInput<S>) -> Result<Outcome<S>, GraphError> {
        self.trace = self.start_trace(&input);
        let trace = self.trace.clone();
        let result = trace.clone().scope(self.run_inner(input)).await;
        let result = match result {
            // Nothing is reported as done before every checkpoint is durable.
            Ok(outcome) => match self.flush().await {
                Ok(()) => Ok(outcome),
                Err(e) => Err(e),
            },
            Err(e) => {
                let _ = self.flush().await;
                Err(e)
            }
        };
        match &result {
            Ok(Outcome::Done(state)) if trace.is_recording() => {
                trace.finish(serde_json::to_value(state).unwrap_or(Value::Null))
            }
            Ok(Outcome::Done(_)) => trace.finish(Value::Null),
            Ok(Outcome::Interrupted(i)) => {
                trace.finish(json!({"status": "interrupted", "interrupts": i.interrupts}))
            }
            Err(e) => trace.fail(&e.to_string()),
        }
        if let Some(sink) = self.opts.events.clone() {
            match &result {
                Ok(Outcome::Done(state)) => {
                    sink.send(self.event(
                        EventKind::RunEnd,
                        self.inner().name.to_string(),
                        json!({"status": "done", "output": state}),
                        None,
                    ))
                    .await;
                }
                Ok(Outcome::Interrupted(i)) => {
                    sink.send(self.event(
                        EventKind::Interrupt,
                        self.inner().name.to_string(),
                        json!({"interrupts": i.interrupts}),
                        None,
                    ))
                    .await;
                    sink.send(self.event(
                        EventKind::RunEnd,
                        self.inner().name.to_string(),
                        json!({"status": "interrupted", "interrupts": i.interrupts}),
                        None,
                    ))
                    .await;
                }
                Err(e) => {
                    sink.send(self.event(
                        EventKind::Error,
                        self.inner().name.to_string(),
                        json!({"message": e.to_string(), "kind": (self.inner().error_kind)(e)}),
                        None,
                    ))
                    .await;
                }
            }
        }
        result
    }

    /// Starts this invocation's trace run: a root run, or a child of the current one (a
    /// subgraph inside a node or tool). `trace: false` options suppress it and its children.
    fn start_trace(&self, input: &RunInput<S>) -> crate::trace::Run {
        let options = self.opts.trace.clone();
        if options.as_ref().is_some_and(|o| !o.is_enabled()) {
            return crate::trace::Run::disabled();
        }
        let tracer = self
            .opts
            .tracer
            .clone()
            .unwrap_or_else(crate::trace::global);
        let mut options = options.unwrap_or_default();
        if options.thread_id.is_none() {
            options.thread_id = self.opts.thread_id.clone();
        }
        let kind = self.opts.trace_kind.unwrap_or(crate::trace::RunKind::Graph);
        tracer.start(
            &self.graph.inner.name,
            kind,
            || match input {
                RunInput::Input(update) => serde_json::to_value(update).unwrap_or(Value::Null),
                RunInput::Resume(resume) => json!({ "resume": format!("{resume:?}") }),
            },
            Some(&options),
        )
    }

    async fn run_inner(&mut self, input: RunInput<S>) -> Result<Outcome<S>, GraphError> {
        if let Some(sink) = &self.opts.events {
            let data = match &input {
                RunInput::Input(u) => json!({"input": u}),
                RunInput::Resume(_) => json!({"resume": true}),
            };
            sink.send(self.event(
                EventKind::RunStart,
                self.inner().name.to_string(),
                data,
                None,
            ))
            .await;
        }
        // Running from an older checkpoint forks the thread there.
        if self.loaded && self.opts.checkpoint_id.is_some() && self.parent != self.head {
            self.persist_all(CheckpointSource::Fork).await?;
        }
        let mut skip_before = false;
        match input {
            RunInput::Input(update) => {
                self.pending.clear();
                self.step += 1;
                let mut updates = vec![update];
                self.apply(&mut updates)?;
                let (next, sends) = self.route_from(None, &[])?;
                self.next = merge_tasks(next, sends, self.inner().nodes.len());
                self.save(CheckpointSource::Input).await?;
            }
            RunInput::Resume(resume) => {
                if !self.loaded {
                    return Err(match &self.persist {
                        None => GraphError::Resume(
                            "resume needs the thread's checkpoint: give the graph a checkpointer \
                             and pass the same thread id as the run that paused"
                                .to_string(),
                        ),
                        Some((_, thread)) => GraphError::Resume(format!(
                            "thread `{thread}` has no checkpoint to resume; start it with invoke"
                        )),
                    });
                }
                skip_before = self.pending.keys().any(|k| k.starts_with("before:"));
                self.assign_resume(resume).await?;
            }
        }
        let limit = self.opts.recursion_limit.unwrap_or(DEFAULT_RECURSION_LIMIT);
        let mut steps_run = 0usize;
        loop {
            if self.next.is_empty() {
                break;
            }
            if !skip_before && let Some(outcome) = self.static_interrupt_before().await? {
                return Ok(outcome);
            }
            skip_before = false;
            steps_run += 1;
            if steps_run > limit {
                return Err(GraphError::RecursionLimit { limit });
            }
            self.step += 1;
            let tasks = std::mem::take(&mut self.next);
            // With async durability the previous step's checkpoint is written while this step
            // runs (both polled on this task; no spawn, no thread hop).
            let results = match self.inflight.take() {
                None => self.run_tasks(&tasks).await,
                Some(put) => {
                    let (written, results) = futures::join!(put, self.run_tasks(&tasks));
                    written?;
                    results
                }
            };

            let mut outputs: Vec<NodeOutput<S>> = Vec::with_capacity(tasks.len());
            let mut interrupts: Vec<(usize, Vec<Interrupt>)> = Vec::new();
            let mut failure: Option<(usize, NodeError)> = None;
            for (i, result) in results.into_iter().enumerate() {
                match result {
                    Ok(out) => outputs.push(out),
                    Err(e) => {
                        outputs.push(NodeOutput::new());
                        match e.kind {
                            NodeErrorKind::Interrupt(p) => {
                                interrupts.push((i, p.into_interrupts()))
                            }
                            NodeErrorKind::Failed(_) => {
                                if failure.is_none() {
                                    failure = Some((i, e));
                                }
                            }
                        }
                    }
                }
            }
            if failure.is_some() || !interrupts.is_empty() {
                return self.stop_step(tasks, outputs, interrupts, failure).await;
            }
            self.finish_step(&tasks, outputs).await?;
            if let Some(outcome) = self.static_interrupt_after(&tasks).await? {
                return Ok(outcome);
            }
        }
        let state = std::mem::replace(&mut self.state, Arc::new(S::default()));
        Ok(Outcome::Done(
            Arc::try_unwrap(state).unwrap_or_else(|s| (*s).clone()),
        ))
    }

    /// Runs the step's tasks concurrently; reuses stored outputs of tasks that already
    /// succeeded (a resumed step). Results are in task order.
    async fn run_tasks(&mut self, tasks: &[TaskSpec]) -> Vec<Result<NodeOutput<S>, NodeError>> {
        let mut results: Vec<Option<Result<NodeOutput<S>, NodeError>>> =
            (0..tasks.len()).map(|_| None).collect();
        let mut futures = Vec::with_capacity(tasks.len());
        let streaming = self.opts.events.is_some();
        self.task_run_ids.clear();
        let graph = self.graph.inner.clone();
        let traced = self.trace.is_recording() || !self.trace.span().is_disabled();
        for (i, task) in tasks.iter().enumerate() {
            let node = &graph.nodes[task.node];
            let mut resume = HashMap::new();
            if !self.pending.is_empty() {
                let id = task_id(self.step, &node.name, task.send_index);
                if let Some(p) = self.pending.get_mut(&id) {
                    if let Some(stored) = p.output.take() {
                        results[i] = Some(self.decode_output(stored));
                        continue;
                    }
                    resume = std::mem::take(&mut p.resume);
                }
            }
            let run_id = if streaming {
                ids::random()
            } else {
                String::new()
            };
            if streaming {
                self.task_run_ids.resize(i, String::new());
                self.task_run_ids.push(run_id.clone());
            }
            let ctx = NodeContext {
                task: Arc::new(TaskContext {
                    node: node.name.clone(),
                    step: self.step,
                    send_index: task.send_index,
                    run: self.run.clone(),
                    resume,
                    interrupts_raised: AtomicUsize::new(0),
                    arg: task.arg.clone(),
                    run_id,
                }),
            };
            if let Some(sink) = &self.opts.events {
                let data = json!({"task_id": ctx.task_id()});
                let mut event = ctx.event(EventKind::NodeStart, node.name.to_string(), data);
                event.run_id = ctx.run_id().to_string();
                event.parent_ids.pop();
                sink.send(event).await;
            }
            // A panic while creating the future is caught too, not only while polling it.
            let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| {
                (node.func)(self.state.clone(), ctx)
            })) {
                Ok(fut) => fut,
                Err(panic) => {
                    let message =
                        format!("node `{}` panicked: {}", node.name, panic_message(&panic));
                    Box::pin(std::future::ready(Err(NodeError::msg(message))))
                }
            };
            let fut = if traced {
                let node_run = self.trace.child(
                    &node.name,
                    crate::trace::RunKind::Node,
                    || json!({ "task_id": task_id(self.step, &node.name, task.send_index) }),
                );
                traced_node(node_run, fut)
            } else {
                fut
            };
            futures.push((i, guarded(fut, node.name.clone())));
        }
        if futures.len() == 1 {
            if let Some((i, fut)) = futures.pop() {
                results[i] = Some(fut.await);
            }
        } else if !futures.is_empty() {
            let (indices, futs): (Vec<usize>, Vec<_>) = futures.into_iter().unzip();
            for (i, r) in indices
                .into_iter()
                .zip(futures::future::join_all(futs).await)
            {
                results[i] = Some(r);
            }
        }
        results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(NodeError::msg("task produced no result"))))
            .collect()
    }

    fn decode_output(&self, stored: Value) -> Result<NodeOutput<S>, NodeError> {
        let stored: StoredOutput = serde_json::from_value(stored)
            .map_err(|e| NodeError::msg(format!("stored task output is unreadable: {e}")))?;
        let mut out = NodeOutput::new();
        for u in stored.updates {
            out.updates.push(serde_json::from_value(u).map_err(|e| {
                NodeError::msg(format!("stored update does not match the state: {e}"))
            })?);
        }
        for g in stored.goto {
            out.goto.push(match g {
                StoredGoto::Node { node } => Goto::Node(node),
                StoredGoto::Send { node, arg } => Goto::Send(super::node::Send {
                    node,
                    arg: SendArg::Json(arg),
                }),
            });
        }
        Ok(out)
    }

    fn encode_output(out: &NodeOutput<S>) -> Value {
        let stored = StoredOutput {
            updates: out
                .updates
                .iter()
                .map(|u| serde_json::to_value(u).unwrap_or(Value::Null))
                .collect(),
            goto: out
                .goto
                .iter()
                .map(|g| match g {
                    Goto::Node(node) => StoredGoto::Node { node: node.clone() },
                    Goto::Send(s) => StoredGoto::Send {
                        node: s.node.clone(),
                        arg: s.arg.to_json(),
                    },
                })
                .collect(),
        };
        serde_json::to_value(stored).unwrap_or(Value::Null)
    }

    /// A step that failed or paused: keep the successful tasks' outputs as pending writes, so a
    /// resume re-runs only the others.
    async fn stop_step(
        &mut self,
        tasks: Vec<TaskSpec>,
        outputs: Vec<NodeOutput<S>>,
        interrupts: Vec<(usize, Vec<Interrupt>)>,
        failure: Option<(usize, NodeError)>,
    ) -> Result<Outcome<S>, GraphError> {
        let interrupted_at: Vec<usize> = interrupts.iter().map(|(i, _)| *i).collect();
        let failed_at = failure.as_ref().map(|(i, _)| *i);
        if self.persist.is_none() && failure.is_none() {
            let node = interrupts
                .first()
                .map(|(i, _)| self.inner().nodes[tasks[*i].node].name.to_string())
                .unwrap_or_default();
            return Err(GraphError::InterruptWithoutCheckpointer { node });
        }
        let mut all_interrupts = Vec::new();
        if self.persist.is_some() {
            // The checkpoint the writes attach to must exist first.
            self.flush().await?;
            let mut writes = Vec::new();
            for (i, task) in tasks.iter().enumerate() {
                let node = &self.inner().nodes[task.node];
                let id = task_id(self.step, &node.name, task.send_index);
                if Some(i) == failed_at || interrupted_at.contains(&i) {
                    continue;
                }
                writes.push(PendingWrite {
                    task_id: id,
                    channel: pending::OUTPUT.to_string(),
                    value: Self::encode_output(&outputs[i]),
                });
            }
            for (i, list) in &interrupts {
                let task = &tasks[*i];
                let node = &self.inner().nodes[task.node];
                writes.push(PendingWrite {
                    task_id: task_id(self.step, &node.name, task.send_index),
                    channel: pending::INTERRUPT.to_string(),
                    value: serde_json::to_value(list).unwrap_or(Value::Null),
                });
                all_interrupts.extend(list.iter().cloned());
            }
            if let Some((i, e)) = &failure {
                let task = &tasks[*i];
                let node = &self.inner().nodes[task.node];
                writes.push(PendingWrite {
                    task_id: task_id(self.step, &node.name, task.send_index),
                    channel: pending::ERROR.to_string(),
                    value: Value::String(e.to_string()),
                });
            }
            if let (Some((cp, thread)), Some(head)) = (&self.persist, &self.head) {
                cp.put_writes(thread, &self.ns, head, writes).await?;
            }
        }
        if let Some((i, e)) = failure {
            let node = self.inner().nodes[tasks[i].node].name.to_string();
            let source = match e.kind {
                NodeErrorKind::Failed(source) => source,
                NodeErrorKind::Interrupt(_) => "interrupted".into(),
            };
            return Err(GraphError::NodeFailed {
                node,
                step: self.step,
                source,
            });
        }
        let state = (*self.state).clone();
        Ok(Outcome::Interrupted(Interrupted {
            interrupts: all_interrupts,
            state,
            checkpoint_id: self.head.clone(),
        }))
    }

    /// Applies a completed step, routes, checkpoints and reports it.
    async fn finish_step(
        &mut self,
        tasks: &[TaskSpec],
        outputs: Vec<NodeOutput<S>>,
    ) -> Result<(), GraphError> {
        let mut updates: Vec<S::Update> = Vec::with_capacity(outputs.len());
        let mut gotos: Vec<Vec<Goto>> = Vec::with_capacity(outputs.len());
        let mut node_end_events: Vec<Event> = Vec::new();
        let streaming = self.opts.events.is_some();
        for (i, (task, out)) in tasks.iter().zip(outputs).enumerate() {
            if streaming {
                let node = &self.inner().nodes[task.node];
                let data = match out.updates.len() {
                    0 => json!({"update": null}),
                    1 => json!({"update": out.updates[0]}),
                    _ => json!({"update": out.updates}),
                };
                let mut event = self.event(
                    EventKind::NodeEnd,
                    node.name.to_string(),
                    data,
                    Some(&node.name),
                );
                if let Some(id) = self.task_run_ids.get(i).filter(|id| !id.is_empty()) {
                    event.run_id = id.clone();
                }
                node_end_events.push(event);
            }
            updates.extend(out.updates);
            gotos.push(out.goto);
        }
        self.apply(&mut updates)?;
        let mut next = Vec::new();
        let mut sends = Vec::new();
        for (task, goto) in tasks.iter().zip(&gotos) {
            let (n, s) = self.route_from(Some(task.node), goto)?;
            next.extend(n);
            sends.extend(s);
        }
        self.next = merge_tasks(next, sends, self.inner().nodes.len());
        self.save(CheckpointSource::Loop).await?;
        if let Some(sink) = self.opts.events.clone() {
            for event in node_end_events {
                sink.send(event).await;
            }
            if self.opts.stream_values {
                let event = self.event(
                    EventKind::Values,
                    self.inner().name.to_string(),
                    serde_json::to_value(&*self.state).unwrap_or(Value::Null),
                    None,
                );
                sink.send(event).await;
            }
            // Let the consumer see this step's events now rather than after the whole run
            // (on a single-threaded runtime the run would otherwise never yield).
            tokio::task::yield_now().await;
        }
        Ok(())
    }

    /// Applies updates to the state (copy-on-write only if a node kept a snapshot alive).
    fn apply(&mut self, updates: &mut Vec<S::Update>) -> Result<(), GraphError> {
        let record = self.persist.is_some();
        let state = Arc::make_mut(&mut self.state);
        state
            .apply(&self.graph.inner.schema, updates, &mut self.changes, record)
            .map_err(|source| GraphError::State {
                step: self.step,
                source,
            })
    }

    /// The tasks triggered by a node that just ran (or by START when `node` is `None`).
    fn route_from(
        &mut self,
        node: Option<usize>,
        goto: &[Goto],
    ) -> Result<(Vec<usize>, Vec<TaskSpec>), GraphError> {
        let graph = self.graph.inner.clone();
        let (name, out): (&str, &Outgoing<S>) = match node {
            Some(i) => (&graph.nodes[i].name, &graph.nodes[i].out),
            None => (super::START, &graph.start),
        };
        let mut next = Vec::new();
        let mut sends = Vec::new();
        let mut fired = !out.statics.is_empty();
        for t in &out.statics {
            if let Target::Node(i) = t {
                next.push(*i);
            }
        }
        for w in &out.whens {
            if (w.cond)(&self.state) {
                fired = true;
                if let Target::Node(i) = w.target {
                    next.push(i);
                }
            }
        }
        for r in &out.routes {
            fired = true;
            match (r.router)(&self.state) {
                super::Route::To(names) => {
                    for target in names {
                        if target == END {
                            continue;
                        }
                        let i = self.node_index(&target, name)?;
                        if !r.destinations.is_empty() && !r.destinations.contains(&Target::Node(i))
                        {
                            return Err(GraphError::UnknownNode {
                                from: name.to_string(),
                                target,
                                known: "(not among the route's declared destinations)".into(),
                            });
                        }
                        next.push(i);
                    }
                }
                super::Route::Sends(list) => {
                    for s in list {
                        let i = self.node_index(&s.node, name)?;
                        sends.push(TaskSpec {
                            node: i,
                            send_index: None,
                            arg: Some(s.arg),
                        });
                    }
                }
            }
        }
        for g in goto {
            fired = true;
            match g {
                Goto::Node(target) => {
                    if target != END {
                        next.push(self.node_index(target, name)?);
                    }
                }
                Goto::Send(s) => {
                    let i = self.node_index(&s.node, name)?;
                    sends.push(TaskSpec {
                        node: i,
                        send_index: None,
                        arg: Some(s.arg.clone()),
                    });
                }
            }
        }
        if let Some(i) = node {
            for &(join, bit) in &graph.nodes[i].joins {
                fired = true;
                self.joins[join] |= 1 << bit;
                if self.joins[join] == graph.joins[join].all {
                    self.joins[join] = 0;
                    if let Target::Node(t) = graph.joins[join].target {
                        next.push(t);
                    }
                }
            }
        }
        if !fired && !out.whens.is_empty() {
            return Err(GraphError::NoRoute {
                node: name.to_string(),
                step: self.step,
            });
        }
        Ok((next, sends))
    }

    /// Maps a resume payload onto the pending interrupts and records it.
    async fn assign_resume(&mut self, resume: Resume) -> Result<(), GraphError> {
        let mut open: Vec<(String, String)> = Vec::new(); // (task id, interrupt id)
        for (task, p) in &self.pending {
            for i in &p.interrupts {
                if !p.resume.contains_key(&i.id) {
                    open.push((task.clone(), i.id.clone()));
                }
            }
        }
        open.sort();
        let mut assigned: Vec<(String, String, Value)> = Vec::new();
        match resume {
            Resume::Continue => {}
            Resume::Value(v) => match open.len() {
                0 => {}
                1 => {
                    let (task, id) = open.remove(0);
                    assigned.push((task, id, v));
                }
                n => {
                    let ids: Vec<&str> = open.iter().map(|(_, id)| id.as_str()).collect();
                    return Err(GraphError::Resume(format!(
                        "{n} interrupts are pending ({}); resume with values keyed by interrupt \
                         id (Resume::ByIds)",
                        ids.join(", ")
                    )));
                }
            },
            Resume::ByIds(map) => {
                for (id, v) in map {
                    if let Some((task, _)) = open.iter().find(|(_, i)| *i == id) {
                        assigned.push((task.clone(), id, v));
                    }
                }
                if assigned.is_empty() && !open.is_empty() {
                    let ids: Vec<&str> = open.iter().map(|(_, id)| id.as_str()).collect();
                    return Err(GraphError::Resume(format!(
                        "none of the given ids matches a pending interrupt; pending: {}",
                        ids.join(", ")
                    )));
                }
            }
        }
        let mut touched = Vec::new();
        for (task, id, v) in assigned {
            let p = self.pending.entry(task.clone()).or_default();
            p.resume.insert(id, v);
            if !touched.contains(&task) {
                touched.push(task);
            }
        }
        if let (Some((cp, thread)), Some(head)) = (&self.persist, &self.head) {
            let writes: Vec<PendingWrite> = touched
                .iter()
                .filter_map(|t| {
                    self.pending.get(t).map(|p| PendingWrite {
                        task_id: t.clone(),
                        channel: pending::RESUME.to_string(),
                        value: serde_json::to_value(&p.resume).unwrap_or(Value::Null),
                    })
                })
                .collect();
            if !writes.is_empty() {
                cp.put_writes(thread, &self.ns, head, writes).await?;
            }
        }
        Ok(())
    }

    /// Pauses before nodes marked `interrupt_before`.
    async fn static_interrupt_before(&mut self) -> Result<Option<Outcome<S>>, GraphError> {
        let step = self.step + 1;
        let hits: Vec<(String, String)> = self
            .next
            .iter()
            .filter(|t| self.inner().nodes[t.node].interrupt_before)
            .map(|t| {
                let node = &self.inner().nodes[t.node].name;
                (node.to_string(), task_id(step, node, t.send_index))
            })
            .collect();
        if hits.is_empty() {
            return Ok(None);
        }
        self.pause_static(hits, "before").await.map(Some)
    }

    /// Pauses after nodes marked `interrupt_after`.
    async fn static_interrupt_after(
        &mut self,
        tasks: &[TaskSpec],
    ) -> Result<Option<Outcome<S>>, GraphError> {
        let hits: Vec<(String, String)> = tasks
            .iter()
            .filter(|t| self.inner().nodes[t.node].interrupt_after)
            .map(|t| {
                let node = &self.inner().nodes[t.node].name;
                (node.to_string(), task_id(self.step, node, t.send_index))
            })
            .collect();
        if hits.is_empty() {
            return Ok(None);
        }
        self.pause_static(hits, "after").await.map(Some)
    }

    async fn pause_static(
        &mut self,
        hits: Vec<(String, String)>,
        when: &str,
    ) -> Result<Outcome<S>, GraphError> {
        let Some((cp, thread)) = self.persist.clone() else {
            return Err(GraphError::InterruptWithoutCheckpointer {
                node: hits.first().map(|h| h.0.clone()).unwrap_or_default(),
            });
        };
        self.flush().await?;
        let interrupts: Vec<Interrupt> = hits
            .iter()
            .map(|(node, task)| Interrupt {
                id: interrupt_id(&self.ns, &format!("{when}:{task}"), 0),
                value: json!({ "interrupt": when, "node": node }),
                node: node.clone(),
                namespace: split_namespace(&self.ns),
            })
            .collect();
        let writes = hits
            .iter()
            .zip(&interrupts)
            .map(|((_, task), i)| PendingWrite {
                task_id: format!("{when}:{task}"),
                channel: pending::INTERRUPT.to_string(),
                value: serde_json::to_value(vec![i]).unwrap_or(Value::Null),
            })
            .collect();
        if let Some(head) = &self.head {
            cp.put_writes(&thread, &self.ns, head, writes).await?;
        }
        Ok(Outcome::Interrupted(Interrupted {
            interrupts,
            state: (*self.state).clone(),
            checkpoint_id: self.head.clone(),
        }))
    }

    /// Builds the checkpoint for the current step from the recorded channel changes.
    fn build_write(
        &mut self,
        source: CheckpointSource,
        full_all: bool,
    ) -> Result<CheckpointWrite, GraphError> {
        let id = ids::time_ordered();
        let channels = S::channels();
        let mut blobs = Vec::with_capacity(self.changes.len());
        let mut changes = std::mem::take(&mut self.changes);
        if full_all {
            changes = (0..channels.len())
                .map(|channel| ChannelChange {
                    channel,
                    delta: None,
                })
                .collect();
        }
        for change in changes.drain(..) {
            let name = channels[change.channel].name;
            let stats = &mut self.stats[change.channel];
            let threshold = stats[0].max(MIN_SNAPSHOT_BYTES);
            let blob = match change.delta {
                Some(delta) if stats[1] + delta.len() as u64 <= threshold => {
                    stats[1] += delta.len() as u64;
                    ChannelBlob {
                        channel: name.to_string(),
                        version: id.clone(),
                        prev_version: self.versions.get(name).cloned(),
                        kind: BlobKind::Delta,
                        data: delta,
                    }
                }
                _ => {
                    let data = self.state.save_channel(change.channel).map_err(|source| {
                        GraphError::State {
                            step: self.step,
                            source,
                        }
                    })?;
                    *stats = [data.len() as u64, 0];
                    ChannelBlob {
                        channel: name.to_string(),
                        version: id.clone(),
                        prev_version: None,
                        kind: BlobKind::Full,
                        data,
                    }
                }
            };
            self.versions.insert(name.to_string(), id.clone());
            blobs.push(blob);
        }
        self.changes = changes;
        let next: Vec<TaskRecord> = self
            .next
            .iter()
            .map(|t| TaskRecord {
                node: self.graph.inner.nodes[t.node].name.to_string(),
                send: t.send_index,
                arg: t.arg.as_ref().map(SendArg::to_json),
            })
            .collect();
        let joins: &[u64] = if self.joins.iter().any(|j| *j != 0) {
            &self.joins
        } else {
            &[]
        };
        let body = serde_json::to_vec(&BodyOut { next: &next, joins }).map_err(|e| {
            GraphError::Checkpoint(CheckpointError::Corrupt(format!(
                "checkpoint body could not be encoded: {e}"
            )))
        })?;
        let meta = CheckpointMeta {
            id: id.clone(),
            parent_id: self.parent.clone(),
            step: self.step,
            source,
            created_at: ids::now_rfc3339_millis(),
            next: next.into_iter().map(|t| t.node).collect(),
            metadata: Value::Object(self.opts.metadata.clone()),
        };
        let (thread_id, expected_head) = match &self.persist {
            Some((_, t)) => (t.clone(), self.head.clone()),
            None => (String::new(), None),
        };
        self.head = Some(id.clone());
        self.parent = Some(id);
        Ok(CheckpointWrite {
            thread_id,
            ns: self.ns.clone(),
            meta,
            channel_versions: self.versions.clone(),
            blobs,
            body,
            expected_head,
        })
    }

    /// Takes a checkpoint according to the durability mode.
    async fn save(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        if self.persist.is_none() {
            self.changes.clear();
            return Ok(());
        }
        let write = self.build_write(source, false)?;
        self.store(write).await
    }

    /// Writes a checkpoint holding every channel in full (forks).
    async fn persist_all(&mut self, source: CheckpointSource) -> Result<(), GraphError> {
        if self.persist.is_none() {
            return Ok(());
        }
        let write = self.build_write(source, true)?;
        self.store(write).await?;
        self.pending.clear();
        Ok(())
    }

    async fn store(&mut self, write: CheckpointWrite) -> Result<(), GraphError> {
        let Some((cp, _)) = self.persist.clone() else {
            return Ok(());
        };
        let checkpoint_event = self
            .opts
            .events
            .as_ref()
            .map(|_| json!({"checkpoint_id": write.meta.id, "step": write.meta.step}));
        match self.opts.durability {
            Durability::Sync => cp.put(write).await?,
            Durability::Async => {
                self.await_inflight().await?;
                let mut put: futures::future::BoxFuture<'static, _> =
                    Box::pin(async move { cp.put(write).await });
                // In-memory writes finish at the first poll; only real I/O is left in flight.
                match futures::poll!(&mut put) {
                    std::task::Poll::Ready(result) => result?,
                    std::task::Poll::Pending => self.inflight = Some(put),
                }
            }
            Durability::Exit => match &mut self.exit_buffer {
                None => self.exit_buffer = Some(write),
                Some(buffer) => {
                    buffer.blobs.extend(write.blobs);
                    let parent = buffer.meta.parent_id.take();
                    buffer.meta = write.meta;
                    buffer.meta.parent_id = parent;
                    buffer.channel_versions = write.channel_versions;
                    buffer.body = write.body;
                }
            },
        }
        if let (Some(sink), Some(data)) = (&self.opts.events, checkpoint_event) {
            sink.send(self.event(
                EventKind::Checkpoint,
                self.inner().name.to_string(),
                data,
                None,
            ))
            .await;
        }
        Ok(())
    }

    async fn await_inflight(&mut self) -> Result<(), GraphError> {
        if let Some(put) = self.inflight.take() {
            put.await?;
        }
        Ok(())
    }

    /// Makes every checkpoint taken so far durable.
    async fn flush(&mut self) -> Result<(), GraphError> {
        self.await_inflight().await?;
        if let Some(write) = self.exit_buffer.take()
            && let Some((cp, _)) = &self.persist
        {
            cp.put(write).await?;
        }
        Ok(())
    }

    fn event(&self, kind: EventKind, name: String, data: Value, node: Option<&str>) -> Event {
        let mut parent_ids = self.opts.parent_ids.clone();
        let run_id = if node.is_some() {
            parent_ids.push(self.run.run_id.clone());
            ids::random()
        } else {
            self.run.run_id.clone()
        };
        Event {
            event: kind,
            name,
            run_id,
            parent_ids,
            data,
            metadata: EventMetadata {
                node: node.map(String::from),
                step: u64::try_from(self.step).ok(),
                ..EventMetadata::default()
            },
        }
    }
}

/// Static-trigger tasks in node order (each node once), then `Send` tasks in order.
fn merge_tasks(triggered: Vec<usize>, sends: Vec<TaskSpec>, nodes: usize) -> Vec<TaskSpec> {
    let mut tasks: Vec<TaskSpec> = Vec::with_capacity(triggered.len() + sends.len());
    if triggered.len() <= 1 {
        tasks.extend(triggered.into_iter().map(|node| TaskSpec {
            node,
            send_index: None,
            arg: None,
        }));
    } else {
        let mut seen = vec![false; nodes];
        for n in triggered {
            seen[n] = true;
        }
        tasks.extend(
            seen.iter()
                .enumerate()
                .filter(|(_, s)| **s)
                .map(|(node, _)| TaskSpec {
                    node,
                    send_index: None,
                    arg: None,
                }),
        );
    }
    for (i, mut send) in sends.into_iter().enumerate() {
        send.send_index = Some(i);
        tasks.push(send);
    }
    tasks
}

/// Runs a node future inside its trace run, recording its update or error.
fn traced_node<S: State>(
    run: crate::trace::Run,
    fut: super::node::NodeFuture<S>,
) -> super::node::NodeFuture<S> {
    Box::pin(async move {
        let result = run.clone().scope(fut).await;
        match &result {
            Ok(out) if run.is_recording() => run.finish(match out.updates.len() {
                0 => Value::Null,
                1 => serde_json::to_value(&out.updates[0]).unwrap_or(Value::Null),
                _ => serde_json::to_value(&out.updates).unwrap_or(Value::Null),
            }),
            Ok(_) => run.finish(Value::Null),
            Err(e) if e.is_interrupt() => run.finish(json!({"interrupted": e.interrupts()})),
            Err(e) => run.fail(&e.to_string()),
        }
        result
    })
}

/// Runs a node future, turning a panic into a node error.
async fn guarded<S: State>(
    fut: super::node::NodeFuture<S>,
    name: Arc<str>,
) -> Result<NodeOutput<S>, NodeError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(NodeError::msg(format!(
            "node `{name}` panicked: {}",
            panic_message(&panic)
        ))),
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + std::marker::Send>) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_string()
    }
}

/// Rebuilds a state from a loaded checkpoint.
pub(crate) fn restore_state<S: State>(
    schema: &S::Schema,
    loaded: &LoadedCheckpoint,
) -> Result<S, GraphError> {
    let mut state = S::default();
    for channel in &loaded.channels {
        // A channel the state type no longer has (the struct changed) is skipped.
        let Some(index) = crate::state::channel_index::<S>(&channel.name) else {
            continue;
        };
        let deltas: Vec<&[u8]> = channel.deltas.iter().map(Vec::as_slice).collect();
        state
            .restore_channel(schema, index, channel.full.as_deref(), &deltas)
            .map_err(|source| GraphError::State {
                step: loaded.meta.step,
                source,
            })?;
    }
    Ok(state)
}

fn snapshot<S: State>(
    graph: &Graph<S>,
    loaded: LoadedCheckpoint,
) -> Result<StateSnapshot<S>, GraphError> {
    let values = restore_state::<S>(&graph.inner.schema, &loaded)?;
    let mut interrupts = Vec::new();
    let mut errors = Vec::new();
    for w in &loaded.pending_writes {
        match w.channel.as_str() {
            pending::INTERRUPT => {
                if let Ok(list) = serde_json::from_value::<Vec<Interrupt>>(w.value.clone()) {
                    interrupts.extend(list);
                }
            }
            pending::ERROR => errors.push((
                w.task_id.clone(),
                w.value.as_str().unwrap_or_default().to_string(),
            )),
            _ => {}
        }
    }
    Ok(StateSnapshot {
        values,
        next: loaded.meta.next.clone(),
        checkpoint: loaded.meta,
        interrupts,
        errors,
    })
}

fn persistence<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
    what: &'static str,
) -> Result<(Arc<dyn Checkpointer>, String), GraphError> {
    let cp = opts
        .checkpointer
        .clone()
        .or_else(|| graph.checkpointer.clone())
        .ok_or(GraphError::MissingCheckpointer(what))?;
    let thread = opts
        .thread_id
        .clone()
        .ok_or(GraphError::MissingThread(what))?;
    Ok((cp, thread))
}

pub(crate) async fn get_state<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
) -> Result<Option<StateSnapshot<S>>, GraphError> {
    let (cp, thread) = persistence(graph, opts, "get_state")?;
    match cp
        .load(&thread, &opts.namespace, opts.checkpoint_id.as_deref())
        .await?
    {
        Some(loaded) => snapshot(graph, loaded).map(Some),
        None => Ok(None),
    }
}

pub(crate) async fn state_history<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
    limit: Option<usize>,
) -> Result<Vec<StateSnapshot<S>>, GraphError> {
    let (cp, thread) = persistence(graph, opts, "state_history")?;
    let metas = cp.history(&thread, &opts.namespace, limit).await?;
    let mut out = Vec::with_capacity(metas.len());
    for meta in metas {
        if let Some(loaded) = cp.load(&thread, &opts.namespace, Some(&meta.id)).await? {
            out.push(snapshot(graph, loaded)?);
        }
    }
    Ok(out)
}

pub(crate) async fn update_state<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
    update: S::Update,
    as_node: Option<&str>,
) -> Result<String, GraphError> {
    persistence(graph, opts, "update_state")?;
    let mut exec = Exec::start(graph, opts).await?;
    if exec.loaded && opts.checkpoint_id.is_some() && exec.parent != exec.head {
        exec.persist_all(CheckpointSource::Fork).await?;
    }
    exec.step += 1;
    let mut updates = vec![update];
    exec.apply(&mut updates)?;
    if let Some(node) = as_node {
        let i = exec.node_index(node, "update_state")?;
        let (next, sends) = exec.route_from(Some(i), &[])?;
        exec.next = merge_tasks(next, sends, graph.inner.nodes.len());
    }
    exec.pending.clear();
    exec.save(CheckpointSource::Update).await?;
    exec.flush().await?;
    exec.head
        .ok_or_else(|| GraphError::Resume("no checkpoint was written".into()))
}

pub(crate) async fn fork<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
) -> Result<String, GraphError> {
    persistence(graph, opts, "fork")?;
    if opts.checkpoint_id.is_none() {
        return Err(GraphError::Resume(
            "fork needs the checkpoint to fork from: pass `RunOptions::checkpoint_id`".into(),
        ));
    }
    let mut exec = Exec::start(graph, opts).await?;
    if !exec.loaded {
        return Err(GraphError::Resume(
            "the thread has no checkpoints to fork".into(),
        ));
    }
    exec.persist_all(CheckpointSource::Fork).await?;
    exec.flush().await?;
    exec.head
        .ok_or_else(|| GraphError::Resume("no checkpoint was written".into()))
}

/// Reports a run that could not start on its event stream.
pub(crate) async fn emit_failure(graph: &str, opts: &RunOptions, error: &GraphError) {
    if let Some(sink) = &opts.events {
        sink.send(Event {
            event: EventKind::Error,
            name: graph.to_string(),
            run_id: ids::random(),
            parent_ids: opts.parent_ids.clone(),
            data: json!({"message": error.to_string(), "kind": error.kind()}),
            metadata: EventMetadata::default(),
        })
        .await;
    }
}
