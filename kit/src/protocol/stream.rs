//! The client side of a worker's thread stream (Agent Protocol streaming v2 over SSE):
//! [`HttpRunClient::stream_thread`] opens `POST {url}/threads/{id}/stream`, and
//! [`HttpRunClient::wait_for_run`] follows it until a run ends or pauses — how a supervisor
//! hears of a remote task's completion or interrupt without polling.
//!
//! A stream that breaks is resumed from the last event it delivered
//! ([`ThreadStream::last_event_id`], sent as `Last-Event-ID`), so every event arrives once.

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::Endpoint;
use super::client::{HttpRunClient, RunClient, RunClientError, task_path_segment};
use crate::http::{HttpRequest, Method, Secrets, SseStream};

/// What a stream asks for: channels, namespaces, depth, and where to start.
///
/// ```
/// use kit::protocol::StreamRequest;
/// let request = StreamRequest::channels(["lifecycle", "input"]).since(41);
/// assert_eq!(request.to_json()["since"], 41);
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamRequest {
    /// The channels (`values`, `updates`, `messages`, `tools`, `lifecycle`, `input`,
    /// `checkpoints`, `tasks`, `custom`, `custom:<name>`); empty means all.
    pub channels: Vec<String>,
    /// Namespace prefixes (empty: all).
    pub namespaces: Vec<Vec<String>>,
    /// How deep below the prefixes.
    pub depth: Option<usize>,
    /// Replay the events after this one (its `seq`); `None` starts at the thread's first.
    pub since: Option<u64>,
}

impl StreamRequest {
    /// Every channel, from the thread's first event.
    pub fn all() -> Self {
        Self::default()
    }

    /// These channels, from the thread's first event.
    pub fn channels<I, S>(channels: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        StreamRequest {
            channels: channels.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Starts after event `seq`.
    #[must_use]
    pub fn since(mut self, seq: u64) -> Self {
        self.since = Some(seq);
        self
    }

    /// The `EventStreamRequest` body.
    pub fn to_json(&self) -> Value {
        let mut body = json!({});
        if !self.channels.is_empty() {
            body["channels"] = json!(self.channels);
        }
        if !self.namespaces.is_empty() {
            body["namespaces"] = json!(self.namespaces);
        }
        if let Some(depth) = self.depth {
            body["depth"] = json!(depth);
        }
        if let Some(since) = self.since {
            body["since"] = json!(since);
        }
        body
    }
}

/// One event of a thread's stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadEvent {
    /// Its number in the thread's log (the SSE id).
    pub seq: u64,
    /// The protocol method (`lifecycle`, `input.requested`, `values`, …).
    pub method: String,
    /// Where in the agent tree it comes from (empty: the root).
    pub namespace: Vec<String>,
    /// The run that emitted it, when the worker says.
    pub run_id: Option<String>,
    /// The payload (`params.data`).
    pub data: Value,
}

impl ThreadEvent {
    /// The `event` of a `lifecycle` event at the root namespace (`running`, `completed`,
    /// `failed`, `interrupted`), else `None`.
    pub fn root_lifecycle(&self) -> Option<&str> {
        (self.method == "lifecycle" && self.namespace.is_empty())
            .then(|| self.data.get("event").and_then(Value::as_str))
            .flatten()
    }
}

/// What a thread stream delivers.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum StreamItem {
    /// An event.
    Event(ThreadEvent),
    /// Events `from..=to` were removed by the worker's retention before this stream read them;
    /// read the thread's state to resync.
    Missed {
        /// The first missed event.
        from: u64,
        /// The last missed event.
        to: u64,
    },
}

/// An open thread stream. Yields [`StreamItem`]s; ends with an error when the connection
/// breaks (open it again with [`StreamRequest::since`] set to
/// [`last_event_id`](Self::last_event_id) to go on where it stopped).
pub struct ThreadStream {
    events: SseStream,
    url: String,
    secrets: Secrets,
    last: Option<u64>,
}

