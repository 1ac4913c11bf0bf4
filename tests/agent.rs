//! Agents with the scripted model: the loop, tool errors, malformed calls, hook order, jumps,
//! wrappers, memory and streaming.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kit::agent::{
    Agent, AgentError, AgentState, Hook, HookResult, HookUpdate, JumpTo, Middleware,
    ModelExecution, ModelNext, Runtime, ToolNext,
};
use kit::graph::Pause;
use kit::model::{ModelError, ModelRequest};
use kit::testing::{ScriptStep, ScriptedModel};
use kit::tool::{Tool, ToolContext, ToolError, ToolExecution, ToolHandler, ToolOutput};
use kit::{EventKind, MemoryCheckpointer, Message, Role, RunOptions, ToolCall};
use serde::Deserialize;
use serde_json::json;

/// Adds two integers.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
struct Add {
    /// First addend.
    a: i64,
    /// Second addend.
    b: i64,
}

impl ToolHandler for Add {
    type Output = i64;
    async fn run(self, _ctx: ToolContext) -> Result<i64, ToolError> {
        Ok(self.a + self.b)
    }
}

/// Looks up the weather of a city.
#[derive(kit::Tool, Deserialize, schemars::JsonSchema)]
struct Weather {
    city: String,
}

impl ToolHandler for Weather {
    type Output = String;
    async fn run(self, _ctx: ToolContext) -> Result<String, ToolError> {
        if self.city == "Atlantis" {
            return Err(ToolError::new("no weather station in Atlantis"));
        }
        Ok(format!("sunny in {}", self.city))
    }
}

fn calls(list: &[(&str, &str, serde_json::Value)]) -> Message {
    Message::assistant_with_tool_calls(
        "",
        list.iter()
            .map(|(id, name, args)| ToolCall::with_id(*id, *name, args.clone()))
            .collect(),
    )
}

fn tool_messages(state: &AgentState) -> Vec<&Message> {
    state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .collect()
}

