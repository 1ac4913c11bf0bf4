//! A run that holds its thread's lease: the multitask strategies ("double texting").
//!
//! Before it reads the thread, a run given a [`MultitaskStrategy`] joins the thread's lease in
//! the checkpointer (see [`crate::checkpoint::lease`]) and waits there while the strategy says
//! so. While it runs, it renews the lease every `poll` and learns there that a newer run asked
//! it to stop; it then cancels itself the way a [`CancelToken`] does (its completed steps stay
//! durable), keeps renewing until it has wound down, and ends with [`GraphError::Preempted`].
//! It leaves the lease once its outcome is durable and before it reports it (so a consumer that
//! sees `run_end` finds the thread free), and also when its future is dropped.
//!
//! A renewal that fails is retried; a run that could not renew for half the time to live gives
//! up ([`GraphError::LeaseLost`]) while its row still stands, so it has stopped before any
//! other run can take the thread.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use futures::future::Either;
use tokio::sync::Notify;

use super::{Exec, RunInput, emit_failure};
use crate::checkpoint::{
    CheckpointError, Checkpointer, LeaseOp, LeaseOptions, LeaseState, MultitaskStrategy,
};
use crate::graph::Graph;
use crate::graph::cancel::CancelToken;
use crate::graph::error::GraphError;
use crate::graph::interrupt::Outcome;
use crate::graph::options::RunOptions;
use crate::state::State;

/// Runs `input` on `graph`, under the thread's lease when the options name a strategy.
/// Failures before a top-level run starts are reported on its event stream (a started run
/// reports its own outcome).
///
/// Not an `async fn`: a future awaited inside one is held twice in its state, and every run
/// (and so every subgraph and `invoke`) starts here. The leased path is boxed, since it holds
/// the run and the lease's watch at once.
pub(crate) fn run<S: State>(
    graph: &Graph<S>,
    opts: RunOptions,
    input: RunInput<S>,
) -> impl Future<Output = Result<Outcome<S>, GraphError>> + Send + '_ {
    match opts.multitask {
        None => Either::Left(start_and_run(graph, opts, input, None)),
        Some(strategy) => Either::Right(Box::pin(run_under_lease(graph, opts, input, strategy))),
    }
}

/// [`run`] holding the thread's lease for `strategy` (not an `async fn`: see [`start_and_run`]).
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn holds its arguments twice"
)]
fn run_under_lease<S: State>(
    graph: &Graph<S>,
    opts: RunOptions,
    input: RunInput<S>,
    strategy: MultitaskStrategy,
) -> impl Future<Output = Result<Outcome<S>, GraphError>> + '_ {
    async move {
        let lease = match Lease::join(graph, &opts, strategy).await {
            Ok(lease) => Arc::new(lease),
            Err(e) => {
                emit_failure(&graph.inner.name, &opts, &e).await;
                return Err(e);
            }
        };
        // The run's own token: cancelled by the caller's token or by a newer run.
        let token = CancelToken::new();
        let mut run_opts = opts.clone();
        run_opts.cancel = Some(token.clone());
        run_opts.run_id = Some(lease.id.clone());
        let settled = {
            let lease = lease.clone();
            Box::new(move || -> futures::future::BoxFuture<'static, ()> {
                Box::pin(async move { lease.release().await })
            })
        };
        let result = {
            let mut run = std::pin::pin!(start_and_run(graph, run_opts, input, Some(settled)));
            let stop = tokio::select! {
                result = &mut run => Err(result),
                stop = lease.watch(opts.cancel.as_ref()) => Ok(stop),
            };
            match stop {
                Err(result) => lease.explain(result, false),
                Ok(stop) => {
                    token.cancel_because(stop.reason(&lease.thread));
                    // Still the holder while it winds down (flushing, reporting).
                    let result = tokio::select! {
                        result = &mut run => result,
                        () = lease.keep_alive() => run.await,
                    };
                    match (result, stop) {
                        (Err(GraphError::Cancelled), Stop::Asked(strategy)) => {
                            Err(GraphError::Preempted {
                                thread_id: lease.thread.clone(),
                                strategy,
                            })
                        }
                        (Err(GraphError::Cancelled), Stop::Lost) => Err(lease.lost()),
                        (result, stop) => lease.explain(result, matches!(stop, Stop::Lost)),
                    }
                }
            }
        };
        lease.release().await;
        result
    }
}

