//! [`Retention`]: a time to live for threads and pruning of their history, on a schedule.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{PruneReport, PruneStrategy, timestamp};
use crate::checkpoint::{CheckpointError, Checkpointer};

type OnSweep = dyn Fn(&Result<SweepReport, CheckpointError>) + Send + Sync;

/// A retention policy: delete threads idle longer than a time to live, and prune the history of
/// the others. Run it once with [`sweep`](Self::sweep), or every so often with
/// [`spawn`](Self::spawn).
///
/// A thread's age is the time since its last checkpoint: reading a thread does not renew it.
/// The time to live deletes a thread whatever it holds, a pause waiting for a human included
/// (as LangGraph's thread TTL does); pruning never breaks a pause (see the
/// [module docs](super)).
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use kit::checkpoint::{Checkpointer, MemoryCheckpointer, Retention};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), kit::checkpoint::CheckpointError> {
/// let checkpointer: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
/// let retention = Retention::new()
///     .thread_ttl(Duration::from_secs(30 * 24 * 3600))
///     .keep_latest(10)
///     .sweep_every(Duration::from_secs(3600))
///     .on_sweep(|result| {
///         if let Err(e) = result {
///             eprintln!("checkpoint retention failed: {e}");
///         }
///     });
/// let report = retention.sweep(checkpointer.as_ref()).await?;
/// assert!(report.deleted_threads.is_empty());
/// let task = retention.spawn(checkpointer); // sweeps every hour until dropped
/// # drop(task);
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use]
pub struct Retention {
    thread_ttl: Option<Duration>,
    keep_latest: Option<usize>,
    every: Duration,
    on_sweep: Option<Arc<OnSweep>>,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            thread_ttl: None,
            keep_latest: None,
            every: Duration::from_secs(3600),
            on_sweep: None,
        }
    }
}

impl fmt::Debug for Retention {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Retention")
            .field("thread_ttl", &self.thread_ttl)
            .field("keep_latest", &self.keep_latest)
            .field("every", &self.every)
            .finish_non_exhaustive()
    }
}

/// What one sweep did.
#[derive(Debug, Default)]
#[non_exhaustive]
pub struct SweepReport {
    /// Threads deleted because they were idle longer than the time to live.
    pub deleted_threads: Vec<String>,
    /// Threads whose history was pruned (looked at; some may have had nothing to remove).
    pub pruned_threads: usize,
    /// What pruning removed, over all threads.
    pub removed: PruneReport,
    /// Threads that could not be pruned, with why; the sweep went on with the others.
    pub failed: Vec<(String, CheckpointError)>,
}

impl Retention {
    /// A policy that does nothing until given a time to live or a number of checkpoints to
    /// keep; it sweeps every hour once spawned (LangGraph's default sweep interval).
    pub fn new() -> Self {
        Self::default()
    }

    /// Deletes threads whose last checkpoint is older than `ttl`.
    pub fn thread_ttl(mut self, ttl: Duration) -> Self {
        self.thread_ttl = Some(ttl);
        self
    }

    /// Prunes every thread to its newest `n` checkpoints per namespace
    /// ([`PruneStrategy::KeepLatest`]).
    pub fn keep_latest(mut self, n: usize) -> Self {
        self.keep_latest = Some(n);
        self
    }

    /// How often a [spawned](Self::spawn) policy sweeps (an hour by default).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.every = every.max(Duration::from_millis(1));
        self
    }

    /// Called after each scheduled sweep with what it did or why it failed (a spawned policy
    /// has no caller to return an error to).
    pub fn on_sweep(
        mut self,
        f: impl Fn(&Result<SweepReport, CheckpointError>) + Send + Sync + 'static,
    ) -> Self {
        self.on_sweep = Some(Arc::new(f));
        self
    }

    /// Sweeps once: deletes the threads past their time to live, then prunes every other
    /// thread. A thread that fails to prune is reported in [`SweepReport::failed`] and the
    /// sweep goes on; listing or deleting threads failing is an error.
    pub async fn sweep(
        &self,
        checkpointer: &dyn Checkpointer,
    ) -> Result<SweepReport, CheckpointError> {
        self.sweep_changed_since(checkpointer, None).await
    }

    /// [`sweep`](Self::sweep), pruning only the threads written to at or after `since`
    /// (the others were pruned by an earlier sweep and have not grown).
    async fn sweep_changed_since(
        &self,
        checkpointer: &dyn Checkpointer,
        since: Option<&str>,
    ) -> Result<SweepReport, CheckpointError> {
        let mut report = SweepReport::default();
        if let Some(ttl) = self.thread_ttl {
            let cutoff = SystemTime::now()
                .checked_sub(ttl)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            report.deleted_threads = checkpointer.delete_threads_before(cutoff).await?;
        }
        let Some(n) = self.keep_latest else {
            return Ok(report);
        };
        for thread in checkpointer.threads().await? {
            // Listed newest first: the rest were last written before `since`.
            if since.is_some_and(|since| thread.updated_at.as_str() < since) {
                break;
            }
            report.pruned_threads += 1;
            match checkpointer
                .prune(&thread.thread_id, PruneStrategy::KeepLatest(n))
                .await
            {
                Ok(removed) => report.removed.add(removed),
                Err(e) => report.failed.push((thread.thread_id, e)),
            }
        }
        Ok(report)
    }

    /// Sweeps now and then every [`sweep_every`](Self::sweep_every), on the tokio runtime,
    /// until the returned task is dropped or [stopped](RetentionTask::stop). After the first
    /// sweep, only threads written to since the previous sweep began are pruned again.
    ///
    /// Must be called within a tokio runtime.
    pub fn spawn(self, checkpointer: Arc<dyn Checkpointer>) -> RetentionTask {
        let handle = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(self.every);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut since: Option<String> = None;
            loop {
                ticks.tick().await;
                let started = timestamp(SystemTime::now());
                let result = self
                    .sweep_changed_since(checkpointer.as_ref(), since.as_deref())
                    .await;
                if result.is_ok() {
                    since = Some(started);
                }
                if let Some(f) = &self.on_sweep {
                    f(&result);
                }
            }
        });
        RetentionTask { handle }
    }
}

/// A [spawned](Retention::spawn) retention policy; dropping it stops the sweeps.
#[derive(Debug)]
pub struct RetentionTask {
    handle: tokio::task::JoinHandle<()>,
}

impl RetentionTask {
    /// Stops sweeping (a sweep under way is abandoned between two operations).
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for RetentionTask {
    fn drop(&mut self) {
        self.handle.abort();
    }
}
