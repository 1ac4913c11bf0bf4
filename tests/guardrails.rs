//! Guardrails end to end: PII middleware in an agent (input, output and tool-call arguments,
//! tool results, block), human review of tool calls (every decision, mixed turns, wrong
//! answers, resume across a restart with SQLite, inside a subagent), OpenAI moderation against
//! a real HTTP server on 127.0.0.1 speaking the moderation API's wire format, and a custom
//! guardrail.

use std::sync::{Arc, Mutex};

use kit::agent::{Agent, AgentError, AgentState};
use kit::checkpoint::Checkpointer;
use kit::middleware::moderation::ModerationFlagged;
use kit::middleware::pii::{PiiDetected, PiiMiddleware, PiiStrategy, PiiType};
use kit::middleware::review::{
    Decision, DecisionType, HumanReviewMiddleware, InterruptMode, InterruptOnConfig,
    MAX_WRONG_ANSWERS, ReviewRequest, ToolApproval, resume_review, resume_review_for,
};
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError, ToolOutput};
use kit::{MemoryCheckpointer, Message, Outcome, Role, RunOptions, ToolCall, ToolStatus};
use serde_json::{Value, json};

type Log = Arc<Mutex<Vec<(String, Value)>>>;

/// A tool that records its calls and answers `"{name} done: {args}"`.
fn recording_tool(name: &str, log: &Log) -> Tool {
    let log = log.clone();
    let tool_name = name.to_string();
    Tool::from_fn(
        name,
        format!("The {name} tool."),
        json!({"type": "object"}),
        move |args, _ctx| {
            let log = log.clone();
            let name = tool_name.clone();
            async move {
                log.lock().unwrap().push((name.clone(), args.clone()));
                Ok::<_, ToolError>(ToolOutput::text(format!("{name} done: {args}")))
            }
        },
    )
}

fn calls(list: &[(&str, &str, Value)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.iter()
            .map(|(id, name, args)| ToolCall::with_id(*id, *name, args.clone()))
            .collect(),
    )
}

fn tool_results(state: &AgentState) -> Vec<(String, String, ToolStatus)> {
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| {
            (
                m.tool_call_id.clone().unwrap(),
                m.text(),
                m.status.unwrap_or_default(),
            )
        })
        .collect()
}

fn paused(outcome: &Outcome<AgentState>) -> ReviewRequest {
    assert!(outcome.is_interrupted(), "expected a review interrupt");
    assert_eq!(outcome.interrupts().len(), 1);
    assert_eq!(
        outcome.interrupts()[0].node,
        "HumanInTheLoopMiddleware.after_model"
    );
    ReviewRequest::from_interrupt(&outcome.interrupts()[0]).unwrap()
}

// ---------------------------------------------------------------------------------------------
// PII

#[tokio::test]
async fn pii_input_is_scrubbed_in_state_and_for_the_model() {
    let model = ScriptedModel::new([Message::assistant("Got it.")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(PiiMiddleware::new(PiiType::Email))
        .middleware(PiiMiddleware::new(PiiType::CreditCard).strategy(PiiStrategy::Mask))
        .middleware(PiiMiddleware::new(PiiType::Ip).strategy(PiiStrategy::Hash))
        .build()
        .unwrap();
    let state = agent
        .invoke("Je suis élodie@exemple.fr — carte 3782 822463 10005, hôte 10.0.0.1 ✓")
        .await
        .unwrap()
        .into_state();
    let expected = "Je suis [REDACTED_EMAIL] — carte **** ****** *0005, hôte <ip_hash:f5047344> ✓";
    assert_eq!(state.messages[0].text(), expected, "written back to state");
    assert_eq!(model.requests()[0].messages[0].text(), expected);
}

#[tokio::test]
async fn pii_output_scrubs_tool_call_arguments_before_the_tool_runs() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "Mailing alice@example.com now.",
            vec![ToolCall::with_id(
                "c1",
                "send_email",
                json!({"to": "alice@example.com", "cc": ["bob@example.org", 7], "meta": {"note": "from carol@x.io"}}),
            )],
        ),
        Message::assistant("Done; I wrote to alice@example.com."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(recording_tool("send_email", &log))
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .apply_to_input(false)
                .apply_to_output(true),
        )
        .build()
        .unwrap();
    let state = agent.invoke("Write to Alice.").await.unwrap().into_state();
    let scrubbed = json!({"to": "[REDACTED_EMAIL]", "cc": ["[REDACTED_EMAIL]", 7], "meta": {"note": "from [REDACTED_EMAIL]"}});
    assert_eq!(
        *log.lock().unwrap(),
        [("send_email".to_string(), scrubbed.clone())]
    );
    let ai = &state.messages[1];
    assert_eq!(ai.text(), "Mailing [REDACTED_EMAIL] now.");
    assert_eq!(ai.tool_calls[0].args, scrubbed);
    assert_eq!(state.final_text(), "Done; I wrote to [REDACTED_EMAIL].");
}

