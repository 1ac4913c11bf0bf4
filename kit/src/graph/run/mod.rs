//! The superstep executor: the step loop of one run.

mod codec;
mod drive;
mod lease;
mod persist;
mod resume;
mod route;
mod step;
mod tasks;
mod thread;
mod warm;

use codec::Body;
pub use drive::{DriverNext, StepDriver, StepTask, TaskResult};
pub(crate) use lease::run as run_leased;
use persist::ChannelStats;
use route::Routing;
pub(crate) use thread::{
    emit_failure, fork, get_state, restore_state, state_history, update_state,
};
pub use warm::DEFAULT_WARM_THREADS;
use warm::WarmThread;
pub(crate) use warm::WarmThreads;

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde_json::{Value, json};

use super::cancel::CancelToken;
use super::error::GraphError;
use super::interrupt::{Interrupt, Outcome, Resume};
use super::node::{NodeError, NodeErrorKind, NodeOutput, RunContext, SendArg};
use super::options::{DEFAULT_RECURSION_LIMIT, RunOptions};
use super::{Graph, GraphInner};
use crate::checkpoint::{
    CheckpointError, CheckpointSource, CheckpointWrite, Checkpointer, LoadedCheckpoint, pending,
};
use crate::event::{Event, EventData, EventKind, EventMetadata, EventSink, RunEndStatus};
use crate::ids;
use crate::state::{ChannelChange, State};

pub(crate) enum RunInput<S: State> {
    Input(S::Update),
    /// A resume, with an update applied before the resumed step runs (a `Command`).
    Resume(Resume, Option<S::Update>),
}

/// A task due in the next superstep.
#[derive(Clone)]
struct TaskSpec {
    node: usize,
    send_index: Option<usize>,
    arg: Option<SendArg>,
}

pub(crate) struct Exec<S: State> {
    graph: Graph<S>,
    /// Set when the run persists: a checkpointer and a thread id.
    persist: Option<(Arc<dyn Checkpointer>, String)>,
    ns: String,
    state: Arc<S>,
    step: i64,
    next: Vec<TaskSpec>,
    /// Where the step after `next` is routed (buffers reused from step to step).
    routing: Routing,
    joins: Vec<u64>,
    /// Each channel's version: shared with the checkpoint written last, changed in place
    /// once that write is done with it.
    versions: Arc<BTreeMap<String, String>>,
    stats: Vec<ChannelStats>,
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
    /// When a streamed run last let its consumer run (see [`Exec::let_consumer_run`]).
    last_yield: Option<std::time::Instant>,
    /// A checkpoint write of the async durability mode, polled while the next step runs.
    inflight: Option<futures::future::BoxFuture<'static, Result<(), CheckpointError>>>,
    /// This invocation's run in the trace tree.
    trace: crate::trace::Run,
    /// Buffers for the parts of each step's checkpoint.
    scratch: persist::WriteScratch,
    /// The exit durability mode's one checkpoint, built up step by step (boxed: most runs
    /// never have one, and a run's state should stay small).
    exit_buffer: Option<Box<CheckpointWrite>>,
    /// Checkpoints (id, step) that became durable and were not reported yet (streamed runs).
    durable: Vec<(String, i64)>,
    /// The checkpoint of the write in flight (`Durability::Async`).
    inflight_checkpoint: Option<(String, i64)>,
    /// The checkpoint the exit buffer becomes (`Durability::Exit`).
    exit_checkpoint: Option<(String, i64)>,
    /// What every task of the run shares, the run's options among them (the executor reads
    /// them there rather than holding a copy of its own).
    run: Arc<RunContext>,
    /// Called once the run's outcome is durable, before it is reported (a leased run leaves
    /// its thread here, so a consumer that sees `run_end` finds the thread free).
    settled: Option<Settled>,
}

