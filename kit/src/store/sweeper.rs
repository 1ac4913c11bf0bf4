//! Deleting expired items on a schedule.

use std::sync::Arc;
use std::time::Duration;

use super::{Store, StoreError};

/// Calls [`Store::sweep_expired`] every `every` (the first time at once) until the returned
/// task is dropped; `on_sweep` sees how many items each sweep deleted, or why it failed.
///
/// Expired items are never returned whether or not they were swept: the sweep only gives the
/// space back. Must be called within a tokio runtime.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use kit::store::{MemoryStore, Store, spawn_sweeper};
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
/// let task = spawn_sweeper(store, Duration::from_secs(300), |result| {
///     if let Err(e) = result {
///         eprintln!("store sweep failed: {e}");
///     }
/// });
/// drop(task); // stops sweeping
/// # }
/// ```
pub fn spawn_sweeper(
    store: Arc<dyn Store>,
    every: Duration,
    on_sweep: impl Fn(Result<u64, StoreError>) + Send + Sync + 'static,
) -> SweeperTask {
    let every = every.max(Duration::from_millis(1));
    let handle = tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            on_sweep(store.sweep_expired().await);
        }
    });
    SweeperTask { handle }
}

/// A [spawned](spawn_sweeper) sweeper; dropping it stops the sweeps.
#[derive(Debug)]
pub struct SweeperTask {
    handle: tokio::task::JoinHandle<()>,
}

impl SweeperTask {
    /// Stops sweeping (a sweep under way is abandoned).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for SweeperTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}
