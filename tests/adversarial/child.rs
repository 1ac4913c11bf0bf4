//! The cases that could kill the process, run in a child under a memory cap (see
//! `support::run_child`): each prints `REPORT key=value` lines, its peak RSS last.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kit::Checkpointer;
use kit::checkpoint::SqliteCheckpointer;
use kit::graph::{GraphBuilder, NodeContext};
use kit::http::{HttpClient, HttpRequest};
use kit::middleware::filesystem::{DirectoryBackend, FilesystemMiddleware};
use kit::model::openai::OpenAiModel;
use kit::model::{ChatModel, ModelError, ModelRequest, StreamAssembler};
use kit::testing::ScriptedModel;
use kit::{Agent, END, Graph, Message, RunOptions, START, State, ToolCall};
use kit_testing::hostile::{nested_expr, recursive_enum_schema};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::support::{RawServer, Step, chunk, head, peak_rss_kib, report};

pub fn run(case: &str) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    report("base_rss_kib", peak_rss_kib());
    rt.block_on(async {
        match case {
            "glob_brace_bomb" => glob_brace_bomb(),
            "validate_recursive_enum" => validate_recursive_enum(),
            "checkpoint_self_loop" => checkpoint_loop(false).await,
            "checkpoint_two_row_loop" => checkpoint_loop(true).await,
            "checkpoint_loop_postgres" => checkpoint_loop_postgres().await,
            "checkpoint_garbled_head" => checkpoint_garbled("head").await,
            "checkpoint_garbled_data" => checkpoint_garbled("data").await,
            "body_512mib_chunked" => body_512mib(false).await,
            "body_512mib_declared" => body_512mib(true).await,
            "endless_sse_line" => endless_sse(SseShape::Line).await,
            "endless_sse_event" => endless_sse(SseShape::Event).await,
            "endless_valid_stream" => endless_sse(SseShape::Valid).await,
            "read_file_64mib_limit_1" => read_file_64mib().await,
            "read_fifo" => read_fifo().await,
            other => panic!("unknown child case {other}"),
        }
    });
    report("peak_rss_kib", peak_rss_kib());
}

fn glob_brace_bomb() {
    for groups in [1000, 2000, 100_000] {
        let pattern = "{a,}".repeat(groups);
        let outcome = kit::fuzz::glob_matches(&pattern, "/a");
        report(&format!("groups_{groups}"), format!("{outcome:?}"));
    }
}

