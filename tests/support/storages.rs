//! The checkpointer back-ends the integration tests run against: memory, SQLite (a real file
//! in a temporary directory) and PostgreSQL (a real server, `KIT_TEST_POSTGRES_URL`; each
//! storage gets a schema of its own), and `suite!`, which runs each case against all three.
//!
//! PostgreSQL: without `KIT_TEST_POSTGRES_URL` the PostgreSQL cases fail when `CI` is set, and
//! otherwise print a loud `SKIPPED` line and pass. `.ci/run` starts a server and sets both.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kit::checkpoint::{
    CheckpointError, CheckpointMeta, CheckpointWrite, Checkpointer, LoadedCheckpoint,
    MemoryCheckpointer, PendingWrite, PostgresCheckpointer, PruneReport, PruneStrategy,
    SqliteCheckpointer, ThreadInfo,
};

pub type Cp = Arc<dyn Checkpointer>;

/// A back-end under test: opens instances on one storage.
pub struct Storage {
    pub name: &'static str,
    opener: Box<dyn Fn() -> BoxFuture<'static, Cp> + Send + Sync>,
    /// Keeps a temporary directory alive; PostgreSQL: the schema to drop at the end.
    _dir: Option<tempfile::TempDir>,
    cleanup: Option<PostgresCheckpointer>,
    pub sqlite_path: Option<std::path::PathBuf>,
    /// The memory back-end's one instance.
    memory: Option<Arc<MemoryCheckpointer>>,
    /// PostgreSQL: the server and schema.
    postgres: Option<(String, String)>,
}

impl Storage {
    /// A new instance on the same storage (a "restart").
    pub async fn reopen(&self) -> Cp {
        (self.opener)().await
    }

    /// Bytes the storage holds for `thread`: channel data, checkpoint bodies, metadata and
    /// channel versions, and pending writes (memory: what `thread_stored_bytes` counts; SQLite:
    /// its packed checkpoint rows).
    pub async fn footprint(&self, thread: &str) -> u64 {
        const SQLITE: &str = "SELECT
            (SELECT COALESCE(SUM(length(data)), 0) FROM kit_blobs WHERE thread_id = ?1)
          + (SELECT COALESCE(SUM(length(head) + length(data)), 0)
               FROM kit_checkpoints WHERE thread_id = ?1)
          + (SELECT COALESCE(SUM(length(value)), 0) FROM kit_writes WHERE thread_id = ?1)";
        const POSTGRES: &str = "SELECT
            (SELECT COALESCE(SUM(octet_length(data)), 0) FROM kit_blobs WHERE thread_id = $1)
          + (SELECT COALESCE(SUM(octet_length(body) + octet_length(metadata::text)
                                 + octet_length(channel_versions::text)), 0)
               FROM kit_checkpoints WHERE thread_id = $1)
          + (SELECT COALESCE(SUM(octet_length(value::text)), 0) FROM kit_writes
              WHERE thread_id = $1)";
        if let Some(memory) = &self.memory {
            return memory.thread_stored_bytes(thread) as u64;
        }
        self.count(thread, SQLITE, POSTGRES).await
    }

    /// Rows the storage holds for `thread` in its four tables (`None` for memory).
    pub async fn rows(&self, thread: &str) -> Option<u64> {
        const SQLITE: &str = "SELECT
            (SELECT COUNT(*) FROM kit_threads WHERE thread_id = ?1)
          + (SELECT COUNT(*) FROM kit_checkpoints WHERE thread_id = ?1)
          + (SELECT COUNT(*) FROM kit_blobs WHERE thread_id = ?1)
          + (SELECT COUNT(*) FROM kit_writes WHERE thread_id = ?1)";
        const POSTGRES: &str = "SELECT
            (SELECT COUNT(*) FROM kit_threads WHERE thread_id = $1)
          + (SELECT COUNT(*) FROM kit_checkpoints WHERE thread_id = $1)
          + (SELECT COUNT(*) FROM kit_blobs WHERE thread_id = $1)
          + (SELECT COUNT(*) FROM kit_writes WHERE thread_id = $1)";
        if self.memory.is_some() {
            return None;
        }
        Some(self.count(thread, SQLITE, POSTGRES).await)
    }

