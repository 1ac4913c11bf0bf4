//! What the SQL back-ends (SQLite, PostgreSQL) share: the error of an operation, and the JSON
//! columns they read and write.

use super::CheckpointError;

/// An error inside a back-end operation: a driver error `E` (described with the operation's
/// name at the boundary) or an already-typed checkpoint error.
pub(crate) enum Fail<E> {
    /// The driver failed.
    Sql(E),
    /// The operation failed with a checkpoint error (corrupt data, a conflict).
    Checkpoint(CheckpointError),
}

/// A driver's error type; `?` turns it into [`Fail::Sql`].
pub(crate) trait DriverError {}

impl<E: DriverError> From<E> for Fail<E> {
    fn from(e: E) -> Self {
        Fail::Sql(e)
    }
}

impl<E> From<CheckpointError> for Fail<E> {
    fn from(e: CheckpointError) -> Self {
        Fail::Checkpoint(e)
    }
}

/// The result of a back-end operation on driver `E`.
pub(crate) type R<T, E> = Result<T, Fail<E>>;

/// Stored data that does not read back.
pub(crate) fn corrupt<E>(what: impl std::fmt::Display) -> Fail<E> {
    Fail::Checkpoint(CheckpointError::Corrupt(what.to_string()))
}

/// A lease row's stored stop request (`kit_thread_leases.stop`), read back.
pub(crate) fn stop_request<E>(
    thread_id: &str,
    stored: Option<String>,
) -> R<Option<super::MultitaskStrategy>, E> {
    stored
        .map(|s| {
            super::MultitaskStrategy::parse(&s).ok_or_else(|| {
                corrupt(format_args!(
                    "thread `{thread_id}`: unknown stop request `{s}` in kit_thread_leases"
                ))
            })
        })
        .transpose()
}

/// A value as the text of a JSON column.
pub(crate) fn to_text<T: serde::Serialize, E>(value: &T) -> R<String, E> {
    serde_json::to_string(value).map_err(|e| {
        Fail::Checkpoint(CheckpointError::Backend(format!(
            "could not serialise checkpoint data: {e}"
        )))
    })
}

/// A JSON column of checkpoint `id` read back; unreadable text is corruption.
pub(crate) fn parse_json<T: serde::de::DeserializeOwned, E>(
    text: &str,
    what: &str,
    id: &str,
) -> R<T, E> {
    serde_json::from_str(text)
        .map_err(|e| corrupt(format_args!("checkpoint {id}: unreadable {what}: {e}")))
}
