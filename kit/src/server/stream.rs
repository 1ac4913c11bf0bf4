//! The thread stream: `POST /threads/{thread_id}/stream` (Agent Protocol streaming v2, an
//! `EventStreamRequest` body) and `GET /threads/{thread_id}/stream` (query parameters, for
//! `EventSource`), as server-sent events.
//!
//! A stream replays the thread's event log after a cursor — the `Last-Event-ID` header, else
//! `since` — and then follows it live, woken by the store's notices (PostgreSQL:
//! `LISTEN`/`NOTIFY`, so events written by any worker reach a stream served by any other).
//! It reads the log a page at a time and sends as the client reads: a slow client holds one
//! page of memory, never a growing queue. The stream is thread-centric: it spans runs and ends
//! only when the client closes it.
//!
//! Each SSE frame carries `id: <seq>` (the event's number in the thread's log), `event:
//! <method>`, and the protocol's `Event` object as `data`. When the events after the cursor
//! were removed by the log's retention, a frame `event: missed` says which, before the next
//! event: read the thread (`GET /threads/{id}`) to resync.

use std::collections::{HashMap, HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Extension, Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseFrame, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{Map, Value, json};
use tokio::sync::{broadcast, watch};

use super::auth::Identity;
use super::interop::thread_or_404;
use super::queue::Shared;
use super::routes::{ApiError, ApiResult, body_object};
use super::store::{RunStore, StoredEvent};

/// Events read from the log at a time (the most a stream holds in memory).
const PAGE: usize = 128;

/// How long a stream waits for a notice before it reads the log anyway (in case a notice was
/// lost with a broken `LISTEN` connection).
const FALLBACK_POLL: Duration = Duration::from_secs(2);

/// The channels of Agent Protocol streaming v2.
const CHANNELS: [&str; 9] = [
    "values",
    "updates",
    "messages",
    "tools",
    "lifecycle",
    "input",
    "checkpoints",
    "tasks",
    "custom",
];

/// Which events a stream sends: channels, namespace prefixes, depth below them.
#[derive(Debug, Clone, Default)]
struct Filter {
    /// `None`: every channel.
    channels: Option<HashSet<String>>,
    /// Empty: every namespace.
    namespaces: Vec<Vec<String>>,
    depth: Option<usize>,
}

impl Filter {
    fn matches(&self, event: &StoredEvent) -> bool {
        if let Some(channels) = &self.channels {
            let channel = event.channel();
            let custom = event.method == "custom"
                && event
                    .data
                    .get("name")
                    .and_then(Value::as_str)
                    .is_some_and(|n| channels.contains(&format!("custom:{n}")));
            if !channels.contains(channel) && !custom {
                return false;
            }
        }
        if self.namespaces.is_empty() {
            return self
                .depth
                .is_none_or(|depth| event.namespace.len() <= depth);
        }
        self.namespaces.iter().any(|prefix| {
            event.namespace.starts_with(prefix)
                && self
                    .depth
                    .is_none_or(|depth| event.namespace.len() - prefix.len() <= depth)
        })
    }
}

fn parse_channels(list: Vec<String>) -> ApiResult<Option<HashSet<String>>> {
    if list.is_empty() {
        return Err(ApiError::bad_request(format!(
            "`channels` is empty: name at least one of {}, or `custom:<name>`",
            CHANNELS.join(", ")
        )));
    }
    for channel in &list {
        let custom = channel
            .strip_prefix("custom:")
            .is_some_and(|name| !name.is_empty());
        if !custom && !CHANNELS.contains(&channel.as_str()) {
            return Err(ApiError::bad_request(format!(
                "`{}` is not a channel; use {}, or `custom:<name>`",
                crate::text::clip(channel, 100),
                CHANNELS.join(", ")
            )));
        }
    }
    Ok(Some(list.into_iter().collect()))
}

fn parse_since(value: &Value) -> ApiResult<u64> {
    value.as_u64().ok_or_else(|| {
        ApiError::bad_request(format!(
            "`since` must be a non-negative integer (an event's `seq`), got {}",
            crate::text::json_type(value)
        ))
    })
}

/// The cursor of a `Last-Event-ID` header, when there is one.
fn last_event_id(headers: &HeaderMap) -> ApiResult<Option<u64>> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or("").trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse::<u64>().map(Some).map_err(|_| {
        ApiError::bad_request(
            "the `Last-Event-ID` header must be the `id` of an event this stream sent (a \
             non-negative integer)",
        )
    })
}

