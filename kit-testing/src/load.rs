//! Wrappers that count, for load tests and the benchmark: [`Counting`] (a hosted graph: how
//! many times each run executed, how many executed at once at most, how many ended) and
//! [`Recording`] (a run store: how many run ends it recorded, which is when a client sees a
//! run finished).

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use kit::server::store::{
    Finish, NewEvent, NewRun, RecoverAction, RunRecord, RunStore, StoreError, StoredEvent,
    ThreadRecord,
};
use kit::server::{Hosted, HostedError, HostedOutput, HostedRun};
use serde_json::Value;
use tokio::sync::{Notify, broadcast};

use crate::researcher::Gate;

/// What [`Counting`] and [`Recording`] saw.
#[derive(Debug, Default)]
pub struct LoadStats {
    executions: Mutex<HashMap<String, usize>>,
    current: AtomicUsize,
    peak: AtomicUsize,
    finished: AtomicUsize,
    recorded: AtomicUsize,
    notify: Notify,
}

impl LoadStats {
    /// Executions by run id.
    pub fn executions(&self) -> HashMap<String, usize> {
        match self.executions.lock() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// The most runs executing at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::SeqCst)
    }

    /// Executions that ended (with any outcome).
    pub fn finished(&self) -> usize {
        self.finished.load(Ordering::SeqCst)
    }

    /// Run ends a [`Recording`] store recorded.
    pub fn recorded(&self) -> usize {
        self.recorded.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` executions ended.
    pub async fn wait_finished(&self, n: usize) {
        self.wait_until(|stats| stats.finished() >= n).await;
    }

    /// Waits until a [`Recording`] store recorded at least `n` run ends (a run's end is
    /// written after its execution ended, so this comes after [`wait_finished`](Self::wait_finished)).
    pub async fn wait_recorded(&self, n: usize) {
        self.wait_until(|stats| stats.recorded() >= n).await;
    }

    async fn wait_until(&self, done: impl Fn(&Self) -> bool) {
        loop {
            let notified = self.notify.notified();
            if done(self) {
                return;
            }
            notified.await;
        }
    }
}

/// Wraps a hosted graph and counts its executions into shared [`LoadStats`].
pub struct Counting<H> {
    /// The wrapped graph.
    pub inner: H,
    /// Where the counts go.
    pub stats: std::sync::Arc<LoadStats>,
}

struct Running<'a>(&'a LoadStats);

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.0.current.fetch_sub(1, Ordering::SeqCst);
        self.0.finished.fetch_add(1, Ordering::SeqCst);
        self.0.notify.notify_waiters();
    }
}

#[kit::async_trait]
impl<H: Hosted> Hosted for Counting<H> {
    fn check_input(&self, input: &Value) -> Result<(), String> {
        self.inner.check_input(input)
    }

    async fn run(&self, run: HostedRun) -> Result<HostedOutput, HostedError> {
        {
            let mut map = match self.stats.executions.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            *map.entry(run.run_id.clone()).or_default() += 1;
        }
        let now = self.stats.current.fetch_add(1, Ordering::SeqCst) + 1;
        self.stats.peak.fetch_max(now, Ordering::SeqCst);
        let _running = Running(&self.stats);
        self.inner.run(run).await
    }
}

/// Wraps a run store and counts the run ends it recorded into shared [`LoadStats`]; every
/// call goes to the wrapped store unchanged.
///
/// ```
/// use std::sync::Arc;
/// use kit::server::store::SqliteRunStore;
/// use kit_testing::load::{LoadStats, Recording};
///
/// let stats = Arc::new(LoadStats::default());
/// let store = Recording::new(SqliteRunStore::in_memory()?, stats.clone());
/// let worker = kit::server::Worker::builder().store(store);
/// # let _ = worker;
/// # Ok::<(), kit::server::store::StoreError>(())
/// ```
pub struct Recording<S> {
    inner: S,
    stats: Arc<LoadStats>,
    gate: Option<Gate>,
}

impl<S: RunStore> Recording<S> {
    /// Counts the ends `inner` records into `stats`.
    pub fn new(inner: S, stats: Arc<LoadStats>) -> Self {
        Recording {
            inner,
            stats,
            gate: None,
        }
    }

    /// Holds every run end back until `gate` opens: the worker sees a store slow to write
    /// them (and its runs stay `running` meanwhile).
    pub fn gated(inner: S, stats: Arc<LoadStats>, gate: Gate) -> Self {
        Recording {
            inner,
            stats,
            gate: Some(gate),
        }
    }
}

#[kit::async_trait]
impl<S: RunStore> RunStore for Recording<S> {
    fn shared(&self) -> bool {
        self.inner.shared()
    }

    async fn create_thread(
        &self,
        thread_id: &str,
        owner: &str,
        metadata: Value,
    ) -> Result<ThreadRecord, StoreError> {
        self.inner.create_thread(thread_id, owner, metadata).await
    }

    async fn get_thread(&self, thread_id: &str) -> Result<Option<ThreadRecord>, StoreError> {
        self.inner.get_thread(thread_id).await
    }

    async fn create_run(&self, run: NewRun) -> Result<RunRecord, StoreError> {
        self.inner.create_run(run).await
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.inner.get_run(run_id).await
    }

    async fn thread_runs(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.inner.thread_runs(thread_id, limit, offset).await
    }

    async fn claim(
        &self,
        worker_id: &str,
        graph_ids: &[String],
        max: usize,
        lease_until: u64,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.inner
            .claim(worker_id, graph_ids, max, lease_until)
            .await
    }

    async fn renew(&self, worker_id: &str, lease_until: u64) -> Result<Vec<String>, StoreError> {
        self.inner.renew(worker_id, lease_until).await
    }

    async fn finish(
        &self,
        run_id: &str,
        worker_id: &str,
        finish: &Finish,
    ) -> Result<bool, StoreError> {
        if let Some(gate) = &self.gate {
            gate.pass().await;
        }
        let recorded = self.inner.finish(run_id, worker_id, finish).await;
        if let Ok(true) = recorded {
            self.stats.recorded.fetch_add(1, Ordering::SeqCst);
            self.stats.notify.notify_waiters();
        }
        recorded
    }

    async fn release(&self, run_id: &str, worker_id: &str) -> Result<(), StoreError> {
        self.inner.release(run_id, worker_id).await
    }

    async fn request_cancel(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        self.inner.request_cancel(run_id).await
    }

    async fn append_events(
        &self,
        thread_id: &str,
        run_id: &str,
        events: &[NewEvent],
    ) -> Result<u64, StoreError> {
        self.inner.append_events(thread_id, run_id, events).await
    }

    async fn read_events(
        &self,
        thread_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StoredEvent>, StoreError> {
        self.inner.read_events(thread_id, after, limit).await
    }

    async fn prune_events(&self, before: u64) -> Result<u64, StoreError> {
        self.inner.prune_events(before).await
    }

    async fn event_notices(&self) -> Result<broadcast::Receiver<String>, StoreError> {
        self.inner.event_notices().await
    }

    async fn recover(
        &self,
        worker_id: &str,
        all_running: bool,
        now: u64,
        action: RecoverAction,
        max_attempts: u32,
    ) -> Result<Vec<RunRecord>, StoreError> {
        self.inner
            .recover(worker_id, all_running, now, action, max_attempts)
            .await
    }
}
