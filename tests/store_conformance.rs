//! One conformance suite for every long-term store, written once and run against memory,
//! SQLite (a real file in a temporary directory) and PostgreSQL (a real server,
//! `KIT_TEST_POSTGRES_URL`; each test gets a schema of its own).
//!
//! Every case is an `async fn(&Storage)`. [`Storage::open_with`] opens an instance on the same
//! underlying storage with an index or time-to-live rules; opening again is a "restart" (the
//! memory back-end shares one map, so its restarts test the rest alone).

use std::time::{Duration, SystemTime};

use kit::store::{
    Filter, GetOptions, IndexConfig, ListNamespaces, Namespace, PutOptions, Search, Store,
    StoreError, TtlConfig,
};
use kit::testing::HashEmbedder;
use serde_json::{Value, json};

#[macro_use]
#[path = "support/stores.rs"]
mod stores;
use stores::{Setup, Storage};

store_suite!(
    put_get_update_and_delete,
    a_restart_keeps_every_item,
    search_is_scoped_to_the_namespace_prefix,
    search_is_newest_first_and_pages,
    filters_match_what_they_say_and_nothing_else,
    filters_page_over_matches_only,
    namespaces_are_listed_by_prefix_suffix_and_depth,
    namespaces_that_must_not_be_listed_are_not,
    labels_sort_like_tuples_whatever_their_characters,
    items_expire_and_are_swept,
    reads_refresh_the_time_to_live_unless_told_not_to,
    the_default_time_to_live_applies_unless_overridden,
    semantic_search_ranks_by_similarity,
    semantic_search_with_a_filter_and_unindexed_items,
    embedding_mistakes_are_refused_and_store_nothing,
    invalid_arguments_are_refused_and_store_nothing,
    values_of_1_kib_and_1_mib_round_trip_and_filter,
    concurrent_writers_all_land,
    keys_are_listed_in_one_pass_as_paging_would_list_them,
);

fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).unwrap()
}

fn keys(items: &[kit::store::SearchItem]) -> Vec<String> {
    items.iter().map(|i| i.key.clone()).collect()
}

async fn search(store: &dyn Store, search: Search) -> Vec<String> {
    keys(&store.search(&search).await.unwrap())
}

async fn put_all(store: &dyn Store, namespace: &Namespace, items: &[(&str, Value)]) {
    for (key, value) in items {
        store.put(namespace, key, value.clone()).await.unwrap();
    }
}

// ---------------------------------------------------------------------------------------------

async fn put_get_update_and_delete(s: &Storage) {
    let store = s.open().await;
    let ada = ns(&["users", "ada"]);
    let before = SystemTime::now();
    store
        .put(&ada, "lang", json!({"text": "Rust", "n": 1}))
        .await
        .unwrap();
    let first = store.get(&ada, "lang").await.unwrap().unwrap();
    assert_eq!(first.namespace, ada);
    assert_eq!(first.key, "lang");
    assert_eq!(first.value_json(), json!({"text": "Rust", "n": 1}));
    assert_eq!(first.created_at, first.updated_at);
    assert!(first.created_at >= before - Duration::from_millis(5));
    assert_eq!(first.expires_at, None);

    tokio::time::sleep(Duration::from_millis(5)).await;
    store
        .put(&ada, "lang", json!({"text": "Rust and SQL"}))
        .await
        .unwrap();
    let second = store.get(&ada, "lang").await.unwrap().unwrap();
    assert_eq!(second.value_json(), json!({"text": "Rust and SQL"}));
    assert_eq!(
        second.created_at, first.created_at,
        "an update keeps created_at"
    );
    assert!(second.updated_at > first.updated_at);

    // The serialised form is LangGraph's `Item.dict()`.
    let shown = serde_json::to_value(&second).unwrap();
    assert_eq!(shown["namespace"], json!(["users", "ada"]));
    assert_eq!(shown["key"], "lang");
    assert!(shown["created_at"].as_str().unwrap().ends_with('Z'));
    assert!(shown.get("expires_at").is_none());

    // Another namespace or key is another item.
    assert!(store.get(&ns(&["users"]), "lang").await.unwrap().is_none());
    assert!(store.get(&ada, "Lang").await.unwrap().is_none());

    store.delete(&ada, "lang").await.unwrap();
    assert!(store.get(&ada, "lang").await.unwrap().is_none());
    store.delete(&ada, "lang").await.unwrap(); // deleting nothing is fine
    store.delete(&ns(&["never"]), "x").await.unwrap();
}

