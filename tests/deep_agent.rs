//! Deep-agent capabilities: planning, sync subagents, compaction and overflow recovery.

use std::sync::Arc;

use futures::StreamExt;
use kit::agent::{Agent, AgentState, AgentStateUpdate, FileData, Todo, TodoStatus};
use kit::middleware::compaction::{CompactionMiddleware, safe_cutoff};
use kit::middleware::subagents::SubagentSpec;
use kit::middleware::todos::TodoMiddleware;
use kit::model::ModelError;
use kit::testing::{ScriptStep, ScriptedModel};
use kit::tool::{Tool, ToolError, ToolOutput};
use kit::{EventKind, MemoryCheckpointer, Message, Outcome, Resume, Role, RunOptions, ToolCall};
use proptest::prelude::*;
use serde_json::json;

fn call(id: &str, name: &str, args: serde_json::Value) -> Message {
    Message::assistant_with_tool_calls("", vec![ToolCall::with_id(id, name, args)])
}

#[tokio::test]
async fn write_todos_replaces_the_plan_and_reports_it() {
    let model = ScriptedModel::new([
        call(
            "t1",
            "write_todos",
            json!({"todos": [{"content": "a", "status": "in_progress"}, {"content": "b", "status": "pending"}]}),
        ),
        call(
            "t2",
            "write_todos",
            json!({"todos": [{"content": "a", "status": "completed"}]}),
        ),
        Message::assistant("planned"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .middleware(TodoMiddleware::new())
        .build()
        .unwrap();
    let state = agent.invoke("plan").await.unwrap().into_state();
    assert_eq!(
        state.todos,
        [Todo {
            content: "a".into(),
            status: TodoStatus::Completed
        }]
    );
    let first = state
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("t1"))
        .unwrap();
    assert_eq!(
        first.text(),
        "Updated todo list to [{'content': 'a', 'status': 'in_progress'}, {'content': 'b', 'status': 'pending'}]"
    );
    let request = &model.requests()[0];
    assert!(request.system.as_deref().unwrap().contains("write_todos"));
    // An invalid status is refused by the schema, with a message the model can act on.
    let model = ScriptedModel::new([
        call(
            "x",
            "write_todos",
            json!({"todos": [{"content": "a", "status": "done"}]}),
        ),
        Message::assistant("ok"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .middleware(TodoMiddleware::new())
        .build()
        .unwrap();
    let state = agent.invoke("plan").await.unwrap().into_state();
    let result = &state.messages[2];
    assert!(result.is_error());
    assert!(
        result.text().contains("`todos[0].status`: must be one of"),
        "{}",
        result.text()
    );
}

#[tokio::test]
async fn two_write_todos_calls_in_one_turn_are_both_refused() {
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "p1",
                    "update_plan",
                    json!({"todos": [{"content": "x", "status": "pending"}]}),
                ),
                ToolCall::with_id(
                    "p2",
                    "update_plan",
                    json!({"todos": [{"content": "y", "status": "pending"}]}),
                ),
            ],
        ),
        Message::assistant("sorry"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .middleware(TodoMiddleware::new().tool_name("update_plan"))
        .build()
        .unwrap();
    let state = agent.invoke("plan twice").await.unwrap().into_state();
    assert!(state.todos.is_empty(), "neither call applied");
    let results: Vec<&Message> = state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .collect();
    assert_eq!(results.len(), 2, "each call got exactly one result");
    for r in results {
        assert!(r.is_error());
        assert!(
            r.text()
                .contains("should never be called multiple times in parallel")
        );
    }
    // Both calls were answered by the hook; the model saw the errors and answered.
    assert_eq!(state.final_text(), "sorry");
}

/// Another middleware may answer a call of the same answer first (a call limit's block, a
/// review's rejection): the two plan calls are still both refused, not both run (two writes of
/// the todo list in one step would fail the run).
#[tokio::test]
async fn two_plan_calls_are_refused_after_another_middleware_answered_a_call() {
    use kit::middleware::call_limits::ToolCallLimitMiddleware;
    let plan = |id: &str, item: &str| {
        ToolCall::with_id(
            id,
            "write_todos",
            json!({"todos": [{"content": item, "status": "pending"}]}),
        )
    };
    let model = ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                plan("p1", "x"),
                plan("p2", "y"),
                ToolCall::with_id("s1", "search", json!({})),
            ],
        ),
        Message::assistant("sorry"),
    ]);
    let search = Tool::from_fn(
        "search",
        "Searches.",
        json!({"type": "object"}),
        |_, _| async { Ok::<_, ToolError>("found") },
    );
    let agent = Agent::builder()
        .model(model)
        .tool(search)
        .middleware(TodoMiddleware::new())
        .middleware(ToolCallLimitMiddleware::for_tool("search").run_limit(0))
        .build()
        .unwrap();
    let state = agent.invoke("plan twice").await.unwrap().into_state();
    assert!(state.todos.is_empty(), "neither plan call applied");
    let results: Vec<(&str, bool)> = state
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.is_error()))
        .collect();
    assert_eq!(results.len(), 3, "one result per call: {results:?}");
    assert!(results.iter().all(|(_, error)| *error), "{results:?}");
    assert_eq!(state.final_text(), "sorry");
}