/// The most namespace paths one stream may follow.
const MAX_NAMESPACES: usize = 64;

/// An `EventStreamRequest` body: `{"channels", "namespaces"?, "depth"?, "since"?}`.
fn filter_from_body(body: &Map<String, Value>) -> ApiResult<(Filter, u64)> {
    let channels = match body.get("channels") {
        None | Some(Value::Null) => None,
        Some(Value::Array(items)) => parse_channels(strings(items, "channels")?)?,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`channels` must be a list of channel names, got {}",
                crate::text::json_type(other)
            )));
        }
    };
    let namespaces = match body.get("namespaces") {
        None | Some(Value::Null) => Vec::new(),
        // Every event is checked against every path asked for: their number is bounded.
        Some(Value::Array(items)) if items.len() > MAX_NAMESPACES => {
            return Err(ApiError::bad_request(format!(
                "`namespaces` lists {} paths; a stream may follow at most {MAX_NAMESPACES} \
                 (open more streams, or follow a common parent path)",
                items.len()
            )));
        }
        Some(Value::Array(items)) => items
            .iter()
            .map(|ns| match ns {
                Value::Array(parts) => strings(parts, "namespaces"),
                other => Err(ApiError::bad_request(format!(
                    "each of `namespaces` must be a list of strings (a path such as \
                     [\"researcher\"]), got {}",
                    crate::text::json_type(other)
                ))),
            })
            .collect::<ApiResult<Vec<_>>>()?,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "`namespaces` must be a list of paths, got {}",
                crate::text::json_type(other)
            )));
        }
    };
    let depth = match body.get("depth") {
        None | Some(Value::Null) => None,
        Some(v) => Some(
            v.as_u64()
                .and_then(|d| usize::try_from(d).ok())
                .ok_or_else(|| ApiError::bad_request("`depth` must be a non-negative integer"))?,
        ),
    };
    let since = match body.get("since") {
        None | Some(Value::Null) => 0,
        Some(v) => parse_since(v)?,
    };
    Ok((
        Filter {
            channels,
            namespaces,
            depth,
        },
        since,
    ))
}

fn strings(items: &[Value], field: &str) -> ApiResult<Vec<String>> {
    items
        .iter()
        .map(|v| {
            v.as_str().map(String::from).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "`{field}` must hold strings, got {}",
                    crate::text::json_type(v)
                ))
            })
        })
        .collect()
}

type S = State<Arc<Shared>>;
type Body = Result<axum::body::Bytes, axum::extract::rejection::BytesRejection>;

