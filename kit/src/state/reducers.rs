//! Reducers shipped with kit, for `#[state(reducer = ...)]`.
//!
//! A reducer is any function `fn(&mut Field, Update)`. It runs in place, so reducing never
//! clones the channel. When the update type differs from the field type, name it with
//! `#[state(reducer = path, update = Type)]` (see [`merge_or_remove`]).

use std::collections::BTreeMap;

use crate::message::{Message, REMOVE_ALL_MESSAGES, Role};

/// Appends the update to a list: `[a] + [b, c] = [a, b, c]`.
pub fn append<T>(current: &mut Vec<T>, update: Vec<T>) {
    current.extend(update);
}

/// Right-biased merge of maps: keys in the update replace the same keys in the channel.
///
/// Works for `BTreeMap`, `HashMap` and any collection that can extend itself.
pub fn merge<M>(current: &mut M, update: M)
where
    M: IntoIterator + Extend<<M as IntoIterator>::Item>,
{
    current.extend(update);
}

/// Merge where `None` deletes the key: the update type is `BTreeMap<K, Option<V>>`.
///
/// ```
/// # use std::collections::BTreeMap;
/// let mut files = BTreeMap::from([("/a".to_string(), 1), ("/b".to_string(), 2)]);
/// kit::reducers::merge_or_remove(
///     &mut files,
///     BTreeMap::from([("/a".to_string(), None), ("/c".to_string(), Some(3))]),
/// );
/// assert_eq!(files, BTreeMap::from([("/b".to_string(), 2), ("/c".to_string(), 3)]));
/// ```
pub fn merge_or_remove<K: Ord, V>(current: &mut BTreeMap<K, V>, update: BTreeMap<K, Option<V>>) {
    for (key, value) in update {
        match value {
            Some(value) => {
                current.insert(key, value);
            }
            None => {
                current.remove(&key);
            }
        }
    }
}

/// Adds numbers: `current += update`.
pub fn add<T: std::ops::AddAssign>(current: &mut T, update: T) {
    *current += update;
}

/// Message-list reducer with the semantics of LangGraph's `add_messages`.
///
/// * a message whose id is already in the list replaces it in place (upsert);
/// * [`Message::remove(id)`](Message::remove) deletes that message;
/// * [`Message::remove_all()`](Message::remove_all) clears the list (messages after it in the
///   same update are kept);
/// * any other message is appended.
///
/// Finding an existing id scans from the newest message backwards, where upserts usually hit.
pub fn add_messages(current: &mut Vec<Message>, update: Vec<Message>) {
    for message in update {
        if message.role == Role::Remove {
            if message.id == REMOVE_ALL_MESSAGES {
                current.clear();
            } else if let Some(pos) = current.iter().rposition(|m| m.id == message.id) {
                current.remove(pos);
            }
            continue;
        }
        match current.iter().rposition(|m| m.id == message.id) {
            Some(pos) => current[pos] = message,
            None => current.push(message),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_messages_upserts_removes_and_appends() {
        let a = Message::user("a");
        let b = Message::assistant("b");
        let mut list = vec![a.clone(), b.clone()];
        let mut b2 = Message::assistant("b2");
        b2.id = b.id.clone();
        let c = Message::user("c");
        add_messages(&mut list, vec![b2, c.clone(), Message::remove(&a.id)]);
        let texts: Vec<String> = list.iter().map(|m| m.text()).collect();
        assert_eq!(texts, ["b2", "c"]);
        add_messages(&mut list, vec![Message::remove_all(), Message::user("d")]);
        assert_eq!(list.len(), 1);
        assert_eq!(list[0].text(), "d");
    }

    #[test]
    fn merge_is_right_biased() {
        let mut m = std::collections::HashMap::from([("k", 1), ("j", 2)]);
        merge(&mut m, std::collections::HashMap::from([("k", 3)]));
        assert_eq!(m["k"], 3);
        assert_eq!(m["j"], 2);
    }
}