#[tokio::test]
async fn pii_tool_results_are_scrubbed_before_the_model_sees_them() {
    let lookup = Tool::from_fn(
        "lookup",
        "Looks up a customer.",
        json!({"type": "object"}),
        |_args, _ctx| async {
            Ok::<_, ToolError>("name: Ann, mac 00:1A:2B:3C:4D:5E, site https://ann.example.com/me")
        },
    );
    let model = ScriptedModel::new([
        calls(&[("c1", "lookup", json!({}))]),
        Message::assistant("Found her."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(lookup)
        .middleware(
            PiiMiddleware::new(PiiType::MacAddress)
                .strategy(PiiStrategy::Mask)
                .apply_to_tool_results(true),
        )
        .middleware(PiiMiddleware::new(PiiType::Url).apply_to_tool_results(true))
        .build()
        .unwrap();
    let state = agent.invoke("Who is Ann?").await.unwrap().into_state();
    let expected = "name: Ann, mac **:**:**:**:**:5E, site [REDACTED_URL]";
    assert_eq!(tool_results(&state)[0].1, expected);
    assert_eq!(model.requests()[1].messages[2].text(), expected);
}

#[tokio::test]
async fn pii_block_fails_the_run_with_a_typed_error() {
    // In the input: the model is never called.
    let model = ScriptedModel::new([Message::assistant("never")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(PiiMiddleware::new(PiiType::CreditCard).strategy(PiiStrategy::Block))
        .build()
        .unwrap();
    let err = agent
        .invoke("cards 4111111111111111 and 5555 5555 5555 4444")
        .await
        .unwrap_err();
    match err.pii_detected() {
        Some(PiiDetected {
            pii_type,
            count,
            location,
            ..
        }) => assert_eq!(
            (pii_type.as_str(), *count, location.as_str()),
            ("credit_card", 2, "input")
        ),
        None => panic!("expected PiiDetected, got {err:?}"),
    }
    assert_eq!(err.kind(), "pii_detected");
    assert_eq!(model.calls(), 0);

    // In tool-call arguments: the tool never runs.
    let log: Log = Arc::default();
    let model = ScriptedModel::new([calls(&[("c1", "ping", json!({"host": "2001:db8::1"}))])]);
    let agent = Agent::builder()
        .model(model)
        .tool(recording_tool("ping", &log))
        .middleware(
            PiiMiddleware::new(PiiType::Ip)
                .strategy(PiiStrategy::Block)
                .apply_to_output(true),
        )
        .build()
        .unwrap();
    let err = agent.invoke("ping it").await.unwrap_err();
    assert!(
        matches!(err.pii_detected(), Some(PiiDetected { location, count: 1, .. }) if location == "tool call arguments"),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("choose the redact, mask or hash strategy"),
        "{err}"
    );
    assert!(log.lock().unwrap().is_empty());

    // In a tool result: stopped before the model sees it.
    let leak = Tool::from_fn("leak", "Leaks.", json!({"type": "object"}), |_, _| async {
        Ok::<_, ToolError>("contact: a@b.co")
    });
    let model = ScriptedModel::new([calls(&[("c1", "leak", json!({}))]), Message::assistant("x")]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(leak)
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .strategy(PiiStrategy::Block)
                .apply_to_tool_results(true),
        )
        .build()
        .unwrap();
    let err = agent.invoke("go").await.unwrap_err();
    assert!(
        matches!(err.pii_detected(), Some(PiiDetected { location, .. }) if location == "tool result"),
        "{err:?}"
    );
    assert_eq!(model.calls(), 1, "the second model call never happened");
}

// ---------------------------------------------------------------------------------------------
// PII in streamed tokens

/// The text of the `model_delta` events (answer text, or tool call `index`'s argument text)
/// in `namespace`, one string per event.
fn delta_pieces(events: &[kit::Event], namespace: &[&str], index: Option<u64>) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind() == kit::EventKind::ModelDelta && e.metadata.namespace == namespace)
        .filter_map(|e| match index {
            None => e.data.to_json()["text"].as_str().map(String::from),
            Some(i) => (e.data.to_json()["tool_call"]["index"] == i)
                .then(|| {
                    e.data.to_json()["tool_call"]["args"]
                        .as_str()
                        .map(String::from)
                })
                .flatten(),
        })
        .collect()
}

fn model_end_text(events: &[kit::Event]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e.kind() == kit::EventKind::ModelEnd)
        .map(|e| {
            e.data.to_json()["message"]["content"]
                .as_str()
                .unwrap_or("")
                .to_string()
        })
        .collect()
}

#[tokio::test]
async fn pii_output_scrubs_streamed_tokens_split_across_deltas() {
    use futures::StreamExt;
    use kit_testing::mock::openai::{self, MockOpenAi};
    let server = MockOpenAi::start().await.unwrap();
    // A long answer from the provider's real SSE stream, an address split over three chunks and
    // a card over two, with enough text around them that the stream must release early.
    let filler = "The quarterly report is ready and every figure was checked twice by the team. ";
    let pieces = [
        filler,
        filler,
        "Write to ali",
        "ce@exam",
        "ple.com or pay with 4111 1111 ",
        "1111 1111. ",
        filler,
        filler,
        "Thanks, ",
        "ålesund@example.no.",
    ];
    server.enqueue(openai::text_stream(&pieces));
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .apply_to_input(false)
                .apply_to_output(true),
        )
        .middleware(
            PiiMiddleware::new(PiiType::CreditCard)
                .strategy(PiiStrategy::Mask)
                .apply_to_output(true),
        )
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("Summarise.", &RunOptions::new())
        .collect()
        .await;
    let deltas = delta_pieces(&events, &[], None);
    let streamed: String = deltas.concat();
    let expected = format!(
        "{filler}{filler}Write to [REDACTED_EMAIL] or pay with **** **** **** 1111. \
         {filler}{filler}Thanks, [REDACTED_EMAIL]."
    );
    assert_eq!(streamed, expected);
    // The deltas add up to what model_end, the state and the checkpoint-free output hold.
    assert_eq!(model_end_text(&events), std::slice::from_ref(&expected));
    let end = events.last().unwrap();
    assert_eq!(end.kind(), kit::EventKind::RunEnd);
    assert_eq!(
        end.data.to_json()["output"]["messages"][1]["content"],
        expected
    );
    // No event of the run carries the raw data, and tokens still streamed before the answer
    // was complete (more than one delta, the first well before the end).
    let raw = serde_json::to_string(&events).unwrap();
    for secret in ["alice@", "ce@exam", "ålesund@", "4111 1111 1111"] {
        assert!(!raw.contains(secret), "{secret} leaked: {raw}");
    }
    assert!(deltas.len() >= 3, "{deltas:?}");
    assert!(deltas[0].len() < expected.len() / 2, "{deltas:?}");
}

#[tokio::test]
async fn overlapping_pii_middleware_stream_what_the_state_stores() {
    use futures::StreamExt;
    use kit_testing::mock::openai::{self, MockOpenAi};
    // An address inside a URL: the inner middleware (URL) scrubs the answer first, so the
    // stream must be filtered in the same order or the two would disagree (and leak the token).
    let server = MockOpenAi::start().await.unwrap();
    let filler = "Your password reset link is below; it expires in one hour, so use it soon. ";
    server.enqueue(openai::text_stream(&[
        filler,
        "Open https://alice@exa",
        "mple.com/reset?token=s3cr3t-t0k3n now. ",
        filler,
    ]));
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .middleware(PiiMiddleware::new(PiiType::Email).apply_to_output(true))
        .middleware(PiiMiddleware::new(PiiType::Url).apply_to_output(true))
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("Reset my password.", &RunOptions::new())
        .collect()
        .await;
    let streamed = delta_pieces(&events, &[], None).concat();
    let end = events.last().unwrap();
    assert_eq!(end.kind(), kit::EventKind::RunEnd);
    let end_data = end.data.to_json();
    let stored = end_data["output"]["messages"][1]["content"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(streamed, stored);
    assert_eq!(model_end_text(&events), [stored.to_string()]);
    assert!(stored.contains("[REDACTED_URL]"), "{stored}");
    let raw = serde_json::to_string(&events).unwrap();
    for secret in ["alice@", "s3cr3t-t0k3n", "example.com/reset"] {
        assert!(!raw.contains(secret), "{secret} leaked: {raw}");
    }
}

#[tokio::test]
async fn pii_output_scrubs_streamed_tool_call_arguments() {
    use futures::StreamExt;
    use kit_testing::mock::MockResponse;
    use kit_testing::mock::openai::{self, MockOpenAi};
    let server = MockOpenAi::start().await.unwrap();
    let args = r#"{"to": "bob@example.org", "body": "Hi Bob, this is a long enough message to be streamed in several parts, cc carol@example.net please."}"#;
    let (a, rest) = args.split_at(12);
    let (b, c) = rest.split_at(60);
    server.enqueue_all([
        MockResponse::sse([
            openai::role_chunk(),
            openai::tool_start_chunk(0, "call_1", "send_email"),
            openai::tool_args_chunk(0, a),
            openai::tool_args_chunk(0, b),
            openai::tool_args_chunk(0, c),
            openai::finish_chunk("tool_calls"),
            openai::usage_chunk(20, 30, 0),
            openai::done(),
        ]),
        openai::text_stream(&["Sent."]),
    ]);
    let log: Log = Arc::default();
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .tool(recording_tool("send_email", &log))
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .apply_to_output(true)
                .stream_lookback(40),
        )
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("Mail Bob.", &RunOptions::new())
        .collect()
        .await;
    let pieces = delta_pieces(&events, &[], Some(0));
    assert!(pieces.len() >= 2, "{pieces:?}");
    let streamed: Value = serde_json::from_str(&pieces.concat()).unwrap();
    let scrubbed = json!({"to": "[REDACTED_EMAIL]", "body": "Hi Bob, this is a long enough message to be streamed in several parts, cc [REDACTED_EMAIL] please."});
    assert_eq!(streamed, scrubbed);
    // The call's first delta still names it; the tool got the scrubbed arguments too.
    let start = events
        .iter()
        .find(|e| e.kind() == kit::EventKind::ModelDelta)
        .unwrap();
    assert_eq!(start.data.to_json()["tool_call"]["id"], "call_1");
    assert_eq!(start.data.to_json()["tool_call"]["name"], "send_email");
    assert_eq!(*log.lock().unwrap(), [("send_email".to_string(), scrubbed)]);
    let raw = serde_json::to_string(&events).unwrap();
    assert!(!raw.contains("bob@") && !raw.contains("carol@"), "{raw}");
}

#[tokio::test]
async fn pii_output_scrubs_a_subagents_streamed_tokens() {
    use futures::StreamExt;
    use kit::middleware::subagents::SubagentSpec;
    let parent = ScriptedModel::new([
        calls(&[(
            "job-1",
            "task",
            json!({"description": "Find the contact.", "subagent_type": "finder"}),
        )]),
        Message::assistant("Found it."),
    ]);
    let child = ScriptedModel::new([Message::assistant(
        "The contact is dana@example.com, reachable any weekday morning before the stand-up.",
    )]);
    let agent = Agent::builder()
        .model(parent)
        .general_purpose_subagent(false)
        .subagents([SubagentSpec::new("finder", "Finds contacts.").model(child)])
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .apply_to_input(false)
                .apply_to_output(true)
                .stream_lookback(16),
        )
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("Who is the contact?", &RunOptions::new())
        .collect()
        .await;
    let child_text = delta_pieces(&events, &["task:finder:job-1"], None).concat();
    assert_eq!(
        child_text,
        "The contact is [REDACTED_EMAIL], reachable any weekday morning before the stand-up."
    );
    // The child's model_end agrees with its deltas.
    let child_end: Vec<&kit::Event> = events
        .iter()
        .filter(|e| {
            e.kind() == kit::EventKind::ModelEnd && e.metadata.namespace == ["task:finder:job-1"]
        })
        .collect();
    assert_eq!(child_end.len(), 1);
    assert_eq!(
        child_end[0].data.to_json()["message"]["content"],
        child_text
    );
    // The subagent has no PII middleware of its own, so its result (the task tool's output)
    // still holds the address; its token stream does not.
    let leaked = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind(),
                kit::EventKind::ModelDelta | kit::EventKind::ModelEnd
            )
        })
        .any(|e| e.data.to_json().to_string().contains("dana@"));
    assert!(!leaked, "{events:#?}");
}

