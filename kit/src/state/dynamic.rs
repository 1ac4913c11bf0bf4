//! The dynamic state form: string keys, JSON values, reducers added at run time.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{ChannelChange, ChannelInfo, State, StateError, Write};

/// A reducer for one dynamic key: folds `update` into `current` in place.
pub type DynReducer = Arc<dyn Fn(&mut Value, Value) + Send + Sync>;

/// A state whose channels are string keys holding JSON values.
///
/// A key without a registered reducer keeps the last value written (two writes in one superstep
/// are an error); a key with a reducer (see
/// [`GraphBuilder::add_reducer`](crate::graph::GraphBuilder::add_reducer)) folds every write.
///
/// ```
/// use kit::state::{DynSchema, DynState, DynUpdate};
///
/// let mut schema = DynSchema::default();
/// schema.add_reducer("items", kit::state::DynSchema::append_reducer());
/// let mut state = DynState::default();
/// let mut updates = vec![
///     DynUpdate::new().set("items", serde_json::json!(["a"])).set("last", 1),
///     DynUpdate::new().set("items", serde_json::json!(["b"])),
/// ];
/// state.apply_updates(&schema, &mut updates).unwrap();
/// assert_eq!(state.get("items"), Some(&serde_json::json!(["a", "b"])));
/// assert_eq!(state.get("last"), Some(&serde_json::json!(1)));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DynState {
    /// The channel values by key.
    pub values: BTreeMap<String, Value>,
}

impl DynState {
    /// The value of a key.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.values.get(key)
    }

    /// Checks the per-key rules for a step's updates without applying anything.
    pub fn check<'a>(
        schema: &DynSchema,
        updates: impl Iterator<Item = &'a DynUpdate>,
    ) -> Result<(), StateError> {
        let mut counts: HashMap<&str, (usize, usize)> = HashMap::new();
        for update in updates {
            for (key, write) in &update.writes {
                let entry = counts.entry(key.as_str()).or_default();
                if write.is_overwrite() {
                    entry.1 += 1;
                } else {
                    entry.0 += 1;
                }
            }
        }
        for (key, (values, overwrites)) in counts {
            if overwrites > 1 {
                return Err(StateError::DoubleOverwrite {
                    channel: key.to_string(),
                    count: overwrites,
                });
            }
            if overwrites == 0 && values > 1 && !schema.reducers.contains_key(key) {
                return Err(StateError::ConcurrentWrite {
                    channel: key.to_string(),
                    count: values,
                });
            }
        }
        Ok(())
    }

    /// Checks and applies a step's updates in order. Returns whether anything changed.
    pub fn apply_updates(
        &mut self,
        schema: &DynSchema,
        updates: &mut [DynUpdate],
    ) -> Result<bool, StateError> {
        Self::check(schema, updates.iter())?;
        Ok(self.fold_step(schema, updates))
    }

    /// Folds one step's already-checked updates as the step applied them: a key that gets an
    /// Overwrite this step ignores the step's normal writes, in whatever order they came.
    /// Replaying a recorded step goes through here too, so a restored state is the one the
    /// run had. Returns whether anything changed.
    pub(crate) fn fold_step(&mut self, schema: &DynSchema, updates: &mut [DynUpdate]) -> bool {
        let overwritten: std::collections::HashSet<String> = updates
            .iter()
            .flat_map(|u| u.writes.iter())
            .filter(|(_, w)| w.is_overwrite())
            .map(|(k, _)| k.clone())
            .collect();
        let mut changed = false;
        for update in updates.iter_mut() {
            for (key, write) in std::mem::take(&mut update.writes) {
                let overwrite = write.is_overwrite();
                if !overwrite && overwritten.contains(&key) {
                    continue;
                }
                self.reduce_key(schema, key, write.into_value(), overwrite);
                changed = true;
            }
        }
        changed
    }

    /// The values from a full snapshot, then every recorded step folded as it was applied;
    /// errors name `channel`.
    pub(crate) fn restore_values(
        &mut self,
        schema: &DynSchema,
        full: Option<&[u8]>,
        deltas: &[&[u8]],
        channel: &str,
    ) -> Result<(), StateError> {
        self.values = match full {
            Some(bytes) => {
                serde_json::from_slice(bytes).map_err(|e| StateError::serde(channel, e))?
            }
            None => BTreeMap::new(),
        };
        for bytes in deltas {
            let mut step: Vec<DynUpdate> =
                serde_json::from_slice(bytes).map_err(|e| StateError::serde(channel, e))?;
            self.fold_step(schema, &mut step);
        }
        Ok(())
    }

    /// Folds one already-checked update into the state, key by key (a step of several updates
    /// goes through [`apply_updates`](Self::apply_updates), where an overwrite beats the
    /// step's normal writes).
    pub fn reduce(&mut self, schema: &DynSchema, update: DynUpdate) {
        for (key, write) in update.writes {
            let overwrite = write.is_overwrite();
            self.reduce_key(schema, key, write.into_value(), overwrite);
        }
    }

    fn reduce_key(&mut self, schema: &DynSchema, key: String, value: Value, overwrite: bool) {
        match (schema.reducers.get(&key), overwrite) {
            (Some(reducer), false) => {
                let slot = self.values.entry(key).or_insert(Value::Null);
                reducer(slot, value);
            }
            _ => {
                self.values.insert(key, value);
            }
        }
    }
}

