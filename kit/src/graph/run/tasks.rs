//! Launching the tasks of a step: one future per task, traced, panics caught.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::sync::atomic::AtomicUsize;

use futures::FutureExt;
use serde_json::{Value, json};

use super::{Exec, TaskSpec};
use crate::event::{EventData, EventKind};
use crate::graph::node::{NodeContext, NodeError, NodeOutput, TaskContext, task_id};
use crate::ids;
use crate::state::State;

impl<S: State> Exec<S> {
    /// Runs the step's tasks concurrently; reuses stored outputs of tasks that already
    /// succeeded (a resumed step). Results are in task order.
    pub(super) async fn run_tasks(
        &mut self,
        tasks: &[TaskSpec],
    ) -> Vec<Result<NodeOutput<S>, NodeError>> {
        let mut results: Vec<Option<Result<NodeOutput<S>, NodeError>>> =
            (0..tasks.len()).map(|_| None).collect();
        // The first future is kept apart: a step of one task (a chain's every step) then runs
        // it with no list of futures at all.
        let mut first = None;
        let mut futures = Vec::with_capacity(tasks.len().saturating_sub(1));
        let streaming = self.run.options.events.is_some();
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
                        results[i] = Some(super::codec::decode_output(stored));
                        continue;
                    }
                    resume = std::mem::take(&mut p.resume);
                }
            }
            let run_id = streaming.then(ids::random);
            if let Some(id) = &run_id {
                self.task_run_ids.resize(i, String::new());
                self.task_run_ids.push(id.clone());
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
                    run_id: crate::graph::node::task_run_id(run_id),
                }),
            };
            if let Some(sink) = self.events_of(EventKind::NodeStart) {
                let data = EventData::NodeStart {
                    task_id: ctx.task_id(),
                };
                sink.send(ctx.task_event(data)).await;
            }
            let fut = match node.retry.clone() {
                None => attempt(
                    node,
                    self.state.clone(),
                    ctx,
                    traced.then_some(&self.trace),
                    1,
                ),
                Some(policy) => retrying(
                    graph.clone(),
                    task.node,
                    self.state.clone(),
                    ctx,
                    traced.then(|| self.trace.clone()),
                    policy,
                ),
            };
            let fut = match (&node.cache, &self.graph.cache) {
                (Some(policy), Some(store)) => cached(
                    fut,
                    policy.clone(),
                    store.clone(),
                    format!("{}:{}", graph.name, node.name),
                    self.state.clone(),
                    task.arg.as_ref().map(crate::graph::node::SendArg::to_json),
                ),
                _ => fut,
            };
            if first.is_none() {
                first = Some((i, fut, node.name.clone()));
            } else {
                futures.push((i, fut, node.name.clone()));
            }
        }
        let limit = self
            .run
            .options
            .max_concurrency
            .filter(|n| futures.len() >= *n);
        if futures.is_empty() {
            if let Some((i, fut, name)) = first {
                results[i] = Some(guarded(fut, name).await);
            }
        } else if let Some(limit) = limit {
            // Limited: no task starts before it has a place, not even for a first poll, and
            // a place frees as soon as its task ends, whatever the order.
            // Collected first: a lazy iterator's closure held across the await below would
            // not be `Send` for every lifetime.
            let runs: Vec<_> = first
                .into_iter()
                .chain(futures)
                .map(|(i, fut, name)| futures::FutureExt::map(guarded(fut, name), move |r| (i, r)))
                .collect();
            let mut done = futures::StreamExt::buffer_unordered(futures::stream::iter(runs), limit);
            while let Some((i, r)) = futures::StreamExt::next(&mut done).await {
                results[i] = Some(r);
            }
        } else {
            // Most nodes of a wide step finish at their first poll (sync nodes, cache hits):
            // those are polled here in task order, and only the rest get the machinery of
            // running concurrently (a task each in `join_all`).
            let mut waiting = Vec::new();
            for (i, mut fut, name) in first.into_iter().chain(futures) {
                match first_poll(&mut fut, &name) {
                    Some(result) => results[i] = Some(result),
                    None => waiting.push((i, guarded(fut, name))),
                }
            }
            let (indices, futs): (Vec<usize>, Vec<_>) = waiting.into_iter().unzip();
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
}

