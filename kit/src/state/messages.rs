//! [`Messages`]: a conversation that is cheap to share and to append to.

use std::ops::Deref;
use std::sync::{Arc, OnceLock};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::hash::{FastMap, process_hash};
use crate::message::{Message, Role};

/// Below this many messages an id is found by a scan from the end: a scan is cheaper than
/// hashing only for a few messages, since a new id is compared with every one of them.
const INDEX_FROM: usize = 8;

/// A conversation: a list of [`Message`]s, shared by reference and indexed by id.
///
/// An agent hands its whole conversation to the model on every call, and appends a message or
/// two after it. With a plain `Vec<Message>` both grow with the conversation: each call copies
/// (and later frees) every message, and each append searches every id for an upsert. So a
/// conversation of *n* messages cost O(n²) over its life.
///
/// `Messages` keeps the list behind an [`Arc`]: a model request shares it instead of copying it,
/// and the reducer appends in place once the request is gone (copy-on-write, only if something
/// still holds the old list). Ids are found through a small hash index (id hash → position),
/// built when a list first grows past a few messages and kept up to date by appends, so
/// `add_messages` costs the same at message 10 and at message 10,000, and restoring a thread
/// replays its stored deltas in one pass.
///
/// Reading a `Messages` is reading a slice (`Deref<Target = [Message]>`); it serialises as a
/// plain JSON array, so stored threads and wire formats are unchanged.
///
/// ```
/// use kit::{Message, Messages};
///
/// let mut conversation = Messages::from(vec![Message::user("Hi")]);
/// let shared = conversation.clone(); // no copy: both see one list
/// conversation.push(Message::assistant("Hello!"));
/// assert_eq!(conversation.len(), 2);
/// assert_eq!(shared.len(), 1, "the earlier view is unchanged");
/// assert_eq!(conversation[1].text(), "Hello!");
/// ```
#[derive(Clone, Default)]
pub struct Messages {
    inner: Arc<List>,
}

#[derive(Clone, Default)]
struct List {
    items: Vec<Message>,
    /// Hash of an id → the position of the last message whose id has that hash. Every id's
    /// hash is present, so a hash not found means the id is not in the list; a position whose
    /// message has another id (two ids with one hash) falls back to a scan. `None` until the
    /// list is long enough, and after a removal (rebuilt on the next lookup).
    index: Option<FastMap<u64, u32>>,
    /// Ids of tool calls no later tool result answers, with how many calls of that id are
    /// open (providers that number calls per answer reuse ids): kept up to date by appends,
    /// computed on first use after any other edit. Tells in O(1) that a history needs no
    /// dangling-call patch.
    open_calls: OnceLock<FastMap<Box<str>, u32>>,
}

/// The hash an id is indexed by (one function per process, so clones of a list agree).
fn id_hash(id: &str) -> u64 {
    process_hash(id)
}

impl List {
    fn position(&mut self, id: &str) -> Option<usize> {
        if self.items.len() < INDEX_FROM {
            return self.items.iter().rposition(|m| m.id == id);
        }
        let index = self.index.get_or_insert_with(|| {
            let mut index = FastMap::with_capacity_and_hasher(self.items.len(), Default::default());
            for (i, m) in self.items.iter().enumerate() {
                index.insert(id_hash(&m.id), i as u32);
            }
            index
        });
        let pos = *index.get(&id_hash(id))? as usize;
        match self.items.get(pos) {
            Some(m) if m.id == id => Some(pos),
            // Another id with the same hash: rare enough to scan.
            _ => self.items.iter().rposition(|m| m.id == id),
        }
    }

    fn push(&mut self, message: Message) {
        if let Some(index) = &mut self.index {
            index.insert(id_hash(&message.id), self.items.len() as u32);
        }
        if let Some(open) = self.open_calls.get_mut() {
            track_calls(open, &message);
        }
        self.items.push(message);
    }

    fn remove(&mut self, pos: usize) {
        self.items.remove(pos);
        // Positions after it moved: rebuilt on the next lookup.
        self.index = None;
        self.open_calls = OnceLock::new();
    }

    fn open_calls(&self) -> &FastMap<Box<str>, u32> {
        self.open_calls.get_or_init(|| {
            let mut open = FastMap::default();
            for message in &self.items {
                track_calls(&mut open, message);
            }
            open
        })
    }
}

