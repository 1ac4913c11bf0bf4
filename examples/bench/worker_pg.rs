//! W7 across processes: the W7 runs submitted over loopback HTTP to 1, 2 and 4 worker
//! processes sharing one PostgreSQL run store.
//!
//! The program starts itself again as each worker (`bench w7-worker --schema=S`, a mode not
//! listed among the workloads): the worker prints its URL, serves until it reads `stop` on its
//! standard input, then prints how many times it executed each run. The submitter spreads the
//! runs over the workers' URLs round-robin and waits until the store holds no pending or
//! running run. Checked (untimed): every run ended `success` after one attempt, and the
//! workers executed each exactly once between them.
//!
//! CPU time is read from `/proc` for the workers, the submitter and every `postgres` process
//! of the machine, so the figures say what share PostgreSQL took. All of them share the
//! machine's cores: with more worker processes than cores they contend.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::fail;
use crate::measure::cpu_s;
use crate::worker::{W7_CAPACITY, w7_submit};

/// Runs per round, per worker count.
const RUNS: usize = 2000;
const QUICK_RUNS: usize = 200;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .find_map(|a| a.strip_prefix(name).map(String::from))
}

/// CPU seconds of every process of the machine named `postgres` (the server and its
/// backends).
fn postgres_cpu_s() -> f64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    let mut total = 0.0;
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "postgres" {
            total += cpu_s(pid);
        }
    }
    total
}

struct Child {
    process: tokio::process::Child,
    url: String,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
}

