//! The store's SQL on PostgreSQL: every value a parameter, statements prepared once per
//! connection, scans read in batches through a portal so memory holds one batch.

use deadpool_postgres::Object;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use super::R;
use crate::store::embed::Vectors;
use crate::store::embed::vector::to_bytes;
use crate::store::item::{from_micros, parse_value};
use crate::store::search::{Collector, Flow, Grouped};
use crate::store::{Item, ListNamespaces, Namespace, NamespacePage, Search, WILDCARD};

/// Rows fetched per round trip of a scan.
const BATCH: i32 = 256;

/// The columns [`item`] reads, in order.
const ITEM_COLUMNS: &str = "i.ns, i.key, i.value::text, i.created_at, i.updated_at, i.expires_at";

/// A put, ready for the database.
pub(super) struct Put {
    pub(super) ns: String,
    pub(super) key: String,
    pub(super) value: String,
    pub(super) ttl: Option<i64>,
    pub(super) vectors: Vectors,
}

/// An item from the columns of [`ITEM_COLUMNS`].
fn item(row: &Row) -> R<Item> {
    let ns: String = row.try_get(0)?;
    let key: String = row.try_get(1)?;
    let value: String = row.try_get(2)?;
    Ok(Item {
        namespace: Namespace::decode(&ns)?,
        value: parse_value(&value, &key)?,
        key,
        created_at: from_micros(row.try_get(3)?),
        updated_at: from_micros(row.try_get(4)?),
        expires_at: row.try_get::<_, Option<i64>>(5)?.map(from_micros),
    })
}

pub(super) async fn get(client: &Object, ns: &str, key: &str, now: i64) -> R<Option<Item>> {
    let stmt = client
        .prepare_cached(&format!(
            "SELECT {ITEM_COLUMNS} FROM kit_store_items i
              WHERE i.ns = $1 AND i.key = $2 AND (i.expires_at IS NULL OR i.expires_at > $3)"
        ))
        .await?;
    match client.query_opt(&stmt, &[&ns, &key, &now]).await? {
        Some(row) => Ok(Some(item(&row)?)),
        None => Ok(None),
    }
}

pub(super) async fn put(client: &mut Object, put: &Put, now: i64) -> R<()> {
    let expires = put.ttl.map(|t| now.saturating_add(t));
    let tx = client.transaction().await?;
    // A put over an expired item creates it anew.
    let upsert = tx
        .prepare_cached(
            "INSERT INTO kit_store_items AS s (ns, key, value, created_at, updated_at, ttl, expires_at)
             VALUES ($1, $2, ($3::text)::jsonb, $4, $4, $5, $6)
             ON CONFLICT (ns, key) DO UPDATE SET
                value = excluded.value,
                created_at = CASE WHEN s.expires_at IS NOT NULL AND s.expires_at <= excluded.updated_at
                                  THEN excluded.created_at ELSE s.created_at END,
                updated_at = excluded.updated_at,
                ttl = excluded.ttl,
                expires_at = excluded.expires_at",
        )
        .await?;
    tx.execute(
        &upsert,
        &[&put.ns, &put.key, &put.value, &now, &put.ttl, &expires],
    )
    .await?;
    let clear = tx
        .prepare_cached("DELETE FROM kit_store_vectors WHERE ns = $1 AND key = $2")
        .await?;
    tx.execute(&clear, &[&put.ns, &put.key]).await?;
    if !put.vectors.is_empty() {
        let fields: Vec<&str> = put.vectors.iter().map(|(f, _)| f.as_str()).collect();
        let vectors: Vec<Vec<u8>> = put.vectors.iter().map(|(_, v)| to_bytes(v)).collect();
        let insert = tx
            .prepare_cached(
                "INSERT INTO kit_store_vectors (ns, key, field, embedding)
                 SELECT $1, $2, f, e FROM UNNEST($3::text[], $4::bytea[]) AS t(f, e)",
            )
            .await?;
        tx.execute(&insert, &[&put.ns, &put.key, &fields, &vectors])
            .await?;
    }
    tx.commit().await?;
    Ok(())
}

