//! The shipped reducers for dynamic keys, over JSON, each with the value its key reads as before
//! the first write: what LangGraph's `Annotated[list, add_messages]` and friends become when a
//! graph is ported to [`DynState`](super::DynState).
//!
//! ```
//! use kit::graph::{GraphBuilder, NodeContext};
//! use kit::state::{DynState, DynUpdate, dyn_reducers};
//! use kit::{END, START};
//! use serde_json::json;
//!
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit::GraphError> {
//! let graph = GraphBuilder::<DynState>::new("ported")
//!     .add_channel("messages", dyn_reducers::add_messages())
//!     .add_channel("seen", dyn_reducers::append())
//!     .sync_node("count", |s: &DynState, _: &NodeContext| {
//!         // Before its first write, `seen` reads as [] (not absent).
//!         let seen = s.get("seen").and_then(|v| v.as_array()).map_or(usize::MAX, Vec::len);
//!         DynUpdate::new().set("seen", json!([seen]))
//!     })
//!     .edge(START, "count")
//!     .edge("count", END)
//!     .compile()?;
//! let out = graph
//!     .invoke(DynUpdate::new().set("messages", json!([{"role": "user", "content": "hi", "id": "m1"}])))
//!     .await?;
//! assert_eq!(out.state().get("seen"), Some(&json!([0])));
//! assert_eq!(out.state().get("messages").unwrap()[0]["id"], "m1");
//! # Ok(()) }
//! ```

use std::sync::Arc;

use serde_json::{Map, Value};

use super::DynReducer;
use super::one_pass::Edit;
use crate::message::REMOVE_ALL_MESSAGES;

/// One dynamic key's rules: its reducer (none: the last value written wins) and its value
/// before the first write (none: absent).
#[derive(Clone, Default)]
pub struct DynChannel {
    pub(crate) reducer: Option<DynReducer>,
    pub(crate) initial: Option<Value>,
}

impl std::fmt::Debug for DynChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DynChannel")
            .field("reducer", &self.reducer.is_some())
            .field("initial", &self.initial)
            .finish()
    }
}

impl DynChannel {
    /// A key whose writes fold with `reducer`.
    pub fn reducer(reducer: impl Fn(&mut Value, Value) + Send + Sync + 'static) -> Self {
        DynChannel {
            reducer: Some(Arc::new(reducer)),
            initial: None,
        }
    }

    /// A key that keeps the last value written.
    pub fn last_value() -> Self {
        Self::default()
    }

    /// The value the key reads as in a new thread, before its first write.
    #[must_use]
    pub fn initial(mut self, value: impl Into<Value>) -> Self {
        self.initial = Some(value.into());
        self
    }
}

/// What declares a dynamic key: a [`DynChannel`], or a reducer closure over JSON.
pub trait IntoDynChannel {
    /// The channel.
    fn into_dyn_channel(self) -> DynChannel;
}

impl IntoDynChannel for DynChannel {
    fn into_dyn_channel(self) -> DynChannel {
        self
    }
}

impl<F: Fn(&mut Value, Value) + Send + Sync + 'static> IntoDynChannel for F {
    fn into_dyn_channel(self) -> DynChannel {
        DynChannel::reducer(self)
    }
}

/// Appends arrays (a value that is not an array is appended as one element); starts as `[]`.
pub fn append() -> DynChannel {
    DynChannel::reducer(|current, update| {
        let items = as_array(current);
        match update {
            Value::Array(more) => items.extend(more),
            other => items.push(other),
        }
    })
    .initial(Value::Array(Vec::new()))
}

/// Merges objects key by key, the update winning; starts as `{}`.
pub fn merge() -> DynChannel {
    DynChannel::reducer(|current, update| match update {
        Value::Object(more) => as_object(current).extend(more),
        other => *current = other,
    })
    .initial(Value::Object(Map::new()))
}

/// Merges objects key by key; a key written as `null` is removed (kit's `merge_or_remove`);
/// starts as `{}`.
pub fn merge_or_remove() -> DynChannel {
    DynChannel::reducer(|current, update| match update {
        Value::Object(more) => {
            let map = as_object(current);
            for (k, v) in more {
                if v.is_null() {
                    map.remove(&k);
                } else {
                    map.insert(k, v);
                }
            }
        }
        other => *current = other,
    })
    .initial(Value::Object(Map::new()))
}

/// LangGraph's `add_messages` over JSON messages (kit's [`add_messages`](super::reducers::add_messages)):
/// a message whose `id` is already in the list replaces it, a message with role `remove`
/// deletes the one with its id (or, with the id `__remove_all__`, every message before it), any
/// other is appended. An update may be one message or a list. Starts as `[]`.
pub fn add_messages() -> DynChannel {
    DynChannel::reducer(|current, update| {
        let list = as_array(current);
        let incoming = match update {
            Value::Array(items) => items,
            other => vec![other],
        };
        if incoming.len() < BATCH_FROM {
            for message in incoming {
                apply_one(list, message);
            }
        } else {
            apply_batch(list, incoming);
        }
    })
    .initial(Value::Array(Vec::new()))
}

/// From this many messages in one update, ids are found through an index built for the update
/// (a scan of the list per message would make a large update quadratic).
const BATCH_FROM: usize = 8;

fn message_id(message: &Value) -> Option<&str> {
    message.get("id").and_then(Value::as_str)
}

fn is_remove(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("remove")
}

