//! Reading and editing a thread: its state, history, updates and forks.

use std::sync::Arc;

use super::{Exec, merge_tasks};
use crate::checkpoint::{CheckpointSource, Checkpointer, LoadedCheckpoint, pending};
use crate::event::Event;
use crate::graph::error::GraphError;
use crate::graph::interrupt::Interrupt;
use crate::graph::options::RunOptions;
use crate::graph::{Graph, StateSnapshot};
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
        let mut event = Event::error(graph, error.to_string(), error.kind());
        event.parent_ids = opts.parent_ids.clone();
        sink.send(event).await;
    }
}
