//! A scripted "researcher" agent for async-subagent tests, examples and benchmarks: no
//! real model. On a user message it calls its `research` tool with the message as topic;
//! on the tool's answer it reports `Report on <topic>: <findings>`. The tool waits on a
//! [`Gate`], so a caller can hold runs in `running` and release them.

use std::time::Duration;

use kit::testing::ScriptedModel;
use kit::tool::{Tool, ToolError};
use kit::{Agent, Message, Role, ToolCall};
use serde_json::{Value, json};
use tokio::sync::watch;

/// A gate the `research` tool waits on. Cheap to clone; all clones share one state.
#[derive(Clone, Debug)]
pub struct Gate {
    tx: std::sync::Arc<watch::Sender<bool>>,
}

impl Gate {
    /// A gate that is open: the tool answers at once.
    pub fn open() -> Self {
        Gate {
            tx: std::sync::Arc::new(watch::channel(true).0),
        }
    }

    /// A gate that is closed: the tool waits until [`release`](Self::release).
    pub fn closed() -> Self {
        Gate {
            tx: std::sync::Arc::new(watch::channel(false).0),
        }
    }

    /// Opens the gate: every waiting and later tool call goes on.
    pub fn release(&self) {
        self.tx.send_replace(true);
    }

    pub(crate) async fn pass(&self) {
        let mut rx = self.tx.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// How the `research` tool behaves.
#[derive(Clone, Debug)]
pub struct Behaviour {
    /// The gate it waits on.
    pub gate: Gate,
    /// Extra time it takes (a "slow" tool), after the gate.
    pub delay: Duration,
}

/// The text of a message (text parts joined).
fn text(m: &Message) -> String {
    m.text()
}

/// The scripted model: a tool call for a user message, a report for a tool result.
pub fn model() -> ScriptedModel {
    ScriptedModel::from_fn(|request| {
        let Some(last) = request.messages.last() else {
            return Ok(Message::assistant("Nothing to research."));
        };
        if last.role == Role::Tool {
            let topic = request
                .messages
                .iter()
                .rev()
                .find(|m| m.role == Role::User)
                .map(text)
                .unwrap_or_default();
            return Ok(Message::assistant(format!(
                "Report on {topic}: {}",
                text(last)
            )));
        }
        Ok(Message::assistant_with_tool_calls(
            "",
            vec![ToolCall::new("research", json!({"topic": text(last)}))],
        ))
    })
    .named("scripted-researcher")
}

/// The `research` tool.
pub fn tool(behaviour: Behaviour) -> Tool {
    Tool::from_fn(
        "research",
        "Researches a topic and returns findings.",
        json!({"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]}),
        move |args: Value, _ctx| {
            let behaviour = behaviour.clone();
            async move {
                let topic = args
                    .get("topic")
                    .and_then(Value::as_str)
                    .ok_or_else(|| ToolError::invalid_args("`topic` must be a string"))?
                    .to_string();
                behaviour.gate.pass().await;
                if !behaviour.delay.is_zero() {
                    tokio::time::sleep(behaviour.delay).await;
                }
                Ok::<_, ToolError>(format!("3 sources agree about {topic}"))
            }
        },
    )
}

/// The researcher agent whose tool waits on `gate`.
pub fn agent(gate: Gate) -> Agent {
    agent_with(Behaviour {
        gate,
        delay: Duration::ZERO,
    })
}

/// The researcher agent with a tool behaving as said.
pub fn agent_with(behaviour: Behaviour) -> Agent {
    match Agent::builder()
        .name("researcher")
        .model(model())
        .tool(tool(behaviour))
        .build()
    {
        Ok(agent) => agent,
        // The definition is fixed; building it cannot fail at run time.
        Err(e) => unreachable_agent(e),
    }
}

#[allow(clippy::panic)]
fn unreachable_agent(e: kit::AgentError) -> Agent {
    panic!("the researcher agent definition is invalid: {e}")
}
