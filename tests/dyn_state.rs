//! The dynamic state form as someone porting a LangGraph graph meets it: per-key initial
//! values, the shipped reducers on dynamic keys, schemas that add to earlier reducers, and a node
//! asking whether a `Send` started it.

use std::sync::{Arc, Mutex};

use kit::graph::{GraphBuilder, NodeContext, NodeError, Route};
use kit::state::{DynSchema, DynState, DynUpdate, dyn_reducers};
use kit::{END, MemoryCheckpointer, RunOptions, START, Send};
use serde_json::{Value, json};

#[tokio::test]
async fn list_and_map_keys_read_as_empty_before_their_first_write() {
    let checkpointer = Arc::new(MemoryCheckpointer::new());
    let seen = Arc::new(Mutex::new(Value::Null));
    let s = seen.clone();
    let graph = GraphBuilder::<DynState>::new("fresh")
        .add_channel("items", dyn_reducers::append())
        .add_channel("totals", dyn_reducers::merge())
        .initial("mode", "draft")
        .sync_node("look", move |st: &DynState, _: &NodeContext| {
            *s.lock().unwrap() = json!({
                "items": st.get("items"),
                "totals": st.get("totals"),
                "mode": st.get("mode"),
                "other": st.get("other"),
            });
            DynUpdate::new().set("items", json!(["x"]))
        })
        .edge(START, "look")
        .edge("look", END)
        .checkpointer(checkpointer.clone())
        .compile()
        .unwrap();
    let opts = RunOptions::new().thread_id("fresh");
    let out = graph.invoke(DynUpdate::new()).options(&opts).await.unwrap();
    assert_eq!(
        *seen.lock().unwrap(),
        json!({"items": [], "totals": {}, "mode": "draft", "other": null}),
        "declared keys read as their starting value; undeclared ones are absent"
    );
    assert_eq!(out.state().get("items"), Some(&json!(["x"])));
    // The starting values are part of the thread.
    let snapshot = graph.get_state(&opts).await.unwrap().unwrap();
    assert_eq!(snapshot.values.get("totals"), Some(&json!({})));
    // An input that writes the key on the first run folds onto the starting value.
    let out = graph
        .invoke(DynUpdate::new().set("items", json!(["given"])))
        .thread_id("second")
        .await
        .unwrap();
    assert_eq!(out.state().get("items"), Some(&json!(["given", "x"])));
    // Read back from storage (another graph on the same checkpointer): the initial values and
    // the input changed the state twice before the input checkpoint, and both are kept.
    let reread = GraphBuilder::<DynState>::new("fresh")
        .add_channel("items", dyn_reducers::append())
        .add_channel("totals", dyn_reducers::merge())
        .initial("mode", "draft")
        .sync_node("look", |_: &DynState, _: &NodeContext| DynUpdate::new())
        .edge(START, "look")
        .edge("look", END)
        .checkpointer(checkpointer.clone())
        .compile()
        .unwrap();
    let second = RunOptions::new().thread_id("second");
    let stored = reread.get_state(&second).await.unwrap().unwrap();
    assert_eq!(stored.values.get("items"), Some(&json!(["given", "x"])));
    assert_eq!(stored.values.get("mode"), Some(&json!("draft")));
    let history = reread.state_history(&second, None).await.unwrap();
    let input = history.last().unwrap();
    assert_eq!(input.values.get("items"), Some(&json!(["given"])));
}

#[tokio::test]
async fn add_messages_works_on_a_dynamic_key_without_a_wrapper() {
    let graph = GraphBuilder::<DynState>::new("chat")
        .add_channel("messages", dyn_reducers::add_messages())
        .sync_node("reply", |_: &DynState, _: &NodeContext| {
            DynUpdate::new().set(
                "messages",
                json!([
                    {"id": "u1", "role": "user", "content": "hi (edited)"},
                    {"id": "a1", "role": "assistant", "content": "hello"}
                ]),
            )
        })
        .edge(START, "reply")
        .edge("reply", END)
        .compile()
        .unwrap();
    let out = graph
        .invoke(DynUpdate::new().set(
            "messages",
            json!([{"id": "u1", "role": "user", "content": "hi"}]),
        ))
        .await
        .unwrap();
    let contents: Vec<&str> = out
        .state()
        .get("messages")
        .unwrap()
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["hi (edited)", "hello"],
        "upsert by id, then append"
    );
}

#[tokio::test]
async fn setting_a_schema_keeps_the_reducers_added_before() {
    let mut schema = DynSchema::default();
    schema.add_channel("b", dyn_reducers::append());
    let graph = GraphBuilder::<DynState>::new("both")
        .add_channel("a", dyn_reducers::append())
        .schema(schema)
        .sync_node("x", |_: &DynState, _: &NodeContext| {
            DynUpdate::new().set("a", json!([2])).set("b", json!([2]))
        })
        .sync_node("y", |_: &DynState, _: &NodeContext| {
            DynUpdate::new().set("a", json!([3])).set("b", json!([3]))
        })
        .edge(START, "x")
        .edge(START, "y")
        .edge("x", END)
        .edge("y", END)
        .compile()
        .unwrap();
    // Two writes to one key in a step are only allowed with a reducer: both keys kept theirs.
    let out = graph.invoke(DynUpdate::new()).await.unwrap();
    assert_eq!(out.state().get("a"), Some(&json!([2, 3])));
    assert_eq!(out.state().get("b"), Some(&json!([2, 3])));
}

#[tokio::test]
async fn a_node_asks_whether_a_send_started_it_through_an_option() {
    let graph = GraphBuilder::<DynState>::new("fan")
        .add_channel("log", dyn_reducers::append())
        .sync_node(
            "work",
            |_: &DynState, ctx: &NodeContext| -> Result<DynUpdate, NodeError> {
                let entry = match ctx.send_input::<String>() {
                    None => "direct".to_string(),
                    Some(input) => format!("sent {}", input?),
                };
                Ok(DynUpdate::new().set("log", json!([entry])))
            },
        )
        .sync_node("start", |_: &DynState, _: &NodeContext| DynUpdate::new())
        .edge(START, "start")
        .edge(START, "work")
        .route("start", ["work"], |_: &DynState| {
            Route::from(vec![Send::new("work", "a".to_string())])
        })
        .edge("work", END)
        .compile()
        .unwrap();
    let out = graph.invoke(DynUpdate::new()).await.unwrap();
    let mut log: Vec<String> =
        serde_json::from_value(out.state().get("log").unwrap().clone()).unwrap();
    log.sort();
    assert_eq!(log, ["direct", "sent a"]);
}
