//! The supervisor side against workers that misbehave: a custom `RunClient`, and a hand-rolled
//! HTTP server on 127.0.0.1 that answers malformed JSON, 500s and slow responses. Every
//! failure becomes an error result for the model; task records stay intact.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kit::http::{HttpClient, RetryPolicy};
use kit::middleware::async_subagents::AsyncSpec;
use kit::protocol::{Endpoint, HttpRunClient, RunClient, RunClientError, RunOutcome};
use kit_testing::Supervisor;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A worker that lives in memory: no HTTP at all.
#[derive(Clone, Default)]
struct MemoryClient {
    fail_next: Arc<AtomicUsize>,
    calls: Arc<Mutex<Vec<String>>>,
}

impl MemoryClient {
    fn log(&self, what: String) -> Result<(), RunClientError> {
        self.calls.lock().unwrap().push(what);
        if self.fail_next.load(Ordering::SeqCst) > 0 {
            self.fail_next.fetch_sub(1, Ordering::SeqCst);
            return Err(RunClientError::Other("the in-memory queue is full".into()));
        }
        Ok(())
    }
}

#[kit::async_trait]
impl RunClient for MemoryClient {
    async fn start(&self, spec: &Endpoint, payload: Value) -> Result<Value, RunClientError> {
        self.log(format!("start {} {payload}", spec.name))?;
        Ok(json!({"task_id": "mem-1", "status": "pending"}))
    }
    async fn check(&self, _spec: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.log(format!("check {task_id}"))?;
        Ok(json!({"status": "success", "values": {"messages": [
            {"role": "user", "content": "q"},
            {"role": "assistant", "content": [{"type": "text", "text": "from memory"}]},
            {"role": "assistant", "content": ""}
        ]}}))
    }
    async fn update(
        &self,
        _spec: &Endpoint,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError> {
        self.log(format!("update {task_id} {message}"))?;
        Ok(json!({"status": "running", "task_id": "something-else"}))
    }
    async fn cancel(&self, _spec: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.log(format!("cancel {task_id}"))?;
        Ok(json!({"status": "cancelled"}))
    }
}

#[tokio::test]
async fn a_custom_run_client_is_used_for_every_operation() {
    let client = MemoryClient::default();
    let sup = Supervisor::new(vec![
        AsyncSpec::new("mem", "In memory.", "g").client(client.clone()),
    ])
    .unwrap();
    let (r, state) = sup
        .call(
            "start_async_task",
            json!({"description": "d", "subagent_name": "mem"}),
        )
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(
        out["task_id"], "mem-1",
        "task_id is chosen before id and run_id"
    );
    assert_eq!(state.async_tasks["mem-1"].status, "pending");

    let (r, state) = sup
        .call("check_async_task", json!({"task_id": "mem-1"}))
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(out["status"], "success");
    // The last non-empty message, text parts joined.
    assert_eq!(out["result"], "from memory");
    assert_eq!(
        state.async_tasks["mem-1"].result.as_deref(),
        Some("from memory")
    );

    let (r, state) = sup
        .call(
            "update_async_task",
            json!({"task_id": "mem-1", "message": "more"}),
        )
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(out["task_id"], "mem-1", "the task id never changes");
    assert_eq!(state.async_tasks.len(), 1);
    assert_eq!(state.async_tasks["mem-1"].updates, ["more"]);

    // A failing client: an error result, the record untouched but for `last_error`.
    client.fail_next.store(1, Ordering::SeqCst);
    let (r, state) = sup
        .call(
            "update_async_task",
            json!({"task_id": "mem-1", "message": "lost"}),
        )
        .await
        .unwrap();
    assert!(r.is_error());
    assert!(
        r.text().contains("the in-memory queue is full"),
        "{}",
        r.text()
    );
    let record = &state.async_tasks["mem-1"];
    assert_eq!(record.updates, ["more"]);
    assert_eq!(
        record.last_error.as_deref(),
        Some("the in-memory queue is full")
    );

    let (r, state) = sup
        .call("cancel_async_task", json!({"task_id": "mem-1"}))
        .await
        .unwrap();
    assert!(!r.is_error());
    assert_eq!(state.async_tasks["mem-1"].status, "cancelled");
    let calls = client.calls.lock().unwrap().clone();
    assert!(calls[0].starts_with("start mem "));
    assert!(calls[0].contains(r#""assistant_id":"g""#), "{}", calls[0]);
    assert!(
        calls[0].contains(r#""messages":[{"content":"d","role":"user"}]"#),
        "{}",
        calls[0]
    );
    assert_eq!(calls.last().unwrap(), "cancel mem-1");
}

#[tokio::test]
async fn a_spec_without_url_or_client_only_records_the_task() {
    let sup = Supervisor::new(vec![AsyncSpec::new("local", "Nowhere.", "g")]).unwrap();
    let (r, state) = sup
        .call(
            "start_async_task",
            json!({"description": "d", "subagent_name": "local"}),
        )
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&r.text()).unwrap();
    let id = out["task_id"].as_str().unwrap().to_string();
    assert!(id.starts_with("async-"));
    assert_eq!(state.async_tasks[&id].status, "pending");
    let (r, state) = sup
        .call("check_async_task", json!({"task_id": id}))
        .await
        .unwrap();
    assert!(r.is_error());
    assert!(r.text().contains("no `url` or `client`"), "{}", r.text());
    assert_eq!(state.async_tasks[&id].status, "pending");
}

/// How the hand-rolled server answers.
const OK: u8 = 0;
const MALFORMED: u8 = 1;
const NOT_AN_OBJECT: u8 = 2;
const ERROR_500: u8 = 3;
const SLOW: u8 = 4;
const EMPTY_204: u8 = 5;
const HUGE: u8 = 6;
/// An answer nested 100 levels deep: JSON serde reads, but deeper than a thread can keep.
const DEEP: u8 = 7;

struct RawServer {
    url: String,
    mode: Arc<AtomicU8>,
    requests: Arc<Mutex<Vec<String>>>,
}

/// A minimal HTTP/1.1 server: reads one request per connection and answers per `mode`.
async fn raw_server() -> RawServer {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let mode = Arc::new(AtomicU8::new(OK));
    let requests = Arc::new(Mutex::new(Vec::new()));
    let (m, log) = (mode.clone(), requests.clone());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let (m, log) = (m.clone(), log.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                // Head, then as much body as Content-Length says.
                let head_end = loop {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        break i + 4;
                    }
                };
                let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
                let length = head
                    .lines()
                    .find_map(|l| {
                        let (k, v) = l.split_once(':')?;
                        k.eq_ignore_ascii_case("content-length")
                            .then(|| v.trim().parse::<usize>().ok())?
                    })
                    .unwrap_or(0);
                while buf.len() < head_end + length {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        break;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                log.lock()
                    .unwrap()
                    .push(String::from_utf8_lossy(&buf).to_string());
                let (status, body) = match m.load(Ordering::SeqCst) {
                    MALFORMED => ("200 OK", r#"{"status": "running", "#.to_string()),
                    NOT_AN_OBJECT => ("200 OK", "[1, 2, 3]".to_string()),
                    DEEP => (
                        "200 OK",
                        format!(
                            r#"{{"run_id": "r-1", "status": "running", "x": {}1{}}}"#,
                            "[".repeat(100),
                            "]".repeat(100)
                        ),
                    ),
                    ERROR_500 => ("500 Internal Server Error", "internal boom".to_string()),
                    SLOW => {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        ("200 OK", "{}".to_string())
                    }
                    EMPTY_204 => ("204 No Content", String::new()),
                    HUGE => (
                        "200 OK",
                        json!({"run_id": "r-1", "status": "running",
                               "values": {"messages": [{"role": "assistant", "content": "v".repeat(1 << 20)}]},
                               "interrupts": [{"id": "i1", "value": "approve?"}],
                               "debug": "d".repeat(1 << 20)})
                        .to_string(),
                    ),
                    _ => {
                        let first = head.lines().next().unwrap_or("");
                        if first.starts_with("POST /runs ") {
                            (
                                "200 OK",
                                json!({"run_id": "r-1", "status": "running"}).to_string(),
                            )
                        } else {
                            (
                                "200 OK",
                                json!({"run_id": "r-1", "status": "success",
                                       "values": {"messages": [{"role": "assistant", "content": "raw result"}]}})
                                .to_string(),
                            )
                        }
                    }
                };
                let response = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    RawServer {
        url,
        mode,
        requests,
    }
}

#[tokio::test]
async fn malformed_json_500s_and_slow_answers_become_error_results() {
    let server = raw_server().await;
    let spec = AsyncSpec::new("raw", "Hand-rolled.", "raw-graph")
        .url(format!("{}/", server.url))
        .client(HttpRunClient::with_http(
            HttpClient::new()
                .timeout(Duration::from_millis(300))
                .retry_policy(RetryPolicy {
                    max_retries: 2,
                    initial_backoff: Duration::from_millis(10),
                    ..RetryPolicy::default()
                }),
        ))
        .header("X-Api-Key", "key-1");
    // With a custom client and a url, the client gets the spec (and its url and headers).
    let sup = Supervisor::new(vec![spec]).unwrap();
    let (r, state) = sup
        .call(
            "start_async_task",
            json!({"description": "dig", "subagent_name": "raw"}),
        )
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    // No thread_id, task_id or id: the run id is the task id.
    assert!(state.async_tasks.contains_key("r-1"));
    {
        let requests = server.requests.lock().unwrap();
        let start = &requests[0];
        assert!(start.starts_with("POST /runs HTTP/1.1"), "{start}");
        assert!(
            start.to_ascii_lowercase().contains("x-api-key: key-1"),
            "{start}"
        );
        let body: Value = serde_json::from_str(start.split("\r\n\r\n").nth(1).unwrap()).unwrap();
        assert_eq!(
            body,
            json!({"assistant_id": "raw-graph", "input": {"messages": [{"role": "user", "content": "dig"}]}})
        );
    }

    let expectations = [
        (MALFORMED, "sent a malformed answer"),
        (NOT_AN_OBJECT, "expected a JSON object"),
        (DEEP, "nests more than 64 levels"),
        (ERROR_500, "answered HTTP 500: internal boom"),
        (SLOW, "did not answer within"),
    ];
    for (mode, expected) in expectations {
        server.mode.store(mode, Ordering::SeqCst);
        let before = server.requests.lock().unwrap().len();
        let (r, state) = sup
            .call("check_async_task", json!({"task_id": "r-1"}))
            .await
            .unwrap();
        assert!(r.is_error(), "mode {mode}");
        assert!(r.text().contains(expected), "mode {mode}: {}", r.text());
        let record = &state.async_tasks["r-1"];
        assert_eq!(record.status, "running", "mode {mode}: the record is kept");
        assert_eq!(record.description, "dig");
        assert!(record.last_error.as_deref().unwrap().contains(expected));
        // Every request carried the headers.
        let last = server.requests.lock().unwrap().last().unwrap().clone();
        assert!(last.starts_with("GET /runs/r-1 HTTP/1.1"), "{last}");
        assert!(last.to_ascii_lowercase().contains("x-api-key: key-1"));
        // Reading a run is safe to repeat: a 500 or a timeout is retried twice.
        let sent = server.requests.lock().unwrap().len() - before;
        let retried = matches!(mode, ERROR_500 | SLOW);
        assert_eq!(sent, if retried { 3 } else { 1 }, "mode {mode}");
    }

    // An update that fails is not recorded as sent, and is sent once (never duplicated).
    server.mode.store(ERROR_500, Ordering::SeqCst);
    let before = server.requests.lock().unwrap().len();
    let (r, state) = sup
        .call(
            "update_async_task",
            json!({"task_id": "r-1", "message": "again"}),
        )
        .await
        .unwrap();
    assert!(r.is_error());
    assert!(state.async_tasks["r-1"].updates.is_empty());
    assert_eq!(server.requests.lock().unwrap().len() - before, 1);

    // A listing that cannot refresh says so per task and keeps the records.
    let (r, _) = sup.call("list_async_tasks", json!({})).await.unwrap();
    assert!(r.text().contains("could not refresh"), "{}", r.text());

    // Back to normal: the result arrives.
    server.mode.store(OK, Ordering::SeqCst);
    let (r, state) = sup
        .call("check_async_task", json!({"task_id": "r-1"}))
        .await
        .unwrap();
    let out: Value = serde_json::from_str(&r.text()).unwrap();
    assert_eq!(out["status"], "success");
    assert_eq!(out["result"], "raw result");
    assert_eq!(state.async_tasks["r-1"].last_error, None);

    // A 204 without a body on cancel: the task is marked cancelled.
    server.mode.store(EMPTY_204, Ordering::SeqCst);
    let (r, state) = sup
        .call("cancel_async_task", json!({"task_id": "r-1"}))
        .await
        .unwrap();
    assert!(!r.is_error(), "{}", r.text());
    let last = server.requests.lock().unwrap().last().unwrap().clone();
    assert!(last.starts_with("POST /runs/r-1/cancel HTTP/1.1"), "{last}");
    // The remote answer had no status: the task is marked cancelled, as the tool promises.
    assert_eq!(state.async_tasks["r-1"].status, "cancelled");
}

#[tokio::test]
async fn an_unreachable_worker_is_a_transport_error() {
    // A port nothing listens on.
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap()
    };
    let sup = Supervisor::new(vec![
        AsyncSpec::new("gone", "Nobody home.", "g").url(format!("http://{addr}")),
    ])
    .unwrap();
    let (r, state) = sup
        .call(
            "start_async_task",
            json!({"description": "d", "subagent_name": "gone"}),
        )
        .await
        .unwrap();
    assert!(r.is_error());
    assert!(
        r.text().starts_with(
            "Error: failed to launch async subagent 'gone': could not reach the worker"
        ),
        "{}",
        r.text()
    );
    assert!(state.async_tasks.is_empty());
}

/// A worker whose thread stream sends `body` on every connection and closes it; counts the
/// connections.
async fn sse_worker(body: Vec<u8>) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let body = Arc::new(body);
    let connections = Arc::new(AtomicUsize::new(0));
    let counted = connections.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            counted.fetch_add(1, Ordering::SeqCst);
            let body = body.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    let n = socket.read(&mut chunk).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            connection: close\r\n\r\n";
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(&body).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, connections)
}

/// One thread-stream event of run `r` at the root.
fn sse_event(seq: u64, method: &str, data: Value) -> String {
    let frame = json!({"type": "event", "seq": seq, "method": method,
                       "params": {"runId": "r", "namespace": [], "data": data}});
    format!("id: {seq}\ndata: {frame}\n\n")
}

/// `wait_for_run` against a worker that misbehaves on its stream: an event it cannot read ends
/// the wait at once with that reason (before, it reopened the stream); a stream that replays
/// the same event and breaks is given up after five reopens, saying why (before, any event
/// reset the count: forever); the interrupts kept are bounded in bytes (1 KiB ones all kept,
/// 1 MiB ones up to 16 MiB).
#[tokio::test]
async fn wait_for_run_gives_up_on_a_worker_that_misbehaves_on_its_stream() {
    let client = HttpRunClient::new();
    let wait = |url: String| {
        let client = client.clone();
        async move {
            let endpoint = Endpoint::new("w", "g").url(url);
            tokio::time::timeout(
                Duration::from_secs(30),
                client.wait_for_run(&endpoint, "t", "r"),
            )
            .await
            .expect("wait_for_run must give up, not loop")
        }
    };

    let garbage = format!("{}data: not json\n\n", sse_event(1, "values", json!({})));
    let (url, connections) = sse_worker(garbage.into_bytes()).await;
    let err = wait(url).await.unwrap_err();
    assert!(err.to_string().contains("not JSON"), "{err}");
    assert_eq!(connections.load(Ordering::SeqCst), 1);

    let (url, connections) = sse_worker(sse_event(1, "values", json!({})).into_bytes()).await;
    let err = wait(url).await.unwrap_err();
    assert!(err.to_string().contains("broke 5 times in a row"), "{err}");
    assert!(err.to_string().contains("without the run's end"), "{err}");
    assert_eq!(connections.load(Ordering::SeqCst), 6);

    for (size, kept) in [(1 << 10, 20), (1 << 20, 15)] {
        let mut body = String::new();
        for seq in 1..=20 {
            body.push_str(&sse_event(
                seq,
                "input.requested",
                json!({"interruptId": seq, "payload": "x".repeat(size)}),
            ));
        }
        body.push_str(&sse_event(21, "lifecycle", json!({"event": "interrupted"})));
        let (url, _) = sse_worker(body.into_bytes()).await;
        let outcome = wait(url).await.unwrap();
        let RunOutcome::Waiting { interrupts, .. } = outcome else {
            panic!("expected a wait, got {outcome:?}");
        };
        assert_eq!(interrupts.len(), kept, "{size}");
        assert_eq!(interrupts[0]["interruptId"], 1);
    }
}

/// A worker that answers with a megabyte of values and debug text: a task record keeps at
/// most 64 KiB of it (the whole answer was saved with the thread on every refresh), with
/// the status, ids, error, stream link and interrupts the tools need.
#[tokio::test]
async fn worker_answers_cannot_bloat_task_records() {
    let server = raw_server().await;
    let spec = AsyncSpec::new("raw", "Hand-rolled.", "raw-graph").url(server.url.clone());
    let sup = Supervisor::new(vec![spec]).unwrap();
    let start = json!({"description": "dig", "subagent_name": "raw"});
    let (_, state) = sup.call("start_async_task", start.clone()).await.unwrap();
    server.mode.store(HUGE, Ordering::SeqCst);
    let before: Vec<String> = state.async_tasks.keys().cloned().collect();
    let (_, state) = sup.call("start_async_task", start).await.unwrap();
    assert_eq!(before, ["r-1"]);
    let new = &state.async_tasks["r-1"];
    let remote = serde_json::to_string(&new.remote).unwrap();
    assert!(remote.len() < 1_000, "{} bytes kept", remote.len());
    assert_eq!(new.remote.as_ref().unwrap()["truncated"], true);
    assert_eq!(new.remote.as_ref().unwrap()["run_id"], "r-1");
    assert_eq!(new.remote.as_ref().unwrap()["status"], "running");
    assert_eq!(
        new.remote.as_ref().unwrap()["interrupts"][0]["value"],
        "approve?"
    );
}
