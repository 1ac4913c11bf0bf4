//! Search filters on the fields of an item's value: equality and the comparison operators of
//! LangGraph (`$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`), one set of rules for every back-end.
//!
//! A filter is evaluated in Rust on each candidate item, never spliced into SQL, so no filter
//! can inject anything and every back-end answers alike. Evaluation is linear in the size of the
//! filter and of the fields it names.

use std::cmp::Ordering;

use serde_json::{Map, Value};

use super::StoreError;

/// A condition on a set of top-level fields of an item's value; an item passes when every
/// condition holds.
///
/// * **Equality** (`eq`, or a plain value in JSON): numbers compare by value (`1 == 1.0`),
///   strings, booleans and `null` exactly, arrays element by element with the same length, and
///   an object matches when every field it names matches (the item's object may have more). A
///   missing field equals `null`.
/// * **`ne`**: the negation of equality, so a missing field is "not equal" to anything but
///   `null`.
/// * **`gt`, `gte`, `lt`, `lte`**: two numbers by value, two strings byte by byte (ISO dates
///   order correctly); any other pair, or a missing field, does not match.
///
/// ```
/// use kit::store::Filter;
/// use serde_json::json;
///
/// let built = Filter::new().eq("kind", "note").gt("score", 4.5);
/// let parsed = Filter::from_json(&json!({"kind": "note", "score": {"$gt": 4.5}}))?;
/// assert_eq!(built, parsed);
///
/// let value = json!({"kind": "note", "score": 5, "tags": ["a"]});
/// assert!(built.matches(value.as_object().unwrap()));
/// assert!(!Filter::new().eq("tags", json!(["a", "b"])).matches(value.as_object().unwrap()));
/// # Ok::<(), kit::store::StoreError>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    conditions: Vec<(String, Op, Value)>,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Eq,
    Ne,
    Gt,
    Gte,
    Lt,
    Lte,
}

impl Op {
    const ALL: [(&'static str, Op); 6] = [
        ("$eq", Op::Eq),
        ("$ne", Op::Ne),
        ("$gt", Op::Gt),
        ("$gte", Op::Gte),
        ("$lt", Op::Lt),
        ("$lte", Op::Lte),
    ];
}

impl Filter {
    /// The empty filter: every item passes.
    pub fn new() -> Self {
        Self::default()
    }

    /// True when the filter has no condition.
    pub fn is_empty(&self) -> bool {
        self.conditions.is_empty()
    }

    fn with(mut self, field: impl Into<String>, op: Op, value: impl Into<Value>) -> Self {
        self.conditions.push((field.into(), op, value.into()));
        self
    }

    /// `field` equals `value`.
    #[must_use]
    pub fn eq(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Eq, value)
    }

