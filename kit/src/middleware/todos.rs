//! Planning: the `write_todos` tool.

use serde::Deserialize;
use serde_json::json;

use crate::agent::{
    AgentState, AgentStateUpdate, Hook, HookResult, HookUpdate, Middleware, Runtime, Todo,
    TodoStatus,
};
use crate::message::Message;
use crate::tool::{Tool, ToolError, ToolOutput};

/// The default name of the planning tool (the name prompts written for deepagents and
/// LangChain use).
pub const WRITE_TODOS: &str = "write_todos";

/// Gives the agent a plan: the `write_todos` tool replaces the `todos` list on each call.
///
/// Two calls in one model turn are both refused with an error result (neither applies): the
/// order of parallel calls would otherwise decide which plan wins.
///
/// ```
/// use kit::middleware::todos::TodoMiddleware;
/// let planning = TodoMiddleware::new().tool_name("update_plan");
/// # let _ = planning;
/// ```
#[derive(Debug, Clone)]
pub struct TodoMiddleware {
    tool_name: String,
}

impl Default for TodoMiddleware {
    fn default() -> Self {
        Self::new()
    }
}

impl TodoMiddleware {
    /// Planning with the `write_todos` tool.
    pub fn new() -> Self {
        TodoMiddleware {
            tool_name: WRITE_TODOS.to_string(),
        }
    }

    /// Renames the tool (the spec's `tool_name` option).
    #[must_use]
    pub fn tool_name(mut self, name: impl Into<String>) -> Self {
        self.tool_name = name.into();
        self
    }
}

#[derive(Deserialize)]
struct Args {
    todos: Vec<Todo>,
}

fn description(tool: &str) -> String {
    format!(
        "Create or replace your task list for the current work. Use it for work with three or \
         more distinct steps, or when the user gives several tasks; skip it for simple one-step \
         requests. Each call replaces the whole list, so always send every item with its \
         status: `pending`, `in_progress` (usually exactly one item: the one you are working on) \
         or `completed`. Mark the first item `in_progress` when you start, mark items \
         `completed` as soon as they are done, and add items you discover on the way. Call \
         `{tool}` at most once per turn. When all items are done, give your final answer in a \
         message after your last `{tool}` call."
    )
}

fn schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "todos": {
                "type": "array",
                "description": "The complete, updated list of tasks.",
                "items": {
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "description": "What to do."},
                        "status": {"type": "string", "enum": ["pending", "in_progress", "completed"]}
                    },
                    "required": ["content", "status"],
                    "additionalProperties": false
                }
            }
        },
        "required": ["todos"],
        "additionalProperties": false
    })
}

/// The list as the anchor prints it: `[{'content': 'a', 'status': 'in_progress'}]`.
pub fn render(todos: &[Todo]) -> String {
    let items: Vec<String> = todos
        .iter()
        .map(|t| {
            let status = match t.status {
                TodoStatus::Pending => "pending",
                TodoStatus::InProgress => "in_progress",
                TodoStatus::Completed => "completed",
            };
            format!(
                "{{'content': '{}', 'status': '{status}'}}",
                t.content.replace('\\', "\\\\").replace('\'', "\\'")
            )
        })
        .collect();
    format!("[{}]", items.join(", "))
}

#[crate::async_trait]
impl Middleware for TodoMiddleware {
    fn name(&self) -> &str {
        "TodoList"
    }

    fn hooks(&self) -> &[Hook] {
        &[Hook::AfterModel]
    }

    fn tools(&self) -> Vec<Tool> {
        vec![Tool::from_fn(
            self.tool_name.clone(),
            description(&self.tool_name),
            schema(),
            |args, _ctx| async move {
                let args: Args = serde_json::from_value(args).map_err(ToolError::invalid_args)?;
                let text = format!("Updated todo list to {}", render(&args.todos));
                Ok::<_, ToolError>(
                    ToolOutput::text(text).with_update(AgentStateUpdate::new().todos(args.todos)),
                )
            },
        )]
    }

    fn system_prompt(&self) -> Option<String> {
        Some(format!(
            "## `{0}`\n\nYou have a `{0}` tool to plan and track multi-step work. Use it for \
             complex tasks and keep it current; do not use it for simple requests.",
            self.tool_name
        ))
    }

    /// Refuses parallel calls of the tool, answering each with an error. The calls are those
    /// of the last answer still without a result: an earlier hook (a review's rejection, a
    /// call limit) may already have answered others, and put its results after the answer.
    async fn after_model(&self, state: &AgentState, _rt: &Runtime) -> HookResult {
        let calls: Vec<_> = state
            .pending_tool_calls()
            .into_iter()
            .filter(|c| c.name == self.tool_name)
            .collect();
        if calls.len() < 2 {
            return Ok(None);
        }
        let text = format!(
            "Error: The `{}` tool should never be called multiple times in parallel. Please call \
             it only once per model invocation to update the todo list.",
            self.tool_name
        );
        let errors: Vec<Message> = calls
            .iter()
            .map(|c| Message::tool_error(&c.id, text.clone()).with_name(&c.name))
            .collect();
        Ok(Some(HookUpdate::messages(errors)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_the_anchor() {
        let todos = vec![
            Todo {
                content: "a".into(),
                status: TodoStatus::InProgress,
            },
            Todo {
                content: "it's b".into(),
                status: TodoStatus::Pending,
            },
        ];
        assert_eq!(
            render(&todos),
            "[{'content': 'a', 'status': 'in_progress'}, {'content': 'it\\'s b', 'status': 'pending'}]"
        );
    }
}
