//! Thread leases: what happens when a second run starts on a thread that is busy ("double
//! texting"), enforced by the checkpointer so it holds across processes and machines.
//!
//! A run given a [`MultitaskStrategy`] joins its thread's lease before it reads the thread.
//! The back-end keeps one row per run that holds or waits for the thread, and decides every
//! change with [`decide`] inside one transaction (SQLite's write lock, a PostgreSQL
//! transaction-scoped advisory lock on the thread, or a mutex in memory), so two processes are
//! never granted one thread at once. A holder that cannot renew its row gives up well before
//! the row expires (at half its time to live), so it has stopped writing before another run
//! can take the thread; the lease is not a fencing token, though (a process frozen for longer
//! than the time to live may still write once it wakes; the optimistic head check of
//! [`Checkpointer::put`](super::Checkpointer::put) then refuses it).
//!
//! | strategy | the thread is busy, so the new run ... |
//! |---|---|
//! | [`Reject`](MultitaskStrategy::Reject) | fails at once; the running run goes on |
//! | [`Enqueue`](MultitaskStrategy::Enqueue) | waits its turn (first come, first served) and then runs on the state the earlier runs left |
//! | [`Interrupt`](MultitaskStrategy::Interrupt) | stops the runs before it (running and queued) and runs once they have stopped; what the stopped run completed is kept |
//! | [`Rollback`](MultitaskStrategy::Rollback) | as `Interrupt`, and deletes the checkpoints the stopped run wrote (pending writes it recorded against the checkpoint it started from stay) |
//!
//! A holder renews its row while it runs and learns there that it was asked to stop. A row
//! not renewed within its time to live (the process died) expires, and the next run takes the
//! thread. Expiry is judged by the clock of the process deciding (by the database's clock on
//! PostgreSQL). Rows are identified by run id; ids in [`LeaseRow::marker`] are time-ordered like
//! checkpoint ids and never before the thread's head ([`marker_after`]), which is how a
//! rollback finds what the stopped run wrote. Hosts sharing a database need clocks in step
//! (as the history's order of checkpoint ids already does).

use std::time::Duration;

/// What a run does when its thread is busy with another run (LangGraph's
/// `multitask_strategy`). See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MultitaskStrategy {
    /// Refuse the new run while the thread is busy.
    Reject,
    /// Run after the runs already there, in order.
    Enqueue,
    /// Stop the runs already there (keeping what they completed), then run.
    Interrupt,
    /// Stop the runs already there and delete what they wrote, then run.
    Rollback,
}

impl MultitaskStrategy {
    /// The name LangGraph and the stored rows use: `reject`, `enqueue`, `interrupt`, `rollback`.
    pub fn as_str(self) -> &'static str {
        match self {
            MultitaskStrategy::Reject => "reject",
            MultitaskStrategy::Enqueue => "enqueue",
            MultitaskStrategy::Interrupt => "interrupt",
            MultitaskStrategy::Rollback => "rollback",
        }
    }

    /// Parses a name written by [`as_str`](Self::as_str).
    ///
    /// ```
    /// use kit::checkpoint::MultitaskStrategy;
    /// assert_eq!(MultitaskStrategy::parse("rollback"), Some(MultitaskStrategy::Rollback));
    /// assert_eq!(MultitaskStrategy::parse("Rollback"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "reject" => MultitaskStrategy::Reject,
            "enqueue" => MultitaskStrategy::Enqueue,
            "interrupt" => MultitaskStrategy::Interrupt,
            "rollback" => MultitaskStrategy::Rollback,
            _ => return None,
        })
    }
}

impl std::fmt::Display for MultitaskStrategy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A change a run asks of its thread's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseOp {
    /// Take the thread, or wait for it, as the strategy says (joining twice is a renewal).
    Join(MultitaskStrategy),
    /// Extend the row's time to live; a waiting run also takes the thread when its turn came.
    Renew,
    /// Leave (the run ended, or gave up waiting).
    Release,
}

