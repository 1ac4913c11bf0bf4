//! What the cases share: a raw HTTP server that sends whatever a hostile peer would (endless
//! bodies from one small buffer), child processes with a memory cap for inputs that could kill
//! the process, a `tracing` subscriber that keeps every field, and peak-RSS readings.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};

// ---------------------------------------------------------------------------------------------
// A raw HTTP server.

/// One step of an answer.
#[derive(Clone)]
pub enum Step {
    /// Writes these bytes.
    Send(Vec<u8>),
    /// Writes these bytes `times` times (`u64::MAX`: until the client goes away).
    Repeat(Arc<Vec<u8>>, u64),
    /// Writes these bytes every `interval`, until the client goes away.
    Drip(Arc<Vec<u8>>, Duration),
}

/// A request as the raw server read it.
#[derive(Debug, Clone)]
pub struct Received {
    /// `GET /path HTTP/1.1`.
    pub request_line: String,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body (at most 1 MiB of it), gunzipped when it came gzipped.
    pub body: Vec<u8>,
}

impl Received {
    /// Everything the peer received, as text: request line, headers and body.
    pub fn all_text(&self) -> String {
        let mut text = self.request_line.clone();
        for (k, v) in &self.headers {
            let _ = write!(text, "\n{k}: {v}");
        }
        text.push('\n');
        text.push_str(&String::from_utf8_lossy(&self.body));
        text
    }
}

type Script = dyn Fn(&Received) -> Vec<Step> + Send + Sync;

/// An HTTP/1.1 server on 127.0.0.1 answering each request with the steps its script returns;
/// it counts the bytes it wrote and records the requests. It runs on a thread of its own, so
/// a test may block its own thread (a synchronous `flush`) while the server answers.
pub struct RawServer {
    pub url: String,
    pub written: Arc<AtomicU64>,
    pub received: Arc<Mutex<Vec<Received>>>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl RawServer {
    pub async fn start(script: impl Fn(&Received) -> Vec<Step> + Send + Sync + 'static) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let written = Arc::new(AtomicU64::new(0));
        let received = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let (w, r) = (written.clone(), received.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = TcpListener::from_std(listener).unwrap();
                let accept = async {
                    while let Ok((stream, _)) = listener.accept().await {
                        tokio::spawn(serve(stream, script.clone(), w.clone(), r.clone()));
                    }
                };
                tokio::select! {
                    _ = accept => {}
                    _ = stopped => {}
                }
            });
        });
        RawServer {
            url,
            written,
            received,
            stop: Some(stop),
        }
    }

    pub fn requests(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    script: Arc<Script>,
    written: Arc<AtomicU64>,
    received: Arc<Mutex<Vec<Received>>>,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    let mut lines = text.split("\r\n");
    let request_line = lines.next().unwrap_or("").to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length.min(1 << 20)];
    let _ = stream.read_exact(&mut body).await;
    let gzipped = headers
        .iter()
        .any(|(k, v)| k == "content-encoding" && v.contains("gzip"));
    if gzipped {
        use std::io::Read as _;
        let mut plain = Vec::new();
        if flate2::read::GzDecoder::new(body.as_slice())
            .read_to_end(&mut plain)
            .is_ok()
        {
            body = plain;
        }
    }
    let request = Received {
        request_line,
        headers,
        body,
    };
    received.lock().unwrap().push(request.clone());
    for step in script(&request) {
        match step {
            Step::Send(bytes) => {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
                written.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            Step::Repeat(bytes, times) => {
                for _ in 0..times {
                    if stream.write_all(&bytes).await.is_err() {
                        return;
                    }
                    written.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                }
            }
            Step::Drip(bytes, interval) => loop {
                if stream.write_all(&bytes).await.is_err() {
                    return;
                }
                written.fetch_add(bytes.len() as u64, Ordering::Relaxed);
                tokio::time::sleep(interval).await;
            },
        }
    }
    let _ = stream.shutdown().await;
}

/// A response head.
pub fn head(status: u16, headers: &[(&str, &str)]) -> Step {
    let mut text = format!("HTTP/1.1 {status} X\r\nconnection: close\r\n");
    for (k, v) in headers {
        let _ = write!(text, "{k}: {v}\r\n");
    }
    text.push_str("\r\n");
    Step::Send(text.into_bytes())
}

