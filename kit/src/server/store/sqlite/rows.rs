//! Rows to records: reading runs and threads back, and the column conversions.

use rusqlite::{Connection, OptionalExtension, Row, params};

use super::{backend, parse_json, unms};
use crate::server::store::{RUN_COLUMNS, RunInput, RunRecord, RunStatus, StoreError, ThreadRecord};

pub(super) fn read_run(row: &Row<'_>) -> rusqlite::Result<RawRun> {
    Ok(RawRun {
        run_id: row.get(0)?,
        thread_id: row.get(1)?,
        graph_id: row.get(2)?,
        status: row.get(3)?,
        input_kind: row.get(4)?,
        input: row.get(5)?,
        output: row.get(6)?,
        error: row.get(7)?,
        metadata: row.get(8)?,
        multitask_strategy: row.get(9)?,
        attempts: row.get(10)?,
        cancel_requested: row.get(11)?,
        worker_id: row.get(12)?,
        created_at: row.get(13)?,
        updated_at: row.get(14)?,
        started_at: row.get(15)?,
        finished_at: row.get(16)?,
        owner: row.get(17)?,
    })
}

/// A run row before its JSON columns are parsed.
pub(super) struct RawRun {
    pub(super) run_id: String,
    pub(super) thread_id: String,
    pub(super) graph_id: String,
    pub(super) status: String,
    pub(super) input_kind: String,
    pub(super) input: String,
    pub(super) output: Option<String>,
    pub(super) error: Option<String>,
    pub(super) metadata: String,
    pub(super) multitask_strategy: Option<String>,
    pub(super) attempts: i64,
    pub(super) cancel_requested: i64,
    pub(super) worker_id: Option<String>,
    pub(super) created_at: i64,
    pub(super) updated_at: i64,
    pub(super) started_at: Option<i64>,
    pub(super) finished_at: Option<i64>,
    pub(super) owner: String,
}

impl RawRun {
    pub(super) fn parse(self) -> Result<RunRecord, StoreError> {
        let status = RunStatus::parse(&self.status).ok_or_else(|| {
            StoreError::Corrupt(format!(
                "run `{}` has status `{}`",
                self.run_id, self.status
            ))
        })?;
        Ok(RunRecord {
            status,
            input: RunInput::from_parts(&self.input_kind, parse_json("input", &self.input)?),
            output: self
                .output
                .as_deref()
                .map(|o| parse_json("output", o))
                .transpose()?,
            error: self.error,
            metadata: parse_json("metadata", &self.metadata)?,
            multitask_strategy: self.multitask_strategy,
            attempts: u32::try_from(self.attempts).unwrap_or(0),
            cancel_requested: self.cancel_requested != 0,
            worker_id: self.worker_id,
            created_at: unms(self.created_at),
            updated_at: unms(self.updated_at),
            started_at: self.started_at.map(unms),
            finished_at: self.finished_at.map(unms),
            run_id: self.run_id,
            thread_id: self.thread_id,
            graph_id: self.graph_id,
            owner: self.owner,
        })
    }
}

pub(super) fn get_run(conn: &Connection, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
    get_raw_run(conn, run_id)?.map(RawRun::parse).transpose()
}

/// A run's row, its JSON not parsed yet (callers parse off the database thread).
pub(super) fn get_raw_run(conn: &Connection, run_id: &str) -> Result<Option<RawRun>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM kit_worker_runs WHERE run_id = ?1");
    conn.prepare_cached(&sql)
        .and_then(|mut s| s.query_row(params![run_id], read_run).optional())
        .map_err(|e| backend("reading a run", e))
}

pub(super) fn get_thread(
    conn: &Connection,
    thread_id: &str,
) -> Result<Option<ThreadRecord>, StoreError> {
    let raw = conn
        .prepare_cached(
            "SELECT thread_id, graph_id, metadata, values_json, created_at, updated_at, owner
             FROM kit_worker_threads WHERE thread_id = ?1",
        )
        .and_then(|mut s| {
            s.query_row(params![thread_id], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, i64>(4)?,
                    r.get::<_, i64>(5)?,
                    r.get::<_, String>(6)?,
                ))
            })
            .optional()
        })
        .map_err(|e| backend("reading a thread", e))?;
    let Some((thread_id, graph_id, metadata, values, created_at, updated_at, owner)) = raw else {
        return Ok(None);
    };
    Ok(Some(ThreadRecord {
        thread_id,
        graph_id,
        metadata: parse_json("metadata", &metadata)?,
        values: values
            .as_deref()
            .map(|v| parse_json("values", v))
            .transpose()?,
        created_at: unms(created_at),
        updated_at: unms(updated_at),
        owner,
    }))
}

pub(super) fn runs_where(
    conn: &Connection,
    clause: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<RunRecord>, StoreError> {
    let sql = format!("SELECT {RUN_COLUMNS} FROM kit_worker_runs WHERE {clause}");
    let raws = conn
        .prepare_cached(&sql)
        .and_then(|mut s| {
            s.query_map(args, read_run)?
                .collect::<rusqlite::Result<Vec<_>>>()
        })
        .map_err(|e| backend("reading runs", e))?;
    raws.into_iter().map(RawRun::parse).collect()
}
