//! The DSL, whole: `#[tool]` on functions, `#[agent]` with every option, the generated
//! `invoke`, `resume`, `resume_review` and `stream_events`, typed structured output, and the
//! agent-level PII and review blocks gating and redacting. Only the chat model is scripted.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

use futures::StreamExt;
use kit::agent::{
    AgentError, AgentState, DeclaredAgent, Middleware, StructuredOutputError, TypedOutcome,
};
use kit::middleware::review::{Decision, DecisionType, ReviewRequest, resume_review};
use kit::protocol::{Endpoint, RunClient, RunClientError};
use kit::schemars::JsonSchema;
use kit::serde::Deserialize;
use kit::testing::ScriptedModel;
use kit::tool::{ToolContext, ToolError};
use kit::{EventKind, MemoryCheckpointer, Message, Outcome, RunOptions, ToolCall, ToolStatus};
use kit_testing::mock::openai::{self as oa, MockOpenAi};
use serde_json::{Value, json};

// ---------------------------------------------------------------------------------------------
// #[tool] on functions

/// Looks up an order by its id.
///
/// # Arguments
/// * `order_id` - The order's id, like `A-1`.
#[kit::tool(max_result_chars = 400)]
async fn lookup_order(
    order_id: String,
    /// Include the order's line items.
    #[arg(default)]
    include_items: bool,
    /// Days of history to include.
    #[arg(default = 30)]
    days: u32,
    /// A note for the log.
    note: Option<String>,
    ctx: ToolContext,
    state: &AgentState,
) -> Result<Value, ToolError> {
    if order_id == "missing" {
        return Err(ToolError::new(format!("no order `{order_id}`")));
    }
    Ok(json!({
        "order_id": order_id,
        "include_items": include_items,
        "days": days,
        "note": note,
        "call_id": ctx.call_id(),
        "messages_seen": state.messages.len(),
    }))
}

/// An error of the tool's own: any `std::error::Error` converts into a tool error.
#[derive(Debug)]
struct Closed;

impl std::fmt::Display for Closed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the warehouse is closed")
    }
}

impl std::error::Error for Closed {}

/// Checks stock.
#[kit::tool(name = "check-stock")]
async fn check_stock(sku: String, shared: Arc<AgentState>) -> Result<String, Closed> {
    let _ = shared;
    if sku == "closed" {
        return Err(Closed);
    }
    Ok(format!("{sku}: 3 left"))
}

/// Always fails, whatever it is asked (its parameter is unused, hence `_`).
#[kit::tool]
async fn refuse(
    /// What was asked.
    _request: String,
) -> Result<String, ToolError> {
    Err(ToolError::new("not today"))
}

#[test]
fn a_tool_function_is_a_tool_with_its_doc_and_a_schema_of_its_parameters() {
    let tool = LookupOrder::tool();
    assert_eq!(LookupOrder::NAME, "lookup_order");
    assert_eq!(tool.name(), "lookup_order");
    assert_eq!(tool.description(), "Looks up an order by its id.");
    assert_eq!(tool.max_result_chars(), Some(400));
    // The schema snapshot: injected parameters are absent; `Option` and defaults are not
    // required; descriptions come from `# Arguments` and from each parameter's doc comment.
    assert_eq!(
        tool.parameters(),
        &json!({
            "type": "object",
            "properties": {
                "order_id": {"type": "string", "description": "The order's id, like `A-1`."},
                "include_items": {
                    "type": "boolean",
                    "description": "Include the order's line items.",
                    "default": false
                },
                "days": {
                    "type": "integer",
                    "format": "uint32",
                    "minimum": 0,
                    "description": "Days of history to include.",
                    "default": 30
                },
                "note": {"type": ["string", "null"], "description": "A note for the log."}
            },
            "required": ["order_id"]
        })
    );
    // An unused parameter's `_` is not part of the property's name.
    assert_eq!(
        Refuse::tool().parameters()["properties"],
        json!({"request": {"type": "string", "description": "What was asked."}})
    );
    assert_eq!(CheckStock::NAME, "check-stock");
    assert_eq!(
        CheckStock::tool().parameters()["required"],
        json!(["sku"]),
        "the injected state is not a property"
    );
}

