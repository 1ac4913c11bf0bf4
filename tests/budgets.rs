//! Budgets that hold: a run stopped by each limit kind (input tokens, output tokens, dollars,
//! wall time, model calls), checkpointed, and continued with a raised budget; the remaining
//! budget streamed as events; subagents held to their own budget, and their large results
//! written to the filesystem with a pointer for the parent.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::agent::{Agent, AgentState};
use kit::checkpoint::Checkpointer;
use kit::graph::Resume;
use kit::middleware::budget::{
    BUDGET_KEY, Budget, BudgetExceeded, BudgetLimit, BudgetMiddleware, OnExhausted,
};
use kit::middleware::subagents::SubagentSpec;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{EventKind, MemoryCheckpointer, Message, Role, RunOptions, ToolCall, Usage};
use kit_testing::mock::MockResponse;
use kit_testing::mock::anthropic::MockAnthropic;
use serde_json::{Value, json};

/// Answers that call `work` `calls` times, then say "finished"; every answer reports `usage`
/// and costs `cost` dollars.
fn script(
    calls: usize,
    usage: Usage,
    cost: f64,
) -> impl Fn(&kit::model::ModelRequest) -> Result<Message, kit::model::ModelError> + Send + Sync + 'static
{
    let n = Arc::new(AtomicUsize::new(0));
    move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        let mut m = if i < calls {
            Message::assistant_with_tool_calls(
                "",
                vec![ToolCall::with_id(format!("w{i}"), "work", json!({}))],
            )
        } else {
            Message::assistant("finished")
        };
        m.usage = Some(usage);
        m.metadata.insert("cost_usd".into(), json!(cost));
        Ok(m)
    }
}

/// A model answering with [`script`].
fn worker(calls: usize, usage: Usage, cost: f64) -> ScriptedModel {
    ScriptedModel::from_fn(script(calls, usage, cost))
}

fn work_tool() -> Tool {
    Tool::from_fn(
        "work",
        "Does a step of work.",
        json!({"type": "object"}),
        |_args: Value, _ctx| async { Ok::<_, ToolError>("step done") },
    )
}

fn usage(input: u64, output: u64) -> Usage {
    Usage {
        input_tokens: input,
        output_tokens: output,
        ..Usage::default()
    }
}

fn agent(
    model: &ScriptedModel,
    checkpointer: &Arc<MemoryCheckpointer>,
    budget: BudgetMiddleware,
) -> Agent {
    let checkpointer: Arc<dyn Checkpointer> = checkpointer.clone();
    Agent::builder()
        .model(model.clone())
        .tool(work_tool())
        .checkpointer(checkpointer)
        .middleware(budget)
        .build()
        .unwrap()
}

fn work_results(state: &AgentState) -> usize {
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool && m.text() == "step done")
        .count()
}

/// Stops a run with `tight` (final answer), checks the limit, then continues the thread with
/// `raised` and a new message: the count goes on from what was spent.
async fn stopped_then_continued(tight: Budget, raised: Budget, limit: &str, model: ScriptedModel) {
    let cp = Arc::new(MemoryCheckpointer::new());
    let stopped = agent(&model, &cp, BudgetMiddleware::new(tight))
        .invoke("Do the work")
        .thread_id("t")
        .await
        .unwrap();
    let text = stopped.state().final_text();
    assert!(
        text.starts_with(&format!("Budget exhausted: {limit} (")),
        "{limit}: {text}"
    );
    let done_before = work_results(stopped.state());
    let calls_before = model.calls();
    let resumed = agent(&model, &cp, BudgetMiddleware::new(raised))
        .invoke("Go on")
        .thread_id("t")
        .await
        .unwrap();
    assert_eq!(resumed.state().final_text(), "finished", "{limit}");
    assert!(
        model.calls() > calls_before,
        "{limit}: the model was called again"
    );
    assert_eq!(
        work_results(resumed.state()),
        4,
        "{limit}: all the work, done once"
    );
    assert!(done_before < 4, "{limit}");
    // A finished run starts the next count afresh.
    let spent = &resumed.state().custom.get(BUDGET_KEY).unwrap();
    assert_eq!(spent["finished"], true);
}