    /// Runs a query returning one number about `thread`, on SQLite or PostgreSQL.
    async fn count(&self, thread: &str, sqlite: &str, postgres: &str) -> u64 {
        if let Some(path) = &self.sqlite_path {
            let conn = rusqlite::Connection::open(path).unwrap();
            return conn
                .query_row(sqlite, [thread], |r| r.get::<_, i64>(0))
                .unwrap() as u64;
        }
        let Some((url, schema)) = &self.postgres else {
            unreachable!("every storage is memory, SQLite or PostgreSQL")
        };
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(connection);
        client
            .batch_execute(&format!("SET search_path TO {schema}"))
            .await
            .unwrap();
        let row = client.query_one(postgres, &[&thread]).await.unwrap();
        row.get::<_, i64>(0) as u64
    }

    pub async fn finish(self) {
        if let Some(pg) = &self.cleanup {
            pg.drop_schema().await.unwrap();
        }
    }
}

pub fn memory_storage() -> Storage {
    let memory = Arc::new(MemoryCheckpointer::new());
    let cp: Cp = memory.clone();
    Storage {
        name: "memory",
        opener: Box::new(move || {
            let cp = cp.clone();
            Box::pin(async move { cp })
        }),
        _dir: None,
        cleanup: None,
        sqlite_path: None,
        memory: Some(memory),
        postgres: None,
    }
}

pub fn sqlite_storage() -> Storage {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("checkpoints.sqlite");
    let p = path.clone();
    Storage {
        name: "sqlite",
        opener: Box::new(move || {
            let p = p.clone();
            Box::pin(async move { Arc::new(SqliteCheckpointer::open(&p).unwrap()) as Cp })
        }),
        _dir: Some(dir),
        cleanup: None,
        sqlite_path: Some(path),
        memory: None,
        postgres: None,
    }
}

/// The PostgreSQL server to test against, or `None` (after a loud message) when there is none
/// outside CI.
pub fn postgres_url() -> Option<String> {
    match std::env::var("KIT_TEST_POSTGRES_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ => {
            if std::env::var_os("CI").is_some() {
                panic!(
                    "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL conformance \
                     tests must run in CI. Run .ci/run (it starts a server), or export \
                     KIT_TEST_POSTGRES_URL=postgres://user:password@host:port/db"
                );
            }
            eprintln!(
                "\n*** SKIPPED PostgreSQL conformance: KIT_TEST_POSTGRES_URL is not set. Run \
                 `source .ci/postgres.sh` (starts a local server) or point it at a server. ***\n"
            );
            None
        }
    }
}

pub fn unique_schema() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "kit_conf_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        kit::ids::now_millis() % 1_000_000
    )
}

pub async fn postgres_storage() -> Option<Storage> {
    let url = postgres_url()?;
    let schema = unique_schema();
    let first = PostgresCheckpointer::connect_in_schema(&url, &schema)
        .await
        .unwrap();
    let postgres = Some((url.clone(), schema.clone()));
    Some(Storage {
        name: "postgres",
        opener: Box::new(move || {
            let (url, schema) = (url.clone(), schema.clone());
            Box::pin(async move {
                Arc::new(
                    PostgresCheckpointer::connect_in_schema(&url, &schema)
                        .await
                        .unwrap(),
                ) as Cp
            })
        }),
        _dir: None,
        cleanup: Some(first),
        sqlite_path: None,
        memory: None,
        postgres,
    })
}

/// Runs each case against memory, SQLite and PostgreSQL, one `#[tokio::test]` per pair.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let s = $crate::storages::memory_storage();
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let s = $crate::storages::sqlite_storage();
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(s) = $crate::storages::postgres_storage().await else { return };
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
    };
}