/// One attempt of a task: the node's future (a panic while creating it is caught too, not only
/// while polling it), inside its own trace run when the run is traced.
pub(super) fn attempt<S: State>(
    node: &crate::graph::CompiledNode<S>,
    state: Arc<S>,
    ctx: NodeContext,
    trace: Option<&crate::trace::Run>,
    number: u32,
) -> crate::graph::node::NodeFuture<S> {
    // Only a traced run needs the task id (formatting it costs an allocation per step).
    let task_id = trace.map(|_| ctx.task_id());
    let fut = match std::panic::catch_unwind(AssertUnwindSafe(|| (node.func)(state, ctx))) {
        Ok(fut) => fut,
        Err(panic) => {
            let text = crate::text::panic_text(panic.as_ref());
            let message = format!(
                "node `{}` panicked: {}",
                node.name,
                text.unwrap_or("unknown panic payload")
            );
            Box::pin(std::future::ready(Err(NodeError::msg(message))))
        }
    };
    match (trace, task_id) {
        (Some(trace), Some(task_id)) => {
            let node_run = trace.child(&node.name, crate::trace::RunKind::Node, || {
                if number == 1 {
                    json!({ "task_id": task_id })
                } else {
                    json!({ "task_id": task_id, "attempt": number })
                }
            });
            traced_node(node_run, fut)
        }
        _ => fut,
    }
}

/// A task whose node has a retry policy: attempts until one succeeds, pauses, or the policy
/// gives up. A failed attempt's writes are never applied (it has none).
pub(super) fn retrying<S: State>(
    graph: Arc<crate::graph::GraphInner<S>>,
    node: usize,
    state: Arc<S>,
    ctx: NodeContext,
    trace: Option<crate::trace::Run>,
    policy: Arc<crate::graph::RetryPolicy>,
) -> crate::graph::node::NodeFuture<S> {
    Box::pin(async move {
        let node = &graph.nodes[node];
        let mut number = 1u32;
        let mut ctx = ctx;
        loop {
            let fut = attempt(node, state.clone(), ctx.clone(), trace.as_ref(), number);
            match guarded(fut, node.name.clone()).await {
                Err(e) if policy.retries(&e, number) => {
                    let delay = policy.delay(number);
                    number += 1;
                    if let Some(sink) = ctx.events_of(EventKind::NodeRetry) {
                        let data = EventData::NodeRetry {
                            task_id: ctx.task_id(),
                            attempt: number,
                            error: e.to_string(),
                            delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                        };
                        sink.send(ctx.task_event(data)).await;
                    }
                    tokio::time::sleep(delay).await;
                    ctx = ctx.next_attempt();
                }
                result => return result,
            }
        }
    })
}

/// A task whose node has a cache policy: the stored output for its input when there is one,
/// else the node's output, stored for next time. The store's failures never fail the task.
pub(super) fn cached<S: State>(
    run: crate::graph::node::NodeFuture<S>,
    policy: Arc<crate::graph::CachePolicy<S>>,
    store: Arc<dyn crate::graph::NodeCache>,
    namespace: String,
    state: Arc<S>,
    arg: Option<Value>,
) -> crate::graph::node::NodeFuture<S> {
    Box::pin(async move {
        let key = policy.key_of(&state, arg.as_ref());
        match store.get(&namespace, &key).await {
            Ok(Some(stored)) => match super::codec::decode_output::<S>(stored) {
                Ok(mut out) => {
                    out.cached = true;
                    return Ok(out);
                }
                Err(e) => {
                    tracing::warn!(%namespace, error = %e, "unreadable cache entry; running the node")
                }
            },
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(%namespace, error = %e, "node cache unavailable; running the node")
            }
        }
        let result = run.await;
        if let Ok(out) = &result {
            let stored = super::codec::encode_output(out);
            if let Err(e) = store
                .put(&namespace, &key, stored, policy.time_to_live())
                .await
            {
                tracing::warn!(%namespace, error = %e, "could not store a node's output in its cache");
            }
        }
        result
    })
}

/// Runs a node future inside its trace run, recording its update or error.
pub(super) fn traced_node<S: State>(
    run: crate::trace::Run,
    fut: crate::graph::node::NodeFuture<S>,
) -> crate::graph::node::NodeFuture<S> {
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

/// Polls a node future once (without a waker to wake: a future not done re-registers when it is
/// polled again); its result if it finished, with a panic turned into a node error.
fn first_poll<S: State>(
    fut: &mut crate::graph::node::NodeFuture<S>,
    name: &str,
) -> Option<Result<NodeOutput<S>, NodeError>> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| fut.now_or_never())) {
        Ok(done) => done,
        Err(panic) => Some(Err(NodeError::msg(format!(
            "node `{name}` panicked: {}",
            crate::text::panic_text(panic.as_ref()).unwrap_or("unknown panic payload")
        )))),
    }
}

/// Runs a node future, turning a panic into a node error.
pub(super) async fn guarded<S: State>(
    fut: crate::graph::node::NodeFuture<S>,
    name: Arc<str>,
) -> Result<NodeOutput<S>, NodeError> {
    match AssertUnwindSafe(fut).catch_unwind().await {
        Ok(result) => result,
        Err(panic) => Err(NodeError::msg(format!(
            "node `{name}` panicked: {}",
            crate::text::panic_text(panic.as_ref()).unwrap_or("unknown panic payload")
        ))),
    }
}
