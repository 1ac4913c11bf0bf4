//! A job's savepoint, with its statements prepared once per connection.
//!
//! Every store job runs in a savepoint of the group's transaction (see [`group`](super::group)).
//! rusqlite's `Savepoint` parses `SAVEPOINT` and `RELEASE` again on every use; under load
//! that was a few percent of the database thread, for two statements that never change.

use std::ops::Deref;

use rusqlite::Connection;

/// An open savepoint: released by [`commit`](Self::commit), rolled back when dropped
/// without it (an error returned early, or a panic unwinding through the job).
pub(super) struct Savepoint<'c> {
    conn: &'c Connection,
    released: bool,
}

impl<'c> Savepoint<'c> {
    /// Opens a savepoint on `conn`.
    pub(super) fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("SAVEPOINT kit_job")?.execute([])?;
        Ok(Savepoint {
            conn,
            released: false,
        })
    }

    /// Keeps what the job wrote (it commits with the group's transaction).
    pub(super) fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("RELEASE kit_job")?.execute([])?;
        self.released = true;
        Ok(())
    }
}

impl Deref for Savepoint<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for Savepoint<'_> {
    fn drop(&mut self) {
        if self.released || self.conn.is_autocommit() {
            // Released, or SQLite already rolled back the whole transaction (its savepoints
            // went with it).
            return;
        }
        // Undo the job's writes, then close the savepoint, leaving the group's transaction
        // as it was before the job. Releasing after a failed rollback would keep the writes;
        // the whole transaction goes instead, and the group sees it lost.
        let undone = self
            .conn
            .prepare_cached("ROLLBACK TO kit_job")
            .and_then(|mut s| s.execute([]))
            .and_then(|_| {
                self.conn
                    .prepare_cached("RELEASE kit_job")
                    .and_then(|mut s| s.execute([]))
            });
        if undone.is_err() && !self.conn.is_autocommit() {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// A connection with an empty table `t`, inside a transaction (as a group's jobs are).
    fn in_transaction() -> Connection {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER); BEGIN IMMEDIATE")
            .unwrap();
        conn
    }

    fn count(conn: &Connection) -> i64 {
        conn.query_row("SELECT count(*) FROM t", [], |r| r.get(0))
            .unwrap()
    }

    #[test]
    fn committed_work_stays_and_dropped_work_goes_within_one_transaction() {
        let conn = in_transaction();
        let kept = Savepoint::begin(&conn).unwrap();
        kept.execute("INSERT INTO t VALUES (1)", []).unwrap();
        kept.commit().unwrap();
        // A job that fails after writing: its row goes, the earlier job's stays.
        {
            let failed = Savepoint::begin(&conn).unwrap();
            failed.execute("INSERT INTO t VALUES (2)", []).unwrap();
            assert_eq!(count(&failed), 2);
        }
        assert_eq!(count(&conn), 1);
        // The transaction is still open and usable, and the same names are used again.
        assert!(!conn.is_autocommit());
        let again = Savepoint::begin(&conn).unwrap();
        again.execute("INSERT INTO t VALUES (3)", []).unwrap();
        again.commit().unwrap();
        conn.execute_batch("COMMIT").unwrap();
        assert_eq!(count(&conn), 2);
    }

    #[test]
    fn outside_a_transaction_a_savepoint_is_a_transaction_of_its_own() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch("CREATE TABLE t (x INTEGER)").unwrap();
        {
            let failed = Savepoint::begin(&conn).unwrap();
            failed.execute("INSERT INTO t VALUES (1)", []).unwrap();
        }
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn), 0);
        let kept = Savepoint::begin(&conn).unwrap();
        kept.execute("INSERT INTO t VALUES (2)", []).unwrap();
        kept.commit().unwrap();
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn), 1);
    }

    #[test]
    fn a_transaction_sqlite_already_rolled_back_is_left_alone() {
        let conn = in_transaction();
        {
            let sp = Savepoint::begin(&conn).unwrap();
            sp.execute("INSERT INTO t VALUES (1)", []).unwrap();
            // What SQLite does on some I/O and disk-full errors.
            sp.execute_batch("ROLLBACK").unwrap();
        }
        assert!(conn.is_autocommit());
        assert_eq!(count(&conn), 0);
        conn.execute_batch("BEGIN IMMEDIATE; INSERT INTO t VALUES (2); COMMIT")
            .unwrap();
        assert_eq!(count(&conn), 1);
    }

    #[test]
    fn nested_savepoints_undo_only_their_own_writes() {
        let conn = in_transaction();
        let outer = Savepoint::begin(&conn).unwrap();
        outer.execute("INSERT INTO t VALUES (1)", []).unwrap();
        {
            let inner = Savepoint::begin(&outer).unwrap();
            inner.execute("INSERT INTO t VALUES (2)", []).unwrap();
        }
        assert_eq!(count(&outer), 1);
        let inner = Savepoint::begin(&outer).unwrap();
        inner.execute("INSERT INTO t VALUES (3)", []).unwrap();
        inner.commit().unwrap();
        outer.commit().unwrap();
        conn.execute_batch("COMMIT").unwrap();
        assert_eq!(count(&conn), 2);
    }

    #[test]
    fn a_savepoint_that_cannot_be_undone_takes_the_transaction_with_it() {
        let conn = in_transaction();
        let sp = Savepoint::begin(&conn).unwrap();
        sp.execute("INSERT INTO t VALUES (1)", []).unwrap();
        // The job closed the savepoint itself: its commit fails, and the drop finds nothing to
        // roll back to. Its write must not be committed with the group.
        sp.execute_batch("RELEASE kit_job").unwrap();
        assert!(sp.commit().is_err());
        assert!(conn.is_autocommit(), "the group sees its transaction lost");
        assert_eq!(count(&conn), 0);
    }

    #[test]
    fn a_panicking_job_leaves_nothing_behind() {
        let conn = in_transaction();
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let sp = Savepoint::begin(&conn).unwrap();
            sp.execute("INSERT INTO t VALUES (1)", []).unwrap();
            panic!("the job failed");
        }));
        assert!(caught.is_err());
        assert!(!conn.is_autocommit());
        assert_eq!(count(&conn), 0);
        conn.execute_batch("COMMIT").unwrap();
    }
}