#[tokio::test]
async fn each_limit_kind_stops_the_run_and_a_raised_budget_continues_it() {
    // Model calls: 5 are needed (4 steps and the answer).
    stopped_then_continued(
        Budget::new().max_model_calls(2),
        Budget::new().max_model_calls(10),
        "model_calls",
        worker(4, usage(10, 1), 0.0),
    )
    .await;
    // Input tokens: 1,000 per call.
    stopped_then_continued(
        Budget::new().max_input_tokens(2_500),
        Budget::new().max_input_tokens(100_000),
        "input_tokens",
        worker(4, usage(1_000, 1), 0.0),
    )
    .await;
    // Output tokens: 300 per call.
    stopped_then_continued(
        Budget::new().max_output_tokens(700),
        Budget::new().max_output_tokens(10_000),
        "output_tokens",
        worker(4, usage(10, 300), 0.0),
    )
    .await;
    // Dollars: one cent per call.
    stopped_then_continued(
        Budget::new().max_cost_usd(0.025),
        Budget::new().max_cost_usd(1.0),
        "cost_usd",
        worker(4, usage(10, 1), 0.01),
    )
    .await;
    // Wall time: none left at all, then an hour.
    stopped_then_continued(
        Budget::new().max_wall_time(Duration::ZERO),
        Budget::new().max_wall_time(Duration::from_secs(3_600)),
        "wall_time",
        worker(4, usage(10, 1), 0.0),
    )
    .await;
}

/// A model that reports a negative cost (or one that is not a number) between real ones does
/// not get budget back: the dollars spent only grow, and the run stops when they pass the
/// limit.
#[tokio::test]
async fn a_negative_or_nan_cost_gives_no_budget_back() {
    for odd in [-1.0, f64::NAN] {
        let n = Arc::new(AtomicUsize::new(0));
        let model = ScriptedModel::from_fn(move |_| {
            let i = n.fetch_add(1, Ordering::SeqCst);
            let mut m = if i < 4 {
                Message::assistant_with_tool_calls(
                    "",
                    vec![ToolCall::with_id(format!("w{i}"), "work", json!({}))],
                )
            } else {
                Message::assistant("finished")
            };
            m.usage = Some(usage(10, 1));
            let cost = if i == 1 { odd } else { 0.02 };
            m.metadata.insert("cost_usd".into(), json!(cost));
            Ok(m)
        });
        let cp = Arc::new(MemoryCheckpointer::new());
        let out = agent(
            &model,
            &cp,
            BudgetMiddleware::new(Budget::new().max_cost_usd(0.05)),
        )
        .invoke("Do the work")
        .await
        .unwrap();
        let text = out.state().final_text();
        assert!(
            text.starts_with("Budget exhausted: cost_usd ("),
            "{odd}: {text}"
        );
        // 0.02 + (ignored) + 0.02 + 0.02 passes 0.05 after the fourth call: no fifth.
        assert_eq!(model.calls(), 4, "{odd}");
    }
}

/// A budget record changed outside the budget (through `update_state`) so that it no longer
/// reads: the next model call fails with an error naming the record, instead of counting from
/// zero again; an empty record (or none) starts the count afresh.
#[tokio::test]
async fn an_unreadable_budget_record_fails_closed() {
    let model = ScriptedModel::new([Message::assistant("first"), Message::assistant("third")]);
    let cp = Arc::new(MemoryCheckpointer::new());
    let agent = agent(
        &model,
        &cp,
        BudgetMiddleware::new(Budget::new().max_model_calls(10)),
    );
    let opts = RunOptions::new().thread_id("tampered");
    agent.invoke("one").options(&opts).await.unwrap();
    let set = |value: Value| {
        kit::agent::AgentStateUpdate::new()
            .custom(kit::state::DynUpdate::new().overwrite(BUDGET_KEY, value))
    };
    agent
        .graph()
        .update_state(&opts, set(json!({"model_calls": "many"})), None)
        .await
        .unwrap();
    let err = agent.invoke("two").options(&opts).await.unwrap_err();
    assert!(err.to_string().contains("does not read"), "{err}");
    // A misspelt field does not read as nothing spent either.
    agent
        .graph()
        .update_state(&opts, set(json!({"model_call": 9})), None)
        .await
        .unwrap();
    let err = agent.invoke("two").options(&opts).await.unwrap_err();
    assert!(err.to_string().contains("does not read"), "{err}");
    assert_eq!(
        model.calls(),
        1,
        "no call was made on a budget that does not read"
    );
    // An empty record, like a removed one, starts the count afresh.
    agent
        .graph()
        .update_state(&opts, set(json!({})), None)
        .await
        .unwrap();
    let out = agent.invoke("three").options(&opts).await.unwrap();
    assert_eq!(out.state().final_text(), "third");
}

