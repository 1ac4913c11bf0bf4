//! Tenants on one worker, over real HTTP on 127.0.0.1 with a SQLite file: two identities
//! (bearer tokens mapped to identities, and a custom auth hook), each seeing and touching only
//! what it owns. Every cross-tenant read, follow-up, cancel and thread-id collision is refused,
//! and a foreign id is answered byte for byte like a missing one.

use kit::server::{AuthError, Identity, RequestParts, Worker, WorkerHandle};
use kit_testing::researcher::{self, Gate};
use serde_json::{Value, json};

const ALICE: &str = "token-of-alice";
const BOB: &str = "token-of-bob";

struct Tenant {
    url: String,
    token: &'static str,
}

impl Tenant {
    async fn send(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let mut request = reqwest::Client::new()
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    }

    async fn get(&self, path: &str) -> (u16, Value) {
        self.send(reqwest::Method::GET, path, None).await
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.send(reqwest::Method::POST, path, Some(body)).await
    }
}

fn start_body(topic: &str) -> Value {
    json!({"assistant_id": "research", "input": {"messages": [{"role": "user", "content": topic}]}})
}

async fn worker(gate: Gate, dir: &tempfile::TempDir) -> WorkerHandle {
    Worker::builder()
        .agent("research", researcher::agent(gate))
        .sqlite(dir.path().join("tenants.sqlite"))
        .unwrap()
        .bearer_token_for(ALICE, Identity::new("alice"))
        .bearer_token_for(BOB, Identity::new("bob"))
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap()
}

/// The answer to a missing id, with the id replaced, so two answers can be compared whole.
fn shape(answer: &(u16, Value), id: &str) -> (u16, String) {
    (answer.0, answer.1.to_string().replace(id, "<id>"))
}

