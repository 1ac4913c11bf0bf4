//! The scheduler: claims queued runs up to the capacity, executes them in the background with a
//! timeout, keeps their leases alive, stops them on cancel, and recovers runs of dead workers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{Notify, oneshot, watch};

use super::event_log;
use super::hosted::{Hosted, HostedRun};
use super::store::{Finish, NewEvent, RecoverAction, RunRecord, RunStatus, RunStore, StoreError};
use super::{Recovery, WorkerConfig};
use crate::checkpoint::Checkpointer;
use crate::event::EventSink;

/// Why an executing run is stopped from outside.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// A cancel request.
    Cancel,
    /// The worker shuts down: the run goes back to the queue.
    Shutdown,
}

/// State shared by the HTTP handlers, the scheduler and the executing runs.
pub(crate) struct Shared {
    pub(crate) graphs: HashMap<String, Arc<dyn Hosted>>,
    pub(crate) graph_ids: Vec<String>,
    pub(crate) store: Arc<dyn RunStore>,
    pub(crate) checkpointer: Arc<dyn Checkpointer>,
    pub(crate) config: WorkerConfig,
    pub(crate) worker_id: String,
    /// Runs of this process, from their claim until their end is recorded, with the way to
    /// stop each while it executes.
    running: Mutex<HashMap<String, Option<oneshot::Sender<Stop>>>>,
    /// How many of `running` still execute (the capacity bounds these); the others wait for
    /// their end to be written.
    executing: AtomicUsize,
    /// Wakes the scheduler (a run was queued, or a slot freed).
    wake: Notify,
    /// Signalled whenever a run of this process ends.
    pub(crate) finished: Notify,
    shutdown: watch::Sender<bool>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

impl Shared {
    pub(crate) fn new(
        graphs: HashMap<String, Arc<dyn Hosted>>,
        store: Arc<dyn RunStore>,
        checkpointer: Arc<dyn Checkpointer>,
        config: WorkerConfig,
        worker_id: String,
    ) -> Self {
        let mut graph_ids: Vec<String> = graphs.keys().cloned().collect();
        graph_ids.sort();
        Shared {
            graphs,
            graph_ids,
            store,
            checkpointer,
            config,
            worker_id,
            running: Mutex::new(HashMap::new()),
            executing: AtomicUsize::new(0),
            wake: Notify::new(),
            finished: Notify::new(),
            shutdown: watch::channel(false).0,
        }
    }

    /// A run was queued: let the scheduler look.
    pub(crate) fn wake(&self) {
        self.wake.notify_one();
    }

    /// Stops a run executing in this process; false when it is not executing here.
    pub(crate) fn stop_local(&self, run_id: &str, why: Stop) -> bool {
        let sender = lock(&self.running).get_mut(run_id).and_then(Option::take);
        match sender {
            Some(tx) => tx.send(why).is_ok(),
            None => false,
        }
    }

    pub(crate) fn is_running_here(&self, run_id: &str) -> bool {
        lock(&self.running).contains_key(run_id)
    }

    fn active(&self) -> usize {
        lock(&self.running).len()
    }

    /// How many more runs may be claimed now. A run's slot frees once it stops executing, so
    /// the next claim shares a transaction with its end instead of waiting for it; runs
    /// executing plus runs whose end is still being written are bounded too (twice the
    /// capacity), so a slow store holds the claiming back instead of piling ends up in memory.
    fn free_slots(&self) -> usize {
        let capacity = self.config.capacity;
        let executing = capacity.saturating_sub(self.executing.load(Ordering::Acquire));
        let held = capacity.saturating_mul(2).saturating_sub(self.active());
        executing.min(held)
    }

    fn lease_until(&self) -> u64 {
        crate::ids::now_millis()
            .saturating_add(u64::try_from(self.config.lease.as_millis()).unwrap_or(u64::MAX))
    }

    fn recover_action(&self) -> RecoverAction {
        match self.config.recovery {
            Recovery::Resume => RecoverAction::Requeue,
            Recovery::Fail => RecoverAction::Fail,
        }
    }

    /// Recovers runs of dead workers: at start-up every `running` run of a store that belongs
    /// to one process, later (and always for shared stores) those whose lease expired.
    pub(crate) async fn recover(&self, at_start: bool) -> Result<Vec<RunRecord>, StoreError> {
        let all = at_start && !self.store.shared();
        let changed = self
            .store
            .recover(
                &self.worker_id,
                all,
                crate::ids::now_millis(),
                self.recover_action(),
                self.config.max_attempts,
            )
            .await?;
        for run in &changed {
            tracing::warn!(
                run_id = %run.run_id,
                thread_id = %run.thread_id,
                status = %run.status,
                attempts = run.attempts,
                "recovered a run left running by a stopped worker"
            );
            if run.status.is_terminal() {
                self.record_ending(run).await;
            }
        }
        if !changed.is_empty() {
            self.wake();
        }
        Ok(changed)
    }