#[tokio::test]
async fn a_tool_function_gets_defaults_and_injected_context_and_its_errors_reach_the_model() {
    let tool = LookupOrder::tool();
    let run = |args: Value, id: &str| {
        let tool = tool.clone();
        let call = ToolCall::with_id(id, "lookup_order", args);
        async move { tool.execute(&call, ToolContext::detached()).await }
    };
    let ok = run(json!({"order_id": "A-1"}), "c1").await.ok().unwrap();
    let out: Value = serde_json::from_str(&ok.message.text()).unwrap();
    assert_eq!(
        out,
        json!({"order_id": "A-1", "include_items": false, "days": 30, "note": null,
               "call_id": "call_detached", "messages_seen": 0})
    );
    let given = run(
        json!({"order_id": "A-2", "include_items": true, "days": 7, "note": "vip"}),
        "c2",
    )
    .await
    .ok()
    .unwrap();
    let out: Value = serde_json::from_str(&given.message.text()).unwrap();
    assert_eq!(out["days"], 7);
    assert_eq!(out["note"], "vip");
    assert_eq!(out["include_items"], true);

    // A returned error is an error result the model sees, not a failed run.
    let failed = run(json!({"order_id": "missing"}), "c3")
        .await
        .ok()
        .unwrap();
    assert_eq!(failed.message.status, Some(ToolStatus::Error));
    assert_eq!(failed.message.text(), "Error: no order `missing`");
    // Wrong arguments are reported before the function runs.
    let invalid = run(json!({"days": 3}), "c4").await.ok().unwrap();
    assert_eq!(invalid.message.status, Some(ToolStatus::Error));
    assert!(
        invalid.message.text().contains("order_id"),
        "{}",
        invalid.message.text()
    );

    let closed = CheckStock::tool()
        .execute(
            &ToolCall::with_id("c5", "check-stock", json!({"sku": "closed"})),
            ToolContext::detached(),
        )
        .await
        .ok()
        .unwrap();
    assert_eq!(closed.message.text(), "Error: the warehouse is closed");
    // The function stays callable as written.
    assert_eq!(
        check_stock("x".into(), Arc::new(AgentState::default()))
            .await
            .unwrap(),
        "x: 3 left"
    );
}

// ---------------------------------------------------------------------------------------------
// #[agent] with every option

/// Sends an email.
#[kit::tool]
async fn send_email(to: String, body: String) -> Result<String, ToolError> {
    SENT.lock().unwrap().push(format!("{to}: {body}"));
    Ok(format!("sent to {to}"))
}

/// Refunds an order.
#[kit::tool]
async fn refund(order_id: String, amount_eur: f64) -> Result<String, ToolError> {
    REFUNDS.fetch_add(1, Ordering::SeqCst);
    Ok(format!("refunded {amount_eur:.2} EUR on {order_id}"))
}

static SENT: LazyLock<Mutex<Vec<String>>> = LazyLock::new(Default::default);
static REFUNDS: AtomicUsize = AtomicUsize::new(0);

/// The shop's rules, added to the system prompt by a middleware of the user's own.
struct ShopRules;

#[kit::async_trait]
impl Middleware for ShopRules {
    fn name(&self) -> &str {
        "ShopRules"
    }
    fn system_prompt(&self) -> Option<String> {
        Some("Never refund more than 100 EUR.".into())
    }
}

/// A run client of the user's own for an async subagent (`client = ..`): records each start.
#[derive(Clone, Default)]
struct RecordingClient(Arc<Mutex<Vec<(String, Value)>>>);

#[kit::async_trait]
impl RunClient for RecordingClient {
    async fn start(&self, endpoint: &Endpoint, payload: Value) -> Result<Value, RunClientError> {
        self.0
            .lock()
            .unwrap()
            .push((endpoint.graph_id.clone(), payload));
        Ok(json!({"thread_id": "remote-1", "run_id": "run-1", "status": "running"}))
    }
    async fn check(&self, _: &Endpoint, _: &str) -> Result<Value, RunClientError> {
        Ok(json!({"status": "running"}))
    }
    async fn update(&self, _: &Endpoint, _: &str, _: &str) -> Result<Value, RunClientError> {
        Ok(json!({"status": "running"}))
    }
    async fn cancel(&self, _: &Endpoint, _: &str) -> Result<Value, RunClientError> {
        Ok(json!({"status": "cancelled"}))
    }
}

