//! Thread concurrency ("double texting"): a second run on a busy thread follows its
//! `MultitaskStrategy` — reject, enqueue, interrupt or rollback — enforced by the thread lease
//! in the checkpointer.
//!
//! The cross-process cases run the first run in a second process: this test binary,
//! re-executed with `--ignored --exact holder_process` and environment variables naming the
//! storage (a SQLite file, or a PostgreSQL schema). The same cases also run with two tasks in
//! one process on each back-end, memory included.
//!
//! The graph: `start -> a -> b -> END`. Node `a` appends `<tag>:a`; node `b` waits until the
//! file `release-<tag>` exists in the test's directory, then appends `<tag>:b`. So a run can be
//! held inside node `b` for as long as a case needs.

#[allow(unused_macros)]
#[path = "support/storages.rs"]
mod storages;

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kit::checkpoint::{
    CheckpointError, Checkpointer, LeaseOptions, MemoryCheckpointer, MultitaskStrategy,
    PostgresCheckpointer, SqliteCheckpointer,
};
use kit::graph::CancelToken;
use kit::graph::{GraphBuilder, NodeContext};
use kit::{END, Graph, GraphError, Outcome, RunOptions, START, State};
use serde::{Deserialize, Serialize};
use storages::{Counting, postgres_url, unique_schema};

const HOLDER_STORE: &str = "KIT_LEASE_HOLDER_STORE";
const HOLDER_DIR: &str = "KIT_LEASE_HOLDER_DIR";
const HOLDER_THREAD: &str = "KIT_LEASE_HOLDER_THREAD";
const RESULT: &str = "HOLDER-RESULT";

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Log {
    tag: String,
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

fn graph(dir: &Path) -> Graph<Log> {
    let dir = dir.to_path_buf();
    GraphBuilder::<Log>::new("lease")
        .node("a", |s: Arc<Log>, _: NodeContext| async move {
            LogUpdate::new().log(vec![format!("{}:a", s.tag)])
        })
        .node("b", move |s: Arc<Log>, _: NodeContext| {
            let release = dir.join(format!("release-{}", s.tag));
            async move {
                let deadline = Instant::now() + Duration::from_secs(60);
                while !release.exists() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                LogUpdate::new().log(vec![format!("{}:b", s.tag)])
            }
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .compile()
        .unwrap()
}

fn input(tag: &str) -> LogUpdate {
    LogUpdate::new()
        .tag(tag.to_string())
        .log(vec![format!("{tag}:start")])
}

fn release(dir: &Path, tag: &str) {
    std::fs::write(dir.join(format!("release-{tag}")), b"").unwrap();
}

/// Short lease timings so the cases run fast.
fn lease() -> LeaseOptions {
    LeaseOptions {
        ttl: Duration::from_secs(3),
        poll: Duration::from_millis(20),
    }
}

fn options(thread: &str, strategy: MultitaskStrategy) -> RunOptions {
    RunOptions::new()
        .thread_id(thread)
        .multitask_strategy(strategy)
        .lease(lease())
}

/// Where a case keeps its thread: opens a checkpointer on it, in this process or (as a spec)
/// in the holder process.
#[derive(Clone)]
enum Store {
    Memory(Arc<MemoryCheckpointer>),
    Sqlite(PathBuf),
    Postgres { url: String, schema: String },
}

impl Store {
    async fn open(&self) -> Arc<dyn Checkpointer> {
        match self {
            Store::Memory(m) => m.clone(),
            Store::Sqlite(path) => Arc::new(SqliteCheckpointer::open(path).unwrap()),
            Store::Postgres { url, schema } => Arc::new(
                PostgresCheckpointer::connect_in_schema(url, schema)
                    .await
                    .unwrap(),
            ),
        }
    }

    fn spec(&self) -> String {
        match self {
            Store::Memory(_) => unreachable!("the memory back-end lives in one process"),
            Store::Sqlite(path) => format!("sqlite|{}", path.display()),
            Store::Postgres { url, schema } => format!("postgres|{url}|{schema}"),
        }
    }

    async fn from_spec(spec: &str) -> Store {
        let mut parts = spec.splitn(3, '|');
        match (parts.next(), parts.next(), parts.next()) {
            (Some("sqlite"), Some(path), None) => Store::Sqlite(PathBuf::from(path)),
            (Some("postgres"), Some(url), Some(schema)) => Store::Postgres {
                url: url.to_string(),
                schema: schema.to_string(),
            },
            _ => panic!("bad holder store spec `{spec}`"),
        }
    }

    async fn finish(&self) {
        if let Store::Postgres { url, schema } = self {
            let pg = PostgresCheckpointer::connect_in_schema(url, schema)
                .await
                .unwrap();
            pg.drop_schema().await.unwrap();
        }
    }
}

/// The first run of a case: in a second process, or a task of this one.
enum Holder {
    Process(tokio::process::Child),
    Task(tokio::task::JoinHandle<Result<Outcome<Log>, GraphError>>),
}

/// How the first run ended: its log, or its error kind.
type Ended = Result<Vec<String>, String>;

impl Holder {
    async fn start(store: &Store, dir: &Path, thread: &str, in_process: bool) -> Holder {
        if in_process {
            let graph = graph(dir).with_checkpointer(store.open().await);
            let opts = options(thread, MultitaskStrategy::Reject);
            return Holder::Task(tokio::spawn(async move {
                graph.invoke(input("holder")).options(&opts).await
            }));
        }
        let child = tokio::process::Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "holder_process", "--nocapture"])
            .env(HOLDER_STORE, store.spec())
            .env(HOLDER_DIR, dir)
            .env(HOLDER_THREAD, thread)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        Holder::Process(child)
    }

    async fn ended(self) -> Ended {
        match self {
            Holder::Task(task) => match tokio::time::timeout(Duration::from_secs(60), task)
                .await
                .expect("the holder run ended in time")
                .unwrap()
            {
                Ok(outcome) => Ok(outcome.state().log.clone()),
                Err(e) => Err(e.kind().to_string()),
            },
            Holder::Process(child) => {
                let out = tokio::time::timeout(Duration::from_secs(60), child.wait_with_output())
                    .await
                    .expect("the holder process ended in time")
                    .unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "holder process failed: {stdout}");
                let line = stdout
                    .lines()
                    .find_map(|l| l.strip_prefix(RESULT))
                    .unwrap_or_else(|| panic!("no result line from the holder: {stdout}"));
                let line = line.trim();
                match line.strip_prefix("ok ") {
                    Some(log) => Ok(serde_json::from_str(log).unwrap()),
                    None => Err(line.strip_prefix("err ").unwrap_or(line).to_string()),
                }
            }
        }
    }
}

