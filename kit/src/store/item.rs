//! What a store holds and returns: [`Item`] (a value under a namespace and key, with its
//! timestamps) and [`SearchItem`] (an item with its relevance score), and the store's clock.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::ser::SerializeStruct;
use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

use super::Namespace;

/// A stored item: a JSON object under a namespace and a key, and when it was created, last
/// updated and (with a time to live) when it expires.
///
/// It serialises as LangGraph's `Item.dict()`: `{"namespace": [..], "key": .., "value": {..},
/// "created_at": "2026-..Z", "updated_at": ".."}`, plus `"expires_at"` when it has a time to
/// live.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Item {
    /// Where it lives.
    pub namespace: Namespace,
    /// Its key, unique within the namespace.
    pub key: String,
    /// The stored object.
    pub value: Map<String, Value>,
    /// When it was first put (a put over an expired item creates it anew).
    pub created_at: SystemTime,
    /// When it was last put.
    pub updated_at: SystemTime,
    /// When it expires, with a time to live (reading may push this back, see
    /// [`TtlConfig::refresh_on_read`](super::TtlConfig::refresh_on_read)); `None` never.
    pub expires_at: Option<SystemTime>,
}

impl Item {
    /// The value as one JSON value (an object).
    pub fn value_json(&self) -> Value {
        Value::Object(self.value.clone())
    }
}

impl Serialize for Item {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields = if self.expires_at.is_some() { 6 } else { 5 };
        let mut out = s.serialize_struct("Item", fields)?;
        out.serialize_field("namespace", &self.namespace)?;
        out.serialize_field("key", &self.key)?;
        out.serialize_field("value", &self.value)?;
        out.serialize_field("created_at", &rfc3339(self.created_at))?;
        out.serialize_field("updated_at", &rfc3339(self.updated_at))?;
        if let Some(at) = self.expires_at {
            out.serialize_field("expires_at", &rfc3339(at))?;
        }
        out.end()
    }
}

/// An item found by [`Store::search`](super::Store::search), with its relevance to the
/// search's natural-language query (cosine similarity, higher is closer; `None` without a
/// query, or for an item with nothing indexed).
///
/// It serialises as the item's fields plus `"score"`, as LangGraph's `SearchItem.dict()`.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct SearchItem {
    /// The item.
    pub item: Item,
    /// Its relevance to the query.
    pub score: Option<f64>,
}

impl std::ops::Deref for SearchItem {
    type Target = Item;
    fn deref(&self) -> &Item {
        &self.item
    }
}

impl Serialize for SearchItem {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let fields = if self.item.expires_at.is_some() { 7 } else { 6 };
        let mut out = s.serialize_struct("SearchItem", fields)?;
        out.serialize_field("namespace", &self.item.namespace)?;
        out.serialize_field("key", &self.item.key)?;
        out.serialize_field("value", &self.item.value)?;
        out.serialize_field("created_at", &rfc3339(self.item.created_at))?;
        out.serialize_field("updated_at", &rfc3339(self.item.updated_at))?;
        if let Some(at) = self.item.expires_at {
            out.serialize_field("expires_at", &rfc3339(at))?;
        }
        out.serialize_field("score", &self.score)?;
        out.end()
    }
}

fn rfc3339(t: SystemTime) -> String {
    let ms = t
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0);
    crate::ids::rfc3339_from_millis(ms, true)
}

/// The last timestamp handed out, so two writes in one process never share one.
static LAST_MICROS: Mutex<i64> = Mutex::new(0);

/// Microseconds since the Unix epoch, strictly increasing within this process: the order of
/// `updated_at` is the order of the writes, which search results are sorted by.
pub(crate) fn now_micros() -> i64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX))
        .unwrap_or(0);
    let mut last = LAST_MICROS.lock().unwrap_or_else(|p| p.into_inner());
    *last = now.max(last.saturating_add(1));
    *last
}

/// A stored timestamp back as a time.
pub(crate) fn from_micros(micros: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_micros(u64::try_from(micros).unwrap_or(0))
}

/// A duration in microseconds, saturating.
pub(crate) fn micros(d: Duration) -> i64 {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// Parses a stored value: it must be a JSON object.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn parse_value(text: &str, key: &str) -> Result<Map<String, Value>, super::StoreError> {
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(super::StoreError::Corrupt(format!(
            "the value of {key:?} is {}, not a JSON object",
            crate::text::json_type(&other)
        ))),
        Err(e) => Err(super::StoreError::Corrupt(format!(
            "the value of {key:?} is not JSON: {e}"
        ))),
    }
}
