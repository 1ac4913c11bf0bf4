//! What can go wrong with a store: a bad argument (said before anything is stored), an embedder
//! that failed, data that does not read back, or the back-end itself.

/// An error of a [`Store`](super::Store) operation. Each message says what was wrong and what
/// to do instead.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// A namespace (or a namespace pattern) is not acceptable.
    #[error("invalid namespace {namespace:?}: {reason}")]
    InvalidNamespace {
        /// The labels as given.
        namespace: Vec<String>,
        /// What is wrong and how to write it instead.
        reason: String,
    },
    /// A key is not acceptable.
    #[error("invalid key {key:?}: {reason}")]
    InvalidKey {
        /// The key as given (clipped).
        key: String,
        /// What is wrong and how to write it instead.
        reason: String,
    },
    /// A value cannot be stored: it is not a JSON object, or the back-end cannot hold it.
    #[error("the value for key {key:?} cannot be stored: {reason}")]
    InvalidValue {
        /// The key the value was put under (clipped).
        key: String,
        /// What is wrong and what to do instead.
        reason: String,
    },
    /// A search filter is not acceptable.
    #[error("invalid filter: {0}")]
    InvalidFilter(String),
    /// A field path (an index's `fields`) is not acceptable.
    #[error("invalid field path {path:?}: {reason}")]
    InvalidFieldPath {
        /// The path as given.
        path: String,
        /// What is wrong and how to write it instead.
        reason: String,
    },
    /// A search asks for a natural-language query, but the store has no index.
    #[error(
        "the search has a query ({query:?}), but this store has no embedding index; open the \
         store with `.index(IndexConfig::new(embedder, dims))`, or search without a query"
    )]
    NoIndex {
        /// The query (clipped).
        query: String,
    },
    /// The embedder failed, or answered something unusable.
    #[error("embedding failed: {0}")]
    Embedding(String),
    /// A vector's length is not the index's.
    #[error(
        "{what} has {found} dimensions, but the index has {expected}; use the embedder the \
         items were indexed with, or put them again to re-embed them"
    )]
    Dimensions {
        /// Which vector.
        what: String,
        /// Its length.
        found: usize,
        /// The index's.
        expected: usize,
    },
    /// Stored data does not read back.
    #[error("store data is corrupt: {0}")]
    Corrupt(String),
    /// The database was written by a newer kit.
    #[error(
        "the store's tables have schema version {found}, but this kit supports up to \
         {supported}; upgrade kit (an older kit would misread them)"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i64,
        /// Newest version this build knows.
        supported: i64,
    },
    /// The storage back-end failed (I/O, connection, SQL).
    #[error("store back-end failed: {0}")]
    Backend(String),
}

impl StoreError {
    /// The namespace shown is its first [`LISTED`](crate::text::LISTED) labels, each clipped,
    /// and how many there are when that is more: a namespace of a million labels makes a
    /// short error.
    pub(crate) fn namespace(labels: &[impl AsRef<str>], reason: impl Into<String>) -> Self {
        let mut namespace: Vec<String> = labels
            .iter()
            .take(crate::text::LISTED)
            .map(|l| crate::text::clip(l.as_ref(), 80))
            .collect();
        if labels.len() > crate::text::LISTED {
            namespace.push(format!("… ({} labels in all)", labels.len()));
        }
        StoreError::InvalidNamespace {
            namespace,
            reason: reason.into(),
        }
    }

    pub(crate) fn key(key: &str, reason: impl Into<String>) -> Self {
        StoreError::InvalidKey {
            key: crate::text::clip(key, 80),
            reason: reason.into(),
        }
    }
}
