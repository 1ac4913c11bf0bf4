//! Exporters: where finished runs go. All of them are non-blocking for the caller.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::record::RunRecord;

/// Counters an exporter keeps: what it sent, dropped and failed to send.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExporterStats {
    /// Runs accepted into the queue.
    pub queued: u64,
    /// Runs delivered.
    pub exported: u64,
    /// Runs dropped because the queue was full.
    pub dropped: u64,
    /// Runs that could not be delivered (after retries).
    pub failed: u64,
}

/// Receives finished runs. `export` must never block the caller or fail it: queue, and count
/// what cannot be delivered.
pub trait Exporter: Send + Sync + 'static {
    /// Takes a finished (already redacted) run.
    fn export(&self, run: RunRecord);
    /// Waits until everything queued so far is delivered, at most `timeout`. True when it all
    /// got through in time.
    fn flush(&self, timeout: Duration) -> bool {
        let _ = timeout;
        true
    }
    /// Counters.
    fn stats(&self) -> ExporterStats {
        ExporterStats::default()
    }
}

/// Keeps runs in memory: for tests, and for programs that inspect their own traces.
#[derive(Debug, Default, Clone)]
pub struct Collector {
    runs: Arc<Mutex<Vec<RunRecord>>>,
}

impl Collector {
    /// An empty collector.
    pub fn new() -> Self {
        Self::default()
    }

    /// The runs collected so far, in the order they finished.
    pub fn runs(&self) -> Vec<RunRecord> {
        self.runs.lock().map(|r| r.clone()).unwrap_or_default()
    }

    /// Forgets the runs collected so far.
    pub fn clear(&self) {
        if let Ok(mut r) = self.runs.lock() {
            r.clear();
        }
    }
}

impl Exporter for Collector {
    fn export(&self, run: RunRecord) {
        if let Ok(mut r) = self.runs.lock() {
            r.push(run);
        }
    }

    fn stats(&self) -> ExporterStats {
        let n = self.runs.lock().map(|r| r.len() as u64).unwrap_or(0);
        ExporterStats {
            queued: n,
            exported: n,
            ..ExporterStats::default()
        }
    }
}

enum Job {
    /// A run and its [`RunRecord::approx_bytes`].
    Run(Box<RunRecord>, usize),
    Flush(SyncSender<()>),
}

/// The most text the queue of a [`JsonLinesExporter`] holds: while the disk is slow, runs that
/// record whole conversations would otherwise hold 10,000 of them.
const MAX_QUEUED_BYTES: usize = 64 << 20;

/// Appends each run as one JSON line to a file, from a background thread: the embedded default
/// that needs no backend. Look at the file with the trace viewer (`kit::trace::viewer`).
///
/// The queue holds 10,000 runs and 64 MiB of text; beyond that runs are dropped and counted,
/// never blocking (a single run of more than 64 MiB is always dropped: record less with
/// [`TraceOptions`](super::TraceOptions)). Each line is written whole or, when the disk fails partway, followed by a
/// line break before the next, so one failed write loses one run, not its neighbour.
pub struct JsonLinesExporter {
    tx: SyncSender<Job>,
    path: PathBuf,
    counters: Arc<Counters>,
}

#[derive(Default)]
struct Counters {
    queued: AtomicU64,
    exported: AtomicU64,
    dropped: AtomicU64,
    failed: AtomicU64,
    /// Text of the runs in the queue.
    queued_bytes: AtomicUsize,
}

impl std::fmt::Debug for JsonLinesExporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonLinesExporter")
            .field("path", &self.path)
            .finish()
    }
}

impl JsonLinesExporter {
    /// Writes to `path` (appending; parent directories are created).
    pub fn new(path: impl AsRef<Path>) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)?;
        let (tx, rx) = sync_channel(10_000);
        let counters = Arc::new(Counters::default());
        let worker_counters = counters.clone();
        std::thread::Builder::new()
            .name("kit-trace-jsonl".into())
            .spawn(move || write_loop(file, rx, worker_counters))?;
        Ok(JsonLinesExporter { tx, path, counters })
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn write_loop(file: std::fs::File, rx: Receiver<Job>, counters: Arc<Counters>) {
    let mut out = std::io::BufWriter::new(file);
    let mut line = Vec::new();
    // A write that failed partway left a line without its end: the next starts on a new one.
    let mut torn = false;
    let mut handle = |out: &mut std::io::BufWriter<std::fs::File>, job: Job| match job {
        Job::Run(run, bytes) => {
            counters.queued_bytes.fetch_sub(bytes, Ordering::Relaxed);
            line.clear();
            if torn {
                line.push(b'\n');
            }
            let ok = serde_json::to_writer(&mut line, &*run).is_ok() && {
                line.push(b'\n');
                out.write_all(&line).is_ok()
            };
            torn = !ok;
            let counter = if ok {
                &counters.exported
            } else {
                &counters.failed
            };
            counter.fetch_add(1, Ordering::Relaxed);
            // A run of megabytes must not keep its buffer for the runs after it.
            if line.capacity() > 1 << 20 {
                line = Vec::new();
            }
        }
        Job::Flush(done) => {
            let _ = out.flush();
            let _ = done.send(());
        }
    };
    while let Ok(job) = rx.recv() {
        handle(&mut out, job);
        // Drain what is already queued, then write it out: lines reach the file promptly.
        while let Ok(job) = rx.try_recv() {
            handle(&mut out, job);
        }
        let _ = out.flush();
    }
}

impl Exporter for JsonLinesExporter {
    fn export(&self, run: RunRecord) {
        let bytes = run.approx_bytes();
        let held = self
            .counters
            .queued_bytes
            .fetch_add(bytes, Ordering::Relaxed);
        let sent = held.saturating_add(bytes) <= MAX_QUEUED_BYTES
            && self.tx.try_send(Job::Run(Box::new(run), bytes)).is_ok();
        if sent {
            self.counters.queued.fetch_add(1, Ordering::Relaxed);
        } else {
            self.counters
                .queued_bytes
                .fetch_sub(bytes, Ordering::Relaxed);
            self.counters.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn flush(&self, timeout: Duration) -> bool {
        let (done_tx, done_rx) = sync_channel(1);
        if self.tx.send(Job::Flush(done_tx)).is_err() {
            return false;
        }
        done_rx.recv_timeout(timeout).is_ok()
    }

    fn stats(&self) -> ExporterStats {
        ExporterStats {
            queued: self.counters.queued.load(Ordering::Relaxed),
            exported: self.counters.exported.load(Ordering::Relaxed),
            dropped: self.counters.dropped.load(Ordering::Relaxed),
            failed: self.counters.failed.load(Ordering::Relaxed),
        }
    }
}

/// Reads a JSON-lines trace file back. Lines that do not parse (a write torn by a full disk,
/// bytes that are not UTF-8) are skipped and counted; every other line is read.
pub fn read_json_lines(path: impl AsRef<Path>) -> std::io::Result<(Vec<RunRecord>, usize)> {
    let bytes = std::fs::read(path)?;
    let mut runs = Vec::new();
    let mut bad = 0;
    for line in bytes.split(|b| *b == b'\n') {
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        match serde_json::from_slice(line) {
            Ok(run) => runs.push(run),
            Err(_) => bad += 1,
        }
    }
    Ok((runs, bad))
}

crate::shared::into_shared! {
    /// What [`Tracer::with_exporter`](super::Tracer::with_exporter) accepts: an exporter, or
    /// one already shared.
    IntoExporter::into_exporter => Exporter
}