async fn a_restart_keeps_every_item(s: &Storage) {
    let store = s.open().await;
    let a = ns(&["a"]);
    put_all(
        store.as_ref(),
        &a,
        &[("1", json!({"v": 1})), ("2", json!({"v": 2}))],
    )
    .await;
    store.delete(&a, "2").await.unwrap();
    drop(store);
    let again = s.open().await;
    assert_eq!(
        again.get(&a, "1").await.unwrap().unwrap().value["v"],
        json!(1)
    );
    assert!(again.get(&a, "2").await.unwrap().is_none());
    assert_eq!(search(again.as_ref(), Search::new(a)).await, ["1"]);
}

async fn search_is_scoped_to_the_namespace_prefix(s: &Storage) {
    let store = s.open().await;
    put_all(store.as_ref(), &ns(&["users", "ada"]), &[("a", json!({}))]).await;
    put_all(
        store.as_ref(),
        &ns(&["users", "ada", "notes"]),
        &[("b", json!({}))],
    )
    .await;
    put_all(store.as_ref(), &ns(&["users", "adam"]), &[("c", json!({}))]).await;
    put_all(store.as_ref(), &ns(&["users", "ad"]), &[("d", json!({}))]).await;
    put_all(store.as_ref(), &ns(&["teams", "ada"]), &[("e", json!({}))]).await;

    let mut under_ada = search(store.as_ref(), Search::new(ns(&["users", "ada"]))).await;
    under_ada.sort();
    assert_eq!(
        under_ada,
        ["a", "b"],
        "not ('users','adam') nor ('users','ad')"
    );
    assert_eq!(
        search(store.as_ref(), Search::new(ns(&["users", "ada", "notes"]))).await,
        ["b"]
    );
    assert!(
        search(store.as_ref(), Search::new(ns(&["users", "ada", "no"])))
            .await
            .is_empty()
    );
    assert!(
        search(store.as_ref(), Search::new(ns(&["ada"])))
            .await
            .is_empty(),
        "a prefix matches from the first label"
    );
    let mut users = search(store.as_ref(), Search::new(ns(&["users"]))).await;
    users.sort();
    assert_eq!(users, ["a", "b", "c", "d"]);
    assert_eq!(
        search(store.as_ref(), Search::new(Namespace::root()).limit(100))
            .await
            .len(),
        5
    );
}

async fn search_is_newest_first_and_pages(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["log"]);
    for i in 0..7 {
        store
            .put(&n, &format!("k{i}"), json!({"i": i}))
            .await
            .unwrap();
    }
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone()).limit(3)).await,
        ["k6", "k5", "k4"]
    );
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone()).limit(3).offset(3)).await,
        ["k3", "k2", "k1"]
    );
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone()).limit(3).offset(6)).await,
        ["k0"]
    );
    assert!(
        search(store.as_ref(), Search::new(n.clone()).offset(7))
            .await
            .is_empty()
    );
    assert!(
        search(store.as_ref(), Search::new(n.clone()).limit(0))
            .await
            .is_empty()
    );
    // The default page is ten items.
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone())).await.len(),
        7
    );
    // An update makes an item the newest.
    store
        .put(&n, "k0", json!({"i": 0, "again": true}))
        .await
        .unwrap();
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone()).limit(2)).await,
        ["k0", "k6"]
    );
    let found = store.search(&Search::new(n).limit(1)).await.unwrap();
    assert_eq!(found[0].score, None, "no query, no score");
    assert_eq!(found[0].value["again"], json!(true));
}

