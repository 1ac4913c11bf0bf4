//! Tests of the step driver: it gives what a checkpointed invoke and resume give, and says
//! what is wrong when it is misused.

use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::checkpoint::MemoryCheckpointer;
use crate::graph::{GraphBuilder, NodeError, Outcome, Route, Send};
use crate::{END, START};

#[derive(crate::State, Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
struct T {
    #[state(reducer = crate::reducers::append)]
    log: Vec<String>,
    #[state(reducer = crate::reducers::append)]
    items: Vec<i64>,
    total: i64,
}

/// plan —Send×3→ square → sum (two interrupts in one node) → [pause before] done.
fn graph() -> Graph<T> {
    GraphBuilder::<T>::new("map-reduce")
        .node("plan", |_s, _ctx| async {
            TUpdate::new().log(vec!["plan".into()])
        })
        .node("square", |_s, ctx| async move {
            let n: i64 = ctx.arg()?;
            Ok::<_, NodeError>(TUpdate::new().items(vec![n * n]).log(vec!["square".into()]))
        })
        .node("sum", |s, ctx| async move {
            let a = ctx.interrupt(json!({"ask": "first", "items": s.items}))?;
            let b = ctx.interrupt("second")?;
            Ok::<_, NodeError>(
                TUpdate::new()
                    .total(s.items.iter().sum::<i64>())
                    .log(vec![format!("sum {a} {b}")]),
            )
        })
        .node("done", |_s, _ctx| async {
            TUpdate::new().log(vec!["done".into()])
        })
        .edge(START, "plan")
        .route("plan", ["square"], |_s: &T| {
            Route::Sends((1..=3_i64).map(|n| Send::new("square", n)).collect())
        })
        .edge("square", "sum")
        .edge("sum", "done")
        .edge("done", END)
        .interrupt_before(["done"])
        .compile()
        .unwrap()
}

fn answers() -> Vec<Resume> {
    vec![
        Resume::Value(json!("a")),
        Resume::Value(json!("b")),
        Resume::Continue,
    ]
}

/// Drives `graph` to the end, running its tasks here and answering each pause in turn.
async fn drive(graph: &Graph<T>, mut answers: Vec<Resume>) -> (T, Vec<Vec<Interrupt>>) {
    let opts = RunOptions::new().thread_id("t");
    let mut driver = StepDriver::new(graph, TUpdate::new(), &opts).unwrap();
    let mut pauses = Vec::new();
    loop {
        match driver.advance().unwrap() {
            DriverNext::Done => return (driver.state().clone(), pauses),
            DriverNext::Paused(interrupts) => {
                assert!(driver.is_paused());
                assert_eq!(driver.pending_interrupts(), interrupts.as_slice());
                pauses.push(interrupts);
                driver.resume(answers.remove(0)).unwrap();
            }
            DriverNext::Run(tasks) => {
                let mut results = Vec::new();
                for task in tasks {
                    // Through JSON, as a remote engine would carry them.
                    let task: StepTask =
                        serde_json::from_value(serde_json::to_value(&task).unwrap()).unwrap();
                    let result = graph.run_task(driver.state().clone(), &task, &opts).await;
                    let result: TaskResult =
                        serde_json::from_value(serde_json::to_value(&result).unwrap()).unwrap();
                    results.push((task.id, result));
                }
                driver.complete(results).unwrap();
            }
        }
    }
}

#[tokio::test]
async fn the_driver_gives_what_invoke_and_resume_give() {
    let graph = graph();
    let (driven, pauses) = drive(&graph, answers()).await;

    let checkpointed = graph.with_checkpointer(Arc::new(MemoryCheckpointer::new()));
    let mut outcome = checkpointed
        .invoke(TUpdate::new())
        .thread_id("t")
        .await
        .unwrap();
    let mut invoked_pauses = Vec::new();
    for answer in answers() {
        invoked_pauses.push(outcome.interrupts().to_vec());
        outcome = checkpointed.resume(answer).thread_id("t").await.unwrap();
    }
    let Outcome::Done(invoked) = outcome else {
        panic!("the checkpointed run did not finish");
    };
    assert_eq!(driven, invoked);
    assert_eq!(pauses, invoked_pauses);
    assert_eq!(
        driven.log,
        [
            "plan",
            "square",
            "square",
            "square",
            "sum \"a\" \"b\"",
            "done"
        ]
    );
    assert_eq!(driven.items, [1, 4, 9]);
    assert_eq!(driven.total, 14);
    assert_eq!(
        pauses[0][0].value,
        json!({"ask": "first", "items": [1, 4, 9]})
    );
    assert_eq!(
        pauses[2][0].value,
        json!({"interrupt": "before", "node": "done"})
    );
}

