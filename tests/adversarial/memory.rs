//! Item 2: memory stays bounded under a hostile peer. The cases run in child processes (see
//! `child.rs`) under a 2 GiB virtual-memory cap; each must end in a typed error naming the
//! limit it hit, with the child's peak RSS under [`BOUND_MIB`] — with kit's default limits.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kit::Message;
use kit::http::{HttpClient, HttpLimits, HttpRequest};
use kit::model::openai::OpenAiModel;
use kit::model::{ChatModel, ModelError, ModelRequest};

use crate::support::{RawServer, Step, chunk, head, run_child};

/// The stated bound on a child's peak resident memory, whatever the peer sends: 256 MiB (the
/// default limits allow 32 MiB for a body, 8 MiB for an event-stream line, 16 MiB for an
/// event, 64 MiB for a whole stream; the rest is the test binary itself).
const BOUND_MIB: f64 = 256.0;

/// The virtual-memory cap of the child (a safety net: a regression kills the child, not CI).
const CAP_MIB: u64 = 2048;

fn assert_bounded(case: &str, limit: &str) {
    let r = run_child(case, CAP_MIB);
    assert!(r.success, "{case}: the child failed:\n{}", r.output);
    if !limit.is_empty() {
        assert_eq!(r.get("limit"), limit, "{case}:\n{}", r.output);
    }
    let peak = r.peak_rss_mib();
    println!("{case}: peak RSS {peak:.0} MiB (bound {BOUND_MIB} MiB)");
    assert!(
        peak < BOUND_MIB,
        "{case}: peak RSS {peak:.0} MiB over the bound of {BOUND_MIB} MiB:\n{}",
        r.output
    );
}

#[test]
fn a_512_mib_body_sent_chunked_ends_at_max_body_bytes_in_bounded_memory() {
    assert_bounded("body_512mib_chunked", "max_body_bytes");
}

#[test]
fn a_512_mib_body_declared_up_front_is_refused_before_reading() {
    let r = run_child("body_512mib_declared", CAP_MIB);
    assert!(r.success, "{}", r.output);
    assert_eq!(r.get("limit"), "max_body_bytes");
    assert!(r.get("message").contains("Content-Length"), "{}", r.output);
    assert!(r.peak_rss_mib() < BOUND_MIB, "{}", r.output);
}

#[test]
fn an_endless_sse_line_ends_at_max_sse_line_bytes_in_bounded_memory() {
    assert_bounded("endless_sse_line", "max_sse_line_bytes");
}

#[test]
fn an_event_never_dispatched_ends_at_max_sse_event_bytes_in_bounded_memory() {
    assert_bounded("endless_sse_event", "max_sse_event_bytes");
}

#[test]
fn an_endless_valid_stream_ends_at_max_stream_bytes_in_bounded_memory() {
    assert_bounded("endless_valid_stream", "max_stream_bytes");
}

#[test]
fn read_file_with_limit_1_on_a_64_mib_file_reads_one_page() {
    let r = run_child("read_file_64mib_limit_1", CAP_MIB);
    assert!(r.success, "{}", r.output);
    assert!(
        r.get("answer_head").starts_with(&format!(
            "@@ lines 1-1 of {} | next offset 1",
            64 * 1024 * 1024 / 129
        )),
        "{}",
        r.output
    );
    // One page and one read buffer, not the file: far below the file's own size.
    let grown = r.peak_rss_mib() - r.get("base_rss_kib").parse::<f64>().unwrap() / 1024.0;
    assert!(
        grown < 64.0,
        "grew {grown:.0} MiB reading one line:\n{}",
        r.output
    );
}

#[test]
fn a_fifo_inside_the_root_is_refused_not_read() {
    let r = run_child("read_fifo", CAP_MIB);
    assert!(r.success, "the tool call hung or died:\n{}", r.output);
    for id in ["c1", "c2"] {
        let answer = r.get(id);
        assert!(
            answer.contains("'/pipe' is not a regular file (it is a FIFO)"),
            "{id}: {answer}"
        );
    }
    assert_eq!(r.get("c3"), "No matches found", "grep skips it");
}

/// Keep-alive comments forever: the idle timeout never fires, the total deadline does.
#[tokio::test]
async fn keep_alive_comments_forever_end_at_the_stream_deadline() {
    let server = RawServer::start(|_| {
        vec![
            head(
                200,
                &[
                    ("content-type", "text/event-stream"),
                    ("transfer-encoding", "chunked"),
                ],
            ),
            Step::Drip(Arc::new(chunk(b": ping\n\n")), Duration::from_millis(100)),
        ]
    })
    .await;
    // A 2 s idle timeout, kept alive by pings every 100 ms; a 1 s total deadline.
    let client = HttpClient::new()
        .timeout(Duration::from_secs(2))
        .max_retries(0)
        .limits(HttpLimits {
            stream_deadline: Duration::from_secs(1),
            ..HttpLimits::default()
        });
    let model = OpenAiModel::compatible("pinger", "m", format!("{}/v1", server.url))
        .http_client(client.clone());
    let mut stream = tokio::time::timeout(
        Duration::from_secs(30),
        model.stream(&ModelRequest::new(vec![Message::user("hi")])),
    )
    .await
    .expect("safety timeout")
    .unwrap();
    let error = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match stream.next().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => break e,
                None => panic!("the stream ended"),
            }
        }
    })
    .await
    .expect("safety timeout: the stream deadline never fired");
    assert!(
        matches!(&error, ModelError::Limit { limit, .. } if limit == "stream_deadline"),
        "{error:?}"
    );
    assert!(error.to_string().contains("stream_deadline"), "{error}");

    // The same at the HTTP layer: the body stream ends with a timeout naming the deadline.
    let stream = client
        .send_stream(HttpRequest::get(&format!("{}/sse", server.url)))
        .await
        .unwrap();
    let mut body = stream.body;
    let err = tokio::time::timeout(Duration::from_secs(30), async {
        loop {
            match body.next().await {
                Some(Ok(_)) => continue,
                Some(Err(e)) => break e,
                None => panic!("the body ended"),
            }
        }
    })
    .await
    .expect("safety timeout");
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(err.limit(), Some("stream_deadline"));
}
