//! What a checkpoint stores besides channels: the tasks due, join barriers, task outputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::graph::node::{Goto, NodeError, NodeOutput, SendArg};
use crate::json::Verbatim;
use crate::state::State;

/// Executor data stored with each checkpoint: the tasks due and the join barriers. Written
/// straight to bytes from borrowed data (no intermediate JSON tree).
#[derive(Serialize)]
pub(super) struct BodyOut<'a> {
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) next: &'a [TaskOut<'a>],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    pub(super) joins: &'a [u64],
}

/// A task due, as [`BodyOut`] writes it: read back as a [`TaskRecord`].
#[derive(Serialize)]
pub(super) struct TaskOut<'a> {
    pub(super) node: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) send: Option<usize>,
    /// A `Send`'s argument, already written from its typed value (see
    /// [`SendArg::write_json`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) arg: Option<Verbatim<'a>>,
}

#[derive(Deserialize, Default)]
pub(super) struct Body {
    #[serde(default)]
    pub(super) next: Vec<TaskRecord>,
    #[serde(default)]
    pub(super) joins: Vec<u64>,
}

#[derive(Deserialize)]
pub(super) struct TaskRecord {
    pub(super) node: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) send: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) arg: Option<Value>,
}

/// A task output as stored in a pending write.
#[derive(Serialize, Deserialize)]
pub(super) struct StoredOutput {
    pub(super) updates: Vec<Value>,
    #[serde(default)]
    pub(super) goto: Vec<StoredGoto>,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub(super) enum StoredGoto {
    Node { node: String },
    Send { node: String, arg: Value },
}

/// A task output read back from a pending write or a cache entry.
pub(super) fn decode_output<S: State>(stored: Value) -> Result<NodeOutput<S>, NodeError> {
    let stored: StoredOutput = serde_json::from_value(stored)
        .map_err(|e| NodeError::msg(format!("stored task output is unreadable: {e}")))?;
    let mut out = NodeOutput::new();
    for u in stored.updates {
        out.updates.push(
            serde_json::from_value(u).map_err(|e| {
                NodeError::msg(format!("stored update does not match the state: {e}"))
            })?,
        );
    }
    for g in stored.goto {
        out.goto.push(match g {
            StoredGoto::Node { node } => Goto::Node(node),
            StoredGoto::Send { node, arg } => Goto::Send(crate::graph::node::Send {
                node,
                arg: SendArg::Json(arg),
            }),
        });
    }
    Ok(out)
}

/// A task output as a pending write or a cache entry stores it.
pub(super) fn encode_output<S: State>(out: &NodeOutput<S>) -> Value {
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