static CLIENT: LazyLock<RecordingClient> = LazyLock::new(RecordingClient::default);
static SHOP_CONFIG: OnceLock<kit::Config> = OnceLock::new();

fn shop_config() -> kit::Config {
    SHOP_CONFIG.get().cloned().unwrap_or_default()
}

/// The answer a shop run ends with.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(crate = "kit::serde")]
#[schemars(crate = "kit::schemars")]
struct Receipt {
    order_id: String,
    refunded_eur: f64,
}

#[kit::agent(
    name = "shop",
    model = "openai:gpt-4o-mini",
    config = shop_config(),
    model_opts(temperature = 0.25, max_tokens = 300, timeout_ms = 20_000, retries = 0),
    system_prompt = "You run the shop.",
    tools = [LookupOrder, CheckStock, Refund],
    middleware = [ShopRules],
    todos,
    filesystem,
    subagents = [kit::middleware::subagents::SubagentSpec::new("clerk", "Files paperwork.")],
    subagents<
        researcher(
            description = "Finds facts about orders.",
            system_prompt = "You research orders.",
            tools = [LookupOrder],
            model = ScriptedModel::new([Message::assistant("Order A-1 shipped.")]),
        ),
    >,
    general_purpose_subagent = false,
    async_subagents<
        auditor(description = "Audits refunds.", graph_id = "audit", client = CLIENT.clone()),
        analyst(description = "Analyses trends.", graph_id = "trends",
                url = "http://127.0.0.1:9", headers = {"Authorization": "Bearer t"}),
    >,
    interrupt_on< send_email = true, refund = false >,
    pii< email(redact), url(mask, apply_to_output = false) >,
    response_format = Receipt,
    compact_conversation = true,
    overflow_recovery = true,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
    recursion_limit = 60,
    crate = kit,
)]
struct Shop;

#[tokio::test]
async fn an_agent_declares_every_option_and_each_takes_effect() {
    let server = MockOpenAi::start().await.unwrap();
    SHOP_CONFIG.set(server.config()).unwrap();
    server.enqueue_all([
        oa::json(oa::tool_calls_completion(&[
            (
                "c1",
                "start_async_task",
                json!({"subagent_type": "auditor", "description": "Audit A-1"}),
            ),
            (
                "c2",
                "refund",
                json!({"order_id": "A-1", "amount_eur": 30.0}),
            ),
        ])),
        oa::json(oa::completion(
            r#"{"order_id": "A-1", "refunded_eur": 30.0}"#,
        )),
    ]);

    let agent = Shop::agent().unwrap();
    assert_eq!(Shop::NAME, "shop");
    assert_eq!(<Shop as DeclaredAgent>::NAME, "shop");
    let mut tools = agent.tool_names();
    tools.sort_unstable();
    for tool in [
        "lookup_order",
        "check-stock",
        "refund",
        "send_email",
        "write_todos",
        "ls",
        "read_file",
        "write_file",
        "edit_file",
        "glob",
        "grep",
        "task",
        "start_async_task",
        "check_async_task",
        "update_async_task",
        "cancel_async_task",
        "list_async_tasks",
    ] {
        if tool != "send_email" {
            assert!(tools.contains(&tool), "{tool} missing from {tools:?}");
        }
    }

    let out = Shop::invoke("Refund order A-1, please. Mail me at ann@example.com")
        .thread_id("every-option")
        .await
        .unwrap();
    let TypedOutcome::Done { output, state } = out else {
        panic!("expected the run to finish");
    };
    assert_eq!(
        output,
        Receipt {
            order_id: "A-1".into(),
            refunded_eur: 30.0
        }
    );
    assert_eq!(
        REFUNDS.load(Ordering::SeqCst),
        1,
        "refund = false: runs without review"
    );
    assert_eq!(state.async_tasks.len(), 1);

    // The async subagent used the declared client.
    let started = CLIENT.0.lock().unwrap().clone();
    assert_eq!(started.len(), 1);
    assert_eq!(started[0].0, "audit");

    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let body = &requests[0].body;
    assert_eq!(body["temperature"], json!(0.25));
    assert!(
        body["max_tokens"] == json!(300) || body["max_completion_tokens"] == json!(300),
        "{body}"
    );
    let system = body["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(system.starts_with("You run the shop."), "{system}");
    assert!(
        system.contains("Never refund more than 100 EUR."),
        "{system}"
    );
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "Receipt");
    let user = body["messages"][1]["content"].as_str().unwrap_or_default();
    assert!(
        user.contains("[REDACTED_EMAIL]") && !user.contains("ann@example.com"),
        "{user}"
    );
    let sent_tools: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        sent_tools.contains(&"task") && sent_tools.contains(&"write_todos"),
        "{sent_tools:?}"
    );
    // The general-purpose subagent is off: only the declared ones are offered.
    let task = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "task")
        .unwrap();
    let task_text = task.to_string();
    assert!(
        task_text.contains("researcher") && task_text.contains("clerk"),
        "{task_text}"
    );
    assert!(!task_text.contains("general-purpose"), "{task_text}");
}

