//! Applying a whole `add_messages` update in one pass, for typed and JSON messages alike.
//!
//! One by one, each message of an update finds its id in the list, and a removal moves every
//! message after it: a large update that removes many is quadratic. In one pass a removed
//! message leaves a hole until the end, and each id maps to its positions (the last one is
//! what a scan from the newest message finds), so an update costs the list's length once plus
//! its own, with the result one by one would give.

use crate::hash::FastMap;

/// What one message of an update does to the list.
pub(crate) enum Edit {
    /// Removes every message (the `__remove_all__` id).
    RemoveAll,
    /// Removes the newest message with its id, if any.
    Remove,
    /// Replaces the newest message with its id, or is appended.
    Upsert,
}

/// `update` applied to `list`; `id` reads a message's id, `edit` what it does.
pub(crate) fn apply<T>(
    list: Vec<T>,
    update: Vec<T>,
    id: impl Fn(&T) -> Option<&str>,
    edit: impl Fn(&T) -> Edit,
) -> Vec<T> {
    let mut slots: Vec<Option<T>> = list.into_iter().map(Some).collect();
    let mut positions: FastMap<String, Vec<usize>> = FastMap::default();
    for (at, message) in slots.iter().enumerate() {
        if let Some(key) = message.as_ref().and_then(&id) {
            positions.entry(key.to_string()).or_default().push(at);
        }
    }
    for message in update {
        let edit = edit(&message);
        if matches!(edit, Edit::RemoveAll) {
            slots.clear();
            positions.clear();
            continue;
        }
        let key = id(&message).map(str::to_string);
        let newest = key
            .as_deref()
            .and_then(|key| positions.get(key))
            .and_then(|at| at.last().copied());
        match (edit, newest, key) {
            (Edit::Remove, Some(at), Some(key)) => {
                if let Some(slot) = slots.get_mut(at) {
                    *slot = None;
                }
                if let Some(at) = positions.get_mut(&key) {
                    at.pop();
                }
            }
            (Edit::Upsert, Some(at), _) => {
                if let Some(slot) = slots.get_mut(at) {
                    *slot = Some(message);
                }
            }
            (Edit::Upsert, None, key) => {
                if let Some(key) = key {
                    positions.entry(key).or_default().push(slots.len());
                }
                slots.push(Some(message));
            }
            // A removal of an id the list does not hold.
            _ => {}
        }
    }
    slots.into_iter().flatten().collect()
}
