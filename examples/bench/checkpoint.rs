//! W5: checkpointing on memory, SQLite and PostgreSQL, and the SQLite file size.

use crate::fail;
use crate::graphs::{N_LINEAR, check_linear, invoke_linear, linear_graph};
use crate::measure::{header, report, stats, time_async};
use kit::RunOptions;

/// W5; `only` runs one variant (`memory`, `sqlite-sync`, ...) and skips the file size.
pub(crate) async fn w5(reps: usize, only: Option<&str>) {
    use kit::checkpoint::{Checkpointer, MemoryCheckpointer, SqliteCheckpointer};
    use kit::graph::Durability;
    use std::sync::Arc;

    header("W5 W1 + checkpointer (MemoryCheckpointer / SqliteCheckpointer file), invoke");
    let dir = tempfile::tempdir().unwrap_or_else(|e| fail(&format!("temp dir: {e}")));
    let mut next_thread = 0usize;
    let mut variants: Vec<(&str, Option<Durability>)> = vec![
        ("memory", None),
        ("sqlite-async", Some(Durability::Async)),
        ("sqlite-sync", Some(Durability::Sync)),
        ("sqlite-exit", Some(Durability::Exit)),
    ];
    // Not part of the anchor's W5: PostgreSQL too, when a server is given.
    let postgres_url = std::env::var("KIT_BENCH_POSTGRES_URL").ok();
    if postgres_url.is_some() {
        variants.push(("postgres-async", Some(Durability::Async)));
        variants.push(("postgres-sync", Some(Durability::Sync)));
    }
    variants.retain(|(tag, _)| only.is_none_or(|o| o == *tag));
    for (tag, durability) in variants {
        // A fresh saver (SQLite: a fresh file; PostgreSQL: a fresh schema) per variant.
        let mut schema_to_drop = None;
        let saver: Arc<dyn Checkpointer> = match (durability, &postgres_url) {
            (None, _) => Arc::new(MemoryCheckpointer::new()),
            (Some(_), Some(url)) if tag.starts_with("postgres") => {
                let schema = format!("kit_bench_{}_{}", std::process::id(), tag.len());
                let pg = kit::checkpoint::PostgresCheckpointer::connect_in_schema(url, &schema)
                    .await
                    .unwrap_or_else(|e| fail(&format!("W5 connect {tag}: {e}")));
                schema_to_drop = Some(pg.clone());
                Arc::new(pg)
            }
            (Some(_), _) => {
                let path = dir.path().join(format!("timing-{tag}.sqlite"));
                Arc::new(
                    SqliteCheckpointer::open(&path)
                        .unwrap_or_else(|e| fail(&format!("W5 open {tag}: {e}"))),
                )
            }
        };
        let graph = linear_graph().with_checkpointer(saver);
        let base = RunOptions::new()
            .recursion_limit(1000)
            .durability(durability.unwrap_or_default());
        let mut opts = move || {
            next_thread += 1;
            base.clone().thread_id(format!("t{next_thread}"))
        };
        check_linear(&invoke_linear(&graph, &opts()).await);
        let times = time_async(10, reps, || {
            let o = opts();
            let g = &graph;
            async move {
                std::hint::black_box(invoke_linear(g, &o).await);
            }
        })
        .await;
        report(
            &format!("W5 invoke_{tag}"),
            &stats(times),
            &[("node_step", N_LINEAR as f64)],
        );
        next_thread += reps + 11;
        if let Some(pg) = schema_to_drop
            && let Err(e) = pg.drop_schema().await
        {
            eprintln!("W5: could not drop the benchmark schema: {e}");
        }
    }

    if only.is_some() {
        return;
    }
    // Size: a fresh file after exactly 100 invokes on 100 distinct threads (default
    // durability).
    let path = dir.path().join("size.sqlite");
    let saver = Arc::new(
        SqliteCheckpointer::open(&path).unwrap_or_else(|e| fail(&format!("W5 open size: {e}"))),
    );
    let graph = linear_graph().with_checkpointer(saver.clone());
    for i in 0..100 {
        let opts = RunOptions::new()
            .recursion_limit(1000)
            .thread_id(format!("size-{i}"));
        check_linear(&invoke_linear(&graph, &opts).await);
    }
    let size = |p: &std::path::Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    let wal_path = dir.path().join("size.sqlite-wal");
    let (main_b, wal_b) = (size(&path), size(&wal_path));
    drop(graph);
    drop(saver);
    let conn = rusqlite::Connection::open(&path).unwrap_or_else(|e| fail(&format!("{e}")));
    let count = |sql: &str| -> i64 {
        conn.query_row(sql, [], |r| r.get(0))
            .unwrap_or_else(|e| fail(&format!("W5 `{sql}`: {e}")))
    };
    let threads = count("SELECT COUNT(DISTINCT thread_id) FROM kit_checkpoints");
    let checkpoints = count("SELECT COUNT(*) FROM kit_checkpoints");
    let blobs = count("SELECT COUNT(*) FROM kit_blobs");
    let writes = count("SELECT COUNT(*) FROM kit_writes");
    if let Err(e) = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(())) {
        fail(&format!("W5 wal_checkpoint: {e}"));
    }
    drop(conn);
    let after = size(&path);
    println!(
        "RESULT W5 db_size_after_100_invokes threads={threads} checkpoint_rows={checkpoints} \
         blob_rows={blobs} write_rows={writes} main_bytes={main_b} wal_bytes={wal_b} \
         main_after_wal_truncate_bytes={after} bytes_per_invoke={:.0}",
        after as f64 / 100.0
    );
}

// ---------------------------------------------------------------------------------------------