async fn filters_match_what_they_say_and_nothing_else(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["docs"]);
    put_all(
        store.as_ref(),
        &n,
        &[
            (
                "a",
                json!({"kind": "note", "score": 5, "date": "2026-01-02", "tags": ["x", "y"],
                       "meta": {"lang": "en", "draft": false}, "none": null}),
            ),
            (
                "b",
                json!({"kind": "note", "score": 2.5, "date": "2025-12-31", "tags": ["x"],
                       "meta": {"lang": "fr"}}),
            ),
            ("c", json!({"kind": "task", "score": "5", "meta": "en"})),
            ("d", json!({"kind": ["note"], "score": 5.0})),
        ],
    )
    .await;
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let by = |f: Value| Search::new(n.clone()).filter(Filter::from_json(&f).unwrap());
    let cases: Vec<(Value, &[&str])> = vec![
        (json!({}), &["a", "b", "c", "d"]),
        (json!({"kind": "note"}), &["a", "b"]),
        (json!({"kind": {"$eq": "note"}}), &["a", "b"]),
        (json!({"kind": {"$ne": "note"}}), &["c", "d"]),
        // Numbers compare by value, never with strings.
        (json!({"score": 5}), &["a", "d"]),
        (json!({"score": 5.0}), &["a", "d"]),
        (json!({"score": "5"}), &["c"]),
        (json!({"score": {"$gt": 2.5}}), &["a", "d"]),
        (json!({"score": {"$gte": 2.5}}), &["a", "b", "d"]),
        (json!({"score": {"$lt": 5}}), &["b"]),
        (json!({"score": {"$lte": 5, "$gt": 2}}), &["a", "b", "d"]),
        (json!({"score": {"$gt": "4"}}), &["c"]),
        // Strings order byte-wise: ISO dates work.
        (json!({"date": {"$gte": "2026-01-01"}}), &["a"]),
        (json!({"date": {"$lt": "2026"}}), &["b"]),
        // Arrays match exactly; objects match the fields named.
        (json!({"tags": ["x"]}), &["b"]),
        (json!({"tags": ["x", "y"]}), &["a"]),
        (json!({"tags": ["y", "x"]}), &[]),
        (json!({"tags": "x"}), &[]),
        (json!({"meta": {"lang": "en"}}), &["a"]),
        (json!({"meta": {"draft": false}}), &["a"]),
        (json!({"meta": {"draft": null}}), &["b"]),
        (json!({"meta": "en"}), &["c"]),
        (json!({"kind": ["note"]}), &["d"]),
        // A missing field is null: it equals null and is "not equal" to anything else.
        (json!({"none": null}), &["a", "b", "c", "d"]),
        (json!({"missing": null}), &["a", "b", "c", "d"]),
        (json!({"missing": {"$ne": 1}}), &["a", "b", "c", "d"]),
        (json!({"missing": {"$ne": null}}), &[]),
        (json!({"missing": {"$gt": 0}}), &[]),
        (json!({"missing": "x"}), &[]),
        // Comparisons across types never match.
        (json!({"kind": {"$gt": 0}}), &[]),
        (json!({"meta": {"$lt": "z"}}), &["c"]),
        (json!({"tags": {"$gte": []}}), &[]),
        // Every condition must hold.
        (json!({"kind": "note", "score": {"$lt": 3}}), &["b"]),
        (json!({"kind": "note", "score": "5"}), &[]),
        // Field names are literal, never paths; quotes cannot escape anything.
        (json!({"meta.lang": "en"}), &[]),
        (json!({"kind') OR 1=1 --": "x"}), &[]),
        (json!({"kind": "note' OR '1'='1"}), &[]),
    ];
    for (filter, expected) in cases {
        let got = sorted(search(store.as_ref(), by(filter.clone()).limit(100)).await);
        assert_eq!(got, expected, "{}: filter {filter}", s.name);
    }
    // The builder reads the same as the JSON form.
    let built = Filter::new()
        .eq("kind", "note")
        .gte("score", 2.5)
        .lt("score", 5);
    assert_eq!(
        sorted(search(store.as_ref(), Search::new(n.clone()).filter(built)).await),
        ["b"]
    );
}

async fn filters_page_over_matches_only(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["mixed"]);
    for i in 0..12 {
        let kind = if i % 3 == 0 { "keep" } else { "skip" };
        store
            .put(&n, &format!("k{i:02}"), json!({"kind": kind, "i": i}))
            .await
            .unwrap();
    }
    let keep = || Search::new(n.clone()).filter(Filter::new().eq("kind", "keep"));
    assert_eq!(
        search(store.as_ref(), keep().limit(2)).await,
        ["k09", "k06"]
    );
    assert_eq!(
        search(store.as_ref(), keep().limit(2).offset(2)).await,
        ["k03", "k00"]
    );
    assert!(search(store.as_ref(), keep().offset(4)).await.is_empty());
}

