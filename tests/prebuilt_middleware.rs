//! The prebuilt middleware of LangChain 1.x, by name: model fallback (over the mock providers'
//! real error bodies on 127.0.0.1), model and tool retry, model- and tool-call limits, context
//! editing, Anthropic prompt caching, the LLM tool selector and the model router. Each is
//! checked for what it does, what it must not do, and how it fails.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use kit::agent::{Agent, AgentError, AgentState};
use kit::middleware::call_limits::{
    ExitBehavior, ModelCallLimitExceeded, ModelCallLimitMiddleware, ToolCallLimitExceeded,
    ToolCallLimitMiddleware,
};
use kit::middleware::context_editing::ContextEditingMiddleware;
use kit::middleware::fallback::ModelFallbackMiddleware;
use kit::middleware::prompt_caching::{
    AnthropicPromptCachingMiddleware, PromptCachingUnsupported, UnsupportedModel,
};
use kit::middleware::retry::{
    ModelRetryMiddleware, OnFailure, ToolRetryExhausted, ToolRetryMiddleware,
};
use kit::middleware::router::{InvalidRoute, ModelRoutingMiddleware};
use kit::middleware::tool_selector::{AlwaysIncludeMissing, LLMToolSelectorMiddleware};
use kit::model::anthropic::CacheTtl;
use kit::model::{ModelError, ModelOptions};
use kit::testing::{ScriptStep, ScriptedModel};
use kit::tool::{Tool, ToolError};
use kit::{EventKind, MemoryCheckpointer, Message, Role, RunOptions, ToolCall};
use kit_testing::mock::anthropic::{self, MockAnthropic};
use kit_testing::mock::openai::{self, MockOpenAi};
use serde_json::{Value, json};

fn no_provider_retries() -> ModelOptions {
    ModelOptions::default().retries(0)
}

fn calls(list: &[(&str, &str)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.iter()
            .map(|(id, name)| ToolCall::with_id(*id, *name, json!({"q": "x"})))
            .collect(),
    )
}

fn tool(name: &str) -> Tool {
    let name_owned = name.to_string();
    Tool::from_fn(
        name,
        format!("The {name} tool."),
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        move |_args: Value, _ctx| {
            let name = name_owned.clone();
            async move { Ok::<_, ToolError>(format!("{name} result")) }
        },
    )
}

/// A tool that fails `failures` times, then answers; counts its runs.
fn flaky(failures: usize, runs: Arc<AtomicUsize>) -> Tool {
    Tool::from_fn(
        "flaky",
        "Sometimes fails.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        move |_args: Value, _ctx| {
            let n = runs.fetch_add(1, Ordering::SeqCst);
            async move {
                if n < failures {
                    Err(ToolError::new("service unavailable"))
                } else {
                    Ok("fine".to_string())
                }
            }
        },
    )
}