#[tokio::test]
async fn pii_block_redacts_the_stream_then_fails_the_run() {
    use futures::StreamExt;
    let tail = " She knows your contract, your open invoices and the delivery dates, so have \
                them at hand; the call takes about ten minutes and needs no preparation.";
    let model = ScriptedModel::new([Message::assistant(format!(
        "Your account manager is erin@example.com and will call you.{tail}"
    ))]);
    let agent = Agent::builder()
        .model(model)
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .strategy(PiiStrategy::Block)
                .apply_to_input(false)
                .apply_to_output(true),
        )
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("Who calls me?", &RunOptions::new())
        .collect()
        .await;
    // What went out before the block is redacted; what was held back is dropped with the call.
    let streamed = delta_pieces(&events, &[], None).concat();
    let redacted = format!("Your account manager is [REDACTED_EMAIL] and will call you.{tail}");
    assert!(streamed.contains("[REDACTED_EMAIL]"), "{streamed}");
    assert!(redacted.starts_with(&streamed), "{streamed}");
    assert!(streamed.len() < redacted.len(), "{streamed}");
    let end = events.last().unwrap();
    assert_eq!(end.kind(), kit::EventKind::Error);
    assert_eq!(end.data.to_json()["kind"], "pii_detected");
    assert!(!serde_json::to_string(&events).unwrap().contains("erin@"));
}

// ---------------------------------------------------------------------------------------------
// Human review

fn review_agent(model: &ScriptedModel, log: &Log, checkpointer: Arc<dyn Checkpointer>) -> Agent {
    Agent::builder()
        .model(model.clone())
        .tools(
            ["send_email", "delete_file", "ask_color", "search", "rename"]
                .iter()
                .map(|n| recording_tool(n, log)),
        )
        .middleware(
            HumanReviewMiddleware::new()
                .interrupt_on("send_email", true)
                .interrupt_on(
                    "delete_file",
                    InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject])
                        .unwrap(),
                )
                .interrupt_on("ask_color", true)
                .interrupt_on("search", false)
                .interrupt_on("rename", true),
        )
        .checkpointer(checkpointer)
        .build()
        .unwrap()
}

/// The pending per-call approvals of a paused run, by tool call id.
fn approvals(outcome: &Outcome<AgentState>) -> Vec<(String, ToolApproval)> {
    assert!(outcome.is_interrupted(), "expected review interrupts");
    let mut list: Vec<(String, ToolApproval)> = outcome
        .interrupts()
        .iter()
        .map(|i| (i.id.clone(), ToolApproval::from_interrupt(i).unwrap()))
        .collect();
    list.sort_by(|a, b| a.1.tool_call_id.cmp(&b.1.tool_call_id));
    list
}