/// Follows one message through the open tool calls: an assistant message opens its calls, a
/// tool result closes one open call of its id.
fn track_calls(open: &mut FastMap<Box<str>, u32>, message: &Message) {
    match message.role {
        Role::Assistant => {
            // An id an answer repeats is one call to answer (as the dangling-call patch reads
            // it): counted once, or one result would leave it open for good.
            let calls = &message.tool_calls;
            // Allocates only for a long answer (a short one is scanned).
            let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
            for (i, call) in calls.iter().enumerate() {
                let again = if calls.len() <= 16 {
                    calls[..i].iter().any(|c| c.id == call.id)
                } else {
                    !seen.insert(call.id.as_str())
                };
                if again {
                    continue;
                }
                let n = open.entry(call.id.as_str().into()).or_insert(0);
                *n = n.saturating_add(1);
            }
        }
        Role::Tool => {
            if let Some(id) = message.tool_call_id.as_deref()
                && let Some(n) = open.get_mut(id)
            {
                *n -= 1;
                if *n == 0 {
                    open.remove(id);
                }
            }
        }
        _ => {}
    }
}

impl Messages {
    /// An empty conversation.
    pub fn new() -> Self {
        Self::default()
    }

    /// The messages as a slice (also what `*messages` gives).
    pub fn as_slice(&self) -> &[Message] {
        &self.inner.items
    }

    /// The position of the message with this id, if any (the last one, if several share it).
    pub fn position(&mut self, id: &str) -> Option<usize> {
        self.list_mut().position(id)
    }

    /// Appends a message (no id check: [`upsert`](Self::upsert) replaces one with the same id).
    pub fn push(&mut self, message: Message) {
        self.list_mut().push(message);
    }

    /// Replaces the message with the same id in place, or appends it (`add_messages`' rule).
    pub fn upsert(&mut self, message: Message) {
        let list = self.list_mut();
        match list.position(&message.id) {
            Some(pos) => {
                list.items[pos] = message;
                list.open_calls = OnceLock::new();
            }
            None => list.push(message),
        }
    }

    /// Removes the message with this id; returns it, if there was one.
    pub fn remove(&mut self, id: &str) -> Option<Message> {
        let list = self.list_mut();
        let pos = list.position(id)?;
        let message = list.items[pos].clone();
        list.remove(pos);
        Some(message)
    }

    /// Removes every message.
    pub fn clear(&mut self) {
        *self = Self::default();
    }

    /// The list for editing as a `Vec` (copied first if another holder shares it). The id
    /// index is dropped and rebuilt when next needed.
    pub fn make_mut(&mut self) -> &mut Vec<Message> {
        let list = self.list_mut();
        list.index = None;
        list.open_calls = OnceLock::new();
        &mut list.items
    }

    /// Whether some assistant tool call has no tool result after it (a run cancelled or
    /// abandoned between a call and its result). Constant time while the list only grows.
    ///
    /// ```
    /// use kit::{Message, Messages, ToolCall};
    ///
    /// let call = ToolCall::with_id("call_1", "search", serde_json::json!({"q": "tokio"}));
    /// let mut conversation =
    ///     Messages::from(vec![Message::user("Hi"), Message::assistant_with_tool_calls("", vec![call])]);
    /// assert!(conversation.has_open_tool_calls());
    /// conversation.push(Message::tool("call_1", "3 results"));
    /// assert!(!conversation.has_open_tool_calls());
    /// ```
    pub fn has_open_tool_calls(&self) -> bool {
        !self.inner.open_calls().is_empty()
    }

    /// The messages as a `Vec` (without a copy when nothing else shares them).
    pub fn into_vec(self) -> Vec<Message> {
        match Arc::try_unwrap(self.inner) {
            Ok(list) => list.items,
            Err(shared) => shared.items.clone(),
        }
    }

    /// Whether `self` and `other` share one list (a clone not written to since).
    pub fn ptr_eq(&self, other: &Messages) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    fn list_mut(&mut self) -> &mut List {
        Arc::make_mut(&mut self.inner)
    }
}

impl Deref for Messages {
    type Target = [Message];
    fn deref(&self) -> &[Message] {
        &self.inner.items
    }
}

impl AsRef<[Message]> for Messages {
    fn as_ref(&self) -> &[Message] {
        &self.inner.items
    }
}

impl std::borrow::Borrow<[Message]> for Messages {
    fn borrow(&self) -> &[Message] {
        &self.inner.items
    }
}

impl<'a> IntoIterator for &'a Messages {
    type Item = &'a Message;
    type IntoIter = std::slice::Iter<'a, Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.inner.items.iter()
    }
}

