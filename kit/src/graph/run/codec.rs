//! What a checkpoint stores besides channels: the tasks due, join barriers, task outputs.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::graph::node::{Goto, NodeError, NodeOutput, SendArg};
use crate::json;
use crate::state::State;

/// A task due, as [`write_body`] writes it: read back as a [`TaskRecord`].
pub(super) struct TaskOut<'a> {
    pub(super) node: &'a str,
    pub(super) send: Option<usize>,
    pub(super) arg: Option<&'a SendArg>,
}

/// [`write_body_into`] a new buffer.
#[cfg(test)]
pub(super) fn write_body<'a>(
    tasks: impl ExactSizeIterator<Item = TaskOut<'a>>,
    joins: &[u64],
) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + 24 * tasks.len());
    write_body_into(&mut out, tasks, joins);
    out
}

/// Executor data stored with each checkpoint, as JSON, into `out` (cleared first: a buffer
/// kept from step to step): the tasks due (each `Send` argument written straight from its
/// typed value) and the join barriers; read back as a [`Body`].
///
/// Written by hand rather than through `Serialize`: every checkpoint has one, and its shape is
/// fixed. The bytes are what `#[derive(Serialize)]` writes for that shape, with empty lists,
/// absent fields and join barriers that are all zero left out (the tests hold the two together).
pub(super) fn write_body_into<'a>(
    out: &mut Vec<u8>,
    tasks: impl ExactSizeIterator<Item = TaskOut<'a>>,
    joins: &[u64],
) {
    out.clear();
    out.push(b'{');
    if tasks.len() > 0 {
        out.extend_from_slice(b"\"next\":[");
        for (i, task) in tasks.enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"node\":");
            json::write_str(out, task.node);
            if let Some(send) = task.send {
                out.extend_from_slice(b",\"send\":");
                out.extend_from_slice(itoa::Buffer::new().format(send).as_bytes());
            }
            if let Some(arg) = task.arg {
                out.extend_from_slice(b",\"arg\":");
                arg.write_json(out);
            }
            out.push(b'}');
        }
        out.push(b']');
    }
    if joins.iter().any(|j| *j != 0) {
        if out.len() > 1 {
            out.push(b',');
        }
        out.extend_from_slice(b"\"joins\":[");
        for (i, join) in joins.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(itoa::Buffer::new().format(*join).as_bytes());
        }
        out.push(b']');
    }
    out.push(b'}');
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

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The shape `write_body` writes, as serde derives it: the reference.
    #[derive(Serialize)]
    struct Reference {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        next: Vec<ReferenceTask>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        joins: Vec<u64>,
    }

    #[derive(Serialize)]
    struct ReferenceTask {
        node: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        send: Option<usize>,
        #[serde(skip_serializing_if = "Option::is_none")]
        arg: Option<Value>,
    }

    /// Writes `tasks` and `joins` by hand and through serde, and checks both agree and read
    /// back as a [`Body`] holding the same tasks.
    fn same(tasks: &[(&str, Option<usize>, Option<SendArg>)], joins: &[u64]) -> Vec<u8> {
        let ours = write_body(
            tasks.iter().map(|(node, send, arg)| TaskOut {
                node,
                send: *send,
                arg: arg.as_ref(),
            }),
            joins,
        );
        let reference = Reference {
            next: tasks
                .iter()
                .map(|(node, send, arg)| ReferenceTask {
                    node: node.to_string(),
                    send: *send,
                    arg: arg.as_ref().map(SendArg::to_json),
                })
                .collect(),
            joins: if joins.iter().any(|j| *j != 0) {
                joins.to_vec()
            } else {
                Vec::new()
            },
        };
        assert_eq!(
            String::from_utf8_lossy(&ours),
            serde_json::to_string(&reference).unwrap()
        );
        let back: Body = serde_json::from_slice(&ours).unwrap();
        assert_eq!(back.next.len(), tasks.len());
        for (record, (node, send, arg)) in back.next.iter().zip(tasks) {
            assert_eq!(record.node, *node);
            assert_eq!(record.send, *send);
            assert_eq!(record.arg, arg.as_ref().map(SendArg::to_json));
        }
        ours
    }

    #[test]
    fn a_body_is_written_as_serde_would_write_it() {
        // Nothing due, no barrier: an empty object.
        assert_eq!(same(&[], &[]), b"{}");
        // Barriers that are all zero are left out (nothing to restore).
        assert_eq!(same(&[], &[0, 0]), b"{}");
        assert_eq!(
            same(&[], &[0, 5, u64::MAX]),
            br#"{"joins":[0,5,18446744073709551615]}"#
        );
        same(&[("a", None, None)], &[]);
        same(&[("a", None, None), ("b", None, None)], &[3]);
        // A send index without an argument, an argument without a send index.
        same(
            &[
                ("a", Some(3), None),
                ("b", None, Some(SendArg::Json(json!(1)))),
            ],
            &[],
        );
        // Node names that need escapes, and names beyond ASCII.
        same(
            &[("q\"uote\\d\n", None, None), ("nœud ☃ 🦀", None, None)],
            &[],
        );
        // `Send` tasks: typed arguments and arguments restored as JSON.
        same(
            &[
                ("plain", None, None),
                (
                    "tools",
                    Some(0),
                    Some(SendArg::typed(json!({"id": "call_1", "args": {"a": 1}}))),
                ),
                (
                    "tools",
                    Some(1),
                    Some(SendArg::Json(json!([1, "two", null]))),
                ),
                (
                    "tools",
                    Some(usize::MAX),
                    Some(SendArg::typed(String::from("a \"b\""))),
                ),
            ],
            &[1, 0],
        );
    }

    #[test]
    fn a_send_argument_of_1_kib_and_of_1_mib_is_written_whole() {
        for size in [1 << 10, 1 << 20] {
            let text: String = "ab\"c\\\u{1}é☃".chars().cycle().take(size).collect();
            let body = same(
                &[("worker", Some(0), Some(SendArg::typed(text.clone())))],
                &[],
            );
            assert!(body.len() > size, "{size}: the argument is in the body");
        }
    }

    #[test]
    fn an_argument_that_does_not_serialise_is_written_as_null() {
        /// Serialising it fails, as a map with non-string keys does in JSON.
        #[derive(Clone, Serialize, serde::Deserialize)]
        struct Refused(std::collections::BTreeMap<Vec<u8>, u8>);
        let arg = SendArg::typed(Refused([(vec![1], 1)].into()));
        let body = write_body(
            std::iter::once(TaskOut {
                node: "n",
                send: Some(0),
                arg: Some(&arg),
            }),
            &[],
        );
        assert_eq!(body, br#"{"next":[{"node":"n","send":0,"arg":null}]}"#);
    }
}
