//! The stream filter's work (bytes given to the detector) grows linearly with the text,
//! counted rather than timed.

use serde_json::json;

use super::*;
use crate::middleware::pii::PiiType;

/// Streams `text` in `chunk`-byte deltas as one call's answer (or, with `tool`, as one
/// tool call's arguments); returns what came out and the bytes scanned.
fn stream(detector: PiiType, text: &str, chunk: usize, tool: bool) -> (String, usize) {
    let s = StreamScrubber::new(Detector::builtin(detector), PiiStrategy::Redact, 128);
    let mut out = Vec::new();
    let envelope = |data: EventData| {
        let mut e = Event::new(data, "m", "r");
        e.parent_ids = vec!["root".into(), "t".into()];
        e
    };
    for (i, piece) in text.as_bytes().chunks(chunk).enumerate() {
        let piece = std::str::from_utf8(piece).unwrap();
        let data = if tool {
            let id = if i == 0 { json!("call-1") } else { Value::Null };
            let call = json!({"index": 0, "id": id, "name": null, "args": piece});
            EventData::from_json(EventKind::ModelDelta, json!({ "tool_call": call })).unwrap()
        } else {
            EventData::text(piece)
        };
        s.filter(envelope(data), &mut out);
    }
    let end = json!({"message": Message::assistant("")});
    s.filter(
        envelope(EventData::from_json(EventKind::ModelEnd, end).unwrap()),
        &mut out,
    );
    let joined = out
        .iter()
        .filter_map(|e| {
            let data = e.data.to_json();
            data.get("text")
                .or_else(|| data.get("tool_call")?.get("args"))
                .and_then(Value::as_str)
                .map(String::from)
        })
        .collect();
    (joined, s.lock().scanned)
}

#[test]
fn a_url_growing_over_every_delta_is_scanned_a_constant_number_of_times_per_byte() {
    for size in [4 << 10, 64 << 10, 512 << 10] {
        let text = format!(
            "see https://example.com/{} then more text",
            "a".repeat(size)
        );
        let (out, scanned) = stream(PiiType::Url, &text, 4, false);
        assert_eq!(out, "see [REDACTED_URL] then more text");
        // Held text is rescanned only when it has doubled: well under 4 bytes per byte.
        assert!(
            scanned <= 4 * text.len(),
            "{size}: {scanned} for {}",
            text.len()
        );
    }
}

#[test]
fn plain_text_is_scanned_a_constant_number_of_times_per_byte() {
    let unit = "Write to ann@example.com about the report, then rest. ";
    let mut per_byte = Vec::new();
    for reps in [16, 1024] {
        let text = unit.repeat(reps);
        let (out, scanned) = stream(PiiType::Email, &text, 3, false);
        assert_eq!(out, text.replace("ann@example.com", "[REDACTED_EMAIL]"));
        per_byte.push(scanned as f64 / text.len() as f64);
    }
    // The lookback (128) plus a step (64) per step: about three scans per byte, the same
    // for 1 KiB and 55 KiB.
    assert!(per_byte.iter().all(|&p| p <= 3.5), "{per_byte:?}");
}

#[test]
fn cards_in_streamed_arguments_are_found_through_json_escapes() {
    // A card grouped with escaped no-break spaces, one with full-width digits written as
    // escapes, and one wrapped with an escaped line break.
    let args = r#"{"a": "4111\u00a01111\u00a01111\u00a01111", "b": "\uff14\uff11\uff11\uff11 1111 1111 1111", "c": "4111 1111\n1111 1111", "d": "x\ty"}"#;
    for chunk in [1, 3, 7, 64] {
        let (out, _) = stream(PiiType::CreditCard, args, chunk, true);
        let value: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(
            value,
            json!({"a": "[REDACTED_CREDIT_CARD]", "b": "[REDACTED_CREDIT_CARD]", "c": "[REDACTED_CREDIT_CARD]", "d": "x\ty"}),
            "chunk {chunk}"
        );
    }
}

#[test]
fn the_json_view_decodes_card_characters_and_pads_with_nul() {
    let raw = r#"4\u00a0\n\t\"\u00e9"#;
    let view = json_view(raw);
    assert_eq!(view.len(), raw.len());
    assert_eq!(view, "4\u{a0}\0\0\0\0\n\0\t\0        ");
}
