//! Field paths: which parts of an item's value are embedded (LangGraph's index `fields`), parsed
//! once in one linear pass, and the texts they select.

use serde_json::Value;

use crate::store::StoreError;

/// A parsed field path: `$` (the whole value), `a.b`, `items[*].text`, `tags[0]`,
/// `revisions[-1].note`, `*` (every field or element).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldPath {
    /// The path as written: with a selection of several texts, each text's vector is labelled
    /// `<path>.<i>`.
    pub(crate) text: String,
    steps: Vec<Step>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    EachElement,
    EachValue,
}

impl FieldPath {
    /// Parses a path; the error says what is wrong.
    pub(crate) fn parse(path: &str) -> Result<FieldPath, StoreError> {
        let bad = |reason: &str| StoreError::InvalidFieldPath {
            path: crate::text::clip(path, 200),
            reason: format!(
                "{reason}; write fields joined by dots, with [n], [-n] or [*] after an array \
                 field, e.g. `text`, `meta.title`, `items[*].text`, or `$` for the whole value"
            ),
        };
        let trimmed = path.trim();
        if trimmed.is_empty() {
            return Err(bad("it is empty"));
        }
        if trimmed == "$" {
            return Ok(FieldPath {
                text: "$".to_string(),
                steps: Vec::new(),
            });
        }
        let mut steps = Vec::new();
        let mut field = String::new();
        // True right after `]`: a `.`, `[` or the end must follow.
        let mut closed = false;
        let mut chars = trimmed.chars();
        while let Some(c) = chars.next() {
            match c {
                '.' => {
                    if field.is_empty() && !closed {
                        return Err(bad(
                            "it has an empty field name (two dots, or a leading dot)",
                        ));
                    }
                    if !field.is_empty() {
                        steps.push(field_step(std::mem::take(&mut field)));
                    }
                    closed = false;
                    // A trailing dot leaves nothing after it.
                    if chars.as_str().is_empty() {
                        return Err(bad("it ends with a dot"));
                    }
                }
                '[' => {
                    if !field.is_empty() {
                        steps.push(field_step(std::mem::take(&mut field)));
                    } else if steps.is_empty() && !closed {
                        return Err(bad("it starts with `[`; name the array field first"));
                    }
                    let mut inner = String::new();
                    let mut ended = false;
                    for c in chars.by_ref() {
                        if c == ']' {
                            ended = true;
                            break;
                        }
                        inner.push(c);
                    }
                    if !ended {
                        return Err(bad("a `[` is never closed"));
                    }
                    let inner = inner.trim();
                    steps.push(if inner == "*" {
                        Step::EachElement
                    } else {
                        match inner.parse::<i64>() {
                            Ok(i) => Step::Index(i),
                            Err(_) => return Err(bad("brackets hold an index or `*`")),
                        }
                    });
                    closed = true;
                }
                ']' => return Err(bad("a `]` has no `[`")),
                '{' | '}' => {
                    return Err(bad(
                        "field sets in braces are not supported; list each field as a path of its own",
                    ));
                }
                c if closed => {
                    let _ = c;
                    return Err(bad("a `]` must be followed by `.`, `[` or the end"));
                }
                c => field.push(c),
            }
        }
        if !field.is_empty() {
            steps.push(field_step(field));
        }
        Ok(FieldPath {
            text: trimmed.to_string(),
            steps,
        })
    }

    /// The texts this path selects in `value`, in order (an object's fields in its map's
    /// order): strings as they are,
    /// numbers and booleans as written, objects and arrays as JSON; `null` and missing parts
    /// select nothing. Linear in the part of `value` selected.
    pub(crate) fn texts(&self, value: &Value) -> Vec<String> {
        let mut out = Vec::new();
        collect(value, &self.steps, &mut out);
        out
    }
}

fn field_step(name: String) -> Step {
    if name == "*" {
        Step::EachValue
    } else {
        Step::Field(name)
    }
}

fn collect(value: &Value, steps: &[Step], out: &mut Vec<String>) {
    let Some((step, rest)) = steps.split_first() else {
        match value {
            Value::Null => {}
            Value::String(s) => out.push(s.clone()),
            Value::Number(_) | Value::Bool(_) | Value::Array(_) | Value::Object(_) => {
                out.push(value.to_string());
            }
        }
        return;
    };
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => {
            if let Some(v) = map.get(name) {
                collect(v, rest, out);
            }
        }
        (Step::Index(i), Value::Array(items)) => {
            let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
            let at = if *i < 0 { len + i } else { *i };
            if let Some(v) = usize::try_from(at).ok().and_then(|at| items.get(at)) {
                collect(v, rest, out);
            }
        }
        (Step::EachElement, Value::Array(items)) => {
            for v in items {
                collect(v, rest, out);
            }
        }
        (Step::EachValue, Value::Object(map)) => {
            for v in map.values() {
                collect(v, rest, out);
            }
        }
        (Step::EachValue, Value::Array(items)) => {
            for v in items {
                collect(v, rest, out);
            }
        }
        _ => {}
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::json;

    fn texts(path: &str, value: &Value) -> Vec<String> {
        FieldPath::parse(path).unwrap().texts(value)
    }

    #[test]
    fn paths_select_what_langgraph_selects() {
        let v = json!({
            "text": "hello",
            "meta": {"title": "T", "n": 3, "ok": true, "none": null},
            "items": [{"text": "a"}, {"text": "b"}, {"other": 1}],
            "tags": ["x", "y", "z"],
        });
        assert_eq!(texts("text", &v), ["hello"]);
        assert_eq!(texts("meta.title", &v), ["T"]);
        assert_eq!(texts("meta.n", &v), ["3"]);
        assert_eq!(texts("meta.ok", &v), ["true"]);
        assert!(texts("meta.none", &v).is_empty());
        assert!(texts("missing.deeper", &v).is_empty());
        assert_eq!(texts("items[*].text", &v), ["a", "b"]);
        assert_eq!(texts("tags[0]", &v), ["x"]);
        assert_eq!(texts("tags[-1]", &v), ["z"]);
        assert!(texts("tags[7]", &v).is_empty());
        assert!(texts("tags[-9]", &v).is_empty());
        assert_eq!(texts("tags", &v), [r#"["x","y","z"]"#]);
        assert_eq!(texts("$", &v).len(), 1);
        // Object fields come in the map's order (sorted, or as written with serde_json's
        // `preserve_order`).
        let mut every = texts("meta.*", &v);
        every.sort();
        assert_eq!(every, ["3", "T", "true"]);
    }

    #[test]
    fn malformed_paths_are_refused_with_the_reason() {
        for bad in [
            "", "a..b", ".a", "a.", "[0]", "a[", "a]", "a[x]", "a{b,c}", "a[0]b",
        ] {
            let e = FieldPath::parse(bad).unwrap_err().to_string();
            assert!(e.contains("e.g. `text`"), "{bad}: {e}");
        }
        assert!(FieldPath::parse("a[0].b[*][-1]").is_ok());
    }
}