#[tokio::test]
async fn parallel_tool_calls_run_and_results_keep_call_order() {
    let model = ScriptedModel::new([
        calls(&[
            ("c1", "weather", json!({"city": "Paris"})),
            ("c2", "add", json!({"a": 2, "b": 3})),
            ("c3", "weather", json!({"city": "Rome"})),
        ]),
        Message::assistant("Paris and Rome are sunny; 2+3=5."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([Add::tool(), Weather::tool()])
        .build()
        .unwrap();
    let out = agent.invoke("weather and sums").await.unwrap();
    let state = out.into_state();
    let results: Vec<(String, String)> = tool_messages(&state)
        .iter()
        .map(|m| (m.tool_call_id.clone().unwrap(), m.text()))
        .collect();
    assert_eq!(
        results,
        [
            ("c1".to_string(), "sunny in Paris".to_string()),
            ("c2".to_string(), "5".to_string()),
            ("c3".to_string(), "sunny in Rome".to_string()),
        ]
    );
    assert_eq!(state.final_text(), "Paris and Rome are sunny; 2+3=5.");
    // The second model call saw all three results.
    let second = &model.requests()[1];
    assert_eq!(second.messages.len(), 5);
    assert_eq!(second.tools.len(), 2);
}

#[tokio::test]
async fn tool_errors_and_malformed_calls_reach_the_model_which_recovers() {
    let model = ScriptedModel::new([
        calls(&[
            ("e1", "weather", json!({"city": "Atlantis"})),
            ("e2", "add", json!({"a": "two", "b": 3})),
            ("e3", "add", json!("{\"a\": 1,")),
            ("e4", "teleport", json!({})),
        ]),
        calls(&[("ok", "add", json!({"a": 2, "b": 3}))]),
        Message::assistant("Recovered: 5"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tools([Add::tool(), Weather::tool()])
        .build()
        .unwrap();
    let state = agent.invoke("try things").await.unwrap().into_state();
    let results = tool_messages(&state);
    assert_eq!(results.len(), 5, "every call got exactly one result");
    assert!(results[..4].iter().all(|m| m.is_error()));
    assert_eq!(results[0].text(), "Error: no weather station in Atlantis");
    assert!(
        results[1].text().contains("`a`: expected integer"),
        "{}",
        results[1].text()
    );
    assert!(
        results[2].text().contains("not valid JSON"),
        "{}",
        results[2].text()
    );
    assert!(
        results[3]
            .text()
            .contains("teleport is not a valid tool, try one of [add, weather]"),
        "{}",
        results[3].text()
    );
    assert_eq!(results[4].text(), "5");
    assert_eq!(state.final_text(), "Recovered: 5");
    // The model saw the error results and their status.
    let second = &model.requests()[1];
    assert!(second.messages.iter().filter(|m| m.is_error()).count() == 4);
}

/// Records every hook call into a shared log.
struct Recorder {
    name: &'static str,
    log: Arc<Mutex<Vec<String>>>,
}

#[kit::async_trait]
impl Middleware for Recorder {
    fn name(&self) -> &str {
        self.name
    }
    async fn before_agent(&self, _s: &AgentState, _rt: &Runtime) -> HookResult {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.before_agent", self.name));
        Ok(None)
    }
    async fn before_model(&self, _s: &AgentState, _rt: &Runtime) -> HookResult {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.before_model", self.name));
        Ok(None)
    }
    async fn after_model(&self, _s: &AgentState, _rt: &Runtime) -> HookResult {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.after_model", self.name));
        Ok(None)
    }
    async fn after_agent(&self, _s: &AgentState, _rt: &Runtime) -> HookResult {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.after_agent", self.name));
        Ok(None)
    }
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        _rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.wrap_model>", self.name));
        let r = next.call(request).await;
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.wrap_model<", self.name));
        r
    }
    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.wrap_tool>", self.name));
        let r = next.call(call, ctx).await;
        self.log
            .lock()
            .unwrap()
            .push(format!("{}.wrap_tool<", self.name));
        r
    }
}

#[tokio::test]
async fn parallel_tool_calls_run_concurrently() {
    // Both calls wait for each other at a barrier: run one after the other, they would never
    // get past it.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let meet = Tool::from_fn(
        "meet",
        "Waits for the other call.",
        json!({"type": "object"}),
        {
            let barrier = barrier.clone();
            move |_args, _ctx| {
                let barrier = barrier.clone();
                async move {
                    barrier.wait().await;
                    Ok::<_, ToolError>("met")
                }
            }
        },
    );
    let model = ScriptedModel::new([
        calls(&[("m1", "meet", json!({})), ("m2", "meet", json!({}))]),
        Message::assistant("both met"),
    ]);
    let agent = Agent::builder().model(model).tool(meet).build().unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        agent.invoke("meet twice"),
    )
    .await
    .expect("the two calls ran concurrently (sequential calls would wait forever)")
    .unwrap();
    let results: Vec<String> = out
        .state()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(results, ["met", "met"]);
    assert_eq!(out.state().final_text(), "both met");
}

/// `max_concurrency` (LangGraph's): 40 calls in one answer run at most 3 at a time, and give
/// the same results in call order as with no limit (which runs all 40 at once).
#[tokio::test]
async fn max_concurrency_bounds_the_calls_of_one_answer() {
    for (limit, expected_peak) in [(Some(3), 3), (None, 40)] {
        let running = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let peak = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let slow = Tool::from_fn("slow", "Takes a while.", json!({"type": "object"}), {
            let (running, peak) = (running.clone(), peak.clone());
            move |args, _ctx| {
                let (running, peak) = (running.clone(), peak.clone());
                async move {
                    use std::sync::atomic::Ordering::SeqCst;
                    let now = running.fetch_add(1, SeqCst) + 1;
                    peak.fetch_max(now, SeqCst);
                    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                    running.fetch_sub(1, SeqCst);
                    Ok::<_, ToolError>(format!("done {}", args["n"]))
                }
            }
        });
        let many: Vec<(String, serde_json::Value)> = (0..40)
            .map(|n| (format!("c{n}"), json!({"n": n})))
            .collect();
        let answer = Message::assistant_with_tool_calls(
            "",
            many.iter()
                .map(|(id, args)| ToolCall::with_id(id.clone(), "slow", args.clone()))
                .collect(),
        );
        let model = ScriptedModel::new([answer, Message::assistant("all done")]);
        let agent = Agent::builder().model(model).tool(slow).build().unwrap();
        let opts = match limit {
            Some(n) => RunOptions::new().max_concurrency(n),
            None => RunOptions::new(),
        };
        let out = agent.invoke("go").options(&opts).await.unwrap();
        let results: Vec<String> = tool_messages(out.state())
            .iter()
            .map(|m| m.text())
            .collect();
        let expected: Vec<String> = (0..40).map(|n| format!("done {n}")).collect();
        assert_eq!(results, expected, "{limit:?}");
        assert_eq!(
            peak.load(std::sync::atomic::Ordering::SeqCst),
            expected_peak,
            "{limit:?}"
        );
    }
    let from_config = RunOptions::from_config(&json!({"max_concurrency": 0}));
    assert_eq!(from_config.get_max_concurrency(), Some(1));

    // A place frees when its call ends, in any order: the first call waits for the last,
    // which can only start if the 38 between them take turns in the other place.
    let gate = Arc::new(tokio::sync::Notify::new());
    let wait = Tool::from_fn("wait", "Waits or opens.", json!({"type": "object"}), {
        let gate = gate.clone();
        move |args, _ctx| {
            let gate = gate.clone();
            async move {
                match args["role"].as_str() {
                    Some("first") => gate.notified().await,
                    Some("last") => gate.notify_one(),
                    _ => tokio::task::yield_now().await,
                }
                Ok::<_, ToolError>("ok")
            }
        }
    });
    let calls: Vec<ToolCall> = (0..40)
        .map(|n| {
            let role = match n {
                0 => "first",
                39 => "last",
                _ => "middle",
            };
            ToolCall::with_id(format!("w{n}"), "wait", json!({"role": role}))
        })
        .collect();
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls("", calls),
        Message::assistant("done"),
    ]);
    let agent = Agent::builder().model(model).tool(wait).build().unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        agent
            .invoke("go")
            .options(&RunOptions::new().max_concurrency(2)),
    )
    .await
    .expect("a finished call frees its place even while an earlier one still runs")
    .unwrap();
    assert_eq!(tool_messages(out.state()).len(), 40);
}

