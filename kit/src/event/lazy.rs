//! JSON an event carries: written when the event is made, read into a [`Value`] only when
//! someone asks. A consumer that forwards or counts events pays for neither the tree nor
//! dropping it.

use std::fmt;
use std::ops::Deref;
use std::sync::OnceLock;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::json;

/// JSON written once, read as a [`Value`] on first use (through `Deref`, so
/// `update["counter"]` reads as it would on a `Value`).
///
/// It serialises as its value and compares by value.
///
/// ```
/// use kit::event::LazyJson;
/// use serde_json::json;
///
/// let update = LazyJson::from(json!({"counter": 1, "log": ["n0"]}));
/// assert_eq!(update.as_str(), r#"{"counter":1,"log":["n0"]}"#);
/// assert_eq!(update["counter"], 1);
/// assert_eq!(serde_json::to_string(&update).unwrap(), update.as_str());
/// ```
#[derive(Clone)]
pub struct LazyJson {
    /// Compact JSON.
    text: String,
    /// `text` read back, once asked for.
    value: OnceLock<Value>,
}

impl LazyJson {
    /// Writes `value`'s JSON now; reads it back only if asked.
    pub(crate) fn write<T: ?Sized + Serialize>(value: &T) -> Result<LazyJson, serde_json::Error> {
        let bytes = json::to_vec(value)?;
        let text = String::from_utf8(bytes)
            .map_err(|e| serde::ser::Error::custom(format!("not UTF-8: {e}")))?;
        Ok(LazyJson {
            text,
            value: OnceLock::new(),
        })
    }

    /// `null`.
    pub fn null() -> LazyJson {
        LazyJson::from(Value::Null)
    }

    /// The JSON text, compact.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The JSON as a [`Value`], read from the text the first time. Text that does not read
    /// back (only a hand-written `Serialize` that writes broken JSON can cause it) is `null`;
    /// [`as_str`](Self::as_str) still has it.
    pub fn value(&self) -> &Value {
        self.value.get_or_init(|| read(&self.text))
    }

    /// The JSON as an owned [`Value`].
    pub fn into_value(self) -> Value {
        match self.value.into_inner() {
            Some(value) => value,
            None => read(&self.text),
        }
    }
}

fn read(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

impl Deref for LazyJson {
    type Target = Value;

    fn deref(&self) -> &Value {
        self.value()
    }
}

impl From<Value> for LazyJson {
    fn from(value: Value) -> LazyJson {
        // A `Value` always writes (its keys are strings) and is kept, so nothing is read back.
        let text = json::to_vec(&value)
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .unwrap_or_else(|| "null".to_string());
        LazyJson {
            text,
            value: OnceLock::from(value),
        }
    }
}

impl PartialEq for LazyJson {
    fn eq(&self, other: &LazyJson) -> bool {
        self.text == other.text || self.value() == other.value()
    }
}

impl fmt::Debug for LazyJson {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// As its [`Value`], as the update was serialised before it was kept as text: the same bytes
/// through serde_json, and the same structure through any other format.
impl Serialize for LazyJson {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.value().serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for LazyJson {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<LazyJson, D::Error> {
        Value::deserialize(deserializer).map(LazyJson::from)
    }
}
