//! A checkpoint id as the `checkpoint_id` column holds it: the 16 bytes of a UUID as kit writes
//! them (a BLOB), any other id as its text (TEXT).
//!
//! SQLite orders every TEXT value before every BLOB, and each kind in itself as its text does
//! (a lowercase hyphenated UUID sorts as its bytes). So a range over one kind is an index walk,
//! and where order matters across kinds (a thread holding ids of its own beside kit's), the
//! two kinds are read apart and merged.

use rusqlite::types::{ToSqlOutput, ValueRef};

use super::R;
use crate::checkpoint::packed::{Id, uuid_bytes};
use crate::checkpoint::sql::corrupt;

/// Binds an id the way the `checkpoint_id` column stores it.
pub(super) enum Key<'a> {
    Uuid([u8; 16]),
    Text(&'a str),
}

impl<'a> Key<'a> {
    pub(super) fn of(id: &'a str) -> Key<'a> {
        match uuid_bytes(id) {
            Some(bytes) => Key::Uuid(bytes),
            None => Key::Text(id),
        }
    }
}

impl<'a> From<&'a Id> for Key<'a> {
    fn from(id: &'a Id) -> Key<'a> {
        match id {
            Id::Uuid(bytes) => Key::Uuid(*bytes),
            Id::Text(text) => Key::Text(text),
        }
    }
}

impl rusqlite::ToSql for Key<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(ToSqlOutput::Borrowed(match self {
            Key::Uuid(bytes) => ValueRef::Blob(bytes),
            Key::Text(text) => ValueRef::Text(text.as_bytes()),
        }))
    }
}

/// A stored `checkpoint_id` read back.
pub(super) fn id_of(value: ValueRef<'_>) -> R<Id> {
    match value {
        ValueRef::Blob(bytes) => match <[u8; 16]>::try_from(bytes) {
            Ok(bytes) => Ok(Id::Uuid(bytes)),
            Err(_) => Err(corrupt(format_args!(
                "a checkpoint id of {} bytes (ids are 16-byte UUIDs or text)",
                bytes.len()
            ))),
        },
        ValueRef::Text(text) => match std::str::from_utf8(text) {
            Ok(text) => Ok(Id::Text(text.into())),
            Err(_) => Err(corrupt("a checkpoint id that is not UTF-8")),
        },
        other => Err(corrupt(format_args!(
            "a checkpoint id of type {:?} (ids are 16-byte UUIDs or text)",
            other.data_type()
        ))),
    }
}
