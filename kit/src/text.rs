//! Small text helpers shared across kit: clipping peer text for error messages, naming JSON
//! types, reading panic payloads.

use serde_json::Value;

/// `s` cut to at most `max_chars` characters, with `…` when something was cut. Linear in the
/// kept part, so clipping a hostile 1 GiB body costs what the kept prefix costs.
pub(crate) fn clip(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_string(),
        Some((end, _)) => format!("{}…", &s[..end]),
    }
}

/// The most items an error message lists.
pub(crate) const LISTED: usize = 20;

/// At most [`LISTED`] of `items` (of which there are `total`), joined by `separator`, with
/// how many there are in all when that is more. Only those named are written out, so a list
/// of any length makes a message of bounded size.
pub(crate) fn listing(
    items: impl IntoIterator<Item = String>,
    total: usize,
    separator: &str,
) -> String {
    let mut text = items
        .into_iter()
        .take(LISTED)
        .collect::<Vec<_>>()
        .join(separator);
    if total > LISTED {
        text.push_str(&format!("{separator}… ({total} in all)"));
    }
    text
}

/// A JSON value's type, as an error message says it ("an object", "a string").
pub(crate) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The message of a caught panic, when it carried one.
pub(crate) fn panic_text(panic: &(dyn std::any::Any + Send)) -> Option<&str> {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clip_counts_characters_not_bytes() {
        assert_eq!(clip("héllo", 10), "héllo");
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("", 0), "");
        assert_eq!(clip("a", 0), "…");
    }

    #[test]
    fn panic_text_reads_both_payload_kinds() {
        let s: Box<dyn std::any::Any + Send> = Box::new("static");
        assert_eq!(panic_text(s.as_ref()), Some("static"));
        let owned: Box<dyn std::any::Any + Send> = Box::new(String::from("owned"));
        assert_eq!(panic_text(owned.as_ref()), Some("owned"));
        let other: Box<dyn std::any::Any + Send> = Box::new(7_u8);
        assert_eq!(panic_text(other.as_ref()), None);
    }
}
