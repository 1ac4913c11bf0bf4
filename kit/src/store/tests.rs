//! Unit tests of the store's pure parts: namespaces and their stored form, filters and field
//! paths (at 1 KiB and 1 MiB), listing pages, and the search collector. The back-ends are
//! tested together in `tests/store_conformance.rs`.

use serde_json::{Value, json};

use super::search::{Collector, Flow};
use super::*;

fn ns(labels: &[&str]) -> Namespace {
    Namespace::new(labels.iter().copied()).unwrap()
}

#[test]
fn stored_namespaces_read_back_and_prefixes_are_ranges() {
    for labels in [
        &["a"][..],
        &["users", "ada@example.com", "memories"],
        &["é", "a b", "x.y"],
    ] {
        let n = ns(labels);
        assert_eq!(Namespace::decode(&n.encoded()).unwrap(), n);
    }
    let (low, high) = ns(&["a", "b"]).range();
    let inside = |labels: &[&str]| {
        let e = ns(labels).encoded();
        e >= low && e < high
    };
    assert!(inside(&["a", "b"]));
    assert!(inside(&["a", "b", "c"]));
    assert!(inside(&["a", "b", " "]));
    assert!(!inside(&["a", "bc"]));
    assert!(!inside(&["a", "b c"]));
    assert!(!inside(&["a", "b-"]));
    assert!(!inside(&["a"]));
    assert!(!inside(&["b"]));
    // Stored text that is not a namespace is corrupt data, not a panic.
    assert!(matches!(
        Namespace::decode("a\u{1f}\u{1f}b"),
        Err(StoreError::Corrupt(_))
    ));
    assert!(Namespace::decode("").is_err());
}

