//! Unit tests of the review middleware.

use serde_json::json;

use super::*;

#[test]
fn decisions_are_checked_against_the_request() {
    let request = ReviewRequest {
        action_requests: vec![ActionRequest {
            name: "delete_file".into(),
            args: json!({}),
            description: String::new(),
        }],
        review_configs: vec![ReviewConfig {
            action_name: "delete_file".into(),
            allowed_decisions: vec![DecisionType::Approve, DecisionType::Reject],
        }],
        error: None,
    };
    assert!(request.check(&[Decision::reject()]).is_ok());
    assert_eq!(
        request
            .check(&[Decision::respond("no")])
            .unwrap_err()
            .to_string(),
        "Unexpected human decision: {\"type\":\"respond\",\"message\":\"no\"}. Decision type \
         'respond' is not allowed for tool 'delete_file'. Expected one of ['approve', \
         'reject'] based on the tool's configuration."
    );
    assert_eq!(
        request.check(&[]).unwrap_err(),
        ReviewError::CountMismatch {
            given: 0,
            expected: 1
        }
    );
    let err = request
        .accept(&json!({"decisions": [{"type": "aprove"}]}))
        .unwrap_err();
    assert!(
        matches!(err, ReviewError::InvalidDecision { index: 0, .. }),
        "{err}"
    );
    assert!(
        err.to_string().contains("unknown variant `aprove`"),
        "{err}"
    );
    let err = request.accept(&json!("yes")).unwrap_err();
    assert!(matches!(err, ReviewError::InvalidPayload(_)), "{err}");
    assert_eq!(
        request.accept(&json!([{"type": "approve"}])).unwrap(),
        [Decision::Approve]
    );
}

#[test]
fn configuration_errors() {
    let err =
        HumanReviewMiddleware::from_json(&json!({"rm": {"allowed_decisions": []}})).unwrap_err();
    assert!(err.to_string().contains("at least one decision"), "{err}");
    let err = HumanReviewMiddleware::from_json(&json!({"rm": {"allowed_decisions": ["aprove"]}}))
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid interrupt_on entry for tool `rm`: unknown decision \"aprove\"; use approve, \
         edit, reject or respond"
    );
    let err =
        HumanReviewMiddleware::from_json(&json!({"rm": {"allowed": ["approve"]}})).unwrap_err();
    assert!(err.to_string().contains("unknown key `allowed`"), "{err}");
    let err = HumanReviewMiddleware::from_json(&json!({"rm": "yes"})).unwrap_err();
    assert!(err.to_string().contains("expected true, false"), "{err}");
}
