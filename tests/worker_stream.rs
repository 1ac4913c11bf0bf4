//! Thread streams that survive a reconnect, over real HTTP on 127.0.0.1: the per-thread event
//! log in a SQLite file and in PostgreSQL (`KIT_TEST_POSTGRES_URL`; a stream served by one
//! worker follows a run executing on another, woken by `LISTEN`/`NOTIFY`), replay from
//! `Last-Event-ID`, retention and the `missed` notice, commands (`run.start`,
//! `input.respond`), and a supervisor that hears of a remote run's end and of its interrupt
//! without polling.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::protocol::{Endpoint, HttpRunClient, RunOutcome, StreamItem, StreamRequest, ThreadEvent};
use kit::server::store::PostgresRunStore;
use kit::server::{Identity, Worker, WorkerHandle};
use kit::{END, START, State};
use kit_testing::researcher::{self, Gate};
use kit_testing::worker::wait_for_status;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn start_body(topic: &str) -> Value {
    json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": topic}]}})
}

async fn post(url: String, body: Value) -> (u16, Value) {
    let r = reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

fn endpoint(url: &str) -> Endpoint {
    Endpoint::new("researcher", "research").url(url)
}

/// Reads events until `stop` says so; returns them.
async fn read_until(
    stream: &mut kit::protocol::ThreadStream,
    stop: impl Fn(&ThreadEvent) -> bool,
) -> Vec<ThreadEvent> {
    let mut seen = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let item = tokio::time::timeout_at(deadline, stream.next())
            .await
            .expect("the stream went silent for 30 s")
            .expect("the stream ended")
            .unwrap();
        let StreamItem::Event(event) = item else {
            panic!("unexpected item {item:?}");
        };
        let done = stop(&event);
        seen.push(event);
        if done {
            return seen;
        }
    }
}

fn completed(run_id: &str) -> impl Fn(&ThreadEvent) -> bool + '_ {
    move |e| e.run_id.as_deref() == Some(run_id) && e.root_lifecycle() == Some("completed")
}

/// The heart of the reconnect test, on any worker: disconnect mid-run, resume from the last
/// event id, and compare with a full replay.
async fn disconnect_and_resume(submit_url: &str, stream_url: &str, gate: Gate) {
    let client = HttpRunClient::new();
    let (status, run) = post(format!("{submit_url}/runs"), start_body("tides")).await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let thread = run["thread_id"].as_str().unwrap().to_string();

    // Read until the tool has started: the run is now held by the gate.
    let mut first = client
        .stream_thread(&endpoint(stream_url), &thread, &StreamRequest::all())
        .await
        .unwrap();
    let before = read_until(&mut first, |e| {
        e.method == "tools" && e.data["event"] == "tool-started"
    })
    .await;
    let cursor = first.last_event_id().unwrap();
    assert_eq!(cursor, before.last().unwrap().seq);
    drop(first); // the client disconnects mid-run

    // The run goes on while nobody listens.
    gate.release();
    wait_for_status(submit_url, &run_id, &["success"], Duration::from_secs(30))
        .await
        .unwrap();

    // Resume from the last event id: the rest, and only the rest.
    let mut resumed = client
        .stream_thread(
            &endpoint(stream_url),
            &thread,
            &StreamRequest::all().since(cursor),
        )
        .await
        .unwrap();
    let after = read_until(&mut resumed, completed(&run_id)).await;
    assert!(after.iter().all(|e| e.seq > cursor), "nothing twice");

    // A full replay is exactly the two halves, in order, numbered 1, 2, 3, ...
    let mut replay = client
        .stream_thread(&endpoint(stream_url), &thread, &StreamRequest::all())
        .await
        .unwrap();
    let all = read_until(&mut replay, completed(&run_id)).await;
    let joined: Vec<u64> = before.iter().chain(&after).map(|e| e.seq).collect();
    let full: Vec<u64> = all.iter().map(|e| e.seq).collect();
    assert_eq!(joined, full);
    assert_eq!(full, (1..=full.len() as u64).collect::<Vec<_>>());
    let unique: BTreeSet<u64> = joined.iter().copied().collect();
    assert_eq!(unique.len(), joined.len(), "every event exactly once");

    // What the log holds: the run's whole life in protocol terms.
    let methods: BTreeSet<&str> = all.iter().map(|e| e.method.as_str()).collect();
    for m in ["lifecycle", "updates", "messages", "tools", "values"] {
        assert!(methods.contains(m), "no `{m}` event in {methods:?}");
    }
    assert_eq!(all[0].root_lifecycle(), Some("running"));
    let finished = all
        .iter()
        .find(|e| e.data["event"] == "tool-finished")
        .unwrap();
    assert!(
        finished.seq > cursor,
        "the tool finished while disconnected"
    );
    let values = all.iter().rfind(|e| e.method == "values").unwrap();
    assert_eq!(values.data["messages"].as_array().unwrap().len(), 4);
}

