//! The store's SQL on SQLite: every value a parameter, every statement cached.

use rusqlite::{Connection, OptionalExtension, Row, Transaction, params};

use super::R;
use crate::sqlite::Fail;
use crate::store::embed::Vectors;
use crate::store::embed::vector::to_bytes;
use crate::store::item::{from_micros, parse_value};
use crate::store::search::{Collector, Flow, Grouped};
use crate::store::{Item, ListNamespaces, Namespace, NamespacePage, StoreError, WILDCARD};

/// The columns [`item`] reads, in order.
const ITEM_COLUMNS: &str = "i.ns, i.key, i.value, i.created_at, i.updated_at, i.expires_at";

/// A put, ready for the database.
pub(super) struct Put {
    pub(super) ns: String,
    pub(super) key: String,
    pub(super) value: String,
    pub(super) ttl: Option<i64>,
    pub(super) vectors: Vectors,
}

/// An item from the columns of [`ITEM_COLUMNS`].
fn item(row: &Row<'_>) -> R<Item> {
    let ns: String = row.get(0)?;
    let key: String = row.get(1)?;
    let value: String = row.get(2)?;
    Ok(Item {
        namespace: Namespace::decode(&ns).map_err(Fail::Own)?,
        value: parse_value(&value, &key).map_err(Fail::Own)?,
        key,
        created_at: from_micros(row.get(3)?),
        updated_at: from_micros(row.get(4)?),
        expires_at: row.get::<_, Option<i64>>(5)?.map(from_micros),
    })
}

pub(super) fn get(conn: &Connection, ns: &str, key: &str, now: i64) -> R<Option<Item>> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {ITEM_COLUMNS} FROM kit_store_items i
          WHERE i.ns = ?1 AND i.key = ?2 AND (i.expires_at IS NULL OR i.expires_at > ?3)"
    ))?;
    let mut rows = stmt.query(params![ns, key, now])?;
    match rows.next()? {
        Some(row) => Ok(Some(item(row)?)),
        None => Ok(None),
    }
}

pub(super) fn put(tx: &Transaction<'_>, put: &Put, now: i64) -> R<()> {
    let expires = put.ttl.map(|t| now.saturating_add(t));
    // A put over an expired item creates it anew.
    tx.prepare_cached(
        "INSERT INTO kit_store_items (ns, key, value, created_at, updated_at, ttl, expires_at)
         VALUES (?1, ?2, ?3, ?4, ?4, ?5, ?6)
         ON CONFLICT (ns, key) DO UPDATE SET
            value = excluded.value,
            created_at = CASE WHEN kit_store_items.expires_at IS NOT NULL
                                   AND kit_store_items.expires_at <= excluded.updated_at
                              THEN excluded.created_at ELSE kit_store_items.created_at END,
            updated_at = excluded.updated_at,
            ttl = excluded.ttl,
            expires_at = excluded.expires_at",
    )?
    .execute(params![put.ns, put.key, put.value, now, put.ttl, expires])?;
    tx.prepare_cached("DELETE FROM kit_store_vectors WHERE ns = ?1 AND key = ?2")?
        .execute(params![put.ns, put.key])?;
    if !put.vectors.is_empty() {
        let mut insert = tx.prepare_cached(
            "INSERT INTO kit_store_vectors (ns, key, field, embedding) VALUES (?1, ?2, ?3, ?4)",
        )?;
        for (field, v) in &put.vectors {
            insert.execute(params![put.ns, put.key, field, to_bytes(v)])?;
        }
    }
    Ok(())
}

pub(super) fn delete(tx: &Transaction<'_>, ns: &str, key: &str) -> R<()> {
    tx.prepare_cached("DELETE FROM kit_store_items WHERE ns = ?1 AND key = ?2")?
        .execute(params![ns, key])?;
    tx.prepare_cached("DELETE FROM kit_store_vectors WHERE ns = ?1 AND key = ?2")?
        .execute(params![ns, key])?;
    Ok(())
}

/// Pushes back the expiry of a live item with a time to live; its new expiry. Saturating, as a
/// put is: a time to live of `Duration::MAX` ("forever") must not overflow the column.
pub(super) fn refresh(tx: &Transaction<'_>, ns: &str, key: &str, now: i64) -> R<Option<i64>> {
    Ok(tx
        .prepare_cached(
            "UPDATE kit_store_items SET expires_at = CASE
                  WHEN ttl > 9223372036854775807 - ?3 THEN 9223372036854775807
                  WHEN ttl < 0 THEN ?3 ELSE ?3 + ttl END
              WHERE ns = ?1 AND key = ?2 AND ttl IS NOT NULL AND expires_at > ?3
              RETURNING expires_at",
        )?
        .query_row(params![ns, key, now], |row| row.get(0))
        .optional()?)
}

