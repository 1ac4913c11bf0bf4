use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use super::worker::body_excerpt;
use super::*;

#[test]
fn retry_after_seconds_and_dates() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let parse_retry_after = crate::http::retry_after_value;
    assert_eq!(parse_retry_after("3", now), Some(Duration::from_secs(3)));
    assert_eq!(parse_retry_after(" 0 ", now), Some(Duration::ZERO));
    let later = httpdate::fmt_http_date(now + Duration::from_secs(7));
    assert_eq!(parse_retry_after(&later, now), Some(Duration::from_secs(7)));
    let earlier = httpdate::fmt_http_date(now - Duration::from_secs(7));
    assert_eq!(parse_retry_after(&earlier, now), Some(Duration::ZERO));
    assert_eq!(parse_retry_after("soon", now), None);
    assert_eq!(parse_retry_after("-1", now), None);
}

#[test]
fn backoff_doubles_with_jitter_and_caps() {
    let cfg = QueueConfig {
        initial_backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(1000),
        ..Default::default()
    };
    let backoff =
        |cfg: &QueueConfig, attempt: u32| cfg.retry_policy().backoff(attempt.saturating_add(1));
    for _ in 0..50 {
        let b0 = backoff(&cfg, 0);
        assert!(b0 >= Duration::from_millis(50) && b0 <= Duration::from_millis(100));
        let b2 = backoff(&cfg, 2);
        assert!(b2 >= Duration::from_millis(200) && b2 <= Duration::from_millis(400));
        let b9 = backoff(&cfg, 9);
        assert!(b9 >= Duration::from_millis(500) && b9 <= Duration::from_millis(1000));
        assert!(backoff(&cfg, u32::MAX) <= Duration::from_millis(1000));
    }
}

#[test]
fn errors_say_what_to_do_and_hide_secrets() {
    let e = ExportError::Status {
        status: 401,
        body: body_excerpt(b"bad key: Bearer sk-live-ABCDEFGHIJKLMNOPQRST"),
    };
    let text = e.to_string();
    assert!(text.contains("KIT_TRACE_API_KEY"), "{text}");
    assert!(!text.contains("ABCDEFGHIJ"), "{text}");
    let e = ExportError::Status {
        status: 413,
        body: String::new(),
    };
    assert!(e.to_string().contains("max_content_chars"));
    let long = "x".repeat(1000);
    assert!(body_excerpt(long.as_bytes()).chars().count() <= 301);
}

#[test]
fn urls_must_be_http() {
    assert!(parse_url("https://cloud.langfuse.com/api/public/otel").is_ok());
    for bad in ["localhost:4318", "ftp://x/y", "http://", "not a url"] {
        let e = parse_url(bad).unwrap_err();
        assert!(matches!(e, ExportError::InvalidEndpoint { .. }), "{bad}");
        assert!(e.to_string().contains("KIT_TRACE_ENDPOINT"));
    }
}

#[test]
fn headers_are_checked_without_showing_values() {
    struct Empty;
    impl BatchEncoder for Empty {
        fn content_type(&self) -> &str {
            "application/json"
        }
        fn encode(&self, _: &[RunRecord]) -> Result<Vec<u8>, String> {
            Ok(b"[]".to_vec())
        }
    }
    let e = QueuedExporter::new(
        "http://127.0.0.1:9",
        [("authorization", "Bearer secret\nvalue")],
        Empty,
        QueueConfig::default(),
    )
    .unwrap_err();
    assert_eq!(
        e,
        ExportError::InvalidHeader {
            name: "authorization".into()
        }
    );
    assert!(!e.to_string().contains("secret"));
}

/// Runs as a JSON array.
struct Json;

impl BatchEncoder for Json {
    fn content_type(&self) -> &str {
        "application/json"
    }
    fn encode(&self, runs: &[RunRecord]) -> Result<Vec<u8>, String> {
        serde_json::to_vec(runs).map_err(|e| e.to_string())
    }
}

/// A run recording `bytes` of input.
fn big_run(i: usize, bytes: usize) -> RunRecord {
    let mut run = RunRecord::for_test(
        &format!("run-{i}"),
        "tool",
        super::super::record::RunKind::Tool,
    );
    run.inputs = serde_json::json!({"result": "x".repeat(bytes)});
    run
}

/// A collector that takes connections and never answers: the worker is stuck on its first
/// request, and runs of 100 KiB pile up in the queue. They stop at `max_queued_bytes`
/// (1 MiB here: about ten runs); the rest are dropped and counted, whatever the run count
/// allows. At 1 KiB runs, the same count of runs all fits.
#[test]
fn the_queue_holds_at_most_its_bytes_while_the_endpoint_hangs() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest", listener.local_addr().unwrap());
    // Accept and hold every connection.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    for (bytes, at_most_kept) in [(100 * 1024, 14), (1024, 200)] {
        let exporter = QueuedExporter::new(
            &url,
            [("x-api-key", "k")],
            Json,
            QueueConfig {
                max_queued_bytes: 1024 * 1024,
                max_batch_bytes: 150 * 1024,
                batch_timeout: Duration::from_millis(5),
                request_timeout: Duration::from_secs(30),
                max_retries: 0,
                shutdown_timeout: Duration::from_millis(50),
                ..QueueConfig::default()
            },
        )
        .unwrap();
        // The first run starts a batch, the second fills it: the worker then waits on the
        // collector, and takes nothing more.
        for i in 0..2 {
            exporter.export(big_run(i, bytes));
        }
        std::thread::sleep(Duration::from_millis(300));
        for i in 2..200 {
            exporter.export(big_run(i, bytes));
        }
        let stats = exporter.stats();
        assert_eq!(stats.queued + stats.dropped, 200, "{stats:?}");
        assert!(stats.queued <= at_most_kept, "{bytes}: {stats:?}");
        if bytes == 1024 {
            assert_eq!(stats.dropped, 0, "{stats:?}");
        }
    }
}

