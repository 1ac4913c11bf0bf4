//! The hashing for lookups every step makes: nodes by name, tools by name, messages by id.
//!
//! std's maps hash with SipHash, built to stand up to an attacker who picks the keys; a step
//! pays about a hundred instructions per lookup for it. These maps are keyed by names the
//! program declares, or looked up far more often than written, so they use foldhash (about a
//! fifth of the cost), seeded at random once per process: a peer that cannot see the seed
//! cannot choose ids that collide. Maps a network peer fills with keys of its own (thread
//! ids) keep std's hasher.

use std::hash::BuildHasher;
use std::sync::LazyLock;

/// A `HashMap` hashed with foldhash.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;

/// A `HashSet` hashed with foldhash.
pub(crate) type FastSet<K> = std::collections::HashSet<K, foldhash::fast::RandomState>;

/// One hash function for the whole process, seeded at random when first used: what a value
/// hashes to must agree between copies of a structure (a conversation's id index is cloned
/// with it).
static PROCESS: LazyLock<foldhash::fast::RandomState> =
    LazyLock::new(foldhash::fast::RandomState::default);

/// The process-wide hash of `value` (see [`PROCESS`]).
pub(crate) fn process_hash<T: std::hash::Hash + ?Sized>(value: &T) -> u64 {
    PROCESS.hash_one(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_process_hash_is_one_function_and_tells_ids_apart() {
        let a = crate::ids::random();
        let b = crate::ids::random();
        assert_eq!(process_hash(a.as_str()), process_hash(a.clone().as_str()));
        assert_ne!(process_hash(a.as_str()), process_hash(b.as_str()));
        // Ids that differ in one character only (what a counter makes) still differ.
        let hashes: FastSet<u64> = (0..10_000)
            .map(|i| process_hash(format!("call_{i}").as_str()))
            .collect();
        assert_eq!(hashes.len(), 10_000);
    }

    #[test]
    fn fast_maps_find_what_they_hold_and_nothing_else() {
        let mut map: FastMap<String, usize> = FastMap::default();
        for i in 0..1_000 {
            map.insert(format!("node_{i}"), i);
        }
        assert_eq!(map.get("node_999"), Some(&999));
        assert_eq!(map.get("node_1000"), None);
        assert_eq!(map.get(""), None);
    }
}