    /// Writes the last events of a run that ended without its worker writing them (cancelled
    /// while pending, failed by recovery), so a client following its stream sees the end. A
    /// failure is logged: the run's record already says how it ended.
    pub(crate) async fn record_ending(&self, run: &RunRecord) {
        let events =
            super::event_log::ending(run.status, run.output.as_ref(), run.error.as_deref());
        if let Err(e) = self
            .store
            .append_events(&run.thread_id, &run.run_id, &events)
            .await
        {
            tracing::warn!(run_id = %run.run_id, error = %e, "the end of a run could not be written to its stream");
        }
    }

    /// Turns true when the worker shuts down.
    pub(crate) fn shutdown_signal(&self) -> watch::Receiver<bool> {
        self.shutdown.subscribe()
    }

    pub(crate) fn shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }

    /// Stops claiming, sends every executing run back to the queue, and waits (up to
    /// `grace`) for them to be released.
    pub(crate) async fn shutdown(&self, grace: Duration) {
        self.shutdown.send_replace(true);
        self.wake.notify_one();
        let ids: Vec<String> = lock(&self.running).keys().cloned().collect();
        for id in ids {
            self.stop_local(&id, Stop::Shutdown);
        }
        let deadline = crate::deadline::tokio_from_now(grace);
        while self.active() > 0 {
            let finished = self.finished.notified();
            if self.active() == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, finished).await.is_err() {
                break;
            }
        }
    }
}

/// The scheduler loop: claims runs while there is capacity.
pub(crate) async fn schedule(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    let mut backoff = Duration::from_millis(100);
    loop {
        if shared.shutting_down() {
            return;
        }
        let free = shared.free_slots();
        if free > 0 {
            match shared
                .store
                .claim(
                    &shared.worker_id,
                    &shared.graph_ids,
                    free,
                    shared.lease_until(),
                )
                .await
            {
                Ok(runs) => {
                    backoff = Duration::from_millis(100);
                    let full = runs.len() == free;
                    for run in runs {
                        start(&shared, run);
                    }
                    if full {
                        // Maybe more are queued: look again once a slot frees.
                        continue_or_wait(&shared, &mut shutdown, None).await;
                        continue;
                    }
                }
                Err(e) => {
                    tracing::error!(error = %e, "could not claim runs; retrying");
                    continue_or_wait(&shared, &mut shutdown, Some(backoff)).await;
                    backoff = (backoff * 2).min(Duration::from_secs(5));
                    continue;
                }
            }
        }
        continue_or_wait(&shared, &mut shutdown, Some(shared.config.poll_interval)).await;
    }
}

async fn continue_or_wait(
    shared: &Shared,
    shutdown: &mut watch::Receiver<bool>,
    at_most: Option<Duration>,
) {
    let sleep = async {
        match at_most {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = shared.wake.notified() => {}
        _ = sleep => {}
        _ = shutdown.wait_for(|stop| *stop) => {}
    }
}

/// The heartbeat loop: extends leases, forwards cancel requests made through other workers,
/// and (with a shared store) recovers runs of workers whose lease expired.
pub(crate) async fn heartbeat(shared: Arc<Shared>) {
    let mut shutdown = shared.shutdown.subscribe();
    let period = (shared.config.lease / 3).max(Duration::from_millis(50));
    let retention = shared.config.event_retention;
    let prune_every = (retention / 4).max(Duration::from_millis(10));
    let mut last_prune: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            _ = tokio::time::sleep(period) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
        match shared
            .store
            .renew(&shared.worker_id, shared.lease_until())
            .await
        {
            Ok(cancelled) => {
                for id in cancelled {
                    shared.stop_local(&id, Stop::Cancel);
                }
            }
            Err(e) => tracing::error!(error = %e, "could not renew run leases"),
        }
        if let Err(e) = shared.recover(false).await {
            tracing::error!(error = %e, "could not recover runs of stopped workers");
        }
        if last_prune.is_none_or(|at| at.elapsed() >= prune_every) {
            last_prune = Some(tokio::time::Instant::now());
            let before = crate::ids::now_millis()
                .saturating_sub(u64::try_from(retention.as_millis()).unwrap_or(u64::MAX));
            match shared.store.prune_events(before).await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(deleted = n, "pruned old thread events"),
                Err(e) => tracing::error!(error = %e, "could not prune old thread events"),
            }
        }
    }
}