/// A whole response with a body.
pub fn respond(status: u16, content_type: &str, body: &str) -> Vec<Step> {
    let length = body.len().to_string();
    vec![
        head(
            status,
            &[("content-type", content_type), ("content-length", &length)],
        ),
        Step::Send(body.as_bytes().to_vec()),
    ]
}

/// One chunk of a chunked body.
pub fn chunk(data: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", data.len()).into_bytes();
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
    out
}

// ---------------------------------------------------------------------------------------------
// Child processes.

/// What a child process reported.
#[derive(Debug)]
pub struct ChildReport {
    /// `KEY=value` lines the child printed after `REPORT `.
    pub values: BTreeMap<String, String>,
    /// Exit status and whatever it printed, for failure messages.
    pub success: bool,
    pub output: String,
}

impl ChildReport {
    pub fn get(&self, key: &str) -> &str {
        self.values
            .get(key)
            .map(String::as_str)
            .unwrap_or_else(|| panic!("the child reported no {key}:\n{}", self.output))
    }

    pub fn peak_rss_mib(&self) -> f64 {
        self.get("peak_rss_kib").parse::<f64>().unwrap() / 1024.0
    }
}

/// The longest a child may run before it is killed and the case fails (a safety net, not a
/// measurement).
const CHILD_SAFETY_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs the case `case` of `child.rs` in a child process (this test binary again, with
/// `KIT_ADVERSARIAL_CHILD` set) under a virtual-memory cap of `cap_mib`, so an input that
/// would exhaust memory or the stack kills the child, not the suite.
pub fn run_child(case: &str, cap_mib: u64) -> ChildReport {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!("ulimit -v {}; exec \"$0\" \"$@\"", cap_mib * 1024))
        .arg(exe)
        .args(["--exact", "child", "--nocapture", "--test-threads", "1"])
        .env("KIT_ADVERSARIAL_CHILD", case)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let read_all = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = r.read_to_string(&mut text);
            text
        })
    };
    let stdout = read_all(Box::new(child.stdout.take().unwrap()));
    let stderr = read_all(Box::new(child.stderr.take().unwrap()));
    let started = std::time::Instant::now();
    let (success, timed_out) = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break (status.success(), false);
        }
        if started.elapsed() > CHILD_SAFETY_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            break (false, true);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut text = format!(
        "{}{}",
        stdout.join().unwrap_or_default(),
        stderr.join().unwrap_or_default()
    );
    if timed_out {
        text.push_str("\n(the child was killed after the safety timeout)");
    }
    let values = text
        .lines()
        .filter_map(|l| l.strip_prefix("REPORT "))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    ChildReport {
        values,
        success,
        output: text,
    }
}

/// In a child: prints a value for the parent.
pub fn report(key: &str, value: impl std::fmt::Display) {
    // On a line of its own: the test harness may have printed the test's name before.
    println!("\nREPORT {key}={value}");
}

/// The process's peak resident set so far (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

// ---------------------------------------------------------------------------------------------
// Log capture.

/// A `tracing` subscriber that keeps every event and span field as text.
#[derive(Clone, Default)]
pub struct Capture {
    text: Arc<Mutex<String>>,
    next: Arc<AtomicUsize>,
}

struct Fields<'a>(&'a mut String);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let _ = write!(self.0, " {}={value:?}", field.name());
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={value}", field.name());
    }
}

impl Capture {
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    fn keep(&self, line: String) {
        let mut text = self.text.lock().unwrap();
        text.push_str(&line);
        text.push('\n');
    }
}

impl Subscriber for Capture {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::always()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn max_level_hint(&self) -> Option<tracing::level_filters::LevelFilter> {
        Some(tracing::level_filters::LevelFilter::TRACE)
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let mut line = format!("span {}", attrs.metadata().name());
        attrs.record(&mut Fields(&mut line));
        self.keep(line);
        Id::from_u64(self.next.fetch_add(1, Ordering::Relaxed) as u64 + 1)
    }
    fn record(&self, _: &Id, values: &Record<'_>) {
        let mut line = "record".to_string();
        values.record(&mut Fields(&mut line));
        self.keep(line);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let mut line = format!("event {}", event.metadata().target());
        event.record(&mut Fields(&mut line));
        self.keep(line);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
