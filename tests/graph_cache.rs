//! Cache policies per node: an input computed before is not computed again; keys, TTLs and
//! stores (memory, SQLite, PostgreSQL) as LangGraph's `CachePolicy`; a cached node says so in
//! its `node_end` event; set from the builder and from `graph!`.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::event::EventData;
use kit::graph::{
    CachePolicy, GraphBuilder, MemoryCache, NodeCache, NodeContext, NodeError, SqliteCache,
};
use kit::{END, Graph, GraphError, RunOptions, START, State};
use serde::{Deserialize, Serialize};

#[derive(State, Clone, Default, Debug, Serialize, Deserialize)]
struct Doc {
    text: String,
    lang: String,
    summary: String,
}

fn summariser(
    runs: &Arc<AtomicUsize>,
    policy: CachePolicy<Doc>,
    store: Arc<dyn NodeCache>,
) -> Graph<Doc> {
    let runs = runs.clone();
    GraphBuilder::<Doc>::new("summaries")
        .sync_node("summarise", move |d: &Doc, _: &NodeContext| {
            let n = runs.fetch_add(1, Ordering::SeqCst) + 1;
            DocUpdate::new().summary(format!("{} (run {n})", d.text.to_uppercase()))
        })
        .cache_policy("summarise", policy)
        .cache(store)
        .edge(START, "summarise")
        .edge("summarise", END)
        .compile()
        .unwrap()
}

async fn summary(graph: &Graph<Doc>, text: &str, lang: &str) -> String {
    graph
        .invoke(DocUpdate::new().text(text).lang(lang))
        .await
        .unwrap()
        .state()
        .summary
        .clone()
}

