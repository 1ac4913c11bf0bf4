//! Channel names as small numbers: `kit_channels` gives each name its index once, for every
//! thread of the file, and each process keeps what it has read of that table.
//!
//! A name and its index never change once committed, so the cache only ever holds committed
//! pairs: a write that gives a new name its index hands the pair back, and it is remembered
//! only once that write's transaction committed (a rolled-back index may be given to another
//! name by the next writer).

use std::collections::HashMap;
use std::sync::RwLock;

use rusqlite::{Connection, OptionalExtension, params};

use super::R;
use crate::checkpoint::sql::corrupt;

/// The names and indexes read so far.
#[derive(Default)]
pub(super) struct ChannelNames {
    by_name: RwLock<HashMap<Box<str>, u32>>,
    by_index: RwLock<HashMap<u32, Box<str>>>,
}

/// Pairs a write added to `kit_channels`: to remember once it committed.
pub(super) type Added = Vec<(String, u32)>;

impl ChannelNames {
    /// The index of `name` inside a write transaction, added to the table if it is new.
    pub(super) fn index(&self, conn: &Connection, name: &str, added: &mut Added) -> R<u32> {
        if let Some(&index) = read(&self.by_name).get(name) {
            return Ok(index);
        }
        if let Some((_, index)) = added.iter().find(|(n, _)| n == name) {
            return Ok(*index);
        }
        let index = stored_index(conn, name)?;
        added.push((name.to_string(), index));
        Ok(index)
    }

    /// Remembers what a committed write added.
    pub(super) fn remember(&self, added: Added) {
        if added.is_empty() {
            return;
        }
        let mut by_name = write(&self.by_name);
        let mut by_index = write(&self.by_index);
        for (name, index) in added {
            by_index.insert(index, name.as_str().into());
            by_name.insert(name.into(), index);
        }
    }

    /// The name of channel `index`, read from the table the first time.
    pub(super) fn name(&self, conn: &Connection, index: u32) -> R<String> {
        if let Some(name) = read(&self.by_index).get(&index) {
            return Ok(name.to_string());
        }
        let name: Option<String> = conn
            .prepare_cached("SELECT name FROM kit_channels WHERE idx = ?1")?
            .query_row(params![index], |row| row.get(0))
            .optional()?;
        let name = name.ok_or_else(|| {
            corrupt(format_args!(
                "a checkpoint names channel {index}, which kit_channels does not hold"
            ))
        })?;
        self.remember(vec![(name.clone(), index)]);
        Ok(name)
    }
}

/// The index of `name` in `kit_channels`, added if new (inside a write transaction; not
/// remembered).
pub(super) fn stored_index(conn: &Connection, name: &str) -> R<u32> {
    conn.prepare_cached("INSERT OR IGNORE INTO kit_channels (name) VALUES (?1)")?
        .execute([name])?;
    let index: i64 = conn
        .prepare_cached("SELECT idx FROM kit_channels WHERE name = ?1")?
        .query_row([name], |row| row.get(0))?;
    u32::try_from(index).map_err(|_| corrupt(format_args!("channel `{name}` has index {index}")))
}

fn read<T>(lock: &RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    lock.read().unwrap_or_else(|p| p.into_inner())
}

fn write<T>(lock: &RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    lock.write().unwrap_or_else(|p| p.into_inner())
}
