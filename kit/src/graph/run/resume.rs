//! Resuming: answers to interrupts, and static interrupts before and after nodes.

use serde_json::{Value, json};

use super::{Exec, TaskSpec};
use crate::checkpoint::{PendingWrite, pending};
use crate::graph::error::GraphError;
use crate::graph::interrupt::{Interrupt, Interrupted, Outcome, Resume};
use crate::graph::node::{interrupt_id, split_namespace, task_id};
use crate::state::State;

impl<S: State> Exec<S> {
    /// Maps a resume payload onto the pending interrupts and records it.
    pub(super) async fn assign_resume(&mut self, resume: Resume) -> Result<(), GraphError> {
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
                    return Err(GraphError::Resume(format!(
                        "{n} interrupts are pending ({}); resume with values keyed by interrupt \
                         id (Resume::ByIds)",
                        pending_ids(&open)
                    )));
                }
            },
            Resume::ByIds(map) => {
                // Found by id in a map: thousands of interrupts may be answered at once.
                let task_of: std::collections::HashMap<&str, &str> = open
                    .iter()
                    .map(|(task, id)| (id.as_str(), task.as_str()))
                    .collect();
                for (id, v) in map {
                    if let Some(task) = task_of.get(id.as_str()) {
                        assigned.push((task.to_string(), id, v));
                    }
                }
                if assigned.is_empty() && !open.is_empty() {
                    return Err(GraphError::Resume(format!(
                        "none of the given ids matches a pending interrupt; pending: {}",
                        pending_ids(&open)
                    )));
                }
            }
        }
        let mut touched = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (task, id, v) in assigned {
            let p = self.pending.entry(task.clone()).or_default();
            p.resume.insert(id, v);
            if seen.insert(task.clone()) {
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
    pub(super) async fn static_interrupt_before(
        &mut self,
    ) -> Result<Option<Outcome<S>>, GraphError> {
        let hits = self.static_hits_before();
        if hits.is_empty() {
            return Ok(None);
        }
        self.pause_static(hits, "before").await.map(Some)
    }

    /// The next step's tasks whose nodes pause before running: (node, task id).
    pub(super) fn static_hits_before(&self) -> Vec<(String, String)> {
        let step = self.step + 1;
        self.next
            .iter()
            .filter(|t| self.inner().nodes[t.node].interrupt_before)
            .map(|t| {
                let node = &self.inner().nodes[t.node].name;
                (node.to_string(), task_id(step, node, t.send_index))
            })
            .collect()
    }

    /// Pauses after nodes marked `interrupt_after`.
    pub(super) async fn static_interrupt_after(
        &mut self,
        tasks: &[TaskSpec],
    ) -> Result<Option<Outcome<S>>, GraphError> {
        let hits = self.static_hits_after(tasks);
        if hits.is_empty() {
            return Ok(None);
        }
        self.pause_static(hits, "after").await.map(Some)
    }

    /// The step's tasks whose nodes pause after running: (node, task id).
    pub(super) fn static_hits_after(&self, tasks: &[TaskSpec]) -> Vec<(String, String)> {
        tasks
            .iter()
            .filter(|t| self.inner().nodes[t.node].interrupt_after)
            .map(|t| {
                let node = &self.inner().nodes[t.node].name;
                (node.to_string(), task_id(self.step, node, t.send_index))
            })
            .collect()
    }

    pub(super) async fn pause_static(
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
        let interrupts = self.static_interrupts(&hits, when);
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

    /// The interrupts of a static pause `when` ("before" or "after") at `hits` (node, task
    /// id): one per task, keyed by `<when>:<task id>`.
    pub(super) fn static_interrupts(
        &self,
        hits: &[(String, String)],
        when: &str,
    ) -> Vec<Interrupt> {
        hits.iter()
            .map(|(node, task)| Interrupt {
                id: interrupt_id(&self.ns, &format!("{when}:{task}"), 0),
                value: json!({ "interrupt": when, "node": node }),
                node: node.clone(),
                namespace: split_namespace(&self.ns),
            })
            .collect()
    }
}

/// The ids of the open interrupts, for an error message: at most 20 named, with the count.
fn pending_ids(open: &[(String, String)]) -> String {
    crate::text::listing(open.iter().map(|(_, id)| id.clone()), open.len(), ", ")
}
