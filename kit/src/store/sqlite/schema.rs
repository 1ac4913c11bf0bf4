//! The store's tables in a SQLite file, their version and forward migrations.

/// The newest schema version of the store's SQLite tables this build knows.
pub const SQLITE_STORE_SCHEMA_VERSION: i64 = 1;

/// The one-row table holding the store's schema version (apart from the checkpointer's, so
/// both can share a file).
pub(super) const VERSION_TABLE: &str = "kit_store_schema_version";

/// Forward migrations; entry `i` takes the schema from version `i` to `i + 1`.
///
/// Namespaces are stored as their labels joined by U+001F, which sorts below every label
/// character: a prefix is a range of the primary key. Times are microseconds since the epoch;
/// `ttl` is the item's time to live in microseconds, `expires_at` when it expires.
pub(super) const MIGRATIONS: &[&str] = &[
    // 0 -> 1
    "CREATE TABLE kit_store_items (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        ttl INTEGER,
        expires_at INTEGER,
        PRIMARY KEY (ns, key)
    ) WITHOUT ROWID;
    CREATE INDEX kit_store_items_updated ON kit_store_items (updated_at);
    CREATE INDEX kit_store_items_expires ON kit_store_items (expires_at)
        WHERE expires_at IS NOT NULL;
    CREATE TABLE kit_store_vectors (
        ns TEXT NOT NULL,
        key TEXT NOT NULL,
        field TEXT NOT NULL,
        embedding BLOB NOT NULL,
        PRIMARY KEY (ns, key, field)
    ) WITHOUT ROWID;",
];