#[tokio::test]
async fn a_stream_resumed_from_its_last_event_id_gets_every_event_exactly_once_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::closed();
    let w = Worker::builder()
        .agent("research", researcher::agent(gate.clone()))
        .sqlite(dir.path().join("stream.sqlite"))
        .unwrap()
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    disconnect_and_resume(&w.url(), &w.url(), gate).await;
    w.shutdown().await.unwrap();
}

fn postgres_url() -> Option<String> {
    match std::env::var("KIT_TEST_POSTGRES_URL") {
        Ok(url) => Some(url),
        Err(_) if std::env::var_os("CI").is_some() => panic!(
            "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL stream tests must run; \
             start a server with `source .ci/postgres.sh`"
        ),
        Err(_) => {
            eprintln!(
                "\n!!! SKIPPED: PostgreSQL stream tests need KIT_TEST_POSTGRES_URL (run `source \
                 .ci/postgres.sh` first) !!!\n"
            );
            None
        }
    }
}

#[tokio::test]
async fn a_stream_served_by_one_worker_follows_a_run_on_another_through_postgres() {
    let Some(url) = postgres_url() else { return };
    let schema = format!("kst_{}", kit::ids::random().replace('-', "_"));
    let gate = Gate::closed();
    let start = |poll: Duration| {
        let (url, schema, gate) = (url.clone(), schema.clone(), gate.clone());
        async move {
            Worker::builder()
                .agent("research", researcher::agent(gate))
                .store(
                    PostgresRunStore::connect_in_schema(&url, &schema)
                        .await
                        .unwrap(),
                )
                .poll_interval(poll)
                .build()
                .await
                .unwrap()
                .start("127.0.0.1:0")
                .await
                .unwrap()
        }
    };
    // The runner claims at once what it is given; the streamer would wait an hour to poll.
    let runner = start(Duration::from_millis(50)).await;
    let streamer = start(Duration::from_secs(3600)).await;
    disconnect_and_resume(&runner.url(), &streamer.url(), gate).await;
    runner.shutdown().await.unwrap();
    streamer.shutdown().await.unwrap();
    PostgresRunStore::connect_in_schema(&url, &schema)
        .await
        .unwrap()
        .drop_schema()
        .await
        .unwrap();
}