// ---------------------------------------------------------------------------------------------
// Human review through the generated invoke, resume_review and resume

static REVIEWED_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "e1",
                "send_email",
                json!({"to": "ann@example.com", "body": "Refunded."}),
            )],
        ),
        Message::assistant("Email sent."),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "e2",
                "send_email",
                json!({"to": "bob@example.com", "body": "Hi"}),
            )],
        ),
        Message::assistant("I did not send it."),
    ])
});

/// Mails customers, with a person approving every email.
#[kit::agent(
    model = REVIEWED_MODEL.clone(),
    tools = [SendEmail, LookupOrder],
    interrupt_on< send_email(allowed = [approve, reject], description = "Check the recipient") >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Mailer;

#[tokio::test]
async fn a_review_gate_pauses_the_generated_invoke_and_resume_review_answers_it() {
    let paused = Mailer::invoke("Tell Ann her refund went through.")
        .thread_id("review-1")
        .await
        .unwrap();
    let Outcome::Interrupted(paused) = paused else {
        panic!("expected a review");
    };
    let request = ReviewRequest::from_interrupt(&paused.interrupts[0]).unwrap();
    assert_eq!(request.action_requests[0].name, "send_email");
    assert!(
        request.action_requests[0]
            .description
            .starts_with("Check the recipient")
    );
    assert_eq!(
        request.review_configs[0].allowed_decisions,
        vec![DecisionType::Approve, DecisionType::Reject]
    );
    assert!(
        SENT.lock().unwrap().iter().all(|s| !s.starts_with("ann@")),
        "not sent before approval"
    );

    // A decision the declaration does not allow is asked again, and the thread stays resumable.
    let again = Mailer::resume_review([Decision::respond("no")])
        .thread_id("review-1")
        .await
        .unwrap();
    let Outcome::Interrupted(again) = again else {
        panic!("expected the review to be asked again");
    };
    let error = ReviewRequest::from_interrupt(&again.interrupts[0])
        .unwrap()
        .error
        .unwrap();
    assert!(error.contains("respond"), "{error}");

    let done = Mailer::resume_review([Decision::approve()])
        .thread_id("review-1")
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "Email sent.");
    assert!(
        SENT.lock()
            .unwrap()
            .contains(&"ann@example.com: Refunded.".to_string())
    );

    // The plain `resume` takes any resume payload: here a rejection, so nothing is sent.
    let paused = Mailer::invoke("Say hi to Bob.")
        .thread_id("review-2")
        .await
        .unwrap();
    assert!(paused.is_interrupted());
    let done = Mailer::resume(resume_review([Decision::reject_with("not now")]))
        .thread_id("review-2")
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "I did not send it.");
    assert!(SENT.lock().unwrap().iter().all(|s| !s.starts_with("bob@")));
    let rejected = done
        .state()
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("e2"))
        .unwrap();
    assert!(rejected.text().contains("not now"), "{}", rejected.text());
}

// ---------------------------------------------------------------------------------------------
// PII and review blocks guarding one agent

static GUARDED_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "r1",
                "refund",
                json!({"order_id": "A-7", "amount_eur": 12.5}),
            )],
        ),
        Message::assistant("Refund declined by the reviewer."),
    ])
});

/// Handles refunds; never sees emails or full card numbers.
#[kit::agent(
    model = GUARDED_MODEL.clone(),
    tools = [Refund],
    pii< email(redact), credit_card(mask) >,
    interrupt_on< refund = [approve, reject] >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Guarded;