    /// `field` does not equal `value`.
    #[must_use]
    pub fn ne(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Ne, value)
    }

    /// `field` is greater than `value`.
    #[must_use]
    pub fn gt(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Gt, value)
    }

    /// `field` is greater than or equal to `value`.
    #[must_use]
    pub fn gte(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Gte, value)
    }

    /// `field` is less than `value`.
    #[must_use]
    pub fn lt(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Lt, value)
    }

    /// `field` is less than or equal to `value`.
    #[must_use]
    pub fn lte(self, field: impl Into<String>, value: impl Into<Value>) -> Self {
        self.with(field, Op::Lte, value)
    }

    /// Reads LangGraph's filter form: an object of field → value (equality) or field →
    /// `{"$op": value, ..}`. The error names the part that is wrong.
    pub fn from_json(filter: &Value) -> Result<Self, StoreError> {
        let Value::Object(fields) = filter else {
            return Err(StoreError::InvalidFilter(format!(
                "a filter is a JSON object such as {{\"kind\": \"note\", \"score\": {{\"$gt\": \
                 4}}}}, not {}",
                crate::text::json_type(filter)
            )));
        };
        let mut out = Filter::new();
        for (field, wanted) in fields {
            let ops = match wanted {
                Value::Object(map) if map.keys().any(|k| k.starts_with('$')) => map,
                other => {
                    out.conditions.push((field.clone(), Op::Eq, other.clone()));
                    continue;
                }
            };
            for (name, operand) in ops {
                let Some(op) = Op::ALL.iter().find(|(n, _)| n == name).map(|(_, op)| *op) else {
                    let known: Vec<&str> = Op::ALL.iter().map(|(n, _)| *n).collect();
                    return Err(StoreError::InvalidFilter(if name.starts_with('$') {
                        format!(
                            "field `{}`: unknown operator `{}`; use one of {}",
                            crate::text::clip(field, 80),
                            crate::text::clip(name, 80),
                            known.join(", ")
                        )
                    } else {
                        format!(
                            "field `{}` mixes operators with the plain field `{}`; \
                             either compare with operators ({}) or match an object, not both",
                            crate::text::clip(field, 80),
                            crate::text::clip(name, 80),
                            known.join(", ")
                        )
                    }));
                };
                out.conditions.push((field.clone(), op, operand.clone()));
            }
        }
        Ok(out)
    }

    /// Whether `value` passes every condition.
    pub fn matches(&self, value: &Map<String, Value>) -> bool {
        self.conditions.iter().all(|(field, op, wanted)| {
            let found = value.get(field);
            match op {
                Op::Eq => equal(found.unwrap_or(&Value::Null), wanted),
                Op::Ne => !equal(found.unwrap_or(&Value::Null), wanted),
                Op::Gt => order(found, wanted).is_some_and(Ordering::is_gt),
                Op::Gte => order(found, wanted).is_some_and(Ordering::is_ge),
                Op::Lt => order(found, wanted).is_some_and(Ordering::is_lt),
                Op::Lte => order(found, wanted).is_some_and(Ordering::is_le),
            }
        })
    }

    /// The plain-equality conditions as one JSON object: every item passing the filter
    /// contains it (PostgreSQL's `@>`), so a back-end may use it to narrow its scan.
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    pub(crate) fn containment(&self) -> Option<Value> {
        let mut out = Map::new();
        for (field, op, wanted) in &self.conditions {
            // `null` also matches a missing field, which containment would miss (anywhere in
            // the value); two equality conditions on one field cannot both go in.
            if *op == Op::Eq && !has_null(wanted) && !out.contains_key(field) {
                out.insert(field.clone(), wanted.clone());
            }
        }
        (!out.is_empty()).then_some(Value::Object(out))
    }
}

/// Whether `null` appears anywhere in `v` (a missing field equals it, which containment
/// would not see).
fn has_null(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Array(items) => items.iter().any(has_null),
        Value::Object(map) => map.values().any(has_null),
        _ => false,
    }
}

/// Equality as [`Filter`] defines it: `found` matches `wanted`.
fn equal(found: &Value, wanted: &Value) -> bool {
    match (found, wanted) {
        (Value::Number(a), Value::Number(b)) => numbers(a, b) == Some(Ordering::Equal),
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| equal(x, y))
        }
        (Value::Object(a), Value::Object(b)) => b
            .iter()
            .all(|(k, w)| equal(a.get(k).unwrap_or(&Value::Null), w)),
        (a, b) => a == b,
    }
}

/// The order of two numbers or two strings; `None` for anything else.
fn order(found: Option<&Value>, wanted: &Value) -> Option<Ordering> {
    match (found?, wanted) {
        (Value::Number(a), Value::Number(b)) => numbers(a, b),
        (Value::String(a), Value::String(b)) => Some(a.as_bytes().cmp(b.as_bytes())),
        _ => None,
    }
}

/// Compares two JSON numbers by value: exactly when both are integers, else as floats.
fn numbers(a: &serde_json::Number, b: &serde_json::Number) -> Option<Ordering> {
    if let (Some(x), Some(y)) = (a.as_i64(), b.as_i64()) {
        return Some(x.cmp(&y));
    }
    if let (Some(x), Some(y)) = (a.as_u64(), b.as_u64()) {
        return Some(x.cmp(&y));
    }
    a.as_f64()?.partial_cmp(&b.as_f64()?)
}
