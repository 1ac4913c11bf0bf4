//! Crash test: a child process runs a long graph on a SQLite file and is killed with `SIGKILL`
//! at random moments, many times. After every kill the parent reopens the file and checks the
//! history (every checkpoint loads, steps are contiguous, each state is exactly the steps
//! before it); the next child resumes from the head. At the end every node ran exactly once,
//! in order.
//!
//! The child is this test binary, re-executed with `--exact crash_child` and an environment
//! variable naming the database (`crash_child` does nothing without it). The random seed is
//! printed; set `KIT_CRASH_SEED` to replay a run.

use std::io::{BufRead, BufReader};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use kit::checkpoint::{CheckpointSource, SqliteCheckpointer};
use kit::graph::{Durability, GraphBuilder, NodeContext};
use kit::{END, Graph, Resume, RunOptions, START, State};
use serde::{Deserialize, Serialize};

const STEPS: usize = 200;
const MIN_KILLS: usize = 25;
const CHILD_DB: &str = "KIT_CRASH_CHILD_DB";
const CHILD_THREAD: &str = "KIT_CRASH_CHILD_THREAD";
const CHILD_DURABILITY: &str = "KIT_CRASH_CHILD_DURABILITY";
const READY: &str = "KIT_CRASH_CHILD_READY";

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Log {
    #[state(reducer = kit::reducers::append)]
    log: Vec<String>,
}

fn name(i: usize) -> String {
    format!("n{i:03}")
}

/// `n000 -> n001 -> ... -> n199`; each node waits a little (so a kill lands mid-run) and
/// appends its own name once.
fn graph() -> Graph<Log> {
    let mut b = GraphBuilder::<Log>::new("crash");
    for i in 0..STEPS {
        let me = name(i);
        b = b.node(me.clone(), move |_: Arc<Log>, _: NodeContext| {
            let me = me.clone();
            async move {
                tokio::time::sleep(Duration::from_micros(200)).await;
                LogUpdate::new().log(vec![me])
            }
        });
    }
    b = b.edge(START, name(0));
    for i in 1..STEPS {
        b = b.edge(name(i - 1), name(i));
    }
    b.edge(name(STEPS - 1), END).compile().unwrap()
}

fn options(thread: &str, durability: Durability) -> RunOptions {
    RunOptions::new()
        .thread_id(thread)
        .durability(durability)
        .recursion_limit(10 * STEPS)
}

/// The child: opens the file, starts or resumes the thread, runs to the end (unless killed).
#[test]
fn crash_child() {
    let Ok(db) = std::env::var(CHILD_DB) else {
        return; // not started by the crash test: nothing to do
    };
    let thread = std::env::var(CHILD_THREAD).unwrap();
    let durability = match std::env::var(CHILD_DURABILITY).as_deref() {
        Ok("async") => Durability::Async,
        _ => Durability::Sync,
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let cp = Arc::new(SqliteCheckpointer::open(&db).unwrap());
        let graph = graph().with_checkpointer(cp);
        let opts = options(&thread, durability);
        println!("{READY}");
        match graph.get_state(&opts).await.unwrap() {
            None => {
                graph.invoke(LogUpdate::new()).options(&opts).await.unwrap();
            }
            Some(snapshot) if !snapshot.next.is_empty() => {
                graph.resume(Resume::Continue).options(&opts).await.unwrap();
            }
            Some(_) => {}
        }
    });
}

/// Reopens the file and checks the thread's whole history; returns the head's step (-2 when
/// the thread has no checkpoint yet).
async fn verify(db: &Path, thread: &str) -> i64 {
    let cp = Arc::new(SqliteCheckpointer::open(db).unwrap());
    let graph = graph().with_checkpointer(cp);
    let opts = options(thread, Durability::Sync);
    // Loads every checkpoint with its state.
    let history = graph.state_history(&opts, None).await.unwrap();
    let Some(head) = history.first() else {
        return -2;
    };
    let head_step = head.checkpoint.step;
    assert_eq!(
        history.len() as i64,
        head_step + 2,
        "one checkpoint per step, input included"
    );
    for (i, snapshot) in history.iter().enumerate() {
        let step = head_step - i as i64;
        let cp = &snapshot.checkpoint;
        assert_eq!(cp.step, step, "steps are contiguous");
        let expected: Vec<String> = (0..=step).map(|s| name(s as usize)).collect();
        assert_eq!(
            snapshot.values.log, expected,
            "the state at step {step} is exactly the steps before it"
        );
        let next: Vec<String> = if (step + 1) < STEPS as i64 {
            vec![name((step + 1) as usize)]
        } else {
            Vec::new()
        };
        assert_eq!(snapshot.next, next);
        match history.get(i + 1) {
            Some(parent) => {
                assert_eq!(cp.parent_id.as_deref(), Some(parent.checkpoint.id.as_str()));
                assert_eq!(cp.source, CheckpointSource::Loop);
            }
            None => {
                assert_eq!(step, -1);
                assert_eq!(cp.source, CheckpointSource::Input);
                assert_eq!(cp.parent_id, None);
            }
        }
    }
    head_step
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) % n
    }
}

#[test]
fn sigkill_at_random_points_never_loses_or_repeats_a_step() {
    if std::env::var_os(CHILD_DB).is_some() {
        return; // inside a child
    }
    let seed = std::env::var("KIT_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| kit::ids::now_millis() | 1);
    eprintln!("crash test seed: {seed} (set KIT_CRASH_SEED={seed} to replay)");
    let mut rng = Rng(seed);
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("crash.sqlite");
    let exe = std::env::current_exe().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();

    let mut kills = 0;
    let mut lives = 0;
    let mut thread_no = 0;
    while kills < MIN_KILLS {
        let thread = format!("crash-{thread_no}");
        let mut last_step = -2;
        loop {
            lives += 1;
            let durability = if lives % 2 == 0 { "async" } else { "sync" };
            let mut child = Command::new(&exe)
                .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
                .env(CHILD_DB, &db)
                .env(CHILD_THREAD, &thread)
                .env(CHILD_DURABILITY, durability)
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let mut stdout = BufReader::new(child.stdout.take().unwrap());
            let mut line = String::new();
            while stdout.read_line(&mut line).unwrap() > 0 && !line.contains(READY) {
                line.clear();
            }
            // A random moment of the run: before, during or (rarely) after it.
            std::thread::sleep(Duration::from_micros(rng.below(40_000)));
            // `Child::kill` sends SIGKILL on Unix.
            let _ = child.kill();
            let status = child.wait().unwrap();
            let killed = status.signal() == Some(libc::SIGKILL);
            assert!(
                killed || status.success(),
                "the child failed on its own ({status}); run it alone to see why"
            );
            let step = rt.block_on(verify(&db, &thread));
            assert!(
                step >= last_step,
                "the head went back from step {last_step} to {step}"
            );
            last_step = step;
            if killed {
                kills += 1;
            } else {
                // Finished: every node exactly once, in order.
                assert_eq!(
                    step,
                    STEPS as i64 - 1,
                    "a finished run reached the last step"
                );
                let cp = Arc::new(SqliteCheckpointer::open(&db).unwrap());
                let state = rt
                    .block_on(
                        graph()
                            .with_checkpointer(cp)
                            .get_state(&options(&thread, Durability::Sync)),
                    )
                    .unwrap()
                    .unwrap();
                let all: Vec<String> = (0..STEPS).map(name).collect();
                assert_eq!(state.values.log, all);
                break;
            }
        }
        thread_no += 1;
    }
    eprintln!("crash test: {kills} kills over {lives} child runs on {thread_no} threads");
}