#[tokio::test]
async fn an_answer_with_too_many_tool_calls_runs_none_and_says_so() {
    // Up to the limit the calls run; one more and none runs, on the streamed path too.
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Tool::from_fn("count", "Counts.", json!({"type": "object"}), {
        let ran = ran.clone();
        move |_args, _ctx| {
            let ran = ran.clone();
            async move {
                ran.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                Ok::<_, ToolError>("ok")
            }
        }
    });
    let answer = |n: usize| {
        Message::assistant_with_tool_calls(
            "",
            (0..n)
                .map(|i| ToolCall::with_id(format!("c{i}"), "count", json!({})))
                .collect(),
        )
    };
    let agent = |n: usize| {
        let model = ScriptedModel::new([answer(n), Message::assistant("done")]);
        Agent::builder()
            .model(model)
            .tool(count.clone())
            .max_calls_per_answer(256)
            .build()
            .unwrap()
    };
    let out = agent(256).invoke("go").await.unwrap();
    assert_eq!(tool_messages(&out.into_state()).len(), 256);
    assert_eq!(ran.swap(0, std::sync::atomic::Ordering::SeqCst), 256);

    let err = agent(257).invoke("go").await.unwrap_err().to_string();
    assert!(
        err.contains("257 tool calls at once, more than the 256"),
        "{err}"
    );
    assert!(err.contains("max_calls_per_answer"), "{err}");
    let events: Vec<kit::Event> = agent(257)
        .stream_events("go", &RunOptions::new())
        .collect()
        .await;
    let end = events.last().unwrap().data.to_json();
    assert_eq!(end["kind"], "malformed_response", "{end}");
    assert!(
        end["message"].as_str().unwrap().contains("257 tool calls"),
        "{end}"
    );
    assert_eq!(ran.load(std::sync::atomic::Ordering::SeqCst), 0);
}

