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

/// A record keeps a worker's answer whole up to 64 KiB; over that, what the tools need: the
/// interrupts that fit (in order, the rest named as left out) and the error whatever its form.
#[test]
fn a_large_answer_is_trimmed_to_what_the_tools_need() {
    let small = json!({"status": "running", "values": {"messages": [{"content": "hi"}]}});
    assert_eq!(super::tasks::kept_of(&small), small);
    let big = json!({
        "status": "interrupted", "thread_id": "t",
        "values": {"messages": [{"content": "v".repeat(1 << 20)}]},
        "interrupts": [
            {"id": "i1", "value": "a".repeat(100 << 10)},
            {"id": "i2", "value": "b".repeat(100 << 10)},
            {"id": "i3", "value": "c".repeat(100 << 10)},
        ],
        "error": {"code": 7, "detail": "d".repeat(1 << 20)},
    });
    let kept = super::tasks::kept_of(&big);
    assert_eq!(kept["truncated"], true);
    assert_eq!(kept["interrupts_truncated"], true);
    let ids: Vec<&str> = kept["interrupts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["i1", "i2"]);
    assert!(kept["error"].as_str().unwrap().starts_with("{\"code\":7"));
    assert!(serde_json::to_string(&kept).unwrap().len() < 300 << 10);
    assert_eq!(kept["thread_id"], "t");

    // Small but deeper than a thread can save and read back (from a client of the user's
    // own): only the shallow summary is kept.
    let mut deep = json!(1);
    for _ in 0..100 {
        deep = json!([deep]);
    }
    let answer = json!({"status": "running", "run_id": "r", "values": {"x": deep.clone()},
                        "interrupts": [{"id": "i1", "value": deep}]});
    let kept = super::tasks::kept_of(&answer);
    assert_eq!(kept["truncated"], true);
    assert_eq!(
        (&kept["status"], &kept["run_id"]),
        (&json!("running"), &json!("r"))
    );
    assert_eq!(kept["interrupts"], json!([]));
    assert!(crate::json::nests_within(&kept, 4), "{kept}");
}