async fn namespaces_are_listed_by_prefix_suffix_and_depth(s: &Storage) {
    let store = s.open().await;
    // LangGraph's own example.
    for labels in [
        &["a", "b", "c"][..],
        &["a", "b", "d", "e"],
        &["a", "b", "d", "i"],
        &["a", "b", "f"],
        &["a", "c", "f"],
    ] {
        store.put(&ns(labels), "k", json!({})).await.unwrap();
        store.put(&ns(labels), "k2", json!({})).await.unwrap();
    }
    let list = |l: ListNamespaces| {
        let store = store.clone();
        async move {
            store
                .list_namespaces(&l)
                .await
                .unwrap()
                .into_iter()
                .map(|n| n.labels().join("/"))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        list(ListNamespaces::new().prefix(["a", "b"]).max_depth(3)).await,
        ["a/b/c", "a/b/d", "a/b/f"]
    );
    assert_eq!(
        list(ListNamespaces::new()).await,
        ["a/b/c", "a/b/d/e", "a/b/d/i", "a/b/f", "a/c/f"]
    );
    assert_eq!(list(ListNamespaces::new().max_depth(1)).await, ["a"]);
    assert_eq!(
        list(ListNamespaces::new().max_depth(2)).await,
        ["a/b", "a/c"]
    );
    assert_eq!(
        list(ListNamespaces::new().suffix(["f"])).await,
        ["a/b/f", "a/c/f"]
    );
    assert_eq!(
        list(ListNamespaces::new().prefix(["a", "*", "f"])).await,
        ["a/b/f", "a/c/f"]
    );
    assert_eq!(
        list(ListNamespaces::new().prefix(["*", "b"]).suffix(["d", "*"])).await,
        ["a/b/d/e", "a/b/d/i"]
    );
    assert_eq!(
        list(ListNamespaces::new().prefix(["a"]).suffix(["b", "*"])).await,
        ["a/b/c", "a/b/f"]
    );
    assert_eq!(
        list(ListNamespaces::new().limit(2).offset(1)).await,
        ["a/b/d/e", "a/b/d/i"]
    );
    assert_eq!(
        list(ListNamespaces::new().max_depth(3).limit(2).offset(1)).await,
        ["a/b/d", "a/b/f"]
    );
    assert!(list(ListNamespaces::new().limit(0)).await.is_empty());
}

async fn namespaces_that_must_not_be_listed_are_not(s: &Storage) {
    let store = s.open().await;
    store.put(&ns(&["a", "bc"]), "k", json!({})).await.unwrap();
    store
        .put(&ns(&["a", "b"]), "gone", json!({}))
        .await
        .unwrap();
    store.delete(&ns(&["a", "b"]), "gone").await.unwrap();
    store
        .put_opts(
            &ns(&["a", "b", "old"]),
            "k",
            json!({}),
            PutOptions::new().ttl(Duration::from_millis(1)),
        )
        .await
        .unwrap();
    store
        .put(&ns(&["x", "a", "b"]), "k", json!({}))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let list = |l: ListNamespaces| {
        let store = store.clone();
        async move {
            store
                .list_namespaces(&l)
                .await
                .unwrap()
                .into_iter()
                .map(|n| n.labels().join("/"))
                .collect::<Vec<_>>()
        }
    };
    // Not ("a", "bc") for the prefix ("a", "b"); not the deleted item's nor the expired one's.
    assert!(
        list(ListNamespaces::new().prefix(["a", "b"]))
            .await
            .is_empty()
    );
    assert_eq!(list(ListNamespaces::new()).await, ["a/bc", "x/a/b"]);
    assert_eq!(list(ListNamespaces::new().suffix(["b"])).await, ["x/a/b"]);
    assert!(list(ListNamespaces::new().suffix(["a"])).await.is_empty());
    assert!(
        list(ListNamespaces::new().prefix(["a", "bc", "d"]))
            .await
            .is_empty()
    );
    assert!(
        list(ListNamespaces::new().suffix(["x", "a", "b", "c"]))
            .await
            .is_empty(),
        "a pattern longer than the namespace never matches"
    );
}

async fn labels_sort_like_tuples_whatever_their_characters(s: &Storage) {
    let store = s.open().await;
    // `.`, `-` and ` ` sort below letters; the tuple ("a", ..) still comes before ("a-b", ..).
    let spaces = [
        &["a", "z"][..],
        &["a-b"],
        &["a.b"],
        &["a b"],
        &["a"],
        &["ada@example.com", "memories"],
        &["été", "ü"],
    ];
    for labels in spaces {
        store.put(&ns(labels), "k", json!({})).await.unwrap();
    }
    let listed: Vec<Vec<String>> = store
        .list_namespaces(&ListNamespaces::new())
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.labels().to_vec())
        .collect();
    let mut expected: Vec<Vec<String>> = spaces
        .iter()
        .map(|l| l.iter().map(|s| s.to_string()).collect())
        .collect();
    expected.sort();
    assert_eq!(listed, expected);
    // The prefix ("a",) holds ("a",) and ("a", "z"), not ("a-b",), ("a.b",) nor ("a b",).
    assert_eq!(
        store
            .search(&Search::new(ns(&["a"])))
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.namespace.labels().join("|"))
            .collect::<Vec<_>>(),
        ["a", "a|z"]
    );
    assert_eq!(
        store
            .get(&ns(&["ada@example.com", "memories"]), "k")
            .await
            .unwrap()
            .unwrap()
            .namespace,
        ns(&["ada@example.com", "memories"])
    );
}