/// Not an `async fn`, which would hold its arguments twice (see [`Exec::run`]).
#[expect(
    clippy::manual_async_fn,
    reason = "an async fn holds its arguments twice"
)]
fn start_and_run<S: State>(
    graph: &Graph<S>,
    opts: RunOptions,
    input: RunInput<S>,
    settled: Option<super::Settled>,
) -> impl Future<Output = Result<Outcome<S>, GraphError>> + '_ {
    async move {
        match Exec::start(graph, &opts).await {
            Ok(mut exec) => {
                if let Some(settled) = settled {
                    exec.on_settled(settled);
                }
                // Boxed: held inline, the executor's future would be copied into this one's
                // state twice over (see `run`).
                Box::pin(exec.run(input)).await
            }
            Err(e) => {
                // A subgraph's failure is reported by the run around it.
                if opts.namespace.is_empty() {
                    emit_failure(&graph.inner.name, &opts, &e).await;
                }
                Err(e)
            }
        }
    }
}

/// Wake-ups between runs of this process: a run that leaves a thread, or asks its holder to
/// stop, wakes the runs of this process waiting on it at once instead of at their next poll.
/// Threads share a fixed set of slots (a wake-up meant for another thread only costs a lease
/// check); runs in other processes notice at their next poll.
static WAKE: LazyLock<Vec<Notify>> = LazyLock::new(|| (0..64).map(|_| Notify::new()).collect());

fn wake_slot(thread: &str) -> &'static Notify {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    let hash = BuildHasherDefault::<DefaultHasher>::default().hash_one(thread);
    &WAKE[(hash % WAKE.len() as u64) as usize]
}

/// Why a running run must stop.
#[derive(Clone, Copy)]
enum Stop {
    /// The caller cancelled it.
    Cancelled,
    /// A newer run asked it to.
    Asked(MultitaskStrategy),
    /// Its lease could not be renewed in time.
    Lost,
}

impl Stop {
    fn reason(self, thread: &str) -> String {
        match self {
            Stop::Cancelled => "the run was cancelled".into(),
            Stop::Asked(strategy) => format!(
                "the run was stopped by a newer run on thread `{thread}` (multitask strategy \
                 `{strategy}`)"
            ),
            Stop::Lost => format!(
                "the run stopped: its lease on thread `{thread}` could not be renewed in time"
            ),
        }
    }
}

/// A run's place in its thread's lease. Dropped before [`release`](Self::release) completed
/// (the run's future was dropped), it leaves the lease from a spawned task.
struct Lease {
    checkpointer: Arc<dyn Checkpointer>,
    thread: String,
    id: String,
    options: LeaseOptions,
    released: AtomicBool,
    /// Its release found its row already gone (see [`explain`](Self::explain)).
    lost_at_release: AtomicBool,
}

impl Lease {
    /// Joins the lease and waits until the run holds the thread (a `Rollback` run's back-end
    /// deletes what the stopped run wrote as it hands the thread over).
    async fn join<S: State>(
        graph: &Graph<S>,
        opts: &RunOptions,
        strategy: MultitaskStrategy,
    ) -> Result<Lease, GraphError> {
        check(&opts.lease)?;
        let (checkpointer, thread) = super::thread::persistence(
            graph,
            opts,
            "a run with a multitask strategy (the lease lives in the checkpointer)",
        )?;
        let lease = Lease {
            checkpointer,
            thread,
            id: crate::ids::time_ordered(),
            options: opts.lease,
            released: AtomicBool::new(false),
            lost_at_release: AtomicBool::new(false),
        };
        let joined = lease.wait_turn(strategy, opts.cancel.as_ref()).await;
        if joined.is_err() {
            lease.release().await;
        }
        joined.map(|()| lease)
    }