/// What the run holds after a [`LeaseOp`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseState {
    /// The run holds the thread. `rollback_from` is set once, when a run that stopped a run to
    /// be rolled back takes the thread: the back-end has then already deleted the checkpoints
    /// after it ([`Checkpointer::rollback_after`](super::Checkpointer::rollback_after)), in
    /// the same transaction.
    Running {
        /// The marker of the stopped run that was rolled back.
        rollback_from: Option<String>,
    },
    /// The run waits for the thread: `ahead` runs come first.
    Waiting {
        /// Runs holding or queued before this one.
        ahead: usize,
    },
    /// `Reject`: the thread is busy with `holder`.
    Busy {
        /// The run holding the thread.
        holder: String,
    },
    /// A newer run asked this one to stop (it then releases the thread).
    Stopped {
        /// How it was asked: [`MultitaskStrategy::Interrupt`] or [`MultitaskStrategy::Rollback`].
        strategy: MultitaskStrategy,
    },
    /// The run's row is gone (found when renewing or when leaving): it was not renewed within
    /// its time to live and may have been taken by another run, or its thread was deleted.
    Lost,
    /// The run left.
    Released,
}

/// One run holding or waiting for a thread, as a back-end stores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseRow {
    /// The run.
    pub run_id: String,
    /// Its place in the thread's queue (smaller goes first).
    pub ticket: i64,
    /// True once it holds the thread.
    pub running: bool,
    /// When the row expires unless renewed (milliseconds since the Unix epoch).
    pub expires_ms: i64,
    /// Set when a newer run asked it to stop.
    pub stop: Option<MultitaskStrategy>,
    /// A time-ordered id taken when it began to hold the thread: every checkpoint it writes
    /// sorts after it.
    pub marker: Option<String>,
    /// For a waiting `Rollback` run: the marker of the run it stopped.
    pub rollback_from: Option<String>,
}

/// Who holds a thread and how many runs wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ThreadActivity {
    /// The run holding the thread, if one does (a thread with only queued runs is handed to
    /// the first of them at its next renewal).
    pub running: Option<String>,
    /// Runs waiting for the thread.
    pub queued: usize,
    /// True when the holder was asked to stop and has not released the thread yet.
    pub stopping: bool,
}

impl ThreadActivity {
    /// What the rows of a thread say (`None`: the thread is idle). Expired rows are ignored.
    pub fn of(rows: &[LeaseRow], now_ms: i64) -> Option<Self> {
        let live = || rows.iter().filter(|r| r.expires_ms > now_ms);
        let holder = live().find(|r| r.running);
        let queued = live().filter(|r| !r.running && r.stop.is_none()).count();
        if holder.is_none() && queued == 0 {
            return None;
        }
        Some(ThreadActivity {
            running: holder.map(|r| r.run_id.clone()),
            queued,
            stopping: holder.is_some_and(|r| r.stop.is_some()),
        })
    }
}