#[tokio::test]
async fn streams_are_refused_with_clear_errors_and_foreign_threads_are_not_found() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token_for("a", Identity::new("alice"))
        .bearer_token_for("b", Identity::new("bob"))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let run: Value = http
        .post(format!("{}/runs", w.url()))
        .bearer_auth("a")
        .json(&start_body("tides"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let thread = run["thread_id"].as_str().unwrap();
    let stream = |token: &'static str, thread: String, body: Value| {
        let http = http.clone();
        let url = w.url();
        async move {
            let r = http
                .post(format!("{url}/threads/{thread}/stream"))
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r)
        }
    };
    // Bob: Alice's thread reads exactly like a missing one.
    let (foreign, r1) = stream("b", thread.to_string(), json!({"channels": ["values"]})).await;
    let (missing, r2) = stream("b", "nope".into(), json!({"channels": ["values"]})).await;
    assert_eq!((foreign, missing), (404, 404));
    let (b1, b2): (Value, Value) = (r1.json().await.unwrap(), r2.json().await.unwrap());
    assert_eq!(
        b1.to_string().replace(thread, "<id>"),
        b2.to_string().replace("nope", "<id>")
    );
    // Bad requests.
    for body in [json!({"channels": ["nope"]}), json!({"since": "x"})] {
        let (status, r) = stream("a", thread.to_string(), body).await;
        let answer: Value = r.json().await.unwrap();
        assert_eq!(status, 400, "{answer}");
        assert!(!answer["message"].as_str().unwrap().is_empty());
    }
    let r = http
        .get(format!("{}/threads/{thread}/stream", w.url()))
        .bearer_auth("a")
        .header("Last-Event-ID", "not-a-number")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    // GET with a query works for EventSource: the first event is the run's start.
    let r = http
        .get(format!(
            "{}/threads/{thread}/stream?channels=lifecycle",
            w.url()
        ))
        .bearer_auth("a")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    assert!(
        r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream")
    );
    let mut body = r.bytes_stream();
    let first = body.next().await.unwrap().unwrap();
    let text = String::from_utf8_lossy(&first);
    assert!(text.contains("id: 1"), "{text}");
    assert!(text.contains("\"running\""), "{text}");
    drop(body);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_stream_resumed_after_retention_removed_events_is_told_what_it_missed() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .event_retention(Duration::from_millis(200))
        .lease(Duration::from_millis(150))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, run) = post(format!("{}/runs", w.url()), start_body("tides")).await;
    let thread = run["thread_id"].as_str().unwrap().to_string();
    let run_id = run["run_id"].as_str().unwrap().to_string();
    wait_for_status(&w.url(), &run_id, &["success"], Duration::from_secs(30))
        .await
        .unwrap();
    let logged = w.store().read_events(&thread, 0, 1000).await.unwrap();
    let last = logged.last().unwrap().seq;
    assert!(last > 3);
    // The heartbeat prunes them.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while !w
        .store()
        .read_events(&thread, 0, 1)
        .await
        .unwrap()
        .is_empty()
    {
        assert!(tokio::time::Instant::now() < deadline, "never pruned");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // A new run on the thread; a reader resuming from event 1 is told about 2..=last.
    let mut body = start_body("moon");
    body["thread_id"] = json!(thread);
    let (_, second) = post(format!("{}/runs", w.url()), body).await;
    let second_id = second["run_id"].as_str().unwrap().to_string();
    let client = HttpRunClient::new();
    let mut stream = client
        .stream_thread(&endpoint(&w.url()), &thread, &StreamRequest::all().since(1))
        .await
        .unwrap();
    let first = tokio::time::timeout(Duration::from_secs(30), stream.next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    assert_eq!(first, StreamItem::Missed { from: 2, to: last });
    let rest = read_until(&mut stream, completed(&second_id)).await;
    assert_eq!(rest[0].seq, last + 1, "numbering goes on after pruning");
    w.shutdown().await.unwrap();
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Form {
    #[state(reducer = kit::reducers::append)]
    messages: Vec<Value>,
    answer: String,
}

/// A graph that asks a human for a name, then greets.
fn form_graph() -> kit::Graph<Form> {
    GraphBuilder::<Form>::new("form")
        .node("ask", |_s: Arc<Form>, ctx: NodeContext| async move {
            let name = ctx.interrupt(json!({"question": "name?"}))?;
            let name = name.as_str().unwrap_or("stranger").to_string();
            Ok::<_, NodeError>(
                FormUpdate::new()
                    .answer(format!("hello {name}"))
                    .messages(vec![
                        json!({"role": "assistant", "content": format!("hello {name}")}),
                    ]),
            )
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile()
        .unwrap()
}

async fn form_worker() -> WorkerHandle {
    Worker::builder()
        .graph("form", form_graph())
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap()
}

#[tokio::test]
async fn commands_start_a_run_and_answer_its_interrupt_and_the_stream_shows_both() {
    let w = form_worker().await;
    let thread = format!("t-{}", kit::ids::random());
    let commands = format!("{}/threads/{thread}/commands", w.url());
    let (status, started) = post(
        commands.clone(),
        json!({"id": 1, "method": "run.start",
               "params": {"assistantId": "form", "input": {"messages": [{"role": "user", "content": "hi"}]}}}),
    )
    .await;
    assert_eq!(status, 200, "{started}");
    assert_eq!(started["type"], "success");
    assert_eq!(started["id"], 1);
    let run_id = started["result"]["runId"].as_str().unwrap().to_string();

    // The stream says what the run waits for.
    let client = HttpRunClient::new();
    let form = Endpoint::new("form", "form").url(w.url());
    let mut stream = client
        .stream_thread(
            &form,
            &thread,
            &StreamRequest::channels(["input", "lifecycle"]),
        )
        .await
        .unwrap();
    let seen = read_until(&mut stream, |e| e.root_lifecycle() == Some("interrupted")).await;
    let asked = seen.iter().find(|e| e.method == "input.requested").unwrap();
    assert_eq!(asked.data["payload"]["question"], "name?");
    assert_eq!(asked.run_id.as_deref(), Some(run_id.as_str()));
    let interrupt_id = asked.data["interruptId"].as_str().unwrap().to_string();

    // A wrong interrupt id, an unknown command, a missing method: protocol errors.
    let (status, wrong) = post(
        commands.clone(),
        json!({"id": 2, "method": "input.respond",
               "params": {"namespace": [], "interruptId": "nope", "response": "Ada"}}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(wrong["error"], "no_such_interrupt");
    assert_eq!(wrong["id"], 2);
    let (status, unknown) = post(commands.clone(), json!({"id": 3, "method": "run.fly"})).await;
    assert_eq!(
        (status, unknown["error"].as_str()),
        (400, Some("unknown_command"))
    );
    let (status, unsupported) =
        post(commands.clone(), json!({"id": 4, "method": "state.fork"})).await;
    assert_eq!(
        (status, unsupported["error"].as_str()),
        (501, Some("not_supported"))
    );

    // The answer resumes the thread; the same stream sees it finish.
    let (status, answered) = post(
        commands.clone(),
        json!({"id": 5, "method": "input.respond",
               "params": {"namespace": [], "interruptId": interrupt_id, "response": "Ada"}}),
    )
    .await;
    assert_eq!(status, 200, "{answered}");
    let resumed = answered["result"]["runId"].as_str().unwrap().to_string();

    read_until(&mut stream, completed(&resumed)).await;
    let done = wait_for_status(&w.url(), &resumed, &["success"], Duration::from_secs(30))
        .await
        .unwrap();
    assert_eq!(done["values"]["answer"], "hello Ada");
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn wait_for_run_reports_completion_and_a_remote_interrupt_with_one_streamed_request() {
    // A remote interrupt: the run waits for a human, with its pending interrupts.
    let w = form_worker().await;
    let (_, run) = post(
        format!("{}/runs", w.url()),
        json!({"assistant_id": "form", "input": {"messages": []}}),
    )
    .await;
    let client = HttpRunClient::new();
    let form = Endpoint::new("form", "form").url(w.url());
    let outcome = client
        .wait_for_run(
            &form,
            run["thread_id"].as_str().unwrap(),
            run["run_id"].as_str().unwrap(),
        )
        .await
        .unwrap();
    let RunOutcome::Waiting { interrupts, .. } = outcome else {
        panic!("expected a wait, got {outcome:?}");
    };
    assert_eq!(interrupts.len(), 1);
    assert_eq!(interrupts[0]["payload"]["question"], "name?");
    w.shutdown().await.unwrap();

    // Completion, with the final values.
    let gate = Gate::closed();
    let w = Worker::builder()
        .agent("research", researcher::agent(gate.clone()))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, run) = post(format!("{}/runs", w.url()), start_body("tides")).await;
    let waiting = {
        let client = client.clone();
        let e = endpoint(&w.url());
        let (thread, run_id) = (
            run["thread_id"].as_str().unwrap().to_string(),
            run["run_id"].as_str().unwrap().to_string(),
        );
        tokio::spawn(async move { client.wait_for_run(&e, &thread, &run_id).await })
    };
    gate.release();
    let outcome = waiting.await.unwrap().unwrap();
    let RunOutcome::Completed {
        values: Some(values),
    } = outcome
    else {
        panic!("expected completion with values, got {outcome:?}");
    };
    assert_eq!(values["messages"].as_array().unwrap().len(), 4);
    w.shutdown().await.unwrap();
}