/// `POST /threads/{thread_id}/stream` with an `EventStreamRequest`.
pub(crate) async fn post_stream(
    State(shared): S,
    Extension(who): Extension<Identity>,
    Path(thread_id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    let body = body_object(body, shared.config.body_limit)?;
    let (filter, since) = filter_from_body(&body)?;
    open(&shared, &who, thread_id, filter, since, &headers).await
}

/// `GET /threads/{thread_id}/stream?channels=a,b&namespace=x/y&depth=n&since=n`.
pub(crate) async fn get_stream(
    State(shared): S,
    Extension(who): Extension<Identity>,
    Path(thread_id): Path<String>,
    Query(query): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> ApiResult<Response> {
    let mut body = Map::new();
    if let Some(channels) = query.get("channels") {
        body.insert(
            "channels".into(),
            json!(channels.split(',').map(str::trim).collect::<Vec<_>>()),
        );
    }
    if let Some(ns) = query.get("namespace") {
        let path: Vec<&str> = ns.split('/').filter(|p| !p.is_empty()).collect();
        body.insert("namespaces".into(), json!([path]));
    }
    for key in ["depth", "since"] {
        if let Some(v) = query.get(key) {
            let n = v.parse::<u64>().map_err(|_| {
                ApiError::bad_request(format!(
                    "query parameter `{key}` must be a non-negative integer, got `{}`",
                    crate::text::clip(v, 40)
                ))
            })?;
            body.insert(key.into(), json!(n));
        }
    }
    let (filter, since) = filter_from_body(&body)?;
    open(&shared, &who, thread_id, filter, since, &headers).await
}

async fn open(
    shared: &Arc<Shared>,
    who: &Identity,
    thread_id: String,
    filter: Filter,
    since: u64,
    headers: &HeaderMap,
) -> ApiResult<Response> {
    // Another identity's thread reads exactly as a missing one.
    thread_or_404(shared, &thread_id, who).await?;
    let cursor = last_event_id(headers)?.unwrap_or(since);
    // Subscribed before the first read, so an append between the read and the wait still
    // wakes the stream.
    let notices = shared.store.event_notices().await?;
    let follow = Follow {
        store: shared.store.clone(),
        thread_id,
        cursor,
        buffer: VecDeque::new(),
        notices,
        filter,
        shutdown: shared.shutdown_signal(),
    };
    let keep_alive =
        (shared.config.idle_timeout / 3).clamp(Duration::from_millis(100), Duration::from_secs(15));
    Ok(Sse::new(frames(follow))
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response())
}

/// A stream's position in a thread's log.
struct Follow {
    store: Arc<dyn RunStore>,
    thread_id: String,
    /// The number of the last event read from the log (sent or filtered out).
    cursor: u64,
    /// Read, not yet sent; at most one page.
    buffer: VecDeque<StoredEvent>,
    notices: broadcast::Receiver<String>,
    filter: Filter,
    shutdown: watch::Receiver<bool>,
}

impl Follow {
    /// The next frame: a buffered event, else a page from the log, else waits for a notice.
    /// `None` when the worker shuts down (a stream never holds up a shutdown).
    async fn next(&mut self) -> Option<SseFrame> {
        loop {
            while let Some(event) = self.buffer.pop_front() {
                if self.filter.matches(&event) {
                    return Some(event_frame(&event));
                }
            }
            if *self.shutdown.borrow() {
                return None;
            }
            match self
                .store
                .read_events(&self.thread_id, self.cursor, PAGE)
                .await
            {
                Ok(page) if !page.is_empty() => {
                    let first = page[0].seq;
                    let skipped = (first > self.cursor.saturating_add(1))
                        .then(|| (self.cursor + 1, first - 1));
                    self.cursor = page.last().map_or(self.cursor, |e| e.seq);
                    self.buffer.extend(page);
                    if let Some((from, to)) = skipped {
                        return Some(missed_frame(from, to));
                    }
                }
                Ok(_) => {
                    if !self.wait().await {
                        return None;
                    }
                }
                Err(e) => {
                    tracing::error!(thread_id = %self.thread_id, error = %e, "could not read a thread's event log for a stream; retrying");
                    tokio::select! {
                        _ = tokio::time::sleep(FALLBACK_POLL) => {}
                        _ = self.shutdown.wait_for(|stop| *stop) => return None,
                    }
                }
            }
        }
    }

    /// Waits for a notice about this thread (or one that may concern it), at most
    /// [`FALLBACK_POLL`]. False when the stream should end: the worker shuts down, or its store
    /// is gone.
    async fn wait(&mut self) -> bool {
        let deadline = tokio::time::sleep(FALLBACK_POLL);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                notice = self.notices.recv() => match notice {
                    Ok(thread) if thread != self.thread_id && !thread.is_empty() => continue,
                    Err(broadcast::error::RecvError::Closed) => return false,
                    // Ours, a wake-up for everyone, or notices lost to lag: read.
                    _ => return true,
                },
                _ = &mut deadline => return true,
                _ = self.shutdown.wait_for(|stop| *stop) => return false,
            }
        }
    }
}

fn frames(follow: Follow) -> impl Stream<Item = Result<SseFrame, Infallible>> {
    futures::stream::unfold(follow, |mut follow| async move {
        let frame = follow.next().await?;
        Some((Ok(frame), follow))
    })
}

