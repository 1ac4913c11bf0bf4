//! The worker server over real HTTP on 127.0.0.1: the run protocol, errors and security, the
//! queue (capacity, timeout, follow-ups), graphs and interrupts, the LangGraph threads API
//! that deepagents calls, and persistence and recovery with a SQLite file.

use std::sync::Arc;
use std::time::Duration;

use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::server::store::{NewRun, RunInput, RunStore, SqliteRunStore};
use kit::server::{FollowUp, Recovery, Worker, WorkerHandle};
use kit::{END, START, State};
use kit_testing::researcher::{self, Gate};
use kit_testing::worker::{spawn_worker, wait_for_status};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

fn http() -> reqwest::Client {
    reqwest::Client::new()
}

async fn post(url: String, body: Value) -> (u16, Value) {
    let r = http().post(url).json(&body).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn get(url: String) -> (u16, Value) {
    let r = http().get(url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

async fn worker(gate: Gate) -> WorkerHandle {
    spawn_worker(Worker::builder().agent("research", researcher::agent(gate)))
        .await
        .unwrap()
}

fn start_body(topic: &str) -> Value {
    json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": topic}]}})
}

async fn wait_status(w: &WorkerHandle, id: &str, statuses: &[&str]) -> Value {
    wait_for_status(&w.url(), id, statuses, Duration::from_secs(30))
        .await
        .unwrap()
}

#[tokio::test]
async fn a_run_goes_pending_running_success_with_values_and_result() {
    let gate = Gate::closed();
    let w = worker(gate.clone()).await;
    let (status, run) = post(format!("{}/runs", w.url()), start_body("tides")).await;
    assert_eq!(status, 200);
    assert_eq!(run["status"], "pending");
    assert_eq!(run["assistant_id"], "research");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let thread_id = run["thread_id"].as_str().unwrap().to_string();
    assert_ne!(run_id, thread_id);
    wait_status(&w, &run_id, &["running"]).await;
    gate.release();
    let done = wait_status(&w, &run_id, &["success"]).await;
    assert_eq!(
        done["result"],
        "Report on tides: 3 sources agree about tides"
    );
    assert_eq!(done["values"]["messages"].as_array().unwrap().len(), 4);
    assert_eq!(done["attempts"], 1);
    // A thread id reads as its latest run.
    let (_, by_thread) = get(format!("{}/runs/{thread_id}", w.url())).await;
    assert_eq!(by_thread["run_id"], run_id.as_str());
    let (status, ok) = get(format!("{}/ok", w.url())).await;
    assert_eq!((status, ok), (200, json!({"ok": true})));
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn bad_requests_get_clear_json_errors() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .body_limit(2048)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let url = w.url();

    // Malformed JSON.
    let r = http()
        .post(format!("{url}/runs"))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "bad_request");
    assert!(body["message"].as_str().unwrap().contains("not valid JSON"));

    // Not an object.
    let (status, body) = post(format!("{url}/runs"), json!([1, 2])).await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("must be a JSON object")
    );

    // Nested deeper than a thread can keep (serde_json reads it: 100 < 128 levels), in a
    // message's metadata. Not kept: refused, and the thread stays readable.
    let deep = format!(
        r#"{{"assistant_id": "research", "input": {{"messages": [{{"role": "user", "content": "hi", "metadata": {{"x": {}1{}}}}}]}}}}"#,
        "[".repeat(95),
        "]".repeat(95)
    );
    let r = http()
        .post(format!("{url}/runs"))
        .header("content-type", "application/json")
        .body(deep)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let body: Value = r.json().await.unwrap();
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("nests more than 64 levels"),
        "{body}"
    );
    // Negative case: ordinary nesting is accepted.
    let (status, _) = post(
        format!("{url}/runs"),
        json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": "tides", "metadata": {"a": {"b": {"c": [1, [2, [3]]]}}}}]}}),
    )
    .await;
    assert_eq!(status, 200);

    // Missing assistant_id.
    let (status, body) = post(format!("{url}/runs"), json!({"input": {}})).await;
    assert_eq!(status, 400);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("`assistant_id` is missing")
    );

    // Unknown assistant.
    let (status, body) = post(
        format!("{url}/runs"),
        json!({"assistant_id": "nope", "input": {"messages": []}}),
    )
    .await;
    assert_eq!(status, 404);
    assert_eq!(body["error"], "unknown_assistant");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("it hosts: research")
    );

    // Input the agent does not accept.
    let (status, body) = post(
        format!("{url}/runs"),
        json!({"assistant_id": "research", "input": {"text": "hi"}}),
    )
    .await;
    assert_eq!(status, 422);
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("`messages` list"),
        "{body}"
    );

    // Too large.
    let big = "x".repeat(4096);
    let (status, body) = post(format!("{url}/runs"), start_body(&big)).await;
    assert_eq!(status, 413);
    assert_eq!(body["error"], "payload_too_large");
    assert!(body["message"].as_str().unwrap().contains("2048 bytes"));

    // Unknown ids and routes.
    for path in [
        "/runs/nope",
        "/threads/nope",
        "/threads/nope/runs/nope",
        "/nothing",
    ] {
        let (status, body) = get(format!("{url}{path}")).await;
        assert_eq!(status, 404, "{path}");
        assert_eq!(body["error"], "not_found", "{path}");
    }
    let (status, _) = post(format!("{url}/runs/nope/cancel"), json!({})).await;
    assert_eq!(status, 404);
    let (status, _) = post(format!("{url}/runs/nope/input"), json!({"message": "x"})).await;
    assert_eq!(status, 404);
    let r = http().delete(format!("{url}/runs")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 405);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn bearer_auth_guards_every_route_but_ok() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token("tok-1")
        .bearer_token("tok-2")
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let url = w.url();
    let r = http().get(format!("{url}/runs/x")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.headers().contains_key("www-authenticate"));
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], "unauthorized");
    assert!(
        body["message"]
            .as_str()
            .unwrap()
            .contains("Authorization: Bearer")
    );

    let r = http()
        .post(format!("{url}/runs"))
        .bearer_auth("tok-3")
        .json(&start_body("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let body: Value = r.json().await.unwrap();
    assert!(body["message"].as_str().unwrap().contains("not accepted"));
    assert!(!body.to_string().contains("tok-1"));

    for token in ["tok-1", "tok-2"] {
        let r = http()
            .post(format!("{url}/runs"))
            .bearer_auth(token)
            .json(&start_body("x"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
    }
    // The threads API is guarded too; /ok is not.
    let r = http().post(format!("{url}/threads")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let (status, _) = get(format!("{url}/ok")).await;
    assert_eq!(status, 200);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn capacity_keeps_excess_runs_pending_and_every_run_finishes() {
    let gate = Gate::closed();
    let w = Worker::builder()
        .agent("research", researcher::agent(gate.clone()))
        .capacity(2)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let mut ids = Vec::new();
    for i in 0..5 {
        let (_, run) = post(format!("{}/runs", w.url()), start_body(&format!("t{i}"))).await;
        ids.push(run["run_id"].as_str().unwrap().to_string());
    }
    wait_status(&w, &ids[0], &["running"]).await;
    wait_status(&w, &ids[1], &["running"]).await;
    for id in &ids[2..] {
        let (_, run) = get(format!("{}/runs/{id}", w.url())).await;
        assert_eq!(
            run["status"], "pending",
            "capacity 2 keeps the third run on"
        );
    }
    gate.release();
    for id in &ids {
        wait_status(&w, id, &["success"]).await;
    }
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_run_over_the_timeout_ends_as_timeout() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::closed()))
        .run_timeout(Duration::from_millis(200))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, run) = post(format!("{}/runs", w.url()), start_body("forever")).await;
    let id = run["run_id"].as_str().unwrap();
    let done = wait_status(&w, id, &["timeout"]).await;
    assert!(
        done["error"].as_str().unwrap().contains("run timeout"),
        "{done}"
    );
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn follow_ups_queue_by_default_or_interrupt_when_asked() {
    let gate = Gate::closed();
    let w = worker(gate.clone()).await;
    let (_, first) = post(format!("{}/runs", w.url()), start_body("one")).await;
    let thread = first["thread_id"].as_str().unwrap().to_string();
    let first_id = first["run_id"].as_str().unwrap().to_string();
    wait_status(&w, &first_id, &["running"]).await;

    // Enqueue (the default): a new run on the same thread, waiting.
    let (status, second) = post(
        format!("{}/runs/{thread}/input", w.url()),
        json!({"message": "two"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(second["thread_id"], thread.as_str());
    assert_eq!(second["status"], "pending");
    assert_eq!(second["multitask_strategy"], "enqueue");
    let second_id = second["run_id"].as_str().unwrap().to_string();

    // Interrupt: the running and the queued run are cancelled, the new one runs.
    let (_, third) = post(
        format!("{}/runs/{thread}/input", w.url()),
        json!({"message": "three", "multitask_strategy": "interrupt"}),
    )
    .await;
    let third_id = third["run_id"].as_str().unwrap().to_string();
    assert_eq!(
        get(format!("{}/runs/{first_id}", w.url())).await.1["status"],
        "cancelled"
    );
    assert_eq!(
        get(format!("{}/runs/{second_id}", w.url())).await.1["status"],
        "cancelled"
    );
    // The queued run never ran, and its stream still ends: a client following it sees
    // `failed` with `cancelled`, as for the run that was stopped while running.
    let events = w.store().read_events(&thread, 0, 1000).await.unwrap();
    let end_of = |run: &str| -> Vec<Value> {
        events
            .iter()
            .filter(|e| e.run_id == run && e.method == "lifecycle")
            .map(|e| e.data.clone())
            .collect()
    };
    let second_end = end_of(&second_id);
    assert_eq!(second_end.len(), 1, "{second_end:?}");
    assert_eq!(second_end[0]["event"], "failed");
    assert_eq!(second_end[0]["cancelled"], true);
    gate.release();
    let done = wait_status(&w, &third_id, &["success"]).await;
    assert_eq!(
        done["result"],
        "Report on three: 3 sources agree about three"
    );

    // Reject on a busy thread is a 409.
    let gate2 = Gate::closed();
    let w2 = worker(gate2.clone()).await;
    let (_, run) = post(format!("{}/runs", w2.url()), start_body("a")).await;
    let t = run["thread_id"].as_str().unwrap();
    let (status, body) = post(
        format!("{}/runs/{t}/input", w2.url()),
        json!({"message": "b", "multitask_strategy": "reject"}),
    )
    .await;
    assert_eq!(status, 409);
    assert_eq!(body["error"], "thread_busy");
    gate2.release();
    w.shutdown().await.unwrap();
    w2.shutdown().await.unwrap();
}

#[tokio::test]
async fn follow_up_strategy_interrupt_as_the_worker_default() {
    let gate = Gate::closed();
    let w = Worker::builder()
        .agent("research", researcher::agent(gate.clone()))
        .follow_up(FollowUp::Interrupt)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, first) = post(format!("{}/runs", w.url()), start_body("one")).await;
    let first_id = first["run_id"].as_str().unwrap().to_string();
    wait_status(&w, &first_id, &["running"]).await;
    let (_, second) = post(
        format!("{}/runs/{first_id}/input", w.url()),
        json!({"message": "two"}),
    )
    .await;
    assert_eq!(second["multitask_strategy"], "interrupt");
    assert_eq!(
        get(format!("{}/runs/{first_id}", w.url())).await.1["status"],
        "cancelled"
    );
    gate.release();
    wait_status(&w, second["run_id"].as_str().unwrap(), &["success"]).await;
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

#[tokio::test]
async fn graphs_are_hosted_and_interrupts_resume_with_a_command() {
    let w = Worker::builder()
        .graph("form", form_graph())
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    // Input is the state update as JSON; a wrong field is a 422.
    let (status, body) = post(
        format!("{}/runs", w.url()),
        json!({"assistant_id": "form", "input": {"answer": 3}}),
    )
    .await;
    assert_eq!(status, 422, "{body}");
    let (_, run) = post(
        format!("{}/runs", w.url()),
        json!({"assistant_id": "form", "input": {"messages": [{"role": "user", "content": "hi"}]}}),
    )
    .await;
    let id = run["run_id"].as_str().unwrap().to_string();
    let thread = run["thread_id"].as_str().unwrap().to_string();
    let paused = wait_status(&w, &id, &["interrupted"]).await;
    assert_eq!(paused["interrupts"][0]["value"]["question"], "name?");

    // The LangGraph view: the run succeeded, the thread waits for a human.
    let (_, t) = get(format!("{}/threads/{thread}", w.url())).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(
        t["interrupts"][id.as_str()][0]["value"]["question"],
        "name?"
    );
    let (_, lg_run) = get(format!("{}/threads/{thread}/runs/{id}", w.url())).await;
    assert_eq!(lg_run["status"], "success");

    let (_, resumed) = post(
        format!("{}/runs", w.url()),
        json!({"assistant_id": "form", "thread_id": thread, "command": {"resume": "Ada"}}),
    )
    .await;
    let done = wait_status(&w, resumed["run_id"].as_str().unwrap(), &["success"]).await;
    assert_eq!(done["values"]["answer"], "hello Ada");
    // No `result` for graphs; the supervisor reads the last message instead.
    assert!(done.get("result").is_none());
    assert_eq!(
        kit::middleware::async_subagents::remote::result(&done).as_deref(),
        Some("hello Ada")
    );
    w.shutdown().await.unwrap();
}

/// The calls Python deepagents makes through the LangGraph SDK (research §1.4, §10.3).
#[tokio::test]
async fn the_langgraph_threads_api_as_deepagents_calls_it() {
    let gate = Gate::closed();
    let w = worker(gate.clone()).await;
    let url = w.url();
    // start_async_task: POST /threads, then POST /threads/{tid}/runs.
    let (status, thread) = post(
        format!("{url}/threads"),
        json!({"metadata": {"subagent_name": "researcher", "parent_thread_id": "p1"}}),
    )
    .await;
    assert_eq!(status, 200);
    let tid = thread["thread_id"].as_str().unwrap().to_string();
    assert_eq!(thread["status"], "idle");
    assert_eq!(thread["metadata"]["subagent_name"], "researcher");
    let (status, run) = post(
        format!("{url}/threads/{tid}/runs"),
        json!({
            "assistant_id": "research",
            "input": {"messages": [{"role": "user", "content": "volcanoes"}]},
            "config": {"configurable": {"deepagents_parent": {"thread_id": "p1"}}},
        }),
    )
    .await;
    assert_eq!(status, 200, "{run}");
    let rid = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["thread_id"], tid.as_str());
    assert_eq!(run["assistant_id"], "research");

    // check_async_task: GET /threads/{tid}/runs/{rid}, then GET /threads/{tid} on success.
    wait_status(&w, &rid, &["running"]).await;
    let (_, r) = get(format!("{url}/threads/{tid}/runs/{rid}")).await;
    assert_eq!(r["status"], "running");
    let (_, t) = get(format!("{url}/threads/{tid}")).await;
    assert_eq!(t["status"], "busy");
    gate.release();
    wait_status(&w, &rid, &["success"]).await;
    let (_, r) = get(format!("{url}/threads/{tid}/runs/{rid}")).await;
    assert_eq!(r["status"], "success");
    let (_, t) = get(format!("{url}/threads/{tid}")).await;
    assert_eq!(t["status"], "idle");
    let messages = t["values"]["messages"].as_array().unwrap();
    assert_eq!(
        messages.last().unwrap()["content"],
        "Report on volcanoes: 3 sources agree about volcanoes"
    );

    // update_async_task: a new run on the same thread with a multitask strategy.
    let (_, r2) = post(
        format!("{url}/threads/{tid}/runs"),
        json!({
            "assistant_id": "research",
            "input": {"messages": [{"role": "user", "content": "lava"}]},
            "multitask_strategy": "interrupt",
        }),
    )
    .await;
    let rid2 = r2["run_id"].as_str().unwrap().to_string();
    assert_eq!(r2["multitask_strategy"], "interrupt");
    wait_status(&w, &rid2, &["success"]).await;
    let (_, runs) = get(format!("{url}/threads/{tid}/runs?limit=1")).await;
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["run_id"], rid2.as_str());
    let (status, _) = get(format!("{url}/threads/{tid}/runs?limit=x")).await;
    assert_eq!(status, 400);

    // cancel_async_task: POST /threads/{tid}/runs/{rid}/cancel; LangGraph calls a cancelled
    // run `interrupted`.
    let gate2 = Gate::closed();
    let w2 = worker(gate2.clone()).await;
    let (_, t2) = post(format!("{}/threads", w2.url()), json!({})).await;
    let tid2 = t2["thread_id"].as_str().unwrap();
    let (_, r3) = post(
        format!("{}/threads/{tid2}/runs", w2.url()),
        json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": "x"}]}}),
    )
    .await;
    let rid3 = r3["run_id"].as_str().unwrap();
    wait_status(&w2, rid3, &["running"]).await;
    let (status, c) = post(
        format!(
            "{}/threads/{tid2}/runs/{rid3}/cancel?wait=1&action=interrupt",
            w2.url()
        ),
        Value::Null,
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(c["status"], "interrupted");
    assert_eq!(
        get(format!("{}/runs/{rid3}", w2.url())).await.1["status"],
        "cancelled"
    );

    // A run on a thread that does not exist is a 404 unless asked to create it.
    let (status, _) = post(
        format!("{url}/threads/missing/runs"),
        json!({"assistant_id": "research", "input": {"messages": []}}),
    )
    .await;
    assert_eq!(status, 404);
    let (status, _) = post(
        format!("{url}/threads/made-here/runs"),
        json!({"assistant_id": "research", "if_not_exists": "create",
               "input": {"messages": [{"role": "user", "content": "y"}]}}),
    )
    .await;
    assert_eq!(status, 200);
    // Creating an existing thread: 409, or the thread with do_nothing.
    let (status, _) = post(format!("{url}/threads"), json!({"thread_id": tid})).await;
    assert_eq!(status, 409);
    let (status, same) = post(
        format!("{url}/threads"),
        json!({"thread_id": tid, "if_exists": "do_nothing"}),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(same["thread_id"], tid.as_str());
    gate2.release();
    w.shutdown().await.unwrap();
    w2.shutdown().await.unwrap();
}

#[tokio::test]
async fn runs_and_threads_survive_a_restart_on_a_sqlite_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("worker.sqlite");
    let checkpoints = dir.path().join("checkpoints.sqlite");
    let start = |gate: Gate| {
        let db = db.clone();
        let checkpoints = checkpoints.clone();
        async move {
            Worker::builder()
                .agent("research", researcher::agent(gate))
                .sqlite(&db)
                .unwrap()
                .checkpointer(Arc::new(
                    kit::checkpoint::SqliteCheckpointer::open(&checkpoints).unwrap(),
                ))
                .build()
                .await
                .unwrap()
                .start("127.0.0.1:0")
                .await
                .unwrap()
        }
    };
    let w = start(Gate::open()).await;
    let (_, run) = post(format!("{}/runs", w.url()), start_body("kept")).await;
    let id = run["run_id"].as_str().unwrap().to_string();
    wait_status(&w, &id, &["success"]).await;
    // A clean shutdown puts a running run back in the queue.
    let gate = Gate::closed();
    w.shutdown().await.unwrap();
    let w = start(gate.clone()).await;
    let (_, run2) = post(
        format!("{}/runs", w.url()),
        start_body("interrupted by shutdown"),
    )
    .await;
    let id2 = run2["run_id"].as_str().unwrap().to_string();
    wait_status(&w, &id2, &["running"]).await;
    w.shutdown().await.unwrap();

    let w = start(Gate::open()).await;
    let (_, old) = get(format!("{}/runs/{id}", w.url())).await;
    assert_eq!(old["status"], "success");
    assert_eq!(old["result"], "Report on kept: 3 sources agree about kept");
    let done = wait_status(&w, &id2, &["success"]).await;
    assert_eq!(
        done["attempts"], 1,
        "a released run is not counted as a failed attempt"
    );
    w.shutdown().await.unwrap();
}

/// Leaves a run `running` under a worker id that no longer exists, as a crash would.
async fn orphan_run(db: &std::path::Path, attempts: u32) -> String {
    let store = SqliteRunStore::open(db).unwrap();
    let run = store
        .create_run(NewRun {
            run_id: kit::ids::random(),
            thread_id: kit::ids::random(),
            graph_id: "research".into(),
            input: RunInput::Input(json!({"messages": [{"role": "user", "content": "orphan"}]})),
            metadata: json!({}),
            multitask_strategy: None,
            owner: String::new(),
        })
        .await
        .unwrap();
    for i in 0..attempts {
        let claimed = store
            .claim("dead-worker", &["research".to_string()], 1, u64::MAX)
            .await
            .unwrap();
        assert_eq!(claimed.len(), 1);
        if i + 1 < attempts {
            store
                .recover(
                    "someone",
                    true,
                    0,
                    kit::server::store::RecoverAction::Requeue,
                    99,
                )
                .await
                .unwrap();
        }
    }
    run.run_id
}

#[tokio::test]
async fn a_restarted_worker_resumes_or_fails_runs_left_running() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("w.sqlite");
    let id = orphan_run(&db, 1).await;
    // Default: resume. The lease (u64::MAX) would never expire, but a SQLite store belongs to
    // one process, so everything `running` at start was left by a dead one.
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .sqlite(&db)
        .unwrap()
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let done = wait_status(&w, &id, &["success"]).await;
    assert_eq!(done["attempts"], 2);
    assert_eq!(
        done["result"],
        "Report on orphan: 3 sources agree about orphan"
    );
    w.shutdown().await.unwrap();

    // Recovery::Fail: an explicit error.
    let id = orphan_run(&db, 1).await;
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .sqlite(&db)
        .unwrap()
        .recovery(Recovery::Fail)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, run) = get(format!("{}/runs/{id}", w.url())).await;
    assert_eq!(run["status"], "error");
    assert!(
        run["error"]
            .as_str()
            .unwrap()
            .contains("stopped (crashed or was killed)"),
        "{run}"
    );
    w.shutdown().await.unwrap();

    // Resume, but the run already used its attempts: an explicit error too.
    let id = orphan_run(&db, 3).await;
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .sqlite(&db)
        .unwrap()
        .max_attempts(3)
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let (_, run) = get(format!("{}/runs/{id}", w.url())).await;
    assert_eq!(run["status"], "error", "{run}");
    assert!(
        run["error"].as_str().unwrap().contains("3 time(s)"),
        "{run}"
    );
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn configuration_mistakes_are_refused_with_a_reason() {
    let err = Worker::builder().build().await.unwrap_err();
    assert!(err.to_string().contains("hosts nothing"));
    let err = Worker::builder()
        .agent("a", researcher::agent(Gate::open()))
        .agent("a", researcher::agent(Gate::open()))
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("hosted twice"));
    let err = Worker::builder()
        .agent("a", researcher::agent(Gate::open()))
        .capacity(0)
        .build()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("capacity"));
    let taken = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let err = Worker::builder()
        .agent("a", researcher::agent(Gate::open()))
        .build()
        .await
        .unwrap()
        .start(addr.as_str())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("could not listen on"), "{err}");
}
