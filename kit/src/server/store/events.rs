//! The per-thread event log: what a worker's runs emitted, kept in the run store so that a
//! stream can be replayed from a cursor after a reconnect, served by any worker sharing the
//! store.
//!
//! Each thread numbers its events 1, 2, 3, … with no gaps (the counter lives on the thread's
//! row and is advanced in the transaction that appends), so a reader that asks for the events
//! after `n` and gets a first event above `n + 1` knows that the ones between were removed by
//! the log's retention, and can say so instead of skipping them silently.

use serde_json::{Value, json};

/// An event to append to a thread's log, in the Agent Protocol's streaming shape: a `method`
/// (`lifecycle`, `updates`, `values`, `messages`, `tools`, `input.requested`, `checkpoints`,
/// `custom`), the `namespace` it comes from (empty for the root graph) and its `data`.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// The protocol method.
    pub method: String,
    /// Where in the agent tree it comes from, outermost first.
    pub namespace: Vec<String>,
    /// The payload (`params.data` on the wire).
    pub data: Value,
}

impl NewEvent {
    /// An event of `method` at the root namespace.
    pub fn new(method: impl Into<String>, data: Value) -> Self {
        NewEvent {
            method: method.into(),
            namespace: Vec::new(),
            data,
        }
    }
}

/// An event as stored in a thread's log.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    /// The thread.
    pub thread_id: String,
    /// Its number in the thread's log: 1, 2, 3, … (the SSE `id`).
    pub seq: u64,
    /// The run that emitted it.
    pub run_id: String,
    /// The protocol method.
    pub method: String,
    /// Where in the agent tree it comes from.
    pub namespace: Vec<String>,
    /// The payload.
    pub data: Value,
    /// When it was appended, in milliseconds since the Unix epoch.
    pub created_at: u64,
}

impl StoredEvent {
    /// The channel a subscription names to get it: the method, except `input.requested`,
    /// which is on `input`.
    pub fn channel(&self) -> &str {
        match self.method.split_once('.') {
            Some((channel, _)) => channel,
            None => &self.method,
        }
    }

    /// The event as the Agent Protocol sends it:
    /// `{"type": "event", "eventId", "seq", "method", "params": {"namespace", "timestamp",
    /// "data", "runId"}}`.
    ///
    /// ```
    /// use kit::server::store::StoredEvent;
    /// use serde_json::json;
    /// let event = StoredEvent {
    ///     thread_id: "t".into(),
    ///     seq: 7,
    ///     run_id: "r".into(),
    ///     method: "input.requested".into(),
    ///     namespace: vec![],
    ///     data: json!({"interruptId": "i1", "payload": "approve?"}),
    ///     created_at: 1,
    /// };
    /// assert_eq!(event.channel(), "input");
    /// assert_eq!(event.to_protocol()["eventId"], "7");
    /// assert_eq!(event.to_protocol()["params"]["data"]["interruptId"], "i1");
    /// ```
    pub fn to_protocol(&self) -> Value {
        json!({
            "type": "event",
            "eventId": self.seq.to_string(),
            "seq": self.seq,
            "method": self.method,
            "params": {
                "namespace": self.namespace,
                "timestamp": self.created_at,
                "data": self.data,
                "runId": self.run_id,
            },
        })
    }
}

/// The NOTIFY channel (PostgreSQL) carrying the thread id of each append.
#[cfg_attr(not(feature = "postgres"), allow(dead_code))]
pub(crate) const NOTIFY_CHANNEL: &str = "kit_worker_events";

/// How many thread ids a store's wake-up channel holds for a slow listener before it lags (a
/// lagging listener re-reads its thread, so nothing is lost).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) const NOTICE_CAPACITY: usize = 1024;

/// A namespace as stored (a JSON array of strings); an unreadable one is the root.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn parse_namespace(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_default()
}