fn start(shared: &Arc<Shared>, run: RunRecord) {
    let (tx, rx) = oneshot::channel();
    let mut slot = Slot::take(shared, &run.run_id, tx);
    let shared = shared.clone();
    tokio::spawn(async move {
        let ending = execute(&shared, &run, rx).await;
        // The slot is free: the scheduler claims the next run while this one's end is
        // written, so both can share a transaction.
        slot.executed();
        record(&shared, &run, ending).await;
        drop(slot);
    });
}

/// A run's place on this worker: counted as executing until its end is known, listed as
/// running until its end is recorded. Given back when dropped, on every path (a panic while
/// executing or recording included): a lost place would lower the worker's capacity for good.
struct Slot {
    shared: Arc<Shared>,
    run_id: String,
    executing: bool,
}

impl Slot {
    fn take(shared: &Arc<Shared>, run_id: &str, stop: oneshot::Sender<Stop>) -> Slot {
        lock(&shared.running).insert(run_id.to_string(), Some(stop));
        shared.executing.fetch_add(1, Ordering::AcqRel);
        Slot {
            shared: shared.clone(),
            run_id: run_id.to_string(),
            executing: true,
        }
    }

    /// The run's end is known: its place may go to the next run.
    fn executed(&mut self) {
        if std::mem::take(&mut self.executing) {
            self.shared.executing.fetch_sub(1, Ordering::AcqRel);
            self.shared.wake.notify_one();
        }
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.executed();
        lock(&self.shared.running).remove(&self.run_id);
        self.shared.wake.notify_one();
        self.shared.finished.notify_waiters();
    }
}

enum Ending {
    /// The run's end, after its events not written yet.
    Finish(Finish, Vec<NewEvent>),
    /// Back to the queue, after writing the run's events not written yet.
    Release(Vec<NewEvent>),
}

impl Ending {
    fn finish(finish: Finish) -> Self {
        Ending::Finish(finish, Vec::new())
    }
}

/// Executes a claimed run; returns how it ended, for [`record`] to write.
async fn execute(shared: &Arc<Shared>, run: &RunRecord, stop: oneshot::Receiver<Stop>) -> Ending {
    if run.cancel_requested {
        Ending::finish(finish(RunStatus::Cancelled, None, None))
    } else {
        match shared.graphs.get(&run.graph_id) {
            None => Ending::finish(finish(
                RunStatus::Error,
                None,
                Some(format!(
                    "this worker does not host graph `{}`; it hosts: {}",
                    run.graph_id,
                    shared.graph_ids.join(", ")
                )),
            )),
            Some(hosted) => run_hosted(shared, hosted.clone(), run, stop).await,
        }
    }
}

/// Writes how a run ended: its end and last events, or its release back to the queue.
async fn record(shared: &Shared, run: &RunRecord, ending: Ending) {
    match ending {
        Ending::Release(events) => {
            if let Err(e) =
                event_log::append_retrying(&*shared.store, &run.thread_id, &run.run_id, &events)
                    .await
            {
                tracing::error!(run_id = %run.run_id, error = %e, "could not write a released run's last events to the thread's log");
            }
            if let Err(e) = shared.store.release(&run.run_id, &shared.worker_id).await {
                tracing::error!(run_id = %run.run_id, error = %e, "could not release a run at shutdown; it will be recovered at the next start");
            }
        }
        Ending::Finish(finish, unwritten) => record_finish(shared, run, finish, unwritten).await,
    }
}

