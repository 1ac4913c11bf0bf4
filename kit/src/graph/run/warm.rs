//! Warm threads: the states of threads a graph finished, kept so that the next run on the same
//! thread goes on from them instead of loading the thread again.
//!
//! Loading a thread reads and decodes its whole state, so an invoke on a long thread costs time
//! in proportion to the thread's history. A graph therefore keeps the state each finished run
//! leaves behind, keyed by thread and namespace, together with the id of the checkpoint that
//! holds it. The next run on that thread asks the checkpointer for the thread's head (one
//! small read): if it is still that checkpoint, the kept state is exactly what loading would
//! produce, because a checkpoint's contents never change. Anything that moved the head (another
//! process, `update_state`, a fork, a deleted thread) makes the entry stale and the run loads as
//! before. A run takes its entry out while it runs, so two runs never share one.
//!
//! Only completed runs leave an entry (a paused or failed run's checkpoint has pending writes
//! the loader must see), and the number of entries is bounded (least recently used first out).

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use super::persist::ChannelStats;
use crate::state::State;

/// How many finished threads a graph keeps warm unless told otherwise.
pub const DEFAULT_WARM_THREADS: usize = 64;

/// What a finished run leaves for the next run on its thread.
pub(super) struct WarmThread<S> {
    /// The checkpoint this state is the contents of (the thread's head when it was kept).
    pub(super) head: String,
    pub(super) step: i64,
    pub(super) state: S,
    pub(super) versions: Arc<BTreeMap<String, String>>,
    pub(super) stats: Vec<ChannelStats>,
    pub(super) joins: Vec<u64>,
}

/// A graph's warm threads, by (thread id, namespace).
pub(crate) struct WarmThreads<S> {
    capacity: usize,
    entries: Mutex<Entries<S>>,
}

struct Entries<S> {
    by_thread: HashMap<(String, String), (u64, WarmThread<S>)>,
    /// Increases with every insert: an entry's tick says how recently it was kept.
    tick: u64,
}

impl<S: State> WarmThreads<S> {
    pub(crate) fn new(capacity: usize) -> Self {
        WarmThreads {
            capacity,
            entries: Mutex::new(Entries {
                by_thread: HashMap::new(),
                tick: 0,
            }),
        }
    }

    pub(super) fn enabled(&self) -> bool {
        self.capacity > 0
    }

    /// Takes the entry of a thread out (a run owns it while it runs).
    pub(super) fn take(&self, thread_id: &str, ns: &str) -> Option<WarmThread<S>> {
        if !self.enabled() {
            return None;
        }
        let mut entries = self.lock();
        if entries.by_thread.is_empty() {
            return None;
        }
        entries
            .by_thread
            .remove(&(thread_id.to_string(), ns.to_string()))
            .map(|(_, warm)| warm)
    }

    /// Keeps what a finished run left, dropping the least recently kept entry when full.
    pub(super) fn keep(&self, thread_id: String, ns: String, warm: WarmThread<S>) {
        if !self.enabled() {
            return;
        }
        let mut entries = self.lock();
        entries.tick += 1;
        let tick = entries.tick;
        let key = (thread_id, ns);
        if entries.by_thread.len() >= self.capacity && !entries.by_thread.contains_key(&key) {
            // O(capacity), and the capacity is small.
            if let Some(oldest) = entries
                .by_thread
                .iter()
                .min_by_key(|(_, (tick, _))| *tick)
                .map(|(key, _)| key.clone())
            {
                entries.by_thread.remove(&oldest);
            }
        }
        entries.by_thread.insert(key, (tick, warm));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<S>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(crate::State, Clone, Default, serde::Serialize, serde::Deserialize)]
    struct S {
        n: i64,
    }

    fn warm(head: &str, n: i64) -> WarmThread<S> {
        WarmThread {
            head: head.into(),
            step: n,
            state: S { n },
            versions: Arc::default(),
            stats: Vec::new(),
            joins: Vec::new(),
        }
    }

    #[test]
    fn an_entry_is_taken_once_and_only_for_its_thread_and_namespace() {
        let threads = WarmThreads::<S>::new(4);
        threads.keep("t1".into(), String::new(), warm("c1", 1));
        assert!(threads.take("t2", "").is_none());
        assert!(threads.take("t1", "sub").is_none());
        let entry = threads.take("t1", "").map(|w| (w.head, w.state.n));
        assert_eq!(entry, Some(("c1".to_string(), 1)));
        assert!(threads.take("t1", "").is_none(), "a run owns its entry");
    }

    #[test]
    fn the_least_recently_kept_thread_goes_first_and_the_size_stays_bounded() {
        let threads = WarmThreads::<S>::new(2);
        threads.keep("a".into(), String::new(), warm("a1", 1));
        threads.keep("b".into(), String::new(), warm("b1", 1));
        // Keeping `a` again refreshes it: `b` is now the oldest.
        threads.keep("a".into(), String::new(), warm("a2", 2));
        threads.keep("c".into(), String::new(), warm("c1", 1));
        assert!(threads.take("b", "").is_none());
        assert_eq!(threads.take("a", "").map(|w| w.head), Some("a2".into()));
        assert_eq!(threads.take("c", "").map(|w| w.head), Some("c1".into()));
        for i in 0..1000 {
            threads.keep(format!("t{i}"), String::new(), warm("x", i));
        }
        assert_eq!(threads.lock().by_thread.len(), 2);
    }

    #[test]
    fn a_capacity_of_zero_keeps_nothing() {
        let threads = WarmThreads::<S>::new(0);
        threads.keep("t1".into(), String::new(), warm("c1", 1));
        assert!(threads.take("t1", "").is_none());
        assert_eq!(threads.lock().by_thread.len(), 0);
    }

    /// A root run on a thread is kept for the thread's next run; a run inside it (a
    /// subgraph, named after its task, which no later run uses again) is not.
    #[tokio::test]
    async fn only_root_runs_are_kept_warm() {
        use crate::graph::{GraphBuilder, NodeContext};
        use crate::{END, MemoryCheckpointer, RunOptions, START};

        let child = GraphBuilder::<S>::new("child")
            .sync_node("inc", |s: &S, _: &NodeContext| SUpdate::new().n(s.n + 1))
            .edge(START, "inc")
            .edge("inc", END)
            .compile()
            .unwrap();
        let parent = GraphBuilder::<S>::new("parent")
            .subgraph(
                "sub",
                child.clone(),
                |s: &S| SUpdate::new().n(s.n),
                |c: &S| SUpdate::new().n(c.n),
            )
            .edge(START, "sub")
            .edge("sub", END)
            .checkpointer(Arc::new(MemoryCheckpointer::new()))
            .compile()
            .unwrap();
        for round in 0..3 {
            let out = parent
                .invoke(SUpdate::new())
                .options(&RunOptions::new().thread_id("t"))
                .await
                .unwrap();
            assert_eq!(out.state().n, round + 1);
        }
        assert_eq!(parent.inner.warm.lock().by_thread.len(), 1);
        assert_eq!(child.inner.warm.lock().by_thread.len(), 0);
    }
}