/// The second process of the cross-process cases (does nothing unless started by them).
#[test]
#[ignore = "the holder process of the cross-process cases; they start it themselves"]
fn holder_process() {
    let (Ok(spec), Ok(dir), Ok(thread)) = (
        std::env::var(HOLDER_STORE),
        std::env::var(HOLDER_DIR),
        std::env::var(HOLDER_THREAD),
    ) else {
        panic!("holder_process is started by the cross-process cases, with {HOLDER_STORE} set");
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let store = Store::from_spec(&spec).await;
        let graph = graph(Path::new(&dir)).with_checkpointer(store.open().await);
        let opts = options(&thread, MultitaskStrategy::Reject);
        match graph.invoke(input("holder")).options(&opts).await {
            Ok(out) => println!(
                "{RESULT} ok {}",
                serde_json::to_string(&out.state().log).unwrap()
            ),
            Err(e) => println!("{RESULT} err {}", e.kind()),
        }
    });
}

async fn log_of(graph: &Graph<Log>, thread: &str) -> Vec<String> {
    match graph
        .get_state(&RunOptions::new().thread_id(thread))
        .await
        .unwrap()
    {
        Some(snapshot) => snapshot.values.log,
        None => Vec::new(),
    }
}

async fn wait_until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

const SEED: [&str; 3] = ["seed:start", "seed:a", "seed:b"];
const HOLDER_DONE: [&str; 3] = ["holder:start", "holder:a", "holder:b"];
const HOLDER_PART: [&str; 2] = ["holder:start", "holder:a"];
const SECOND: [&str; 3] = ["second:start", "second:a", "second:b"];
const OTHER: [&str; 3] = ["other:start", "other:a", "other:b"];

/// Seeds a thread, starts the holder run inside node `b`, then starts a second run with
/// `strategy` and checks both outcomes and the thread's log.
async fn double_text(store: Store, strategy: MultitaskStrategy, in_process: bool) {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let thread = format!("t-{}", kit::ids::random());
    let graph = graph(dir).with_checkpointer(store.open().await);
    release(dir, "seed");
    graph
        .invoke(input("seed"))
        .thread_id(&thread)
        .await
        .unwrap();
    // A thread written after the holder starts (below), which no rollback may touch.
    let other = format!("other-{}", kit::ids::random());

    let holder = Holder::start(&store, dir, &thread, in_process).await;
    wait_until("the holder run is inside node b", || async {
        log_of(&graph, &thread)
            .await
            .contains(&"holder:a".to_string())
            && graph
                .thread_activity(&RunOptions::new().thread_id(&thread))
                .await
                .unwrap()
                .is_some_and(|a| a.running.is_some())
    })
    .await;

    release(dir, "other");
    graph
        .invoke(input("other"))
        .thread_id(&other)
        .await
        .unwrap();
    let opts = options(&thread, strategy);
    release(dir, "second");
    let expected: Vec<&str> = match strategy {
        MultitaskStrategy::Reject => {
            let err = graph
                .invoke(input("second"))
                .options(&opts)
                .await
                .unwrap_err();
            assert!(err.is_thread_busy(), "{err}");
            assert!(err.to_string().contains(&thread), "{err}");
            release(dir, "holder");
            let ended = holder.ended().await.unwrap();
            assert_eq!(ended, strings(&[&SEED[..], &HOLDER_DONE[..]].concat()));
            [&SEED[..], &HOLDER_DONE[..]].concat()
        }
        MultitaskStrategy::Enqueue => {
            let second = {
                let graph = graph.clone();
                let opts = opts.clone();
                tokio::spawn(async move { graph.invoke(input("second")).options(&opts).await })
            };
            wait_until("the second run is queued", || async {
                graph
                    .thread_activity(&RunOptions::new().thread_id(&thread))
                    .await
                    .unwrap()
                    .is_some_and(|a| a.queued == 1 && a.running.is_some())
            })
            .await;
            assert!(
                !second.is_finished(),
                "an enqueued run waits for the holder"
            );
            release(dir, "holder");
            let out = second.await.unwrap().unwrap();
            let all = [&SEED[..], &HOLDER_DONE[..], &SECOND[..]].concat();
            assert_eq!(out.state().log, strings(&all));
            assert!(holder.ended().await.is_ok());
            all
        }
        MultitaskStrategy::Interrupt | MultitaskStrategy::Rollback => {
            let out = graph.invoke(input("second")).options(&opts).await.unwrap();
            let ended = holder.ended().await;
            assert_eq!(ended, Err("preempted".to_string()));
            let all = if strategy == MultitaskStrategy::Interrupt {
                // What the stopped run completed (its input and node a) is kept.
                [&SEED[..], &HOLDER_PART[..], &SECOND[..]].concat()
            } else {
                [&SEED[..], &SECOND[..]].concat()
            };
            assert_eq!(out.state().log, strings(&all));
            all
        }
    };
    assert_eq!(log_of(&graph, &thread).await, strings(&expected));
    if strategy == MultitaskStrategy::Rollback {
        // Another thread on the same storage is untouched.
        assert_eq!(log_of(&graph, &other).await, strings(&OTHER));
        // Nothing the stopped run wrote is left in the history either.
        let history = graph
            .state_history(&RunOptions::new().thread_id(&thread), None)
            .await
            .unwrap();
        assert!(!history.is_empty());
        for snapshot in history {
            assert!(
                snapshot.values.log.iter().all(|l| !l.starts_with("holder")),
                "a rolled-back checkpoint is still there: {:?}",
                snapshot.values.log
            );
        }
    }
    let idle = graph
        .thread_activity(&RunOptions::new().thread_id(&thread))
        .await
        .unwrap();
    assert_eq!(idle, None, "both runs left the thread");
    store.finish().await;
}

