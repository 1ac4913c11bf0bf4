//! A supervisor agent for async-subagent tests: its model is scripted one turn at a time, so a
//! test says which tool calls the model makes and reads what the tools answered.

use std::sync::Arc;

use kit::agent::{Agent, AgentState};
use kit::middleware::async_subagents::AsyncSpec;
use kit::testing::{ScriptStep, ScriptedModel};
use kit::{MemoryCheckpointer, Message, Role, ToolCall};
use serde_json::Value;

use crate::Error;

/// A supervisor with async subagents, a scripted model and a memory checkpointer, on one
/// thread of its own.
///
/// ```
/// use kit::middleware::async_subagents::AsyncSpec;
/// use kit_testing::Supervisor;
/// use serde_json::json;
///
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), kit_testing::Error> {
/// // No worker URL: the task is only recorded locally.
/// let sup = Supervisor::new([AsyncSpec::new("researcher", "Researches.", "research")])?;
/// let (answer, state) = sup.call_json("start_async_task", json!({
///     "description": "Rust 1.0", "subagent_name": "researcher"
/// })).await?;
/// assert!(answer.to_string().contains("task_id"));
/// assert_eq!(state.async_tasks.len(), 1);
/// # Ok(()) }
/// ```
pub struct Supervisor {
    agent: Agent,
    model: ScriptedModel,
    thread: String,
}

impl Supervisor {
    /// A supervisor named `supervisor` over these specs.
    pub fn new(specs: impl IntoIterator<Item = AsyncSpec>) -> Result<Self, Error> {
        let model = ScriptedModel::new(Vec::<ScriptStep>::new());
        let agent = Agent::builder()
            .name("supervisor")
            .model(model.clone())
            .async_subagents(specs)
            .checkpointer(Arc::new(MemoryCheckpointer::new()))
            .build()?;
        Ok(Supervisor {
            agent,
            model,
            thread: format!("supervisor-{}", kit::ids::random()),
        })
    }

    /// A supervisor over an async-subagent middleware built by the caller (who may keep its
    /// [`notices`](kit::middleware::async_subagents::AsyncSubagentMiddleware::notices)).
    pub fn with_middleware(
        middleware: kit::middleware::async_subagents::AsyncSubagentMiddleware,
    ) -> Result<Self, Error> {
        let model = ScriptedModel::new(Vec::<ScriptStep>::new());
        let agent = Agent::builder()
            .name("supervisor")
            .model(model.clone())
            .middleware(middleware)
            .checkpointer(Arc::new(MemoryCheckpointer::new()))
            .build()?;
        Ok(Supervisor {
            agent,
            model,
            thread: format!("supervisor-{}", kit::ids::random()),
        })
    }

    /// The agent.
    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// The thread the supervisor runs on.
    pub fn thread(&self) -> &str {
        &self.thread
    }

    /// One user turn: the model makes these tool calls (in one message), then says "ok".
    /// Returns the tool results in call order and the state after the turn.
    pub async fn turn(&self, calls: &[(&str, Value)]) -> Result<(Vec<Message>, AgentState), Error> {
        let calls: Vec<ToolCall> = calls
            .iter()
            .enumerate()
            .map(|(i, (name, args))| {
                ToolCall::with_id(format!("c{}-{i}", kit::ids::random()), *name, args.clone())
            })
            .collect();
        let ids: Vec<String> = calls.iter().map(|c| c.id.clone()).collect();
        self.model
            .push(Message::assistant_with_tool_calls("", calls));
        self.model.push(Message::assistant("ok"));
        let state = self
            .agent
            .invoke("go on")
            .thread_id(self.thread.clone())
            .await?
            .into_state();
        let mut results = Vec::with_capacity(ids.len());
        for id in &ids {
            let result = state
                .messages
                .iter()
                .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(id))
                .cloned()
                .ok_or_else(|| format!("the supervisor recorded no tool result for call {id}"))?;
            results.push(result);
        }
        Ok((results, state))
    }

    /// One tool call; its result message and the state after the turn.
    pub async fn call(&self, name: &str, args: Value) -> Result<(Message, AgentState), Error> {
        let (mut results, state) = self.turn(&[(name, args)]).await?;
        let result = results.pop().ok_or("the turn made no call")?;
        Ok((result, state))
    }

    /// One tool call whose result is JSON; the parsed result and the state after the turn.
    pub async fn call_json(&self, name: &str, args: Value) -> Result<(Value, AgentState), Error> {
        let (result, state) = self.call(name, args).await?;
        let text = result.text();
        let json = serde_json::from_str(&text)
            .map_err(|e| format!("{name} did not answer JSON ({e}): {text}"))?;
        Ok((json, state))
    }
}
