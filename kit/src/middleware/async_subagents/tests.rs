use super::*;

#[test]
fn task_id_choice_order_and_result_extraction() {
    let r = json!({"run_id": "r", "id": "i", "thread_id": "t"});
    assert_eq!(remote::task_id(&r).as_deref(), Some("t"));
    let r = json!({"run_id": "r", "id": "i"});
    assert_eq!(remote::task_id(&r).as_deref(), Some("i"));
    assert_eq!(remote::task_id(&json!({"status": "x"})), None);
    let r = json!({"values": {"messages": [
        {"role": "assistant", "content": "first"},
        {"role": "assistant", "content": "final"},
        {"role": "assistant", "content": ""}
    ]}});
    assert_eq!(remote::result(&r).as_deref(), Some("final"));
    let r = json!({"result": "explicit", "values": {"messages": [{"content": "x"}]}});
    assert_eq!(remote::result(&r).as_deref(), Some("explicit"));
}

#[test]
fn duplicate_names_are_refused() {
    let err = AsyncSubagentMiddleware::new(vec![
        AsyncSpec::new("a", "x", "g"),
        AsyncSpec::new("a", "y", "g"),
    ])
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains("duplicate async subagent names: a")
    );
}