/// Applies `op` of `run_id` to the rows of one thread, in place, and says what the run now
/// holds. Back-ends call it inside the transaction that read the rows, then write back what
/// changed ([`changes`]). `marker` makes the marker of a run that takes the thread.
pub fn decide(
    rows: &mut Vec<LeaseRow>,
    run_id: &str,
    op: LeaseOp,
    now_ms: i64,
    ttl: Duration,
    marker: impl FnOnce() -> String,
) -> LeaseState {
    let ttl_ms = i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX);
    let expires_ms = now_ms.saturating_add(ttl_ms);
    rows.retain(|r| r.expires_ms > now_ms);
    let mine = rows.iter().position(|r| r.run_id == run_id);
    let i = match (op, mine) {
        (LeaseOp::Release, Some(i)) => {
            rows.remove(i);
            return LeaseState::Released;
        }
        // Nothing to leave: the row ran out or was deleted before the run let go of it.
        (LeaseOp::Release, None) => return LeaseState::Lost,
        (LeaseOp::Renew, None) => return LeaseState::Lost,
        (LeaseOp::Renew | LeaseOp::Join(_), Some(i)) => i,
        (LeaseOp::Join(strategy), None) => {
            // A queued run that was asked to stop no longer counts: it leaves at its next check.
            let active = rows.iter().find(|r| r.running || r.stop.is_none());
            if let Some(active) = active {
                match strategy {
                    MultitaskStrategy::Reject => {
                        let holder = rows.iter().find(|r| r.running).unwrap_or(active);
                        return LeaseState::Busy {
                            holder: holder.run_id.clone(),
                        };
                    }
                    MultitaskStrategy::Enqueue => {}
                    MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
                        stop_all(rows, strategy);
                    }
                }
            }
            // A run that stops others takes over any rollback owed to them.
            let rollback_from = match strategy {
                MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => owed_rollback(rows),
                _ => None,
            };
            // Saturating: the tickets are read back from the database.
            let ticket = rows
                .iter()
                .map(|r| r.ticket)
                .max()
                .map_or(0, |t| t.saturating_add(1));
            rows.push(LeaseRow {
                run_id: run_id.to_string(),
                ticket,
                running: false,
                expires_ms,
                stop: None,
                marker: None,
                rollback_from,
            });
            rows.len() - 1
        }
    };
    if let Some(strategy) = rows[i].stop {
        // A queued run leaves at once; a running one keeps the thread until it has stopped
        // (its release), so the run that stopped it never overlaps it.
        if rows[i].running {
            extend(&mut rows[i], now_ms, ttl_ms);
        } else {
            rows.remove(i);
        }
        return LeaseState::Stopped { strategy };
    }
    extend(&mut rows[i], now_ms, ttl_ms);
    if rows[i].running {
        return LeaseState::Running {
            rollback_from: None,
        };
    }
    let ticket = rows[i].ticket;
    let holders = rows.iter().filter(|r| r.running).count();
    let ahead = rows
        .iter()
        .filter(|r| !r.running && r.stop.is_none() && r.ticket < ticket)
        .count();
    if holders == 0 && ahead == 0 {
        let row = &mut rows[i];
        row.running = true;
        row.marker = Some(marker());
        return LeaseState::Running {
            rollback_from: row.rollback_from.take(),
        };
    }
    LeaseState::Waiting {
        ahead: holders + ahead,
    }
}

/// Renews a row only once a quarter of its time to live has gone by: most renewals (every
/// poll) then read without writing, and a row renewed successfully still has three quarters of
/// its time to live left (a run gives up at half, so it stops with a quarter to spare).
fn extend(row: &mut LeaseRow, now_ms: i64, ttl_ms: i64) {
    if row.expires_ms.saturating_sub(now_ms) < ttl_ms / 4 * 3 {
        row.expires_ms = now_ms.saturating_add(ttl_ms);
    }
}

/// Asks every run on the thread to stop. A rollback asked once stays asked: a later interrupt
/// does not undo it.
fn stop_all(rows: &mut [LeaseRow], strategy: MultitaskStrategy) {
    for row in rows {
        if row.stop != Some(MultitaskStrategy::Rollback) {
            row.stop = Some(strategy);
        }
    }
}

/// The earliest rollback owed on the thread: the holder's marker when it was asked to roll
/// back, or one a stopped queued run still owed.
fn owed_rollback(rows: &[LeaseRow]) -> Option<String> {
    rows.iter()
        .filter_map(|r| {
            if r.running {
                (r.stop == Some(MultitaskStrategy::Rollback))
                    .then_some(r.marker.as_ref())
                    .flatten()
            } else {
                r.rollback_from.as_ref()
            }
        })
        .min()
        .cloned()
}

/// The marker of a run taking a thread whose head is `head`: a fresh time-ordered id, but never
/// before the head, so a rollback never deletes what runs before it wrote, even when another
/// process wrote the head in the same millisecond (or with a clock a little ahead).
pub fn marker_after(head: Option<&str>) -> String {
    let fresh = crate::ids::time_ordered();
    match head {
        Some(head) if head >= fresh.as_str() => head.to_string(),
        _ => fresh,
    }
}

/// What changed between the rows read and the rows [`decide`] left: run ids to delete, and rows
/// to insert or update.
pub fn changes<'a>(
    before: &'a [LeaseRow],
    after: &'a [LeaseRow],
) -> (Vec<&'a str>, Vec<&'a LeaseRow>) {
    let deleted = before
        .iter()
        .filter(|b| !after.iter().any(|a| a.run_id == b.run_id))
        .map(|b| b.run_id.as_str())
        .collect();
    let upserts = after
        .iter()
        .filter(|a| !before.iter().any(|b| b == *a))
        .collect();
    (deleted, upserts)
}