#[tokio::test]
async fn hooks_fire_in_the_documented_order() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let model = ScriptedModel::new([
        calls(&[("c", "add", json!({"a": 1, "b": 1}))]),
        Message::assistant("2"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .tool(Add::tool())
        .middleware(Recorder {
            name: "A",
            log: log.clone(),
        })
        .middleware(Recorder {
            name: "B",
            log: log.clone(),
        })
        .build()
        .unwrap();
    agent.invoke("1+1").await.unwrap();
    let log = log.lock().unwrap().clone();
    let turn = [
        "A.before_model",
        "B.before_model",
        "A.wrap_model>",
        "B.wrap_model>",
        "B.wrap_model<",
        "A.wrap_model<",
        "B.after_model",
        "A.after_model",
    ];
    let mut expected = vec!["A.before_agent", "B.before_agent"];
    expected.extend(turn);
    // The tool call, wrapped like the model call: the first middleware outermost.
    expected.extend([
        "A.wrap_tool>",
        "B.wrap_tool>",
        "B.wrap_tool<",
        "A.wrap_tool<",
    ]);
    expected.extend(turn);
    expected.extend(["B.after_agent", "A.after_agent"]);
    assert_eq!(log, expected);
}

/// Ends the run from a hook with a message.
struct Guard {
    hook: Hook,
    declared: bool,
}

#[kit::async_trait]
impl Middleware for Guard {
    fn name(&self) -> &str {
        "Guard"
    }
    fn hooks(&self) -> &[Hook] {
        std::slice::from_ref(&self.hook)
    }
    fn can_jump_to(&self, _hook: Hook) -> &[JumpTo] {
        if self.declared { &[JumpTo::End] } else { &[] }
    }
    async fn before_agent(&self, s: &AgentState, _rt: &Runtime) -> HookResult {
        let text = s.messages.last().map(Message::text).unwrap_or_default();
        if text.contains("crypto") {
            return Ok(Some(HookUpdate::end_with(Message::assistant(
                "I only talk about cooking.",
            ))));
        }
        Ok(None)
    }
    async fn after_agent(&self, s: &AgentState, _rt: &Runtime) -> HookResult {
        if s.final_text().contains("secret") {
            return Ok(Some(HookUpdate::end_with(Message::assistant(
                "[answer withheld by policy]",
            ))));
        }
        Ok(None)
    }
}

#[tokio::test]
async fn jump_to_end_from_before_agent_and_after_agent() {
    let model = ScriptedModel::new(Vec::<Message>::new());
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(Guard {
            hook: Hook::BeforeAgent,
            declared: true,
        })
        .build()
        .unwrap();
    let state = agent
        .invoke("tell me about crypto")
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.final_text(), "I only talk about cooking.");
    assert_eq!(model.calls(), 0, "the model was never called");

    let model = ScriptedModel::new([Message::assistant("the secret is 42")]);
    let agent = Agent::builder()
        .model(model)
        .middleware(Guard {
            hook: Hook::AfterAgent,
            declared: true,
        })
        .build()
        .unwrap();
    let state = agent
        .invoke("what is the secret?")
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.final_text(), "[answer withheld by policy]");

    // A jump the middleware did not declare is an error naming it.
    let agent = Agent::builder()
        .model(ScriptedModel::new(Vec::<Message>::new()))
        .middleware(Guard {
            hook: Hook::BeforeAgent,
            declared: false,
        })
        .build()
        .unwrap();
    let err = agent.invoke("crypto").await.unwrap_err();
    assert!(matches!(err, AgentError::UndeclaredJump { .. }), "{err}");
    assert!(err.to_string().contains("can_jump_to"));
}