    async fn wait_turn(
        &self,
        strategy: MultitaskStrategy,
        cancel: Option<&CancelToken>,
    ) -> Result<(), GraphError> {
        let mut op = LeaseOp::Join(strategy);
        let mut renewed = Instant::now();
        let mut first_wait = true;
        loop {
            // Listening before asking: a wake-up sent while the lease is read is not lost.
            let woken = wake_slot(&self.thread).notified();
            let asked = Instant::now();
            let state = match self.op_within(op, self.grace_left(renewed)).await {
                Ok(state) => {
                    renewed = asked;
                    state
                }
                // Not even joined yet: nothing to wait out.
                Err(e) if op != LeaseOp::Renew => return Err(e.into()),
                Err(_) if self.grace_left(renewed).is_zero() => return Err(self.lost()),
                Err(e) => {
                    tracing::warn!(thread = %self.thread, error = %e, "a queued run could not check its lease; retrying");
                    LeaseState::Waiting { ahead: 0 }
                }
            };
            op = LeaseOp::Renew;
            match state {
                LeaseState::Running { .. } => return Ok(()),
                LeaseState::Waiting { .. } => {
                    let stops = matches!(
                        strategy,
                        MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback
                    );
                    if first_wait && stops {
                        // Tell a holder in this process that it was asked to stop.
                        wake_slot(&self.thread).notify_waiters();
                    }
                    first_wait = false;
                    if pause(woken, self.options.poll, cancel).await {
                        return Err(GraphError::Cancelled);
                    }
                }
                LeaseState::Busy { holder } => {
                    return Err(GraphError::ThreadBusy {
                        thread_id: self.thread.clone(),
                        holder,
                    });
                }
                LeaseState::Stopped { strategy } => {
                    return Err(GraphError::Preempted {
                        thread_id: self.thread.clone(),
                        strategy,
                    });
                }
                LeaseState::Lost | LeaseState::Released => return Err(self.lost()),
            }
        }
    }

    /// A run that ended on a checkpoint conflict may have lost its thread under it (deleted,
    /// or taken once its lease ran out): then the lost lease is what happened to it, and the
    /// conflict only how it showed. Once the run has left its lease (it does as it settles),
    /// its release tells (its row was already gone), not the watch (`watch_lost`), which then
    /// finds the row gone because the run itself removed it. A conflict with a writer that
    /// takes no lease (`update_state`) leaves the row in place and stays a conflict.
    fn explain<T>(&self, result: Result<T, GraphError>, watch_lost: bool) -> Result<T, GraphError> {
        let lost = if self.released.load(Ordering::Acquire) {
            self.lost_at_release.load(Ordering::Acquire)
        } else {
            watch_lost
        };
        if lost && let Err(GraphError::Checkpoint(CheckpointError::Conflict { .. })) = &result {
            return Err(self.lost());
        }
        result
    }

    fn lost(&self) -> GraphError {
        GraphError::LeaseLost {
            thread_id: self.thread.clone(),
            ttl: self.options.ttl,
        }
    }

    /// How long, from now, the run may still go without a successful renewal: half the time
    /// to live after the last one began.
    fn grace_left(&self, renewed: Instant) -> Duration {
        // A time to live too long for the clock (`Duration::MAX`) leaves all the time there is.
        match renewed.checked_add(self.options.ttl / 2) {
            Some(until) => until.saturating_duration_since(Instant::now()),
            None => Duration::MAX,
        }
    }

    async fn op(&self, op: LeaseOp) -> Result<LeaseState, CheckpointError> {
        self.checkpointer
            .lease(&self.thread, &self.id, op, self.options.ttl)
            .await
    }

    /// [`op`](Self::op), given up after `limit` (a store that hangs counts as failing).
    async fn op_within(&self, op: LeaseOp, limit: Duration) -> Result<LeaseState, CheckpointError> {
        match tokio::time::timeout(limit, self.op(op)).await {
            Ok(result) => result,
            Err(_) => Err(CheckpointError::Backend(format!(
                "the lease of thread `{}` could not be checked within {limit:?}",
                self.thread
            ))),
        }
    }