/// A collector on 127.0.0.1 that answers every request `200 OK` (keep-alive).
fn answering_collector() -> String {
    recording_collector().0
}

/// [`answering_collector`], keeping the body of every request.
fn recording_collector() -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/ingest", listener.local_addr().unwrap());
    let bodies: Arc<Mutex<Vec<Vec<u8>>>> = Arc::default();
    let kept = bodies.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let kept = kept.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        let lower = line.to_ascii_lowercase();
                        if let Some(v) = lower.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).is_err() {
                        return;
                    }
                    kept.lock().unwrap().push(body);
                    let answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                    if reader.get_mut().write_all(answer).is_err() {
                        return;
                    }
                }
            });
        }
    });
    (url, bodies)
}

/// Runs taken off the queue no longer count: waves of 800 KiB, each under the 1 MiB bound
/// but together far over it, are all exported when the collector answers.
#[test]
fn bytes_taken_off_the_queue_no_longer_count() {
    let exporter = QueuedExporter::new(
        &answering_collector(),
        [("x-api-key", "k")],
        Json,
        QueueConfig {
            max_queued_bytes: 1024 * 1024,
            batch_timeout: Duration::from_millis(5),
            gzip: false,
            max_retries: 0,
            ..QueueConfig::default()
        },
    )
    .unwrap();
    for wave in 0..5 {
        for i in 0..8 {
            exporter.export(big_run(wave * 8 + i, 100 * 1024));
        }
        assert!(exporter.flush(Duration::from_secs(10)), "wave {wave}");
    }
    let stats = exporter.stats();
    assert_eq!((stats.dropped, stats.exported), (0, 40), "{stats:?}");
}

/// A run larger than the whole queue may hold is trimmed to fit rather than lost: its longest
/// value is cut, everything else kept, and the span reaches the endpoint marked with its size
/// before. The run beside it is untouched. Only a limit below what a run's ids and names take
/// drops it, and names it in `last_error`.
#[test]
fn a_run_larger_than_the_queue_is_trimmed_and_sent() {
    let (url, bodies) = recording_collector();
    let config = QueueConfig {
        max_queued_bytes: 64 * 1024,
        batch_timeout: Duration::from_millis(5),
        gzip: false,
        max_retries: 0,
        ..QueueConfig::default()
    };
    let exporter = QueuedExporter::new(&url, [("x-api-key", "k")], Json, config.clone()).unwrap();
    exporter.export(big_run(0, 1024));
    exporter.export(big_run(1, 1024 * 1024));
    assert!(exporter.flush(Duration::from_secs(10)));
    let stats = exporter.queue_stats();
    assert_eq!(
        (stats.runs.dropped, stats.runs.exported, stats.trimmed),
        (0, 2, 1),
        "{stats:?}"
    );
    assert_eq!(stats.last_error, None);
    let runs: Vec<Value> = bodies
        .lock()
        .unwrap()
        .iter()
        .flat_map(|body| serde_json::from_slice::<Vec<Value>>(body).unwrap())
        .collect();
    let run = |id: &str| runs.iter().find(|r| r["id"] == id).unwrap().clone();
    let big = run("run-1");
    let result = big["inputs"]["result"].as_str().unwrap();
    assert!(result.ends_with("…[truncated]"), "{}", result.len());
    assert!(
        (16 * 1024..=32 * 1024).contains(&result.len()),
        "{}",
        result.len()
    );
    assert!(
        big["metadata"]["kit.truncated_from_bytes"]
            .as_u64()
            .unwrap()
            > 1024 * 1024
    );
    let small = run("run-0");
    assert_eq!(small["inputs"]["result"].as_str().unwrap().len(), 1024);
    assert!(small["metadata"].get("kit.truncated_from_bytes").is_none());

    let exporter = QueuedExporter::new(
        &answering_collector(),
        [("x-api-key", "k")],
        Json,
        QueueConfig {
            max_queued_bytes: 16,
            ..config
        },
    )
    .unwrap();
    exporter.export(big_run(2, 1024 * 1024));
    assert!(!exporter.flush(Duration::from_secs(10)));
    let stats = exporter.queue_stats();
    assert_eq!(
        (stats.runs.dropped, stats.runs.exported),
        (1, 0),
        "{stats:?}"
    );
    match stats.last_error {
        Some(ExportError::RunTooLarge { bytes, max }) => {
            assert!(bytes > 16, "{bytes}");
            assert_eq!(max, 16);
        }
        other => panic!("expected RunTooLarge, got {other:?}"),
    }
}