fn tool_texts(state: &AgentState) -> Vec<String> {
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Model fallback

#[tokio::test]
async fn fallback_moves_on_after_429_500_and_529_from_the_anthropic_api() {
    for (error, kind) in [
        (anthropic::rate_limited(0), "rate_limited"),
        (anthropic::api_error(), "server"),
        (anthropic::overloaded(), "server"),
    ] {
        let primary = MockAnthropic::start().await.unwrap();
        let backup = MockOpenAi::start().await.unwrap();
        primary.enqueue(error);
        backup.enqueue(openai::text_stream(&["from the ", "backup"]));
        let agent = Agent::builder()
            .model(primary.model("claude-haiku-4-5"))
            .model_opts(no_provider_retries())
            .middleware(ModelFallbackMiddleware::new([backup.model("gpt-4o-mini")]))
            .build()
            .unwrap();
        let mut stream = agent.stream_events("Hi", &RunOptions::default());
        let mut switched = None;
        let mut answered_by = None;
        while let Some(event) = stream.next().await {
            if event.kind() == EventKind::Middleware
                && event.name == "ModelFallbackMiddleware.fallback"
            {
                switched = Some(event.data.to_json());
            }
            if event.kind() == EventKind::ModelEnd {
                answered_by = Some(event.name.clone());
            }
            assert_ne!(
                event.kind(),
                EventKind::Error,
                "{kind}: {:?}",
                event.data.to_json()
            );
        }
        let switched = switched.unwrap_or_else(|| panic!("{kind}: no fallback event"));
        assert_eq!(switched["error"], kind);
        assert_eq!(switched["failed"], "claude-haiku-4-5");
        assert_eq!(switched["next"], "gpt-4o-mini");
        assert_eq!(answered_by.as_deref(), Some("gpt-4o-mini"));
        assert_eq!(primary.request_count(), 1);
        assert_eq!(backup.request_count(), 1);
    }
}

#[tokio::test]
async fn fallback_answer_is_kept_and_every_model_failing_returns_the_last_error() {
    let primary = MockAnthropic::start().await.unwrap();
    let second = MockAnthropic::start().await.unwrap();
    let third = MockOpenAi::start().await.unwrap();
    primary.enqueue(anthropic::overloaded());
    second.enqueue(anthropic::api_error());
    third.enqueue(openai::rate_limited(0));
    let agent = Agent::builder()
        .model(primary.model("claude-a"))
        .model_opts(no_provider_retries())
        .middleware(
            ModelFallbackMiddleware::new([second.model("claude-b")]).model(third.model("gpt-c")),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    assert!(
        matches!(err, AgentError::Model(ModelError::RateLimited { .. })),
        "the last model's error: {err}"
    );
    assert_eq!(
        (
            primary.request_count(),
            second.request_count(),
            third.request_count()
        ),
        (1, 1, 1)
    );
}

#[tokio::test]
async fn fallback_does_not_trigger_on_success_nor_on_errors_it_was_told_to_keep() {
    // Success: the backup is never asked.
    let primary = MockAnthropic::start().await.unwrap();
    let backup = MockOpenAi::start().await.unwrap();
    primary.enqueue(anthropic::json(anthropic::text_message("primary")));
    let agent = Agent::builder()
        .model(primary.model("claude-a"))
        .model_opts(no_provider_retries())
        .middleware(ModelFallbackMiddleware::new([backup.model("gpt")]))
        .build()
        .unwrap();
    assert_eq!(
        agent.invoke("Hi").await.unwrap().state().final_text(),
        "primary"
    );
    assert_eq!(backup.request_count(), 0);

    // A wrong key is not transient: with `fall_back_on(is_transient)` the run fails at once.
    primary.enqueue(anthropic::unauthorized());
    let agent = Agent::builder()
        .model(primary.model("claude-a"))
        .model_opts(no_provider_retries())
        .middleware(
            ModelFallbackMiddleware::new([backup.model("gpt")])
                .fall_back_on(ModelError::is_transient),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    assert!(matches!(
        err,
        AgentError::Model(ModelError::Authentication { .. })
    ));
    assert_eq!(backup.request_count(), 0);

    // No fallback models is a build error.
    let empty: [ScriptedModel; 0] = [];
    let err = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(ModelFallbackMiddleware::new(empty))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("no fallback models"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Model retry

#[tokio::test]
async fn model_retry_retries_529_until_an_answer_and_not_a_bad_request() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::overloaded());
    server.enqueue(anthropic::rate_limited(0));
    server.enqueue(anthropic::json(anthropic::text_message("third time")));
    let retry = || {
        ModelRetryMiddleware::new()
            .max_retries(2)
            .initial_delay(Duration::ZERO)
            .jitter(false)
    };
    let agent = Agent::builder()
        .model(server.model("claude"))
        .model_opts(no_provider_retries())
        .middleware(retry())
        .build()
        .unwrap();
    assert_eq!(
        agent.invoke("Hi").await.unwrap().state().final_text(),
        "third time"
    );
    assert_eq!(server.request_count(), 3);

    // A 400 is not transient: one attempt, then the anchor's message (on_failure=continue).
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::error(
        400,
        "invalid_request_error",
        "messages: bad",
    ));
    let agent = Agent::builder()
        .model(server.model("claude"))
        .model_opts(no_provider_retries())
        .middleware(retry())
        .build()
        .unwrap();
    let out = agent.invoke("Hi").await.unwrap();
    assert_eq!(server.request_count(), 1);
    assert!(
        out.state()
            .final_text()
            .starts_with("Model call failed after 1 attempt with bad_request: "),
        "{}",
        out.state().final_text()
    );
}

#[tokio::test]
async fn model_retry_exhausted_continues_or_raises_as_configured() {
    let fail = || {
        ScriptStep::Fail(ModelError::Server {
            provider: "scripted".into(),
            status: 500,
            message: "Internal server error".into(),
        })
    };
    let model = ScriptedModel::new([fail(), fail(), fail()]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(ModelRetryMiddleware::new().initial_delay(Duration::ZERO))
        .build()
        .unwrap();
    let out = agent.invoke("Hi").await.unwrap();
    assert_eq!(model.calls(), 3, "the first call and 2 retries");
    assert!(
        out.state()
            .final_text()
            .starts_with("Model call failed after 3 attempts with server: ")
    );

    let model = ScriptedModel::new([fail(), fail()]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(
            ModelRetryMiddleware::new()
                .max_retries(1)
                .initial_delay(Duration::ZERO)
                .on_failure(OnFailure::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    assert!(
        matches!(
            err,
            AgentError::Model(ModelError::Server { status: 500, .. })
        ),
        "the last error, as it was: {err}"
    );
    assert_eq!(model.calls(), 2);

    // A custom message.
    let model = ScriptedModel::new([fail()]);
    let agent = Agent::builder()
        .model(model)
        .middleware(
            ModelRetryMiddleware::new()
                .max_retries(0)
                .on_failure(OnFailure::Message(Arc::new(|_| "Try again later.".into()))),
        )
        .build()
        .unwrap();
    assert_eq!(
        agent.invoke("Hi").await.unwrap().state().final_text(),
        "Try again later."
    );
}

/// A `Retry-After` within `max_delay` is waited and the call retried; one longer (a day)
/// ends the retries at once with the provider's error, instead of sleeping a day per retry.
#[tokio::test]
async fn a_retry_after_longer_than_max_delay_ends_the_retries() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::rate_limited(1));
    server.enqueue(openai::json(openai::completion("after a second")));
    server.enqueue(openai::rate_limited(86_400));
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .model_opts(no_provider_retries())
        .middleware(
            ModelRetryMiddleware::new()
                .initial_delay(Duration::ZERO)
                .max_delay(Duration::from_secs(5))
                .on_failure(OnFailure::Error),
        )
        .build()
        .unwrap();
    let out = agent.invoke("Hi").await.unwrap();
    assert_eq!(out.state().final_text(), "after a second");
    let err = tokio::time::timeout(Duration::from_secs(30), agent.invoke("Hi"))
        .await
        .expect("a day-long Retry-After is not waited")
        .unwrap_err();
    assert!(
        matches!(
            &err,
            AgentError::Model(ModelError::RateLimited { retry_after: Some(after), .. })
                if *after == Duration::from_secs(86_400)
        ),
        "{err}"
    );
    assert_eq!(server.request_count(), 3, "no retry after the day-long ask");
}

// ---------------------------------------------------------------------------------------------
// Tool retry

#[tokio::test]
async fn tool_retry_reruns_failed_calls_and_not_invalid_arguments() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        calls(&[("c1", "flaky")]),
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id("c2", "flaky", json!({"q": 42}))],
        ),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(flaky(2, runs.clone()))
        .middleware(ToolRetryMiddleware::new().initial_delay(Duration::ZERO))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    let texts = tool_texts(out.state());
    assert_eq!(texts[0], "fine", "failed twice, then answered");
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert!(texts[1].contains("invalid arguments"), "{}", texts[1]);
    assert_eq!(
        runs.load(Ordering::SeqCst),
        3,
        "invalid arguments are not retried"
    );
}

#[tokio::test]
async fn tool_retry_exhausted_tells_the_model_or_stops_the_run() {
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([calls(&[("c1", "flaky")]), Message::assistant("gave up")]);
    let agent = Agent::builder()
        .model(model)
        .tool(flaky(100, runs.clone()))
        .middleware(ToolRetryMiddleware::new().initial_delay(Duration::ZERO))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(
        tool_texts(out.state()),
        [
            "Tool 'flaky' failed after 3 attempts with failed: service unavailable. Please try again."
        ]
    );
    assert_eq!(out.state().final_text(), "gave up");

    // Only the tools named are retried.
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([calls(&[("c1", "flaky")]), Message::assistant("ok")]);
    let agent = Agent::builder()
        .model(model)
        .tool(flaky(100, runs.clone()))
        .middleware(
            ToolRetryMiddleware::new()
                .tools(["other"])
                .initial_delay(Duration::ZERO),
        )
        .build()
        .unwrap();
    agent.invoke("Go").await.unwrap();
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // `Error`: the run stops before the next model call, with a typed error; the thread keeps a
    // valid conversation (the call has its error result).
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([calls(&[("c1", "flaky")]), Message::assistant("never")]);
    let checkpointer = Arc::new(MemoryCheckpointer::new());
    let agent = Agent::builder()
        .model(model.clone())
        .tool(flaky(100, runs.clone()))
        .checkpointer(checkpointer)
        .middleware(
            ToolRetryMiddleware::new()
                .max_retries(1)
                .initial_delay(Duration::ZERO)
                .on_failure(OnFailure::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Go").thread_id("t").await.unwrap_err();
    let exhausted = err.downcast_middleware::<ToolRetryExhausted>().unwrap();
    assert_eq!((exhausted.tool.as_str(), exhausted.attempts), ("flaky", 2));
    assert_eq!(model.calls(), 1, "the model is not called again");
    let opts = RunOptions::default().thread_id("t");
    let state = agent.graph().get_state(&opts).await.unwrap().unwrap();
    assert_eq!(tool_texts(&state.values).len(), 1);

    // Two parallel calls failing for good in one step: the run stops with the first one's
    // error (not a state error), and both results are kept.
    let runs = Arc::new(AtomicUsize::new(0));
    let model = ScriptedModel::new([
        calls(&[("c1", "flaky"), ("c2", "flaky")]),
        Message::assistant("never"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(flaky(100, runs.clone()))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .middleware(
            ToolRetryMiddleware::new()
                .max_retries(1)
                .initial_delay(Duration::ZERO)
                .on_failure(OnFailure::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Go").thread_id("t2").await.unwrap_err();
    let exhausted = err.downcast_middleware::<ToolRetryExhausted>();
    assert!(
        exhausted.is_some(),
        "a typed error, not a state error: {err}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        4,
        "two calls, two attempts each"
    );
    assert_eq!(model.calls(), 1);
    let opts = RunOptions::default().thread_id("t2");
    let state = agent.graph().get_state(&opts).await.unwrap().unwrap();
    assert_eq!(tool_texts(&state.values).len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Call limits

fn looping_model() -> ScriptedModel {
    let n = Arc::new(AtomicUsize::new(0));
    ScriptedModel::from_fn(move |_| {
        let i = n.fetch_add(1, Ordering::SeqCst);
        Ok(calls(&[(&format!("c{i}"), "search")]))
    })
}

#[tokio::test]
async fn model_call_limit_ends_or_raises_per_run_and_per_thread() {
    let model = looping_model();
    let agent = Agent::builder()
        .model(model.clone())
        .tool(tool("search"))
        .middleware(ModelCallLimitMiddleware::new().run_limit(2))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    assert_eq!(model.calls(), 2);
    assert_eq!(
        out.state().final_text(),
        "Model call limits exceeded: run limit (2/2)"
    );

    let agent = Agent::builder()
        .model(looping_model())
        .tool(tool("search"))
        .middleware(
            ModelCallLimitMiddleware::new()
                .run_limit(1)
                .exit_behavior(ExitBehavior::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Go").await.unwrap_err();
    assert_eq!(err.kind(), "model_call_limit_exceeded");
    let e = err.downcast_middleware::<ModelCallLimitExceeded>().unwrap();
    assert_eq!((e.run_count, e.run_limit), (1, Some(1)));

    // The thread limit counts across runs; the run limit starts again with each run.
    let model = ScriptedModel::from_fn(|_| Ok(Message::assistant("hello")));
    let agent = Agent::builder()
        .model(model.clone())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .middleware(ModelCallLimitMiddleware::new().thread_limit(2).run_limit(1))
        .build()
        .unwrap();
    assert_eq!(
        agent
            .invoke("1")
            .thread_id("t")
            .await
            .unwrap()
            .state()
            .final_text(),
        "hello"
    );
    assert_eq!(
        agent
            .invoke("2")
            .thread_id("t")
            .await
            .unwrap()
            .state()
            .final_text(),
        "hello",
        "the run limit of 1 does not carry over"
    );
    assert_eq!(
        agent
            .invoke("3")
            .thread_id("t")
            .await
            .unwrap()
            .state()
            .final_text(),
        "Model call limits exceeded: thread limit (2/2)"
    );
    assert_eq!(model.calls(), 2);
    // Another thread is not limited.
    assert_eq!(
        agent
            .invoke("1")
            .thread_id("u")
            .await
            .unwrap()
            .state()
            .final_text(),
        "hello"
    );
}

#[tokio::test]
async fn tool_call_limit_blocks_only_the_calls_over_the_limit_and_continues() {
    let model = ScriptedModel::new([
        calls(&[
            ("s1", "search"),
            ("s2", "search"),
            ("s3", "search"),
            ("w1", "weather"),
        ]),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([tool("search"), tool("weather")])
        .middleware(ToolCallLimitMiddleware::for_tool("search").run_limit(2))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    // As in LangChain, the blocked call is answered right after the answer, before the tools
    // run the others.
    assert_eq!(
        tool_texts(out.state()),
        [
            "Tool call limit exceeded. Do not call 'search' again.",
            "search result",
            "search result",
            "weather result",
        ]
    );
    assert_eq!(out.state().final_text(), "done");
    let blocked = out
        .state()
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("s3"));
    assert!(blocked.unwrap().is_error());
}

/// A tool-call limit holds in subagents: the general-purpose subagent (which has the parent's
/// tools) may make only the calls the parent had left, and what it made counts toward the
/// parent's run. One email in all, however the work is delegated.
#[tokio::test]
async fn a_tool_call_limit_holds_through_a_subagent() {
    let sent = Arc::new(AtomicUsize::new(0));
    let send_email = Tool::from_fn(
        "send_email",
        "Sends an email.",
        json!({"type": "object"}),
        {
            let sent = sent.clone();
            move |_args: Value, _ctx| {
                let sent = sent.clone();
                async move {
                    sent.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>("sent")
                }
            }
        },
    );
    let model = ScriptedModel::new([
        // The parent delegates.
        Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::with_id(
                "t1",
                "task",
                json!({"description": "Email everyone", "subagent_type": "general-purpose"}),
            )],
        ),
        // The subagent sends one, then tries a second.
        calls(&[("e1", "send_email")]),
        calls(&[("e2", "send_email")]),
        Message::assistant("sent what I could"),
        // Back in the parent: its own try is over the limit too.
        calls(&[("e3", "send_email")]),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(send_email)
        .general_purpose_subagent(true)
        .middleware(ToolCallLimitMiddleware::for_tool("send_email").run_limit(1))
        .build()
        .unwrap();
    let out = agent.invoke("Email everyone").await.unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1, "one email in all");
    let blocked = "Tool call limit exceeded. Do not call 'send_email' again.";
    let texts = tool_texts(out.state());
    assert_eq!(texts.last().map(String::as_str), Some(blocked), "{texts:?}");
    // The subagent's second try was blocked where it ran.
    let child_results: Vec<String> = model.requests()[3]
        .messages
        .iter()
        .filter(|m| m.role == kit::message::Role::Tool)
        .map(Message::text)
        .collect();
    assert_eq!(child_results, ["sent", blocked]);
    assert_eq!(out.state().final_text(), "done");
}

/// Two `task` calls of one answer run their subagents at once: together they may make only
/// the calls the parent had left (each once got the whole allowance).
#[tokio::test]
async fn a_tool_call_limit_holds_through_parallel_subagents() {
    let sent = Arc::new(AtomicUsize::new(0));
    let send_email = Tool::from_fn(
        "send_email",
        "Sends an email.",
        json!({"type": "object"}),
        {
            let sent = sent.clone();
            move |_args: Value, _ctx| {
                let sent = sent.clone();
                async move {
                    sent.fetch_add(1, Ordering::SeqCst);
                    Ok::<_, ToolError>("sent")
                }
            }
        },
    );
    let task = |id: &str| {
        ToolCall::with_id(
            id,
            "task",
            json!({"description": "Email one person", "subagent_type": "general-purpose"}),
        )
    };
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls("", vec![task("t1"), task("t2")]),
        calls(&[("e1", "send_email")]),
        calls(&[("e2", "send_email")]),
        Message::assistant("child done"),
        Message::assistant("child done"),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(send_email)
        .general_purpose_subagent(true)
        .middleware(ToolCallLimitMiddleware::for_tool("send_email").run_limit(1))
        .build()
        .unwrap();
    let out = agent.invoke("Email two people").await.unwrap();
    assert_eq!(sent.load(Ordering::SeqCst), 1, "one email in all");
    assert_eq!(out.state().final_text(), "done");
}

/// An answer with 20,000 calls over a limit of 2: each blocked call is answered once, from a
/// set, and only the 2 allowed run (every blocked call once re-read the whole blocked list).
#[tokio::test]
async fn tool_call_limit_blocks_thousands_of_calls_in_one_pass() {
    let n = 20_000;
    let ids: Vec<String> = (0..n).map(|i| format!("s{i}")).collect();
    let list: Vec<(&str, &str)> = ids.iter().map(|id| (id.as_str(), "search")).collect();
    let model = ScriptedModel::new([calls(&list), Message::assistant("done")]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([tool("search")])
        .max_calls_per_answer(n)
        .middleware(ToolCallLimitMiddleware::for_tool("search").run_limit(2))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    let texts = tool_texts(out.state());
    assert_eq!(texts.len(), n);
    assert_eq!(texts.iter().filter(|t| *t == "search result").count(), 2);
    assert_eq!(out.state().final_text(), "done");
}

/// A call the limiter blocked stays blocked when the run pauses before the limiter's
/// `after_model` (a batched review after it in the chain) and is resumed in another run: the
/// blocked calls belong to the answer, not to the run. With `End`, the run still ends.
#[tokio::test]
async fn a_blocked_call_stays_blocked_across_a_review_pause_and_resume() {
    use kit::middleware::review::{Decision, HumanReviewMiddleware, resume_review};
    let searches = Arc::new(AtomicUsize::new(0));
    let counted = searches.clone();
    let search = Tool::from_fn(
        "search",
        "Searches.",
        json!({"type": "object", "properties": {"q": {"type": "string"}}}),
        move |_args: Value, _ctx| {
            counted.fetch_add(1, Ordering::SeqCst);
            async { Ok::<_, ToolError>("search result") }
        },
    );
    // An agent whose answer calls `search` twice (one over the limit) and `email` (reviewed),
    // with the review's hooks before or after the limiter's; and its model.
    let reviewed = |exit: ExitBehavior, review_first: bool, last: &str| {
        let model = ScriptedModel::new([
            calls(&[("s1", "search"), ("s2", "search"), ("e1", "email")]),
            Message::assistant(last),
        ]);
        let limiter = ToolCallLimitMiddleware::for_tool("search")
            .run_limit(1)
            .exit_behavior(exit);
        let review = HumanReviewMiddleware::new().interrupt_on("email", true);
        let builder = Agent::builder()
            .model(model.clone())
            .tools([search.clone(), tool("email")])
            .checkpointer(Arc::new(MemoryCheckpointer::new()));
        let agent = if review_first {
            builder.middleware(review).middleware(limiter)
        } else {
            builder.middleware(limiter).middleware(review)
        }
        .build()
        .unwrap();
        (model, agent)
    };
    for review_first in [true, false] {
        searches.store(0, Ordering::SeqCst);
        let (_, agent) = reviewed(ExitBehavior::Continue, review_first, "done");
        let opts = RunOptions::new().thread_id("t");
        let paused = agent.invoke("Go").options(&opts).await.unwrap();
        assert!(paused.is_interrupted(), "the email waits for review");
        let done = agent
            .resume(resume_review([Decision::approve()]))
            .options(&opts)
            .await
            .unwrap();
        assert_eq!(searches.load(Ordering::SeqCst), 1, "s2 never ran");
        let s2 = done
            .state()
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some("s2"))
            .unwrap();
        assert!(s2.is_error());
        assert_eq!(
            s2.text(),
            "Tool call limit exceeded. Do not call 'search' again."
        );
        assert_eq!(done.state().final_text(), "done");
    }

    for review_first in [true, false] {
        searches.store(0, Ordering::SeqCst);
        let (model, agent) = reviewed(ExitBehavior::End, review_first, "never");
        let opts = RunOptions::new().thread_id("t");
        let mut out = agent.invoke("Go").options(&opts).await.unwrap();
        if out.is_interrupted() {
            out = agent
                .resume(resume_review([Decision::approve()]))
                .options(&opts)
                .await
                .unwrap();
        }
        assert!(
            out.state().final_text().contains("tool call limit reached"),
            "review first: {review_first}: {}",
            out.state().final_text()
        );
        assert_eq!(searches.load(Ordering::SeqCst), 0, "the run ended first");
        assert_eq!(model.calls(), 1);
    }
}

/// Gives every answer a new id on its way out, as a middleware that rebuilds the message
/// would.
struct NewAnswerId;

#[kit::async_trait]
impl kit::agent::Middleware for NewAnswerId {
    fn name(&self) -> &str {
        "NewAnswerId"
    }
    fn hooks(&self) -> &[kit::agent::Hook] {
        &[]
    }
    async fn wrap_model_call(
        &self,
        request: kit::model::ModelRequest,
        _rt: &kit::agent::Runtime,
        next: kit::agent::ModelNext<'_>,
    ) -> Result<kit::agent::ModelExecution, AgentError> {
        let mut execution = next.call(request).await?;
        let old = &execution.response.message;
        let mut renewed =
            Message::assistant_with_tool_calls(old.content.clone(), old.tool_calls.clone());
        renewed.usage = old.usage;
        execution.response.message = renewed;
        Ok(execution)
    }
}

/// An `End` limiter ends the run even when a middleware outside it gave the answer a new id
/// (the blocked calls are then found by their ids in the latest answer).
#[tokio::test]
async fn an_end_limiter_ends_the_run_when_the_answer_gets_a_new_id() {
    for renew_first in [true, false] {
        let model = ScriptedModel::new([
            calls(&[("s1", "search"), ("s2", "search")]),
            Message::assistant("never"),
        ]);
        let limiter = ToolCallLimitMiddleware::for_tool("search")
            .run_limit(1)
            .exit_behavior(ExitBehavior::End);
        let builder = Agent::builder()
            .model(model.clone())
            .tools([tool("search")]);
        let agent = if renew_first {
            builder.middleware(NewAnswerId).middleware(limiter)
        } else {
            builder.middleware(limiter).middleware(NewAnswerId)
        }
        .build()
        .unwrap();
        let out = agent.invoke("Go").await.unwrap();
        assert_eq!(model.calls(), 1, "renew first: {renew_first}");
        assert!(out.state().final_text().contains("tool call limit reached"));
    }
}

/// A `Continue` limiter of one tool answers its blocked calls first; an `End` limiter of all
/// tools whose blocked calls were among them still ends the run.
#[tokio::test]
async fn an_end_limiter_ends_the_run_even_when_another_answered_its_blocked_calls() {
    for end_first in [true, false] {
        let model = ScriptedModel::new([
            calls(&[
                ("w", "weather"),
                ("s1", "search"),
                ("s2", "search"),
                ("s3", "search"),
            ]),
            Message::assistant("never"),
        ]);
        let searches = ToolCallLimitMiddleware::for_tool("search").run_limit(2);
        let all = ToolCallLimitMiddleware::all_tools()
            .run_limit(3)
            .exit_behavior(ExitBehavior::End);
        let builder = Agent::builder()
            .model(model.clone())
            .tools([tool("search"), tool("weather")]);
        let agent = if end_first {
            builder.middleware(all).middleware(searches)
        } else {
            builder.middleware(searches).middleware(all)
        }
        .build()
        .unwrap();
        let out = agent.invoke("Go").await.unwrap();
        assert_eq!(model.calls(), 1, "the run ended after the first answer");
        assert!(
            out.state().final_text().contains("Tool call limit reached"),
            "{}",
            out.state().final_text()
        );
        assert_eq!(
            tool_texts(out.state()).len(),
            4,
            "every call is answered once"
        );
    }
}

#[tokio::test]
async fn tool_call_limit_end_and_error_and_the_thread_count() {
    // End: the run stops after the answer; the other call of the batch is answered too.
    let model = ScriptedModel::new([
        calls(&[("s1", "search")]),
        calls(&[("s2", "search"), ("w1", "weather")]),
        Message::assistant("never"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([tool("search"), tool("weather")])
        .middleware(
            ToolCallLimitMiddleware::for_tool("search")
                .run_limit(1)
                .exit_behavior(ExitBehavior::End),
        )
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    assert_eq!(model.calls(), 2);
    assert_eq!(
        tool_texts(out.state()),
        [
            "search result",
            "Tool call limit exceeded. Do not call 'search' again.",
            "Execution stopped before this tool call could run because another tool call in \
             the same batch exceeded the limit.",
        ]
    );
    assert_eq!(
        out.state().final_text(),
        "'search' tool call limit reached: run limit exceeded (2/1 calls)."
    );

    // Error, all tools.
    let agent = Agent::builder()
        .model(looping_model())
        .tool(tool("search"))
        .middleware(
            ToolCallLimitMiddleware::all_tools()
                .run_limit(2)
                .exit_behavior(ExitBehavior::Error),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Go").await.unwrap_err();
    let e = err.downcast_middleware::<ToolCallLimitExceeded>().unwrap();
    assert_eq!(
        (e.run_count, e.run_limit, e.tool_name.clone()),
        (3, Some(2), None)
    );

    // The thread count carries over; blocked calls do not count toward it.
    let model = ScriptedModel::new([
        calls(&[("a", "search")]),
        Message::assistant("one"),
        calls(&[("b", "search")]),
        Message::assistant("two"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(tool("search"))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .middleware(ToolCallLimitMiddleware::all_tools().thread_limit(1))
        .build()
        .unwrap();
    agent.invoke("1").thread_id("t").await.unwrap();
    let out = agent.invoke("2").thread_id("t").await.unwrap();
    assert_eq!(
        tool_texts(out.state()),
        [
            "search result",
            "Tool call limit exceeded. Do not make additional tool calls."
        ]
    );

    // Bad configurations are build errors.
    let err = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(ToolCallLimitMiddleware::all_tools())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("at least one limit"), "{err}");
    let err = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(
            ToolCallLimitMiddleware::all_tools()
                .run_limit(5)
                .thread_limit(2),
        )
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("cannot exceed thread_limit"),
        "{err}"
    );
}

// ---------------------------------------------------------------------------------------------
// Context editing

#[tokio::test]
async fn context_editing_clears_old_results_in_the_request_only() {
    let big = "x".repeat(2_000);
    let big_tool = {
        let big = big.clone();
        Tool::from_fn(
            "fetch",
            "Fetches a page.",
            json!({"type": "object"}),
            move |_args: Value, _ctx| {
                let big = big.clone();
                async move { Ok::<_, ToolError>(big) }
            },
        )
    };
    let model = ScriptedModel::new([
        calls(&[("f1", "fetch")]),
        calls(&[("f2", "fetch")]),
        calls(&[("f3", "fetch")]),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(big_tool)
        .middleware(ContextEditingMiddleware::new().trigger(1_000).keep(1))
        .build()
        .unwrap();
    let out = agent.invoke("Go").await.unwrap();
    let requests = model.requests();
    // Second request: one result, kept (the most recent). Under the trigger anyway.
    assert_eq!(tool_texts_of(&requests[1].messages), [big.as_str()]);
    // Last request: three results of 2,000 chars; the two older ones are cleared.
    assert_eq!(
        tool_texts_of(&requests[3].messages),
        ["[cleared]", "[cleared]", big.as_str()]
    );
    // Each cleared result still answers its call.
    let ids: Vec<_> = requests[3]
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.tool_call_id.clone().unwrap())
        .collect();
    assert_eq!(ids, ["f1", "f2", "f3"]);
    // The state keeps every result.
    assert_eq!(tool_texts(out.state()), [big.clone(), big.clone(), big]);
}

fn tool_texts_of(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(Message::text)
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Anthropic prompt caching

#[tokio::test]
async fn prompt_caching_marks_system_tools_and_last_message_on_the_wire() {
    let server = MockAnthropic::start().await.unwrap();
    server.enqueue(anthropic::json(anthropic::text_message("cached")));
    let agent = Agent::builder()
        .model(server.model("claude-sonnet-4-5"))
        .system_prompt("You are terse.")
        .tools([tool("search"), tool("weather")])
        .middleware(AnthropicPromptCachingMiddleware::new().ttl(CacheTtl::OneHour))
        .build()
        .unwrap();
    agent.invoke("Hi").await.unwrap();
    let body = &server.requests()[0].body;
    let control = json!({"type": "ephemeral", "ttl": "1h"});
    assert_eq!(body["system"][0]["cache_control"], control);
    assert_eq!(body["tools"][1]["cache_control"], control);
    assert!(body["tools"][0].get("cache_control").is_none());
    let last = body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(
        last["content"].as_array().unwrap().last().unwrap()["cache_control"],
        control
    );
    assert!(
        body.get("kit_cache_control").is_none(),
        "kit's hint is not sent"
    );

    // Below `min_messages_to_cache`: no breakpoint at all.
    server.enqueue(anthropic::json(anthropic::text_message("plain")));
    let agent = Agent::builder()
        .model(server.model("claude-sonnet-4-5"))
        .middleware(AnthropicPromptCachingMiddleware::new().min_messages_to_cache(3))
        .build()
        .unwrap();
    agent.invoke("Hi").await.unwrap();
    assert!(!server.requests()[1].body_text.contains("cache_control"));
}

#[tokio::test]
async fn prompt_caching_leaves_other_models_alone_or_refuses_them() {
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue(openai::json(openai::completion("hi")));
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .middleware(
            AnthropicPromptCachingMiddleware::new()
                .unsupported_model_behavior(UnsupportedModel::Ignore),
        )
        .build()
        .unwrap();
    agent.invoke("Hi").await.unwrap();
    let sent = &server.requests()[0].body_text;
    assert!(!sent.contains("cache_control"), "{sent}");

    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .middleware(
            AnthropicPromptCachingMiddleware::new()
                .unsupported_model_behavior(UnsupportedModel::Raise),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    let e = err
        .downcast_middleware::<PromptCachingUnsupported>()
        .unwrap();
    assert_eq!(e.provider, "openai");
    assert_eq!(server.request_count(), 1, "nothing sent");
}

// ---------------------------------------------------------------------------------------------
// LLM tool selector

#[tokio::test]
async fn tool_selector_offers_only_the_chosen_tools_once_per_user_message() {
    let selector = ScriptedModel::new([
        Message::assistant(r#"{"tools": ["weather", "search", "news"]}"#),
        Message::assistant(r#"{"tools": ["calendar"]}"#),
    ]);
    let model = ScriptedModel::new([
        calls(&[("w", "weather")]),
        Message::assistant("sunny"),
        Message::assistant("booked"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools(["weather", "search", "news", "calendar", "help"].map(tool))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .middleware(
            LLMToolSelectorMiddleware::new()
                .model(selector.clone())
                .max_tools(2)
                .always_include(["help"]),
        )
        .build()
        .unwrap();
    agent
        .invoke("Weather in Paris?")
        .thread_id("t")
        .await
        .unwrap();
    let offered = |i: usize| -> Vec<String> {
        model.requests()[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect()
    };
    assert_eq!(offered(0), ["weather", "search", "help"]);
    assert_eq!(
        offered(1),
        ["weather", "search", "help"],
        "same user message: same tools"
    );
    assert_eq!(selector.calls(), 1);
    // What the selector saw: the instructions with the maximum, the user's message, and the
    // tools it may choose (not the always-included one).
    let asked = &selector.requests()[0];
    assert!(
        asked
            .system
            .as_deref()
            .unwrap()
            .contains("only the first 2 will be used")
    );
    assert_eq!(asked.messages.last().unwrap().text(), "Weather in Paris?");
    let schema = asked.response_format.as_ref().unwrap().schema.to_string();
    assert!(schema.contains("calendar") && !schema.contains("help"));

    agent.invoke("Book a meeting").thread_id("t").await.unwrap();
    assert_eq!(offered(2), ["calendar", "help"]);
    assert_eq!(selector.calls(), 2);
}

#[tokio::test]
async fn tool_selector_fails_on_an_invented_tool_and_skips_agents_without_tools() {
    let selector = ScriptedModel::new([Message::assistant(r#"{"tools": ["teleport"]}"#)]);
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .tools([tool("search")])
        .middleware(LLMToolSelectorMiddleware::new().model(selector))
        .build()
        .unwrap();
    let err = agent.invoke("Go").await.unwrap_err();
    assert_eq!(err.kind(), "tool_selection");
    assert!(
        err.to_string()
            .contains("Model selected invalid tools: teleport")
    );

    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .tools([tool("search")])
        .middleware(LLMToolSelectorMiddleware::new().always_include(["serach"]))
        .build()
        .unwrap();
    let err = agent.invoke("Go").await.unwrap_err();
    let e = err.downcast_middleware::<AlwaysIncludeMissing>().unwrap();
    assert_eq!(e.missing, ["serach"]);

    let selector = ScriptedModel::new(Vec::<Message>::new());
    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("no tools needed")]))
        .middleware(LLMToolSelectorMiddleware::new().model(selector.clone()))
        .build()
        .unwrap();
    agent.invoke("Hi").await.unwrap();
    assert_eq!(selector.calls(), 0);
}

// ---------------------------------------------------------------------------------------------
// Model router

#[tokio::test]
async fn router_sends_the_whole_request_to_the_chosen_model() {
    let decider = ScriptedModel::new([
        Message::assistant(r#"{"route": "reasoning"}"#),
        Message::assistant(r#"{"route": "fast"}"#),
    ]);
    let fast = ScriptedModel::new([Message::assistant("quick")]).named("fast-model");
    let deep = ScriptedModel::new([
        calls(&[("s", "search")]),
        Message::assistant("thought through"),
    ])
    .named("deep-model");
    let agent = Agent::builder()
        .model(fast.clone())
        .tool(tool("search"))
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .middleware(
            ModelRoutingMiddleware::new(decider.clone())
                .route("fast", fast.clone(), "Direct lookups")
                .route("reasoning", deep.clone(), "Trade-offs"),
        )
        .build()
        .unwrap();
    let out = agent
        .invoke("Compare the designs")
        .thread_id("t")
        .await
        .unwrap();
    assert_eq!(out.state().final_text(), "thought through");
    assert_eq!(deep.calls(), 2, "the tool loop stays on the routed model");
    assert_eq!(decider.calls(), 1);
    assert_eq!(fast.calls(), 0);
    let asked = &decider.requests()[0];
    let system = asked.system.as_deref().unwrap();
    assert!(
        system.starts_with("Choose the least expensive model likely to complete the user's task.")
    );
    assert!(
        system.ends_with(
            "Model routing criteria:\n{\"fast\": \"Direct lookups\", \"reasoning\": \"Trade-offs\"}"
        ),
        "{system}"
    );

    // The next user message is routed again.
    let out = agent
        .invoke("What time is it?")
        .thread_id("t")
        .await
        .unwrap();
    assert_eq!(out.state().final_text(), "quick");
    assert_eq!(decider.calls(), 2);
}

#[tokio::test]
async fn router_unknown_answers_use_the_fallback_route_or_fail() {
    let fast = ScriptedModel::new([Message::assistant("quick")]);
    let agent = Agent::builder()
        .model(fast.clone())
        .middleware(
            ModelRoutingMiddleware::new(ScriptedModel::new([Message::assistant(
                r#"{"route": "gpt-9"}"#,
            )]))
            .route("fast", fast.clone(), "Everything")
            .fallback_route("fast"),
        )
        .build()
        .unwrap();
    assert_eq!(
        agent.invoke("Hi").await.unwrap().state().final_text(),
        "quick"
    );

    let agent =
        Agent::builder()
            .model(fast.clone())
            .middleware(
                ModelRoutingMiddleware::new(ScriptedModel::new([Message::assistant("no idea")]))
                    .route("fast", fast, "Everything"),
            )
            .build()
            .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    // Not JSON at all: a malformed answer of the decision model.
    assert_eq!(err.kind(), "malformed_response", "{err}");

    let agent = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(
            ModelRoutingMiddleware::new(ScriptedModel::new([Message::assistant(
                r#"{"route": "gpt-9"}"#,
            )]))
            .route(
                "fast",
                ScriptedModel::new([Message::assistant("x")]),
                "Everything",
            ),
        )
        .build()
        .unwrap();
    let err = agent.invoke("Hi").await.unwrap_err();
    let e = err.downcast_middleware::<InvalidRoute>().unwrap();
    assert_eq!(e.got, "gpt-9");

    let err = Agent::builder()
        .model(ScriptedModel::new([Message::assistant("x")]))
        .middleware(ModelRoutingMiddleware::new(ScriptedModel::new([
            Message::assistant("x"),
        ])))
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("routes"), "{err}");
}

// ---------------------------------------------------------------------------------------------
// Traces

#[tokio::test]
async fn fallback_retry_and_selection_show_in_the_trace() {
    use kit::trace::{Collector, RunKind, Tracer};
    let collector = Collector::new();
    let tracer = Tracer::new().with_exporter(collector.clone());
    let overloaded = || {
        ScriptStep::Fail(ModelError::Server {
            provider: "scripted".into(),
            status: 529,
            message: "Overloaded".into(),
        })
    };
    let primary = ScriptedModel::new([overloaded(), overloaded()]).named("primary");
    let backup =
        ScriptedModel::new([calls(&[("s", "search")]), Message::assistant("done")]).named("backup");
    let selector =
        ScriptedModel::new([Message::assistant(r#"{"tools": ["search"]}"#)]).named("cheap");
    let agent = Agent::builder()
        .model(primary)
        .tools([tool("search"), tool("weather")])
        .middleware(ModelFallbackMiddleware::new([backup]))
        .middleware(
            ModelRetryMiddleware::new()
                .max_retries(1)
                .initial_delay(Duration::ZERO)
                .on_failure(OnFailure::Error),
        )
        .middleware(LLMToolSelectorMiddleware::new().model(selector))
        .build()
        .unwrap();
    agent.invoke("Find it").tracer(tracer).await.unwrap();
    let runs = collector.runs();
    let named = |name: &str, kind: RunKind| {
        runs.iter()
            .filter(|r| r.name == name && r.kind == kind)
            .count()
    };
    // The first model call: the primary failed twice (a retry), then the backup answered. The
    // model run names the model that answered, and says what happened.
    let first = runs
        .iter()
        .find(|r| {
            r.kind == RunKind::Model && r.metadata.contains_key("ModelFallbackMiddleware.fallback")
        })
        .unwrap_or_else(|| panic!("{runs:#?}"));
    assert_eq!(first.name, "backup");
    assert_eq!(first.model.as_ref().unwrap().model, "backup");
    assert_eq!(
        first.metadata["ModelFallbackMiddleware.fallback"]["failed"],
        "primary"
    );
    assert_eq!(
        named("ModelFallbackMiddleware:backup", RunKind::Middleware),
        2
    );
    assert_eq!(named("ModelRetryMiddleware:2", RunKind::Middleware), 1);
    // The selection call is a model run of its own (of the selecting model), once.
    assert_eq!(named("cheap", RunKind::Model), 1);
}

// ---------------------------------------------------------------------------------------------
// The DSL

#[kit::agent(
    model = ScriptedModel::new([ScriptStep::Fail(ModelError::Server {
        provider: "scripted".into(),
        status: 500,
        message: "boom".into(),
    })]),
    middleware = [
        ModelFallbackMiddleware::new([ScriptedModel::new([Message::assistant("fallback")])]),
        ModelCallLimitMiddleware::new().run_limit(5),
    ],
)]
struct Resilient;

#[tokio::test]
async fn the_prebuilt_middleware_go_in_the_dsls_middleware_list() {
    let agent = Resilient::agent().unwrap();
    assert_eq!(
        agent.invoke("Hi").await.unwrap().state().final_text(),
        "fallback"
    );
}

// ---------------------------------------------------------------------------------------------
// Side calls over the wire

#[tokio::test]
async fn selection_and_routing_calls_go_over_the_providers_wire_formats() {
    // The tool selector asks an OpenAI model for JSON matching the selection schema.
    let openai_server = MockOpenAi::start().await.unwrap();
    openai_server.enqueue(openai::json(openai::completion(
        r#"{"tools": ["weather"]}"#,
    )));
    // The router asks an Anthropic model for a route.
    let anthropic_server = MockAnthropic::start().await.unwrap();
    anthropic_server.enqueue(anthropic::json(anthropic::text_message(
        r#"{"route": "main"}"#,
    )));
    let model = ScriptedModel::new([Message::assistant("sunny")]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([tool("weather"), tool("search")])
        .middleware(
            ModelRoutingMiddleware::new(anthropic_server.model("claude-haiku-4-5")).route(
                "main",
                model.clone(),
                "Everything",
            ),
        )
        .middleware(LLMToolSelectorMiddleware::new().model(openai_server.model("gpt-4o-mini")))
        .build()
        .unwrap();
    assert_eq!(
        agent.invoke("Weather?").await.unwrap().state().final_text(),
        "sunny"
    );

    let selection = &openai_server.requests()[0].body;
    let format = &selection["response_format"];
    assert_eq!(format["type"], "json_schema");
    assert_eq!(format["json_schema"]["name"], "ToolSelectionResponse");
    let items = &format["json_schema"]["schema"]["properties"]["tools"]["items"]["anyOf"];
    assert_eq!(items[0]["const"], "weather");
    assert_eq!(items[1]["const"], "search");
    assert_eq!(selection["messages"][1]["content"], "Weather?");

    let routing = &anthropic_server.requests()[0].body;
    let system = routing["system"].as_str().unwrap();
    assert!(
        system.contains("Model routing criteria:\n{\"main\": \"Everything\"}"),
        "{system}"
    );
    assert!(
        system.contains("\"enum\":[\"main\"]"),
        "the schema is in the prompt: {system}"
    );
    let offered: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(offered, ["weather"]);
}