#[tokio::test]
async fn review_per_call_asks_once_per_call_and_resumes_each_by_id() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "send_email", json!({"to": "a@x", "body": "hi"})),
            ("c2", "delete_file", json!({"path": "/notes"})),
            ("c3", "search", json!({"q": "rust"})),
        ]),
        Message::assistant("All handled."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools(
            ["send_email", "delete_file", "search"]
                .iter()
                .map(|n| recording_tool(n, &log)),
        )
        .middleware(
            HumanReviewMiddleware::new()
                .interrupt_on("send_email", true)
                .interrupt_on(
                    "delete_file",
                    InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject])
                        .unwrap(),
                )
                .interrupt_mode(InterruptMode::PerCall),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("per-call");

    // One interrupt per reviewed call; the unreviewed search ran already.
    let outcome = agent.invoke("tidy up").options(&opts).await.unwrap();
    let pending = approvals(&outcome);
    assert_eq!(pending.len(), 2);
    assert_eq!(
        serde_json::to_value(&pending[0].1).unwrap(),
        json!({"type": "tool_approval", "tool_call_id": "c1", "name": "send_email",
               "args": {"to": "a@x", "body": "hi"},
               "description": "Tool execution requires approval\n\nTool: send_email\nArgs: {'body': 'hi', 'to': 'a@x'}",
               "allowed_decisions": ["approve", "edit", "reject", "respond"]})
    );
    assert_eq!(
        pending[1].1.allowed_decisions,
        [DecisionType::Approve, DecisionType::Reject]
    );
    assert_eq!(
        *log.lock().unwrap(),
        [("search".to_string(), json!({"q": "rust"}))]
    );

    // Wrong answers are asked again, with the reason: an edit that names another tool, and
    // two decisions for one call.
    let outcome = agent
        .resume(resume_review_for(
            &pending[0].0,
            Decision::edit("delete_file", json!({})),
        ))
        .options(&opts)
        .await
        .unwrap();
    let again = approvals(&outcome);
    assert_eq!(again.len(), 2);
    let error = again[0].1.error.clone().unwrap_or_default();
    assert!(error.contains("must keep the tool"), "{error}");
    assert_eq!(
        again[1].1.error, None,
        "the file's review is still pending, unanswered"
    );
    let two = json!([{"type": "approve"}, {"type": "reject"}]);
    let outcome = agent
        .resume(kit::Resume::ByIds(
            [(again[1].0.clone(), two)].into_iter().collect(),
        ))
        .options(&opts)
        .await
        .unwrap();
    let again = approvals(&outcome);
    let error = again[1].1.error.clone().unwrap_or_default();
    assert!(
        error.contains("answered with one decision") && error.contains("2 decisions"),
        "{error}"
    );
    assert_eq!(log.lock().unwrap().len(), 1, "nothing else ran");

    // Both at once, by id: an edited email and a rejected deletion.
    let answers = [
        (
            again[0].0.clone(),
            json!({"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "c@x", "body": "edited"}}}),
        ),
        (
            again[1].0.clone(),
            json!({"type": "reject", "message": "Keep it"}),
        ),
    ];
    let done = agent
        .resume(kit::Resume::ByIds(answers.into_iter().collect()))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();
    let ran = log.lock().unwrap().clone();
    assert_eq!(
        ran,
        [
            ("search".to_string(), json!({"q": "rust"})),
            (
                "send_email".to_string(),
                json!({"to": "c@x", "body": "edited"})
            ),
        ]
    );
    // One result per call, in call order.
    let results = tool_results(&done);
    let ids: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3"]);
    assert!(
        results[0]
            .1
            .starts_with("Note: a human reviewer replaced this tool call")
    );
    assert_eq!(results[0].2, ToolStatus::Success);
    assert_eq!(
        (results[1].1.as_str(), results[1].2),
        (
            "User rejected the tool call for `delete_file` with reason: Keep it",
            ToolStatus::Error
        )
    );
    assert_eq!(done.messages.last().unwrap().text(), "All handled.");
    assert_eq!(model.calls(), 2);
}

/// One turn with every decision type and an auto-approved call.
fn mixed_turn() -> Message {
    calls(&[
        ("c1", "send_email", json!({"to": "a@x", "body": "hi"})),
        ("c2", "delete_file", json!({"path": "/notes"})),
        ("c3", "search", json!({"q": "rust"})),
        ("c4", "ask_color", json!({"question": "favourite?"})),
        ("c5", "rename", json!({"from": "a", "to": "b"})),
        ("c6", "delete_file", json!({"path": "/tmp"})),
    ])
}

#[tokio::test]
async fn review_with_every_decision_and_an_auto_approved_call_in_one_turn() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([mixed_turn(), Message::assistant("All handled.")]);
    let agent = review_agent(&model, &log, Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new().thread_id("mixed");

    let outcome = agent.invoke("do things").options(&opts).await.unwrap();
    let request = paused(&outcome);
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing runs before the review"
    );
    // The anchor's payload: one entry per reviewed call, in call order; `search` is not reviewed.
    assert_eq!(
        serde_json::to_value(&request).unwrap(),
        json!({
            "action_requests": [
                {"name": "send_email", "args": {"to": "a@x", "body": "hi"},
                 "description": "Tool execution requires approval\n\nTool: send_email\nArgs: {'body': 'hi', 'to': 'a@x'}"},
                {"name": "delete_file", "args": {"path": "/notes"},
                 "description": "Tool execution requires approval\n\nTool: delete_file\nArgs: {'path': '/notes'}"},
                {"name": "ask_color", "args": {"question": "favourite?"},
                 "description": "Tool execution requires approval\n\nTool: ask_color\nArgs: {'question': 'favourite?'}"},
                {"name": "rename", "args": {"from": "a", "to": "b"},
                 "description": "Tool execution requires approval\n\nTool: rename\nArgs: {'from': 'a', 'to': 'b'}"},
                {"name": "delete_file", "args": {"path": "/tmp"},
                 "description": "Tool execution requires approval\n\nTool: delete_file\nArgs: {'path': '/tmp'}"},
            ],
            "review_configs": [
                {"action_name": "send_email", "allowed_decisions": ["approve", "edit", "reject", "respond"]},
                {"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]},
                {"action_name": "ask_color", "allowed_decisions": ["approve", "edit", "reject", "respond"]},
                {"action_name": "rename", "allowed_decisions": ["approve", "edit", "reject", "respond"]},
                {"action_name": "delete_file", "allowed_decisions": ["approve", "reject"]},
            ]
        })
    );

    let done = agent
        .resume(resume_review([
            Decision::edit("send_email", json!({"to": "c@x", "body": "edited"})),
            Decision::reject_with("Keep it"),
            Decision::respond("blue"),
            Decision::approve(),
            Decision::reject(),
        ]))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();

    // What ran: the edited email, the approved rename and the auto-approved search.
    let mut ran = log.lock().unwrap().clone();
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ran,
        [
            ("rename".to_string(), json!({"from": "a", "to": "b"})),
            ("search".to_string(), json!({"q": "rust"})),
            (
                "send_email".to_string(),
                json!({"to": "c@x", "body": "edited"})
            ),
        ]
    );

    // Every call has exactly one result.
    let mut results = tool_results(&done);
    results.sort_by(|a, b| a.0.cmp(&b.0));
    let ids: Vec<&str> = results.iter().map(|r| r.0.as_str()).collect();
    assert_eq!(ids, ["c1", "c2", "c3", "c4", "c5", "c6"]);
    let by_id = |id: &str| results.iter().find(|r| r.0 == id).unwrap().clone();
    assert_eq!(
        by_id("c1"),
        (
            "c1".into(),
            "Note: a human reviewer replaced this tool call before it ran. The call recorded in \
             your message is the one you produced, not the one that executed. This was \
             intentional and authorized. Do not re-issue your original call. Executed instead: \
             send_email with arguments {\"body\": \"edited\", \"to\": \"c@x\"}.\n\nTool \
             response:\nsend_email done: {\"body\":\"edited\",\"to\":\"c@x\"}"
                .into(),
            ToolStatus::Success
        )
    );
    assert_eq!(
        by_id("c2"),
        (
            "c2".into(),
            "User rejected the tool call for `delete_file` with reason: Keep it".into(),
            ToolStatus::Error
        )
    );
    assert_eq!(by_id("c3").2, ToolStatus::Success);
    assert_eq!(
        by_id("c4"),
        ("c4".into(), "blue".into(), ToolStatus::Success)
    );
    assert_eq!(by_id("c5").1, "rename done: {\"from\":\"a\",\"to\":\"b\"}");
    assert_eq!(
        by_id("c6"),
        (
            "c6".into(),
            "User rejected the tool call for `delete_file` with id c6. The tool was not \
             executed. Do not retry this tool call unless the user explicitly requests it."
                .into(),
            ToolStatus::Error
        )
    );
    // The assistant message keeps the model's own call.
    assert_eq!(
        done.messages[1].tool_calls[0].args,
        json!({"to": "a@x", "body": "hi"})
    );
    // The model's second request saw all six results after its message.
    let second = &model.requests()[1];
    assert_eq!(
        second
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        6
    );
    assert_eq!(done.final_text(), "All handled.");
    // The edits are dropped from the state once used.
    assert_eq!(
        done.custom.get(kit::middleware::review::EDITS_KEY),
        Some(&Value::Null)
    );
}