pub(super) fn sweep(tx: &Transaction<'_>, now: i64) -> R<u64> {
    tx.prepare_cached(
        "DELETE FROM kit_store_vectors WHERE (ns, key) IN
            (SELECT ns, key FROM kit_store_items WHERE expires_at IS NOT NULL AND expires_at <= ?1)",
    )?
    .execute([now])?;
    let n = tx
        .prepare_cached(
            "DELETE FROM kit_store_items WHERE expires_at IS NOT NULL AND expires_at <= ?1",
        )?
        .execute([now])?;
    Ok(n as u64)
}

/// The condition on `kit_store_items i` for the items under `prefix` (parameters ?1 and ?2:
/// the range of the primary key; both are bound either way, so one statement shape serves),
/// and the range.
fn under(prefix: &Namespace) -> (&'static str, String, String) {
    let (low, high) = prefix.range();
    let scope = if prefix.is_empty() {
        "?1 = ?1 AND ?2 = ?2"
    } else {
        "i.ns >= ?1 AND i.ns < ?2"
    };
    (scope, low, high)
}

/// The distinct keys of the live items under `prefix`, sorted: one pass over the range of the
/// primary key, no values read.
pub(super) fn keys(conn: &Connection, prefix: &Namespace, now: i64) -> R<Vec<String>> {
    let (scope, low, high) = under(prefix);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT DISTINCT i.key FROM kit_store_items i
          WHERE {scope} AND (i.expires_at IS NULL OR i.expires_at > ?3) ORDER BY i.key"
    ))?;
    let keys = stmt
        .query_map(params![low, high, now], |row| row.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(keys)
}

/// Feeds the collector the live items under `prefix`: newest first (paged in SQL when the
/// collector allows), or in key order with their vectors for a query.
pub(super) fn search(
    conn: &Connection,
    prefix: &Namespace,
    collector: &mut Collector<'_>,
    now: i64,
) -> R<()> {
    let (scope, low, high) = under(prefix);
    let live = "(i.expires_at IS NULL OR i.expires_at > ?3)";
    if collector.wants_vectors() {
        let mut stmt = conn.prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS}, v.embedding FROM kit_store_items i
               LEFT JOIN kit_store_vectors v ON v.ns = i.ns AND v.key = i.key
              WHERE {scope} AND {live} ORDER BY i.ns, i.key"
        ))?;
        let mut rows = stmt.query(params![low, high, now])?;
        let mut grouped = Grouped::default();
        while let Some(row) = rows.next()? {
            let vector = row
                .get_ref(6)?
                .as_blob_or_null()
                .map_err(|e| Fail::Own(StoreError::Corrupt(format!("a stored vector: {e}"))))?;
            if grouped.row(collector, row.get(0)?, row.get(1)?, || item(row), vector)? == Flow::Done
            {
                return Ok(());
            }
        }
        grouped.finish(collector)?;
        return Ok(());
    }
    let order = "ORDER BY i.updated_at DESC, i.ns, i.key";
    // `LIMIT ?4 + 0`: SQLite prepares a statement with a bare `LIMIT ?` again on every run.
    let (mut stmt, window) = match collector.window() {
        Some((offset, limit)) => (
            conn.prepare_cached(&format!(
                "SELECT {ITEM_COLUMNS} FROM kit_store_items i
                  WHERE {scope} AND {live} {order} LIMIT ?4 + 0 OFFSET ?5"
            ))?,
            Some((offset, limit)),
        ),
        None => (
            conn.prepare_cached(&format!(
                "SELECT {ITEM_COLUMNS} FROM kit_store_items i WHERE {scope} AND {live} {order}"
            ))?,
            None,
        ),
    };
    let mut rows = match window {
        Some((offset, limit)) => stmt.query(params![
            low,
            high,
            now,
            i64::try_from(limit).unwrap_or(i64::MAX),
            i64::try_from(offset).unwrap_or(i64::MAX)
        ])?,
        None => stmt.query(params![low, high, now])?,
    };
    while let Some(row) = rows.next()? {
        let found = item(row)?;
        if collector.accepts(&found.value) && collector.offer(found, [])? == Flow::Done {
            break;
        }
    }
    Ok(())
}

pub(super) fn list_namespaces(
    conn: &Connection,
    list: &ListNamespaces,
    now: i64,
) -> R<Vec<Namespace>> {
    // The labels before the first wildcard narrow the scan to a range.
    let literal: Vec<String> = list
        .prefix
        .iter()
        .take_while(|l| l.as_str() != WILDCARD)
        .cloned()
        .collect();
    let (low, high) = Namespace::new(literal.clone()).map_err(Fail::Own)?.range();
    let scope = if literal.is_empty() {
        "?1 = ?1 AND ?2 = ?2"
    } else {
        "ns >= ?1 AND ns < ?2"
    };
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT DISTINCT ns FROM kit_store_items
          WHERE {scope} AND (expires_at IS NULL OR expires_at > ?3) ORDER BY ns"
    ))?;
    let mut rows = stmt.query(params![low, high, now])?;
    let mut page = NamespacePage::new(list);
    while let Some(row) = rows.next()? {
        let ns: String = row.get(0)?;
        if !page.offer(Namespace::decode(&ns).map_err(Fail::Own)?) {
            break;
        }
    }
    Ok(page.finish())
}
