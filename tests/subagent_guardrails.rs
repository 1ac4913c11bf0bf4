//! Subagents inherit their parent's guardrails: a tool gated by review cannot run unreviewed by
//! delegating it through `task`, redaction covers what a child stores and returns, and a spec
//! overrides inheritance only explicitly.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use kit::agent::{Agent, AgentBuilder};
use kit::checkpoint::SqliteCheckpointer;
use kit::middleware::pii::{PiiMiddleware, PiiType};
use kit::middleware::review::{
    self, Decision, HumanReviewMiddleware, ReviewRequest, resume_review,
};
use kit::middleware::subagents::SubagentSpec;
use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{MemoryCheckpointer, Message, Outcome, RunOptions, ToolCall};
use serde_json::json;

fn call(id: &str, name: &str, args: serde_json::Value) -> Message {
    Message::assistant_with_tool_calls("", vec![ToolCall::with_id(id, name, args)])
}

fn delegate(id: &str, subagent: &str, description: &str) -> Message {
    call(
        id,
        "task",
        json!({"subagent_type": subagent, "description": description}),
    )
}

/// A `send_email` tool that counts how often it really ran.
fn send_email(sent: &Arc<AtomicUsize>) -> Tool {
    let sent = sent.clone();
    Tool::from_fn(
        "send_email",
        "Sends an email.",
        json!({"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]}),
        move |args, _| {
            let sent = sent.clone();
            async move {
                sent.fetch_add(1, Ordering::SeqCst);
                Ok::<_, ToolError>(format!("sent to {}", args["to"].as_str().unwrap_or("?")))
            }
        },
    )
}

/// A parent whose `send_email` is gated, with the model scripted for parent and child alike
/// (a general-purpose child runs on the parent's model): delegate, send, report, finish.
fn gated_parent(sent: &Arc<AtomicUsize>, subagent: &str) -> (AgentBuilder, ScriptedModel) {
    let model = ScriptedModel::new([
        delegate(
            "t1",
            subagent,
            "Email ann@example.com that her refund went through.",
        ),
        call("e1", "send_email", json!({"to": "ann@example.com"})),
        Message::assistant("I emailed Ann."),
        Message::assistant("Done: Ann knows."),
    ]);
    let builder = Agent::builder()
        .model(model.clone())
        .tool(send_email(sent))
        .middleware(HumanReviewMiddleware::new().interrupt_on("send_email", true))
        .checkpointer(Arc::new(MemoryCheckpointer::new()));
    (builder, model)
}

#[tokio::test]
async fn a_gated_tool_delegated_to_the_general_purpose_subagent_waits_for_review_and_resumes_into_it()
 {
    let sent = Arc::new(AtomicUsize::new(0));
    let (builder, model) = gated_parent(&sent, "general-purpose");
    let agent = builder.general_purpose_subagent(true).build().unwrap();
    let opts = RunOptions::new().thread_id("gp");

    let out = agent.invoke("Tell Ann.").options(&opts).await.unwrap();
    let Outcome::Interrupted(paused) = out else {
        panic!("the child's call must wait for review, as the parent's would");
    };
    assert_eq!(
        sent.load(Ordering::SeqCst),
        0,
        "nothing sent before approval"
    );
    let interrupt = &paused.interrupts[0];
    assert_eq!(
        interrupt.namespace,
        ["task:general-purpose:t1"],
        "raised inside the child, which the namespace names"
    );
    assert_eq!(interrupt.node, "HumanInTheLoopMiddleware.after_model");
    let request = ReviewRequest::from_interrupt(interrupt).unwrap();
    assert_eq!(request.action_requests[0].name, "send_email");

    let done = agent
        .resume(resume_review([Decision::approve()]))
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(sent.load(Ordering::SeqCst), 1, "sent once, after approval");
    assert_eq!(done.final_text(), "Done: Ann knows.");
    let result = done
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("t1"))
        .unwrap();
    assert_eq!(result.text(), "I emailed Ann.");
    assert_eq!(
        model.calls(),
        4,
        "the child resumed where it paused, not from the start"
    );
}

#[tokio::test]
async fn a_rejected_call_inside_the_child_never_runs() {
    let sent = Arc::new(AtomicUsize::new(0));
    let (builder, _) = gated_parent(&sent, "mailer");
    let agent = builder
        .subagents([SubagentSpec::new("mailer", "Sends emails.")])
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("reject");
    let out = agent.invoke("Tell Ann.").options(&opts).await.unwrap();
    assert!(
        out.is_interrupted(),
        "a named spec without a tool list inherits the gate too"
    );
    agent
        .resume(resume_review([Decision::reject_with("not today")]))
        .options(&opts)
        .await
        .unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_spec_opts_out_only_explicitly() {
    let specs = [
        SubagentSpec::new("mailer", "Sends emails.").inherit_guardrails(false),
        SubagentSpec::new("mailer", "Sends emails.").without_guardrail(review::NAME),
        // Its own gates replace the parent's: here, no review of send_email.
        SubagentSpec::new("mailer", "Sends emails.").interrupt_on("send_email", false),
    ];
    for spec in specs {
        let sent = Arc::new(AtomicUsize::new(0));
        let (builder, _) = gated_parent(&sent, "mailer");
        let agent = builder.subagents([spec.clone()]).build().unwrap();
        let out = agent
            .invoke("Tell Ann.")
            .thread_id("opt-out")
            .await
            .unwrap();
        assert!(!out.is_interrupted(), "{spec:?}: opted out, so no review");
        assert_eq!(sent.load(Ordering::SeqCst), 1, "{spec:?}");
    }
    // Opting out of another guardrail keeps this one.
    let sent = Arc::new(AtomicUsize::new(0));
    let (builder, _) = gated_parent(&sent, "mailer");
    let agent = builder
        .subagents(
            [SubagentSpec::new("mailer", "Sends emails.").without_guardrail("PIIMiddleware")],
        )
        .build()
        .unwrap();
    let out = agent.invoke("Tell Ann.").thread_id("keep").await.unwrap();
    assert!(out.is_interrupted());
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_child_with_its_own_stricter_gates_keeps_them() {
    let sent = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        delegate("t1", "mailer", "Email Ann."),
        call("e1", "send_email", json!({"to": "ann@example.com"})),
    ]);
    // The parent does not review send_email; the child does.
    let agent = Agent::builder()
        .model(model)
        .tool(send_email(&sent))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .subagents([SubagentSpec::new("mailer", "Sends emails.").interrupt_on("send_email", true)])
        .build()
        .unwrap();
    let out = agent.invoke("Tell Ann.").thread_id("strict").await.unwrap();
    assert!(out.is_interrupted());
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn a_built_agent_as_child_must_carry_the_guardrails_or_opt_out() {
    let sent = Arc::new(AtomicUsize::new(0));
    let child = Agent::builder()
        .name("mailer")
        .model(ScriptedModel::new(Vec::<Message>::new()))
        .tool(send_email(&sent))
        .build()
        .unwrap();
    let (builder, _) = gated_parent(&sent, "mailer");
    let err = builder
        .subagents([SubagentSpec::from_agent(
            "mailer",
            "Sends emails.",
            child.clone(),
        )])
        .build()
        .unwrap_err()
        .to_string();
    assert!(err.contains("subagent `mailer`"), "{err}");
    assert!(err.contains("HumanInTheLoopMiddleware"), "{err}");
    assert!(err.contains("from_builder"), "says what to do: {err}");

    // Opting out is explicit, and then allowed.
    let (builder, _) = gated_parent(&sent, "mailer");
    assert!(
        builder
            .subagents([SubagentSpec::from_agent("mailer", "Sends emails.", child)
                .inherit_guardrails(false)])
            .build()
            .is_ok()
    );

    // As a builder, it gets them added.
    let (builder, _) = gated_parent(&sent, "mailer");
    let child = Agent::builder()
        .name("mailer")
        .model(ScriptedModel::new([
            call("e1", "send_email", json!({"to": "ann@example.com"})),
            Message::assistant("sent"),
        ]))
        .tool(send_email(&sent));
    let agent = builder
        .subagents([SubagentSpec::from_builder("mailer", "Sends emails.", child)])
        .build()
        .unwrap();
    let out = agent
        .invoke("Tell Ann.")
        .thread_id("builder")
        .await
        .unwrap();
    assert!(
        out.is_interrupted(),
        "the builder child got the parent's gate"
    );
    assert_eq!(sent.load(Ordering::SeqCst), 0);
}

/// The whole thread file, as bytes: what was stored, parent and child alike.
fn stored(path: &std::path::Path) -> String {
    let mut all = Vec::new();
    for suffix in ["", "-wal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if let Ok(bytes) = std::fs::read(&p) {
            all.extend(bytes);
        }
    }
    String::from_utf8_lossy(&all).into_owned()
}

/// A parent that redacts emails (input and tool results), a child that looks a customer up
/// and answers with the address it found.
fn redacting_parent(dir: &std::path::Path, spec: SubagentSpec) -> Agent {
    let model = ScriptedModel::new([
        delegate("t1", "clerk", "Who ordered A-7?"),
        call("l1", "lookup_customer", json!({"order": "A-7"})),
        Message::assistant("A-7 was ordered by ann@example.com."),
        Message::assistant("Found the customer."),
    ]);
    let lookup = Tool::from_fn(
        "lookup_customer",
        "Finds who placed an order.",
        json!({"type": "object", "properties": {"order": {"type": "string"}}}),
        |_, _| async { Ok::<_, ToolError>("customer: ann@example.com") },
    );
    Agent::builder()
        .model(model)
        .tool(lookup)
        .middleware(PiiMiddleware::new(PiiType::Email).apply_to_tool_results(true))
        .checkpointer(Arc::new(
            SqliteCheckpointer::open(dir.join("threads.sqlite")).unwrap(),
        ))
        .subagents([spec])
        .build()
        .unwrap()
}

#[tokio::test]
async fn redaction_covers_what_the_child_stores_and_what_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let agent = redacting_parent(
        dir.path(),
        SubagentSpec::new("clerk", "Looks customers up."),
    );
    let done = agent
        .invoke("Who ordered A-7?")
        .thread_id("pii")
        .await
        .unwrap()
        .into_state();
    let result = done
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("t1"))
        .unwrap();
    assert_eq!(result.text(), "A-7 was ordered by [REDACTED_EMAIL].");
    drop(agent);
    let file = stored(&dir.path().join("threads.sqlite"));
    assert!(
        file.contains("[REDACTED_EMAIL]"),
        "the scan reads the stored messages"
    );
    assert!(
        !file.contains("ann@example.com"),
        "the address is stored nowhere, child included"
    );

    // The control: a child that opts out stores and returns the address.
    let dir = tempfile::tempdir().unwrap();
    let agent = redacting_parent(
        dir.path(),
        SubagentSpec::new("clerk", "Looks customers up.").inherit_guardrails(false),
    );
    agent
        .invoke("Who ordered A-7?")
        .thread_id("pii")
        .await
        .unwrap();
    drop(agent);
    assert!(stored(&dir.path().join("threads.sqlite")).contains("ann@example.com"));
}