async fn items_expire_and_are_swept(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["tmp"]);
    let short = PutOptions::new().ttl(Duration::from_millis(300));
    store
        .put_opts(&n, "short", json!({"v": 1}), short.clone())
        .await
        .unwrap();
    store.put(&n, "forever", json!({"v": 2})).await.unwrap();
    let item = store.get(&n, "short").await.unwrap().unwrap();
    let expires = item.expires_at.unwrap();
    assert!(expires > item.updated_at);
    assert!(expires <= item.updated_at + Duration::from_millis(400));
    let created = item.created_at;

    tokio::time::sleep(Duration::from_millis(450)).await;
    // Expired: never returned, found or listed, before any sweep.
    assert!(store.get(&n, "short").await.unwrap().is_none());
    assert_eq!(
        search(store.as_ref(), Search::new(n.clone())).await,
        ["forever"]
    );
    assert_eq!(store.sweep_expired().await.unwrap(), 1);
    assert_eq!(store.sweep_expired().await.unwrap(), 0);
    assert!(store.get(&n, "forever").await.unwrap().is_some());

    // A put over an expired item creates it anew.
    store
        .put_opts(&n, "again", json!({}), short.clone())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    store.put(&n, "again", json!({"back": true})).await.unwrap();
    let back = store.get(&n, "again").await.unwrap().unwrap();
    assert_eq!(back.created_at, back.updated_at);
    assert!(back.created_at > created);
    assert_eq!(back.expires_at, None, "put without a ttl: no expiry");
    // Expired namespaces are not listed.
    store
        .put_opts(&ns(&["gone"]), "k", json!({}), short)
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(450)).await;
    let listed = store.list_namespaces(&ListNamespaces::new()).await.unwrap();
    assert_eq!(listed, [n]);
}

async fn reads_refresh_the_time_to_live_unless_told_not_to(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["sessions"]);
    store
        .put_opts(
            &n,
            "s",
            json!({"v": 1}),
            PutOptions::new().ttl(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let first = store
        .get_opts(&n, "s", GetOptions::new().refresh_ttl(false))
        .await
        .unwrap()
        .unwrap()
        .expires_at
        .unwrap();
    tokio::time::sleep(Duration::from_millis(30)).await;
    let unrefreshed = store
        .get_opts(&n, "s", GetOptions::new().refresh_ttl(false))
        .await
        .unwrap()
        .unwrap()
        .expires_at
        .unwrap();
    assert_eq!(unrefreshed, first);
    let refreshed = store
        .get(&n, "s")
        .await
        .unwrap()
        .unwrap()
        .expires_at
        .unwrap();
    assert!(
        refreshed >= first + Duration::from_millis(25),
        "a get refreshes"
    );
    // The refresh is stored: a later read sees it.
    let seen = store
        .get_opts(&n, "s", GetOptions::new().refresh_ttl(false))
        .await
        .unwrap()
        .unwrap()
        .expires_at
        .unwrap();
    assert_eq!(seen, refreshed);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let found = store
        .search(&Search::new(n.clone()).refresh_ttl(false))
        .await
        .unwrap();
    assert_eq!(found[0].expires_at, Some(refreshed));
    let found = store.search(&Search::new(n.clone())).await.unwrap();
    assert!(found[0].expires_at.unwrap() >= refreshed + Duration::from_millis(25));

    // A store that does not refresh on read.
    let still = s
        .open_with(Setup::ttl(TtlConfig::new().refresh_on_read(false)))
        .await;
    let before = still.get(&n, "s").await.unwrap().unwrap().expires_at;
    tokio::time::sleep(Duration::from_millis(30)).await;
    assert_eq!(
        still.get(&n, "s").await.unwrap().unwrap().expires_at,
        before
    );
    let asked = still
        .get_opts(&n, "s", GetOptions::new().refresh_ttl(true))
        .await
        .unwrap()
        .unwrap()
        .expires_at;
    assert!(asked > before);
    // Items without a time to live are untouched by reads.
    store.put(&n, "plain", json!({})).await.unwrap();
    assert_eq!(
        store.get(&n, "plain").await.unwrap().unwrap().expires_at,
        None
    );
    // A time to live of `Duration::MAX` ("forever") is read, refreshed and searched on every
    // back-end alike (the refresh overflowed SQLite's and PostgreSQL's column).
    store
        .put_opts(
            &n,
            "forever",
            json!({"v": 1}),
            PutOptions::new().ttl(Duration::MAX),
        )
        .await
        .unwrap();
    for _ in 0..2 {
        let item = store.get(&n, "forever").await.unwrap().unwrap();
        assert_eq!(item.value["v"], 1);
        assert!(
            item.expires_at.unwrap() > std::time::SystemTime::now() + Duration::from_secs(1 << 40)
        );
    }
    assert_eq!(
        store.search(&Search::new(n.clone())).await.unwrap().len(),
        3
    );
}

async fn the_default_time_to_live_applies_unless_overridden(s: &Storage) {
    let store = s
        .open_with(Setup::ttl(
            TtlConfig::new().default_ttl(Duration::from_secs(3600)),
        ))
        .await;
    let n = ns(&["d"]);
    store.put(&n, "default", json!({})).await.unwrap();
    store
        .put_opts(&n, "none", json!({}), PutOptions::new().no_ttl())
        .await
        .unwrap();
    store
        .put_opts(
            &n,
            "own",
            json!({}),
            PutOptions::new().ttl(Duration::from_secs(60)),
        )
        .await
        .unwrap();
    let get = |k: &'static str| {
        let store = store.clone();
        let n = n.clone();
        async move { store.get(&n, k).await.unwrap().unwrap() }
    };
    let d = get("default").await;
    let in_an_hour = d.expires_at.unwrap().duration_since(d.updated_at).unwrap();
    assert!(in_an_hour > Duration::from_secs(3590) && in_an_hour <= Duration::from_secs(3601));
    assert_eq!(get("none").await.expires_at, None);
    let own = get("own").await;
    let in_a_minute = own
        .expires_at
        .unwrap()
        .duration_since(own.updated_at)
        .unwrap();
    assert!(in_a_minute <= Duration::from_secs(61));
}

