//! A map that keeps at most `MAX` keys, forgetting the one first inserted when a new key comes
//! past the bound: what kit holds in memory about ids a model or a peer chooses (async tasks
//! heard of, file claims of a model answer, conversations whose summary failed), so a long-
//! lived process never grows with them.

use std::collections::{HashMap, VecDeque};

/// A `String`-keyed map of at most `MAX` entries, oldest (by first insertion) forgotten first.
#[derive(Debug)]
pub(crate) struct BoundedMap<V, const MAX: usize> {
    map: HashMap<String, V>,
    /// Keys in the order they were first inserted.
    order: VecDeque<String>,
}

impl<V, const MAX: usize> Default for BoundedMap<V, MAX> {
    fn default() -> Self {
        BoundedMap {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<V, const MAX: usize> BoundedMap<V, MAX> {
    pub(crate) fn get(&self, key: &str) -> Option<&V> {
        self.map.get(key)
    }

    /// Sets `key`'s value; a key already there keeps its place in the order.
    pub(crate) fn insert(&mut self, key: String, value: V) {
        self.make_room_for(&key);
        self.map.insert(key, value);
    }

    /// `key`'s value, made with `Default` (and counted as new) when absent.
    pub(crate) fn get_or_default(&mut self, key: &str) -> &mut V
    where
        V: Default,
    {
        self.make_room_for(key);
        self.map.entry(key.to_string()).or_default()
    }

    pub(crate) fn remove(&mut self, key: &str) -> Option<V> {
        let removed = self.map.remove(key)?;
        self.order.retain(|k| k != key);
        Some(removed)
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    /// How many keys the order holds (always [`len`](Self::len)), for the users' tests.
    #[cfg(test)]
    pub(crate) fn order_len(&self) -> usize {
        self.order.len()
    }

    /// Records a new `key` in the order, forgetting the oldest keys past the bound.
    fn make_room_for(&mut self, key: &str) {
        if self.map.contains_key(key) {
            return;
        }
        self.order.push_back(key.to_string());
        while self.order.len() > MAX {
            if let Some(oldest) = self.order.pop_front() {
                self.map.remove(&oldest);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_bound_the_first_inserted_go_and_updates_keep_their_place() {
        let mut map = BoundedMap::<u32, 3>::default();
        map.insert("a".into(), 1);
        map.insert("b".into(), 2);
        map.insert("a".into(), 10);
        map.insert("c".into(), 3);
        assert_eq!(map.len(), 3);
        map.insert("d".into(), 4);
        assert_eq!(
            map.get("a"),
            None,
            "the first inserted, updated since, goes first"
        );
        assert_eq!(map.get("b"), Some(&2));
        *map.get_or_default("e") += 5;
        assert_eq!(map.get("b"), None);
        assert_eq!(map.get("e"), Some(&5));
        assert_eq!(map.remove("c"), Some(3));
        assert_eq!(map.remove("c"), None);
        map.insert("f".into(), 6);
        assert_eq!((map.len(), map.order.len()), (3, 3));
        assert_eq!(map.get("d"), Some(&4), "a removed key leaves room");
    }
}