impl IntoIterator for Messages {
    type Item = Message;
    type IntoIter = std::vec::IntoIter<Message>;
    fn into_iter(self) -> Self::IntoIter {
        self.into_vec().into_iter()
    }
}

impl From<Vec<Message>> for Messages {
    fn from(items: Vec<Message>) -> Self {
        Messages {
            inner: Arc::new(List {
                items,
                index: None,
                open_calls: OnceLock::new(),
            }),
        }
    }
}

impl From<&[Message]> for Messages {
    fn from(items: &[Message]) -> Self {
        Messages::from(items.to_vec())
    }
}

impl<const N: usize> From<[Message; N]> for Messages {
    fn from(items: [Message; N]) -> Self {
        Messages::from(Vec::from(items))
    }
}

impl From<Messages> for Vec<Message> {
    fn from(messages: Messages) -> Self {
        messages.into_vec()
    }
}

impl FromIterator<Message> for Messages {
    fn from_iter<I: IntoIterator<Item = Message>>(iter: I) -> Self {
        Messages::from(iter.into_iter().collect::<Vec<_>>())
    }
}

impl Extend<Message> for Messages {
    /// Appends (no id check, like `Vec::extend`).
    fn extend<I: IntoIterator<Item = Message>>(&mut self, iter: I) {
        let list = self.list_mut();
        for message in iter {
            list.push(message);
        }
    }
}

impl std::fmt::Debug for Messages {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.inner.items.fmt(f)
    }
}

impl PartialEq for Messages {
    fn eq(&self, other: &Self) -> bool {
        self.ptr_eq(other) || self.inner.items == other.inner.items
    }
}

impl PartialEq<Vec<Message>> for Messages {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.inner.items == *other
    }
}

impl PartialEq<[Message]> for Messages {
    fn eq(&self, other: &[Message]) -> bool {
        self.inner.items == other
    }
}

impl Serialize for Messages {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.inner.items.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Messages {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Messages::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> Vec<Message> {
        (0..n)
            .map(|i| Message::user(format!("m{i}")).with_id(format!("id-{i}")))
            .collect()
    }

    #[test]
    fn upserts_find_ids_below_and_above_the_index_threshold() {
        for n in [5, INDEX_FROM + 5, 500] {
            let mut m = Messages::from(numbered(n));
            m.upsert(Message::user("again").with_id("id-2"));
            assert_eq!(m.len(), n, "{n}: an existing id is replaced, not appended");
            assert_eq!(m[2].text(), "again");
            m.upsert(Message::user("new").with_id("fresh"));
            assert_eq!(m.len(), n + 1);
            assert_eq!(m.position("fresh"), Some(n));
            assert_eq!(
                m.position("missing"),
                None,
                "{n}: an absent id is not found"
            );
        }
    }

    #[test]
    fn removing_keeps_later_lookups_right() {
        let mut m = Messages::from(numbered(100));
        assert!(m.remove("id-10").is_some());
        assert_eq!(
            m.position("id-11"),
            Some(10),
            "positions after the removal moved"
        );
        assert_eq!(m.position("id-10"), None);
        assert!(m.remove("id-10").is_none());
        m.upsert(Message::user("x").with_id("id-99"));
        assert_eq!(m.len(), 99);
    }

    #[test]
    fn a_shared_list_is_copied_only_when_written() {
        let mut a = Messages::from(numbered(40));
        let b = a.clone();
        assert!(a.ptr_eq(&b));
        a.push(Message::user("only in a"));
        assert!(!a.ptr_eq(&b), "writing a shared list copies it");
        assert_eq!((a.len(), b.len()), (41, 40));
        // Not shared any more: appends go in place.
        let list = Arc::as_ptr(&a.inner);
        a.push(Message::user("in place"));
        assert_eq!(Arc::as_ptr(&a.inner), list);
    }

    #[test]
    fn edits_through_make_mut_drop_the_index() {
        let mut m = Messages::from(numbered(100));
        assert_eq!(m.position("id-50"), Some(50));
        m.make_mut().swap(50, 60);
        assert_eq!(m.position("id-50"), Some(60));
        assert_eq!(m.position("id-60"), Some(50));
    }