#[tokio::test]
async fn the_pii_and_review_blocks_redact_what_the_model_sees_and_gate_the_tool() {
    let out = Guarded::invoke("Refund A-7 for carol@example.com, card 4111 1111 1111 1111.")
        .thread_id("guarded")
        .await
        .unwrap();
    let Outcome::Interrupted(paused) = out else {
        panic!("expected the refund to wait for review");
    };
    let seen = GUARDED_MODEL.requests()[0].messages[0].text();
    assert!(seen.contains("[REDACTED_EMAIL]"), "{seen}");
    assert!(!seen.contains("carol@example.com"), "{seen}");
    assert!(
        seen.contains("1111") && !seen.contains("4111 1111 1111 1111"),
        "{seen}"
    );
    let stored = paused.state.messages[0].text();
    assert!(
        !stored.contains("carol@example.com"),
        "the thread stores the redacted input: {stored}"
    );

    let done = Guarded::resume_review([Decision::reject()])
        .thread_id("guarded")
        .await
        .unwrap();
    assert_eq!(
        done.state().final_text(),
        "Refund declined by the reviewer."
    );
    // A rejected refund never runs: its result is the rejection, not the tool's answer (the
    // REFUNDS counter is shared with a test running alongside, so it cannot tell).
    let result = done
        .state()
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("r1"))
        .unwrap();
    assert!(result.text().contains("rejected"), "{}", result.text());
    assert!(!result.text().contains("refunded"), "{}", result.text());
}

// ---------------------------------------------------------------------------------------------
// stream_events, subagents that are agents, build errors

/// Finds facts.
#[kit::agent(
    model = ScriptedModel::new([Message::assistant("Churn is 4% this quarter.")]),
    system_prompt = "You research.",
)]
struct Researcher;

static LEAD_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "t1",
                "task",
                json!({"subagent_type": "researcher", "description": "What is churn?"}),
            )],
        ),
        Message::assistant("Churn is 4%."),
    ])
});

/// Delegates research.
#[kit::agent(
    model = LEAD_MODEL.clone(),
    subagents< researcher(description = "Finds facts.", agent = Researcher) >,
)]
struct Lead;

#[tokio::test]
async fn stream_events_streams_a_declared_agent_that_delegates_to_a_declared_subagent() {
    let events: Vec<_> = Lead::stream_events("How bad is churn?", &RunOptions::new())
        .collect()
        .await;
    let kinds: Vec<EventKind> = events.iter().map(|e| e.kind()).collect();
    assert_eq!(kinds.first(), Some(&EventKind::RunStart));
    assert_eq!(kinds.last(), Some(&EventKind::RunEnd));
    assert!(kinds.contains(&EventKind::ModelDelta));
    let tool_end = events
        .iter()
        .find(|e| e.kind() == EventKind::ToolEnd && e.name == "task")
        .expect("the task tool ran");
    assert!(
        tool_end
            .to_json()
            .to_string()
            .contains("Churn is 4% this quarter.")
    );
    // The subagent's own model call streams too, inside the parent's run.
    assert!(events.iter().any(|e| {
        e.to_json()
            .to_string()
            .contains("Churn is 4% this quarter.")
            && e.kind() == EventKind::ModelEnd
    }));
}

/// Its provider does not exist.
#[kit::agent(model = "nosuch:model")]
struct Broken;

#[tokio::test]
async fn a_declaration_that_cannot_build_is_an_error_from_invoke_and_an_error_event_from_stream() {
    let err = Broken::invoke("hi").await.unwrap_err();
    assert!(err.to_string().contains("nosuch"), "{err}");
    assert!(Broken::build().is_err());
    let events: Vec<_> = Broken::stream_events("hi", &RunOptions::new())
        .collect()
        .await;
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].kind(), EventKind::Error);
}

// ---------------------------------------------------------------------------------------------
// Typed structured output

/// A rating of a quarter.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
#[serde(crate = "kit::serde")]
#[schemars(crate = "kit::schemars")]
struct Rating {
    /// The quarter, like `Q3`.
    quarter: String,
    /// From 0 to 10.
    score: u8,
}

static RATER_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant("Q3 was a solid 7 out of 10."),
        Message::assistant(r#"{"quarter": "Q3", "score": 7}"#),
    ])
});

/// Rates quarters.
#[kit::agent(model = RATER_MODEL.clone(), response_format = Rating)]
struct Rater;