fn event_frame(event: &StoredEvent) -> SseFrame {
    SseFrame::default()
        .id(event.seq.to_string())
        .event(event.method.clone())
        .data(event.to_protocol().to_string())
}

fn missed_frame(from: u64, to: u64) -> SseFrame {
    SseFrame::default().event("missed").data(
        json!({
            "type": "error",
            "error": "events_missed",
            "from": from,
            "to": to,
            "message": format!(
                "events {from} to {to} of this thread were removed by the worker's event \
                 retention before this stream read them; read the thread (GET \
                 /threads/{{thread_id}}) to resync, or raise the worker's event_retention"
            ),
        })
        .to_string(),
    )
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use super::*;

    fn event(method: &str, namespace: &[&str], data: Value) -> StoredEvent {
        StoredEvent {
            thread_id: "t".into(),
            seq: 1,
            run_id: "r".into(),
            method: method.into(),
            namespace: namespace.iter().map(|s| s.to_string()).collect(),
            data,
            created_at: 0,
        }
    }

    #[test]
    fn filters_select_channels_namespaces_and_depth() {
        let body = json!({"channels": ["tools", "input", "custom:progress"],
                          "namespaces": [["sub"]], "depth": 1});
        let (filter, since) = filter_from_body(body.as_object().unwrap()).unwrap();
        assert_eq!(since, 0);
        assert!(filter.matches(&event("tools", &["sub"], json!({}))));
        assert!(filter.matches(&event("input.requested", &["sub", "x"], json!({}))));
        assert!(!filter.matches(&event("input.requested", &["sub", "x", "y"], json!({}))));
        assert!(
            !filter.matches(&event("tools", &[], json!({}))),
            "outside the prefix"
        );
        assert!(!filter.matches(&event("updates", &["sub"], json!({}))));
        assert!(filter.matches(&event("custom", &["sub"], json!({"name": "progress"}))));
        assert!(!filter.matches(&event("custom", &["sub"], json!({"name": "other"}))));
        let all = Filter::default();
        assert!(all.matches(&event("values", &["a", "b"], json!({}))));
    }

    /// Every event is checked against every path a stream follows, so a client may not ask for
    /// thousands of them (a 1 MiB list of paths is refused like a list of 65).
    #[test]
    fn a_stream_follows_a_bounded_number_of_namespaces() {
        let paths =
            |n: usize| -> Vec<Value> { (0..n).map(|i| json!([format!("sub{i}")])).collect() };
        let body = json!({"channels": ["tools"], "namespaces": paths(MAX_NAMESPACES)});
        let (filter, _) = filter_from_body(body.as_object().unwrap()).unwrap();
        assert!(filter.matches(&event("tools", &["sub63", "x"], json!({}))));
        assert!(!filter.matches(&event("tools", &["sub64"], json!({}))));
        for n in [MAX_NAMESPACES + 1, 100_000] {
            let body = json!({"channels": ["tools"], "namespaces": paths(n)});
            let e = filter_from_body(body.as_object().unwrap()).unwrap_err();
            assert_eq!(
                e.message(),
                format!(
                    "`namespaces` lists {n} paths; a stream may follow at most 64 (open more \
                     streams, or follow a common parent path)"
                )
            );
        }
    }

    #[test]
    fn bad_stream_requests_say_what_to_send() {
        let bad = [
            json!({"channels": []}),
            json!({"channels": ["nope"]}),
            json!({"channels": "tools"}),
            json!({"channels": ["tools"], "since": -1}),
            json!({"channels": ["tools"], "namespaces": ["flat"]}),
            json!({"channels": ["tools"], "depth": "2"}),
        ];
        for body in bad {
            let e = filter_from_body(body.as_object().unwrap()).unwrap_err();
            assert!(!e.message().is_empty());
        }
        let mut headers = HeaderMap::new();
        headers.insert("last-event-id", "12".parse().unwrap());
        assert_eq!(last_event_id(&headers).unwrap(), Some(12));
        headers.insert("last-event-id", "x".parse().unwrap());
        assert!(last_event_id(&headers).is_err());
    }
}