fn sqlite_store(dir: &tempfile::TempDir) -> Store {
    Store::Sqlite(dir.path().join("threads.sqlite"))
}

async fn postgres_store() -> Option<Store> {
    let url = postgres_url()?;
    let schema = unique_schema();
    // Creates the schema (migrated) before two processes open it.
    PostgresCheckpointer::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    Some(Store::Postgres { url, schema })
}

/// A checkpointer of `storage` ("memory", "sqlite" in `dir`, or "postgres"), with the
/// PostgreSQL store to finish afterwards; `None` when PostgreSQL is not configured.
async fn open_storage(storage: &str, dir: &Path) -> Option<(Arc<dyn Checkpointer>, Option<Store>)> {
    match storage {
        "memory" => Some((Arc::new(MemoryCheckpointer::new()), None)),
        "sqlite" => Some((
            Arc::new(SqliteCheckpointer::open(dir.join("s.sqlite")).unwrap()),
            None,
        )),
        _ => {
            let store = postgres_store().await?;
            Some((store.open().await, Some(store)))
        }
    }
}

macro_rules! cross_process {
    ($($name:ident: $strategy:ident),* $(,)?) => {
        mod two_processes_sqlite {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    double_text(sqlite_store(&dir), MultitaskStrategy::$strategy, false).await;
                }
            )*
        }
        mod two_processes_postgres {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let Some(store) = postgres_store().await else { return };
                    double_text(store, MultitaskStrategy::$strategy, false).await;
                }
            )*
        }
        mod one_process_memory {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let store = Store::Memory(Arc::new(MemoryCheckpointer::new()));
                    double_text(store, MultitaskStrategy::$strategy, true).await;
                }
            )*
        }
        mod one_process_sqlite {
            use super::*;
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    let dir = tempfile::tempdir().unwrap();
                    double_text(sqlite_store(&dir), MultitaskStrategy::$strategy, true).await;
                }
            )*
        }
    };
}

cross_process! {
    reject_refuses_the_second_run: Reject,
    enqueue_runs_the_second_after_the_first: Enqueue,
    interrupt_stops_the_first_and_keeps_its_steps: Interrupt,
    rollback_stops_the_first_and_deletes_its_steps: Rollback,
}