    /// Renews the lease every `poll` until the run must stop.
    async fn watch(&self, caller: Option<&CancelToken>) -> Stop {
        let mut renewed = Instant::now();
        loop {
            let woken = wake_slot(&self.thread).notified();
            if pause(woken, self.options.poll, caller).await {
                return Stop::Cancelled;
            }
            if self.released.load(Ordering::Acquire) {
                // Left already (the run is reporting its outcome): nothing to watch.
                return std::future::pending().await;
            }
            let asked = Instant::now();
            match self
                .op_within(LeaseOp::Renew, self.grace_left(renewed))
                .await
            {
                Ok(LeaseState::Running { .. }) => renewed = asked,
                Ok(LeaseState::Stopped { strategy }) => return Stop::Asked(strategy),
                Ok(_) => return Stop::Lost,
                Err(_) if self.grace_left(renewed).is_zero() => return Stop::Lost,
                Err(e) => {
                    tracing::warn!(thread = %self.thread, error = %e, "a run could not renew its lease; retrying");
                }
            }
        }
    }

    /// Renews the lease while a stopped run winds down; returns only when it is lost.
    async fn keep_alive(&self) {
        let mut renewed = Instant::now();
        loop {
            tokio::time::sleep(self.options.poll).await;
            let asked = Instant::now();
            match self
                .op_within(LeaseOp::Renew, self.grace_left(renewed))
                .await
            {
                Ok(LeaseState::Running { .. } | LeaseState::Stopped { .. }) => renewed = asked,
                Ok(_) => return,
                Err(_) if self.grace_left(renewed).is_zero() => return,
                Err(_) => {}
            }
        }
    }

    /// Leaves the lease (once; later calls do nothing) and wakes this process's runs waiting
    /// on the thread.
    async fn release(&self) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        // A failed release only delays the next run by the lease's time to live.
        if let Ok(LeaseState::Lost) = self.op(LeaseOp::Release).await {
            self.lost_at_release.store(true, Ordering::Release);
        }
        // Only now: a drop during the release above still leaves the lease (see `Drop`).
        self.released.store(true, Ordering::Release);
        wake_slot(&self.thread).notify_waiters();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released.load(Ordering::Acquire) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (checkpointer, thread, id, ttl) = (
            self.checkpointer.clone(),
            std::mem::take(&mut self.thread),
            std::mem::take(&mut self.id),
            self.options.ttl,
        );
        runtime.spawn(async move {
            let _ = checkpointer
                .lease(&thread, &id, LeaseOp::Release, ttl)
                .await;
            wake_slot(&thread).notify_waiters();
        });
    }
}

/// Sleeps for `poll`, or less when `woken` fires or the caller cancels; true when cancelled.
async fn pause(
    woken: tokio::sync::futures::Notified<'_>,
    poll: Duration,
    cancel: Option<&CancelToken>,
) -> bool {
    let wait = async {
        tokio::select! {
            () = tokio::time::sleep(poll) => {}
            () = woken => {}
        }
    };
    match cancel {
        Some(token) => tokio::select! {
            () = wait => false,
            () = token.cancelled() => true,
        },
        None => {
            wait.await;
            false
        }
    }
}

/// Lease options that can work: a poll, and a time to live of at least three polls (a run
/// gives up at half of it).
fn check(options: &LeaseOptions) -> Result<(), GraphError> {
    if options.poll.is_zero() {
        return Err(GraphError::InvalidOptions(
            "LeaseOptions::poll is zero: the run would check its lease in a busy loop; give it \
             a poll of at least a few milliseconds (the default is 200 ms)"
                .into(),
        ));
    }
    if options.ttl < options.poll.saturating_mul(3) {
        return Err(GraphError::InvalidOptions(format!(
            "LeaseOptions::ttl ({:?}) is shorter than three polls ({:?} each): a run gives up \
             at half its time to live, so it would lose the thread between two renewals; use a \
             ttl of at least 3 x poll (the defaults are 30 s and 200 ms)",
            options.ttl, options.poll
        )));
    }
    Ok(())
}