async fn semantic_search_ranks_by_similarity(s: &Storage) {
    let store = s
        .open_with(Setup::index(
            IndexConfig::new(HashEmbedder::new(256), 256).fields(["text"]),
        ))
        .await;
    let n = ns(&["memories"]);
    put_all(
        store.as_ref(),
        &n,
        &[
            ("tea", json!({"text": "Ada drinks green tea every morning"})),
            ("rust", json!({"text": "Ada writes Rust at work"})),
            ("lyon", json!({"text": "Ada lives in Lyon"})),
            ("bob", json!({"text": "Bob likes coffee"})),
        ],
    )
    .await;
    let hits = store
        .search(
            &Search::new(n.clone())
                .query("what tea does Ada drink")
                .limit(2),
        )
        .await
        .unwrap();
    // "tea" shares two words with the query; "lyon" and "rust" one each, and equal scores keep
    // namespace-and-key order.
    assert_eq!(keys(&hits), ["tea", "lyon"]);
    let (top, next) = (hits[0].score.unwrap(), hits[1].score.unwrap());
    assert!(top > next && top > 0.3 && top <= 1.0 + 1e-9, "{top} {next}");
    // Paging a ranked search.
    let all = store
        .search(&Search::new(n.clone()).query("Bob coffee").limit(10))
        .await
        .unwrap();
    assert_eq!(all.len(), 4);
    assert_eq!(all[0].key, "bob");
    let page = store
        .search(
            &Search::new(n.clone())
                .query("Bob coffee")
                .limit(2)
                .offset(1),
        )
        .await
        .unwrap();
    assert_eq!(keys(&page), keys(&all[1..3]));
    // An item indexed on several texts scores with its best one.
    store
        .put_opts(
            &n,
            "many",
            json!({"text": "nothing", "parts": [{"t": "red bicycle"}, {"t": "violin lessons"}]}),
            PutOptions::new().index(["parts[*].t"]),
        )
        .await
        .unwrap();
    let hits = store
        .search(&Search::new(n.clone()).query("violin lessons").limit(1))
        .await
        .unwrap();
    assert_eq!(hits[0].key, "many");
    assert!(hits[0].score.unwrap() > 0.99);
    // A restart keeps the vectors.
    let again = s
        .open_with(Setup::index(
            IndexConfig::new(HashEmbedder::new(256), 256).fields(["text"]),
        ))
        .await;
    let hits = again
        .search(&Search::new(n).query("Lyon").limit(1))
        .await
        .unwrap();
    assert_eq!(hits[0].key, "lyon");
}

async fn semantic_search_with_a_filter_and_unindexed_items(s: &Storage) {
    let store = s
        .open_with(Setup::index(IndexConfig::new(HashEmbedder::new(128), 128)))
        .await;
    let n = ns(&["kb"]);
    put_all(
        store.as_ref(),
        &n,
        &[
            ("a", json!({"kind": "faq", "q": "how to reset a password"})),
            ("b", json!({"kind": "faq", "q": "how to change an email"})),
            ("c", json!({"kind": "blog", "q": "reset password tips"})),
        ],
    )
    .await;
    store
        .put_opts(
            &n,
            "raw",
            json!({"kind": "faq", "q": "password"}),
            PutOptions::new().no_index(),
        )
        .await
        .unwrap();
    let hits = store
        .search(
            &Search::new(n.clone())
                .query("reset password")
                .filter(Filter::new().eq("kind", "faq")),
        )
        .await
        .unwrap();
    // The blog post is filtered out; the unindexed item comes last, without a score.
    assert_eq!(keys(&hits), ["a", "b", "raw"]);
    assert!(hits[0].score.unwrap() > hits[1].score.unwrap());
    assert_eq!(hits[2].score, None);
    let none = store
        .search(
            &Search::new(n)
                .query("reset password")
                .filter(Filter::new().eq("kind", "news")),
        )
        .await
        .unwrap();
    assert!(none.is_empty());
}

