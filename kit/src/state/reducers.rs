//! Reducers shipped with kit, for `#[state(reducer = ...)]`.
//!
//! A reducer is any function `fn(&mut Field, Update)`. It runs in place, so reducing never
//! clones the channel. When the update type differs from the field type, name it with
//! `#[state(reducer = path, update = Type)]` (see [`merge_or_remove`]).

use std::collections::BTreeMap;

use super::Messages;
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
/// Works on a [`Messages`] channel (what [`AgentState`](crate::AgentState) uses: ids are found
/// through an index, so each message costs the same however long the conversation) and on a
/// plain `Vec<Message>` (ids are found by a scan from the newest message backwards, where
/// upserts usually hit).
///
/// ```
/// use kit::{Message, Messages};
///
/// let mut list = Messages::from(vec![Message::user("draft").with_id("q")]);
/// kit::reducers::add_messages(
///     &mut list,
///     vec![Message::user("final").with_id("q"), Message::assistant("ok")],
/// );
/// assert_eq!(list.len(), 2);
/// assert_eq!(list[0].text(), "final");
/// ```
pub fn add_messages<L: MessageChannel>(current: &mut L, update: Vec<Message>) {
    for message in update {
        if message.role == Role::Remove {
            if message.id == REMOVE_ALL_MESSAGES {
                current.clear_messages();
            } else {
                current.remove_message(&message.id);
            }
            continue;
        }
        current.upsert_message(message);
    }
}

/// A list [`add_messages`] can reduce into: `Vec<Message>` or [`Messages`].
pub trait MessageChannel {
    /// Replaces the message with the same id, or appends.
    fn upsert_message(&mut self, message: Message);
    /// Removes the message with this id, if any.
    fn remove_message(&mut self, id: &str);
    /// Removes every message.
    fn clear_messages(&mut self);
}

impl MessageChannel for Vec<Message> {
    fn upsert_message(&mut self, message: Message) {
        match self.iter().rposition(|m| m.id == message.id) {
            Some(pos) => self[pos] = message,
            None => self.push(message),
        }
    }
    fn remove_message(&mut self, id: &str) {
        if let Some(pos) = self.iter().rposition(|m| m.id == id) {
            self.remove(pos);
        }
    }
    fn clear_messages(&mut self) {
        self.clear();
    }
}

impl MessageChannel for Messages {
    fn upsert_message(&mut self, message: Message) {
        self.upsert(message);
    }
    fn remove_message(&mut self, id: &str) {
        self.remove(id);
    }
    fn clear_messages(&mut self) {
        self.clear();
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