/// Many runs enqueued at once on one thread run one at a time, each exactly once: each run's
/// entries are contiguous in the log.
async fn enqueued_runs_never_overlap(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let thread = "busy";
    let graph = graph(dir.path()).with_checkpointer(store.open().await);
    let tags: Vec<String> = (0..12).map(|i| format!("r{i:02}")).collect();
    for tag in &tags {
        release(dir.path(), tag);
    }
    let mut runs = Vec::new();
    for tag in &tags {
        let graph = graph.clone();
        let opts = options(thread, MultitaskStrategy::Enqueue);
        let tag = tag.clone();
        runs.push(tokio::spawn(async move {
            graph.invoke(input(&tag)).options(&opts).await
        }));
    }
    for run in runs {
        run.await.unwrap().unwrap();
    }
    let log = log_of(&graph, thread).await;
    assert_eq!(log.len(), tags.len() * 3, "{log:?}");
    let mut seen = Vec::new();
    for chunk in log.chunks(3) {
        let tag = chunk[0]
            .strip_suffix(":start")
            .expect("a run starts a chunk");
        assert_eq!(
            chunk,
            [
                format!("{tag}:start"),
                format!("{tag}:a"),
                format!("{tag}:b")
            ],
            "runs overlapped: {log:?}"
        );
        seen.push(tag.to_string());
    }
    seen.sort();
    assert_eq!(seen, tags, "every run ran exactly once");
    store.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_never_overlap_memory() {
    enqueued_runs_never_overlap(Store::Memory(Arc::new(MemoryCheckpointer::new()))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_never_overlap_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    enqueued_runs_never_overlap(sqlite_store(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_never_overlap_postgres() {
    let Some(store) = postgres_store().await else {
        return;
    };
    enqueued_runs_never_overlap(store).await;
}

/// A holder process killed with SIGKILL keeps the thread busy until its lease expires, and
/// not longer.
async fn a_dead_holder_frees_the_thread_after_its_ttl(store: Store) {
    let dir = tempfile::tempdir().unwrap();
    let thread = "crashed";
    let graph = graph(dir.path()).with_checkpointer(store.open().await);
    let holder = Holder::start(&store, dir.path(), thread, false).await;
    wait_until("the holder run is inside node b", || async {
        log_of(&graph, thread)
            .await
            .contains(&"holder:a".to_string())
    })
    .await;
    let Holder::Process(mut child) = holder else {
        unreachable!()
    };
    child.kill().await.unwrap();
    let killed = Instant::now();
    release(dir.path(), "second");
    let opts = options(thread, MultitaskStrategy::Reject);
    let err = graph
        .invoke(input("second"))
        .options(&opts)
        .await
        .unwrap_err();
    assert!(
        err.is_thread_busy(),
        "a dead holder's lease lives out its ttl: {err}"
    );
    let mut ran = None;
    while killed.elapsed() < Duration::from_secs(10) {
        match graph.invoke(input("second")).options(&opts).await {
            Ok(out) => {
                ran = Some(out);
                break;
            }
            Err(e) if e.is_thread_busy() => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("{e}"),
        }
    }
    let out = ran.expect("the thread was freed once the dead holder's lease expired");
    assert!(
        killed.elapsed() >= lease().ttl - Duration::from_millis(500),
        "freed before the ttl: {:?}",
        killed.elapsed()
    );
    // The dead run's completed steps stay; the new input starts over from them.
    assert_eq!(
        out.state().log,
        strings(&[&HOLDER_PART[..], &SECOND[..]].concat())
    );
    store.finish().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holder_frees_the_thread_after_its_ttl_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    a_dead_holder_frees_the_thread_after_its_ttl(sqlite_store(&dir)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_holder_frees_the_thread_after_its_ttl_postgres() {
    let Some(store) = postgres_store().await else {
        return;
    };
    a_dead_holder_frees_the_thread_after_its_ttl(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_queued_run_leaves_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::Memory(Arc::new(MemoryCheckpointer::new()));
    let graph = graph(dir.path()).with_checkpointer(store.open().await);
    let holder = Holder::start(&store, dir.path(), "t", true).await;
    let activity = || async {
        graph
            .thread_activity(&RunOptions::new().thread_id("t"))
            .await
            .unwrap()
    };
    wait_until("the holder runs", || async { activity().await.is_some() }).await;
    let token = CancelToken::new();
    let queued = {
        let graph = graph.clone();
        let opts = options("t", MultitaskStrategy::Enqueue).cancel_token(token.clone());
        tokio::spawn(async move { graph.invoke(input("second")).options(&opts).await })
    };
    wait_until("the second run is queued", || async {
        activity().await.is_some_and(|a| a.queued == 1)
    })
    .await;
    token.cancel();
    let err = queued.await.unwrap().unwrap_err();
    assert!(err.is_cancelled(), "{err}");
    assert_eq!(activity().await.map(|a| a.queued), Some(0));
    release(dir.path(), "holder");
    assert_eq!(
        holder.ended().await.unwrap(),
        strings(&HOLDER_DONE),
        "the holder never saw the cancelled run"
    );
    assert_eq!(activity().await, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_run_leaves_the_thread() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph(dir.path()).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let opts = options("t", MultitaskStrategy::Reject);
    let run = {
        let graph = graph.clone();
        let opts = opts.clone();
        tokio::spawn(async move { graph.invoke(input("holder")).options(&opts).await })
    };
    let busy = RunOptions::new().thread_id("t");
    wait_until("the run holds the thread", || async {
        graph.thread_activity(&busy).await.unwrap().is_some()
    })
    .await;
    run.abort();
    assert!(run.await.unwrap_err().is_cancelled());
    // Well before the 3 s time to live: the dropped run released the thread.
    let dropped = Instant::now();
    wait_until("the dropped run released the thread", || async {
        graph.thread_activity(&busy).await.unwrap().is_none()
    })
    .await;
    assert!(dropped.elapsed() < Duration::from_secs(2));
    release(dir.path(), "second");
    graph.invoke(input("second")).options(&opts).await.unwrap();
}

#[tokio::test]
async fn a_strategy_needs_a_thread_and_a_checkpointer() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path(), "x");
    let bare = graph(dir.path());
    let strategy = MultitaskStrategy::Enqueue;
    let err = bare
        .invoke(input("x"))
        .thread_id("t")
        .multitask_strategy(strategy)
        .await
        .unwrap_err();
    assert!(matches!(err, GraphError::MissingCheckpointer(_)), "{err}");
    assert!(err.to_string().contains("multitask strategy"), "{err}");
    let with_cp = bare.with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let err = with_cp
        .invoke(input("x"))
        .multitask_strategy(strategy)
        .await
        .unwrap_err();
    assert!(matches!(err, GraphError::MissingThread(_)), "{err}");
    // Without a strategy nothing changes: no lease, no thread needed.
    with_cp.invoke(input("x")).await.unwrap();
}

#[tokio::test]
async fn a_checkpointer_without_leases_says_so() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path(), "x");
    // A delegating checkpointer that implements only the required methods.
    let plain = Arc::new(Counting::new(Arc::new(MemoryCheckpointer::new())));
    let graph = graph(dir.path()).with_checkpointer(plain);
    let err = graph
        .invoke(input("x"))
        .options(&options("t", MultitaskStrategy::Reject))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            GraphError::Checkpoint(CheckpointError::Unsupported { .. })
        ),
        "{err}"
    );
    assert!(err.to_string().contains("Checkpointer::lease"), "{err}");
    // Runs without a strategy still work on it.
    graph.invoke(input("x")).thread_id("t").await.unwrap();
}

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Outer {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

#[tokio::test]
async fn a_subgraph_inside_a_leased_run_does_not_wait_for_its_parent() {
    let dir = tempfile::tempdir().unwrap();
    release(dir.path(), "inner");
    let outer = GraphBuilder::<Outer>::new("outer")
        .subgraph(
            "inner",
            graph(dir.path()),
            |_: &Outer| input("inner"),
            |l: &Log| OuterUpdate::new().log(l.log.clone()),
        )
        .edge(START, "inner")
        .edge("inner", END)
        .compile()
        .unwrap()
        .with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        outer
            .invoke(OuterUpdate::new())
            .options(&options("t", MultitaskStrategy::Reject)),
    )
    .await
    .expect("the subgraph ran without waiting for the thread its parent holds")
    .unwrap();
    assert_eq!(
        out.state().log,
        strings(&["inner:start", "inner:a", "inner:b"])
    );
}

/// A database written by the kit before leases (schema version 1) gains the lease table when
/// opened, keeping its threads. The file: the schema-2 fixture of `sqlite_migration.rs` with
/// its lease table taken out, as a schema-1 kit left it.
#[tokio::test]
async fn a_version_1_sqlite_file_migrates_to_leases() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.sqlite");
    std::fs::copy(
        concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sqlite-v2.sqlite"
        ),
        &path,
    )
    .unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE kit_thread_leases; UPDATE kit_schema_version SET version = 1;",
        )
        .unwrap();
    }
    let cp = Arc::new(SqliteCheckpointer::open(&path).unwrap());
    let kept = cp.history("chain", "", None).await.unwrap();
    assert_eq!(kept.len(), 12, "the old thread was kept");
    let graph = graph(dir.path()).with_checkpointer(cp);
    release(dir.path(), "new");
    let out = graph
        .invoke(input("new"))
        .options(&options("t", MultitaskStrategy::Reject))
        .await
        .unwrap();
    assert_eq!(out.state().log, ["new:start", "new:a", "new:b"]);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: i64 = conn
        .query_row("SELECT version FROM kit_schema_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, kit::checkpoint::sqlite::SQLITE_SCHEMA_VERSION);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_version_1_postgres_schema_migrates_to_leases() {
    let Some(Store::Postgres { url, schema }) = postgres_store().await else {
        return;
    };
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP TABLE {schema}.kit_thread_leases; UPDATE {schema}.kit_schema_version SET version = 1;"
        ))
        .await
        .unwrap();
    let cp = PostgresCheckpointer::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let state = cp
        .lease(
            "t",
            "r1",
            kit::checkpoint::LeaseOp::Join(MultitaskStrategy::Reject),
            lease().ttl,
        )
        .await
        .unwrap();
    assert!(
        matches!(state, kit::checkpoint::LeaseState::Running { .. }),
        "{state:?}"
    );
    let version: i64 = client
        .query_one(
            &format!("SELECT version FROM {schema}.kit_schema_version"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, kit::checkpoint::postgres::POSTGRES_SCHEMA_VERSION);
    cp.drop_schema().await.unwrap();
}