async fn embedding_mistakes_are_refused_and_store_nothing(s: &Storage) {
    // A query on a store without an index.
    let plain = s.open().await;
    let e = plain
        .search(&Search::new(Namespace::root()).query("anything"))
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::NoIndex { .. }), "{e}");
    assert!(e.to_string().contains("IndexConfig"), "{e}");
    // Vectors of the wrong length: the put fails and nothing is stored.
    let wrong = s
        .open_with(Setup::index(IndexConfig::new(HashEmbedder::new(8), 16)))
        .await;
    let n = ns(&["e"]);
    let e = wrong.put(&n, "k", json!({"text": "x"})).await.unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Dimensions {
                found: 8,
                expected: 16,
                ..
            }
        ),
        "{e}"
    );
    assert!(plain.get(&n, "k").await.unwrap().is_none());
    // A bad field path.
    let e = wrong
        .put_opts(
            &n,
            "k",
            json!({"text": "x"}),
            PutOptions::new().index(["a..b"]),
        )
        .await
        .unwrap_err();
    assert!(matches!(e, StoreError::InvalidFieldPath { .. }), "{e}");
    assert!(plain.get(&n, "k").await.unwrap().is_none());
    // Vectors stored with one embedder, searched with another of other dimensions.
    let eight = s
        .open_with(Setup::index(IndexConfig::new(HashEmbedder::new(8), 8)))
        .await;
    eight.put(&n, "k", json!({"text": "x"})).await.unwrap();
    let sixteen = s
        .open_with(Setup::index(IndexConfig::new(HashEmbedder::new(16), 16)))
        .await;
    let e = sixteen
        .search(&Search::new(n).query("x"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Dimensions {
                found: 8,
                expected: 16,
                ..
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("put them again"), "{e}");
}

async fn invalid_arguments_are_refused_and_store_nothing(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["ok"]);
    for value in [json!("text"), json!(1), json!([1]), json!(null)] {
        let e = store.put(&n, "k", value).await.unwrap_err();
        assert!(e.to_string().contains("JSON objects"), "{e}");
    }
    let e = store
        .put(&Namespace::root(), "k", json!({}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("at least one label"), "{e}");
    assert!(store.get(&Namespace::root(), "k").await.is_err());
    for key in ["", "a\0b"] {
        assert!(matches!(
            store.put(&n, key, json!({})).await.unwrap_err(),
            StoreError::InvalidKey { .. }
        ));
    }
    let long = "k".repeat(kit::store::MAX_KEY_BYTES + 1);
    let e = store.put(&n, &long, json!({})).await.unwrap_err();
    assert!(e.to_string().contains("shorter key"), "{e}");
    assert!(
        search(store.as_ref(), Search::new(Namespace::root()))
            .await
            .is_empty()
    );
    // Patterns: a wildcard is fine, an empty label is not.
    assert!(
        store
            .list_namespaces(&ListNamespaces::new().prefix(["*", ""]))
            .await
            .is_err()
    );
    // Namespaces refuse what they cannot hold.
    for bad in [&["a", ""][..], &["*"], &["a\u{1f}b"], &["new\nline"]] {
        assert!(Namespace::new(bad.iter().copied()).is_err(), "{bad:?}");
    }
    assert!(Namespace::new(["x".repeat(kit::store::MAX_NAMESPACE_BYTES + 1)]).is_err());
    // A namespace of a thousand or a million labels makes a short error.
    for count in [1_000, 1_000_000] {
        let mut labels = vec!["l"; count];
        labels[count - 1] = "";
        let e = Namespace::new(labels).unwrap_err();
        assert!(
            e.to_string().len() < 2_000,
            "{count}: {} bytes",
            e.to_string().len()
        );
        assert!(
            e.to_string().contains(&format!("{count} labels in all")),
            "{e}"
        );
    }
    // Filters refuse unknown operators, naming them.
    let e = Filter::from_json(&json!({"a": {"$regex": "x"}})).unwrap_err();
    assert!(e.to_string().contains("$regex"), "{e}");
    assert!(Filter::from_json(&json!({"a": {"$gt": 1, "b": 2}})).is_err());
    assert!(Filter::from_json(&json!(["a"])).is_err());
}

async fn values_of_1_kib_and_1_mib_round_trip_and_filter(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["big"]);
    for (key, size) in [("kib", 1024usize), ("mib", 1024 * 1024)] {
        let text: String = "abcdefgh".repeat(size / 8);
        let nested: Vec<Value> = (0..size / 64).map(|i| json!({"i": i})).collect();
        store
            .put(&n, key, json!({"size": size, "text": text, "rows": nested}))
            .await
            .unwrap();
        let got = store.get(&n, key).await.unwrap().unwrap();
        assert_eq!(got.value["text"].as_str().unwrap().len(), size);
        assert_eq!(got.value["rows"].as_array().unwrap().len(), size / 64);
        let found = store
            .search(
                &Search::new(n.clone()).filter(
                    Filter::new()
                        .eq("size", size as u64)
                        .eq("text", text.clone()),
                ),
            )
            .await
            .unwrap();
        assert_eq!(keys(&found), [key]);
        let missed = store
            .search(&Search::new(n.clone()).filter(Filter::new().eq("text", format!("{text}!"))))
            .await
            .unwrap();
        assert!(missed.is_empty());
    }
}