/// A tool that writes a file through a state update (what the filesystem middleware does).
fn note_tool() -> Tool {
    Tool::from_fn(
        "save_note",
        "Saves a note to /notes.md.",
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
        |args, _ctx| async move {
            let text = args["text"].as_str().unwrap_or_default().to_string();
            Ok::<_, ToolError>(
                ToolOutput::text("saved").with_update(
                    AgentStateUpdate::new().files(
                        [("/notes.md".to_string(), Some(FileData::text(text)))]
                            .into_iter()
                            .collect::<std::collections::BTreeMap<_, _>>(),
                    ),
                ),
            )
        },
    )
}

#[tokio::test]
async fn task_runs_a_subagent_with_a_fresh_context_and_streams_under_its_namespace() {
    let parent_model = ScriptedModel::new([
        call(
            "job-1",
            "task",
            json!({"description": "Research the capital of France and save a note.", "subagent_type": "researcher"}),
        ),
        Message::assistant("The researcher says: Paris."),
    ]);
    let child_model = ScriptedModel::new([
        call("n1", "save_note", json!({"text": "capital: Paris"})),
        Message::assistant("The capital of France is Paris."),
    ]);
    let agent = Agent::builder()
        .name("boss")
        .model(parent_model.clone())
        .middleware(TodoMiddleware::new())
        .subagents([SubagentSpec::new("researcher", "Finds facts.")
            .system_prompt("You research.")
            .model(child_model.clone())
            .tools([note_tool()])])
        .build()
        .unwrap();
    assert!(agent.tool_names().contains(&"task"));
    let events: Vec<kit::Event> = agent
        .stream_events("What is the capital of France?", &RunOptions::new())
        .collect()
        .await;
    let end = events.last().unwrap();
    assert_eq!(end.kind(), EventKind::RunEnd);
    let output = &end.data.to_json()["output"];
    // The child's final answer is the task tool's result.
    let task_result = output["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "job-1")
        .unwrap();
    assert_eq!(task_result["content"], "The capital of France is Paris.");
    // The child's file change merged back into the parent.
    assert_eq!(output["files"]["/notes.md"]["content"], "capital: Paris");
    // The child started fresh: system prompt + the description only, no todo tool.
    let child_first = &child_model.requests()[0];
    assert_eq!(child_first.messages.len(), 1);
    assert_eq!(
        child_first.messages[0].text(),
        "Research the capital of France and save a note."
    );
    assert_eq!(child_first.system.as_deref(), Some("You research."));
    let child_tools: Vec<&str> = child_first.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(child_tools, ["save_note"]);
    // Child events came through the parent's stream, attributed to the call.
    let child_events: Vec<&kit::Event> = events
        .iter()
        .filter(|e| e.metadata.namespace == ["task:researcher:job-1"])
        .collect();
    assert!(
        child_events
            .iter()
            .any(|e| e.kind() == EventKind::ToolEnd && e.name == "save_note")
    );
    // Everything the child emits is attributed to the parent's call (its own tool events carry
    // their own call id, under the same namespace).
    assert!(
        child_events
            .iter()
            .filter(|e| !matches!(e.kind(), EventKind::ToolStart | EventKind::ToolEnd))
            .all(|e| e.metadata.tool_call_id.as_deref() == Some("job-1"))
    );
    let child_text: String = child_events
        .iter()
        .filter_map(|e| match &e.data {
            kit::event::EventData::ModelDelta(kit::event::ModelDelta::Text { text }) => {
                Some(text.as_str())
            }
            _ => None,
        })
        .collect();
    assert_eq!(child_text, "The capital of France is Paris.");
}

/// A provider that reuses call ids across turns (`call_0` every time): the second `task` runs
/// the second task in a thread of its own; it does not continue the first child and answer
/// with its old result. Asked again on the same thread, the child of the first turn is not
/// disturbed.
#[tokio::test]
async fn a_reused_call_id_runs_a_new_task_not_the_old_one() {
    let task = |what: &str| {
        call(
            "call_0",
            "task",
            json!({"description": what, "subagent_type": "researcher"}),
        )
    };
    let parent_model = ScriptedModel::new([
        task("Find the capital of France."),
        Message::assistant("Paris."),
        task("Find the capital of Italy."),
        Message::assistant("Rome."),
    ]);
    let child_model = ScriptedModel::new([
        Message::assistant("The capital of France is Paris."),
        Message::assistant("The capital of Italy is Rome."),
    ]);
    let agent = Agent::builder()
        .model(parent_model.clone())
        .subagents([SubagentSpec::new("researcher", "Finds facts.").model(child_model.clone())])
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("reused");
    agent.invoke("France?").options(&opts).await.unwrap();
    let second = agent.invoke("Italy?").options(&opts).await.unwrap();
    let results: Vec<String> = second
        .state()
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(
        results,
        [
            "The capital of France is Paris.",
            "The capital of Italy is Rome."
        ]
    );
    assert_eq!(child_model.requests().len(), 2);
    assert_eq!(
        child_model.requests()[1].messages[0].text(),
        "Find the capital of Italy."
    );
}

/// A reused call id whose new task pauses inside its child: the resume goes into the new
/// child (the one its answer started), not into the finished child of the earlier turn.
#[tokio::test]
async fn a_reused_call_id_resumes_into_the_new_child() {
    let task = |what: &str| {
        call(
            "call_0",
            "task",
            json!({"description": what, "subagent_type": "janitor"}),
        )
    };
    let parent_model = ScriptedModel::new([
        task("Look around."),
        Message::assistant("Looked."),
        task("Clean up."),
        Message::assistant("Cleaned."),
    ]);
    let child_model = ScriptedModel::new([
        Message::assistant("All tidy already."),
        call("d1", "delete_everything", json!({})),
        Message::assistant("Deleted, as confirmed."),
    ]);
    let agent = Agent::builder()
        .model(parent_model)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .general_purpose_subagent(false)
        .subagents([SubagentSpec::new("janitor", "Cleans up.")
            .model(child_model.clone())
            .tools([confirm_tool()])])
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("reused-pause");
    agent.invoke("look").options(&opts).await.unwrap();
    let Outcome::Interrupted(paused) = agent.invoke("clean").options(&opts).await.unwrap() else {
        panic!("the new child's question should pause the parent")
    };
    let interrupt = &paused.interrupts[0];
    assert_eq!(interrupt.namespace.len(), 1);
    assert!(
        interrupt.namespace[0].starts_with("task:janitor:call_0:"),
        "{:?}",
        interrupt.namespace
    );
    let done = agent
        .resume(Resume::by_ids([(interrupt.id.clone(), "yes")]))
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    let results: Vec<String> = done
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| m.text())
        .collect();
    assert_eq!(results, ["All tidy already.", "Deleted, as confirmed."]);
    assert_eq!(child_model.calls(), 3);
}

