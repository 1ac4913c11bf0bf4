//! kit's benchmark program: the workloads of `shared/bench/WORKLOADS.md`, measured the way the
//! Python LangGraph anchor measures them (per-repetition `Instant` timing, untimed warm-up,
//! median and nearest-rank p95, peak RSS of the process).
//!
//! ```text
//! cargo run --release --example bench -- compare    # kit, Python LangGraph and the Rust peers, one table
//! cargo run --release --example bench -- compare --recorded --no-peers   # kit against recorded figures
//! cargo run --release --example bench -- all        # every workload, each in its own process
//! cargo run --release --example bench -- w1         # one workload
//! cargo run --release --example bench -- w1 --reps=500
//! cargo run --release --example bench -- w2t        # W2 with tracing off / Collector / JSON-lines
//! cargo run --release --example bench -- w5         # checkpointing: memory, SQLite x3, size
//! cargo run --release --example bench -- w5 --only=memory   # one variant of it
//! KIT_BENCH_POSTGRES_URL=postgres://... cargo run --release --example bench -- w5  # + PostgreSQL
//! KIT_BENCH_W4_WORKERS=1 cargo run --release --example bench -- w4   # W4 on one worker thread
//! cargo run --release --example bench -- w7         # 1000 async-subagent runs on a worker
//! KIT_BENCH_POSTGRES_URL=postgres://... cargo run --release --example bench -- w7pg
//!                                    # W7 on 1, 2 and 4 worker processes sharing PostgreSQL
//! cargo run --release --example bench -- policies   # retry and cache policies on W1: none, hit, miss
//! cargo run --release --example bench -- growth     # cost curves: history, thread, chain, fan-out, ...
//! cargo run --release --example bench -- growth --quick   # the same at small sizes (in `all`)
//! cargo run --release --example bench -- pii        # PII precision/recall and linear time
//! cargo run --release --example bench -- fuzz       # 1 M hostile inputs per parser, no panic
//! cargo run --release --example bench -- fuzz --inputs=20000 --seed=7
//! ```
//!
//! Output lines starting with `RESULT` have the anchor's format, so the two can be compared
//! line by line.
//!
//! The program allocates with mimalloc, through `kit-alloc`: an agent run makes a few hundred
//! small allocations per round, and glibc's malloc spends a growing share of its time
//! consolidating them once a process holds many threads' states. `--features system-allocator`
//! measures with the system allocator instead (README, "Choosing an allocator", has both).

#[cfg(not(feature = "system-allocator"))]
#[global_allocator]
static ALLOCATOR: kit_alloc::MiMalloc = kit_alloc::MiMalloc;

mod agent;
mod checkpoint;
mod compare;
mod fuzz;
mod graphs;
mod growth;
mod measure;
mod pii;
mod policies;
mod worker;
mod worker_pg;

use agent::{w2, w2_trace, w4};
use checkpoint::w5;
use graphs::{w1, w3, w6};
use worker::w7;

// ---------------------------------------------------------------------------------------------
// measurement helpers

pub(crate) fn fail(message: &str) -> ! {
    eprintln!("bench: {message}");
    std::process::exit(1)
}

const WORKLOADS: &[&str] = &[
    "w1", "w2", "w2t", "w3", "w4", "w5", "w6", "w7", "w7pg", "policies", "pii", "fuzz", "growth",
];

/// mimalloc commits whole arenas eagerly by default on Linux; with a worker's many blocking
/// threads that held 400+ MiB (W7) for what glibc does in 50. It reads its options when the
/// process starts, so the program starts itself again with lazy commit when nobody chose.
const ALLOCATOR_OPTIONS: &[(&str, &str)] = &[("MIMALLOC_ARENA_EAGER_COMMIT", "0")];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !cfg!(feature = "system-allocator")
        && ALLOCATOR_OPTIONS
            .iter()
            .any(|(name, _)| std::env::var_os(name).is_none())
    {
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
        let mut command = std::process::Command::new(exe);
        command.args(&args);
        for (name, value) in ALLOCATOR_OPTIONS {
            if std::env::var_os(name).is_none() {
                command.env(name, value);
            }
        }
        let status = command
            .status()
            .unwrap_or_else(|e| fail(&format!("restarting with the allocator's options: {e}")));
        std::process::exit(status.code().unwrap_or(1));
    }
    let which = args
        .iter()
        .find(|a| !a.starts_with("--"))
        .cloned()
        .unwrap_or_else(|| "all".to_string());
    let reps_arg: Option<usize> = args
        .iter()
        .find_map(|a| a.strip_prefix("--reps="))
        .and_then(|v| v.parse().ok());
    let reps_given = reps_arg.is_some();
    let reps = reps_arg.unwrap_or(200);
    if which == "compare" {
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
        compare::run(&exe, &["w1", "w2", "w3", "w4", "w5", "w6"]);
        return;
    }
    if which == "all" {
        // Each workload in its own process, so each peak RSS is its own.
        let exe = std::env::current_exe().unwrap_or_else(|e| fail(&format!("{e}")));
        for w in WORKLOADS {
            let mut command = std::process::Command::new(&exe);
            command.arg(w);
            if reps_given {
                command.arg(format!("--reps={reps}"));
            }
            if *w == "fuzz" {
                command.arg(format!("--inputs={}", fuzz::ALL_INPUTS));
            }
            if *w == "growth" || *w == "w7pg" {
                command.arg("--quick");
            }
            let status = command.status();
            if !matches!(status, Ok(s) if s.success()) {
                fail(&format!("workload {w} failed"));
            }
        }
        return;
    }
    if which == "w4" {
        w4();
        return;
    }
    if which == "w7" {
        w7();
        return;
    }
    if which == "w7pg" {
        worker_pg::w7pg(&args);
        return;
    }
    // Not a workload: one worker process of `w7pg`, started by it.
    if which == "w7-worker" {
        worker_pg::w7_worker(&args);
        return;
    }
    if which == "growth" {
        growth::growth(&args);
        return;
    }
    if which == "pii" {
        pii::pii();
        return;
    }
    if which == "fuzz" {
        let arg = |name: &str| args.iter().find_map(|a| a.strip_prefix(name)?.parse().ok());
        fuzz::fuzz(
            arg("--inputs=").unwrap_or(fuzz::DEFAULT_INPUTS),
            arg("--seed=").unwrap_or(1),
        );
        return;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(&format!("runtime: {e}")));
    rt.block_on(async {
        match which.as_str() {
            "w1" => w1(reps).await,
            "w2" => w2(reps).await,
            "w2t" => w2_trace(reps).await,
            "w3" => w3(reps).await,
            "w5" => {
                let only = args.iter().find_map(|a| a.strip_prefix("--only="));
                w5(if reps_given { reps } else { 100 }, only).await
            }
            "w6" => w6(reps).await,
            "policies" => policies::policies(reps).await,
            other => fail(&format!(
                "unknown workload `{other}`; choose one of {} or all",
                WORKLOADS.join(", ")
            )),
        }
    });
}