/// Runs in one process hand the thread over at once, not at the next poll: with a poll of 10 s,
/// an enqueued run starts as soon as the holder leaves, and an interrupt stops the holder at
/// once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_in_one_process_are_woken_without_waiting_for_the_poll() {
    for storage in ["memory", "sqlite"] {
        let dir = tempfile::tempdir().unwrap();
        let cp: Arc<dyn Checkpointer> = match storage {
            "memory" => Arc::new(MemoryCheckpointer::new()),
            _ => Arc::new(SqliteCheckpointer::open(dir.path().join("t.sqlite")).unwrap()),
        };
        let graph = graph(dir.path()).with_checkpointer(cp);
        let slow_poll = LeaseOptions {
            ttl: Duration::from_secs(30),
            poll: Duration::from_secs(10),
        };
        let opts = |strategy| options("t", strategy).lease(slow_poll);
        let start = |tag: &'static str, strategy| {
            let graph = graph.clone();
            let opts = opts(strategy);
            tokio::spawn(async move { graph.invoke(input(tag)).options(&opts).await })
        };
        let holder = start("holder", MultitaskStrategy::Enqueue);
        let busy = RunOptions::new().thread_id("t");
        wait_until("the holder runs", || async {
            graph.thread_activity(&busy).await.unwrap().is_some()
        })
        .await;
        release(dir.path(), "second");
        let second = start("second", MultitaskStrategy::Enqueue);
        wait_until("the second run is queued", || async {
            graph
                .thread_activity(&busy)
                .await
                .unwrap()
                .is_some_and(|a| a.queued == 1)
        })
        .await;
        let released = Instant::now();
        release(dir.path(), "holder");
        holder.await.unwrap().unwrap();
        second.await.unwrap().unwrap();
        assert!(
            released.elapsed() < Duration::from_secs(3),
            "{storage}: the queued run waited for its poll: {:?}",
            released.elapsed()
        );

        // An interrupt reaches a holder in this process at once.
        let holder = start("third", MultitaskStrategy::Reject);
        wait_until("the third run is inside node b", || async {
            log_of(&graph, "t").await.contains(&"third:a".to_string())
        })
        .await;
        let asked = Instant::now();
        release(dir.path(), "fourth");
        let fourth = start("fourth", MultitaskStrategy::Interrupt);
        let err = holder.await.unwrap().unwrap_err();
        assert!(matches!(err, GraphError::Preempted { .. }), "{err}");
        fourth.await.unwrap().unwrap();
        assert!(
            asked.elapsed() < Duration::from_secs(3),
            "{storage}: the holder heard of the interrupt only at its poll: {:?}",
            asked.elapsed()
        );
    }
}

