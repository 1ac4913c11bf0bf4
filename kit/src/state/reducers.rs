//! Reducers shipped with kit, for `#[state(reducer = ...)]`.
//!
//! A reducer is any function `fn(&mut Field, Update)`. It runs in place, so reducing never
//! clones the channel. When the update type differs from the field type, name it with
//! `#[state(reducer = path, update = Type)]` (see [`merge_or_remove`]).

use std::collections::BTreeMap;

use super::Messages;
use super::one_pass::Edit;
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
    if update.len() >= ONE_PASS_FROM && update.iter().any(|m| m.role == Role::Remove) {
        current.apply_in_one_pass(update);
        return;
    }
    add_one_by_one(current, update);
}

/// From this many messages, an update that removes some is applied in one pass (see
/// [`MessageChannel::apply_in_one_pass`]).
const ONE_PASS_FROM: usize = 8;

fn add_one_by_one<L: MessageChannel + ?Sized>(current: &mut L, update: Vec<Message>) {
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

    /// Applies a whole update as [`add_messages`] applies its messages one by one. The default
    /// does just that; kit's channels take their list out and apply the update in one pass
    /// (a removal shifts the messages after it, so one by one a large update that removes
    /// many was quadratic).
    fn apply_in_one_pass(&mut self, update: Vec<Message>) {
        add_one_by_one(self, update);
    }
}

/// `update` applied to `list` in one pass (see [`one_pass`](super::one_pass)).
fn applied_in_one_pass(list: Vec<Message>, update: Vec<Message>) -> Vec<Message> {
    super::one_pass::apply(
        list,
        update,
        |m| Some(m.id.as_str()),
        |m| match m.role {
            Role::Remove if m.id == REMOVE_ALL_MESSAGES => Edit::RemoveAll,
            Role::Remove => Edit::Remove,
            _ => Edit::Upsert,
        },
    )
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
    fn apply_in_one_pass(&mut self, update: Vec<Message>) {
        *self = applied_in_one_pass(std::mem::take(self), update);
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
    fn apply_in_one_pass(&mut self, update: Vec<Message>) {
        *self = Messages::from(applied_in_one_pass(std::mem::take(self).into_vec(), update));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A large update with removals, applied in one pass, gives what applying its messages one
    /// by one gives, on both kinds of channel, whatever the mix: repeated ids in the list,
    /// replacements, removals of present and absent ids, `remove_all`.
    #[test]
    fn a_large_update_applies_as_its_messages_one_by_one() {
        let mut rng = fastrand::Rng::with_seed(11);
        let message = |rng: &mut fastrand::Rng, n: u32| {
            let id = format!("m{}", rng.u8(0..12));
            match rng.u8(0..10) {
                0 | 1 => Message::remove(id),
                2 if rng.u8(0..5) == 0 => Message::remove_all(),
                _ => Message::user(n.to_string()).with_id(id),
            }
        };
        for round in 0..2000 {
            let list: Vec<Message> = (0..rng.u32(0..20)).map(|n| message(&mut rng, n)).collect();
            let list: Vec<Message> = list
                .into_iter()
                .filter(|m| m.role != Role::Remove)
                .collect();
            let mut update: Vec<Message> = (0..rng.u32(ONE_PASS_FROM as u32..40))
                .map(|n| message(&mut rng, 100 + n))
                .collect();
            update.push(Message::remove("m0"));
            let mut one_by_one = list.clone();
            add_one_by_one(&mut one_by_one, update.clone());
            let mut vec = list.clone();
            add_messages(&mut vec, update.clone());
            assert_eq!(vec, one_by_one, "round {round}");
            let mut shared = Messages::from(list);
            add_messages(&mut shared, update);
            assert_eq!(shared, one_by_one, "round {round}");
            // The rebuilt list's index finds what the list holds.
            for m in one_by_one.iter() {
                assert!(shared.position(&m.id).is_some());
            }
        }
    }

    /// 1 KiB and 1 MiB updates of adds, then removals of half of them, then replacements of
    /// the rest: the large one goes in one pass (one by one it moved the list once per
    /// removal).
    #[test]
    fn updates_of_1_kib_and_1_mib_with_removals_apply_in_one_pass() {
        for n in [10usize, 12_000] {
            let mut update: Vec<Message> = (0..n)
                .map(|i| Message::user("x").with_id(format!("m{i}")))
                .collect();
            update.extend((0..n).step_by(2).map(|i| Message::remove(format!("m{i}"))));
            update.extend(
                (1..n)
                    .step_by(2)
                    .map(|i| Message::assistant("y").with_id(format!("m{i}"))),
            );
            let size = serde_json::to_string(&update).unwrap().len();
            assert!(size > n * 40 && size < n * 120, "{size}");
            let mut list = Messages::new();
            add_messages(&mut list, update);
            assert_eq!(list.len(), n / 2);
            assert!(list.iter().all(|m| m.role == Role::Assistant));
            assert_eq!(list[0].id, "m1");
        }
    }

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