#[tokio::test]
async fn misuse_and_failures_are_errors_that_say_what_to_do() {
    let graph = graph();
    let opts = RunOptions::new();
    let mut driver = StepDriver::new(&graph, TUpdate::new(), &opts).unwrap();
    let err = driver.resume(Resume::Continue).unwrap_err();
    assert!(err.to_string().contains("not paused"), "{err}");
    let err = driver.complete(Vec::new()).unwrap_err();
    assert!(
        err.to_string().contains("call StepDriver::advance first"),
        "{err}"
    );
    let DriverNext::Run(tasks) = driver.advance().unwrap() else {
        panic!("plan is due");
    };
    assert_eq!(tasks[0].id, "0:plan");
    let err = driver.advance().unwrap_err();
    assert!(err.to_string().contains("complete it"), "{err}");
    // A result for a task that is not the one due, and a failed task.
    let failed = vec![(
        "0:plan".to_string(),
        TaskResult::Failed {
            error: "the disk is full".into(),
        },
    )];
    let err = driver.complete(failed).unwrap_err();
    assert_eq!(
        err.to_string(),
        "node `plan` failed in step 0: the disk is full"
    );

    let mut driver = StepDriver::new(&graph, TUpdate::new(), &opts).unwrap();
    let _ = driver.advance().unwrap();
    let err = driver.complete(Vec::new()).unwrap_err();
    assert!(
        err.to_string()
            .contains("no result was given for task `0:plan`"),
        "{err}"
    );

    // A task for a node the graph lacks fails as a result, not a panic.
    let task: StepTask =
        serde_json::from_value(json!({"id": "0:nope", "node": "nope", "step": 0})).unwrap();
    let result = graph.run_task(T::default(), &task, &opts).await;
    let TaskResult::Failed { error } = result else {
        panic!("expected a failure, got {result:?}");
    };
    assert!(
        error.contains("has no node `nope` (it has: done, plan, square, sum)"),
        "{error}"
    );

    // One value for several pending interrupts is refused and the run stays paused.
    let two = GraphBuilder::<T>::new("two")
        .node("a", |_s, ctx| async move {
            ctx.interrupt("a?")?;
            Ok::<_, NodeError>(TUpdate::new())
        })
        .node("b", |_s, ctx| async move {
            ctx.interrupt("b?")?;
            Ok::<_, NodeError>(TUpdate::new())
        })
        .edge(START, "a")
        .edge(START, "b")
        .edge("a", END)
        .edge("b", END)
        .compile()
        .unwrap();
    let mut driver = StepDriver::new(&two, TUpdate::new(), &opts).unwrap();
    let DriverNext::Run(tasks) = driver.advance().unwrap() else {
        panic!("a and b are due");
    };
    let mut results = Vec::new();
    for task in tasks {
        let result = two.run_task(T::default(), &task, &opts).await;
        results.push((task.id, result));
    }
    driver.complete(results).unwrap();
    let err = driver.resume(Resume::Value(Value::Bool(true))).unwrap_err();
    assert!(err.to_string().contains("Resume::ByIds"), "{err}");
    assert!(driver.is_paused());
    assert_eq!(driver.pending_interrupts().len(), 2);
}

#[tokio::test]
async fn a_failed_step_stays_failed_and_never_reports_done() {
    let failing = GraphBuilder::<T>::new("fails")
        .node("broken", |_s, _ctx| async {
            Err::<TUpdate, _>(NodeError::msg("the mail server said no"))
        })
        .edge(START, "broken")
        .edge("broken", END)
        .compile()
        .unwrap();
    let opts = RunOptions::new();
    let mut driver = StepDriver::new(&failing, TUpdate::new(), &opts).unwrap();
    let DriverNext::Run(tasks) = driver.advance().unwrap() else {
        panic!("broken is due");
    };
    let task = &tasks[0];
    let result = failing.run_task(T::default(), task, &opts).await;
    let err = driver.complete([(task.id.clone(), result)]).unwrap_err();
    let first = err.to_string();
    assert!(
        first.contains("node `broken` failed in step 0: the mail server said no"),
        "{first}"
    );
    // Not `Done` with the state before the failed step: the same error again, every time.
    for _ in 0..2 {
        let again = driver.advance().unwrap_err();
        assert!(matches!(again, GraphError::NodeFailed { .. }), "{again}");
        assert_eq!(again.to_string(), first);
    }
    assert_eq!(driver.complete(Vec::new()).unwrap_err().to_string(), first);
    assert_eq!(
        driver.resume(Resume::Continue).unwrap_err().to_string(),
        first
    );
}