/// Delegates to a checkpointer and counts what is asked of it: loads, head reads, and the
/// bytes of every checkpoint written (blobs, body, versions and metadata).
pub struct Counting {
    inner: Cp,
    /// Whether `head` is the inner back-end's own, or the trait's history-based default (what a
    /// back-end without a direct read of its head gets).
    own_head: bool,
    loads: AtomicUsize,
    heads: AtomicUsize,
    puts: Mutex<Vec<usize>>,
}

impl Counting {
    pub fn new(inner: Cp) -> Self {
        Counting {
            inner,
            own_head: true,
            loads: AtomicUsize::new(0),
            heads: AtomicUsize::new(0),
            puts: Mutex::new(Vec::new()),
        }
    }
    /// Answers `head` with the trait's default (from `history`) instead of the back-end's.
    pub fn with_default_head(mut self) -> Self {
        self.own_head = false;
        self
    }
    pub fn loads(&self) -> usize {
        self.loads.load(Ordering::SeqCst)
    }
    pub fn heads(&self) -> usize {
        self.heads.load(Ordering::SeqCst)
    }
    /// The bytes of each checkpoint written, in order.
    pub fn puts(&self) -> Vec<usize> {
        self.puts.lock().unwrap().clone()
    }
}

fn write_bytes(w: &CheckpointWrite) -> usize {
    w.blob_bytes()
        + w.blobs.len() * 64 // the blob rows' keys, roughly
        + w.body.len()
        + serde_json::to_vec(&*w.channel_versions).map(|b| b.len()).unwrap_or(0)
        + serde_json::to_vec(&w.meta).map(|b| b.len()).unwrap_or(0)
}

#[kit::async_trait]
impl Checkpointer for Counting {
    async fn put(&self, write: CheckpointWrite) -> Result<(), CheckpointError> {
        self.puts.lock().unwrap().push(write_bytes(&write));
        self.inner.put(write).await
    }
    async fn put_writes(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: &str,
        writes: Vec<PendingWrite>,
    ) -> Result<(), CheckpointError> {
        self.inner
            .put_writes(thread_id, ns, checkpoint_id, writes)
            .await
    }
    async fn load(
        &self,
        thread_id: &str,
        ns: &str,
        checkpoint_id: Option<&str>,
    ) -> Result<Option<LoadedCheckpoint>, CheckpointError> {
        self.loads.fetch_add(1, Ordering::SeqCst);
        self.inner.load(thread_id, ns, checkpoint_id).await
    }
    async fn head(&self, thread_id: &str, ns: &str) -> Result<Option<String>, CheckpointError> {
        self.heads.fetch_add(1, Ordering::SeqCst);
        if self.own_head {
            self.inner.head(thread_id, ns).await
        } else {
            kit::checkpoint::head_from_history(self, thread_id, ns).await
        }
    }
    async fn history(
        &self,
        thread_id: &str,
        ns: &str,
        limit: Option<usize>,
    ) -> Result<Vec<CheckpointMeta>, CheckpointError> {
        self.inner.history(thread_id, ns, limit).await
    }
    async fn delete_thread(&self, thread_id: &str) -> Result<(), CheckpointError> {
        self.inner.delete_thread(thread_id).await
    }
    async fn prune(
        &self,
        thread_id: &str,
        strategy: PruneStrategy,
    ) -> Result<PruneReport, CheckpointError> {
        self.inner.prune(thread_id, strategy).await
    }
    async fn delete_threads_before(
        &self,
        cutoff: std::time::SystemTime,
    ) -> Result<Vec<String>, CheckpointError> {
        self.inner.delete_threads_before(cutoff).await
    }
    async fn threads(&self) -> Result<Vec<ThreadInfo>, CheckpointError> {
        self.inner.threads().await
    }
}