pub(super) async fn delete(client: &mut Object, ns: &str, key: &str) -> R<()> {
    let tx = client.transaction().await?;
    tx.execute(
        "DELETE FROM kit_store_items WHERE ns = $1 AND key = $2",
        &[&ns, &key],
    )
    .await?;
    tx.execute(
        "DELETE FROM kit_store_vectors WHERE ns = $1 AND key = $2",
        &[&ns, &key],
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Pushes back the expiry of a live item with a time to live; its new expiry. Saturating, as a
/// put is: a time to live of `Duration::MAX` ("forever") must not overflow the column.
pub(super) async fn refresh(client: &Object, ns: &str, key: &str, now: i64) -> R<Option<i64>> {
    let stmt = client
        .prepare_cached(
            "UPDATE kit_store_items SET expires_at = CASE
                  WHEN ttl > 9223372036854775807 - $3 THEN 9223372036854775807
                  WHEN ttl < 0 THEN $3 ELSE $3 + ttl END
              WHERE ns = $1 AND key = $2 AND ttl IS NOT NULL AND expires_at > $3
              RETURNING expires_at",
        )
        .await?;
    Ok(client
        .query_opt(&stmt, &[&ns, &key, &now])
        .await?
        .map(|row| row.try_get(0))
        .transpose()?)
}

pub(super) async fn sweep(client: &mut Object, now: i64) -> R<u64> {
    let tx = client.transaction().await?;
    tx.execute(
        "DELETE FROM kit_store_vectors v USING kit_store_items i
          WHERE v.ns = i.ns AND v.key = i.key AND i.expires_at IS NOT NULL AND i.expires_at <= $1",
        &[&now],
    )
    .await?;
    let n = tx
        .execute(
            "DELETE FROM kit_store_items WHERE expires_at IS NOT NULL AND expires_at <= $1",
            &[&now],
        )
        .await?;
    tx.commit().await?;
    Ok(n)
}

/// The distinct keys of the live items under `prefix`, sorted: no values read.
pub(super) async fn keys(client: &mut Object, prefix: &Namespace, now: i64) -> R<Vec<String>> {
    let rows = if prefix.is_empty() {
        client
            .query(
                "SELECT DISTINCT key FROM kit_store_items
                  WHERE expires_at IS NULL OR expires_at > $1 ORDER BY key",
                &[&now],
            )
            .await?
    } else {
        let (low, high) = prefix.range();
        client
            .query(
                "SELECT DISTINCT key FROM kit_store_items
                  WHERE ns >= $2 AND ns < $3 AND (expires_at IS NULL OR expires_at > $1)
                  ORDER BY key",
                &[&now, &low, &high],
            )
            .await?
    };
    let mut keys = Vec::with_capacity(rows.len());
    for row in &rows {
        keys.push(row.try_get::<_, String>(0)?);
    }
    Ok(keys)
}

/// Feeds the collector the live items under the search's prefix: newest first (paged in SQL
/// when the collector allows), or in key order with their vectors for a query. Equality
/// conditions of the filter narrow the scan (`@>`), the collector checks the whole filter.
pub(super) async fn search(
    client: &mut Object,
    search: &Search,
    collector: &mut Collector<'_>,
    now: i64,
) -> R<()> {
    let (low, high) = search.prefix.range();
    let narrow = search.filter.containment().map(|v| v.to_string());
    let mut conditions = vec!["(i.expires_at IS NULL OR i.expires_at > $1)".to_string()];
    let mut params: Vec<Box<dyn ToSql + Sync + Send>> = vec![Box::new(now)];
    if !search.prefix.is_empty() {
        params.push(Box::new(low));
        params.push(Box::new(high));
        conditions.push(format!(
            "i.ns >= ${} AND i.ns < ${}",
            params.len() - 1,
            params.len()
        ));
    }
    if let Some(narrow) = narrow {
        params.push(Box::new(narrow));
        conditions.push(format!("i.value @> (${}::text)::jsonb", params.len()));
    }
    let scope = conditions.join(" AND ");
    let vectors = collector.wants_vectors();
    let sql = if vectors {
        format!(
            "SELECT {ITEM_COLUMNS}, v.embedding FROM kit_store_items i
               LEFT JOIN kit_store_vectors v ON v.ns = i.ns AND v.key = i.key
              WHERE {scope} ORDER BY i.ns, i.key"
        )
    } else {
        let mut sql = format!(
            "SELECT {ITEM_COLUMNS} FROM kit_store_items i WHERE {scope}
              ORDER BY i.updated_at DESC, i.ns, i.key"
        );
        if let Some((offset, limit)) = collector.window() {
            params.push(Box::new(i64::try_from(limit).unwrap_or(i64::MAX)));
            params.push(Box::new(i64::try_from(offset).unwrap_or(i64::MAX)));
            sql.push_str(&format!(
                " LIMIT ${} OFFSET ${}",
                params.len() - 1,
                params.len()
            ));
        }
        sql
    };
    let tx = client.transaction().await?;
    let stmt = tx.prepare_cached(&sql).await?;
    let refs: Vec<&(dyn ToSql + Sync)> = params
        .iter()
        .map(|p| p.as_ref() as &(dyn ToSql + Sync))
        .collect();
    let portal = tx.bind(&stmt, &refs).await?;
    let mut grouped = Grouped::default();
    'scan: loop {
        let rows = tx.query_portal(&portal, BATCH).await?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let flow = if vectors {
                grouped.row(
                    collector,
                    row.try_get(0)?,
                    row.try_get(1)?,
                    || item(row),
                    row.try_get::<_, Option<&[u8]>>(6)?,
                )?
            } else {
                let found = item(row)?;
                if collector.accepts(&found.value) {
                    collector.offer(found, [])?
                } else {
                    Flow::More
                }
            };
            if flow == Flow::Done {
                break 'scan;
            }
        }
    }
    grouped.finish(collector)?;
    // Reads only: ending the transaction releases the portal.
    tx.rollback().await?;
    Ok(())
}

pub(super) async fn list_namespaces(
    client: &mut Object,
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
    let (low, high) = Namespace::new(literal.clone())?.range();
    let sql = if literal.is_empty() {
        "SELECT DISTINCT ns FROM kit_store_items
          WHERE (expires_at IS NULL OR expires_at > $1) AND $2::text IS NOT NULL
            AND $3::text IS NOT NULL ORDER BY ns"
    } else {
        "SELECT DISTINCT ns FROM kit_store_items
          WHERE (expires_at IS NULL OR expires_at > $1) AND ns >= $2 AND ns < $3 ORDER BY ns"
    };
    let tx = client.transaction().await?;
    let stmt = tx.prepare_cached(sql).await?;
    let portal = tx.bind(&stmt, &[&now, &low, &high]).await?;
    let mut page = NamespacePage::new(list);
    'scan: loop {
        let rows = tx.query_portal(&portal, BATCH).await?;
        if rows.is_empty() {
            break;
        }
        for row in &rows {
            let ns: String = row.try_get(0)?;
            if !page.offer(Namespace::decode(&ns)?) {
                break 'scan;
            }
        }
    }
    tx.rollback().await?;
    Ok(page.finish())
}