/// A parent that asks subagent `first` for note A and `second` for note B in one answer
/// (calls `a` and `b`), then ends.
fn two_note_tasks() -> ScriptedModel {
    ScriptedModel::new([
        Message::assistant_with_tool_calls(
            "",
            vec![
                ToolCall::with_id(
                    "a",
                    "task",
                    json!({"description": "Note A.", "subagent_type": "first"}),
                ),
                ToolCall::with_id(
                    "b",
                    "task",
                    json!({"description": "Note B.", "subagent_type": "second"}),
                ),
            ],
        ),
        Message::assistant("Both noted."),
    ])
}

/// Two `task` calls of one answer whose subagents both write `/notes.md`: the first to finish
/// keeps the path, the other's version is saved beside it and its result says so (a plain
/// merge let the later one silently replace the earlier).
#[tokio::test]
async fn parallel_tasks_writing_one_file_both_keep_their_work() {
    let parent_model = two_note_tasks();
    let child = |text: &str| {
        ScriptedModel::new([
            call("n", "save_note", json!({"text": text})),
            Message::assistant(format!("saved {text}")),
        ])
    };
    let agent = Agent::builder()
        .model(parent_model)
        .subagents([
            SubagentSpec::new("first", "Writes A.")
                .model(child("A"))
                .tools([note_tool()]),
            SubagentSpec::new("second", "Writes B.")
                .model(child("B"))
                .tools([note_tool()]),
        ])
        .build()
        .unwrap();
    let out = agent.invoke("Take both notes.").await.unwrap();
    let files = &out.state().files;
    let kept = files["/notes.md"].content.clone();
    let (winner, loser, other) = if kept == "A" {
        ("a", "b", "B")
    } else {
        ("b", "a", "A")
    };
    assert_eq!(files[&format!("/notes.md.conflict-{loser}")].content, other);
    assert_eq!(files.len(), 2);
    let result = |id: &str| {
        out.state()
            .messages
            .iter()
            .find(|m| m.tool_call_id.as_deref() == Some(id))
            .unwrap()
            .text()
    };
    assert!(!result(winner).contains("changed these files first"));
    let told = result(loser);
    assert!(
        told.contains(&format!(
            "/notes.md (this task's version is /notes.md.conflict-{loser})"
        )),
        "{told}"
    );
}