#[tokio::test]
async fn the_same_input_is_computed_once_and_a_new_input_again() {
    let runs = Arc::new(AtomicUsize::new(0));
    let graph = summariser(&runs, CachePolicy::new(), Arc::new(MemoryCache::new()));
    assert_eq!(summary(&graph, "otters", "en").await, "OTTERS (run 1)");
    assert_eq!(
        summary(&graph, "otters", "en").await,
        "OTTERS (run 1)",
        "from the cache"
    );
    assert_eq!(summary(&graph, "seals", "en").await, "SEALS (run 2)");
    // The default key is the whole input: another field makes another entry.
    assert_eq!(summary(&graph, "otters", "de").await, "OTTERS (run 3)");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_key_of_only_what_the_node_reads_shares_entries() {
    let runs = Arc::new(AtomicUsize::new(0));
    let policy = CachePolicy::new().key(|d: &Doc| d.text.clone());
    let graph = summariser(&runs, policy, Arc::new(MemoryCache::new()));
    summary(&graph, "otters", "en").await;
    assert_eq!(summary(&graph, "otters", "de").await, "OTTERS (run 1)");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_entry_lives_as_long_as_its_ttl() {
    let runs = Arc::new(AtomicUsize::new(0));
    let policy = CachePolicy::new().ttl(Duration::from_millis(50));
    let graph = summariser(&runs, policy, Arc::new(MemoryCache::new()));
    summary(&graph, "otters", "en").await;
    summary(&graph, "otters", "en").await;
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(80)).await;
    assert_eq!(
        summary(&graph, "otters", "en").await,
        "OTTERS (run 2)",
        "expired: computed again"
    );
}

#[tokio::test]
async fn a_cached_node_says_so_in_its_node_end_event() {
    let runs = Arc::new(AtomicUsize::new(0));
    let graph = summariser(&runs, CachePolicy::new(), Arc::new(MemoryCache::new()));
    let flags = |events: Vec<kit::Event>| -> Vec<bool> {
        events
            .into_iter()
            .filter_map(|e| match e.data {
                EventData::NodeEnd { cached, .. } => Some(cached),
                _ => None,
            })
            .collect()
    };
    let input = || DocUpdate::new().text("otters");
    let first = graph
        .stream_events(input(), &RunOptions::new())
        .collect()
        .await;
    let second = graph
        .stream_events(input(), &RunOptions::new())
        .collect()
        .await;
    assert_eq!(flags(first), [false]);
    assert_eq!(flags(second), [true]);
}

#[tokio::test]
async fn a_failing_node_is_not_cached() {
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let graph = GraphBuilder::<Doc>::new("fails")
        .sync_node(
            "summarise",
            move |_: &Doc, _: &NodeContext| -> Result<DocUpdate, NodeError> {
                r.fetch_add(1, Ordering::SeqCst);
                Err(NodeError::msg("model down"))
            },
        )
        .cache_policy("summarise", CachePolicy::new())
        .cache(Arc::new(MemoryCache::new()))
        .edge(START, "summarise")
        .edge("summarise", END)
        .compile()
        .unwrap();
    assert!(graph.invoke(DocUpdate::new()).await.is_err());
    assert!(graph.invoke(DocUpdate::new()).await.is_err());
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

#[test]
fn a_cache_policy_without_a_store_is_refused() {
    let err = GraphBuilder::<Doc>::new("nostore")
        .sync_node("summarise", |_: &Doc, _: &NodeContext| DocUpdate::new())
        .cache_policy("summarise", CachePolicy::new())
        .edge(START, "summarise")
        .edge("summarise", END)
        .compile()
        .unwrap_err();
    assert!(matches!(err, GraphError::Invalid { .. }));
    assert!(err.to_string().contains("no cache store"), "{err}");
}

#[tokio::test]
async fn a_sqlite_cache_outlives_the_graph_that_filled_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("threads.sqlite");
    let runs = Arc::new(AtomicUsize::new(0));
    let graph = summariser(
        &runs,
        CachePolicy::new(),
        Arc::new(SqliteCache::open(&path).unwrap()),
    );
    summary(&graph, "otters", "en").await;
    drop(graph);
    let graph = summariser(
        &runs,
        CachePolicy::new(),
        Arc::new(SqliteCache::open(&path).unwrap()),
    );
    assert_eq!(summary(&graph, "otters", "en").await, "OTTERS (run 1)");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

/// Expired entries do not pile up: the first write and every 256th delete the expired ones,
/// so a node that sees a new input every run keeps about what lives within its time to live.
/// Live entries and entries without a time to live stay (negative cases).
#[tokio::test]
async fn a_sqlite_cache_deletes_expired_entries_as_it_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.sqlite");
    let cache = SqliteCache::open(&path).unwrap();
    let rows = || -> i64 {
        rusqlite::Connection::open(&path)
            .unwrap()
            .query_row("SELECT COUNT(*) FROM kit_node_cache", [], |r| r.get(0))
            .unwrap()
    };
    cache
        .put("g:n", "forever", serde_json::json!(0), None)
        .await
        .unwrap();
    for i in 0..600 {
        let ttl = Some(Duration::from_millis(1));
        cache
            .put("g:n", &format!("k{i}"), serde_json::json!(i), ttl)
            .await
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    for i in 0..256 {
        let ttl = Some(Duration::from_secs(3600));
        cache
            .put("g:n", &format!("live{i}"), serde_json::json!(i), ttl)
            .await
            .unwrap();
    }
    // The sweep at the 769th write found all 600 short-lived entries expired.
    assert_eq!(rows(), 1 + 256);
    assert_eq!(
        cache.get("g:n", "forever").await.unwrap(),
        Some(serde_json::json!(0))
    );
    assert_eq!(
        cache.get("g:n", "live255").await.unwrap(),
        Some(serde_json::json!(255))
    );
}

#[tokio::test]
async fn a_postgres_cache_is_shared_by_every_graph_of_the_database() {
    let Ok(url) = std::env::var("KIT_TEST_POSTGRES_URL") else {
        eprintln!("KIT_TEST_POSTGRES_URL is not set: .ci/run starts PostgreSQL for this test");
        return;
    };
    let schema = format!("kit_cache_{}", std::process::id());
    let store = kit::graph::PostgresCache::connect(&url, Some(&schema))
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let a = summariser(&runs, CachePolicy::new(), Arc::new(store.clone()));
    let other_process = kit::graph::PostgresCache::connect(&url, Some(&schema))
        .await
        .unwrap();
    let b = summariser(&runs, CachePolicy::new(), Arc::new(other_process));
    summary(&a, "otters", "en").await;
    assert_eq!(summary(&b, "otters", "en").await, "OTTERS (run 1)");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    store
        .put(
            "x:y",
            "short",
            serde_json::json!(1),
            Some(Duration::from_millis(1)),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.get("x:y", "short").await.unwrap(), None);
    // The expired entry is deleted by a later sweep (every 256 writes), the live one kept.
    for i in 0..256 {
        let ttl = Some(Duration::from_secs(3600));
        store
            .put("x:y", &format!("live{i}"), serde_json::json!(i), ttl)
            .await
            .unwrap();
    }
    let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    let count: i64 = client
        .query_one(
            &format!("SELECT COUNT(*) FROM {schema}.kit_node_cache WHERE namespace = 'x:y'"),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(count, 256);
    store.drop_schema().await.unwrap();
}

#[tokio::test]
async fn cache_policies_in_graph() {
    static RUNS: AtomicUsize = AtomicUsize::new(0);
    async fn summarise(d: &Doc, _: &NodeContext) -> DocUpdate {
        RUNS.fetch_add(1, Ordering::SeqCst);
        DocUpdate::new().summary(d.text.to_uppercase())
    }
    let graph = kit::graph! {
        state: Doc;
        cache_store: Arc::new(MemoryCache::new());
        node summarise;
        cache summarise = CachePolicy::new().key(|d: &Doc| d.text.clone());
        edge START -> summarise;
        edge summarise -> END;
    };
    for _ in 0..3 {
        assert_eq!(summary(&graph, "otters", "en").await, "OTTERS");
    }
    assert_eq!(RUNS.load(Ordering::SeqCst), 1);
}
