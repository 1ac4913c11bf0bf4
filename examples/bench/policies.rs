//! Retry and cache policies on W1's 100-node chain: what they cost when a graph has none (W1
//! must not change), when every node has one that never fires, and what a cache hit costs
//! against running the node.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kit::graph::{
    CacheError, CachePolicy, Graph, GraphBuilder, MemoryCache, NodeCache, RetryPolicy,
};
use kit::serde_json::Value;
use kit::{RunOptions, State};

use crate::fail;
use crate::graphs::{Linear, N_LINEAR, check_linear, invoke_linear, linear_builder, linear_graph};
use crate::measure::{header, report, stats, time_async};

/// Every node of W1's chain with the same policy.
fn every_node(
    mut add: impl FnMut(GraphBuilder<Linear>, String) -> GraphBuilder<Linear>,
) -> GraphBuilder<Linear> {
    let mut b = linear_builder();
    for i in 0..N_LINEAR {
        b = add(b, format!("n{i}"));
    }
    b
}

fn compiled<S: State>(b: GraphBuilder<S>, what: &str) -> Graph<S> {
    b.compile()
        .unwrap_or_else(|e| fail(&format!("policies {what}: {e}")))
}

async fn measure(name: &str, graph: &Graph<Linear>, reps: usize) {
    let opts = RunOptions::new().recursion_limit(1000);
    check_linear(&invoke_linear(graph, &opts).await);
    let times = time_async(20, reps, || async {
        std::hint::black_box(invoke_linear(graph, &opts).await);
    })
    .await;
    report(name, &stats(times), &[("node_step", N_LINEAR as f64)]);
}

/// A memory cache that counts its hits and misses, to check the workload measured what it
/// says.
#[derive(Default)]
struct Counted {
    inner: MemoryCache,
    hits: AtomicU64,
    misses: AtomicU64,
}

#[kit::async_trait]
impl NodeCache for Counted {
    async fn get(&self, namespace: &str, key: &str) -> Result<Option<Value>, CacheError> {
        let found = self.inner.get(namespace, key).await?;
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        Ok(found)
    }
    async fn put(
        &self,
        namespace: &str,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CacheError> {
        self.inner.put(namespace, key, value, ttl).await
    }
    async fn clear(&self, namespace: Option<&str>) -> Result<(), CacheError> {
        self.inner.clear(namespace).await
    }
}

impl Counted {
    /// Fails the workload unless every lookup after the first invoke hit (`hits`) or every
    /// lookup missed (`!hits`).
    fn check(&self, what: &str, hits: bool) {
        let (h, m) = (
            self.hits.load(Ordering::Relaxed),
            self.misses.load(Ordering::Relaxed),
        );
        let ok = if hits {
            m == N_LINEAR as u64 && h > 0
        } else {
            h == 0 && m > 0
        };
        if !ok {
            fail(&format!("policies {what}: {h} hits and {m} misses"));
        }
    }
}

pub(crate) async fn policies(reps: usize) {
    header("Policies on W1's chain: none, retry on every node, cache on every node");
    measure("W1 invoke (no policies)", &linear_graph(), reps).await;

    let retried = compiled(every_node(|b, n| b.retry(n, RetryPolicy::new())), "retry");
    measure(
        "W1 invoke, retry on every node (never fails)",
        &retried,
        reps,
    )
    .await;

    // A hit: after the first invoke, every node finds its output (the input is the same).
    let cache = Arc::new(Counted::default());
    let hashed = compiled(
        every_node(|b, n| b.cache_policy(n, CachePolicy::new())).cache(cache.clone()),
        "cache",
    );
    measure(
        "W1 invoke, cache hit on every node (key: state hash)",
        &hashed,
        reps,
    )
    .await;
    cache.check("state-hash hits", true);

    let cache = Arc::new(Counted::default());
    let keyed = compiled(
        every_node(|b, n| b.cache_policy(n, CachePolicy::new().key(counter_key)))
            .cache(cache.clone()),
        "keyed cache",
    );
    measure(
        "W1 invoke, cache hit on every node (key: a field)",
        &keyed,
        reps,
    )
    .await;
    cache.check("field-key hits", true);

    // A miss: a new key on every lookup, so every node runs and stores its output.
    static ROUND: AtomicU64 = AtomicU64::new(0);
    let cache = Arc::new(Counted::default());
    let missing = compiled(
        every_node(|b, n| {
            b.cache_policy(
                n,
                CachePolicy::new().key(|s: &Linear| {
                    format!(
                        "{}:{}",
                        ROUND.fetch_add(1, Ordering::Relaxed),
                        counter_key(s)
                    )
                }),
            )
        })
        .cache(cache.clone()),
        "missing cache",
    );
    measure(
        "W1 invoke, cache miss on every node (key: a field)",
        &missing,
        reps,
    )
    .await;
    cache.check("misses", false);
}

/// A key from the one field that tells W1's nodes' inputs apart.
fn counter_key(s: &Linear) -> String {
    s.counter.to_string()
}