async fn concurrent_writers_all_land(s: &Storage) {
    let store = s.open().await;
    let n = ns(&["c"]);
    let mut tasks = Vec::new();
    for t in 0..8 {
        let store = store.clone();
        let n = n.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..10 {
                store
                    .put(&n, &format!("t{t}-{i}"), json!({"t": t, "i": i}))
                    .await
                    .unwrap();
                store
                    .put(&n, "shared", json!({"t": t, "i": i}))
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let all = store
        .search(&Search::new(n.clone()).limit(1000))
        .await
        .unwrap();
    assert_eq!(all.len(), 81);
    let shared = store.get(&n, "shared").await.unwrap().unwrap();
    assert!(shared.value["t"].as_u64().unwrap() < 8 && shared.value["i"].as_u64().unwrap() < 10);
}

/// Only the required methods of a store: its `keys` is the trait's default, which pages
/// through `search`.
struct Paged(std::sync::Arc<dyn Store>);

#[kit::async_trait]
impl Store for Paged {
    async fn get_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        options: GetOptions,
    ) -> Result<Option<kit::store::Item>, StoreError> {
        self.0.get_opts(namespace, key, options).await
    }
    async fn put_opts(
        &self,
        namespace: &Namespace,
        key: &str,
        value: Value,
        options: PutOptions,
    ) -> Result<(), StoreError> {
        self.0.put_opts(namespace, key, value, options).await
    }
    async fn delete(&self, namespace: &Namespace, key: &str) -> Result<(), StoreError> {
        self.0.delete(namespace, key).await
    }
    async fn search(&self, search: &Search) -> Result<Vec<kit::store::SearchItem>, StoreError> {
        self.0.search(search).await
    }
    async fn list_namespaces(&self, list: &ListNamespaces) -> Result<Vec<Namespace>, StoreError> {
        self.0.list_namespaces(list).await
    }
    async fn sweep_expired(&self) -> Result<u64, StoreError> {
        self.0.sweep_expired().await
    }
}

/// The keys under a prefix (sub-namespaces included, each key once, sorted, expired items
/// left out, other namespaces never) are what paging through search lists, read in one pass
/// (the filesystem's store backend lists its files this way on every write).
async fn keys_are_listed_in_one_pass_as_paging_would_list_them(s: &Storage) {
    let store = s.open().await;
    let files = ns(&["fs", "t1"]);
    for i in 0..250 {
        store
            .put(&files, &format!("/f{i:03}.md"), json!({"content": "x"}))
            .await
            .unwrap();
    }
    // The same key in a sub-namespace, a key only there, a neighbour namespace, an expiring
    // item.
    let sub = ns(&["fs", "t1", "deep"]);
    store.put(&sub, "/f000.md", json!({})).await.unwrap();
    store.put(&sub, "/only-deep.md", json!({})).await.unwrap();
    store
        .put(&ns(&["fs", "t10"]), "/other.md", json!({}))
        .await
        .unwrap();
    store
        .put_opts(
            &files,
            "/soon-gone.md",
            json!({}),
            PutOptions::new().ttl(Duration::from_millis(200)),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;

    let listed = store.keys(&files).await.unwrap();
    let mut expected: Vec<String> = (0..250).map(|i| format!("/f{i:03}.md")).collect();
    expected.push("/only-deep.md".into());
    assert_eq!(listed, expected);
    let paged = Paged(store.clone()).keys(&files).await.unwrap();
    assert_eq!(listed, paged);
    assert_eq!(
        store.keys(&ns(&["nothing"])).await.unwrap(),
        Vec::<String>::new()
    );
    let everything = store.keys(&Namespace::root()).await.unwrap();
    assert_eq!(everything.len(), 252, "{everything:?}");
}