async fn run_hosted(
    shared: &Arc<Shared>,
    hosted: Arc<dyn Hosted>,
    run: &RunRecord,
    stop: oneshot::Receiver<Stop>,
) -> Ending {
    // The run's start is the writer's first event: written with the first batch, or with
    // the run's end when it ends within the linger.
    let (sink, events) = EventSink::channel(event_log::QUEUE);
    let writer = event_log::spawn_writer(
        shared.store.clone(),
        run.thread_id.clone(),
        run.run_id.clone(),
        vec![event_log::running()],
        shared.config.event_linger,
        events,
    );
    let job = HostedRun {
        thread_id: run.thread_id.clone(),
        run_id: run.run_id.clone(),
        input: run.input.clone(),
        checkpointer: shared.checkpointer.clone(),
        recovered: run.attempts > 1,
        events: Some(sink),
    };
    // A task of its own, so a panic in user code becomes an error result, and a cancel or a
    // timeout can abort it.
    let mut task = tokio::spawn(async move { hosted.run(job).await });
    let timeout = shared.config.run_timeout;
    let mut joined_already = false;
    let ending = tokio::select! {
        joined = &mut task => { joined_already = true; match joined {
            Ok(Ok(out)) => Ending::finish(finish(
                if out.interrupts.is_empty() { RunStatus::Success } else { RunStatus::Interrupted },
                Some(out.into_json()),
                None,
            )),
            Ok(Err(e)) => Ending::finish(finish(RunStatus::Error, None, Some(e.message))),
            Err(join) => {
                tracing::error!(run_id = %run.run_id, error = %join, "a hosted run panicked");
                Ending::finish(finish(
                    RunStatus::Error,
                    None,
                    Some("the run failed unexpectedly (the hosted graph panicked); the worker's logs have the details".to_string()),
                ))
            }
        }},
        why = stop => {
            task.abort();
            match why {
                Ok(Stop::Shutdown) => Ending::Release(Vec::new()),
                // A cancel request (or the sender gone, which only happens on cancel).
                _ => Ending::finish(finish(RunStatus::Cancelled, None, None)),
            }
        },
        _ = tokio::time::sleep(timeout) => {
            task.abort();
            Ending::finish(finish(
                RunStatus::Timeout,
                None,
                Some(format!(
                    "the run took longer than the worker's run timeout of {} s and was stopped; \
                     split the task or raise the worker's run_timeout",
                    timeout.as_secs_f64()
                )),
            ))
        }
    };
    if !joined_already {
        // Wait for the aborted task to be gone, so nothing of the run outlives its status.
        let _ = task.await;
    }
    // The run's events go to the log before its end does, in order: the writer ends once
    // every sink is gone (a sink kept alive by a task the run left behind is cut off after a
    // grace) and hands back what it had not written; those lead the ending's own events, in
    // the one transaction that records the end.
    let mut writer = writer;
    let unwritten = match tokio::time::timeout(WRITER_GRACE, &mut writer).await {
        Ok(Ok(unwritten)) => unwritten,
        Ok(Err(join)) => {
            tracing::error!(run_id = %run.run_id, error = %join, "a run's event writer failed; its last events are not logged");
            Vec::new()
        }
        Err(_) => {
            tracing::warn!(run_id = %run.run_id, "a run left a task emitting events behind; its later events are not logged");
            writer.abort();
            Vec::new()
        }
    };
    match ending {
        Ending::Finish(finish, _) => Ending::Finish(finish, unwritten),
        Ending::Release(mut events) => {
            events.extend(unwritten);
            Ending::Release(events)
        }
    }
}

/// How long the end of a run waits for its event writer to drain.
const WRITER_GRACE: Duration = Duration::from_secs(5);

/// A run's end, with the events that announce it.
fn finish(status: RunStatus, output: Option<serde_json::Value>, error: Option<String>) -> Finish {
    Finish {
        events: event_log::ending(status, output.as_ref(), error.as_deref()),
        status,
        output,
        error,
    }
}

async fn record_finish(
    shared: &Shared,
    run: &RunRecord,
    mut finish: Finish,
    unwritten: Vec<NewEvent>,
) {
    let run_id = run.run_id.as_str();
    let ending = finish.events.len();
    finish.events.splice(0..0, unwritten);
    // Tried until it is written or the worker stops: while this worker lives it renews the
    // run's lease, so a run whose end was given up on would stay `running` (and its thread's
    // later runs `pending`) until a restart.
    let mut delay = Duration::from_millis(50);
    let mut attempt = 0u64;
    loop {
        match shared
            .store
            .finish(run_id, &shared.worker_id, &finish)
            .await
        {
            Ok(true) => return,
            Ok(false) => {
                tracing::warn!(
                    run_id,
                    "a run finished after another worker recovered it; its result was dropped"
                );
                // What the attempt emitted still belongs in the log (as when each batch was
                // written on its own), not the ending, which did not happen.
                let mut events = finish.events;
                events.truncate(events.len().saturating_sub(ending));
                if let Err(e) =
                    event_log::append_retrying(&*shared.store, &run.thread_id, run_id, &events)
                        .await
                {
                    tracing::error!(run_id, error = %e, "could not write a dropped run's events to the thread's log");
                }
                return;
            }
            Err(e) => {
                if shared.shutting_down() {
                    tracing::error!(
                        run_id,
                        error = %e,
                        "could not record the end of a run before the worker stopped; another \
                         worker recovers it when its lease expires, or this one at its next start"
                    );
                    return;
                }
                // Every failure of the first few, then one in thirty (a long outage).
                if attempt < 8 || attempt.is_multiple_of(30) {
                    tracing::error!(run_id, attempt, error = %e, "could not record the end of a run; retrying");
                }
                attempt += 1;
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(2));
            }
        }
    }
}