impl std::fmt::Debug for ThreadStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadStream")
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl ThreadStream {
    /// The `seq` of the last event delivered (the cursor to resume from).
    pub fn last_event_id(&self) -> Option<u64> {
        self.last
    }

    fn malformed(&self, message: String) -> RunClientError {
        RunClientError::Malformed {
            url: self.url.clone(),
            message,
        }
        .scrubbed(&self.secrets)
    }

    fn decode(
        &mut self,
        event: crate::http::SseEvent,
    ) -> Option<Result<StreamItem, RunClientError>> {
        let kind = event.event.as_deref().unwrap_or("message");
        if !crate::json::containers_within(
            event.data.as_bytes(),
            crate::json::MAX_ANSWER_CONTAINERS,
        ) {
            return Some(Err(self.malformed(super::client::too_many_containers())));
        }
        let data: Value = match serde_json::from_str(&event.data) {
            Ok(v) => v,
            Err(e) => {
                return Some(Err(self.malformed(format!(
                    "a stream event is not JSON ({e}); is this a kit worker?"
                ))));
            }
        };
        if !crate::json::nests_within(&data, crate::json::MAX_KEPT_DEPTH) {
            return Some(Err(self.malformed(super::client::too_deep())));
        }
        if kind == "missed" {
            let from = data.get("from").and_then(Value::as_u64).unwrap_or(0);
            let to = data.get("to").and_then(Value::as_u64).unwrap_or(from);
            return Some(Ok(StreamItem::Missed { from, to }));
        }
        if data.get("type").and_then(Value::as_str) != Some("event") {
            // Another kind of frame (a future extension): skipped.
            return None;
        }
        let seq = data
            .get("seq")
            .and_then(Value::as_u64)
            .or_else(|| event.id.as_deref().and_then(|id| id.parse().ok()));
        let Some(seq) = seq else {
            return Some(Err(self.malformed(
                "a stream event has no `seq`; the worker cannot be resumed".into(),
            )));
        };
        let params = data.get("params").cloned().unwrap_or(Value::Null);
        let namespace = params
            .get("namespace")
            .and_then(Value::as_array)
            .map(|parts| {
                parts
                    .iter()
                    .filter_map(|p| p.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        self.last = Some(seq);
        Some(Ok(StreamItem::Event(ThreadEvent {
            seq,
            method: data
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or(kind)
                .to_string(),
            namespace,
            run_id: params
                .get("runId")
                .and_then(Value::as_str)
                .map(String::from),
            data: params.get("data").cloned().unwrap_or(Value::Null),
        })))
    }
}

impl Stream for ThreadStream {
    type Item = Result<StreamItem, RunClientError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            match self.events.poll_next_unpin(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Ready(Some(Err(e))) => {
                    let error = RunClientError::Transport {
                        url: self.url.clone(),
                        message: format!(
                            "the stream broke ({e}); open it again from its last event id"
                        ),
                    }
                    .scrubbed(&self.secrets);
                    return Poll::Ready(Some(Err(error)));
                }
                Poll::Ready(Some(Ok(event))) => {
                    if let Some(item) = self.decode(event) {
                        return Poll::Ready(Some(item));
                    }
                }
            }
        }
    }
}

/// How a remote run ended or paused, as its thread stream told.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum RunOutcome {
    /// It finished; `values` is the thread's state (when the worker sent it).
    Completed {
        /// The final state.
        values: Option<Value>,
    },
    /// It waits for a human (deepagents' `waiting`): the pending interrupts, each
    /// `{"interruptId", "payload", ..}`.
    Waiting {
        /// The interrupts.
        interrupts: Vec<Value>,
        /// The state at the pause.
        values: Option<Value>,
    },
    /// It failed, timed out or was cancelled.
    Failed {
        /// Why.
        error: String,
        /// True when it was cancelled.
        cancelled: bool,
    },
}

/// How many times in a row [`HttpRunClient::wait_for_run`] reopens a broken stream before
/// it reports the failure (a stream that delivered an event resets the count).
const REOPEN_ATTEMPTS: u32 = 5;

/// The most interrupts [`HttpRunClient::wait_for_run`] keeps for one run, and the most JSON
/// text they may hold together; a worker sending more cannot grow the supervisor's memory.
const MAX_INTERRUPTS: usize = 256;
const MAX_INTERRUPT_BYTES: usize = 16 << 20;

impl HttpRunClient {
    /// Opens the event stream of thread `thread_id` on the endpoint's worker
    /// (`POST {url}/threads/{id}/stream`), replaying after `request.since`.
    pub async fn stream_thread(
        &self,
        endpoint: &Endpoint,
        thread_id: &str,
        request: &StreamRequest,
    ) -> Result<ThreadStream, RunClientError> {
        let base = endpoint
            .url
            .as_deref()
            .ok_or_else(|| RunClientError::NoWorker(endpoint.name.clone()))?;
        let url = format!(
            "{}/threads/{}/stream",
            base.trim_end_matches('/'),
            task_path_segment(thread_id)?
        );
        let mut http = HttpRequest::new(Method::POST, &url)
            .json(&request.to_json())
            .header("Accept", "text/event-stream");
        for (k, v) in &endpoint.headers {
            http = http.header(k, v);
        }
        if let Some(since) = request.since {
            http = http.header("Last-Event-ID", &since.to_string());
        }
        let shown = http.shown_url();
        let mut secrets = http.secrets();
        secrets.extend(&endpoint.secrets());
        let stream = self
            .http()
            .send_stream(http)
            .await
            .map_err(|e| super::client::run_error(&shown, &e).scrubbed(&secrets))?;
        Ok(ThreadStream {
            events: stream.sse(),
            url: shown,
            secrets,
            last: request.since,
        })
    }

