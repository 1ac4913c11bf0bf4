//! A worker killed mid-run and restarted: the supervisor's task ends in a definite status.
//!
//! The worker runs in a child process — this test binary re-executed with `--exact
//! worker_child` and environment variables naming its SQLite file and address
//! (`worker_child` does nothing without them). Its researcher's tool sleeps for an hour in the
//! first life, so the run is mid-way when the parent sends `SIGKILL`; the second life, on the
//! same files and port, recovers the run. Agent state lives in a `SqliteCheckpointer` file, so
//! the resumed run continues from its checkpoint (the tool call the model already made) instead
//! of starting over.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use kit::checkpoint::SqliteCheckpointer;
use kit::middleware::async_subagents::AsyncSpec;
use kit::protocol::HttpRunClient;
use kit::server::{Recovery, Worker};
use kit_testing::Supervisor;
use kit_testing::researcher::{self, Behaviour, Gate};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const CHILD_DB: &str = "KIT_WORKER_CHILD_DB";
const CHILD_ADDR: &str = "KIT_WORKER_CHILD_ADDR";
const CHILD_SLOW: &str = "KIT_WORKER_CHILD_SLOW";
const CHILD_RECOVERY: &str = "KIT_WORKER_CHILD_RECOVERY";
const READY: &str = "KIT_WORKER_CHILD_READY";

/// The child: a worker on the given file and address, serving until killed.
#[test]
fn worker_child() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return; // not started by the crash test
    };
    let addr = std::env::var(CHILD_ADDR).unwrap();
    let slow = std::env::var(CHILD_SLOW).is_ok_and(|v| v == "1");
    let recovery = match std::env::var(CHILD_RECOVERY).as_deref() {
        Ok("fail") => Recovery::Fail,
        _ => Recovery::Resume,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let agent = researcher::agent_with(Behaviour {
            gate: Gate::open(),
            delay: if slow {
                Duration::from_secs(3600)
            } else {
                Duration::ZERO
            },
        });
        let checkpoints = SqliteCheckpointer::open(format!("{db}.checkpoints")).unwrap();
        let handle = Worker::builder()
            .agent("research", agent)
            .sqlite(&db)
            .unwrap()
            .checkpointer(Arc::new(checkpoints))
            .recovery(recovery)
            .build()
            .await
            .unwrap()
            .start(addr.as_str())
            .await
            .unwrap();
        println!("{READY}");
        handle
            .run_until(std::future::pending::<()>())
            .await
            .unwrap();
    });
}

async fn spawn_child(db: &Path, addr: &str, slow: bool, recovery: &str) -> Child {
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(exe)
        .args(["--exact", "worker_child", "--nocapture", "--test-threads=1"])
        .env(CHILD_DB, db)
        .env(CHILD_ADDR, addr)
        .env(CHILD_SLOW, if slow { "1" } else { "0" })
        .env(CHILD_RECOVERY, recovery)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        match lines.next_line().await.unwrap() {
            Some(line) if line.contains(READY) => break,
            Some(_) => {}
            None => panic!("the worker child exited before it was ready"),
        }
    }
    // Keep draining its output so it never blocks on a full pipe.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    child
}

async fn worker_status(url: &str, id: &str) -> Value {
    reqwest::get(format!("{url}/runs/{id}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn kill(mut child: Child) {
    child.start_kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().await.unwrap();
    assert_eq!(status.signal(), Some(libc::SIGKILL));
}

/// Starts a task on a slow first life, kills it mid-run, restarts, and returns the status the
/// supervisor's `check_async_task` settles on, with its JSON.
async fn crash_and_restart(recovery: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("worker.sqlite");
    let addr = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        probe.local_addr().unwrap().to_string()
    };
    let url = format!("http://{addr}");
    let child = spawn_child(&db, &addr, true, recovery).await;
    let sup = Supervisor::new([AsyncSpec::new("researcher", "Researches.", "research")
        .url(url.clone())
        .client(HttpRunClient::with_timeout(Duration::from_secs(5)))])
    .unwrap();
    let (started, _) = sup
        .call(
            "start_async_task",
            json!({"description": "deep sea vents", "subagent_name": "researcher"}),
        )
        .await
        .map(|(m, state)| (m.text(), state))
        .unwrap();
    let started: Value = serde_json::from_str(&started).unwrap();
    let task_id = started["task_id"].as_str().unwrap().to_string();
    for _ in 0..3000 {
        if worker_status(&url, &task_id).await["status"] == "running" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(worker_status(&url, &task_id).await["status"], "running");

    kill(child).await;
    // While the worker is down: a clear error, and the record stays as it was.
    let (text, state) = sup
        .call("check_async_task", json!({"task_id": task_id}))
        .await
        .map(|(m, state)| (m.text(), state))
        .unwrap();
    assert!(text.contains("could not reach the worker"), "{text}");
    let record = &state.async_tasks[&task_id];
    assert!(!kit::middleware::async_subagents::is_terminal(
        &record.status
    ));
    assert!(record.last_error.is_some());

    let child = spawn_child(&db, &addr, false, recovery).await;
    let mut last = Value::Null;
    for _ in 0..3000 {
        let (text, _) = sup
            .call("check_async_task", json!({"task_id": task_id}))
            .await
            .map(|(m, state)| (m.text(), state))
            .unwrap();
        last = serde_json::from_str(&text).unwrap_or_else(|_| json!({"status": text}));
        if kit::middleware::async_subagents::is_terminal(last["status"].as_str().unwrap_or("")) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    if last["status"] == "success" {
        // Resumed from the checkpoint: one user message, one tool call, one tool result, one
        // answer. Starting over would have added the input (and the call) a second time.
        let run = worker_status(&url, &task_id).await;
        let roles: Vec<&str> = run["values"]["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "assistant"], "{run}");
        assert_eq!(run["attempts"], 2);
    }
    kill(child).await;
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_resumes_the_task_after_restart() {
    if std::env::var_os(CHILD_DB).is_some() {
        return;
    }
    let last = crash_and_restart("resume").await;
    assert_eq!(last["status"], "success", "{last}");
    assert_eq!(
        last["result"],
        "Report on deep sea vents: 3 sources agree about deep sea vents"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_fails_the_task_explicitly_when_configured() {
    if std::env::var_os(CHILD_DB).is_some() {
        return;
    }
    let last = crash_and_restart("fail").await;
    assert_eq!(last["status"], "error", "{last}");
    assert!(
        last["error"]
            .as_str()
            .unwrap()
            .contains("stopped (crashed or was killed)"),
        "{last}"
    );
}