/// Joins raced from two checkpointer instances (two connections, as two processes have) on
/// one storage: exactly one run is granted the thread.
async fn racing_joins_grant_the_thread_once(a: Arc<dyn Checkpointer>, b: Arc<dyn Checkpointer>) {
    for round in 0..10 {
        let thread = format!("race-{round}");
        let mut joins = Vec::new();
        for i in 0..16 {
            let cp = if i % 2 == 0 { a.clone() } else { b.clone() };
            let thread = thread.clone();
            joins.push(tokio::spawn(async move {
                cp.lease(
                    &thread,
                    &format!("run-{i}"),
                    kit::checkpoint::LeaseOp::Join(MultitaskStrategy::Reject),
                    Duration::from_secs(30),
                )
                .await
                .unwrap()
            }));
        }
        let mut granted = 0;
        for join in joins {
            match join.await.unwrap() {
                kit::checkpoint::LeaseState::Running { .. } => granted += 1,
                kit::checkpoint::LeaseState::Busy { .. } => {}
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(
            granted, 1,
            "round {round}: the thread was granted {granted} times"
        );
        let activity = a.thread_activity(&thread).await.unwrap().unwrap();
        assert!(activity.running.is_some());
        assert_eq!(activity.queued, 0, "rejected runs leave no row");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_joins_grant_the_thread_once_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("race.sqlite");
    let a = Arc::new(SqliteCheckpointer::open(&path).unwrap());
    let b = Arc::new(SqliteCheckpointer::open(&path).unwrap());
    racing_joins_grant_the_thread_once(a, b).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_joins_grant_the_thread_once_postgres() {
    let Some(Store::Postgres { url, schema }) = postgres_store().await else {
        return;
    };
    let a = Arc::new(
        PostgresCheckpointer::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    let b = Arc::new(
        PostgresCheckpointer::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    racing_joins_grant_the_thread_once(a.clone(), b).await;
    a.drop_schema().await.unwrap();
}

/// A checkpointer whose lease renewals fail once `failing` is set (a store that went away).
struct FailingRenewals {
    inner: Arc<MemoryCheckpointer>,
    failing: std::sync::atomic::AtomicBool,
}

#[kit::async_trait]
impl Checkpointer for FailingRenewals {
    async fn put(&self, w: kit::checkpoint::CheckpointWrite) -> Result<(), CheckpointError> {
        self.inner.put(w).await
    }
    async fn put_writes(
        &self,
        t: &str,
        ns: &str,
        id: &str,
        w: Vec<kit::checkpoint::PendingWrite>,
    ) -> Result<(), CheckpointError> {
        self.inner.put_writes(t, ns, id, w).await
    }
    async fn load(
        &self,
        t: &str,
        ns: &str,
        id: Option<&str>,
    ) -> Result<Option<kit::checkpoint::LoadedCheckpoint>, CheckpointError> {
        self.inner.load(t, ns, id).await
    }
    async fn history(
        &self,
        t: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<kit::checkpoint::CheckpointMeta>, CheckpointError> {
        self.inner.history(t, ns, limit).await
    }
    async fn delete_thread(&self, t: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(t).await
    }
    async fn prune(
        &self,
        t: &str,
        s: kit::checkpoint::PruneStrategy,
    ) -> Result<kit::checkpoint::PruneReport, CheckpointError> {
        self.inner.prune(t, s).await
    }
    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        self.inner.delete_threads_before(cutoff).await
    }
    async fn threads(&self) -> Result<Vec<kit::checkpoint::ThreadInfo>, CheckpointError> {
        self.inner.threads().await
    }
    async fn lease(
        &self,
        t: &str,
        run: &str,
        op: kit::checkpoint::LeaseOp,
        ttl: Duration,
    ) -> Result<kit::checkpoint::LeaseState, CheckpointError> {
        if op == kit::checkpoint::LeaseOp::Renew
            && self.failing.load(std::sync::atomic::Ordering::SeqCst)
        {
            return Err(CheckpointError::Backend("the store went away".into()));
        }
        self.inner.lease(t, run, op, ttl).await
    }
    async fn thread_activity(
        &self,
        t: &str,
    ) -> Result<Option<kit::checkpoint::ThreadActivity>, CheckpointError> {
        self.inner.thread_activity(t).await
    }
}

/// A run that cannot renew its lease stops at half its time to live, while its row still
/// stands (so no other run can have taken the thread yet), and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_cannot_renew_stops_before_its_lease_expires() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(FailingRenewals {
        inner: Arc::new(MemoryCheckpointer::new()),
        failing: std::sync::atomic::AtomicBool::new(false),
    });
    let graph = graph(dir.path()).with_checkpointer(store.clone());
    let ttl = Duration::from_millis(1200);
    let opts = RunOptions::new()
        .thread_id("t")
        .multitask_strategy(MultitaskStrategy::Reject)
        .lease(LeaseOptions {
            ttl,
            poll: Duration::from_millis(50),
        });
    let run = {
        let graph = graph.clone();
        let opts = opts.clone();
        tokio::spawn(async move { graph.invoke(input("holder")).options(&opts).await })
    };
    wait_until("the run is inside node b", || async {
        log_of(&graph, "t").await.contains(&"holder:a".to_string())
    })
    .await;
    let failing_since = Instant::now();
    store
        .failing
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let err = run.await.unwrap().unwrap_err();
    let took = failing_since.elapsed();
    assert!(matches!(err, GraphError::LeaseLost { .. }), "{err}");
    assert!(err.to_string().contains("LeaseOptions::ttl"), "{err}");
    assert!(took < ttl, "it stopped only after {took:?}, past the ttl");
    // What it completed is kept.
    assert_eq!(log_of(&graph, "t").await, strings(&HOLDER_PART));
}

/// A streamed run leaves its thread before it reports `run_end`, so a client that starts the
/// next run on seeing it is not refused; a run stopped by a newer one says why on its stream.
async fn a_streamed_run_frees_the_thread_before_run_end_and_a_stopped_one_says_why(
    cp: Arc<dyn Checkpointer>,
) {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let graph = graph(dir.path()).with_checkpointer(cp);
    let opts = options("t", MultitaskStrategy::Reject);
    release(dir.path(), "first");
    let mut stream = graph.stream_events(input("first"), &opts);
    while let Some(event) = stream.next().await {
        if event.kind() == kit::EventKind::RunEnd {
            break;
        }
    }
    // The stream is still open: the next run starts the moment `run_end` is in hand.
    release(dir.path(), "next");
    graph.invoke(input("next")).options(&opts).await.unwrap();
    drop(stream);

    let mut stream = graph.stream_events(input("held"), &opts);
    wait_until("the held run is inside node b", || async {
        log_of(&graph, "t").await.contains(&"held:a".to_string())
    })
    .await;
    release(dir.path(), "newer");
    graph
        .invoke(input("newer"))
        .options(&options("t", MultitaskStrategy::Interrupt))
        .await
        .unwrap();
    let mut reason = None;
    while let Some(event) = stream.next().await {
        if let kit::event::EventData::Cancelled { reason: r } = &event.data {
            reason = Some(r.clone());
        }
    }
    let reason = reason.expect("the stopped run's stream ends with a cancelled event");
    assert!(
        reason.contains("newer run") && reason.contains("interrupt"),
        "{reason}"
    );
}

#[tokio::test]
async fn lease_options_that_cannot_work_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph(dir.path()).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    for (ttl, poll, says) in [
        (Duration::from_secs(1), Duration::ZERO, "poll is zero"),
        (
            Duration::from_millis(500),
            Duration::from_millis(200),
            "3 x poll",
        ),
    ] {
        let err = graph
            .invoke(input("x"))
            .options(&options("t", MultitaskStrategy::Enqueue).lease(LeaseOptions { ttl, poll }))
            .await
            .unwrap_err();
        assert!(matches!(err, GraphError::InvalidOptions(_)), "{err}");
        assert!(err.to_string().contains(says), "{err}");
    }
    assert_eq!(
        graph
            .thread_activity(&RunOptions::new().thread_id("t"))
            .await
            .unwrap(),
        None,
        "a refused run never joined"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_frees_the_thread_before_run_end_memory() {
    let cp = Arc::new(MemoryCheckpointer::new());
    a_streamed_run_frees_the_thread_before_run_end_and_a_stopped_one_says_why(cp).await;
}

/// On PostgreSQL leaving the lease is real I/O, so a run that left only after `run_end` would
/// be caught by the client's next run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_run_frees_the_thread_before_run_end_postgres() {
    let Some(Store::Postgres { url, schema }) = postgres_store().await else {
        return;
    };
    let cp = Arc::new(
        PostgresCheckpointer::connect_in_schema(&url, &schema)
            .await
            .unwrap(),
    );
    a_streamed_run_frees_the_thread_before_run_end_and_a_stopped_one_says_why(cp.clone()).await;
    cp.drop_schema().await.unwrap();
}

/// Two messages sent to an agent at once on one thread ("double texting"), enqueued: each is
/// answered in turn, the second seeing the whole first exchange. Without a strategy one of the
/// two would fail with a conflict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_answers_two_messages_sent_at_once_in_turn() {
    use kit::message::{Message, Role, ToolCall};
    use kit::testing::ScriptedModel;
    use kit::tool::{Tool, ToolError};

    // The model calls the slow tool for a new question, then answers it.
    let model = ScriptedModel::from_fn(|request| {
        let messages: Vec<Message> = request.messages.iter().cloned().collect();
        let last = messages
            .last()
            .cloned()
            .unwrap_or_else(|| Message::user(""));
        Ok(match last.role {
            Role::Tool => {
                let question = messages
                    .iter()
                    .rev()
                    .find(|m| m.role == Role::User)
                    .map(Message::text)
                    .unwrap_or_default();
                Message::assistant(format!("answered: {question}"))
            }
            _ => Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::new("slow", serde_json::json!({}))],
            ),
        })
    });
    let slow = Tool::from_fn(
        "slow",
        "Takes a while.",
        serde_json::json!({"type": "object"}),
        |_, _| async {
            tokio::time::sleep(Duration::from_millis(150)).await;
            Ok::<_, ToolError>("done")
        },
    );
    let agent = Arc::new(
        kit::Agent::builder()
            .model(model)
            .tool(slow)
            .checkpointer(Arc::new(MemoryCheckpointer::new()))
            .build()
            .unwrap(),
    );
    let send = |text: &'static str| {
        let agent = agent.clone();
        tokio::spawn(async move {
            agent
                .invoke(text)
                .thread_id("chat")
                .multitask_strategy(MultitaskStrategy::Enqueue)
                .await
        })
    };
    let first = send("first");
    tokio::time::sleep(Duration::from_millis(30)).await;
    let second = send("second");
    first.await.unwrap().unwrap();
    let out = second.await.unwrap().unwrap();
    let texts: Vec<(Role, String)> = out
        .state()
        .messages
        .iter()
        .map(|m| (m.role, m.text()))
        .collect();
    let expected = [
        (Role::User, "first"),
        (Role::Assistant, ""),
        (Role::Tool, "done"),
        (Role::Assistant, "answered: first"),
        (Role::User, "second"),
        (Role::Assistant, ""),
        (Role::Tool, "done"),
        (Role::Assistant, "answered: second"),
    ];
    let expected: Vec<(Role, String)> = expected.iter().map(|(r, t)| (*r, t.to_string())).collect();
    assert_eq!(texts, expected);
}