/// Retries the model call once on a transient error.
struct RetryOnce;

#[kit::async_trait]
impl Middleware for RetryOnce {
    fn name(&self) -> &str {
        "RetryOnce"
    }
    fn hooks(&self) -> &[Hook] {
        &[]
    }
    async fn wrap_model_call(
        &self,
        request: ModelRequest,
        _rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        match next.call(request.clone()).await {
            Err(AgentError::Model(e)) if e.is_transient() => next.call(request).await,
            other => other,
        }
    }
}

#[tokio::test]
async fn wrap_model_call_can_retry() {
    let model = ScriptedModel::new([
        ScriptStep::Fail(ModelError::Server {
            provider: "scripted".into(),
            status: 503,
            message: "overloaded".into(),
        }),
        ScriptStep::Reply(Message::assistant("second time lucky")),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(RetryOnce)
        .build()
        .unwrap();
    let state = agent.invoke("hi").await.unwrap().into_state();
    assert_eq!(state.final_text(), "second time lucky");
    assert_eq!(model.calls(), 2);

    // Without the wrapper the typed model error reaches the caller.
    let model = ScriptedModel::new([ScriptStep::Fail(ModelError::Authentication {
        provider: "scripted".into(),
        message: "bad key".into(),
    })]);
    let agent = Agent::builder().model(model).build().unwrap();
    let err = agent.invoke("hi").await.unwrap_err();
    assert!(
        matches!(err, AgentError::Model(ModelError::Authentication { .. })),
        "{err:?}"
    );
}

#[tokio::test]
async fn memory_across_two_invokes_with_a_checkpointer() {
    let model = ScriptedModel::new([
        Message::assistant("Nice to meet you, Ada."),
        Message::assistant("Your name is Ada."),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("conversation-1");
    agent.invoke("I am Ada.").options(&opts).await.unwrap();
    let state = agent
        .invoke("What is my name?")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.messages.len(), 4);
    assert_eq!(state.final_text(), "Your name is Ada.");
    let second = &model.requests()[1];
    let texts: Vec<String> = second.messages.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        ["I am Ada.", "Nice to meet you, Ada.", "What is my name?"]
    );
    // Another thread starts fresh.
    let other = agent.invoke("hi").thread_id("conversation-2").await;
    assert!(other.is_err(), "the script has no third answer");
}

/// Asks the operator before every model call of a run.
struct Gate;

#[kit::async_trait]
impl Middleware for Gate {
    fn name(&self) -> &str {
        "Gate"
    }
    fn hooks(&self) -> &[Hook] {
        &[Hook::BeforeModel]
    }
    fn requires_checkpointer(&self) -> bool {
        true
    }
    async fn before_model(&self, _s: &AgentState, rt: &Runtime) -> HookResult {
        let answer = rt.interrupt(json!({"question": "call the model?"}))?;
        let note = format!("operator: {}", answer.as_str().unwrap_or("?"));
        Ok(Some(HookUpdate::messages(vec![Message::user(note)])))
    }
}

#[tokio::test]
async fn a_hook_pauses_the_run_with_an_interrupt_and_resumes_with_the_answer() {
    let model = ScriptedModel::new([Message::assistant("Going ahead.")]);
    let err = Agent::builder()
        .model(model.clone())
        .middleware(Gate)
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("needs a checkpointer"), "{err}");
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(Gate)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("gate");
    let paused = agent.invoke("go").options(&opts).await.unwrap();
    assert!(paused.is_interrupted());
    assert_eq!(paused.interrupts()[0].value["question"], "call the model?");
    assert_eq!(paused.interrupts()[0].node, "Gate.before_model");
    assert_eq!(model.calls(), 0, "the model waits for the operator");
    let done = agent
        .resume(kit::Resume::value("yes"))
        .options(&opts)
        .await
        .unwrap()
        .done()
        .unwrap();
    assert_eq!(done.final_text(), "Going ahead.");
    let seen: Vec<String> = model.requests()[0]
        .messages
        .iter()
        .map(Message::text)
        .collect();
    assert_eq!(seen, ["go", "operator: yes"]);
}

#[tokio::test]
async fn streamed_event_sequence() {
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "Let me add.",
            vec![ToolCall::with_id("c1", "add", json!({"a": 20, "b": 22}))],
        ),
        Message::assistant("The answer is 42"),
    ]);
    let agent = Agent::builder()
        .name("calc")
        .model(model)
        .tool(Add::tool())
        .build()
        .unwrap();
    let events: Vec<kit::Event> = agent
        .stream_events("20+22?", &RunOptions::new())
        .collect()
        .await;
    let kinds: Vec<String> = events
        .iter()
        .filter(|e| e.kind() != EventKind::ModelDelta)
        .map(|e| format!("{}:{}", e.kind(), e.name))
        .collect();
    assert_eq!(
        kinds,
        [
            "run_start:calc",
            "node_start:model",
            "model_start:scripted",
            "model_end:scripted",
            "node_end:model",
            "node_start:tools",
            "tool_start:add",
            "tool_end:add",
            "node_end:tools",
            "node_start:model",
            "model_start:scripted",
            "model_end:scripted",
            "node_end:model",
            "run_end:calc",
        ]
    );
    let deltas: String = events
        .iter()
        .filter(|e| e.kind() == EventKind::ModelDelta)
        .filter_map(|e| e.data.to_json()["text"].as_str().map(String::from))
        .collect::<Vec<_>>()
        .join("");
    assert_eq!(deltas, "Let me add.The answer is 42");
    let tool_end = events
        .iter()
        .find(|e| e.kind() == EventKind::ToolEnd)
        .unwrap();
    assert_eq!(tool_end.data.to_json()["result"], "42");
    assert_eq!(tool_end.metadata.tool_call_id.as_deref(), Some("c1"));
    let arg_deltas: Vec<&kit::Event> = events
        .iter()
        .filter(|e| {
            e.kind() == EventKind::ModelDelta && e.data.to_json().get("tool_call").is_some()
        })
        .collect();
    assert_eq!(arg_deltas.len(), 2, "tool-call arguments arrive in chunks");
    let end = events.last().unwrap();
    assert_eq!(end.data.to_json()["status"], "done");
}