/// How a run takes part in its thread's lease (see [`RunOptions::lease`](crate::RunOptions::lease)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseOptions {
    /// How long a row lives without renewal: a process that dies frees its threads after this.
    pub ttl: Duration,
    /// How often a run renews its row (and so how soon it hears that it was asked to stop),
    /// and how often a queued run asks whether its turn came. Runs in one process wake each
    /// other at once when a thread is left or a stop is asked; the poll is how soon runs in
    /// other processes notice.
    pub poll: Duration,
}

impl Default for LeaseOptions {
    /// A 30-second time to live, renewed every 200 ms.
    fn default() -> Self {
        LeaseOptions {
            ttl: Duration::from_secs(30),
            poll: Duration::from_millis(200),
        }
    }
}

/// The clock leases are judged by: milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> i64 {
    i64::try_from(crate::ids::now_millis()).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TTL: Duration = Duration::from_secs(10);

    fn op(rows: &mut Vec<LeaseRow>, run: &str, op: LeaseOp, now: i64) -> LeaseState {
        decide(rows, run, op, now, TTL, || format!("m-{run}"))
    }

    fn running() -> LeaseState {
        LeaseState::Running {
            rollback_from: None,
        }
    }

    #[test]
    fn the_first_run_takes_an_idle_thread_and_a_second_is_rejected() {
        let mut rows = Vec::new();
        let join = LeaseOp::Join(MultitaskStrategy::Reject);
        assert_eq!(op(&mut rows, "a", join, 0), running());
        assert_eq!(
            op(&mut rows, "b", join, 1),
            LeaseState::Busy { holder: "a".into() }
        );
        assert_eq!(rows.len(), 1, "a rejected run leaves no row");
        assert_eq!(
            op(&mut rows, "a", LeaseOp::Release, 2),
            LeaseState::Released
        );
        assert_eq!(op(&mut rows, "b", join, 3), running());
    }

    #[test]
    fn enqueued_runs_take_the_thread_in_order() {
        let mut rows = Vec::new();
        let join = LeaseOp::Join(MultitaskStrategy::Enqueue);
        op(&mut rows, "a", join, 0);
        assert_eq!(
            op(&mut rows, "b", join, 1),
            LeaseState::Waiting { ahead: 1 }
        );
        assert_eq!(
            op(&mut rows, "c", join, 2),
            LeaseState::Waiting { ahead: 2 }
        );
        op(&mut rows, "a", LeaseOp::Release, 3);
        // c asks first, but b is ahead of it.
        assert_eq!(
            op(&mut rows, "c", LeaseOp::Renew, 4),
            LeaseState::Waiting { ahead: 1 }
        );
        assert_eq!(op(&mut rows, "b", LeaseOp::Renew, 5), running());
        assert_eq!(
            op(&mut rows, "c", LeaseOp::Renew, 6),
            LeaseState::Waiting { ahead: 1 }
        );
        op(&mut rows, "b", LeaseOp::Release, 7);
        assert_eq!(op(&mut rows, "c", LeaseOp::Renew, 8), running());
    }

    #[test]
    fn interrupt_stops_the_holder_and_the_queue_and_waits_for_the_holder() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Enqueue), 0);
        op(&mut rows, "b", LeaseOp::Join(MultitaskStrategy::Enqueue), 1);
        let interrupt = LeaseOp::Join(MultitaskStrategy::Interrupt);
        assert_eq!(
            op(&mut rows, "c", interrupt, 2),
            LeaseState::Waiting { ahead: 1 }
        );
        let stopped = LeaseState::Stopped {
            strategy: MultitaskStrategy::Interrupt,
        };
        assert_eq!(op(&mut rows, "b", LeaseOp::Renew, 3), stopped);
        assert!(
            rows.iter().all(|r| r.run_id != "b"),
            "a stopped queued run leaves"
        );
        // The holder keeps the thread until it has stopped.
        assert_eq!(op(&mut rows, "a", LeaseOp::Renew, 4), stopped);
        assert_eq!(
            op(&mut rows, "c", LeaseOp::Renew, 5),
            LeaseState::Waiting { ahead: 1 }
        );
        op(&mut rows, "a", LeaseOp::Release, 6);
        assert_eq!(op(&mut rows, "c", LeaseOp::Renew, 7), running());
    }

    #[test]
    fn rollback_hands_over_the_stopped_holders_marker_once() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        let rollback = LeaseOp::Join(MultitaskStrategy::Rollback);
        assert_eq!(
            op(&mut rows, "b", rollback, 1),
            LeaseState::Waiting { ahead: 1 }
        );
        op(&mut rows, "a", LeaseOp::Release, 2);
        assert_eq!(
            op(&mut rows, "b", LeaseOp::Renew, 3),
            LeaseState::Running {
                rollback_from: Some("m-a".into())
            }
        );
        assert_eq!(op(&mut rows, "b", LeaseOp::Renew, 4), running());
    }

    #[test]
    fn a_rollback_owed_by_a_stopped_queued_run_passes_to_the_next_rollback() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        op(
            &mut rows,
            "b",
            LeaseOp::Join(MultitaskStrategy::Rollback),
            1,
        );
        op(&mut rows, "a", LeaseOp::Release, 2);
        // b has not taken the thread yet when c rolls back too: c stops b and takes the
        // thread at once, with the rollback b owed.
        assert_eq!(
            op(
                &mut rows,
                "c",
                LeaseOp::Join(MultitaskStrategy::Rollback),
                3
            ),
            LeaseState::Running {
                rollback_from: Some("m-a".into())
            }
        );
        assert_eq!(
            op(&mut rows, "b", LeaseOp::Renew, 4),
            LeaseState::Stopped {
                strategy: MultitaskStrategy::Rollback
            }
        );
    }

    #[test]
    fn reject_does_not_count_queued_runs_that_were_asked_to_stop() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        op(&mut rows, "b", LeaseOp::Join(MultitaskStrategy::Enqueue), 1);
        op(
            &mut rows,
            "c",
            LeaseOp::Join(MultitaskStrategy::Interrupt),
            2,
        );
        op(&mut rows, "a", LeaseOp::Release, 3);
        op(&mut rows, "c", LeaseOp::Renew, 4);
        op(&mut rows, "c", LeaseOp::Release, 5);
        // b was stopped but has not looked yet: the thread is idle all the same.
        assert_eq!(ThreadActivity::of(&rows, 6), None);
        assert_eq!(
            op(&mut rows, "d", LeaseOp::Join(MultitaskStrategy::Reject), 6),
            running()
        );
        assert_eq!(
            op(&mut rows, "b", LeaseOp::Renew, 7),
            LeaseState::Stopped {
                strategy: MultitaskStrategy::Interrupt
            }
        );
    }

    #[test]
    fn a_rollback_asked_once_is_not_undone_by_a_later_interrupt() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        op(
            &mut rows,
            "b",
            LeaseOp::Join(MultitaskStrategy::Rollback),
            1,
        );
        op(
            &mut rows,
            "c",
            LeaseOp::Join(MultitaskStrategy::Interrupt),
            2,
        );
        let rolled_back = LeaseState::Stopped {
            strategy: MultitaskStrategy::Rollback,
        };
        assert_eq!(op(&mut rows, "a", LeaseOp::Renew, 3), rolled_back);
        op(&mut rows, "a", LeaseOp::Release, 4);
        op(&mut rows, "b", LeaseOp::Renew, 5);
        // c only interrupts, but takes over the rollback b owed to a.
        assert_eq!(
            op(&mut rows, "c", LeaseOp::Renew, 6),
            LeaseState::Running {
                rollback_from: Some("m-a".into())
            }
        );
    }

    #[test]
    fn an_interrupt_then_a_rollback_rolls_the_holder_back() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        op(
            &mut rows,
            "b",
            LeaseOp::Join(MultitaskStrategy::Interrupt),
            1,
        );
        op(
            &mut rows,
            "c",
            LeaseOp::Join(MultitaskStrategy::Rollback),
            2,
        );
        assert_eq!(
            op(&mut rows, "a", LeaseOp::Renew, 3),
            LeaseState::Stopped {
                strategy: MultitaskStrategy::Rollback
            },
            "the holder hears of the rollback it will get"
        );
        op(&mut rows, "a", LeaseOp::Release, 4);
        assert_eq!(
            op(&mut rows, "c", LeaseOp::Renew, 5),
            LeaseState::Running {
                rollback_from: Some("m-a".into())
            }
        );
    }

    #[test]
    fn a_marker_never_sorts_before_the_head() {
        let old = "00000000-0000-7000-8000-000000000000";
        let fresh = marker_after(Some(old));
        assert!(fresh.as_str() > old, "a fresh id after an old head");
        // A head from a clock ahead of this one: the marker is the head itself, so a rollback
        // (which deletes ids after the marker) keeps it.
        let ahead = "ffffffff-ffff-7fff-bfff-ffffffffffff";
        assert_eq!(marker_after(Some(ahead)), ahead);
        assert!(marker_after(None) > fresh, "markers are time-ordered");
    }

    #[test]
    fn an_expired_holder_frees_the_thread_and_loses_its_row() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        let later = 10_001;
        assert_eq!(
            op(
                &mut rows,
                "b",
                LeaseOp::Join(MultitaskStrategy::Reject),
                later
            ),
            running()
        );
        assert_eq!(
            op(&mut rows, "a", LeaseOp::Renew, later + 1),
            LeaseState::Lost
        );
        // Leaving a row that is gone says so too; leaving one that stands is a release.
        assert_eq!(
            op(&mut rows, "a", LeaseOp::Release, later + 2),
            LeaseState::Lost
        );
        // Renewing in time keeps it.
        assert_eq!(op(&mut rows, "b", LeaseOp::Renew, later + 9_000), running());
        assert_eq!(
            op(&mut rows, "b", LeaseOp::Renew, later + 18_000),
            running()
        );
    }

    #[test]
    fn activity_reports_the_holder_the_queue_and_a_pending_stop() {
        let mut rows = Vec::new();
        assert_eq!(ThreadActivity::of(&rows, 0), None);
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Enqueue), 0);
        op(&mut rows, "b", LeaseOp::Join(MultitaskStrategy::Enqueue), 0);
        let activity = ThreadActivity::of(&rows, 1).unwrap();
        assert_eq!(activity.running.as_deref(), Some("a"));
        assert_eq!((activity.queued, activity.stopping), (1, false));
        op(
            &mut rows,
            "c",
            LeaseOp::Join(MultitaskStrategy::Interrupt),
            2,
        );
        let activity = ThreadActivity::of(&rows, 3).unwrap();
        assert_eq!((activity.queued, activity.stopping), (1, true));
        assert_eq!(
            ThreadActivity::of(&rows, 20_000),
            None,
            "expired rows are idle"
        );
    }

    #[test]
    fn renewals_write_only_once_a_quarter_of_the_ttl_has_gone() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Reject), 0);
        let before = rows.clone();
        op(&mut rows, "a", LeaseOp::Renew, 2_000);
        assert_eq!(rows, before, "renewed early: nothing to write");
        op(&mut rows, "a", LeaseOp::Renew, 2_600);
        assert_eq!(rows[0].expires_ms, 12_600, "past a quarter: extended");
    }

    #[test]
    fn changes_name_only_what_moved() {
        let mut rows = Vec::new();
        op(&mut rows, "a", LeaseOp::Join(MultitaskStrategy::Enqueue), 0);
        op(&mut rows, "b", LeaseOp::Join(MultitaskStrategy::Enqueue), 0);
        let before = rows.clone();
        op(&mut rows, "a", LeaseOp::Release, 0);
        let (deleted, upserts) = changes(&before, &rows);
        assert_eq!(deleted, vec!["a"]);
        assert!(upserts.is_empty());
        let before = rows.clone();
        op(&mut rows, "b", LeaseOp::Renew, 5);
        let (deleted, upserts) = changes(&before, &rows);
        assert!(deleted.is_empty());
        assert_eq!(upserts.len(), 1);
        assert!(upserts[0].running);
    }

    #[test]
    fn strategy_names_round_trip_and_unknown_names_are_refused() {
        for s in [
            MultitaskStrategy::Reject,
            MultitaskStrategy::Enqueue,
            MultitaskStrategy::Interrupt,
            MultitaskStrategy::Rollback,
        ] {
            assert_eq!(MultitaskStrategy::parse(s.as_str()), Some(s));
        }
        for bad in ["", "ENQUEUE", "cancel", "rollback "] {
            assert_eq!(MultitaskStrategy::parse(bad), None);
        }
    }
}
