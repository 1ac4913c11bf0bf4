//! W7: async-subagent runs on a kit worker over loopback HTTP.

use crate::fail;
use crate::measure::{cpu_s, maxrss_mib, proc_status_kib, thread_cpu_s};
use std::sync::Arc;
use std::time::Instant;

pub(crate) const W7_RUNS: usize = 1000;
pub(crate) const W7_CAPACITY: usize = 16;

/// Submits `runs` runs spread over the workers at `urls` (at most 256 requests in flight);
/// returns their ids.
pub(crate) async fn w7_submit(
    http: &reqwest::Client,
    urls: &[String],
    runs: usize,
    round: usize,
) -> Vec<String> {
    use futures::StreamExt;
    futures::stream::iter(0..runs)
        .map(|i| {
            let http = http.clone();
            let url = urls[i % urls.len()].clone();
            async move {
                let body = serde_json::json!({"assistant_id": "research",
                    "input": {"messages": [{"role": "user", "content": format!("r{round} topic {i}")}]}});
                let response = match http.post(format!("{url}/runs")).json(&body).send().await {
                    Ok(r) => r,
                    Err(e) => fail(&format!("W7 submit: {e}")),
                };
                let run: serde_json::Value = match response.json().await {
                    Ok(v) => v,
                    Err(e) => fail(&format!("W7 submit answer: {e}")),
                };
                match run["run_id"].as_str() {
                    Some(id) => id.to_string(),
                    None => fail(&format!("W7 submit refused: {run}")),
                }
            }
        })
        .buffer_unordered(256)
        .collect()
        .await
}

pub(crate) fn w7() {
    let workers = 2;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    println!(
        "# W7 {W7_RUNS} async-subagent runs submitted concurrently over loopback HTTP to one kit \
         worker (capacity {W7_CAPACITY}, SQLite run store file, MemoryCheckpointer, the scripted \
         researcher agent: one model turn, one tool call, one answer per run)"
    );
    println!("# runtime: tokio multi_thread, {workers} workers; client and worker in one process");
    println!(
        "# tool=instant measures the worker's own cost per run; tool=20ms makes the capacity bind"
    );
    println!(
        "# cpu_ms_per_run: CPU time of the whole process (client included) per run; \
         db_thread: the SQLite run store's thread alone"
    );
    println!("# maxrss before rounds: {:.1} MiB", maxrss_mib());
    rt.block_on(async {
        w7_variant("instant", std::time::Duration::ZERO).await;
        w7_variant("20ms", std::time::Duration::from_millis(20)).await;
    });
}

pub(crate) async fn w7_variant(label: &str, delay: std::time::Duration) {
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("tempdir: {e}")));
    let stats = Arc::new(kit_testing::load::LoadStats::default());
    let agent = kit_testing::researcher::agent_with(kit_testing::researcher::Behaviour {
        gate: kit_testing::researcher::Gate::open(),
        delay,
    });
    let worker = kit::server::Worker::builder()
        .host(
            "research",
            kit_testing::load::Counting {
                inner: agent,
                stats: stats.clone(),
            },
        )
        .store(kit_testing::load::Recording::new(
            kit::server::store::SqliteRunStore::open(dir.path().join("w7.sqlite"))
                .unwrap_or_else(|e| fail(&format!("W7 store: {e}"))),
            stats.clone(),
        ))
        .capacity(W7_CAPACITY)
        .build()
        .await
        .unwrap_or_else(|e| fail(&format!("W7 worker: {e}")));
    let handle = worker
        .start("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| fail(&format!("W7 start: {e}")));
    let url = handle.url();
    let http = reqwest::Client::new();
    let mut expected = 0;
    // Warm-up round (untimed).
    expected += w7_submit(&http, std::slice::from_ref(&url), 50, 0)
        .await
        .len();
    stats.wait_recorded(expected).await;
    for round in 1..=3 {
        let (process0, db0) = (cpu_s(std::process::id()), thread_cpu_s("kit-sqlite-runs"));
        let start = Instant::now();
        let ids = w7_submit(&http, std::slice::from_ref(&url), W7_RUNS, round).await;
        let submitted = start.elapsed().as_secs_f64();
        expected += ids.len();
        stats.wait_recorded(expected).await;
        // The clock stops once every run's end is recorded (what a client polling it sees).
        let wall = start.elapsed().as_secs_f64();
        let per_run_ms = |s: f64| s * 1000.0 / W7_RUNS as f64;
        let cpu = per_run_ms(cpu_s(std::process::id()) - process0);
        let db_cpu = per_run_ms(thread_cpu_s("kit-sqlite-runs") - db0);
        // Completeness (untimed): every run succeeded, each executed exactly once.
        let executions = stats.executions();
        for id in &ids {
            match handle.store().get_run(id).await {
                Ok(Some(run)) if run.status == kit::server::RunStatus::Success => {}
                other => fail(&format!("W7 run {id} did not succeed: {other:?}")),
            }
            if executions.get(id) != Some(&1) {
                fail(&format!(
                    "W7 run {id} executed {:?} times",
                    executions.get(id)
                ));
            }
        }
        if stats.peak() > W7_CAPACITY {
            fail(&format!(
                "W7 ran {} at once (capacity {W7_CAPACITY})",
                stats.peak()
            ));
        }
        println!(
            "RESULT W7 tool={label} round={round} runs={W7_RUNS} capacity={W7_CAPACITY} \
             wall_s={wall:.3} runs_per_s={:.0} submit_s={submitted:.3} peak_concurrent={} \
             cpu_ms_per_run={cpu:.3} db_thread_cpu_ms_per_run={db_cpu:.3} \
             rss_now_mib={:.1} maxrss_mib={:.1}",
            W7_RUNS as f64 / wall,
            stats.peak(),
            proc_status_kib("VmRSS:") / 1024.0,
            maxrss_mib()
        );
    }
    if let Err(e) = handle.shutdown().await {
        fail(&format!("W7 shutdown: {e}"));
    }
}

// ---------------------------------------------------------------------------------------------
// W5: W1 with a checkpointer (memory, SQLite in each durability mode), and the file size
