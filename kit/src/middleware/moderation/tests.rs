use std::collections::BTreeMap;

use super::*;

fn result(flagged: &[&str]) -> ModerationResult {
    ModerationResult {
        flagged: !flagged.is_empty(),
        categories: CATEGORIES
            .iter()
            .map(|c| (c.to_string(), flagged.contains(c)))
            .collect(),
        category_scores: CATEGORIES
            .iter()
            .map(|c| (c.to_string(), if flagged.contains(c) { 0.9 } else { 0.0 }))
            .collect(),
        category_applied_input_types: BTreeMap::new(),
    }
}

#[test]
fn violation_texts() {
    let r = result(&["violence", "self-harm/intent"]);
    assert_eq!(r.flagged_categories(), ["self-harm/intent", "violence"]);
    assert_eq!(
        format_violation(DEFAULT_VIOLATION_MESSAGE, &r, "x"),
        "I'm sorry, but I can't comply with that request. It was flagged for self harm \
         intent, violence."
    );
    assert_eq!(
        format_violation("{categories}", &result(&[]), "x"),
        "OpenAI's safety policies"
    );
    let small = ModerationResult {
        category_scores: [
            ("self-harm/intent".to_string(), 0.5),
            ("hate".to_string(), 0.25),
        ]
        .into_iter()
        .collect(),
        ..result(&["hate"])
    };
    assert_eq!(
        format_violation("{{{original_content}}}: {category_scores}", &small, "bad"),
        "{bad}: {\"hate\": 0.25, \"self_harm_intent\": 0.5}"
    );
    // Unknown placeholders and lone braces: the template as is.
    assert_eq!(format_violation("No {reason}.", &r, "x"), "No {reason}.");
    assert_eq!(format_violation("No } here", &r, "x"), "No } here");
    assert_eq!(format_violation("No { here", &r, "x"), "No { here");
}

/// An endpoint that calls anything a category (a proxy's page, thousands of names, a megabyte
/// name) reaches the conversation as at most the documented names and eight category-shaped
/// others; scores likewise.
#[test]
fn what_an_endpoint_calls_a_category_is_bounded() {
    for size in [1 << 10, 1 << 20] {
        let mut r = result(&["violence"]);
        r.categories.insert("x".repeat(size), true);
        r.categories.insert("<html>Bad gateway</html>".into(), true);
        r.categories.insert("Violence".into(), true);
        r.category_scores.insert("y".repeat(size), 1.0);
        for i in 0..10_000 {
            r.categories.insert(format!("new-{i:05}"), true);
            r.category_scores.insert(format!("new-{i:05}"), 0.5);
        }
        let flagged = r.flagged_categories();
        assert_eq!(flagged.len(), 1 + 8);
        assert_eq!(flagged[0], "violence");
        assert_eq!(flagged[1], "new-00000");
        assert!(flagged.iter().all(|c| c.len() <= 64), "{flagged:?}");
        let text = format_violation("{categories} {category_scores}", &r, "x");
        assert!(text.len() < 2_000, "{} bytes", text.len());
        assert!(text.starts_with("violence, new 00000, "), "{text}");
        assert!(!text.contains("html") && !text.contains("Violence") && !text.contains("yyy"));
        // Every documented score is shown, however many others sort before it.
        assert!(text.contains("\"violence\": 0.9"), "{text}");
        assert!(text.contains("\"self_harm_intent\": 0.0"), "{text}");
    }
    // A newer model's category, shaped like one, is still shown.
    let mut r = result(&[]);
    r.categories.insert("self-harm/planning".into(), true);
    assert_eq!(r.flagged_categories(), ["self-harm/planning"]);
}