#[tokio::test]
async fn a_typed_error_then_resume_reruns_the_stopped_call_with_the_raised_budget() {
    let cp = Arc::new(MemoryCheckpointer::new());
    let model = worker(4, usage(10, 1), 0.0);
    let tight =
        BudgetMiddleware::new(Budget::new().max_model_calls(3)).on_exhausted(OnExhausted::Error);
    let err = agent(&model, &cp, tight)
        .invoke("Do the work")
        .thread_id("t")
        .await
        .unwrap_err();
    assert_eq!(err.kind(), "budget_exceeded");
    let e = err.downcast_middleware::<BudgetExceeded>().unwrap();
    assert_eq!(
        (e.limit, e.spent, e.allowed),
        (BudgetLimit::ModelCalls, 3.0, 3.0)
    );
    assert!(err.to_string().contains("raise the budget"), "{err}");
    assert_eq!(model.calls(), 3, "the fourth call was never made");

    let raised =
        BudgetMiddleware::new(Budget::new().max_model_calls(5)).on_exhausted(OnExhausted::Error);
    let out = agent(&model, &cp, raised)
        .resume(Resume::Continue)
        .thread_id("t")
        .await
        .unwrap();
    assert_eq!(out.state().final_text(), "finished");
    assert_eq!(model.calls(), 5);
    assert_eq!(work_results(out.state()), 4);
}

#[tokio::test]
async fn output_tokens_are_capped_to_what_is_left() {
    let caps: Arc<std::sync::Mutex<Vec<Option<u32>>>> = Arc::default();
    let seen = caps.clone();
    let inner = script(1, usage(10, 300), 0.0);
    let model = ScriptedModel::from_fn(move |request| {
        seen.lock().unwrap().push(request.options.max_tokens);
        inner(request)
    });
    let cp = Arc::new(MemoryCheckpointer::new());
    agent(
        &model,
        &cp,
        BudgetMiddleware::new(Budget::new().max_output_tokens(1_000)),
    )
    .invoke("Go")
    .await
    .unwrap();
    assert_eq!(*caps.lock().unwrap(), [Some(1_000), Some(700)]);
}

#[tokio::test]
async fn no_limit_reached_means_no_stop() {
    let model = worker(4, usage(1_000, 300), 0.01);
    let cp = Arc::new(MemoryCheckpointer::new());
    let out = agent(
        &model,
        &cp,
        BudgetMiddleware::new(
            Budget::new()
                .max_model_calls(5)
                .max_input_tokens(100_000)
                .max_output_tokens(10_000)
                .max_cost_usd(1.0)
                .max_wall_time(Duration::from_secs(3_600)),
        ),
    )
    .invoke("Go")
    .await
    .unwrap();
    assert_eq!(out.state().final_text(), "finished");
    assert_eq!(model.calls(), 5);
}

#[tokio::test]
async fn the_remaining_budget_is_streamed_after_every_call() {
    // Streamed answers are priced from their usage with `kit::model::pricing`.
    let per_call = usage(100_000, 10_000);
    let model = worker(2, per_call, 0.0).named("gpt-4o-mini");
    let price = kit::model::pricing::cost("gpt-4o-mini", &per_call).unwrap();
    let cp = Arc::new(MemoryCheckpointer::new());
    let agent = agent(
        &model,
        &cp,
        BudgetMiddleware::new(
            Budget::new()
                .max_model_calls(10)
                .max_input_tokens(1_000_000)
                .max_cost_usd(1.0),
        ),
    );
    let events: Vec<kit::Event> = agent
        .stream_events("Go", &RunOptions::new().thread_id("s"))
        .collect()
        .await;
    let remaining: Vec<Value> = events
        .iter()
        .filter(|e| e.kind() == EventKind::Middleware && e.name == "BudgetMiddleware.remaining")
        .map(|e| e.data.to_json())
        .collect();
    assert_eq!(remaining.len(), 3);
    assert_eq!(remaining[0]["model_calls"], 9);
    assert_eq!(remaining[2]["model_calls"], 7);
    assert_eq!(remaining[2]["input_tokens"], 700_000);
    let dollars = remaining[2]["cost_usd"].as_f64().unwrap();
    assert!((dollars - (1.0 - 3.0 * price)).abs() < 1e-9, "{dollars}");
    assert!(
        remaining[0].get("output_tokens").is_none(),
        "only the limits set"
    );
}