    #[test]
    fn it_serialises_as_a_plain_array() {
        let m = Messages::from(numbered(2));
        let json = serde_json::to_value(&m).unwrap();
        assert!(json.is_array());
        let back: Messages = serde_json::from_value(json).unwrap();
        assert_eq!(back, m);
        assert!(serde_json::from_str::<Messages>("{\"not\": \"a list\"}").is_err());
    }

    #[test]
    fn appends_and_lookups_stay_constant_time_as_the_list_grows() {
        // Counted, not timed: probes of the scan fallback stay at zero.
        let mut m = Messages::new();
        for i in 0..20_000 {
            m.upsert(Message::user("x").with_id(format!("id-{i}")));
        }
        assert_eq!(m.len(), 20_000);
        let index = m.inner.index.as_ref().map_or(0, FastMap::len);
        assert_eq!(index, 20_000, "every id is indexed");
    }

    fn calls(ids: &[&str]) -> Message {
        let calls = ids
            .iter()
            .map(|id| crate::message::ToolCall::with_id(*id, "t", serde_json::json!({})))
            .collect();
        Message::assistant_with_tool_calls("", calls)
    }

    #[test]
    fn open_tool_calls_follow_appends_edits_and_removals() {
        let mut m = Messages::from(vec![Message::user("q"), calls(&["a", "b"])]);
        assert!(m.has_open_tool_calls());
        m.push(Message::tool("a", "ok"));
        assert!(m.has_open_tool_calls(), "b is still open");
        m.push(Message::tool("b", "ok"));
        assert!(!m.has_open_tool_calls());
        // A result before its call does not answer it (it answers nothing later).
        m.push(Message::tool("c", "early"));
        m.push(calls(&["c"]));
        assert!(m.has_open_tool_calls());
        // Replacing the call by id (a human edited it) is seen.
        let id = m[m.len() - 1].id.clone();
        m.upsert(Message::assistant("no call after all").with_id(id.clone()));
        assert!(!m.has_open_tool_calls());
        // Edits through make_mut and removals are seen.
        m.make_mut().push(calls(&["d"]));
        assert!(m.has_open_tool_calls());
        let last = m[m.len() - 1].id.clone();
        assert!(m.remove(&last).is_some());
        assert!(!m.has_open_tool_calls());
        // An id reused by a later answer: each call needs its own result.
        let mut m = Messages::from(vec![calls(&["call_0"]), Message::user("stop")]);
        m.push(calls(&["call_0"]));
        m.push(Message::tool("call_0", "ok"));
        assert!(m.has_open_tool_calls(), "the first call_0 is still open");
        m.push(calls(&["call_0"]));
        m.push(Message::tool("call_0", "ok"));
        assert!(m.has_open_tool_calls());
        // An id repeated within one answer is one call: one result closes it.
        let mut m = Messages::from(vec![calls(&["x", "x"])]);
        m.push(Message::tool("x", "ok"));
        assert!(!m.has_open_tool_calls());
        let many: Vec<String> = (0..40).map(|i| format!("c{}", i % 20)).collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        let mut m = Messages::from(vec![calls(&many)]);
        for i in 0..20 {
            m.push(Message::tool(format!("c{i}"), "ok"));
        }
        assert!(!m.has_open_tool_calls());
    }

    #[test]
    fn open_tool_calls_of_a_shared_or_read_back_list_are_its_own() {
        let mut m = Messages::from(vec![calls(&["a"])]);
        assert!(m.has_open_tool_calls());
        let shared = m.clone();
        m.push(Message::tool("a", "ok"));
        assert!(!m.has_open_tool_calls());
        assert!(
            shared.has_open_tool_calls(),
            "the earlier view still has its open call"
        );
        let json = serde_json::to_string(&shared).unwrap();
        let back: Messages = serde_json::from_str(&json).unwrap();
        assert!(back.has_open_tool_calls());
    }

    #[test]
    fn checking_for_open_calls_stays_constant_time_as_the_list_grows() {
        // Counted, not timed: the open set is built once, then appends keep it (a push that
        // dropped it would leave it unbuilt until the next check rescans every message).
        let mut m = Messages::new();
        assert!(!m.has_open_tool_calls());
        for i in 0..10_000 {
            let id = format!("call-{i}");
            m.push(calls(&[&id]));
            m.push(Message::tool(&id, "ok"));
        }
        m.push(calls(&["last"]));
        let kept = m.inner.open_calls.get().map(|open| open.len());
        assert_eq!(
            kept,
            Some(1),
            "the set was kept up to date by 20,001 appends"
        );
        assert!(m.has_open_tool_calls());
    }
}