/// A partial update of a [`DynState`]: key → value (or [`Overwrite`](super::Overwrite)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DynUpdate {
    /// The writes by key.
    pub writes: BTreeMap<String, Write<Value>>,
}

impl DynUpdate {
    /// An empty update.
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `value` to `key` (reduced if the key has a reducer).
    #[must_use]
    pub fn set(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.writes.insert(key.into(), Write::Value(value.into()));
        self
    }

    /// Replaces the value of `key`, bypassing its reducer.
    #[must_use]
    pub fn overwrite(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.writes
            .insert(key.into(), Write::Overwrite(value.into()));
        self
    }

    /// True when the update writes nothing.
    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// The run-time reducers of a dynamic state, and the values keys read as before their first
/// write.
#[derive(Clone, Default)]
pub struct DynSchema {
    reducers: HashMap<String, DynReducer>,
    initial: BTreeMap<String, Value>,
}

impl std::fmt::Debug for DynSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut keys: Vec<&String> = self.reducers.keys().collect();
        keys.sort();
        f.debug_struct("DynSchema")
            .field("reducers", &keys)
            .finish()
    }
}

impl DynSchema {
    /// Registers the reducer of a key (replacing any earlier one).
    pub fn add_reducer(&mut self, key: impl Into<String>, reducer: DynReducer) {
        self.reducers.insert(key.into(), reducer);
    }

    /// Declares `key`: its reducer (none: the last value written wins) and the value it holds
    /// before its first write (none: absent). See [`dyn_reducers`](super::dyn_reducers).
    pub fn add_channel(&mut self, key: impl Into<String>, channel: impl super::IntoDynChannel) {
        let key = key.into();
        let channel = channel.into_dyn_channel();
        match channel.reducer {
            Some(reducer) => {
                self.reducers.insert(key.clone(), reducer);
            }
            None => {
                self.reducers.remove(&key);
            }
        }
        match channel.initial {
            Some(initial) => {
                self.initial.insert(key, initial);
            }
            None => {
                self.initial.remove(&key);
            }
        }
    }

    /// The value `key` reads as in a new thread, before its first write.
    pub fn set_initial(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        self.initial.insert(key.into(), value.into());
    }

    /// True when the key has a reducer.
    pub fn has_reducer(&self, key: &str) -> bool {
        self.reducers.contains_key(key)
    }

    /// Adds `other`'s reducers and initial values (`other`'s win for the same key).
    pub fn merge(&mut self, other: DynSchema) {
        self.reducers.extend(other.reducers);
        self.initial.extend(other.initial);
    }

