//! A run that holds its thread's lease: the multitask strategies ("double texting").
//!
//! Before it reads the thread, a run given a [`MultitaskStrategy`] joins the thread's lease in
//! the checkpointer (see [`crate::checkpoint::lease`]) and waits there while the strategy says
//! so. While it runs, it renews the lease every `poll` and learns there that a newer run asked
//! it to stop; it then cancels itself the way a [`CancelToken`] does (its completed steps stay
//! durable) and ends with [`GraphError::Preempted`]. It leaves the lease when it ends, also when
//! its future is dropped.

use std::sync::{Arc, LazyLock};
use std::time::Instant;

use tokio::sync::Notify;

use futures::future::{Either, select};

use super::{Exec, RunInput, emit_failure};
use crate::checkpoint::{Checkpointer, LeaseOp, LeaseOptions, LeaseState, MultitaskStrategy};
use crate::graph::Graph;
use crate::graph::cancel::CancelToken;
use crate::graph::error::GraphError;
use crate::graph::interrupt::Outcome;
use crate::graph::options::RunOptions;
use crate::state::State;

/// Runs `input` on `graph`, under the thread's lease when the options name a strategy.
/// Failures before the run starts are reported on the run's event stream (a started run
/// reports its own outcome).
pub(crate) async fn run<S: State>(
    graph: &Graph<S>,
    opts: RunOptions,
    input: RunInput<S>,
) -> Result<Outcome<S>, GraphError> {
    let Some(strategy) = opts.multitask else {
        return start_and_run(graph, &opts, input).await;
    };
    let lease = match Lease::join(graph, &opts, strategy).await {
        Ok(lease) => lease,
        Err(e) => {
            emit_failure(&graph.inner.name, &opts, &e).await;
            return Err(e);
        }
    };
    // The run's own token: cancelled by the caller's token or by a newer run.
    let token = CancelToken::new();
    let mut run_opts = opts.clone();
    run_opts.cancel = Some(token.clone());
    let result = {
        let run = std::pin::pin!(start_and_run(graph, &run_opts, input));
        let watch = std::pin::pin!(lease.watch(opts.cancel.as_ref()));
        match select(run, watch).await {
            Either::Left((result, _)) => result,
            Either::Right((stop, run)) => {
                token.cancel();
                let result = run.await;
                match (result, stop) {
                    (Err(GraphError::Cancelled), Stop::Asked(strategy)) => {
                        Err(GraphError::Preempted {
                            thread_id: lease.thread.clone(),
                            strategy,
                        })
                    }
                    (Err(GraphError::Cancelled), Stop::Lost) => Err(GraphError::LeaseLost {
                        thread_id: lease.thread.clone(),
                        ttl: lease.options.ttl,
                    }),
                    (result, _) => result,
                }
            }
        }
    };
    lease.release().await;
    result
}

async fn start_and_run<S: State>(
    graph: &Graph<S>,
    opts: &RunOptions,
    input: RunInput<S>,
) -> Result<Outcome<S>, GraphError> {
    // Not boxed here: callers box the whole run once.
    match Exec::start(graph, opts).await {
        Ok(exec) => exec.run(input).await,
        Err(e) => {
            emit_failure(&graph.inner.name, opts, &e).await;
            Err(e)
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

/// Sleeps for `poll`, or less when woken for the thread or cancelled; true when cancelled.
async fn pause(thread: &str, poll: std::time::Duration, cancel: Option<&CancelToken>) -> bool {
    let woken = wake_slot(thread).notified();
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

/// Why a running run must stop.
enum Stop {
    /// The caller cancelled it.
    Cancelled,
    /// A newer run asked it to.
    Asked(MultitaskStrategy),
    /// Its lease could not be renewed in time.
    Lost,
}

/// A run's place in its thread's lease. Dropped without [`release`](Self::release) (the run's
/// future was dropped), it leaves the lease from a spawned task.
struct Lease {
    checkpointer: Arc<dyn Checkpointer>,
    thread: String,
    id: String,
    options: LeaseOptions,
    released: bool,
}

impl Lease {
    /// Joins the lease and waits until the run holds the thread; rolls back the run it stopped
    /// when the strategy is `Rollback`.
    async fn join<S: State>(
        graph: &Graph<S>,
        opts: &RunOptions,
        strategy: MultitaskStrategy,
    ) -> Result<Lease, GraphError> {
        let (checkpointer, thread) = super::thread::persistence(
            graph,
            opts,
            "a run with a multitask strategy (the lease lives in the checkpointer)",
        )?;
        let mut lease = Lease {
            checkpointer,
            thread,
            id: crate::ids::time_ordered(),
            options: opts.lease,
            released: false,
        };
        let mut op = LeaseOp::Join(strategy);
        let mut first_wait = true;
        loop {
            let state = match lease.op(op).await {
                Ok(state) => state,
                Err(e) => {
                    lease.release().await;
                    return Err(e.into());
                }
            };
            op = LeaseOp::Renew;
            match state {
                LeaseState::Running { rollback_from } => {
                    if let Some(marker) = rollback_from
                        && let Err(e) = lease
                            .checkpointer
                            .rollback_after(&lease.thread, &marker)
                            .await
                    {
                        lease.release().await;
                        return Err(e.into());
                    }
                    return Ok(lease);
                }
                LeaseState::Waiting { .. } => {
                    let stops = matches!(
                        strategy,
                        MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback
                    );
                    if first_wait && stops {
                        // Tell a holder in this process that it was asked to stop.
                        wake_slot(&lease.thread).notify_waiters();
                    }
                    first_wait = false;
                    if pause(&lease.thread, lease.options.poll, opts.cancel.as_ref()).await {
                        lease.release().await;
                        return Err(GraphError::Cancelled);
                    }
                }
                LeaseState::Busy { holder } => {
                    lease.released = true;
                    return Err(GraphError::ThreadBusy {
                        thread_id: lease.thread.clone(),
                        holder,
                    });
                }
                LeaseState::Stopped { strategy } => {
                    lease.released = true;
                    return Err(GraphError::Preempted {
                        thread_id: lease.thread.clone(),
                        strategy,
                    });
                }
                LeaseState::Lost | LeaseState::Released => {
                    lease.released = true;
                    return Err(GraphError::LeaseLost {
                        thread_id: lease.thread.clone(),
                        ttl: lease.options.ttl,
                    });
                }
            }
        }
    }

    async fn op(&self, op: LeaseOp) -> Result<LeaseState, crate::checkpoint::CheckpointError> {
        self.checkpointer
            .lease(&self.thread, &self.id, op, self.options.ttl)
            .await
    }

    /// Renews the lease every `poll` until the run must stop. A renewal that fails is retried;
    /// only when none succeeded for a whole time to live is the lease taken as lost.
    async fn watch(&self, caller: Option<&CancelToken>) -> Stop {
        let mut renewed = Instant::now();
        loop {
            if pause(&self.thread, self.options.poll, caller).await {
                return Stop::Cancelled;
            }
            match self.op(LeaseOp::Renew).await {
                Ok(LeaseState::Running { .. }) => renewed = Instant::now(),
                Ok(LeaseState::Stopped { strategy }) => return Stop::Asked(strategy),
                Ok(_) => return Stop::Lost,
                Err(_) if renewed.elapsed() < self.options.ttl => {}
                Err(_) => return Stop::Lost,
            }
        }
    }

    async fn release(mut self) {
        self.released = true;
        // A failed release only delays the next run by the lease's time to live.
        let _ = self.op(LeaseOp::Release).await;
        wake_slot(&self.thread).notify_waiters();
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.released {
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
        });
    }
}
