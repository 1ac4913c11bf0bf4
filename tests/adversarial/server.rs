//! Item 4: the worker server stays up — idle and stalled connections are closed, a connection
//! limit holds, an oversize declared body is refused at once, slow bodies time out.

use std::time::Duration;

use kit::server::{Worker, WorkerHandle};
use kit_testing::researcher::{self, Gate};
use kit_testing::worker::spawn_worker;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Longest any step below may take before the case fails (a safety net, not a measurement).
const SAFETY: Duration = Duration::from_secs(20);

async fn worker(
    configure: impl FnOnce(kit::server::WorkerBuilder) -> kit::server::WorkerBuilder,
) -> WorkerHandle {
    let builder = Worker::builder()
        .agent("research", researcher::agent(Gate::open()))
        .bearer_token("worker-token-123");
    spawn_worker(configure(builder)).await.unwrap()
}

fn addr(w: &WorkerHandle) -> String {
    w.local_addr().to_string()
}

/// Reads until the peer closes (or `SAFETY` passes): what it sent.
async fn read_to_close(stream: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(SAFETY, stream.read_to_end(&mut out))
        .await
        .expect("the server never closed the connection");
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test]
async fn hundreds_of_idle_unauthenticated_connections_do_not_lock_out_get_ok() {
    let w = worker(|b| {
        b.max_connections(64)
            .header_read_timeout(Duration::from_millis(500))
            .idle_timeout(Duration::from_secs(1))
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..300 {
        idle.push(TcpStream::connect(addr(&w)).await.unwrap());
    }
    // Over the limit: answered 503 at once and closed.
    let refused = read_to_close(idle.last_mut().unwrap()).await;
    assert!(refused.starts_with("HTTP/1.1 503"), "{refused}");
    assert!(refused.contains("max_connections"), "{refused}");
    // Within the limit: closed after the header read timeout.
    let closed = read_to_close(&mut idle[0]).await;
    assert!(
        closed.is_empty() || closed.starts_with("HTTP/1.1 408"),
        "{closed:?}"
    );
    // GET /ok answers again as soon as a slot is free, while the 300 sockets stay open on
    // the client side.
    let client = reqwest::Client::new();
    let ok = tokio::time::timeout(SAFETY, async {
        loop {
            if let Ok(r) = client.get(format!("{}/ok", w.url())).send().await
                && r.status() == 200
            {
                break r.text().await.unwrap();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("GET /ok stayed locked out");
    assert!(ok.contains("true"), "{ok}");
    drop(idle);
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_head_sent_one_byte_at_a_time_is_cut_at_the_header_read_timeout() {
    let w = worker(|b| b.header_read_timeout(Duration::from_millis(300))).await;
    let mut s = TcpStream::connect(addr(&w)).await.unwrap();
    let drip = async {
        for b in b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter().cycle() {
            if s.write_all(&[*b]).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    };
    tokio::time::timeout(SAFETY, drip)
        .await
        .expect("the server kept a slow head open");
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_declared_content_length_over_the_limit_is_refused_before_the_body() {
    let w = worker(|b| b.body_limit(1024)).await;
    let mut s = TcpStream::connect(addr(&w)).await.unwrap();
    // 10 MB declared, nothing sent: the answer comes at once.
    s.write_all(
        b"POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer worker-token-123\r\n\
          Content-Type: application/json\r\nContent-Length: 10000000\r\n\r\n",
    )
    .await
    .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(answer.contains("body_limit"), "{answer}");
    // Unauthenticated: refused from the head (the identity is checked first), nothing read.
    let mut s = TcpStream::connect(addr(&w)).await.unwrap();
    s.write_all(b"POST /runs HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999999\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 401"), "{answer}");
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_body_that_stalls_gets_408_after_the_body_read_timeout() {
    let w = worker(|b| b.body_read_timeout(Duration::from_millis(300))).await;
    let mut s = TcpStream::connect(addr(&w)).await.unwrap();
    s.write_all(
        b"POST /runs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer worker-token-123\r\n\
          Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"assistant",
    )
    .await
    .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_read_timeout"), "{answer}");
    w.shutdown().await.unwrap();
}

#[tokio::test]
async fn a_kept_alive_connection_left_idle_is_closed() {
    let w = worker(|b| {
        b.header_read_timeout(Duration::from_millis(400))
            .idle_timeout(Duration::from_millis(400))
    })
    .await;
    let mut s = TcpStream::connect(addr(&w)).await.unwrap();
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = read_to_close(&mut s).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    w.shutdown().await.unwrap();
}

/// Sends one HTTP/1.1 request and reads the whole answer (the request closes the connection).
async fn send_raw(w: &WorkerHandle, head: &str, body: &[u8]) -> String {
    let mut stream = TcpStream::connect(addr(w)).await.unwrap();
    let request = format!(
        "{head}\r\nHost: {}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        addr(w),
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    read_to_close(&mut stream).await
}

/// A web page on another site may not make a worker on this machine act: its POST (a
/// "simple" one, `text/plain`, which needs no CORS preflight) is refused 403, even by a worker
/// without auth. A page of the worker's own origin, and clients that send no `Origin` (SDKs,
/// curl), are not affected; reads are not refused.
#[tokio::test]
async fn a_cross_site_request_from_a_browser_is_refused() {
    let w = spawn_worker(Worker::builder().agent("research", researcher::agent(Gate::open())))
        .await
        .unwrap();
    let body = br#"{"assistant_id": "research", "input": {"messages": [{"role": "user", "content": "hi"}]}}"#;
    let refused = send_raw(
        &w,
        "POST /runs HTTP/1.1\r\nOrigin: https://evil.example\r\nContent-Type: text/plain",
        body,
    )
    .await;
    assert!(refused.starts_with("HTTP/1.1 403"), "{refused}");
    assert!(refused.contains("cross_site"), "{refused}");
    // Marked cross-site by the browser, whatever the origin says.
    let marked = send_raw(
        &w,
        &format!(
            "POST /runs HTTP/1.1\r\nOrigin: http://{}\r\nSec-Fetch-Site: cross-site",
            addr(&w)
        ),
        body,
    )
    .await;
    assert!(marked.starts_with("HTTP/1.1 403"), "{marked}");
    for head in [
        format!("POST /runs HTTP/1.1\r\nOrigin: http://{}", addr(&w)),
        "POST /runs HTTP/1.1\r\nContent-Type: application/json".to_string(),
    ] {
        let taken = send_raw(&w, &head, body).await;
        assert!(!taken.starts_with("HTTP/1.1 403"), "{head}: {taken}");
        assert!(taken.starts_with("HTTP/1.1 20"), "{head}: {taken}");
    }
    // DNS rebinding: a page whose name now resolves here is same-origin to the browser, but
    // its host is no loopback name.
    let mut stream = TcpStream::connect(addr(&w)).await.unwrap();
    let rebound = format!(
        "POST /runs HTTP/1.1\r\nHost: rebind.evil:8123\r\nOrigin: http://rebind.evil:8123\r\n\
         Sec-Fetch-Site: same-origin\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(rebound.as_bytes()).await.unwrap();
    stream.write_all(body).await.unwrap();
    let rebound = read_to_close(&mut stream).await;
    assert!(rebound.starts_with("HTTP/1.1 403"), "{rebound}");
    let read = send_raw(
        &w,
        "GET /runs/nope HTTP/1.1\r\nOrigin: https://evil.example",
        b"",
    )
    .await;
    assert!(read.starts_with("HTTP/1.1 404"), "{read}");
}

/// A body of a mebibyte of tiny objects is refused 413 before it is parsed (parsed, it would
/// take some 90 MiB); a thread id with a control character is refused 400 (PostgreSQL text
/// cannot hold a NUL, and logs would carry it).
#[tokio::test]
async fn a_body_of_too_many_objects_and_a_thread_id_with_a_nul_are_refused() {
    let w = spawn_worker(Worker::builder().agent("research", researcher::agent(Gate::open())))
        .await
        .unwrap();
    let objects = format!(
        r#"{{"assistant_id": "research", "input": {{"x": [{}{{"b":0}}]}}}}"#,
        r#"{"b":0},"#.repeat(120_000)
    );
    let refused = send_raw(&w, "POST /runs HTTP/1.1", objects.as_bytes()).await;
    assert!(
        refused.starts_with("HTTP/1.1 413"),
        "{}",
        &refused[..refused.len().min(300)]
    );
    assert!(
        refused.contains("JSON objects and arrays"),
        "{}",
        &refused[..refused.len().min(300)]
    );
    let nul =
        br#"{"assistant_id": "research", "thread_id": "a\u0000b", "input": {"messages": []}}"#;
    let refused = send_raw(&w, "POST /runs HTTP/1.1", nul).await;
    assert!(refused.starts_with("HTTP/1.1 400"), "{refused}");
    assert!(refused.contains("control character"), "{refused}");
}