/// The same across a pause: the second task's child asks a human before writing the file
/// the first task wrote; after the resume (a later invocation) its version still goes beside.
#[tokio::test]
async fn a_task_resumed_after_its_sibling_finished_does_not_replace_its_file() {
    let parent_model = two_note_tasks();
    let first = ScriptedModel::new([
        call("n", "save_note", json!({"text": "A"})),
        Message::assistant("saved A"),
    ]);
    let second = ScriptedModel::new([
        call("d", "delete_everything", json!({})),
        call("n", "save_note", json!({"text": "B"})),
        Message::assistant("saved B"),
    ]);
    let agent = Agent::builder()
        .model(parent_model)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .general_purpose_subagent(false)
        .subagents([
            SubagentSpec::new("first", "Writes A.")
                .model(first)
                .tools([note_tool()]),
            SubagentSpec::new("second", "Asks, then writes B.")
                .model(second)
                .tools([note_tool(), confirm_tool()]),
        ])
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("claims-across-resume");
    let Outcome::Interrupted(paused) = agent
        .invoke("Take both notes.")
        .options(&opts)
        .await
        .unwrap()
    else {
        panic!("the second child's question should pause the parent")
    };
    let done = agent
        .resume(Resume::by_ids([(paused.interrupts[0].id.clone(), "yes")]))
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(done.files["/notes.md"].content, "A");
    assert_eq!(done.files["/notes.md.conflict-b"].content, "B");
}

#[tokio::test]
async fn unknown_subagent_type_is_an_error_result_listing_the_real_ones() {
    let model = ScriptedModel::new([
        call(
            "j",
            "task",
            json!({"description": "x", "subagent_type": "nope"}),
        ),
        Message::assistant("ok"),
    ]);
    let agent = Agent::builder()
        .model(model)
        .subagents([SubagentSpec::new("writer", "Writes.")])
        .build()
        .unwrap();
    let state = agent.invoke("go").await.unwrap().into_state();
    let result = &state.messages[2];
    assert!(result.is_error());
    assert_eq!(
        result.text(),
        "Error: We cannot invoke subagent nope because it does not exist, the only allowed types \
         are `general-purpose`, `writer`"
    );
}