async fn start_worker(exe: &std::path::Path, schema: &str, index: usize) -> Child {
    let mut process = tokio::process::Command::new(exe)
        .arg("w7-worker")
        .arg(format!("--schema={schema}"))
        .arg(format!("--index={index}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| fail(&format!("W7-PG: starting a worker process: {e}")));
    let Some(stdout) = process.stdout.take() else {
        fail("W7-PG: a worker's standard output is missing")
    };
    let mut lines = BufReader::new(stdout).lines();
    let url = match tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await {
        Ok(Ok(Some(line))) => match line.strip_prefix("URL ") {
            Some(url) => url.to_string(),
            None => fail(&format!("W7-PG: a worker said `{line}` instead of its URL")),
        },
        other => fail(&format!("W7-PG: a worker did not start: {other:?}")),
    };
    Child {
        process,
        url,
        lines,
    }
}

/// Stops a worker and returns how many times it executed each run.
async fn stop_worker(mut child: Child) -> HashMap<String, usize> {
    if let Some(stdin) = child.process.stdin.as_mut() {
        let _ = stdin.write_all(b"stop\n").await;
        let _ = stdin.flush().await;
    }
    let mut executions = HashMap::new();
    loop {
        match tokio::time::timeout(Duration::from_secs(60), child.lines.next_line()).await {
            Ok(Ok(Some(line))) => {
                if line == "END" {
                    break;
                }
                let mut parts = line.split_whitespace();
                if let (Some("EXEC"), Some(id), Some(n)) =
                    (parts.next(), parts.next(), parts.next())
                {
                    executions.insert(id.to_string(), n.parse().unwrap_or(0));
                }
            }
            other => fail(&format!("W7-PG: a worker stopped badly: {other:?}")),
        }
    }
    let _ = child.process.wait().await;
    executions
}

/// A connection for the submitter's own queries, in the benchmark's schema.
async fn monitor(url: &str, schema: &str) -> tokio_postgres::Client {
    let mut config: tokio_postgres::Config = url
        .parse()
        .unwrap_or_else(|e| fail(&format!("W7-PG: KIT_BENCH_POSTGRES_URL: {e}")));
    config.options(format!("-c search_path={schema}"));
    let (client, connection) = config
        .connect(tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| fail(&format!("W7-PG: connecting: {e}")));
    tokio::spawn(connection);
    client
}

async fn count(client: &tokio_postgres::Client, sql: &str) -> i64 {
    match client.query_one(sql, &[]).await {
        Ok(row) => row.try_get(0).unwrap_or(-1),
        Err(e) => fail(&format!("W7-PG: `{sql}`: {e}")),
    }
}

/// Waits until no run is pending or running.
async fn wait_idle(client: &tokio_postgres::Client) {
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let active = count(
            client,
            "SELECT count(*) FROM (SELECT 1 FROM kit_worker_runs
             WHERE status IN ('pending', 'running') LIMIT 1) AS any_active",
        )
        .await;
        if active == 0 {
            return;
        }
        if Instant::now() > deadline {
            fail("W7-PG: runs still active after 10 minutes");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// `bench w7pg [--quick] [--runs=N] [--workers=1,2,4]`.
pub(crate) fn w7pg(args: &[String]) {
    let Ok(url) = std::env::var("KIT_BENCH_POSTGRES_URL") else {
        println!("# W7-PG skipped: set KIT_BENCH_POSTGRES_URL=postgres://... to run it");
        return;
    };
    let quick = args.iter().any(|a| a == "--quick");
    let runs: usize = arg(args, "--runs=")
        .and_then(|v| v.parse().ok())
        .unwrap_or(if quick { QUICK_RUNS } else { RUNS });
    let counts: Vec<usize> = match arg(args, "--workers=") {
        Some(list) => list
            .split(',')
            .filter_map(|v| v.parse().ok())
            .filter(|n| *n > 0)
            .collect(),
        None => vec![1, 2, 4],
    };
    let rounds = if quick { 1 } else { 3 };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    println!(
        "# W7-PG {runs} async-subagent runs per round submitted over loopback HTTP, spread over \
         N worker processes (capacity {W7_CAPACITY} each, instant tool) sharing one PostgreSQL \
         run store; submitter, workers and PostgreSQL share this machine's {cores} cores"
    );
    println!(
        "# cpu_ms_per_run: CPU time per run of the worker processes, of every postgres process, \
         and of the submitter; pg_share = postgres / all three"
    );
    let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(async {
        let http = reqwest::Client::new();
        for n in counts {
            let schema = format!("kit_bench_w7_{}_{n}", std::process::id());
            let store = kit::server::store::PostgresRunStore::connect_in_schema(&url, &schema)
                .await
                .unwrap_or_else(|e| fail(&format!("W7-PG store: {e}")));
            let client = monitor(&url, &schema).await;
            let mut children = Vec::new();
            for i in 0..n {
                children.push(start_worker(&exe, &schema, i).await);
            }
            let urls: Vec<String> = children.iter().map(|c| c.url.clone()).collect();
            let pids: Vec<u32> = children.iter().filter_map(|c| c.process.id()).collect();
            let mut all_ids = w7_submit(&http, &urls, 50 * n, 0).await;
            wait_idle(&client).await;
            for round in 1..=rounds {
                let workers_cpu = || pids.iter().map(|p| cpu_s(*p)).sum::<f64>();
                let (w0, p0, s0) = (workers_cpu(), postgres_cpu_s(), cpu_s(std::process::id()));
                let start = Instant::now();
                let ids = w7_submit(&http, &urls, runs, round).await;
                let submitted = start.elapsed().as_secs_f64();
                wait_idle(&client).await;
                let wall = start.elapsed().as_secs_f64();
                let (w1, p1, s1) = (workers_cpu(), postgres_cpu_s(), cpu_s(std::process::id()));
                all_ids.extend(ids);
                let per_run = |s: f64| s * 1000.0 / runs as f64;
                let (w, p, s) = (w1 - w0, p1 - p0, s1 - s0);
                println!(
                    "RESULT W7PG workers={n} round={round} runs={runs} capacity_each={W7_CAPACITY} \
                     wall_s={wall:.3} runs_per_s={:.0} submit_s={submitted:.3} \
                     worker_cpu_ms_per_run={:.3} pg_cpu_ms_per_run={:.3} \
                     submitter_cpu_ms_per_run={:.3} pg_share={:.2} cores={cores}",
                    runs as f64 / wall,
                    per_run(w),
                    per_run(p),
                    per_run(s),
                    p / (w + p + s).max(f64::EPSILON),
                );
            }
            // Completeness (untimed).
            let mut executions: HashMap<String, usize> = HashMap::new();
            for child in children {
                for (id, k) in stop_worker(child).await {
                    *executions.entry(id).or_default() += k;
                }
            }
            let wrong = count(
                &client,
                "SELECT count(*) FROM kit_worker_runs WHERE status <> 'success' OR attempts <> 1",
            )
            .await;
            if wrong != 0 {
                fail(&format!(
                    "W7-PG workers={n}: {wrong} runs did not succeed at the first attempt"
                ));
            }
            let stored = count(&client, "SELECT count(*) FROM kit_worker_runs").await;
            if stored != all_ids.len() as i64 {
                fail(&format!(
                    "W7-PG workers={n}: {stored} runs stored, {} submitted",
                    all_ids.len()
                ));
            }
            for id in &all_ids {
                if executions.get(id) != Some(&1) {
                    fail(&format!(
                        "W7-PG workers={n}: run {id} executed {:?} times",
                        executions.get(id)
                    ));
                }
            }
            if executions.len() != all_ids.len() {
                fail(&format!(
                    "W7-PG workers={n}: {} runs executed, {} submitted",
                    executions.len(),
                    all_ids.len()
                ));
            }
            println!(
                "# workers={n}: {} runs, each succeeded once, executed exactly once across the \
                 {n} processes",
                all_ids.len()
            );
            drop(client);
            if let Err(e) = store.drop_schema().await {
                fail(&format!("W7-PG: dropping the schema: {e}"));
            }
        }
    });
}

/// `bench w7-worker --schema=S`: one worker process of [`w7pg`].
pub(crate) fn w7_worker(args: &[String]) {
    let Ok(url) = std::env::var("KIT_BENCH_POSTGRES_URL") else {
        fail("w7-worker: KIT_BENCH_POSTGRES_URL is not set")
    };
    let Some(schema) = arg(args, "--schema=") else {
        fail("w7-worker: --schema= is missing")
    };
    let index = arg(args, "--index=").unwrap_or_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(async {
        let stats = Arc::new(kit_testing::load::LoadStats::default());
        let agent = kit_testing::researcher::agent_with(kit_testing::researcher::Behaviour {
            gate: kit_testing::researcher::Gate::open(),
            delay: Duration::ZERO,
        });
        let store = kit::server::store::PostgresRunStore::connect_in_schema(&url, &schema)
            .await
            .unwrap_or_else(|e| fail(&format!("w7-worker store: {e}")));
        let worker = kit::server::Worker::builder()
            .host(
                "research",
                kit_testing::load::Counting {
                    inner: agent,
                    stats: stats.clone(),
                },
            )
            .store(store)
            .worker_id(format!("w7-worker-{index}-{}", std::process::id()))
            .capacity(W7_CAPACITY)
            .build()
            .await
            .unwrap_or_else(|e| fail(&format!("w7-worker: {e}")));
        let handle = worker
            .start("127.0.0.1:0")
            .await
            .unwrap_or_else(|e| fail(&format!("w7-worker start: {e}")));
        let mut out = tokio::io::stdout();
        let say = |text: String| text.into_bytes();
        let _ = out.write_all(&say(format!("URL {}\n", handle.url()))).await;
        let _ = out.flush().await;
        let mut stdin = BufReader::new(tokio::io::stdin()).lines();
        while let Ok(Some(line)) = stdin.next_line().await {
            if line.trim() == "stop" {
                break;
            }
        }
        if let Err(e) = handle.shutdown().await {
            fail(&format!("w7-worker shutdown: {e}"));
        }
        let mut text = String::new();
        for (id, n) in stats.executions() {
            text.push_str(&format!("EXEC {id} {n}\n"));
        }
        text.push_str("END\n");
        let _ = out.write_all(text.as_bytes()).await;
        let _ = out.flush().await;
    });
}