    /// Follows thread `thread_id` until run `run_id` ends or pauses, and says how: one
    /// streamed request (reopened from its last event when it breaks), no polling. Replays
    /// the thread's log from its start, so a run that already ended is reported at once.
    pub async fn wait_for_run(
        &self,
        endpoint: &Endpoint,
        thread_id: &str,
        run_id: &str,
    ) -> Result<RunOutcome, RunClientError> {
        let mut request = StreamRequest::channels(["lifecycle", "input", "values"]);
        let mut interrupts = Vec::new();
        let mut interrupt_bytes = 0usize;
        let mut values = None;
        let mut failures = 0;
        let mut newest = 0;
        let mut broke = None;
        loop {
            let mut stream = match self.stream_thread(endpoint, thread_id, &request).await {
                Ok(s) => s,
                Err(e) if failures < REOPEN_ATTEMPTS && retryable(&e) => {
                    failures += 1;
                    tokio::time::sleep(Duration::from_millis(100) * failures).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            while let Some(item) = stream.next().await {
                let event = match item {
                    Ok(StreamItem::Event(event)) => event,
                    // Retention removed events, maybe this run's end: ask for the run once.
                    Ok(StreamItem::Missed { .. }) => {
                        let run = RunClient::check(self, endpoint, run_id).await?;
                        if let Some(outcome) = outcome_of(&run) {
                            return Ok(outcome);
                        }
                        continue;
                    }
                    // A break is reopened; an event this client cannot read is final.
                    Err(e) if retryable(&e) => {
                        broke = Some(e);
                        break;
                    }
                    Err(e) => return Err(e),
                };
                // Only an event not seen before is progress (a worker replaying one event and
                // breaking must not be reopened forever).
                if event.seq > newest {
                    newest = event.seq;
                    failures = 0;
                }
                if event.run_id.as_deref() != Some(run_id) || !event.namespace.is_empty() {
                    continue;
                }
                match (event.method.as_str(), event.root_lifecycle()) {
                    ("values", _) => values = Some(event.data.clone()),
                    ("input.requested", _) if interrupts.len() < MAX_INTERRUPTS => {
                        let bytes = crate::json::approx_len(&event.data);
                        if interrupt_bytes.saturating_add(bytes) <= MAX_INTERRUPT_BYTES {
                            interrupt_bytes += bytes;
                            interrupts.push(event.data.clone());
                        }
                    }
                    (_, Some("completed")) => return Ok(RunOutcome::Completed { values }),
                    (_, Some("interrupted")) => {
                        return Ok(RunOutcome::Waiting { interrupts, values });
                    }
                    (_, Some("failed")) => {
                        return Ok(RunOutcome::Failed {
                            error: event
                                .data
                                .get("error")
                                .and_then(Value::as_str)
                                .unwrap_or("the run failed")
                                .to_string(),
                            cancelled: event.data.get("cancelled") == Some(&Value::Bool(true)),
                        });
                    }
                    // `running` again after a recovery: what it asked before is moot.
                    (_, Some("running")) => {
                        interrupts.clear();
                        interrupt_bytes = 0;
                    }
                    _ => {}
                }
            }
            // The stream broke or ended: reopen after the last event seen.
            failures += 1;
            if failures > REOPEN_ATTEMPTS {
                return Err(RunClientError::Transport {
                    url: endpoint
                        .url
                        .as_deref()
                        .map(crate::http::redact_url_text)
                        .unwrap_or_default(),
                    message: format!(
                        "the thread stream broke {REOPEN_ATTEMPTS} times in a row before run \
                         `{run_id}` ended ({}); check the worker",
                        broke.as_ref().map_or_else(
                            || "it ended without the run's end".to_string(),
                            |e| crate::text::clip(&e.to_string(), 500)
                        )
                    ),
                });
            }
            // From the newest event seen in any opening (a reopening that delivered nothing
            // must not send the next one back to the log's start).
            if newest > 0 {
                request.since = Some(newest);
            }
            tokio::time::sleep(Duration::from_millis(100) * failures).await;
        }
    }
}

/// How a run as the run protocol serves it (`GET /runs/{id}`) ended, if it has.
fn outcome_of(run: &Value) -> Option<RunOutcome> {
    let values = run.get("values").cloned();
    let error = || {
        run.get("error")
            .and_then(Value::as_str)
            .unwrap_or("the run failed")
            .to_string()
    };
    match run.get("status").and_then(Value::as_str)? {
        "success" => Some(RunOutcome::Completed { values }),
        "interrupted" => Some(RunOutcome::Waiting {
            interrupts: run
                .get("interrupts")
                .and_then(Value::as_array)
                .map(|list| {
                    list.iter()
                        .take(MAX_INTERRUPTS)
                        .map(|i| {
                            json!({"interruptId": i.get("id"), "payload": i.get("value"),
                                   "node": i.get("node")})
                        })
                        .collect()
                })
                .unwrap_or_default(),
            values,
        }),
        "error" | "timeout" => Some(RunOutcome::Failed {
            error: error(),
            cancelled: false,
        }),
        "cancelled" => Some(RunOutcome::Failed {
            error: "the run was cancelled".into(),
            cancelled: true,
        }),
        _ => None,
    }
}

fn retryable(e: &RunClientError) -> bool {
    matches!(
        e,
        RunClientError::Transport { .. } | RunClientError::Timeout { .. }
    ) || matches!(e, RunClientError::Status { status, .. } if *status >= 500)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    #[test]
    fn a_polled_run_tells_how_it_ended_when_its_events_were_pruned() {
        let paused = json!({"status": "interrupted",
                            "interrupts": [{"id": "i1", "value": "approve?", "node": "gate"}]});
        let Some(RunOutcome::Waiting { interrupts, .. }) = outcome_of(&paused) else {
            panic!("expected a wait");
        };
        assert_eq!(interrupts[0]["interruptId"], "i1");
        assert_eq!(interrupts[0]["payload"], "approve?");
        assert_eq!(
            outcome_of(&json!({"status": "cancelled"})),
            Some(RunOutcome::Failed {
                error: "the run was cancelled".into(),
                cancelled: true
            })
        );
        assert_eq!(
            outcome_of(&json!({"status": "success", "values": {"n": 1}})),
            Some(RunOutcome::Completed {
                values: Some(json!({"n": 1}))
            })
        );
        assert_eq!(outcome_of(&json!({"status": "running"})), None);
        assert_eq!(outcome_of(&json!({"nothing": true})), None);
    }

    #[test]
    fn stream_frames_decode_to_events_and_notices() {
        let mut stream = ThreadStream {
            events: SseStream::new(futures::stream::empty().boxed()),
            url: "http://w".into(),
            secrets: Secrets::default(),
            last: None,
        };
        let frame = |event: &str, data: &str| crate::http::SseEvent {
            event: Some(event.into()),
            data: data.into(),
            id: None,
        };
        let event = stream
            .decode(frame(
                "lifecycle",
                r#"{"type":"event","seq":3,"method":"lifecycle","params":{"namespace":[],"runId":"r","data":{"event":"completed"}}}"#,
            ))
            .unwrap()
            .unwrap();
        let StreamItem::Event(event) = event else {
            panic!("an event")
        };
        assert_eq!(event.root_lifecycle(), Some("completed"));
        assert_eq!(stream.last_event_id(), Some(3));
        assert_eq!(
            stream
                .decode(frame("missed", r#"{"from":4,"to":9}"#))
                .unwrap()
                .unwrap(),
            StreamItem::Missed { from: 4, to: 9 }
        );
        assert!(stream.decode(frame("x", "not json")).unwrap().is_err());
        assert!(
            stream
                .decode(frame("x", r#"{"type":"event","method":"x"}"#))
                .unwrap()
                .is_err(),
            "an event without seq cannot be resumed"
        );
        assert!(stream.decode(frame("x", r#"{"type":"other"}"#)).is_none());
        // Deeper than a thread can keep: refused, whatever kind of frame it is.
        let deep = format!(
            r#"{{"type":"event","seq":5,"method":"values","params":{{"data":{}1{}}}}}"#,
            "[".repeat(100),
            "]".repeat(100)
        );
        let refused = stream.decode(frame("values", &deep)).unwrap().unwrap_err();
        assert!(
            refused.to_string().contains("nests more than 64"),
            "{refused}"
        );
        assert_eq!(
            stream.last_event_id(),
            Some(3),
            "a refused frame is not taken"
        );
    }
}