#[tokio::test]
async fn review_when_gates_only_the_calls_it_selects_and_describes_them() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        calls(&[
            ("small", "refund", json!({"order": 1, "amount": 20.0})),
            ("big", "refund", json!({"order": 2, "amount": 450.0})),
        ]),
        Message::assistant("Both handled."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(recording_tool("refund", &log))
        .middleware(
            HumanReviewMiddleware::new().interrupt_on(
                "refund",
                InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject])
                    .unwrap()
                    .when(|call, _| call.args["amount"].as_f64().is_none_or(|a| a > 100.0))
                    .describe_with(|call, state| {
                        format!(
                            "Refund {} EUR on order {} (asked: {:?})",
                            call.args["amount"],
                            call.args["order"],
                            state.messages[0].text()
                        )
                    }),
            ),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("refunds");
    let first = agent
        .invoke("Refund both orders.")
        .options(&opts)
        .await
        .unwrap();
    let request = paused(&first);
    // Only the big refund waits, described by the function.
    assert_eq!(request.action_requests.len(), 1);
    assert_eq!(request.action_requests[0].args["order"], 2);
    assert_eq!(
        request.action_requests[0].description,
        "Refund 450.0 EUR on order 2 (asked: \"Refund both orders.\")"
    );
    // The small one has not run yet: the turn's calls wait for the review together.
    assert!(log.lock().unwrap().is_empty());
    let done = agent
        .resume(resume_review([Decision::reject_with("Too much.")]))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "Both handled.");
    assert_eq!(
        *log.lock().unwrap(),
        [("refund".to_string(), json!({"order": 1, "amount": 20.0}))]
    );
    let results = tool_results(done.state());
    assert!(results.contains(&(
        "big".to_string(),
        "User rejected the tool call for `refund` with reason: Too much.".to_string(),
        ToolStatus::Error
    )));
    assert_eq!(results.len(), 2);
}

#[tokio::test]
async fn a_wrong_review_answer_asks_again_and_the_thread_stays_resumable() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "delete_file", json!({"path": "/a"})),
            ("c2", "send_email", json!({"to": "a@x"})),
        ]),
        Message::assistant("ok"),
    ]);
    let agent = review_agent(&model, &log, Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new().thread_id("wrong");
    let first = agent.invoke("go").options(&opts).await.unwrap();
    assert!(paused(&first).error.is_none());

    // A decision type `delete_file` does not allow.
    let again = agent
        .resume(resume_review([
            Decision::respond("done"),
            Decision::approve(),
        ]))
        .options(&opts)
        .await
        .unwrap();
    let request = paused(&again);
    assert_eq!(
        request.error.as_deref(),
        Some(
            "Unexpected human decision: {\"type\":\"respond\",\"message\":\"done\"}. Decision \
             type 'respond' is not allowed for tool 'delete_file'. Expected one of ['approve', \
             'reject'] based on the tool's configuration."
        )
    );
    assert_eq!(
        request.action_requests.len(),
        2,
        "the same calls are asked again"
    );
    assert_ne!(again.interrupts()[0].id, first.interrupts()[0].id);

    // Too few decisions (a raw list this time).
    let again = agent
        .resume(resume_review(json!([{"type": "approve"}])))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(
        paused(&again).error.as_deref(),
        Some(
            "Number of human decisions (1) does not match number of hanging tool calls (2). \
             Resume with one decision per action request, in their order."
        )
    );
    // Not decisions at all.
    let again = agent
        .resume(kit::Resume::value("yes please"))
        .options(&opts)
        .await
        .unwrap();
    assert!(
        paused(&again)
            .error
            .unwrap()
            .starts_with("a review is resumed with {\"decisions\": [...]}")
    );
    assert!(log.lock().unwrap().is_empty(), "nothing ran meanwhile");

    // The corrected answer goes through.
    let done = agent
        .resume(resume_review(vec![Decision::reject(), Decision::approve()]))
        .options(&opts)
        .await
        .unwrap();
    assert!(!done.is_interrupted());
    assert_eq!(
        *log.lock().unwrap(),
        [("send_email".to_string(), json!({"to": "a@x"}))]
    );
    assert_eq!(tool_results(done.state()).len(), 2);
    // `check` reports the same errors before resuming.
    let request = paused(&first);
    assert!(request.check(&[Decision::approve()]).is_err());
    assert!(
        request
            .check(&[Decision::approve(), Decision::approve()])
            .is_ok()
    );
}

/// A wrong answer of a kibibyte or a megabyte is asked about again with its start only; after
/// `MAX_WRONG_ANSWERS` wrong answers in a row the review stops asking and rejects the calls,
/// saying why (each answer is kept and read again on every resume, so asking forever would
/// grow the thread without end). Batched and per-call.
#[tokio::test]
async fn wrong_review_answers_are_shown_clipped_and_end_in_a_rejection() {
    for mode in [InterruptMode::Batched, InterruptMode::PerCall] {
        for size in [1 << 10, 1 << 20] {
            let log: Log = Arc::default();
            let model = ScriptedModel::new([
                calls(&[("c1", "delete_file", json!({"path": "/a"}))]),
                Message::assistant("ok"),
            ]);
            let agent = Agent::builder()
                .model(model.clone())
                .tool(recording_tool("delete_file", &log))
                .middleware(
                    HumanReviewMiddleware::new()
                        .interrupt_on(
                            "delete_file",
                            InterruptOnConfig::allow([DecisionType::Approve, DecisionType::Reject])
                                .unwrap(),
                        )
                        .interrupt_mode(mode),
                )
                .checkpointer(Arc::new(MemoryCheckpointer::new()))
                .build()
                .unwrap();
            let opts = RunOptions::new().thread_id("wrong");
            let mut outcome = agent.invoke("go").options(&opts).await.unwrap();
            let huge = "x".repeat(size);
            // Each wrong in its own way: an edit the tool does not allow, a type that does
            // not exist, a message of the wrong type.
            let wrong = [
                json!({"type": "edit", "edited_action": {"name": "delete_file", "args": {"p": huge}}}),
                json!({"type": huge}),
                json!({"type": "reject", "message": [huge]}),
            ];
            for round in 0..MAX_WRONG_ANSWERS {
                let answer = json!({"decisions": [wrong[round % 3].clone()]});
                let error = match mode {
                    InterruptMode::Batched => paused(&outcome).error,
                    _ => approvals(&outcome)[0].1.error.clone(),
                };
                assert_eq!(error.is_some(), round > 0, "{round}");
                if let Some(error) = error {
                    assert!(error.len() < 1_000, "{round}: {} bytes", error.len());
                }
                outcome = agent
                    .resume(kit::Resume::value(answer))
                    .options(&opts)
                    .await
                    .unwrap();
            }
            assert!(!outcome.is_interrupted(), "{mode:?} {size}");
            let results = tool_results(outcome.state());
            assert_eq!(results.len(), 1);
            let (id, text, status) = &results[0];
            assert_eq!(id, "c1");
            assert_eq!(*status, ToolStatus::Error);
            assert!(
                text.contains("16 answers in a row it could not use"),
                "{text}"
            );
            assert!(
                text.starts_with("The tool call for `delete_file` was not executed"),
                "{text}"
            );
            assert!(text.len() < 1_000, "{} bytes", text.len());
            assert!(log.lock().unwrap().is_empty(), "nothing ran");
        }
    }
}