#[tokio::test]
async fn a_response_format_gives_the_typed_answer_after_feeding_an_invalid_one_back() {
    let out = Rater::invoke("Rate Q3.").await.unwrap();
    let TypedOutcome::Done { output, .. } = out else {
        panic!("expected an answer");
    };
    assert_eq!(
        output,
        Rating {
            quarter: "Q3".into(),
            score: 7
        }
    );
    // The invalid answer went back to the model, saying what was wrong.
    let second = &RATER_MODEL.requests()[1];
    let feedback = second.messages.last().unwrap().text();
    assert!(feedback.to_lowercase().contains("json"), "{feedback}");
    assert_eq!(second.response_format.as_ref().unwrap().name, "Rating");
}

static STUBBORN_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id("s1", "Rating", json!({"quarter": "Q3"}))],
        ),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "s2",
                "Rating",
                json!({"quarter": "Q3", "score": "high"}),
            )],
        ),
    ])
});

/// Never answers in the format.
#[kit::agent(
    model = STUBBORN_MODEL.clone(),
    response_format(Rating, strategy = tool, max_retries = 1),
)]
struct Stubborn;

#[tokio::test]
async fn a_model_that_never_answers_in_the_format_ends_in_a_typed_error() {
    let err = Stubborn::invoke("Rate Q3.").await.unwrap_err();
    let AgentError::StructuredOutput(StructuredOutputError {
        errors,
        attempts,
        answer,
        ..
    }) = &err
    else {
        panic!("expected a structured-output error, got {err}");
    };
    assert_eq!(*attempts, 2, "one answer plus one retry");
    assert!(errors.join(" ").contains("score"), "{errors:?}");
    assert!(answer.contains("high"), "{answer}");
    // The tool strategy offered the format as a tool, not the provider's JSON mode.
    let first = &STUBBORN_MODEL.requests()[0];
    assert!(first.response_format.is_none());
    assert!(first.tools.iter().any(|t| t.name == "Rating"));
}

// ---------------------------------------------------------------------------------------------
// Subagents inherit the declared guardrails

static COURIER_SENT: AtomicUsize = AtomicUsize::new(0);

/// Delivers a parcel.
#[kit::tool]
async fn deliver(to: String) -> Result<String, ToolError> {
    COURIER_SENT.fetch_add(1, Ordering::SeqCst);
    Ok(format!("delivered to {to}"))
}

/// Delivers parcels (declared on its own; as a subagent it gets the parent's gates).
#[kit::agent(
    model = ScriptedModel::new([
        Message::assistant_with_tool_calls("", vec![ToolCall::with_id("d1", "deliver", json!({"to": "Ann"}))]),
        Message::assistant("Delivered."),
    ]),
    tools = [Deliver],
)]
struct Courier;

static DISPATCH_MODEL: LazyLock<ScriptedModel> = LazyLock::new(|| {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "t1",
                "task",
                json!({"subagent_type": "courier", "description": "Deliver to Ann."}),
            )],
        ),
        Message::assistant("Ann has her parcel."),
    ])
});

/// Dispatches parcels; every delivery is reviewed, also when a subagent makes it.
#[kit::agent(
    model = DISPATCH_MODEL.clone(),
    tools = [Deliver],
    subagents<
        courier(description = "Delivers parcels.", agent = Courier),
        trusted(description = "Delivers without review.", interrupt_on< deliver = false >),
        unguarded(description = "Opts out.", inherit_guardrails = false,
                  without_guardrails = ["HumanInTheLoopMiddleware"]),
    >,
    general_purpose_subagent = false,
    interrupt_on< deliver = true >,
    checkpointer = Arc::new(MemoryCheckpointer::new()),
)]
struct Dispatch;

#[tokio::test]
async fn a_declared_subagent_inherits_the_declared_review_gate() {
    let paused = Dispatch::invoke("Get Ann her parcel.")
        .thread_id("dispatch")
        .await
        .unwrap();
    let Outcome::Interrupted(paused) = paused else {
        panic!("the courier's delivery waits for review, as the dispatcher's would");
    };
    assert_eq!(paused.interrupts[0].namespace, ["task:courier:t1"]);
    assert_eq!(COURIER_SENT.load(Ordering::SeqCst), 0);
    let done = Dispatch::resume_review([Decision::approve()])
        .thread_id("dispatch")
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "Ann has her parcel.");
    assert_eq!(COURIER_SENT.load(Ordering::SeqCst), 1);
}