#[tokio::test]
async fn a_model_call_that_outlasts_the_wall_time_is_cut() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(MockResponse::hang());
    let agent = Agent::builder()
        .model(server.model("claude-haiku-4-5"))
        .middleware(
            BudgetMiddleware::new(Budget::new().max_wall_time(Duration::from_millis(300)))
                .on_exhausted(OnExhausted::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    let e = err.downcast_middleware::<BudgetExceeded>().unwrap();
    assert_eq!(e.limit, BudgetLimit::WallTime);
}

#[tokio::test]
async fn a_tool_that_outlasts_the_wall_time_is_stopped_and_the_run_ends() {
    let slow = Tool::from_fn(
        "work",
        "Never ends.",
        json!({"type": "object"}),
        |_args: Value, _ctx| async {
            std::future::pending::<()>().await;
            Ok::<_, ToolError>("never")
        },
    );
    let model = worker(4, usage(10, 1), 0.0);
    let out = Agent::builder()
        .model(model.clone())
        .tool(slow)
        .budget(Budget::new().max_wall_time(Duration::from_millis(300)))
        .build()
        .unwrap()
        .invoke("Go")
        .await
        .unwrap();
    let tool = out
        .state()
        .messages
        .iter()
        .find(|m| m.role == Role::Tool)
        .unwrap();
    assert!(tool.is_error());
    assert!(tool.text().contains("wall time"), "{}", tool.text());
    assert!(
        out.state()
            .final_text()
            .starts_with("Budget exhausted: wall_time")
    );
    assert_eq!(model.calls(), 1);
}

#[tokio::test]
async fn a_subagent_is_held_to_its_own_budget() {
    let child = worker(10, usage(10, 1), 0.0);
    let parent = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "job",
                "task",
                json!({"description": "Grind", "subagent_type": "grinder"}),
            )],
        ),
        Message::assistant("the child stopped"),
    ]);
    let out = Agent::builder()
        .model(parent.clone())
        .subagents([SubagentSpec::new("grinder", "Grinds.")
            .model(child.clone())
            .tools([work_tool()])])
        .general_purpose_subagent(false)
        .middleware(
            BudgetMiddleware::new(Budget::new().max_model_calls(10))
                .subagent_budget(Budget::new().max_model_calls(2)),
        )
        .build()
        .unwrap()
        .invoke("Delegate")
        .await
        .unwrap();
    assert_eq!(child.calls(), 2, "the child's budget, not the parent's");
    let report = out
        .state()
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("job"))
        .unwrap();
    assert!(
        report.text().starts_with("Budget exhausted: model_calls"),
        "{}",
        report.text()
    );
    assert_eq!(out.state().final_text(), "the child stopped");
}

#[tokio::test]
async fn a_large_subagent_result_goes_to_the_filesystem_with_a_pointer() {
    let long = "line of findings\n".repeat(200);
    let child = ScriptedModel::new([Message::assistant(long.clone())]);
    let short_child = ScriptedModel::new([Message::assistant("short")]);
    let parent = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "big",
                    "task",
                    json!({"description": "Research", "subagent_type": "researcher"}),
                ),
                ToolCall::with_id(
                    "small",
                    "task",
                    json!({"description": "Check", "subagent_type": "checker"}),
                ),
            ],
        ),
        Message::assistant("read it"),
    ]);
    let out = Agent::builder()
        .model(parent.clone())
        .subagents([
            SubagentSpec::new("researcher", "Researches.").model(child),
            SubagentSpec::new("checker", "Checks.").model(short_child),
        ])
        .general_purpose_subagent(false)
        .subagent_result_limit(1_000)
        .build()
        .unwrap()
        .invoke("Research")
        .await
        .unwrap();
    let result = |id: &str| {
        out.state()
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap()
            .text()
    };
    let pointer = result("big");
    assert!(pointer.contains("/large_tool_results/big"), "{pointer}");
    assert!(pointer.len() < long.len());
    assert_eq!(out.state().files["/large_tool_results/big"].content, long);
    assert_eq!(result("small"), "short", "a small result stays inline");
    // The parent's model got the pointer and can read the file.
    let second = &parent.requests()[1];
    assert!(second.tools.iter().any(|t| t.name == "read_file"));
}