fn validate_recursive_enum() {
    let schema = recursive_enum_schema();
    for depth in [14, 40] {
        let ok = kit::tool::validate_args(&schema, &nested_expr(depth));
        report(&format!("valid_{depth}"), format!("{:?}", ok.is_ok()));
        if let Err(problems) = &ok {
            report(&format!("why_{depth}"), problems.join(" | "));
        }
        // The same tree with a wrong tag at the bottom: every option of every level fails.
        let mut bad = nested_expr(depth).to_string();
        bad = bad.replacen("\"num\"", "\"nope\"", 1);
        let bad: serde_json::Value = serde_json::from_str(&bad).unwrap();
        let problems = kit::tool::validate_args(&schema, &bad)
            .err()
            .unwrap_or_default();
        report(&format!("problems_{depth}"), problems.len());
    }
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Log {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

fn log_graph() -> Graph<Log> {
    let mut b = GraphBuilder::<Log>::new("log");
    for i in 0..5 {
        b = b.node(
            format!("n{i}"),
            move |_: Arc<Log>, _: NodeContext| async move {
                LogUpdate::new().log(vec![format!("entry {i}")])
            },
        );
    }
    b = b.edge(START, "n0");
    for i in 1..5 {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge("n4", END).compile().unwrap()
}

/// A SQLite file whose delta chain loops (each row at itself, or the start of the chain turned
/// into a delta pointing at its successor), loaded back. The run is written with exit
/// durability: its one checkpoint row holds the last step's blobs, and the steps before it are
/// rows of `kit_blobs`, which SQL can damage.
async fn checkpoint_loop(two_rows: bool) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    {
        let cp = Arc::new(SqliteCheckpointer::open(&db).unwrap());
        log_graph()
            .with_checkpointer(cp)
            .invoke(LogUpdate::new())
            .options(
                &RunOptions::new()
                    .thread_id("t-loop")
                    .durability(kit::graph::Durability::Exit),
            )
            .await
            .unwrap();
    }
    let conn = rusqlite::Connection::open(&db).unwrap();
    let changed = if two_rows {
        conn.execute(
            "UPDATE kit_blobs SET kind = 'delta', prev_version = (
                 SELECT b2.version FROM kit_blobs AS b2
                  WHERE b2.thread_id = kit_blobs.thread_id AND b2.ns = kit_blobs.ns
                    AND b2.channel = kit_blobs.channel AND b2.prev_version = kit_blobs.version)
              WHERE (kind = 'full' OR prev_version IS NULL) AND EXISTS (
                 SELECT 1 FROM kit_blobs AS b2
                  WHERE b2.thread_id = kit_blobs.thread_id AND b2.ns = kit_blobs.ns
                    AND b2.channel = kit_blobs.channel AND b2.prev_version = kit_blobs.version)",
            [],
        )
        .unwrap()
    } else {
        conn.execute(
            "UPDATE kit_blobs SET kind = 'delta', prev_version = version",
            [],
        )
        .unwrap()
    };
    drop(conn);
    report("rows_damaged", changed);
    let cp = SqliteCheckpointer::open(&db).unwrap();
    let head = cp.history("t-loop", "", Some(1)).await.unwrap();
    report("head", &head[0].id);
    match cp.load("t-loop", "", None).await {
        Ok(_) => report("outcome", "loaded"),
        Err(e) => report("outcome", format!("{e}")),
    }
}

/// A SQLite file whose checkpoint rows were overwritten: the head of the newest with bytes that
/// are no checkpoint (`head`), or the data of every row cut short by a byte (`data`), loaded
/// back.
async fn checkpoint_garbled(column: &str) {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("cp.sqlite");
    {
        let cp = Arc::new(SqliteCheckpointer::open(&db).unwrap());
        log_graph()
            .with_checkpointer(cp)
            .invoke(LogUpdate::new())
            .options(&RunOptions::new().thread_id("t-garbled"))
            .await
            .unwrap();
    }
    let cp = SqliteCheckpointer::open(&db).unwrap();
    let head = cp.history("t-garbled", "", Some(1)).await.unwrap();
    report("head", &head[0].id);
    let damage = match column {
        "head" => {
            // 0xff is no tag of the layout: the head fails at its first byte.
            "UPDATE kit_checkpoints SET head = X'ffffffffffffffffffffffffffffffff'
              WHERE checkpoint_id = (SELECT MAX(checkpoint_id) FROM kit_checkpoints)"
        }
        _ => {
            "UPDATE kit_checkpoints SET data = substr(data, 1, length(data) - 1)
              WHERE length(data) > 0"
        }
    };
    let changed = rusqlite::Connection::open(&db)
        .unwrap()
        .execute(damage, [])
        .unwrap();
    report("rows_damaged", changed);
    match cp.load("t-garbled", "", None).await {
        Ok(_) => report("load", "loaded"),
        Err(e) => report("load", format!("{e}")),
    }
    match cp.history("t-garbled", "", None).await {
        Ok(h) => report("history", format!("{} checkpoints", h.len())),
        Err(e) => report("history", format!("{e}")),
    }
}

/// A peer answers a plain request with 512 MiB (chunked, or declared up front).
async fn body_512mib(declared: bool) {
    let block = Arc::new(chunk(&vec![b'x'; 64 * 1024]));
    let total = 512u64 * 1024 * 1024;
    let server = RawServer::start(move |_| {
        if declared {
            let length = total.to_string();
            vec![
                head(
                    200,
                    &[
                        ("content-type", "application/json"),
                        ("content-length", &length),
                    ],
                ),
                Step::Repeat(Arc::new(vec![b'x'; 64 * 1024]), total / (64 * 1024)),
            ]
        } else {
            vec![
                head(
                    200,
                    &[
                        ("content-type", "application/json"),
                        ("transfer-encoding", "chunked"),
                    ],
                ),
                Step::Repeat(block.clone(), total / (64 * 1024)),
                Step::Send(b"0\r\n\r\n".to_vec()),
            ]
        }
    })
    .await;
    let client = HttpClient::new()
        .timeout(Duration::from_secs(60))
        .max_retries(0);
    let err = client
        .send(HttpRequest::get(&format!("{}/big", server.url)))
        .await
        .expect_err("a 512 MiB body is refused");
    report("kind", format!("{:?}", err.kind()));
    report("limit", err.limit().unwrap_or("none"));
    report("message", err.to_string().replace('\n', " "));
    report(
        "server_wrote_mib",
        server.written.load(std::sync::atomic::Ordering::Relaxed) >> 20,
    );
}

enum SseShape {
    /// `data: aaaa…` with no newline, forever.
    Line,
    /// `data: a` lines forever, never the blank line that ends the event.
    Event,
    /// Valid Chat Completions deltas, forever.
    Valid,
}

async fn endless_sse(shape: SseShape) {
    let forever = match shape {
        SseShape::Line => {
            let mut first = b"data: {\"choices\":[{\"delta\":{\"content\":\"".to_vec();
            first.extend(vec![b'a'; 60 * 1024]);
            vec![
                Step::Send(chunk(&first)),
                Step::Repeat(Arc::new(chunk(&[b'a'; 64 * 1024])), u64::MAX),
            ]
        }
        SseShape::Event => {
            let lines = "data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n".repeat(1000);
            vec![Step::Repeat(Arc::new(chunk(lines.as_bytes())), u64::MAX)]
        }
        SseShape::Valid => {
            let text = "lorem ipsum ".repeat(85);
            let frame = format!(
                "data: {}\n\n",
                json!({"choices": [{"index": 0, "delta": {"content": text}}]})
            )
            .repeat(32);
            vec![Step::Repeat(Arc::new(chunk(frame.as_bytes())), u64::MAX)]
        }
    };
    let server = RawServer::start(move |_| {
        let mut steps = vec![head(
            200,
            &[
                ("content-type", "text/event-stream"),
                ("transfer-encoding", "chunked"),
            ],
        )];
        steps.extend(forever.iter().cloned());
        steps
    })
    .await;
    let model = OpenAiModel::compatible("hostile", "m", format!("{}/v1", server.url)).http_client(
        HttpClient::new()
            .timeout(Duration::from_secs(30))
            .max_retries(0),
    );
    let mut stream = model
        .stream(&ModelRequest::new(vec![Message::user("hi")]))
        .await
        .unwrap();
    // Consumed the way an agent consumes it: every chunk into the assembled answer.
    let mut assembler = StreamAssembler::new();
    let mut chunks = 0u64;
    let error = loop {
        match stream.next().await {
            Some(Ok(chunk)) => {
                chunks += 1;
                assembler.push(&chunk);
            }
            Some(Err(e)) => break e,
            None => panic!("an endless stream ended"),
        }
    };
    report("chunks", chunks);
    report("assembled_mib", assembler.text().len() >> 20);
    match &error {
        ModelError::Limit { limit, .. } => report("limit", limit),
        other => report("limit", format!("not a limit error: {other:?}")),
    }
    report("message", error.to_string().replace('\n', " "));
    report(
        "server_wrote_mib",
        server.written.load(std::sync::atomic::Ordering::Relaxed) >> 20,
    );
}

/// `read_file` with `limit=1` on a 64 MiB file in a real directory.
async fn read_file_64mib() {
    let dir = tempfile::tempdir().unwrap();
    {
        use std::io::Write;
        let mut f =
            std::io::BufWriter::new(std::fs::File::create(dir.path().join("big.log")).unwrap());
        let line = format!("{}\n", "0123456789abcdef".repeat(8));
        for _ in 0..(64 * 1024 * 1024 / line.len()) {
            f.write_all(line.as_bytes()).unwrap();
        }
    }
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "c1",
                "read_file",
                json!({"file_path": "/big.log", "limit": 1}),
            )],
        ),
        Message::assistant("read"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .filesystem(FilesystemMiddleware::new().backend(DirectoryBackend::new(dir.path()).unwrap()))
        .build()
        .unwrap();
    let state = agent.invoke("read it").await.unwrap().into_state();
    let answer = state
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("c1"))
        .map(|m| m.text())
        .unwrap_or_default();
    report("answer_head", answer.lines().next().unwrap_or(""));
}