/// One message of an update, found by a scan from the end.
fn apply_one(list: &mut Vec<Value>, message: Value) {
    let position =
        message_id(&message).and_then(|id| list.iter().rposition(|m| message_id(m) == Some(id)));
    match (is_remove(&message), message_id(&message), position) {
        (true, Some(REMOVE_ALL_MESSAGES), _) => list.clear(),
        (true, _, Some(at)) => {
            list.remove(at);
        }
        (true, _, None) => {}
        (false, _, Some(at)) => list[at] = message,
        (false, _, None) => list.push(message),
    }
}

/// The messages of one update applied in one pass, as [`apply_one`] would apply them (see
/// [`one_pass`](super::one_pass)).
fn apply_batch(list: &mut Vec<Value>, incoming: Vec<Value>) {
    *list = super::one_pass::apply(std::mem::take(list), incoming, message_id, |m| {
        match (is_remove(m), message_id(m)) {
            (true, Some(REMOVE_ALL_MESSAGES)) => Edit::RemoveAll,
            (true, _) => Edit::Remove,
            (false, _) => Edit::Upsert,
        }
    });
}

fn as_array(value: &mut Value) -> &mut Vec<Value> {
    if !value.is_array() {
        *value = match std::mem::take(value) {
            Value::Null => Value::Array(Vec::new()),
            other => Value::Array(vec![other]),
        };
    }
    match value {
        Value::Array(items) => items,
        _ => unreachable!("the value was made an array above"),
    }
}

fn as_object(value: &mut Value) -> &mut Map<String, Value> {
    if !value.is_object() {
        *value = Value::Object(Map::new());
    }
    match value {
        Value::Object(map) => map,
        _ => unreachable!("the value was made an object above"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// An update applied through the index gives what applying its messages one by one gives,
    /// whatever the mix: repeated ids in the list, replacements, removals, `__remove_all__`,
    /// messages without an id.
    #[test]
    fn a_large_update_applies_as_its_messages_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(7);
        let message = |rng: &mut fastrand::Rng, n: u32| {
            let id = format!("m{}", rng.u8(0..12));
            match rng.u8(0..10) {
                0 => json!({"role": "remove", "id": id}),
                1 if rng.u8(0..5) == 0 => json!({"role": "remove", "id": REMOVE_ALL_MESSAGES}),
                2 => json!({"role": "user", "content": n}),
                _ => json!({"role": "user", "id": id, "content": n}),
            }
        };
        for round in 0..2000 {
            let list: Vec<Value> = (0..rng.u32(0..20)).map(|n| message(&mut rng, n)).collect();
            let update: Vec<Value> = (0..rng.u32(BATCH_FROM as u32..40))
                .map(|n| message(&mut rng, 100 + n))
                .collect();
            let mut one_by_one = list.clone();
            for m in update.clone() {
                apply_one(&mut one_by_one, m);
            }
            let mut batched = list;
            apply_batch(&mut batched, update);
            assert_eq!(batched, one_by_one, "round {round}");
        }
    }

    /// 1 KiB and 1 MiB updates of adds, replacements and removals: the large one is applied in
    /// one pass (one by one it was about 10^9 comparisons).
    #[test]
    fn updates_of_1_kib_and_1_mib_apply_in_one_pass() {
        for n in [20, 20_000] {
            let mut update: Vec<Value> = (0..n)
                .map(|i| json!({"role": "user", "id": format!("m{i}"), "content": "x"}))
                .collect();
            update.extend(
                (0..n)
                    .step_by(2)
                    .map(|i| json!({"role": "remove", "id": format!("m{i}")})),
            );
            update.extend(
                (1..n)
                    .step_by(2)
                    .map(|i| json!({"role": "ai", "id": format!("m{i}")})),
            );
            let size = Value::Array(update.clone()).to_string().len();
            assert!(
                size > (n * 40) as usize && size < (n * 100) as usize,
                "{size}"
            );
            let value = fold(add_messages(), vec![Value::Array(update)]);
            let list = value.as_array().unwrap();
            assert_eq!(list.len(), (n / 2) as usize);
            assert!(list.iter().all(|m| m["role"] == "ai"));
            assert_eq!(list[0]["id"], "m1");
        }
    }

    fn fold(channel: DynChannel, writes: Vec<Value>) -> Value {
        let mut value = channel.initial.clone().unwrap_or(Value::Null);
        let reducer = channel.reducer.unwrap();
        for w in writes {
            reducer(&mut value, w);
        }
        value
    }

    #[test]
    fn add_messages_upserts_removes_and_appends_like_the_typed_one() {
        let out = fold(
            add_messages(),
            vec![
                json!([{"id": "a", "role": "user", "content": "a"}, {"id": "b", "role": "assistant", "content": "b"}]),
                json!([{"id": "b", "role": "assistant", "content": "b2"}, {"id": "c", "role": "user", "content": "c"}, {"id": "a", "role": "remove"}]),
            ],
        );
        let texts: Vec<&str> = out
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["b2", "c"]);
        let out = fold(
            add_messages(),
            vec![
                json!({"id": "x", "role": "user", "content": "x"}),
                json!([{"id": "__remove_all__", "role": "remove"}, {"id": "d", "role": "user", "content": "d"}]),
            ],
        );
        assert_eq!(out.as_array().unwrap().len(), 1);
    }

    #[test]
    fn the_others_fold_as_their_typed_counterparts() {
        assert_eq!(fold(append(), vec![json!([1]), json!(2)]), json!([1, 2]));
        assert_eq!(fold(append(), vec![]), json!([]));
        assert_eq!(
            fold(merge(), vec![json!({"a": 1}), json!({"b": 2, "a": 3})]),
            json!({"a": 3, "b": 2})
        );
        assert_eq!(
            fold(
                merge_or_remove(),
                vec![json!({"a": 1, "b": 2}), json!({"a": null})]
            ),
            json!({"b": 2})
        );
    }
}