/// A SQLite checkpoint file, opened afresh (as a new process would).
fn sqlite(path: &std::path::Path) -> Arc<dyn Checkpointer> {
    Arc::new(kit::checkpoint::SqliteCheckpointer::open(path).unwrap())
}

#[tokio::test]
async fn review_resumes_across_a_restart_with_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("review.db");
    let opts = RunOptions::new().thread_id("restart");
    let ids = {
        // The first process: the model asks, the run pauses, a wrong answer is asked again,
        // the process ends (agent and database closed).
        let log: Log = Arc::default();
        let model = ScriptedModel::new([calls(&[
            ("c1", "send_email", json!({"to": "a@x", "body": "hi"})),
            ("c2", "search", json!({"q": "x"})),
        ])]);
        let agent = review_agent(&model, &log, sqlite(&db));
        let outcome = agent.invoke("mail a").options(&opts).await.unwrap();
        paused(&outcome);
        let outcome = agent
            .resume(resume_review(Vec::<Decision>::new()))
            .options(&opts)
            .await
            .unwrap();
        assert!(paused(&outcome).error.is_some());
        assert!(log.lock().unwrap().is_empty());
        outcome.interrupts()[0].id.clone()
    };
    // The second process: a new model, tools, agent and connection to the same file.
    let log: Log = Arc::default();
    let model = ScriptedModel::new([Message::assistant("Edited and sent.")]);
    let agent = review_agent(&model, &log, sqlite(&db));
    let pending = agent.graph().get_state(&opts).await.unwrap().unwrap();
    assert_eq!(pending.interrupts.len(), 1);
    assert_eq!(pending.interrupts[0].id, ids);
    let done = agent
        .resume(resume_review([Decision::edit(
            "send_email",
            json!({"to": "b@x", "body": "hi"}),
        )]))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();
    let mut ran = log.lock().unwrap().clone();
    ran.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        ran,
        [
            ("search".to_string(), json!({"q": "x"})),
            ("send_email".to_string(), json!({"to": "b@x", "body": "hi"})),
        ]
    );
    assert_eq!(done.final_text(), "Edited and sent.");
    assert_eq!(tool_results(&done).len(), 2);
}

#[tokio::test]
async fn review_needs_a_checkpointer_and_reviews_its_own_tools() {
    let log: Log = Arc::default();
    let err = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(HumanReviewMiddleware::new().interrupt_on("x", true))
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains(
            "middleware `HumanInTheLoopMiddleware` pauses the run for human input, which needs a \
             checkpointer"
        ),
        "{err}"
    );

    // Tools given to the middleware are added to the agent and reviewed.
    let model = ScriptedModel::new([
        calls(&[("c1", "wire_money", json!({"amount": 10}))]),
        Message::assistant("Wired."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(HumanReviewMiddleware::new().tools([recording_tool("wire_money", &log)]))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    assert_eq!(agent.tool_names(), ["wire_money"]);
    let opts = RunOptions::new().thread_id("own");
    let request = paused(&agent.invoke("pay").options(&opts).await.unwrap());
    assert_eq!(request.action_requests[0].name, "wire_money");
    let done = agent
        .resume(resume_review(Decision::approve()))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(done.state().final_text(), "Wired.");
    assert_eq!(log.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_reviewer_sees_pii_scrubbed_arguments() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        calls(&[("c1", "send_email", json!({"to": "ann@example.com"}))]),
        Message::assistant("ok"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(recording_tool("send_email", &log))
        .middleware(HumanReviewMiddleware::new().interrupt_on("send_email", true))
        .middleware(
            PiiMiddleware::new(PiiType::Email)
                .strategy(PiiStrategy::Hash)
                .apply_to_output(true),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("pii-review");
    let request = paused(&agent.invoke("mail Ann").options(&opts).await.unwrap());
    let hashed = json!({"to": "<email_hash:71d4f55f>"});
    assert_eq!(request.action_requests[0].args, hashed);
    agent
        .resume(resume_review([Decision::approve()]))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(*log.lock().unwrap(), [("send_email".to_string(), hashed)]);
}

#[tokio::test]
async fn a_review_inside_a_subagent_reaches_the_caller_and_resumes_into_the_child() {
    use kit::middleware::review::resume_review_for;
    use kit::middleware::subagents::SubagentSpec;

    let log: Log = Arc::default();
    let checkpointer: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
    let child_model = ScriptedModel::new([
        calls(&[("d1", "delete_file", json!({"path": "/all"}))]),
        Message::assistant("I was told to keep the files."),
    ]);
    let parent_model = ScriptedModel::new([
        calls(&[(
            "job",
            "task",
            json!({"description": "clean up", "subagent_type": "janitor"}),
        )]),
        Message::assistant("The janitor kept the files."),
    ]);
    // The child is built from a spec: it runs on the parent's checkpointer and thread (under
    // its own namespace), so its review middleware can pause the run.
    let agent = Agent::builder()
        .model(parent_model)
        .general_purpose_subagent(false)
        .subagents([SubagentSpec::new("janitor", "Cleans up.")
            .model(child_model.clone())
            .tools([recording_tool("delete_file", &log)])
            .middleware(HumanReviewMiddleware::new().interrupt_on("delete_file", true))])
        .checkpointer(checkpointer)
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("nested-review");
    let outcome = agent.invoke("clean").options(&opts).await.unwrap();
    let request = paused(&outcome);
    let interrupt = &outcome.interrupts()[0];
    assert_eq!(
        interrupt.namespace,
        ["task:janitor:job"],
        "raised inside the child"
    );
    assert_eq!(request.action_requests[0].args, json!({"path": "/all"}));

    let done = agent
        .resume(resume_review_for(
            &interrupt.id,
            [Decision::reject_with("Keep them")],
        ))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();
    assert!(
        log.lock().unwrap().is_empty(),
        "the rejected call never ran"
    );
    assert_eq!(
        child_model.requests()[1].messages[2].text(),
        "User rejected the tool call for `delete_file` with reason: Keep them"
    );
    assert_eq!(tool_results(&done)[0].1, "I was told to keep the files.");
    assert_eq!(done.final_text(), "The janitor kept the files.");
}

#[tokio::test]
async fn when_every_call_is_rejected_or_answered_the_model_sees_the_answers() {
    let log: Log = Arc::default();
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "send_email", json!({"to": "a@x"})),
            ("c2", "ask_color", json!({})),
        ]),
        Message::assistant("Understood: no email, and blue it is."),
    ]);
    let agent = review_agent(&model, &log, Arc::new(MemoryCheckpointer::new()));
    let opts = RunOptions::new().thread_id("all-answered");
    paused(&agent.invoke("go").options(&opts).await.unwrap());
    let done = agent
        .resume(resume_review([
            Decision::reject(),
            Decision::respond("blue"),
        ]))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();
    assert!(log.lock().unwrap().is_empty());
    assert_eq!(done.final_text(), "Understood: no email, and blue it is.");
    let seen: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1], "blue");
}

