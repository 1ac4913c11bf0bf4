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