#[tokio::test]
async fn a_subagent_spends_from_the_parents_budget() {
    // Whatever the call id (a `|` in it once changed the child's namespace, so the child
    // found no share and ran unlimited).
    for call_id in ["job", "c|", "a||b"] {
        spends_from_the_parents_budget(call_id).await;
    }
}

/// Two `task` calls of one answer run at once, held together to what the parent had left
/// (each once got all of it), each through its own share (a run that does not stream once
/// gave every task the same empty id, so the first child to end took the second's share away
/// and it ran on unlimited).
#[tokio::test]
async fn parallel_subagents_share_what_the_parent_had_left() {
    let child = worker(100, usage(10, 1), 0.01);
    let task = |id: &str| {
        ToolCall::with_id(
            id,
            "task",
            json!({"description": "Grind", "subagent_type": "grinder"}),
        )
    };
    let parent = ScriptedModel::new([
        Message::assistant_with_tool_calls("", vec![task("a"), task("b")]),
        Message::assistant("never"),
    ]);
    let out = Agent::builder()
        .model(parent.clone())
        .subagents([SubagentSpec::new("grinder", "Grinds.")
            .model(child.clone())
            // Each step waits a moment, so the two children take turns.
            .tools([Tool::from_fn(
                "work",
                "Does a step of work.",
                json!({"type": "object"}),
                |_args: Value, _ctx| async {
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                    Ok::<_, ToolError>("step done")
                },
            )])])
        .general_purpose_subagent(false)
        .budget(Budget::new().max_model_calls(4))
        .build()
        .unwrap()
        .invoke("Delegate twice")
        .await
        .unwrap();
    assert_eq!(
        child.calls(),
        3,
        "the children share the 3 calls the parent had left"
    );
    assert!(
        out.state().final_text().starts_with("Budget exhausted"),
        "{}",
        out.state().final_text()
    );
}

async fn spends_from_the_parents_budget(call_id: &str) {
    // The child would work forever; the parent's budget of 4 model calls holds: the parent's
    // first call leaves 3 to the child, and the parent then has none left for another call.
    let child = worker(100, usage(10, 1), 0.01);
    let parent = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                call_id,
                "task",
                json!({"description": "Grind", "subagent_type": "grinder"}),
            )],
        ),
        Message::assistant("never"),
    ]);
    let cp = Arc::new(MemoryCheckpointer::new());
    let checkpointer: Arc<dyn Checkpointer> = cp.clone();
    let out = Agent::builder()
        .model(parent.clone())
        .checkpointer(checkpointer)
        .subagents([SubagentSpec::new("grinder", "Grinds.")
            .model(child.clone())
            .tools([work_tool()])])
        .general_purpose_subagent(false)
        .budget(Budget::new().max_model_calls(4))
        .build()
        .unwrap()
        .invoke("Delegate")
        .thread_id("t")
        .await
        .unwrap();
    assert_eq!(
        child.calls(),
        3,
        "the child gets what the parent had left ({call_id})"
    );
    assert_eq!(parent.calls(), 1);
    assert!(
        out.state()
            .final_text()
            .starts_with("Budget exhausted: model_calls (4 of 4"),
        "{}",
        out.state().final_text()
    );
    let spent = out.state().custom.get(BUDGET_KEY).unwrap();
    assert_eq!(spent["model_calls"], 4);
    let dollars = spent["cost_usd"].as_f64().unwrap();
    assert!(
        (dollars - 0.03).abs() < 1e-9,
        "the child's three calls: {dollars}"
    );
}

#[kit::agent(
    model = worker(4, usage(10, 1), 0.0),
    tools = [work_tool()],
    budget = Budget::new().max_model_calls(2),
)]
struct Budgeted;

#[tokio::test]
async fn the_dsl_takes_a_budget() {
    let out = Budgeted::agent().unwrap().invoke("Go").await.unwrap();
    assert!(
        out.state()
            .final_text()
            .starts_with("Budget exhausted: model_calls (2 of 2"),
        "{}",
        out.state().final_text()
    );
}