    /// The update that gives a new thread its initial values; `None` when none are declared.
    pub fn initial_update(&self) -> Option<DynUpdate> {
        (!self.initial.is_empty()).then(|| DynUpdate {
            writes: self
                .initial
                .iter()
                .map(|(k, v)| (k.clone(), Write::Overwrite(v.clone())))
                .collect(),
        })
    }

    /// A reducer that appends arrays (a non-array update is appended as one element).
    pub fn append_reducer() -> DynReducer {
        Arc::new(|current: &mut Value, update: Value| {
            if !current.is_array() {
                *current = match std::mem::take(current) {
                    Value::Null => Value::Array(Vec::new()),
                    other => Value::Array(vec![other]),
                };
            }
            if let Value::Array(items) = current {
                match update {
                    Value::Array(more) => items.extend(more),
                    other => items.push(other),
                }
            }
        })
    }

    /// A reducer that merges objects key by key (right-biased).
    pub fn merge_reducer() -> DynReducer {
        Arc::new(
            |current: &mut Value, update: Value| match (current, update) {
                (Value::Object(map), Value::Object(more)) => map.extend(more),
                (slot, other) => *slot = other,
            },
        )
    }
}

const CHANNELS: &[ChannelInfo] = &[ChannelInfo {
    name: "values",
    reducer: Some("per-key"),
}];

impl State for DynState {
    type Update = DynUpdate;
    type Schema = DynSchema;