/// A tool that asks a human before acting (what human review does).
fn confirm_tool() -> Tool {
    Tool::from_fn(
        "delete_everything",
        "Deletes everything, after a human confirms.",
        json!({"type": "object", "properties": {}}),
        |_args, ctx| async move {
            let answer = ctx.interrupt(json!({"question": "really delete everything?"}))?;
            Ok::<_, ToolError>(ToolOutput::text(format!("human said {answer}")))
        },
    )
}

#[tokio::test]
async fn an_interrupt_inside_a_subagent_reaches_the_caller_and_resumes_into_the_child() {
    let parent_model = ScriptedModel::new([
        call(
            "job",
            "task",
            json!({"description": "clean up", "subagent_type": "janitor"}),
        ),
        Message::assistant("The janitor reported back."),
    ]);
    let child_model = ScriptedModel::new([
        call("d1", "delete_everything", json!({})),
        Message::assistant("Deleted, as confirmed."),
    ]);
    let agent = Agent::builder()
        .model(parent_model.clone())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .general_purpose_subagent(false)
        .subagents([SubagentSpec::new("janitor", "Cleans up.")
            .model(child_model.clone())
            .tools([confirm_tool()])])
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("nested-review");
    let out = agent.invoke("please clean").options(&opts).await.unwrap();
    let Outcome::Interrupted(paused) = out else {
        panic!("the child's question should pause the parent")
    };
    assert_eq!(paused.interrupts.len(), 1);
    let interrupt = &paused.interrupts[0];
    assert_eq!(interrupt.value["question"], "really delete everything?");
    assert_eq!(
        interrupt.namespace,
        ["task:janitor:job"],
        "raised inside the child"
    );

    let done = agent
        .resume(Resume::by_ids([(interrupt.id.clone(), "yes")]))
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    assert_eq!(done.final_text(), "The janitor reported back.");
    let task_result = done
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("job"))
        .unwrap();
    assert_eq!(task_result.text(), "Deleted, as confirmed.");
    // The child resumed where it was: its model was called twice in all, not restarted.
    assert_eq!(child_model.calls(), 2);
    assert_eq!(parent_model.calls(), 2);
}