/// Deleting a thread deletes its lease rows too: the run holding it stops at its next
/// renewal (its thread is gone), and the thread is idle at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_busy_thread_frees_it() {
    for storage in ["memory", "sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let Some((cp, pg)) = open_storage(storage, dir.path()).await else {
            continue;
        };
        let graph = graph(dir.path()).with_checkpointer(cp);
        let opts = options("t", MultitaskStrategy::Reject);
        let run = {
            let graph = graph.clone();
            let opts = opts.clone();
            tokio::spawn(async move { graph.invoke(input("holder")).options(&opts).await })
        };
        let busy = RunOptions::new().thread_id("t");
        wait_until("the run holds the thread", || async {
            graph.thread_activity(&busy).await.unwrap().is_some()
        })
        .await;
        graph.delete_thread(&busy).await.unwrap();
        assert_eq!(
            graph.thread_activity(&busy).await.unwrap(),
            None,
            "{storage}"
        );
        let err = run.await.unwrap().unwrap_err();
        assert!(
            matches!(err, GraphError::LeaseLost { .. }),
            "{storage}: {err}"
        );
        if let Some(store) = pg {
            store.finish().await;
        }
    }
}

/// `start -> a -> END`, where `a` marks the file `entered` and then waits for `gate`: a run
/// held between its input checkpoint and `a`'s.
fn gated_graph(gate: &Path, entered: &Path) -> Graph<Log> {
    let (gate, entered) = (gate.to_path_buf(), entered.to_path_buf());
    GraphBuilder::<Log>::new("gated")
        .node("a", move |s: Arc<Log>, _: NodeContext| {
            let (gate, entered) = (gate.clone(), entered.clone());
            async move {
                std::fs::write(&entered, b"").unwrap();
                let deadline = Instant::now() + Duration::from_secs(30);
                while !gate.exists() && Instant::now() < deadline {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                LogUpdate::new().log(vec![format!("{}:a", s.tag)])
            }
        })
        .edge(START, "a")
        .edge("a", END)
        .compile()
        .unwrap()
}

/// A leased run of [`gated_graph`] on thread `t`, held inside node `a` (its input checkpoint
/// is written, `a`'s is not). Writing the returned gate file lets it go on.
async fn hold_inside_a(
    cp: Arc<dyn Checkpointer>,
    dir: &Path,
) -> (
    Graph<Log>,
    tokio::task::JoinHandle<Result<(), GraphError>>,
    PathBuf,
) {
    let (gate, entered) = (dir.join("gate"), dir.join("entered"));
    let graph = gated_graph(&gate, &entered).with_checkpointer(cp);
    let run = {
        let graph = graph.clone();
        let opts = options("t", MultitaskStrategy::Reject);
        tokio::spawn(async move {
            graph
                .invoke(input("holder"))
                .options(&opts)
                .await
                .map(|_| ())
        })
    };
    wait_until("the run is inside node a", || async { entered.exists() }).await;
    (graph, run, gate)
}

/// Deleted while a node runs: the run's next checkpoint finds its thread gone (a conflict in
/// the back-end), and the run reports what happened to it, the lost lease, as it does when
/// its renewal notices first. Node `a` is held on a gate here so the deletion lands between
/// two checkpoints every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_deleted_between_checkpoints_loses_its_lease() {
    for storage in ["memory", "sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let Some((cp, pg)) = open_storage(storage, dir.path()).await else {
            continue;
        };
        let (graph, run, gate) = hold_inside_a(cp, dir.path()).await;
        let busy = RunOptions::new().thread_id("t");
        graph.delete_thread(&busy).await.unwrap();
        std::fs::write(&gate, b"").unwrap();
        let err = run.await.unwrap().unwrap_err();
        assert!(
            matches!(err, GraphError::LeaseLost { .. }),
            "{storage}: {err}"
        );
        // Negative: nothing of the deleted thread came back.
        assert_eq!(
            graph.thread_activity(&busy).await.unwrap(),
            None,
            "{storage}"
        );
        assert!(graph.get_state(&busy).await.unwrap().is_none(), "{storage}");
        if let Some(store) = pg {
            store.finish().await;
        }
    }
}