#[tokio::test]
async fn build_errors_are_clear() {
    let err = Agent::builder().build().unwrap_err();
    assert!(err.to_string().contains("has no model"), "{err}");
    let err = Agent::builder()
        .model(ScriptedModel::new(Vec::<Message>::new()))
        .tools([Add::tool(), Add::tool()])
        .build()
        .unwrap_err();
    assert!(
        err.to_string().contains("two tools are named `add`"),
        "{err}"
    );
    let no_tools =
        ScriptedModel::new(Vec::<Message>::new()).with_profile(kit::model::ModelProfile {
            tool_calling: false,
            ..Default::default()
        });
    let err = Agent::builder()
        .model(no_tools)
        .tool(Add::tool())
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("cannot call tools"), "{err}");
    let err = Agent::builder().model("nosuch:model").build().unwrap_err();
    assert!(
        err.to_string().contains("unknown model provider `nosuch`"),
        "{err}"
    );
}

#[tokio::test]
async fn a_tool_can_update_state() {
    let counter = Tool::from_fn(
        "remember",
        "Remembers a fact.",
        json!({"type": "object", "properties": {"fact": {"type": "string"}}, "required": ["fact"]}),
        |args, _ctx| async move {
            let fact = args["fact"].as_str().unwrap_or_default().to_string();
            Ok::<_, ToolError>(ToolOutput::text("noted").with_update(
                kit::agent::AgentStateUpdate::new().todos(vec![kit::agent::Todo {
                    content: fact,
                    status: kit::agent::TodoStatus::Pending,
                }]),
            ))
        },
    );
    let model = ScriptedModel::new([
        calls(&[("r", "remember", json!({"fact": "buy milk"}))]),
        Message::assistant("ok"),
    ]);
    let agent = Agent::builder().model(model).tool(counter).build().unwrap();
    let state = agent.invoke("remember milk").await.unwrap().into_state();
    assert_eq!(state.todos.len(), 1);
    assert_eq!(state.todos[0].content, "buy milk");
}

