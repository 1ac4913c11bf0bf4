//! Async subagents end to end: a supervisor agent (scripted model) uses the five async-task
//! tools against a real kit worker on 127.0.0.1, over HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use kit::graph::{GraphBuilder, NodeContext, NodeError};
use kit::middleware::async_subagents::{AsyncSpec, AsyncSubagentMiddleware, TaskNotice};
use kit::protocol::RunOutcome;
use kit::protocol::{Endpoint, HttpRunClient, RunClient, RunClientError};
use kit::server::{Worker, WorkerHandle};
use kit::testing::ScriptedModel;
use kit::{Agent, Message, RunOptions, ToolCall};
use kit::{END, START, State};
use kit_testing::Supervisor;
use kit_testing::researcher::{self, Gate};
use kit_testing::worker::spawn_worker;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

async fn start_worker(gate: Gate) -> WorkerHandle {
    spawn_worker(Worker::builder().agent("research", researcher::agent(gate)))
        .await
        .unwrap()
}

fn spec(worker: &WorkerHandle) -> AsyncSpec {
    AsyncSpec::new("researcher", "Researches a topic in depth.", "research").url(worker.url())
}

/// Reads a run straight from the worker (not through the supervisor).
async fn worker_run(worker: &WorkerHandle, id: &str) -> Value {
    reqwest::get(format!("{}/runs/{id}", worker.url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits until the worker reports one of `statuses` for `id` (bounded: fails after 30 s).
async fn wait_for(worker: &WorkerHandle, id: &str, statuses: &[&str]) -> Value {
    for _ in 0..3000 {
        let run = worker_run(worker, id).await;
        if statuses.contains(&run["status"].as_str().unwrap_or("")) {
            return run;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never reached {statuses:?}");
}

#[tokio::test]
async fn start_check_running_then_success_with_the_result() {
    let gate = Gate::closed();
    let worker = start_worker(gate.clone()).await;
    let sup = Supervisor::new(vec![spec(&worker)]).unwrap();

    let (started, state) = sup
        .call_json(
            "start_async_task",
            json!({"description": "the history of Rust", "subagent_name": "researcher"}),
        )
        .await
        .unwrap();
    // The worker's honest status: queued or already executing.
    assert!(
        ["pending", "running"].contains(&started["status"].as_str().unwrap()),
        "{started}"
    );
    let task_id = started["task_id"].as_str().unwrap().to_string();
    let record = &state.async_tasks[&task_id];
    // The task id is the worker's thread id; the run id is recorded too.
    assert_eq!(record.thread_id.as_deref(), Some(task_id.as_str()));
    assert!(record.run_id.is_some());
    assert_eq!(record.subagent_name, "researcher");
    assert_eq!(record.graph_id, "research");
    assert_eq!(record.description, "the history of Rust");

    wait_for(&worker, &task_id, &["running"]).await;
    let (checked, _) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "running");
    assert!(checked.get("result").is_none(), "{checked}");

    gate.release();
    wait_for(&worker, &task_id, &["success"]).await;
    let (checked, state) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "success");
    assert_eq!(
        checked["result"],
        "Report on the history of Rust: 3 sources agree about the history of Rust"
    );
    let record = &state.async_tasks[&task_id];
    assert_eq!(record.status, "success");
    assert!(record.last_checked_at.is_some());
    // The raw remote response carries the agent's messages.
    let remote = record.remote.as_ref().unwrap();
    assert!(remote["values"]["messages"].as_array().unwrap().len() >= 4);
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn update_keeps_the_task_id_appends_to_updates_and_queues_behind_the_running_run() {
    let gate = Gate::closed();
    let worker = start_worker(gate.clone()).await;
    let sup = Supervisor::new(vec![spec(&worker)]).unwrap();
    let (started, _) = sup
        .call_json(
            "start_async_task",
            json!({"description": "Rust", "subagent_type": "researcher"}),
        )
        .await
        .unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    wait_for(&worker, &task_id, &["running"]).await;
    let first_run = worker_run(&worker, &task_id).await["run_id"].clone();

    let (updated, state) = sup
        .call_json(
            "update_async_task",
            json!({"task_id": task_id, "message": "focus on the 2015 release"}),
        )
        .await
        .unwrap();
    assert_eq!(updated["task_id"], task_id.as_str());
    // Queued behind the running run (the worker's default follow-up strategy).
    assert_eq!(updated["status"], "pending");
    let record = &state.async_tasks[&task_id];
    assert_eq!(record.updates, ["focus on the 2015 release"]);
    assert_eq!(state.async_tasks.len(), 1, "no new task for a follow-up");
    assert_ne!(
        record.run_id.as_ref(),
        first_run.as_str().map(String::from).as_ref()
    );

    gate.release();
    wait_for(&worker, &task_id, &["success"]).await;
    let (checked, _) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "success");
    assert_eq!(
        checked["result"],
        "Report on focus on the 2015 release: 3 sources agree about focus on the 2015 release"
    );
    // The first run was not cancelled: it finished before the follow-up ran.
    let first = worker_run(&worker, first_run.as_str().unwrap()).await;
    assert_eq!(first["status"], "success");
    // Both runs are on one thread, which kept the whole conversation.
    let messages = checked_messages(&worker, &task_id).await;
    let users: Vec<&str> = messages
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(users, ["Rust", "focus on the 2015 release"]);

    // A second update after the result: still the same task.
    let (updated, state) = sup
        .call_json(
            "update_async_task",
            json!({"task_id": task_id, "message": "and 2018"}),
        )
        .await
        .unwrap();
    assert_eq!(updated["task_id"], task_id.as_str());
    assert_eq!(
        state.async_tasks[&task_id].updates,
        ["focus on the 2015 release", "and 2018"]
    );
    worker.shutdown().await.unwrap();
}

async fn checked_messages(worker: &WorkerHandle, id: &str) -> Vec<Value> {
    worker_run(worker, id).await["values"]["messages"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn cancel_stops_a_running_task() {
    let gate = Gate::closed();
    let worker = start_worker(gate.clone()).await;
    let sup = Supervisor::new(vec![spec(&worker)]).unwrap();
    let (started, _) = sup
        .call_json(
            "start_async_task",
            json!({"description": "slow work", "subagent_name": "researcher"}),
        )
        .await
        .unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    wait_for(&worker, &task_id, &["running"]).await;

    let (cancelled, state) = sup
        .call_json("cancel_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(cancelled["status"], "cancelled");
    assert_eq!(state.async_tasks[&task_id].status, "cancelled");
    // The worker stopped the run for real.
    assert_eq!(worker_run(&worker, &task_id).await["status"], "cancelled");
    // Releasing the gate now changes nothing: the run is gone.
    gate.release();
    let (checked, _) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "cancelled");
    worker.shutdown().await.unwrap();
}

/// Counts the checks that reach the worker.
#[derive(Clone)]
struct CountingClient {
    http: HttpRunClient,
    checks: Arc<AtomicUsize>,
}

#[kit::async_trait]
impl RunClient for CountingClient {
    async fn start(&self, spec: &Endpoint, payload: Value) -> Result<Value, RunClientError> {
        self.http.start(spec, payload).await
    }
    async fn check(&self, spec: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.checks.fetch_add(1, Ordering::SeqCst);
        self.http.check(spec, task_id).await
    }
    async fn update(
        &self,
        spec: &Endpoint,
        task_id: &str,
        message: &str,
    ) -> Result<Value, RunClientError> {
        self.http.update(spec, task_id, message).await
    }
    async fn cancel(&self, spec: &Endpoint, task_id: &str) -> Result<Value, RunClientError> {
        self.http.cancel(spec, task_id).await
    }
}

#[tokio::test]
async fn list_refreshes_only_unfinished_tasks() {
    let gate = Gate::closed();
    let worker = start_worker(gate.clone()).await;
    let checks = Arc::new(AtomicUsize::new(0));
    let client = CountingClient {
        http: HttpRunClient::new(),
        checks: checks.clone(),
    };
    let sup = Supervisor::new(vec![spec(&worker).client(client)]).unwrap();
    let (results, _) = sup
        .turn(&[
            (
                "start_async_task",
                json!({"description": "a", "subagent_name": "researcher"}),
            ),
            (
                "start_async_task",
                json!({"description": "b", "subagent_name": "researcher"}),
            ),
        ])
        .await
        .unwrap();
    let ids: Vec<String> = results
        .iter()
        .map(|m| {
            let v: Value = serde_json::from_str(&m.text()).unwrap();
            v["task_id"].as_str().unwrap().to_string()
        })
        .collect();
    for id in &ids {
        wait_for(&worker, id, &["running"]).await;
    }
    sup.call_json("cancel_async_task", json!({"task_id": ids[0]}))
        .await
        .unwrap();

    let before = checks.load(Ordering::SeqCst);
    let (results, state) = sup.turn(&[("list_async_tasks", json!({}))]).await.unwrap();
    let text = results[0].text();
    assert!(text.starts_with("2 tracked task(s):"), "{text}");
    assert!(
        text.contains(&format!(
            "- task_id: {}  agent: researcher  status: cancelled",
            ids[0]
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "- task_id: {}  agent: researcher  status: running",
            ids[1]
        )),
        "{text}"
    );
    assert_eq!(
        checks.load(Ordering::SeqCst) - before,
        1,
        "only the running task is fetched"
    );
    assert_eq!(state.async_tasks.len(), 2);

    // The filter applies to the cached status.
    let (results, _) = sup
        .turn(&[("list_async_tasks", json!({"status_filter": "cancelled"}))])
        .await
        .unwrap();
    assert!(results[0].text().starts_with("1 tracked task(s):"));

    gate.release();
    wait_for(&worker, &ids[1], &["success"]).await;
    let (results, _) = sup.turn(&[("list_async_tasks", json!({}))]).await.unwrap();
    assert!(
        results[0]
            .text()
            .contains(&format!("{}  agent: researcher  status: success", ids[1])),
        "{}",
        results[0].text()
    );
    // Now both are terminal: listing again fetches nothing.
    let before = checks.load(Ordering::SeqCst);
    sup.turn(&[("list_async_tasks", json!({"status_filter": "all"}))])
        .await
        .unwrap();
    assert_eq!(checks.load(Ordering::SeqCst), before);
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn unknown_task_ids_and_unknown_subagents() {
    let worker = start_worker(Gate::open()).await;
    let sup = Supervisor::new(vec![spec(&worker)]).unwrap();
    let (checked, _) = sup
        .call_json("check_async_task", json!({"task_id": "no-such-task"}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "unknown");

    let (results, state) = sup
        .turn(&[(
            "start_async_task",
            json!({"description": "x", "subagent_name": "ghost"}),
        )])
        .await
        .unwrap();
    let text = results[0].text();
    assert!(
        text.starts_with("Unknown async subagent type `ghost`"),
        "{text}"
    );
    assert!(text.contains("`researcher`"), "{text}");
    assert!(results[0].is_error());
    assert!(state.async_tasks.is_empty());
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn parallel_calls_in_one_turn_all_land() {
    let worker = start_worker(Gate::open()).await;
    let sup = Supervisor::new(vec![spec(&worker)]).unwrap();
    let (results, state) = sup
        .turn(&[
            (
                "start_async_task",
                json!({"description": "one", "subagent_name": "researcher"}),
            ),
            (
                "start_async_task",
                json!({"description": "two", "subagent_name": "researcher"}),
            ),
            (
                "start_async_task",
                json!({"description": "three", "subagent_name": "researcher"}),
            ),
        ])
        .await
        .unwrap();
    assert_eq!(state.async_tasks.len(), 3, "{results:?}");
    let ids: Vec<String> = state.async_tasks.keys().cloned().collect();
    for id in &ids {
        wait_for(&worker, id, &["success"]).await;
    }
    // Three checks of three different tasks in one turn: all records are refreshed.
    let calls: Vec<(&str, Value)> = ids
        .iter()
        .map(|id| ("check_async_task", json!({"task_id": id})))
        .collect();
    let (_, state) = sup.turn(&calls).await.unwrap();
    for id in &ids {
        let record = &state.async_tasks[id];
        assert_eq!(record.status, "success", "{id}");
        assert!(
            record
                .result
                .as_deref()
                .unwrap()
                .starts_with(&format!("Report on {}", record.description))
        );
    }
    worker.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_wrong_bearer_token_is_a_clear_auth_error_for_the_model() {
    let worker = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token("right-token")
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let wrong = Supervisor::new(vec![
        spec(&worker).header("Authorization", "Bearer wrong-token"),
    ])
    .unwrap();
    let (results, state) = wrong
        .turn(&[(
            "start_async_task",
            json!({"description": "x", "subagent_name": "researcher"}),
        )])
        .await
        .unwrap();
    let text = results[0].text();
    assert!(results[0].is_error());
    assert!(
        text.contains("refused the credentials (HTTP 401)"),
        "{text}"
    );
    assert!(text.contains("bearer token is not accepted"), "{text}");
    assert!(!text.contains("right-token"));
    assert!(state.async_tasks.is_empty());

    let right = Supervisor::new(vec![
        spec(&worker).header("Authorization", "Bearer right-token"),
    ])
    .unwrap();
    let (started, _) = right
        .call_json(
            "start_async_task",
            json!({"description": "x", "subagent_name": "researcher"}),
        )
        .await
        .unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    wait_for_with_token(&worker, &task_id, "right-token").await;
    let (checked, _) = right
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "success");
    worker.shutdown().await.unwrap();
}

async fn wait_for_with_token(worker: &WorkerHandle, id: &str, token: &str) {
    let http = reqwest::Client::new();
    for _ in 0..3000 {
        let run: Value = http
            .get(format!("{}/runs/{id}", worker.url()))
            .bearer_auth(token)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if run["status"] == "success" {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("run {id} never succeeded");
}

#[tokio::test]
async fn task_records_survive_compaction_and_a_restart_from_the_checkpoint() {
    use kit::checkpoint::SqliteCheckpointer;
    use kit::middleware::compaction::CompactionMiddleware;
    use std::collections::VecDeque;
    use std::sync::Mutex;

    let worker = start_worker(Gate::open()).await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("supervisor.sqlite");
    // Scripted answers, except the compaction's summary call.
    let script: Arc<Mutex<VecDeque<Message>>> = Arc::default();
    let build = || {
        let script = script.clone();
        let model = ScriptedModel::from_fn(move |request| {
            if request
                .system
                .as_deref()
                .is_some_and(|s| s.contains("You condense conversations"))
            {
                return Ok(Message::assistant("SUMMARY: the user chatted."));
            }
            Ok(script
                .lock()
                .unwrap()
                .pop_front()
                .unwrap_or_else(|| Message::assistant("(script ended)")))
        });
        Agent::builder()
            .name("supervisor")
            .model(model)
            .async_subagents([spec(&worker)])
            .compaction(
                CompactionMiddleware::new()
                    .trigger_messages(6)
                    .keep_messages(2),
            )
            .checkpointer(Arc::new(SqliteCheckpointer::open(&file).unwrap()))
            .build()
            .unwrap()
    };
    let opts = RunOptions::new().thread_id("long-supervisor");
    let agent = build();
    script.lock().unwrap().extend([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new(
                "start_async_task",
                json!({"description": "volcanoes", "subagent_name": "researcher"}),
            )],
        ),
        Message::assistant("Started."),
    ]);
    let state = agent
        .invoke("research volcanoes")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    let task_id = state.async_tasks.keys().next().unwrap().clone();
    for i in 0..3 {
        script
            .lock()
            .unwrap()
            .push_back(Message::assistant(format!("answer {i}")));
        agent
            .invoke(format!("chat {i}"))
            .options(&opts)
            .await
            .unwrap();
    }
    let state = agent
        .graph()
        .get_state(&opts)
        .await
        .unwrap()
        .unwrap()
        .values;
    assert!(
        state.messages[0]
            .text()
            .contains("SUMMARY: the user chatted."),
        "compaction ran: {:?}",
        state.messages.iter().map(Message::text).collect::<Vec<_>>()
    );
    assert!(
        !state.messages.iter().any(|m| m.text().contains(&task_id)),
        "the task id left the conversation"
    );
    assert!(
        state.async_tasks.contains_key(&task_id),
        "but not the state"
    );
    drop(agent);

    // A new supervisor on the same file and thread: the record is restored with the thread.
    wait_for(&worker, &task_id, &["success"]).await;
    let agent = build();
    script.lock().unwrap().extend([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "check-1",
                "check_async_task",
                json!({"task_id": task_id}),
            )],
        ),
        Message::assistant("Done."),
    ]);
    let state = agent
        .invoke("is it done?")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    let result = state
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("check-1"))
        .unwrap();
    let checked: Value = serde_json::from_str(&result.text()).unwrap();
    assert_eq!(checked["status"], "success");
    assert_eq!(
        checked["result"],
        "Report on volcanoes: 3 sources agree about volcanoes"
    );
    worker.shutdown().await.unwrap();
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Form {
    #[state(reducer = kit::reducers::append)]
    messages: Vec<Value>,
    answer: String,
}

/// A remote graph that asks a human for a name.
fn form_graph() -> kit::Graph<Form> {
    GraphBuilder::<Form>::new("form")
        .node("ask", |_s: Arc<Form>, ctx: NodeContext| async move {
            let name = ctx.interrupt(json!({"question": "name?"}))?;
            Ok::<_, NodeError>(FormUpdate::new().answer(format!("hello {name}")))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .compile()
        .unwrap()
}

async fn next_notice(notices: &mut tokio::sync::broadcast::Receiver<TaskNotice>) -> TaskNotice {
    tokio::time::timeout(Duration::from_secs(30), notices.recv())
        .await
        .expect("no notice within 30 s")
        .unwrap()
}

#[tokio::test]
async fn the_supervisor_hears_of_completion_and_of_a_remote_interrupt_without_polling() {
    // Completion: heard through the worker's thread stream while nobody calls a tool.
    let gate = Gate::closed();
    let worker = start_worker(gate.clone()).await;
    let middleware = AsyncSubagentMiddleware::new(vec![spec(&worker)]).unwrap();
    let mut notices = middleware.notices();
    let sup = Supervisor::with_middleware(middleware).unwrap();
    let (started, _) = sup
        .call_json(
            "start_async_task",
            json!({"description": "tides", "subagent_name": "researcher"}),
        )
        .await
        .unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    gate.release();
    let heard = next_notice(&mut notices).await;
    assert_eq!(heard.task_id, task_id);
    assert_eq!(heard.status(), "success");
    assert!(matches!(
        heard.outcome,
        RunOutcome::Completed { values: Some(_) }
    ));
    // The worker is gone, yet the check answers: from what was heard, with no request.
    worker.shutdown().await.unwrap();
    let (checked, state) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "success", "{checked}");
    assert_eq!(
        checked["result"],
        "Report on tides: 3 sources agree about tides"
    );
    assert!(state.async_tasks[&task_id].last_error.is_none());

    // A remote interrupt: the task is `waiting`, with what the remote graph asks.
    let forms = spawn_worker(Worker::builder().graph("form", form_graph()))
        .await
        .unwrap();
    let middleware = AsyncSubagentMiddleware::new(vec![
        AsyncSpec::new("former", "Asks for a name.", "form").url(forms.url()),
    ])
    .unwrap();
    let mut notices = middleware.notices();
    let sup = Supervisor::with_middleware(middleware).unwrap();
    let (started, _) = sup
        .call_json(
            "start_async_task",
            json!({"description": "greet someone", "subagent_name": "former"}),
        )
        .await
        .unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    let heard = next_notice(&mut notices).await;
    assert_eq!(
        (heard.task_id.as_str(), heard.status()),
        (task_id.as_str(), "waiting")
    );
    let RunOutcome::Waiting { interrupts, .. } = &heard.outcome else {
        panic!("expected a wait: {heard:?}");
    };
    assert_eq!(interrupts[0]["payload"]["question"], "name?");
    forms.shutdown().await.unwrap();
    let (checked, _) = sup
        .call_json("check_async_task", json!({"task_id": task_id}))
        .await
        .unwrap();
    assert_eq!(checked["status"], "waiting", "{checked}");
    assert_eq!(checked["interrupts"][0]["payload"]["question"], "name?");
}