#[tokio::test]
async fn compaction_summarises_old_messages_and_keeps_other_channels() {
    let model = ScriptedModel::new([
        // Turn 1 and 2 answers.
        Message::assistant("first answer"),
        Message::assistant("second answer"),
        // Turn 3: the compaction summary call, then the answer.
        Message::assistant("SUMMARY: the user asked two things."),
        Message::assistant("third answer"),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .compaction(
            CompactionMiddleware::new()
                .trigger_messages(5)
                .keep_messages(2),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("long");
    agent.invoke("one").options(&opts).await.unwrap();
    // A plan that compaction must not touch.
    agent
        .graph()
        .update_state(
            &opts,
            AgentStateUpdate::new().todos(vec![Todo {
                content: "keep me".into(),
                status: TodoStatus::Pending,
            }]),
            None,
        )
        .await
        .unwrap();
    agent.invoke("two").options(&opts).await.unwrap();
    let state = agent
        .invoke("three")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    let texts: Vec<String> = state.messages.iter().map(Message::text).collect();
    assert!(
        texts[0].contains("SUMMARY: the user asked two things."),
        "{texts:?}"
    );
    assert_eq!(&texts[1..], ["second answer", "three", "third answer"]);
    assert_eq!(state.todos.len(), 1, "todos survive compaction");
    // The answering call saw the summary, not the old messages.
    let last = model.requests().last().unwrap().clone();
    assert!(last.messages[0].text().contains("SUMMARY"));
    assert_eq!(last.messages.len(), 3);
}

/// An agent compacting from 5 messages, keeping 4, on `model`, after the turns "one" to
/// "four" on thread `thread`: the agent, the run options and the state turn four left.
async fn four_turns(model: &ScriptedModel, thread: &str) -> (Agent, RunOptions, AgentState) {
    let agent = Agent::builder()
        .model(model.clone())
        .compaction(
            CompactionMiddleware::new()
                .trigger_messages(5)
                .keep_messages(4),
        )
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id(thread);
    for turn in ["one", "two", "three"] {
        agent.invoke(turn).options(&opts).await.unwrap();
    }
    let four = agent
        .invoke("four")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    (agent, opts, four)
}

/// A failed summary call leaves the conversation whole and is not repeated at every model
/// call: compaction tries again once the conversation has grown (here by `keep_messages`).
#[tokio::test]
async fn a_failed_summary_is_tried_again_once_the_conversation_has_grown() {
    let model = ScriptedModel::new([
        ScriptStep::Reply(Message::assistant("a1")),
        ScriptStep::Reply(Message::assistant("a2")),
        // Turn 3 (5 messages, due): the summary request is refused; the turn still answers.
        ScriptStep::Fail(ModelError::BadRequest {
            provider: "scripted".into(),
            status: 400,
            message: "messages: text content blocks must be non-empty".into(),
        }),
        ScriptStep::Reply(Message::assistant("a3")),
        // Turn 4 (7 messages): still due, but waiting for 5 + 4: no summary call.
        ScriptStep::Reply(Message::assistant("a4")),
        // Turn 5 (9 messages): tried again.
        ScriptStep::Reply(Message::assistant("SUMMARY of one to three")),
        ScriptStep::Reply(Message::assistant("a5")),
    ]);
    let (agent, opts, four) = four_turns(&model, "flaky-summaries").await;
    let texts: Vec<String> = four.messages.iter().map(Message::text).collect();
    assert_eq!(
        texts,
        ["one", "a1", "two", "a2", "three", "a3", "four", "a4"],
        "nothing lost"
    );
    assert_eq!(model.calls(), 5, "turn 4 made no summary call");

    let five = agent
        .invoke("five")
        .options(&opts)
        .await
        .unwrap()
        .into_state();
    let texts: Vec<String> = five.messages.iter().map(Message::text).collect();
    assert!(texts[0].contains("SUMMARY of one to three"), "{texts:?}");
    assert_eq!(&texts[1..], ["a3", "four", "a4", "five", "a5"]);
    assert_eq!(model.calls(), 7);
}

/// A passing failure of the summary call (a rate limit) is tried again at the next model call.
#[tokio::test]
async fn a_rate_limited_summary_is_tried_again_at_the_next_call() {
    let model = ScriptedModel::new([
        ScriptStep::Reply(Message::assistant("a1")),
        ScriptStep::Reply(Message::assistant("a2")),
        ScriptStep::Fail(ModelError::RateLimited {
            provider: "scripted".into(),
            retry_after: None,
            message: "slow down".into(),
        }),
        ScriptStep::Reply(Message::assistant("a3")),
        ScriptStep::Reply(Message::assistant("SUMMARY of one and two")),
        ScriptStep::Reply(Message::assistant("a4")),
    ]);
    let (_, _, four) = four_turns(&model, "rate-limited-summary").await;
    let texts: Vec<String> = four.messages.iter().map(Message::text).collect();
    assert!(texts[0].contains("SUMMARY of one and two"), "{texts:?}");
    assert_eq!(texts.last().map(String::as_str), Some("a4"));
    assert_eq!(model.calls(), 6);
}

#[tokio::test]
async fn overflow_recovery_compacts_and_retries_once() {
    let overflow = || {
        ScriptStep::Fail(ModelError::ContextLengthExceeded {
            provider: "scripted".into(),
            message: "maximum context length is 100 tokens".into(),
        })
    };
    let model = ScriptedModel::new([
        ScriptStep::Reply(Message::assistant("a1")),
        ScriptStep::Reply(Message::assistant("a2")),
        overflow(),
        ScriptStep::Reply(Message::assistant("SUMMARY of a1 a2")),
        ScriptStep::Reply(Message::assistant("fits now")),
    ]);
    let agent = Agent::builder()
        .model(model.clone())
        .overflow_recovery(true)
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .unwrap();
    let opts = RunOptions::new().thread_id("big");
    agent
        .invoke(&*"x".repeat(4000))
        .options(&opts)
        .await
        .unwrap();
    agent
        .invoke(&*"y".repeat(4000))
        .options(&opts)
        .await
        .unwrap();
    let state = agent.invoke("z").options(&opts).await.unwrap().into_state();
    assert_eq!(state.final_text(), "fits now");
    // The state itself was compacted, so the next turn does not overflow again.
    assert!(state.messages[0].text().contains("SUMMARY of a1 a2"));
    assert!(state.messages.len() < 7);

    // Still too big after recovery: a clear error.
    let model = ScriptedModel::new([
        overflow(),
        ScriptStep::Reply(Message::assistant("sum")),
        overflow(),
    ]);
    let agent = Agent::builder()
        .model(model)
        .overflow_recovery(true)
        .build()
        .unwrap();
    let input: Vec<Message> = (0..10)
        .map(|i| Message::user(format!("{i} {}", "w".repeat(500))))
        .collect();
    let err = agent.invoke(input).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("still does not fit after recovery"),
        "{err}"
    );
}

fn arb_conversation() -> impl Strategy<Value = Vec<Message>> {
    // Turns: a user message, or an assistant message with 0-3 calls whose results follow, in a
    // random order, sometimes interleaved with the next turn's messages (mixed ids).
    prop::collection::vec((0u8..3, 0usize..4, any::<bool>()), 1..25).prop_map(|turns| {
        let mut messages = Vec::new();
        let mut n = 0;
        let mut owed: Vec<Message> = Vec::new();
        for (kind, calls, interleave) in turns {
            match kind {
                0 => messages.push(Message::user("u")),
                _ => {
                    let ids: Vec<String> = (0..calls)
                        .map(|_| {
                            n += 1;
                            format!("c{n}")
                        })
                        .collect();
                    messages.push(Message::assistant_with_tool_calls(
                        "a",
                        ids.iter()
                            .map(|id| ToolCall::with_id(id, "t", json!({})))
                            .collect(),
                    ));
                    let mut results: Vec<Message> =
                        ids.iter().rev().map(|id| Message::tool(id, "r")).collect();
                    if interleave && !results.is_empty() {
                        owed.push(results.remove(0));
                    }
                    messages.append(&mut results);
                    messages.append(&mut owed);
                }
            }
        }
        messages.append(&mut owed);
        messages
    })
}

proptest! {
    /// The kept tail never holds a tool result whose call was summarised away.
    #[test]
    fn compaction_never_orphans_a_tool_result(messages in arb_conversation(), keep in 0usize..12) {
        let cut = safe_cutoff(&messages, keep);
        prop_assert!(cut <= messages.len());
        let tail = &messages[cut..];
        for (i, m) in tail.iter().enumerate() {
            if m.role == Role::Tool {
                let id = m.tool_call_id.as_deref().unwrap();
                let answered = tail[..i].iter().any(|a| a.tool_calls.iter().any(|c| c.id == id));
                prop_assert!(answered, "orphan result {id} at {} (cut {cut})", i + cut);
            }
        }
        prop_assert!(tail.first().map(|m| m.role != Role::Tool).unwrap_or(true));
    }
}

#[tokio::test]
async fn overflow_recovery_against_the_providers_real_context_length_error() {
    use kit_testing::mock::{MockOpenAi, openai};
    let server = MockOpenAi::start().await.unwrap();
    server.enqueue_all([
        // The conversation does not fit: OpenAI's real 400 body.
        openai::context_length_exceeded(),
        // The summary call, then the retried answer.
        openai::json(openai::completion(
            "SUMMARY: earlier turns asked about invoices.",
        )),
        openai::json(openai::completion("Here is your answer.")),
    ]);
    let agent = Agent::builder()
        .model(server.model("gpt-4o-mini"))
        .overflow_recovery(true)
        .build()
        .unwrap();
    let history: Vec<Message> = (0..8)
        .flat_map(|i| {
            [
                Message::user(format!("question {i}: {}", "invoice ".repeat(200))),
                Message::assistant(format!("answer {i}")),
            ]
        })
        .chain([Message::user("and now?")])
        .collect();
    let state = agent.invoke(history).await.unwrap().into_state();
    assert_eq!(state.final_text(), "Here is your answer.");
    assert!(state.messages[0].text().contains("SUMMARY"));
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let first = requests[0].body["messages"].as_array().unwrap().len();
    let retried = requests[2].body["messages"].as_array().unwrap().len();
    assert!(retried < first, "the retry is smaller: {retried} < {first}");
}