/// Negative: a writer that takes no lease (`update_state`) moves the head under a leased run.
/// The run still holds its lease, so what it reports is the conflict, not a lost lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leased_run_overtaken_by_an_unleased_write_reports_the_conflict() {
    for storage in ["memory", "sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let Some((cp, pg)) = open_storage(storage, dir.path()).await else {
            continue;
        };
        let (graph, run, gate) = hold_inside_a(cp, dir.path()).await;
        let plain = RunOptions::new().thread_id("t");
        graph
            .update_state(&plain, LogUpdate::new().log(vec!["edit".into()]), None)
            .await
            .unwrap();
        std::fs::write(&gate, b"").unwrap();
        let err = run.await.unwrap().unwrap_err();
        assert!(
            matches!(
                err,
                GraphError::Checkpoint(CheckpointError::Conflict { .. })
            ),
            "{storage}: {err}"
        );
        // The run left its lease as it ended: the thread is idle.
        assert_eq!(
            graph.thread_activity(&plain).await.unwrap(),
            None,
            "{storage}"
        );
        if let Some(store) = pg {
            store.finish().await;
        }
    }
}

/// `ThreadBusy` names the holder by the run id its events carry.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_names_its_holder_by_its_run_id() {
    use futures::StreamExt;
    let dir = tempfile::tempdir().unwrap();
    let graph = graph(dir.path()).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let opts = options("t", MultitaskStrategy::Reject);
    let mut stream = graph.stream_events(input("holder"), &opts);
    let run_id = loop {
        let event = stream.next().await.expect("a run_start event");
        if event.kind() == kit::EventKind::RunStart {
            break event.run_id;
        }
    };
    wait_until("the holder is inside node b", || async {
        log_of(&graph, "t").await.contains(&"holder:a".to_string())
    })
    .await;
    let err = graph
        .invoke(input("second"))
        .options(&opts)
        .await
        .unwrap_err();
    match err {
        GraphError::ThreadBusy { holder, .. } => assert_eq!(holder, run_id),
        other => panic!("{other}"),
    }
    release(dir.path(), "holder");
    while stream.next().await.is_some() {}
}

/// `Checkpointer::rollback_after` on its own: the checkpoints after the marker go, the head
/// moves back to the newest one left, and other threads are untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rollback_after_deletes_only_what_came_after_the_marker() {
    for storage in ["memory", "sqlite", "postgres"] {
        let dir = tempfile::tempdir().unwrap();
        let Some((cp, pg)) = open_storage(storage, dir.path()).await else {
            continue;
        };
        let graph = graph(dir.path()).with_checkpointer(cp.clone());
        for tag in ["one", "two", "other"] {
            release(dir.path(), tag);
        }
        let t = RunOptions::new().thread_id("t");
        graph.invoke(input("one")).options(&t).await.unwrap();
        let marker = cp.head("t", "").await.unwrap().unwrap();
        graph.invoke(input("two")).options(&t).await.unwrap();
        graph
            .invoke(input("other"))
            .thread_id("other")
            .await
            .unwrap();

        let deleted = cp.rollback_after("t", &marker).await.unwrap();
        assert_eq!(
            deleted, 3,
            "{storage}: the second run's input and its two steps"
        );
        assert_eq!(
            cp.head("t", "").await.unwrap(),
            Some(marker.clone()),
            "{storage}"
        );
        assert_eq!(
            log_of(&graph, "t").await,
            strings(&["one:start", "one:a", "one:b"])
        );
        assert_eq!(
            log_of(&graph, "other").await,
            strings(&OTHER),
            "{storage}: another thread is untouched"
        );
        // The thread goes on from the marker.
        graph.invoke(input("two")).options(&t).await.unwrap();
        assert_eq!(log_of(&graph, "t").await.len(), 6, "{storage}");
        assert_eq!(cp.rollback_after("nobody", &marker).await.unwrap(), 0);
        if let Some(store) = pg {
            store.finish().await;
        }
    }
}

/// A time to live too long for the clock (`Duration::MAX`) is taken, not a panic: the run
/// holds its lease and finishes.
#[tokio::test]
async fn a_lease_with_the_longest_time_to_live_runs() {
    let dir = tempfile::tempdir().unwrap();
    let graph = graph(dir.path()).with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    release(dir.path(), "forever");
    let opts = RunOptions::new()
        .thread_id("t")
        .multitask_strategy(MultitaskStrategy::Reject)
        .lease(LeaseOptions {
            ttl: Duration::MAX,
            poll: Duration::from_millis(20),
        });
    graph.invoke(input("forever")).options(&opts).await.unwrap();
    assert_eq!(
        log_of(&graph, "t").await,
        strings(&["forever:start", "forever:a", "forever:b"])
    );
}
