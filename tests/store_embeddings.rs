//! `OpenAiEmbeddings` against a real HTTP server on 127.0.0.1 speaking the OpenAI embeddings
//! wire format (`kit_testing::embeddings::MockEmbeddings`): the request it sends, the answers
//! it accepts and refuses, batching, retries, and a SQLite store searching by meaning through
//! it.

use std::time::Duration;

use kit::Config;
use kit::http::{HttpClient, RetryPolicy};
use kit::store::{
    Embedder, IndexConfig, Namespace, OpenAiEmbeddings, Search, SqliteStore, Store, StoreError,
};
use kit::testing::HashEmbedder;
use kit_testing::embeddings::{MockEmbeddings, error_body};
use serde_json::{Value, json};

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn config(server: &MockEmbeddings, key: &str) -> Config {
    Config {
        openai_api_key: Some(key.to_string()),
        openai_base_url: Some(server.base_url()),
        ..Config::default()
    }
}

/// A client that retries fast, so tests of retries do not wait.
fn quick() -> HttpClient {
    HttpClient::new().retry_policy(RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(20),
        ..RetryPolicy::default()
    })
}

#[tokio::test]
async fn requests_and_answers_follow_the_openai_wire_format() {
    let server = MockEmbeddings::start(8).await.unwrap();
    server.require_key("sk-test-123");
    let embedder = OpenAiEmbeddings::new(&config(&server, "sk-test-123"))
        .unwrap()
        .model("text-embedding-3-small")
        .dimensions(16);
    let vectors = embedder
        .embed_documents(&texts(&["Ada likes tea", "Bob likes coffee"]))
        .await
        .unwrap();
    assert_eq!(vectors.len(), 2);
    assert_eq!(vectors[0], HashEmbedder::new(16).vector("Ada likes tea"));
    assert_eq!(vectors[1], HashEmbedder::new(16).vector("Bob likes coffee"));
    let sent = &server.requests()[0];
    assert_eq!(sent.authorization.as_deref(), Some("Bearer sk-test-123"));
    assert_eq!(
        sent.body,
        json!({
            "model": "text-embedding-3-small",
            "input": ["Ada likes tea", "Bob likes coffee"],
            "encoding_format": "float",
            "dimensions": 16,
        })
    );
    // A query is one input, one vector.
    let q = embedder.embed_query("tea").await.unwrap();
    assert_eq!(q, HashEmbedder::new(16).vector("tea"));
    // A local server needs no key, and none is sent.
    let local = OpenAiEmbeddings::local(server.base_url());
    server.require_key("sk-test-123");
    let e = local.embed_query("x").await.unwrap_err();
    assert!(e.to_string().contains("401"), "{e}");
    assert_eq!(server.requests().last().unwrap().authorization, None);
}

#[tokio::test]
async fn answers_out_of_order_are_put_back_in_input_order_and_batched() {
    let server = MockEmbeddings::start(8).await.unwrap();
    server.reverse_order(true);
    let embedder = OpenAiEmbeddings::local(server.base_url()).batch_size(2);
    let input = texts(&["one", "two", "three", "four", "five"]);
    let vectors = embedder.embed_documents(&input).await.unwrap();
    let expected: Vec<Vec<f32>> = input
        .iter()
        .map(|t| HashEmbedder::new(8).vector(t))
        .collect();
    assert_eq!(vectors, expected);
    let sizes: Vec<usize> = server
        .requests()
        .iter()
        .map(|r| r.body["input"].as_array().unwrap().len())
        .collect();
    assert_eq!(sizes, [2, 2, 1]);
}

