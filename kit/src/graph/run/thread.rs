//! Reading and editing a thread: its state, history, updates and forks.

use std::sync::Arc;

use super::Exec;
use super::codec::Body;
use crate::checkpoint::{CheckpointSource, Checkpointer, LoadedCheckpoint, pending};
use crate::event::Event;
use crate::graph::error::GraphError;
use crate::graph::interrupt::Interrupt;
use crate::graph::node::task_id;
use crate::graph::options::RunOptions;
use crate::graph::{Graph, StateSnapshot, TaskSnapshot};
use crate::state::State;

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

pub(super) fn snapshot<S: State>(
    graph: &Graph<S>,
    loaded: LoadedCheckpoint,
) -> Result<StateSnapshot<S>, GraphError> {
    let values = restore_state::<S>(&graph.inner.schema, &loaded)?;
    let mut interrupts = Vec::new();
    let mut errors = Vec::new();
    // The tasks of the step this checkpoint leads to, with what each left behind when that
    // step stopped (a sibling failed or paused): its output, its interrupts, its error.
    let body: Body = serde_json::from_slice(&loaded.body).unwrap_or_default();
    let step = loaded.meta.step + 1;
    let mut tasks: Vec<TaskSnapshot> = body
        .next
        .iter()
        .map(|t| TaskSnapshot {
            id: task_id(step, &t.node, t.send),
            name: t.node.clone(),
            error: None,
            interrupts: Vec::new(),
            writes_saved: false,
            result: None,
        })
        .collect();
    // Each write's task found by id in a map: a step of thousands of tasks has as many writes.
    let at: std::collections::HashMap<String, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (t.id.clone(), i))
        .collect();
    for w in &loaded.pending_writes {
        // A static pause before a task is written under `before:<task id>`.
        let id = w.task_id.strip_prefix("before:").unwrap_or(&w.task_id);
        let task = at.get(id).and_then(|&i| tasks.get_mut(i));
        match w.channel.as_str() {
            pending::INTERRUPT => {
                if let Ok(list) = serde_json::from_value::<Vec<Interrupt>>(w.value.clone()) {
                    if let Some(task) = task {
                        task.interrupts.extend(list.iter().cloned());
                    }
                    interrupts.extend(list);
                }
            }
            pending::ERROR => {
                let message = w.value.as_str().unwrap_or_default().to_string();
                if let Some(task) = task {
                    task.error = Some(message.clone());
                }
                errors.push((w.task_id.clone(), message));
            }
            pending::OUTPUT => {
                if let Some(task) = task {
                    task.writes_saved = true;
                    task.result = Some(w.value.clone());
                }
            }
            _ => {}
        }
    }
    // A task whose writes are saved will not run again: only the others are still due.
    let next = tasks
        .iter()
        .filter(|t| !t.writes_saved)
        .map(|t| t.name.clone())
        .collect();
    Ok(StateSnapshot {
        values,
        next,
        checkpoint: loaded.meta,
        interrupts,
        errors,
        tasks,
    })
}

pub(super) fn persistence<S: State>(
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
    // Checked before anything is written: a wrong name must not leave the thread forked.
    let as_node = as_node
        .map(|node| exec.node_index(node, "update_state"))
        .transpose()?;
    if exec.loaded && opts.checkpoint_id.is_some() && exec.parent != exec.head {
        exec.persist_all(CheckpointSource::Fork).await?;
    }
    exec.step += 1;
    let mut updates = vec![update];
    exec.apply(&mut updates)?;
    if let Some(i) = as_node {
        exec.schedule([(Some(i), &[][..])])?;
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
        let mut event = Event::error(graph, error.to_string(), error.kind());
        event.parent_ids = opts.parent_ids.clone();
        sink.send(event).await;
    }
}
