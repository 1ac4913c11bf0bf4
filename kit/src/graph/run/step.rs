//! The end of a step: stop on failure or pause, or apply the updates in declaration order.

use std::sync::Arc;

use serde_json::Value;

use super::{Exec, TaskSpec};
use crate::checkpoint::{CheckpointSource, PendingWrite, pending};
use crate::event::{Event, EventData, EventKind, LazyJson};
use crate::graph::error::GraphError;
use crate::graph::interrupt::{Interrupt, Interrupted, Outcome};
use crate::graph::node::{NodeError, NodeErrorKind, NodeOutput, task_id};
use crate::state::State;

/// How long a streamed run of nodes that never wait holds the thread before its consumer gets a
/// turn.
const STREAM_LATENCY: std::time::Duration = std::time::Duration::from_micros(50);

impl<S: State> Exec<S> {
    /// A step that failed or paused: keep the successful tasks' outputs as pending writes, so a
    /// resume re-runs only the others.
    pub(super) async fn stop_step(
        &mut self,
        tasks: Vec<TaskSpec>,
        outputs: Vec<NodeOutput<S>>,
        interrupts: Vec<(usize, Vec<Interrupt>)>,
        failure: Option<(usize, NodeError)>,
    ) -> Result<Outcome<S>, GraphError> {
        // A set: a step of thousands of tasks may pause in every one.
        let interrupted_at: std::collections::HashSet<usize> =
            interrupts.iter().map(|(i, _)| *i).collect();
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
                    value: super::codec::encode_output(&outputs[i]),
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
    pub(super) async fn finish_step(
        &mut self,
        tasks: &[TaskSpec],
        mut outputs: Vec<NodeOutput<S>>,
    ) -> Result<(), GraphError> {
        let mut updates: Vec<S::Update> = Vec::new();
        let node_ends = self.events_of(EventKind::NodeEnd).is_some();
        let mut node_end_events: Vec<Event> =
            Vec::with_capacity(if node_ends { tasks.len() } else { 0 });
        for (i, (task, out)) in tasks.iter().zip(outputs.iter_mut()).enumerate() {
            if node_ends {
                // The task's run id, which its node_start and its own events carry (taken:
                // the list is cleared before the next step's tasks).
                let run_id = match self.task_run_ids.get_mut(i).filter(|id| !id.is_empty()) {
                    Some(id) => std::mem::take(id),
                    None => crate::ids::random(),
                };
                let node = &self.inner().nodes[task.node];
                // Written as text now; a consumer that reads it pays for the `Value`.
                let update = match out.updates.len() {
                    0 => Ok(LazyJson::null()),
                    1 => LazyJson::write(&out.updates[0]),
                    _ => LazyJson::write(&out.updates),
                }
                .unwrap_or_else(|_| LazyJson::null());
                let data = EventData::NodeEnd {
                    update,
                    cached: out.cached,
                };
                node_end_events.push(self.node_event(data, &node.name, run_id));
            }
            join(&mut updates, std::mem::take(&mut out.updates));
        }
        self.apply(&mut updates)?;
        self.schedule(
            tasks
                .iter()
                .zip(&outputs)
                .map(|(task, out)| (Some(task.node), out.goto.as_slice())),
        )?;
        self.save(CheckpointSource::Loop).await?;
        let Some(sink) = &self.run.options.events else {
            return Ok(());
        };
        for event in node_end_events {
            sink.send(event).await;
        }
        self.send_checkpoint_events().await;
        if let Some(sink) = self.events_of(EventKind::Values) {
            let state = serde_json::to_value(&*self.state).unwrap_or(Value::Null);
            sink.send(self.event(EventData::Values(state))).await;
        }
        self.let_consumer_run().await;
        Ok(())
    }

    /// Lets the stream's consumer see the events sent so far: after the first step, then at
    /// most every [`STREAM_LATENCY`]. A run of sync nodes never waits on anything, so on a
    /// single-threaded runtime it would otherwise hold the thread until the channel fills;
    /// yielding after every step instead costs a poll of tokio's I/O driver (a system call)
    /// per step, a quarter of a cheap step's cost.
    async fn let_consumer_run(&mut self) {
        let now = std::time::Instant::now();
        if self
            .last_yield
            .is_none_or(|last| now.duration_since(last) >= STREAM_LATENCY)
        {
            tokio::task::yield_now().await;
            self.last_yield = Some(now);
        }
    }

    /// Applies updates to the state (copy-on-write only if a node kept a snapshot alive).
    pub(super) fn apply(&mut self, updates: &mut Vec<S::Update>) -> Result<(), GraphError> {
        let record = self.persist.is_some();
        let state = Arc::make_mut(&mut self.state);
        state
            .apply(&self.graph.inner.schema, updates, &mut self.changes, record)
            .map_err(|source| GraphError::State {
                step: self.step,
                source,
            })
    }
}

/// Appends `more` to `list`, or takes it whole while `list` is empty: a step of one task (the
/// common case) then builds no list of its own for updates, routes or `Send`s.
fn join<T>(list: &mut Vec<T>, mut more: Vec<T>) {
    if list.is_empty() {
        *list = more;
    } else {
        list.append(&mut more);
    }
}