// ---------------------------------------------------------------------------------------------
// Moderation, against a server on 127.0.0.1 speaking the moderation API's wire format

mod moderation_api {
    use std::sync::{Arc, Mutex};

    use axum::Json;
    use axum::extract::State;
    use axum::http::{HeaderMap, StatusCode};
    use axum::routing::post;
    use serde_json::{Map, Value, json};

    pub const KEY: &str = "sk-test-moderation";

    /// Every request the server received: the Authorization header and the JSON body.
    pub type Seen = Arc<Mutex<Vec<(String, Value)>>>;

    const CATEGORIES: [&str; 13] = [
        "harassment",
        "harassment/threatening",
        "hate",
        "hate/threatening",
        "illicit",
        "illicit/violent",
        "self-harm",
        "self-harm/instructions",
        "self-harm/intent",
        "sexual",
        "sexual/minors",
        "violence",
        "violence/graphic",
    ];

    /// The categories a text is flagged for, by keyword.
    fn flagged_for(text: &str) -> Vec<&'static str> {
        let text = text.to_lowercase();
        let mut flagged = Vec::new();
        if text.contains("hurt myself") {
            flagged.extend(["self-harm", "self-harm/intent"]);
        }
        if text.contains("attack") {
            flagged.push("violence");
        }
        flagged
    }

    /// One result in the API's shape: every category, its score and the input types.
    fn result(text: &str) -> Value {
        let flagged = flagged_for(text);
        let mut categories = Map::new();
        let mut scores = Map::new();
        let mut applied = Map::new();
        for (i, c) in CATEGORIES.iter().enumerate() {
            let on = flagged.contains(c);
            categories.insert(c.to_string(), json!(on));
            let score = if on { 0.91 } else { 0.0001 * (i as f64 + 1.0) };
            scores.insert(c.to_string(), json!(score));
            let types = match *c {
                "self-harm"
                | "self-harm/instructions"
                | "self-harm/intent"
                | "sexual"
                | "violence"
                | "violence/graphic" => json!(["text", "image"]),
                _ => json!(["text"]),
            };
            applied.insert(c.to_string(), types);
        }
        json!({
            "flagged": !flagged.is_empty(),
            "categories": categories,
            "category_scores": scores,
            "category_applied_input_types": applied,
        })
    }

    async fn moderations(
        State(seen): State<Seen>,
        headers: HeaderMap,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let auth = headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        seen.lock().unwrap().push((auth.clone(), body.clone()));
        if auth != format!("Bearer {KEY}") {
            return (
                StatusCode::UNAUTHORIZED,
                Json(json!({"error": {
                    "message": "Incorrect API key provided: sk-wrong. You can find your API key at https://platform.openai.com/account/api-keys.",
                    "type": "invalid_request_error", "param": null, "code": "invalid_api_key"
                }})),
            );
        }
        let inputs: Vec<String> = match &body["input"] {
            Value::String(s) => vec![s.clone()],
            Value::Array(items) => items
                .iter()
                .map(|v| v.as_str().unwrap_or_default().to_string())
                .collect(),
            _ => {
                return (
                    StatusCode::BAD_REQUEST,
                    Json(
                        json!({"error": {"message": "input is required", "type": "invalid_request_error"}}),
                    ),
                );
            }
        };
        let n = seen.lock().unwrap().len();
        (
            StatusCode::OK,
            Json(json!({
                "id": format!("modr-{n}"),
                "model": body["model"].as_str().unwrap_or("omni-moderation-latest"),
                "results": inputs.iter().map(|t| result(t)).collect::<Vec<_>>(),
            })),
        )
    }

    /// Starts the server; returns its base URL (`http://127.0.0.1:<port>/v1`).
    pub async fn start() -> (String, Seen) {
        let seen: Seen = Arc::default();
        let app = axum::Router::new()
            .route("/v1/moderations", post(moderations))
            .with_state(seen.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/v1"), seen)
    }
}

fn moderation(
    base_url: &str,
    exit: kit::middleware::moderation::ExitBehavior,
) -> kit::middleware::moderation::ModerationMiddleware {
    let config = kit::Config {
        openai_api_key: Some(moderation_api::KEY.into()),
        openai_base_url: Some(base_url.into()),
        ..kit::Config::default()
    };
    kit::middleware::moderation::ModerationMiddleware::new(&config)
        .unwrap()
        .exit_behavior(exit)
}

const VIOLENCE: &str =
    "I'm sorry, but I can't comply with that request. It was flagged for violence.";

#[tokio::test]
async fn moderation_error_fails_the_run_with_stage_and_categories() {
    use kit::middleware::moderation::ExitBehavior;
    let (url, seen) = moderation_api::start().await;
    let model = ScriptedModel::new([Message::assistant("never")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(moderation(&url, ExitBehavior::Error))
        .build()
        .unwrap();
    let err = agent
        .invoke("I want to hurt myself and attack them")
        .await
        .unwrap_err();
    match err.moderation_flagged() {
        Some(ModerationFlagged {
            stage,
            categories,
            message,
            ..
        }) => {
            assert_eq!(stage, "input");
            assert_eq!(categories, &["self-harm", "self-harm/intent", "violence"]);
            assert_eq!(
                message,
                "I'm sorry, but I can't comply with that request. It was flagged for self harm, \
                 self harm intent, violence."
            );
        }
        None => panic!("expected ModerationFlagged, got {err:?}"),
    }
    assert_eq!(err.kind(), "vendor_moderation_violation");
    assert_eq!(model.calls(), 0);
    // The request on the wire.
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].0, format!("Bearer {}", moderation_api::KEY));
    assert_eq!(
        requests[0].1,
        json!({"model": "omni-moderation-latest", "input": ["I want to hurt myself and attack them"]})
    );

    // Flagged output: stage `output`.
    let model = ScriptedModel::new([Message::assistant("Let's attack at dawn.")]);
    let agent = Agent::builder()
        .model(model)
        .middleware(moderation(&url, ExitBehavior::Error))
        .build()
        .unwrap();
    let err = agent.invoke("plan?").await.unwrap_err();
    assert!(
        matches!(err.moderation_flagged(), Some(ModerationFlagged { stage, categories, .. })
            if stage == "output" && categories == &["violence"]),
        "{err:?}"
    );
}