    fn channels() -> &'static [ChannelInfo] {
        CHANNELS
    }

    fn apply(
        &mut self,
        schema: &DynSchema,
        updates: &mut Vec<DynUpdate>,
        changes: &mut Vec<ChannelChange>,
        record: bool,
    ) -> Result<(), StateError> {
        let delta = if record {
            Some(crate::json::to_vec(&updates).map_err(|e| StateError::serde("values", e))?)
        } else {
            None
        };
        let changed = self.apply_updates(schema, updates)?;
        updates.clear();
        if changed {
            changes.push(ChannelChange { channel: 0, delta });
        }
        Ok(())
    }

    fn save_channel(&self, _channel: usize) -> Result<Vec<u8>, StateError> {
        crate::json::to_vec(&self.values).map_err(|e| StateError::serde("values", e))
    }

    fn restore_channel(
        &mut self,
        schema: &DynSchema,
        _channel: usize,
        full: Option<&[u8]>,
        deltas: &[&[u8]],
    ) -> Result<(), StateError> {
        self.restore_values(schema, full, deltas, "values")
    }

    fn written_channels(update: &DynUpdate, out: &mut Vec<usize>) {
        if !update.is_empty() {
            out.push(0);
        }
    }

    fn into_update(self) -> DynUpdate {
        DynUpdate {
            writes: self
                .values
                .into_iter()
                .map(|(k, v)| (k, Write::Value(v)))
                .collect(),
        }
    }

    fn initial(schema: &DynSchema) -> Option<DynUpdate> {
        schema.initial_update()
    }

    fn merge_schema(into: &mut DynSchema, other: DynSchema) {
        into.merge(other);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn last_value_conflict_and_overwrite_precedence() {
        let mut schema = DynSchema::default();
        schema.add_reducer("list", DynSchema::append_reducer());
        let mut state = DynState::default();
        let err = state
            .apply_updates(
                &schema,
                &mut [DynUpdate::new().set("x", 1), DynUpdate::new().set("x", 2)],
            )
            .unwrap_err();
        assert!(err.to_string().contains("`x`"), "{err}");
        state
            .apply_updates(
                &schema,
                &mut [
                    DynUpdate::new().set("list", json!([1])),
                    DynUpdate::new().overwrite("list", json!([9])),
                ],
            )
            .unwrap();
        assert_eq!(state.get("list"), Some(&json!([9])));
    }

    #[test]
    fn deltas_replay_through_reducers() {
        let mut schema = DynSchema::default();
        schema.add_reducer("list", DynSchema::append_reducer());
        let mut state = DynState::default();
        let mut changes = Vec::new();
        let mut updates = vec![DynUpdate::new().set("list", json!(["a"]))];
        state
            .apply(&schema, &mut updates, &mut changes, true)
            .unwrap();
        let mut updates = vec![DynUpdate::new().set("list", json!(["b"]))];
        state
            .apply(&schema, &mut updates, &mut changes, true)
            .unwrap();
        let deltas: Vec<&[u8]> = changes
            .iter()
            .map(|c| c.delta.as_deref().unwrap())
            .collect();
        let mut restored = DynState::default();
        restored.restore_channel(&schema, 0, None, &deltas).unwrap();
        assert_eq!(restored, state);
    }

    /// A step where one update overwrites a key and another writes it normally, in either
    /// order: the overwrite wins live, and the state restored from the recorded deltas is the
    /// same (it replayed the normal write after the overwrite before). Also through a
    /// `#[state(dynamic)]` field (`AgentState::custom`), where the order decided it live.
    #[test]
    fn an_overwrite_beats_the_steps_normal_writes_live_and_restored() {
        let mut schema = DynSchema::default();
        schema.add_reducer("list", DynSchema::append_reducer());
        for overwrite_first in [true, false] {
            let step = || {
                let over = DynUpdate::new()
                    .overwrite("list", json!([1]))
                    .overwrite("last", 1);
                let normal = DynUpdate::new().set("list", json!([2])).set("last", 2);
                if overwrite_first {
                    vec![over, normal]
                } else {
                    vec![normal, over]
                }
            };
            let mut state = DynState::default();
            let mut changes = Vec::new();
            let mut first = vec![DynUpdate::new().set("list", json!([0]))];
            state
                .apply(&schema, &mut first, &mut changes, true)
                .unwrap();
            state
                .apply(&schema, &mut step(), &mut changes, true)
                .unwrap();
            assert_eq!(state.get("list"), Some(&json!([1])), "{overwrite_first}");
            assert_eq!(state.get("last"), Some(&json!(1)));
            let deltas: Vec<&[u8]> = changes
                .iter()
                .map(|c| c.delta.as_deref().unwrap())
                .collect();
            let mut restored = DynState::default();
            restored.restore_channel(&schema, 0, None, &deltas).unwrap();
            assert_eq!(restored, state, "{overwrite_first}");

            // The same step into an agent's `custom` field.
            use crate::agent::{AgentState, AgentStateUpdate};
            let mut agent_schema = <AgentState as State>::Schema::default();
            agent_schema.add_reducer("list", DynSchema::append_reducer());
            let mut agent = AgentState::default();
            let mut changes = Vec::new();
            let mut updates: Vec<AgentStateUpdate> =
                std::iter::once(DynUpdate::new().set("list", json!([0])))
                    .map(|u| AgentStateUpdate::new().custom(u))
                    .collect();
            agent
                .apply(&agent_schema, &mut updates, &mut changes, true)
                .unwrap();
            let mut updates: Vec<AgentStateUpdate> = step()
                .into_iter()
                .map(|u| AgentStateUpdate::new().custom(u))
                .collect();
            agent
                .apply(&agent_schema, &mut updates, &mut changes, true)
                .unwrap();
            assert_eq!(
                agent.custom.get("list"),
                Some(&json!([1])),
                "{overwrite_first}"
            );
            let custom = crate::state::channel_index::<AgentState>("custom").unwrap();
            let deltas: Vec<&[u8]> = changes
                .iter()
                .filter(|c| c.channel == custom)
                .map(|c| c.delta.as_deref().unwrap())
                .collect();
            let mut restored = AgentState::default();
            restored
                .restore_channel(&agent_schema, custom, None, &deltas)
                .unwrap();
            assert_eq!(restored.custom, agent.custom, "{overwrite_first}");
        }
    }
}