#[tokio::test]
async fn every_cross_tenant_read_follow_up_and_cancel_is_answered_as_not_found() {
    let dir = tempfile::tempdir().unwrap();
    let gate = Gate::closed();
    let w = worker(gate.clone(), &dir).await;
    let alice = Tenant {
        url: w.url(),
        token: ALICE,
    };
    let bob = Tenant {
        url: w.url(),
        token: BOB,
    };

    // Alice starts a run that stays running.
    let (status, run) = alice.post("/runs", start_body("tides")).await;
    assert_eq!(status, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    let thread_id = run["thread_id"].as_str().unwrap().to_string();
    let missing = "no-such-id-0000";
    kit_testing::worker::wait_for_status_with(
        &w.url(),
        &run_id,
        &["running"],
        std::time::Duration::from_secs(30),
        Some(ALICE),
    )
    .await
    .unwrap();

    // Each of Bob's requests on Alice's ids gets exactly the answer a missing id gets.
    let probes: Vec<(reqwest::Method, String, Option<Value>)> = vec![
        (reqwest::Method::GET, "/runs/{id}".into(), None),
        (
            reqwest::Method::POST,
            "/runs/{id}/input".into(),
            Some(json!({"message": "also do my homework"})),
        ),
        (reqwest::Method::POST, "/runs/{id}/cancel".into(), None),
        (reqwest::Method::GET, "/threads/{id}".into(), None),
        (reqwest::Method::GET, "/threads/{id}/runs".into(), None),
        (
            reqwest::Method::POST,
            "/threads/{id}/runs".into(),
            Some(start_body("hijack")),
        ),
        (
            reqwest::Method::POST,
            "/threads/{id}/runs".into(),
            Some(json!({"assistant_id": "research", "command": {"resume": "yes"}})),
        ),
    ];
    for id in [&run_id, &thread_id] {
        for (method, path, body) in &probes {
            let foreign = bob
                .send(method.clone(), &path.replace("{id}", id), body.clone())
                .await;
            let absent = bob
                .send(method.clone(), &path.replace("{id}", missing), body.clone())
                .await;
            assert_eq!(foreign.0, 404, "{method} {path} with {id}: {}", foreign.1);
            assert_eq!(
                shape(&foreign, id),
                shape(&absent, missing),
                "{method} {path}: a foreign id must read exactly like a missing one"
            );
        }
    }
    // The run-on-thread routes too, with Alice's thread and run.
    for path in [
        format!("/threads/{thread_id}/runs/{run_id}"),
        format!("/threads/{thread_id}/runs/{run_id}/cancel"),
    ] {
        let method = if path.ends_with("cancel") {
            reqwest::Method::POST
        } else {
            reqwest::Method::GET
        };
        let (status, body) = bob.send(method, &path, None).await;
        assert_eq!(status, 404, "{path}: {body}");
    }

    // Nothing Bob did reached Alice's thread: one run, still running, never cancelled.
    let (status, runs) = alice.get(&format!("/threads/{thread_id}/runs")).await;
    assert_eq!(status, 200);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let (_, mine) = alice.get(&format!("/runs/{run_id}")).await;
    assert_eq!(mine["status"], "running", "{mine}");

    // Alice still reads, follows up and cancels her own.
    let (status, follow) = alice
        .post(
            &format!("/runs/{run_id}/input"),
            json!({"message": "and the moon"}),
        )
        .await;
    assert_eq!(status, 200, "{follow}");
    assert_eq!(follow["thread_id"], thread_id.as_str());
    let (status, cancelled) = alice
        .post(&format!("/runs/{run_id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200);
    assert_eq!(cancelled["status"], "cancelled");
    gate.release();
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn an_identity_cannot_create_or_write_into_a_thread_id_another_owns() {
    let dir = tempfile::tempdir().unwrap();
    let w = worker(Gate::open(), &dir).await;
    let alice = Tenant {
        url: w.url(),
        token: ALICE,
    };
    let bob = Tenant {
        url: w.url(),
        token: BOB,
    };

    // Alice picks a thread id and uses it.
    let (status, _) = alice
        .post("/threads", json!({"thread_id": "shared-name"}))
        .await;
    assert_eq!(status, 200);
    let mut body = start_body("tides");
    body["thread_id"] = json!("shared-name");
    let (status, run) = alice.post("/runs", body.clone()).await;
    assert_eq!(status, 200, "{run}");
    assert_eq!(run["thread_id"], "shared-name");

    // Bob cannot take the same id, by any route.
    let (status, refused) = bob.post("/runs", body.clone()).await;
    assert_eq!(status, 409, "{refused}");
    assert_eq!(refused["error"], "thread_unavailable");
    assert!(
        !refused["message"].as_str().unwrap().contains("alice"),
        "the owner is never named: {refused}"
    );
    for if_exists in ["raise", "do_nothing"] {
        let (status, refused) = bob
            .post(
                "/threads",
                json!({"thread_id": "shared-name", "if_exists": if_exists}),
            )
            .await;
        assert_eq!(status, 409, "{refused}");
        assert_eq!(refused["error"], "thread_unavailable");
    }
    let mut create = start_body("hijack");
    create["if_not_exists"] = json!("create");
    let (status, refused) = bob.post("/threads/shared-name/runs", create).await;
    assert_eq!(status, 404, "{refused}");

    // A fresh id is Bob's, and then Alice cannot use it either.
    body["thread_id"] = json!("bobs-thread");
    let (status, _) = bob.post("/runs", body.clone()).await;
    assert_eq!(status, 200);
    let (status, _) = alice.post("/runs", body).await;
    assert_eq!(status, 409);

    // Alice's thread has only her run.
    let (_, runs) = alice.get("/threads/shared-name/runs").await;
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    let done = kit_testing::worker::wait_for_status_with(
        &w.url(),
        run["run_id"].as_str().unwrap(),
        &["success"],
        std::time::Duration::from_secs(30),
        Some(ALICE),
    )
    .await
    .unwrap();
    assert_eq!(done["thread_id"], "shared-name");
    w.shutdown().await.unwrap();
}

/// A chosen thread id of 256 bytes is taken by every route that creates a thread; one byte
/// more, a 512 KiB id (within the body limit) or an empty one is refused with what to do.
#[tokio::test]
async fn a_chosen_thread_id_is_at_most_256_bytes_by_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let w = worker(Gate::open(), &dir).await;
    let alice = Tenant {
        url: w.url(),
        token: ALICE,
    };
    for (route, longest) in [("/threads", "a"), ("/runs", "b"), ("create", "c")] {
        for (id, ok) in [
            (longest.repeat(256), true),
            (longest.repeat(257), false),
            (longest.repeat(1 << 19), false),
            (String::new(), false),
        ] {
            let (status, answer) = match route {
                // Not a path; a path that long is refused by the HTTP layer before kit reads it.
                "create" if id.is_empty() || id.len() > 4096 => continue,
                "create" => {
                    let mut body = start_body("tides");
                    body["if_not_exists"] = json!("create");
                    alice.post(&format!("/threads/{id}/runs"), body).await
                }
                "/runs" => {
                    let mut body = start_body("tides");
                    body["thread_id"] = json!(id);
                    alice.post("/runs", body).await
                }
                _ => alice.post("/threads", json!({"thread_id": id})).await,
            };
            if ok {
                assert_eq!(status, 200, "{route}: {answer}");
                assert_eq!(answer["thread_id"], json!(id));
            } else {
                assert_eq!(status, 400, "{route} with {} bytes: {answer}", id.len());
                let message = answer["message"].as_str().unwrap();
                let advice = match route {
                    "create" => "the thread id in the path is 257 bytes long",
                    _ => "omit `thread_id` to get a fresh one",
                };
                assert!(message.contains(advice), "{message}");
                assert!(message.len() < 300, "the id is not echoed: {message}");
            }
        }
    }
}

#[tokio::test]
async fn ownership_survives_a_restart_of_the_worker() {
    let dir = tempfile::tempdir().unwrap();
    let w = worker(Gate::open(), &dir).await;
    let alice = Tenant {
        url: w.url(),
        token: ALICE,
    };
    let (_, run) = alice.post("/runs", start_body("tides")).await;
    let run_id = run["run_id"].as_str().unwrap().to_string();
    w.shutdown().await.unwrap();

    let w = worker(Gate::open(), &dir).await;
    let bob = Tenant {
        url: w.url(),
        token: BOB,
    };
    let alice = Tenant {
        url: w.url(),
        token: ALICE,
    };
    assert_eq!(bob.get(&format!("/runs/{run_id}")).await.0, 404);
    assert_eq!(alice.get(&format!("/runs/{run_id}")).await.0, 200);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_custom_auth_hook_names_the_identity_and_refuses_with_its_message() {
    let w = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .auth(|request: &RequestParts| {
            match request
                .headers
                .get("x-tenant-key")
                .and_then(|v| v.to_str().ok())
            {
                Some("k-acme") => Ok(Identity::new("acme")),
                Some("k-globex") => Ok(Identity::new("globex")),
                _ => Err(AuthError::new("send your key as `X-Tenant-Key: <key>`")),
            }
        })
        .build()
        .await
        .unwrap()
        .start("127.0.0.1:0")
        .await
        .unwrap();
    let http = reqwest::Client::new();
    let r = http
        .post(format!("{}/runs", w.url()))
        .json(&start_body("tides"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    let refused: Value = r.json().await.unwrap();
    assert_eq!(refused["error"], "unauthorized");
    assert_eq!(refused["message"], "send your key as `X-Tenant-Key: <key>`");
    // GET /ok needs no identity.
    let ok = http.get(format!("{}/ok", w.url())).send().await.unwrap();
    assert_eq!(ok.status().as_u16(), 200);

    // A client without an identity is refused from its head: the worker neither waits for a
    // body it announced (30 s of body read timeout) nor reads one over its limit (413).
    for length in [1_000u64, 1 << 30] {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = w.url().trim_start_matches("http://").to_string();
        let mut stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
        let head = format!(
            "POST /runs HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {length}\r\n\r\n{{"
        );
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = vec![0u8; 512];
        let n = tokio::time::timeout(std::time::Duration::from_secs(5), stream.read(&mut answer))
            .await
            .expect("answered from the head, without waiting for the body")
            .unwrap();
        let answer = String::from_utf8_lossy(&answer[..n]);
        assert!(answer.starts_with("HTTP/1.1 401"), "{length}: {answer}");
    }

    let run: Value = http
        .post(format!("{}/runs", w.url()))
        .header("x-tenant-key", "k-acme")
        .json(&start_body("tides"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = run["run_id"].as_str().unwrap();
    let as_globex = http
        .get(format!("{}/runs/{run_id}", w.url()))
        .header("x-tenant-key", "k-globex")
        .send()
        .await
        .unwrap();
    assert_eq!(as_globex.status().as_u16(), 404);
    let as_acme = http
        .get(format!("{}/runs/{run_id}", w.url()))
        .header("x-tenant-key", "k-acme")
        .send()
        .await
        .unwrap();
    assert_eq!(as_acme.status().as_u16(), 200);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn conflicting_auth_configurations_are_refused_when_the_worker_is_built() {
    let both = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token("t")
        .auth(|_: &RequestParts| Ok(Identity::new("x")))
        .build()
        .await
        .unwrap_err();
    assert!(
        both.to_string().contains("the hook decides alone"),
        "{both}"
    );
    let clash = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token_for("same", Identity::new("a"))
        .bearer_token_for("same", Identity::new("b"))
        .build()
        .await
        .unwrap_err();
    assert!(
        clash.to_string().contains("two different identities"),
        "{clash}"
    );
    let empty = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token_for(" ", Identity::new("a"))
        .build()
        .await
        .unwrap_err();
    assert!(empty.to_string().contains("empty"), "{empty}");
}
