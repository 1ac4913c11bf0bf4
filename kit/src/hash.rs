//! The hashing for lookups every step makes: nodes by name, tools by name, messages by id.
//!
//! std's maps hash with SipHash, at about a hundred instructions per lookup. These maps use
//! foldhash instead (about a fifth of the cost), with its seed taken from the operating
//! system's random source (through std's `RandomState`) rather than foldhash's own, which comes
//! from addresses and the clock. Two of them hold keys a model or a client chooses (a
//! conversation's message ids and its open tool-call ids), so a seed nobody can reconstruct is
//! what keeps chosen collisions out. Maps whose keys a network peer chooses in bulk (thread ids)
//! keep std's hasher.

use std::hash::BuildHasher;
use std::sync::LazyLock;

use foldhash::SharedSeed;
use foldhash::fast::{FoldHasher, SeedableRandomState};

/// A `HashMap` hashed with foldhash, OS-seeded.
pub(crate) type FastMap<K, V> = std::collections::HashMap<K, V, Seeded>;

/// 64 random bits from the operating system: std seeds each `RandomState` from it, and the
/// hash of a constant under a fresh one is as random as its keys.
fn os_random() -> u64 {
    std::hash::RandomState::new().hash_one(0u64)
}

/// The seed every map of this process shares (each map adds its own per-map seed).
static SHARED: LazyLock<SharedSeed> = LazyLock::new(|| SharedSeed::from_u64(os_random()));

/// foldhash with an OS-random seed: the hasher of [`FastMap`].
#[derive(Clone, Debug)]
pub(crate) struct Seeded(SeedableRandomState);

impl Default for Seeded {
    fn default() -> Self {
        Seeded(SeedableRandomState::with_seed(
            os_random(),
            LazyLock::force(&SHARED),
        ))
    }
}

impl BuildHasher for Seeded {
    type Hasher = FoldHasher<'static>;

    #[inline]
    fn build_hasher(&self) -> FoldHasher<'static> {
        self.0.build_hasher()
    }
}

/// One hash function for the whole process: what a value hashes to must agree between copies
/// of a structure (a conversation's id index is cloned with it).
static PROCESS: LazyLock<Seeded> = LazyLock::new(Seeded::default);

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
        let hashes: std::collections::HashSet<u64, Seeded> = (0..10_000)
            .map(|i| process_hash(format!("call_{i}").as_str()))
            .collect();
        assert_eq!(hashes.len(), 10_000);
    }

    #[test]
    fn maps_are_seeded_apart_and_find_what_they_hold_and_nothing_else() {
        let mut map: FastMap<String, usize> = FastMap::default();
        for i in 0..1_000 {
            map.insert(format!("node_{i}"), i);
        }
        assert_eq!(map.get("node_999"), Some(&999));
        assert_eq!(map.get("node_1000"), None);
        assert_eq!(map.get(""), None);
        // Two maps hash one key differently: a collision found in one is not one in the other.
        let (x, y) = (Seeded::default(), Seeded::default());
        assert_ne!(x.hash_one("same key"), y.hash_one("same key"));
    }
}
