//! The stores: entries by namespace and key, time to live, clearing; SQLite across a reopen.

use std::time::Duration;

use serde_json::json;

use super::*;

async fn contract(store: &dyn NodeCache) {
    assert_eq!(store.get("g:a", "k").await.unwrap(), None);
    store.put("g:a", "k", json!({"v": 1}), None).await.unwrap();
    store.put("g:b", "k", json!(2), None).await.unwrap();
    assert_eq!(store.get("g:a", "k").await.unwrap(), Some(json!({"v": 1})));
    // A put replaces.
    store.put("g:a", "k", json!(3), None).await.unwrap();
    assert_eq!(store.get("g:a", "k").await.unwrap(), Some(json!(3)));
    // Expired entries are gone.
    store
        .put("g:a", "short", json!(4), Some(Duration::from_millis(1)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(store.get("g:a", "short").await.unwrap(), None);
    store
        .put("g:a", "long", json!(5), Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    assert_eq!(store.get("g:a", "long").await.unwrap(), Some(json!(5)));
    // Clearing one namespace keeps the others.
    store.clear(Some("g:a")).await.unwrap();
    assert_eq!(store.get("g:a", "k").await.unwrap(), None);
    assert_eq!(store.get("g:b", "k").await.unwrap(), Some(json!(2)));
    store.clear(None).await.unwrap();
    assert_eq!(store.get("g:b", "k").await.unwrap(), None);
}

#[tokio::test]
async fn the_memory_store_keeps_the_contract() {
    contract(&MemoryCache::new()).await;
}

#[cfg(feature = "sqlite")]
#[tokio::test]
async fn the_sqlite_store_keeps_the_contract_and_outlives_the_process() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cache.sqlite");
    contract(&SqliteCache::open(&path).unwrap()).await;
    SqliteCache::open(&path)
        .unwrap()
        .put("g:a", "kept", json!("yes"), None)
        .await
        .unwrap();
    let reopened = SqliteCache::open(&path).unwrap();
    assert_eq!(
        reopened.get("g:a", "kept").await.unwrap(),
        Some(json!("yes"))
    );
}

#[test]
fn the_default_key_follows_the_input_and_a_custom_key_only_what_it_reads() {
    #[derive(Clone, Default, serde::Serialize, serde::Deserialize)]
    struct S {
        a: i64,
        b: i64,
    }
    // The key functions see only the state; they need no State impl beyond serde here.
    let by_all = |s: &S| default_key_of(s);
    assert_eq!(by_all(&S { a: 1, b: 2 }), by_all(&S { a: 1, b: 2 }));
    assert_ne!(by_all(&S { a: 1, b: 2 }), by_all(&S { a: 1, b: 3 }));
    assert_ne!(hash(b"x"), hash(b"y"));
    assert_eq!(hash(b"x").len(), 32);
}

fn default_key_of<T: serde::Serialize>(value: &T) -> String {
    hash(&serde_json::to_vec(value).unwrap())
}