#[test]
fn namespaces_show_as_tuples_and_refuse_what_they_cannot_hold() {
    assert_eq!(ns(&["a"]).to_string(), r#"("a",)"#);
    assert_eq!(ns(&["a", "b"]).to_string(), r#"("a", "b")"#);
    assert_eq!(Namespace::root().to_string(), "()");
    let e = Namespace::new(["ok", ""]).unwrap_err().to_string();
    assert!(e.contains("label 1 is empty"), "{e}");
    let e = Namespace::new(["*"]).unwrap_err().to_string();
    assert!(e.contains("wildcard"), "{e}");
    let e = Namespace::new(["tab\there"]).unwrap_err().to_string();
    assert!(e.contains("control character"), "{e}");
    assert!(ns(&["a"]).child("b").is_ok());
    assert!(ns(&["a"]).child("").is_err());
    // JSON reads and writes the labels, and refuses bad ones.
    let n: Namespace = serde_json::from_value(json!(["x", "y"])).unwrap();
    assert_eq!(n, ns(&["x", "y"]));
    assert_eq!(serde_json::to_value(&n).unwrap(), json!(["x", "y"]));
    assert!(serde_json::from_value::<Namespace>(json!(["x", ""])).is_err());
}

#[test]
fn listing_pages_cut_deduplicate_and_skip() {
    let all = [
        ns(&["a", "b", "c"]),
        ns(&["a", "b", "d", "e"]),
        ns(&["a", "b", "d", "i"]),
        ns(&["a", "b", "f"]),
        ns(&["a", "c", "f"]),
    ];
    let run = |list: ListNamespaces| {
        let mut page = NamespacePage::new(&list);
        for n in &all {
            if !page.offer(n.clone()) {
                break;
            }
        }
        page.finish()
            .into_iter()
            .map(|n| n.labels().join("/"))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        run(ListNamespaces::new().max_depth(3)),
        ["a/b/c", "a/b/d", "a/b/f", "a/c/f"]
    );
    assert_eq!(
        run(ListNamespaces::new().max_depth(3).offset(1).limit(2)),
        ["a/b/d", "a/b/f"]
    );
    assert_eq!(run(ListNamespaces::new().max_depth(2).offset(1)), ["a/c"]);
    assert_eq!(run(ListNamespaces::new().max_depth(0)), [""]);
}

fn item(key: &str, value: Value) -> Item {
    Item {
        namespace: ns(&["t"]),
        key: key.to_string(),
        value: value.as_object().cloned().unwrap_or_default(),
        created_at: std::time::UNIX_EPOCH,
        updated_at: std::time::UNIX_EPOCH,
        expires_at: None,
    }
}

#[test]
fn the_collector_keeps_one_page_ranked_and_stops_early() {
    // Without a query: arrival order, stops once the page is full.
    let search = Search::new(Namespace::root()).limit(2).offset(1);
    let mut c = Collector::new(&search, None);
    let mut offered = 0;
    for i in 0..10 {
        offered += 1;
        if c.offer(item(&format!("k{i}"), json!({})), []).unwrap() == Flow::Done {
            break;
        }
    }
    assert_eq!(offered, 3);
    let page: Vec<String> = c.finish().into_iter().map(|i| i.item.key).collect();
    assert_eq!(page, ["k1", "k2"]);

    // With a query: the best scores first, unscored after, offset over both.
    let q = [1.0f32, 0.0];
    let search = Search::new(Namespace::root()).limit(3).offset(1);
    let mut c = Collector::new(&search, Some((&q, 2)));
    let vectors: [(&str, &[[f32; 2]]); 5] = [
        ("far", &[[0.0, 1.0]]),
        ("near", &[[1.0, 0.1]]),
        ("none", &[]),
        ("best-of-two", &[[0.0, 1.0], [1.0, 0.0]]),
        ("mid", &[[1.0, 1.0]]),
    ];
    for (key, vs) in vectors {
        c.offer(item(key, json!({})), vs.iter().map(|v| v.as_slice()))
            .unwrap();
    }
    let page: Vec<(String, Option<f64>)> = c
        .finish()
        .into_iter()
        .map(|i| (i.item.key.clone(), i.score))
        .collect();
    let keys: Vec<&str> = page.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["near", "mid", "far"]);
    assert!((page[1].1.unwrap() - std::f64::consts::FRAC_1_SQRT_2).abs() < 1e-6);

    // A stored vector of another length is an error naming the item.
    let mut c = Collector::new(&search, Some((&q, 2)));
    let e = c
        .offer(item("odd", json!({})), [[1.0f32, 2.0, 3.0].as_slice()])
        .unwrap_err();
    assert!(
        matches!(
            e,
            StoreError::Dimensions {
                found: 3,
                expected: 2,
                ..
            }
        ),
        "{e}"
    );
}

/// A value of about `size` bytes: one long string and many small fields.
fn value_of(size: usize) -> serde_json::Map<String, Value> {
    let mut map = serde_json::Map::new();
    map.insert("text".into(), json!("x".repeat(size / 2)));
    let rows: Vec<Value> = (0..size / 32)
        .map(|i| json!({"i": i, "tag": "t"}))
        .collect();
    map.insert("rows".into(), Value::Array(rows));
    map.insert("kind".into(), json!("note"));
    map
}

#[test]
fn filters_end_alike_at_1_kib_and_1_mib() {
    for size in [1024usize, 1024 * 1024] {
        let value = value_of(size);
        let rows = value["rows"].clone();
        let text = value["text"].clone();
        // A filter comparing the whole big fields, which must match, and ones that must not
        // (the difference in the last row, or in the last character).
        let hit = Filter::new()
            .eq("kind", "note")
            .eq("text", text.clone())
            .eq("rows", rows.clone());
        let mut other = rows.as_array().cloned().unwrap_or_default();
        if let Some(last) = other.last_mut() {
            *last = json!({"i": -1, "tag": "t"});
        }
        let longer = format!("{}x", text.as_str().unwrap_or_default());
        assert!(hit.matches(&value), "{size}");
        assert!(
            !Filter::new()
                .eq("rows", Value::Array(other))
                .matches(&value),
            "{size}"
        );
        assert!(
            !Filter::new().eq("text", longer.clone()).matches(&value),
            "{size}"
        );
        assert!(Filter::new().lt("text", longer).matches(&value), "{size}");
        assert!(!Filter::new().gt("text", text).matches(&value), "{size}");
    }
}

#[test]
fn field_paths_select_alike_at_1_kib_and_1_mib() {
    let path = embed::FieldPath::parse("rows[*].tag").unwrap();
    let last = embed::FieldPath::parse("rows[-1].i").unwrap();
    for size in [1024usize, 1024 * 1024] {
        let value = Value::Object(value_of(size));
        assert_eq!(path.texts(&value).len(), size / 32, "{size}");
        assert_eq!(last.texts(&value), [(size / 32 - 1).to_string()], "{size}");
    }
}
