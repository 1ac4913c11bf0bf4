//! A [`Hosted`] wrapper that counts executions per run, for load tests and the benchmark:
//! how many times each run executed, how many executed at once at most, how many ended.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use kit::server::{Hosted, HostedError, HostedOutput, HostedRun};
use serde_json::Value;
use tokio::sync::Notify;

/// What [`Counting`] saw.
#[derive(Debug, Default)]
pub struct LoadStats {
    executions: Mutex<HashMap<String, usize>>,
    current: AtomicUsize,
    peak: AtomicUsize,
    finished: AtomicUsize,
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

    /// Waits until at least `n` executions ended.
    pub async fn wait_finished(&self, n: usize) {
        loop {
            let notified = self.notify.notified();
            if self.finished() >= n {
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
