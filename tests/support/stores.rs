//! The long-term store back-ends the integration tests run against: memory, SQLite (a real
//! file in a temporary directory) and PostgreSQL (a real server, `KIT_TEST_POSTGRES_URL`; each
//! storage gets a schema of its own), and `store_suite!`, which runs each case against all three.
//!
//! PostgreSQL: without `KIT_TEST_POSTGRES_URL` the PostgreSQL cases fail when `CI` is set, and
//! otherwise print a loud `SKIPPED` line and pass. `.ci/run` starts a server and sets both.

// Each test crate that includes this module uses part of it.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kit::store::{IndexConfig, MemoryStore, PostgresStore, SqliteStore, Store, TtlConfig};

/// How an instance is opened: its index and its time-to-live rules.
#[derive(Clone, Default)]
pub struct Setup {
    pub index: Option<IndexConfig>,
    pub ttl: TtlConfig,
}

impl Setup {
    pub fn index(index: IndexConfig) -> Self {
        Setup {
            index: Some(index),
            ttl: TtlConfig::default(),
        }
    }

    pub fn ttl(ttl: TtlConfig) -> Self {
        Setup { index: None, ttl }
    }
}

enum Kind {
    /// The one map every instance shares.
    Memory(MemoryStore),
    Sqlite(std::path::PathBuf, tempfile::TempDir),
    Postgres {
        url: String,
        schema: String,
    },
}

/// A back-end under test: opens instances on one storage.
pub struct Storage {
    pub name: &'static str,
    kind: Kind,
}

impl Storage {
    /// A store with default options.
    pub async fn open(&self) -> Arc<dyn Store> {
        self.open_with(Setup::default()).await
    }

    /// A new instance on the same storage (a "restart"), set up as asked.
    pub async fn open_with(&self, setup: Setup) -> Arc<dyn Store> {
        match &self.kind {
            Kind::Memory(shared) => {
                let mut s = shared.clone().ttl_config(setup.ttl);
                if let Some(index) = setup.index {
                    s = s.index(index).unwrap();
                }
                Arc::new(s)
            }
            Kind::Sqlite(path, _) => {
                let mut s = SqliteStore::open(path).unwrap().ttl_config(setup.ttl);
                if let Some(index) = setup.index {
                    s = s.index(index).unwrap();
                }
                Arc::new(s)
            }
            Kind::Postgres { url, schema } => {
                let mut s = PostgresStore::connect_in_schema(url, schema)
                    .await
                    .unwrap()
                    .ttl_config(setup.ttl);
                if let Some(index) = setup.index {
                    s = s.index(index).unwrap();
                }
                Arc::new(s)
            }
        }
    }

    /// The SQLite file, for the SQLite storage.
    pub fn sqlite_path(&self) -> Option<&std::path::Path> {
        match &self.kind {
            Kind::Sqlite(path, _) => Some(path),
            _ => None,
        }
    }

    pub async fn finish(self) {
        if let Kind::Postgres { url, schema } = &self.kind {
            PostgresStore::connect_in_schema(url, schema)
                .await
                .unwrap()
                .drop_schema()
                .await
                .unwrap();
        }
    }
}

pub fn memory_storage() -> Storage {
    Storage {
        name: "memory",
        kind: Kind::Memory(MemoryStore::new()),
    }
}

pub fn sqlite_storage() -> Storage {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    Storage {
        name: "sqlite",
        kind: Kind::Sqlite(path, dir),
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
                    "KIT_TEST_POSTGRES_URL is not set, but CI is: the PostgreSQL store tests \
                     must run in CI. Run .ci/run (it starts a server), or export \
                     KIT_TEST_POSTGRES_URL=postgres://user:password@host:port/db"
                );
            }
            eprintln!(
                "\n*** SKIPPED PostgreSQL store conformance: KIT_TEST_POSTGRES_URL is not set. \
                 Run `source .ci/postgres.sh` (starts a local server) or point it at a server. ***\n"
            );
            None
        }
    }
}

pub fn unique_schema() -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "kit_store_{}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst),
        kit::ids::now_millis() % 1_000_000
    )
}

pub async fn postgres_storage() -> Option<Storage> {
    let url = postgres_url()?;
    let schema = unique_schema();
    Some(Storage {
        name: "postgres",
        kind: Kind::Postgres { url, schema },
    })
}

/// Runs each case against memory, SQLite and PostgreSQL, one `#[tokio::test]` per pair.
macro_rules! store_suite {
    ($($case:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let s = $crate::stores::memory_storage();
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let s = $crate::stores::sqlite_storage();
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(s) = $crate::stores::postgres_storage().await else { return };
                    super::$case(&s).await;
                    s.finish().await;
                }
            )*
        }
    };
}