#[tokio::test]
async fn moderation_end_stops_the_run_with_the_violation_message() {
    use kit::middleware::moderation::ExitBehavior;
    let (url, _seen) = moderation_api::start().await;
    // Flagged input: the model is never called; the user message stays.
    let model = ScriptedModel::new([Message::assistant("never")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(moderation(&url, ExitBehavior::End))
        .build()
        .unwrap();
    let state = agent
        .invoke("attack the server")
        .await
        .unwrap()
        .into_state();
    assert_eq!(model.calls(), 0);
    let texts: Vec<String> = state.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["attack the server", VIOLENCE]);

    // Flagged output: the violation message follows the flagged answer, whose tool calls do
    // not run.
    let log: Log = Arc::default();
    let model = ScriptedModel::new([Message::assistant_with_tool_calls(
        "We attack now.",
        vec![ToolCall::with_id("c1", "launch", json!({}))],
    )]);
    let agent = Agent::builder()
        .model(model)
        .tool(recording_tool("launch", &log))
        .middleware(moderation(&url, ExitBehavior::End))
        .build()
        .unwrap();
    let state = agent.invoke("status?").await.unwrap().into_state();
    assert_eq!(state.final_text(), VIOLENCE);
    assert_eq!(state.messages[1].text(), "We attack now.");
    assert!(log.lock().unwrap().is_empty());
    // The call that did not run still has its one result, so the thread stays valid.
    assert_eq!(state.messages.len(), 4);
    assert_eq!(state.messages[2].tool_call_id.as_deref(), Some("c1"));
    assert!(state.messages[2].is_error());
    assert!(state.messages[2].text().contains("flagged"));
    assert!(state.pending_tool_calls().is_empty());
}

#[tokio::test]
async fn moderation_replace_swaps_flagged_content_and_goes_on() {
    use kit::middleware::moderation::ExitBehavior;
    let (url, seen) = moderation_api::start().await;
    let reader = Tool::from_fn("read", "Reads.", json!({"type": "object"}), |_, _| async {
        Ok::<_, ToolError>("page says: attack at noon")
    });
    let model = ScriptedModel::new([
        calls(&[("c1", "read", json!({})), ("c2", "read", json!({}))]),
        Message::assistant("Summary: they will attack."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(reader)
        .middleware(
            moderation(&url, ExitBehavior::Replace)
                .check_tool_results(true)
                .violation_message("[removed: {categories}]"),
        )
        .build()
        .unwrap();
    let state = agent
        .invoke("Summarise, then attack the plan")
        .await
        .unwrap()
        .into_state();
    // The input was replaced and the model still ran on it.
    assert_eq!(state.messages[0].text(), "[removed: violence]");
    assert_eq!(
        model.requests()[0].messages[0].text(),
        "[removed: violence]"
    );
    // Both tool results were replaced before the model saw them.
    let second: Vec<String> = model.requests()[1]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect();
    assert_eq!(second, ["[removed: violence]", "[removed: violence]"]);
    // The answer was replaced in place.
    assert_eq!(state.messages.last().unwrap().text(), "[removed: violence]");
    assert_eq!(state.messages.len(), 5);
    // One request per hook: input; output (tool calls, empty text: not sent); tool results
    // batched; the last answer. The user message was not sent again.
    let inputs: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|(_, b)| b["input"].clone())
        .collect();
    assert_eq!(
        inputs,
        [
            json!(["Summarise, then attack the plan"]),
            json!(["page says: attack at noon", "page says: attack at noon"]),
            json!(["Summary: they will attack."]),
        ]
    );
}

#[tokio::test]
async fn moderation_failures_are_clear_errors() {
    use kit::middleware::moderation::{ExitBehavior, ModerationError, ModerationMiddleware};
    let (url, _seen) = moderation_api::start().await;
    // A wrong key: the endpoint's 401 fails the run with a hint.
    let model = ScriptedModel::new([Message::assistant("never")]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(moderation(&url, ExitBehavior::End).api_key("sk-wrong"))
        .build()
        .unwrap();
    let err = agent.invoke("hello").await.unwrap_err();
    let text = err.to_string();
    assert!(
        matches!(&err, AgentError::Middleware { middleware, .. } if middleware == "OpenAIModerationMiddleware"),
        "{err:?}"
    );
    assert!(text.contains("HTTP 401"), "{text}");
    assert!(text.contains("Incorrect API key provided"), "{text}");
    assert!(text.contains("the key comes from OPENAI_API_KEY"), "{text}");
    assert!(!text.contains("sk-test-moderation"), "{text}");
    assert_eq!(model.calls(), 0, "unchecked input never reaches the model");

    // Nothing listening.
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("never")]))
        .middleware(
            moderation(&format!("http://{closed}/v1"), ExitBehavior::End)
                .http_client(kit::http::HttpClient::new().max_retries(0)),
        )
        .build()
        .unwrap();
    let err = agent.invoke("hello").await.unwrap_err();
    assert!(err.to_string().contains("connection failed"), "{err}");
    assert!(
        err.to_string().contains("check the URL and the network"),
        "{err}"
    );

    // No key at all: an error when the middleware is made.
    let err = ModerationMiddleware::new(&kit::Config::default()).unwrap_err();
    assert!(matches!(err, ModerationError::MissingApiKey));
    assert!(err.to_string().contains("OPENAI_API_KEY"));

    // The moderation call on its own.
    let mw = moderation(&url, ExitBehavior::End);
    let results = mw.moderate(&["hi", "attack"]).await.unwrap();
    assert_eq!(
        results.iter().map(|r| r.flagged).collect::<Vec<_>>(),
        [false, true]
    );
    assert_eq!(
        results[1].category_applied_input_types["violence"],
        ["text", "image"]
    );
}

// ---------------------------------------------------------------------------------------------
// A custom guardrail: before_agent / after_agent with jump_to end

#[tokio::test]
async fn topic_filter_ends_off_topic_requests_and_replaces_off_topic_answers() {
    use kit::middleware::guardrail::TopicFilter;
    const REFUSAL: &str = "I can only help with cooking.";
    let model = ScriptedModel::new([
        Message::assistant("Simmer for 20 minutes."),
        Message::assistant("Salt it. By the way, buy Crypto!"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(
            TopicFilter::new(REFUSAL)
                .block(["crypto", "stock tips"])
                .check_output(true),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("cooking");
    // Off topic: ends before the model with the refusal; the question stays in the thread.
    let state = agent
        .invoke("Any stock tips?")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(model.calls(), 0);
    let texts: Vec<String> = state.messages.iter().map(Message::text).collect();
    assert_eq!(texts, ["Any stock tips?", REFUSAL]);
    // On topic: the model answers.
    let state = agent
        .invoke("How long for the sauce?")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.final_text(), "Simmer for 20 minutes.");
    // An answer that drifts off topic is replaced by the refusal (same message, in place).
    let state = agent
        .invoke("And seasoning?")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.final_text(), REFUSAL);
    assert_eq!(state.messages.len(), 6);
    assert_eq!(model.calls(), 2);
}