/// What [`Exec::run`] calls once the outcome is durable.
pub(crate) type Settled = Box<dyn FnOnce() -> futures::future::BoxFuture<'static, ()> + Send>;

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
        // The run holds its thread's lease; what it runs inside must not wait for it.
        node_options.multitask = None;
        let run_id = node_options.run_id.take().unwrap_or_else(ids::random);
        if let Some((cp, _)) = &persist {
            node_options.checkpointer = Some(cp.clone());
        }
        let store = opts
            .store
            .clone()
            .or_else(|| graph.store.clone())
            .or_else(|| opts.parent_store.clone());
        let run = Arc::new(RunContext {
            graph_name: graph.inner.name.clone(),
            options: node_options,
            store,
            ns: ns.clone(),
            run_id,
        });
        let mut exec = Exec {
            graph: graph.clone(),
            persist,
            ns,
            state: Arc::new(S::default()),
            // The input of a new thread is step -1, its first superstep step 0.
            step: -2,
            next: Vec::new(),
            routing: Routing::default(),
            joins: vec![0; graph.inner.joins.len()],
            versions: Arc::default(),
            stats: vec![ChannelStats::default(); S::channels().len()],
            head: None,
            parent: None,
            loaded: false,
            pending: HashMap::new(),
            changes: Vec::new(),
            task_run_ids: Vec::new(),
            last_yield: None,
            inflight: None,
            trace: crate::trace::Run::disabled(),
            scratch: persist::WriteScratch::default(),
            exit_buffer: None,
            durable: Vec::new(),
            inflight_checkpoint: None,
            exit_checkpoint: None,
            run,
            settled: None,
        };
        if let Some((cp, thread)) = exec.persist.clone() {
            // A thread this graph finished and nobody moved since goes on from the state the
            // last run left (see `warm`); anything else is loaded.
            if opts.checkpoint_id.is_none()
                && let Some(warm) = graph.inner.warm.take(&thread, &exec.ns)
                && cp.head(&thread, &exec.ns).await?.as_deref() == Some(warm.head.as_str())
            {
                exec.resume_warm(warm);
                return Ok(exec);
            }
            let loaded = cp
                .load(&thread, &exec.ns, opts.checkpoint_id.as_deref())
                .await?;
            if let Some(loaded) = loaded {
                exec.restore(loaded)?;
            }
        }
        Ok(exec)
    }

    /// Goes on from a finished thread's kept state: what [`restore`](Self::restore) of its head
    /// checkpoint would produce, without reading it.
    fn resume_warm(&mut self, warm: WarmThread<S>) {
        self.state = Arc::new(warm.state);
        self.step = warm.step;
        self.versions = warm.versions;
        if warm.stats.len() == self.stats.len() {
            self.stats = warm.stats;
        }
        if warm.joins.len() == self.joins.len() {
            self.joins = warm.joins;
        }
        self.head = Some(warm.head.clone());
        self.parent = Some(warm.head);
        self.loaded = true;
    }

    /// Keeps a completed run's state for the next run on its thread (see `warm`). Only once
    /// every checkpoint is durable, and only when the thread's head holds exactly this state.
    fn keep_warm(&mut self, state: &S) {
        let warm = &self.graph.inner.warm;
        // Changes not written (an update applied by a resume with no step after it) are not in
        // the head checkpoint: the state is not what loading it gives. A run inside another
        // (a subgraph, a subagent's task) has a namespace named after its task, which no later
        // run uses again: kept, it would only pin a dead copy of its state.
        if !warm.enabled()
            || !self.next.is_empty()
            || !self.pending.is_empty()
            || !self.changes.is_empty()
            || !self.run.options.parent_ids.is_empty()
        {
            return;
        }
        let (Some((_, thread)), Some(head)) = (&self.persist, &self.head) else {
            return;
        };
        warm.keep(
            thread.clone(),
            self.ns.clone(),
            WarmThread {
                head: head.clone(),
                step: self.step,
                state: state.clone(),
                versions: std::mem::take(&mut self.versions),
                stats: std::mem::take(&mut self.stats),
                joins: std::mem::take(&mut self.joins),
            },
        );
    }

    /// Sets what [`run`](Self::run) calls once its outcome is durable.
    pub(crate) fn on_settled(&mut self, settled: Settled) {
        self.settled = Some(settled);
    }

    pub(super) fn inner(&self) -> &GraphInner<S> {
        &self.graph.inner
    }

    pub(super) fn restore(&mut self, loaded: LoadedCheckpoint) -> Result<(), GraphError> {
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
                self.stats[i] = ChannelStats {
                    full_bytes: channel.full.as_ref().map_or(0, |f| f.len() as u64),
                    delta_bytes: channel.deltas.iter().map(|d| d.len() as u64).sum(),
                };
            }
        }
        self.step = loaded.meta.step;
        self.versions = Arc::new(loaded.channel_versions);
        self.head = Some(loaded.head.clone());
        self.parent = Some(loaded.meta.id.clone());
        // A pending write that does not read is an error, as a body that does not read is:
        // taken as empty, its answers would vanish and its task run again.
        let checkpoint = &loaded.meta.id;
        let unreadable = |write: &str, task: &str, e: serde_json::Error| {
            CheckpointError::Corrupt(format!(
                "checkpoint {checkpoint}: the {write} write of task {task} does not read ({e})"
            ))
        };
        for write in loaded.pending_writes {
            let entry = self.pending.entry(write.task_id.clone()).or_default();
            match write.channel.as_str() {
                pending::OUTPUT => entry.output = Some(write.value),
                // `null` is what kit writes should a list not serialize: nothing.
                pending::INTERRUPT if write.value.is_null() => {}
                pending::RESUME if write.value.is_null() => {}
                pending::INTERRUPT => {
                    entry.interrupts = serde_json::from_value(write.value)
                        .map_err(|e| unreadable(pending::INTERRUPT, &write.task_id, e))?;
                }
                pending::RESUME => {
                    entry.resume = serde_json::from_value(write.value)
                        .map_err(|e| unreadable(pending::RESUME, &write.task_id, e))?;
                }
                pending::ERROR => entry.error = write.value.as_str().map(String::from),
                _ => {}
            }
        }
        self.loaded = true;
        Ok(())
    }

    pub(super) fn node_index(&self, name: &str, from: &str) -> Result<usize, GraphError> {
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

    pub(super) fn known_nodes(&self) -> String {
        let mut names: Vec<&str> = self.inner().nodes.iter().map(|n| &*n.name).collect();
        names.sort_unstable();
        names.join(", ")
    }

    /// Runs to completion, an interrupt or an error, and reports the outcome on the stream.
    ///
    /// Not an `async fn`: its arguments would be held twice in its state (as arguments and as
    /// the locals they move into), and this future is the biggest a run keeps.
    #[expect(
        clippy::manual_async_fn,
        reason = "an async fn holds its arguments twice"
    )]
    pub(crate) fn run(
        mut self,
        input: RunInput<S>,
    ) -> impl Future<Output = Result<Outcome<S>, GraphError>> {
        async move {
            self.trace = self.start_trace(&input);
            let trace = self.trace.clone();
            let cancel = self.run.options.cancel.clone();
            let run = trace.clone().scope(self.run_inner(input));
            let result = match cancel {
                None => run.await,
                // Cancelling drops the run where it is: its nodes, tools and requests with it.
                Some(token) => tokio::select! {
                    biased;
                    () = token.cancelled() => Err(GraphError::Cancelled),
                    result = run => result,
                },
            };
            let result = match result {
                // Nothing is reported as done before every checkpoint is durable.
                Ok(outcome) => match self.flush().await {
                    Ok(()) => {
                        if let Outcome::Done(state) = &outcome {
                            self.keep_warm(state);
                        }
                        Ok(outcome)
                    }
                    Err(e) => Err(e),
                },
                Err(e) => {
                    let _ = self.flush().await;
                    Err(e)
                }
            };
            if let Some(settled) = self.settled.take() {
                settled().await;
            }
            self.send_checkpoint_events().await;
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
            if let Some(sink) = self.run.options.events.clone() {
                match &result {
                    Ok(Outcome::Done(state)) => {
                        let output = serde_json::to_value(state).unwrap_or(Value::Null);
                        let data = EventData::RunEnd {
                            status: RunEndStatus::Done,
                            output: Some(output),
                            interrupts: None,
                        };
                        sink.send(self.event(data)).await;
                    }
                    Ok(Outcome::Interrupted(i)) => {
                        let interrupts = serde_json::to_value(&i.interrupts).unwrap_or(Value::Null);
                        let data = EventData::Interrupt {
                            interrupts: interrupts.clone(),
                        };
                        sink.send(self.event(data)).await;
                        let data = EventData::RunEnd {
                            status: RunEndStatus::Interrupted,
                            output: None,
                            interrupts: Some(interrupts),
                        };
                        sink.send(self.event(data)).await;
                    }
                    // One `cancelled` event for the whole run: a subgraph's or subagent's run,
                    // cancelled with it, says nothing of its own.
                    Err(GraphError::Cancelled) if !self.ns.is_empty() => {}
                    Err(GraphError::Cancelled) => {
                        let reason = self
                            .run
                            .options
                            .cancel
                            .as_ref()
                            .and_then(CancelToken::reason);
                        let data = EventData::Cancelled {
                            reason: reason.unwrap_or("the run was cancelled").into(),
                        };
                        sink.send(self.event(data)).await;
                    }
                    Err(e) => {
                        let data = EventData::Error {
                            message: e.to_string(),
                            kind: (self.inner().error_kind)(e).to_string(),
                        };
                        sink.send(self.event(data)).await;
                    }
                }
            }
            result
        }
    }

    /// Starts this invocation's trace run: a root run, or a child of the current one (a
    /// subgraph inside a node or tool). `trace: false` options suppress it and its children.
    pub(super) fn start_trace(&self, input: &RunInput<S>) -> crate::trace::Run {
        let options = self.run.options.trace.as_deref().cloned();
        if options.as_ref().is_some_and(|o| !o.is_enabled()) {
            return crate::trace::Run::disabled();
        }
        let tracer = self
            .run
            .options
            .tracer
            .clone()
            .unwrap_or_else(crate::trace::global);
        let mut options = options.unwrap_or_default();
        if options.thread_id.is_none() {
            options.thread_id = self.run.options.thread_id.clone();
        }
        let kind = self
            .run
            .options
            .trace_kind
            .unwrap_or(crate::trace::RunKind::Graph);
        tracer.start(
            &self.graph.inner.name,
            kind,
            || match input {
                RunInput::Input(update) => serde_json::to_value(update).unwrap_or(Value::Null),
                RunInput::Resume(resume, update) => json!({
                    "resume": resume.to_json(),
                    "update": update.as_ref().map(|u| serde_json::to_value(u).unwrap_or(Value::Null)),
                }),
            },
            Some(&options),
        )
    }

    pub(super) async fn run_inner(&mut self, input: RunInput<S>) -> Result<Outcome<S>, GraphError> {
        if let Some(sink) = &self.run.options.events {
            let data = match &input {
                RunInput::Input(u) => EventData::RunStart {
                    input: Some(serde_json::to_value(u).unwrap_or(Value::Null)),
                    resume: false,
                },
                RunInput::Resume(..) => EventData::RunStart {
                    input: None,
                    resume: true,
                },
            };
            sink.send(self.event(data)).await;
        }
        // Running from an older checkpoint forks the thread there.
        if self.loaded && self.run.options.checkpoint_id.is_some() && self.parent != self.head {
            self.persist_all(CheckpointSource::Fork).await?;
        }
        let mut skip_before = false;
        match input {
            RunInput::Input(update) => {
                self.take_input(update)?;
                self.save(CheckpointSource::Input).await?;
                self.send_checkpoint_events().await;
            }
            RunInput::Resume(resume, update) => {
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
                // Going on from a pause does not pause again before the same step: the run
                // was stopped there already (LangGraph marks the channels as seen on resume),
                // also when the state was edited in between (`update_state`, or `update` here).
                skip_before = true;
                self.assign_resume(resume).await?;
                if let Some(update) = update {
                    // Seen by the resumed step; saved with that step's checkpoint.
                    let mut updates = vec![update];
                    self.apply(&mut updates)?;
                }
            }
        }
        let limit = self
            .run
            .options
            .recursion_limit
            .or(self.inner().recursion_limit)
            .unwrap_or(DEFAULT_RECURSION_LIMIT);
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
                    // Durable now: reported with the others (the next write would replace it).
                    self.durable.extend(self.inflight_checkpoint.take());
                    results
                }
            };

            let mut interrupts: Vec<(usize, Vec<Interrupt>)> = Vec::new();
            let mut failure: Option<(usize, NodeError)> = None;
            // Collected in place: the outputs take the results' allocation.
            let outputs: Vec<NodeOutput<S>> = results
                .into_iter()
                .enumerate()
                .map(|(i, result)| match result {
                    Ok(out) => out,
                    Err(e) => {
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
                        NodeOutput::new()
                    }
                })
                .collect();
            if failure.is_some() || !interrupts.is_empty() {
                return self.stop_step(tasks, outputs, interrupts, failure).await;
            }
            self.finish_step(&tasks, outputs).await?;
            if let Some(outcome) = self.static_interrupt_after(&tasks).await? {
                return Ok(outcome);
            }
            self.routing.recycle(tasks);
        }
        let state = std::mem::replace(&mut self.state, Arc::new(S::default()));
        Ok(Outcome::Done(
            Arc::try_unwrap(state).unwrap_or_else(|s| (*s).clone()),
        ))
    }

    /// Takes a run's input (step -1 of a new thread): the declared initial values first on a
    /// new thread, then `update`, then the tasks START triggers.
    pub(super) fn take_input(&mut self, update: S::Update) -> Result<(), GraphError> {
        self.pending.clear();
        self.step += 1;
        // A new thread starts from the declared initial values, then takes its input.
        if !self.loaded
            && let Some(initial) = S::initial(&self.graph.inner.schema)
        {
            self.apply(&mut vec![initial])?;
        }
        let mut updates = vec![update];
        self.apply(&mut updates)?;
        self.schedule([(None, &[][..])])
    }

    /// The run's event stream, when it carries events of `kind` (checked before building one).
    pub(super) fn events_of(&self, kind: EventKind) -> Option<&EventSink> {
        self.run
            .options
            .events
            .as_ref()
            .filter(|sink| sink.wants(kind))
    }

    /// An event of the run itself (`run_start`, `checkpoint`, `run_end`, …).
    pub(super) fn event(&self, data: EventData) -> Event {
        Event {
            data,
            name: self.inner().name.to_string(),
            run_id: self.run.run_id.clone(),
            parent_ids: self.run.options.parent_ids.clone(),
            metadata: EventMetadata {
                step: u64::try_from(self.step).ok(),
                ..EventMetadata::default()
            },
        }
    }

    /// An event of the task of `node` whose run id is `run_id` (a `node_end`).
    pub(super) fn node_event(&self, data: EventData, node: &str, run_id: String) -> Event {
        let mut parent_ids = Vec::with_capacity(self.run.options.parent_ids.len() + 1);
        parent_ids.extend_from_slice(&self.run.options.parent_ids);
        parent_ids.push(self.run.run_id.clone());
        Event {
            data,
            name: node.to_string(),
            run_id,
            parent_ids,
            metadata: EventMetadata {
                node: Some(node.to_string()),
                step: u64::try_from(self.step).ok(),
                ..EventMetadata::default()
            },
        }
    }
}