#[tokio::test]
async fn failures_are_errors_that_say_what_to_do_and_never_show_the_key() {
    let server = MockEmbeddings::start(4).await.unwrap();
    server.require_key("sk-right");
    let wrong = OpenAiEmbeddings::new(&config(&server, "sk-wrong-secret"))
        .unwrap()
        .http(quick());
    let e = wrong.embed_query("x").await.unwrap_err().to_string();
    assert!(e.contains("401") && e.contains("OPENAI_API_KEY"), "{e}");
    assert!(!e.contains("sk-wrong-secret"), "{e}");

    // A 500 is retried; the retry succeeds.
    let good = OpenAiEmbeddings::new(&config(&server, "sk-right"))
        .unwrap()
        .http(quick());
    server.fail_next(
        500,
        error_body("The server had an error", "server_error", None),
    );
    let before = server.requests().len();
    assert_eq!(good.embed_query("x").await.unwrap().len(), 4);
    assert_eq!(server.requests().len() - before, 2);

    // A 404 points at the base URL and the model.
    server.fail_next(
        404,
        error_body(
            "The model `nope` does not exist",
            "invalid_request_error",
            Some("model_not_found"),
        ),
    );
    let e = good.embed_query("x").await.unwrap_err().to_string();
    assert!(
        e.contains("base URL") && e.contains("does not exist"),
        "{e}"
    );

    // Answers that are not what was asked for.
    let two = texts(&["a", "b"]);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"nope": 1}), "not an embeddings list"),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}]}),
            "1 vectors for 2 texts",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 0, "embedding": [2.0]}]}),
            "index 0 twice",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 7, "embedding": [2.0]}]}),
            "index 7 for 2 texts",
        ),
        (
            json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": ["x"]}]}),
            "not an embeddings list",
        ),
        (json!([1, 2]), "not an embeddings list"),
    ];
    for (body, says) in cases {
        server.fail_next(200, body.clone());
        let e = good.embed_documents(&two).await.unwrap_err();
        assert!(matches!(e, StoreError::Embedding(_)), "{e}");
        assert!(e.to_string().contains(says), "{body}: {e}");
        assert!(
            e.to_string().contains("/v1/embeddings"),
            "names the endpoint: {e}"
        );
    }
    // No key at all.
    let e = OpenAiEmbeddings::new(&Config::default())
        .unwrap_err()
        .to_string();
    assert!(e.contains("OPENAI_API_KEY") && e.contains("local"), "{e}");
}

#[tokio::test]
async fn a_sqlite_store_searches_by_meaning_through_the_server() {
    let server = MockEmbeddings::start(64).await.unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.sqlite");
    let open = || {
        SqliteStore::open(&path)
            .unwrap()
            .index(
                IndexConfig::new(OpenAiEmbeddings::local(server.base_url()), 64).fields(["text"]),
            )
            .unwrap()
    };
    let store = open();
    let ns = Namespace::new(["users", "ada"]).unwrap();
    for (key, text) in [
        ("tea", "Ada drinks green tea"),
        ("lyon", "Ada lives in Lyon"),
        ("rust", "Ada writes Rust"),
    ] {
        store.put(&ns, key, json!({"text": text})).await.unwrap();
    }
    // One request per put, embedding only the indexed field.
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[0].body["input"], json!(["Ada drinks green tea"]));

    let again = open();
    let hits = again
        .search(&Search::new(ns.clone()).query("green tea").limit(1))
        .await
        .unwrap();
    assert_eq!(hits[0].key, "tea");
    assert!(hits[0].score.unwrap() > 0.5);
    assert_eq!(
        server.requests().last().unwrap().body["input"],
        json!(["green tea"])
    );

    // The server failing fails the put, and nothing is stored.
    server.fail_next(400, error_body("bad", "invalid_request_error", None));
    let e = again
        .put(&ns, "bad", json!({"text": "x"}))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("400"), "{e}");
    assert!(again.get(&ns, "bad").await.unwrap().is_none());
}

#[tokio::test]
async fn an_input_or_an_answer_of_1_kib_and_1_mib_ends_alike() {
    let server = MockEmbeddings::start(4).await.unwrap();
    let embedder = OpenAiEmbeddings::local(server.base_url());
    for size in [1024usize, 1024 * 1024] {
        // A long text goes out and one vector comes back.
        let text = "word ".repeat(size / 5);
        let v = embedder.embed_query(&text).await.unwrap();
        assert_eq!(v, HashEmbedder::new(4).vector(&text), "{size}");
        // A long vector comes back whole.
        let n = size / 8;
        let long: Vec<f32> = (0..n).map(|i| (i % 7) as f32 / 7.0).collect();
        server.fail_next(200, json!({"data": [{"index": 0, "embedding": long}]}));
        assert_eq!(embedder.embed_query("x").await.unwrap().len(), n, "{size}");
        // A bad number at the end of a long vector is found at either size.
        let mut bad: Vec<Value> = (0..n).map(|_| json!(0.5)).collect();
        bad.push(json!("oops"));
        server.fail_next(200, json!({"data": [{"index": 0, "embedding": bad}]}));
        let e = embedder.embed_query("x").await.unwrap_err();
        assert!(
            e.to_string().contains("not an embeddings list"),
            "{size}: {e}"
        );
    }
}