/// `read_file`, `edit_file` and `grep` on a FIFO inside the root: nobody ever writes to it.
async fn read_fifo() {
    let dir = tempfile::tempdir().unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(dir.path().join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id("c1", "read_file", json!({"file_path": "/pipe"})),
                ToolCall::with_id(
                    "c2",
                    "edit_file",
                    json!({"file_path": "/pipe", "old_string": "a", "new_string": "b"}),
                ),
                ToolCall::with_id("c3", "grep", json!({"pattern": "a"})),
            ],
        ),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .filesystem(FilesystemMiddleware::new().backend(DirectoryBackend::new(dir.path()).unwrap()))
        .build()
        .unwrap();
    let state = agent.invoke("read the pipe").await.unwrap().into_state();
    for id in ["c1", "c2", "c3"] {
        let answer = state
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .map(|m| m.text())
            .unwrap_or_default();
        report(id, answer.replace('\n', " "));
    }
}

/// The same self-loop in a PostgreSQL store (`KIT_TEST_POSTGRES_URL`), in a schema of its own.
async fn checkpoint_loop_postgres() {
    let url = std::env::var("KIT_TEST_POSTGRES_URL").unwrap();
    let schema = format!("kit_adversarial_{}", std::process::id());
    let cp = Arc::new(
        kit::checkpoint::PostgresCheckpointer::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    log_graph()
        .with_checkpointer(cp.clone())
        .invoke(LogUpdate::new())
        .options(&RunOptions::new().thread_id("t-loop"))
        .await
        .unwrap();
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let changed = client
        .execute(
            &format!("UPDATE {schema}.kit_blobs SET kind = 'delta', prev_version = version"),
            &[],
        )
        .await
        .unwrap();
    report("rows_damaged", changed);
    let head = cp.history("t-loop", "", Some(1)).await.unwrap();
    report("head", &head[0].id);
    match cp.load("t-loop", "", None).await {
        Ok(_) => report("outcome", "loaded"),
        Err(e) => report("outcome", format!("{e}")),
    }
    cp.drop_schema().await.unwrap();
}
