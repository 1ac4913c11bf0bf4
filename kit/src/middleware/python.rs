//! How Python prints values. The anchors' tool texts (deepagents' listings, LangChain's review
//! descriptions and moderation messages) show Python's `repr` and `json.dumps`, and prompts
//! written for them expect the same text.

use serde_json::Value;

/// JSON as Python's `json.dumps` writes it: `", "` and `": "` separators, non-ASCII escaped.
pub(crate) fn py_json(value: &Value) -> String {
    let mut out = String::new();
    write_py_json(value, &mut out);
    out
}

fn write_py_json(value: &Value, out: &mut String) {
    match value {
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py_json(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_json_str(k, out);
                out.push_str(": ");
                write_py_json(v, out);
            }
            out.push('}');
        }
        Value::String(s) => write_json_str(s, out),
        other => out.push_str(&other.to_string()),
    }
}

fn write_json_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if c.is_ascii() && !c.is_ascii_control() => out.push(c),
            c => {
                let mut units = [0u16; 2];
                for unit in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    out.push('"');
}

/// A JSON value as Python's `repr` of the equivalent object: `{'to': 'a@x', 'n': 1, 'ok': True}`.
pub(crate) fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_py_repr(value, &mut out);
    out
}

/// [`py_repr`] into one buffer: a nested value is written once, not copied into each level
/// above it.
fn write_py_repr(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("None"),
        Value::Bool(true) => out.push_str("True"),
        Value::Bool(false) => out.push_str("False"),
        Value::Number(n) => out.push_str(&n.to_string()),
        Value::String(s) => write_py_str(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py_repr(v, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_py_str(k, out);
                out.push_str(": ");
                write_py_repr(v, out);
            }
            out.push('}');
        }
    }
}

/// A Python string literal as `repr` writes it: `'a'`, or `"it's"` when only that avoids escapes.
pub(crate) fn py_str(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    write_py_str(s, &mut out);
    out
}

fn write_py_str(s: &str, out: &mut String) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.reserve(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push(quote);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn python_formats() {
        let args = json!({"to": "a@x", "body": "it's \"hi\"\n", "n": 1, "ok": true, "x": null, "l": [1.5, "é"]});
        assert_eq!(
            py_repr(&args),
            r#"{'body': 'it\'s "hi"\n', 'l': [1.5, 'é'], 'n': 1, 'ok': True, 'to': 'a@x', 'x': None}"#
        );
        assert_eq!(py_repr(&json!("it's")), r#""it's""#);
        assert_eq!(
            py_json(&json!({"to": "c@x", "body": "édité 😀"})),
            r#"{"body": "\u00e9dit\u00e9 \ud83d\ude00", "to": "c@x"}"#
        );
    }

    #[test]
    fn strings_pick_the_quote_python_picks_and_escape_controls() {
        assert_eq!(py_str("a/b"), "'a/b'");
        assert_eq!(py_str("it's"), r#""it's""#);
        assert_eq!(py_str("both ' and \""), r#"'both \' and "'"#);
        assert_eq!(py_str("tab\there\u{85}"), r"'tab\there\x85'");
    }

    /// A leaf of a kibibyte or a megabyte under 120 levels: written once (each level copied
    /// the text below it before, 120 copies of the megabyte).
    #[test]
    fn a_deep_value_is_written_once() {
        for size in [1 << 10, 1 << 20] {
            let mut value = json!("x".repeat(size));
            for _ in 0..60 {
                value = json!([{"k": value}]);
            }
            let expected = format!(
                "{}'{}'{}",
                "[{'k': ".repeat(60),
                "x".repeat(size),
                "}]".repeat(60)
            );
            assert_eq!(py_repr(&value), expected);
        }
    }
}