/// Declared with the attribute macro: model, prompt, tools, async subagents.
#[kit::agent(
    name = "calculator",
    model = ScriptedModel::new([
        calls(&[("m1", "add", json!({"a": 40, "b": 2}))]),
        Message::assistant("42"),
    ]),
    system_prompt = "You add numbers.",
    tools = [Add::tool()],
    async_subagents<
        researcher(description = "Slow research", graph_id = "research", url = "http://127.0.0.1:9"),
        writer(description = "Writes", graph_id = "writer", headers = {"Authorization": "Bearer t"}),
    >,
)]
struct Calculator;

#[tokio::test]
async fn agent_attribute_declares_a_working_agent() {
    let agent = Calculator::agent().unwrap();
    assert_eq!(agent.name(), "calculator");
    let tools = agent.tool_names();
    assert!(tools.contains(&"add"));
    assert!(tools.contains(&"start_async_task"));
    assert!(tools.contains(&"list_async_tasks"));
    let state = Calculator::invoke("40 + 2?")
        .options(&RunOptions::new())
        .await
        .unwrap()
        .into_state();
    assert_eq!(state.final_text(), "42");
    // build() makes a fresh instance each time; agent() is shared.
    assert!(std::ptr::eq(Calculator::agent().unwrap(), agent));
}

/// A short report.
#[derive(Deserialize, schemars::JsonSchema, Debug, PartialEq)]
struct Report {
    title: String,
    score: u8,
}

/// An invalid answer through the format tool, beside another call: each call of the message
/// gets exactly one result (the other call is not run), and the corrected answer is taken.
#[tokio::test]
async fn an_invalid_structured_answer_beside_another_call_answers_both() {
    use kit::agent::{StructuredOutput, StructuredStrategy};
    let model = ScriptedModel::new([
        calls(&[
            ("w1", "weather", json!({"city": "Paris"})),
            ("r1", "Report", json!({"title": "Q3"})),
        ]),
        calls(&[("r2", "Report", json!({"title": "Q3", "score": 7}))]),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .tool(Weather::tool())
        .response_format(StructuredOutput::of::<Report>().strategy(StructuredStrategy::Tool))
        .build()
        .unwrap();
    let out = agent.invoke("Rate Q3.").await.unwrap();
    let report: Report = out.structured().unwrap().unwrap();
    assert_eq!(report.score, 7);
    let second = &model.requests()[1];
    let results: Vec<(String, bool)> = second
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.clone().unwrap(), m.is_error()))
        .collect();
    assert_eq!(
        results,
        [("r1".to_string(), true), ("w1".to_string(), true)],
        "one result per call, before the model is asked again"
    );
    let w1 = second
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("w1"))
        .unwrap();
    assert!(w1.text().starts_with("Not run"), "{}", w1.text());
    assert!(!w1.text().contains("cancelled"), "{}", w1.text());
}
