//! The tools of MCP servers as a middleware that follows their tool lists.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use crate::agent::{
    AgentError, Hook, Middleware, ModelExecution, ModelNext, Placement, Runtime, ToolNext,
};
use crate::graph::Pause;
use crate::message::ToolCall;
use crate::model::{ModelRequest, ToolSpec};
use crate::tool::{Tool, ToolContext, ToolExecution};

use super::{McpClient, McpError};

/// The tools of one or more MCP servers, kept current: a middleware.
///
/// The agent starts with the tools the servers list when the toolset is made. When a server
/// says its list changed (`notifications/tools/list_changed`), the next model call sees the
/// new list: added tools appear, removed ones disappear, changed schemas apply; a call to a
/// removed tool is answered with an error result naming the tools there are.
///
/// The toolset sits innermost in the middleware chain ([`Placement::Inner`]), so every
/// guardrail's `wrap_tool_call` (human review, PII, call limits) wraps MCP calls, whatever
/// order the middleware were added in.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use kit::mcp::{McpClient, McpServer, McpToolset};
/// use kit::testing::ScriptedModel;
/// use kit::{Agent, Message, ToolCall};
///
/// let ping = kit::tool::Tool::from_fn("ping", "Replies pong.", serde_json::json!({"type": "object"}),
///     |_, _| async { Ok::<_, kit::tool::ToolError>("pong") });
/// let (client_io, server_io) = tokio::io::duplex(64 * 1024);
/// let _serving = McpServer::new("demo").tool(ping).serve(server_io);
/// let client = McpClient::connect_with("demo", client_io).await?;
///
/// let agent = Agent::builder()
///     .model(ScriptedModel::new([
///         Message::assistant_with_tool_calls("", vec![ToolCall::new("ping", serde_json::json!({}))]),
///         Message::assistant("The server said pong."),
///     ]))
///     .middleware(McpToolset::new([client]).await?)
///     .build()?;
/// let out = agent.invoke("Ping the server.").await?;
/// assert!(out.state().messages.iter().any(|m| m.text() == "pong"));
/// # Ok(()) }
/// ```
pub struct McpToolset {
    clients: Vec<McpClient>,
    /// Each server's tools when the toolset was made.
    per_server: Vec<Vec<Tool>>,
    initial: Vec<Tool>,
    initial_names: HashSet<String>,
    /// The servers' list-change counts when `initial` was listed.
    initial_changes: Vec<u64>,
    /// Per server: its tools as last listed again, and its list-change count read just
    /// before. Made once per change of that server, not once per model or tool call (each
    /// tool compiles its schema), even while another server cannot be listed.
    relisted: std::sync::Mutex<Vec<Option<Relisted>>>,
    /// Each first-listed tool name → the index of the server that listed it.
    first_owner: HashMap<String, usize>,
}

/// A server's list-change count, and its tools listed again at that count.
type Relisted = (u64, Arc<[Tool]>);

impl std::fmt::Debug for McpToolset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpToolset")
            .field(
                "servers",
                &self.clients.iter().map(McpClient::name).collect::<Vec<_>>(),
            )
            .field("tools", &self.initial_names)
            .finish()
    }
}

impl McpToolset {
    /// Lists the tools of these servers.
    pub async fn new(clients: impl IntoIterator<Item = McpClient>) -> Result<Self, McpError> {
        let clients: Vec<McpClient> = clients.into_iter().collect();
        let initial_changes = clients.iter().map(McpClient::list_changes).collect();
        let mut per_server = Vec::new();
        let mut owners: HashMap<String, String> = HashMap::new();
        for client in &clients {
            let tools = client.tools().await?;
            for tool in &tools {
                if let Some(first) =
                    owners.insert(tool.name().to_string(), client.name().to_string())
                {
                    return Err(McpError::DuplicateTool {
                        tool: tool.name().to_string(),
                        first,
                        second: client.name().to_string(),
                    });
                }
            }
            per_server.push(tools);
        }
        let initial: Vec<Tool> = per_server.iter().flatten().cloned().collect();
        let first_owner = per_server
            .iter()
            .enumerate()
            .flat_map(|(i, tools)| tools.iter().map(move |t| (t.name().to_string(), i)))
            .collect();
        let initial_names = initial.iter().map(|t| t.name().to_string()).collect();
        Ok(McpToolset {
            clients,
            per_server,
            initial,
            initial_names,
            first_owner,
            initial_changes,
            relisted: std::sync::Mutex::new(Vec::new()),
        })
    }

    /// The tools as listed when the toolset was made.
    pub fn snapshot(&self) -> &[Tool] {
        &self.initial
    }

    /// Whether any server changed its list since the toolset was made.
    fn changed(&self) -> bool {
        self.clients
            .iter()
            .zip(&self.initial_changes)
            .any(|(c, seen)| c.list_changes() != *seen)
    }

    /// The servers' tools now (a server that cannot be listed keeps its first list, and is
    /// asked again next time).
    ///
    /// A name stays with the server that first listed it: a tool another server lists again
    /// under a name it did not have at first, or a second tool of one name, is left out (else
    /// one server could take the calls meant for another's tool, and providers refuse a
    /// request naming two tools alike).
    async fn current(&self) -> Vec<Tool> {
        let mut all: Vec<Tool> = Vec::new();
        let mut names: HashSet<String> = HashSet::new();
        for (i, (client, first)) in self.clients.iter().zip(&self.per_server).enumerate() {
            for tool in self.server_tools(i, client, first).await.iter() {
                let owner = self.first_owner.get(tool.name());
                if owner.is_some_and(|&owner| owner != i) || !names.insert(tool.name().to_string())
                {
                    tracing::warn!(
                        server = client.name(),
                        tool = tool.name(),
                        "an MCP server listed a tool under a name another of the toolset's \
                         tools has; it is left out"
                    );
                    continue;
                }
                all.push(tool.clone());
            }
        }
        all
    }

    /// Server `i`'s tools now: as last listed again while its list has not changed since, or
    /// listed again (kept for next time); its first list when it cannot be listed.
    async fn server_tools(&self, i: usize, client: &McpClient, first: &[Tool]) -> Arc<[Tool]> {
        let generation = client.list_changes();
        {
            let relisted = self.relisted.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(Some((seen, tools))) = relisted.get(i)
                && *seen == generation
            {
                return tools.clone();
            }
        }
        match client.inner().tools().await {
            Ok(tools) => {
                let tools: Arc<[Tool]> = tools.into();
                let mut relisted = self.relisted.lock().unwrap_or_else(|p| p.into_inner());
                if relisted.len() <= i {
                    relisted.resize(i + 1, None);
                }
                if let Some(slot) = relisted.get_mut(i) {
                    *slot = Some((generation, tools.clone()));
                }
                tools
            }
            Err(e) => {
                tracing::warn!(server = client.name(), error = %e, "MCP tools could not be listed again");
                first.into()
            }
        }
    }
}

#[crate::async_trait]
impl Middleware for McpToolset {
    fn name(&self) -> &str {
        "McpToolset"
    }

    fn placement(&self) -> Placement {
        Placement::Inner(0)
    }

    fn hooks(&self) -> &[Hook] {
        &[]
    }

    fn tools(&self) -> Vec<Tool> {
        self.initial.clone()
    }

    async fn wrap_model_call(
        &self,
        mut request: ModelRequest,
        _rt: &Runtime,
        next: ModelNext<'_>,
    ) -> Result<ModelExecution, AgentError> {
        if self.changed() {
            let current = self.current().await;
            let current_names: HashSet<&str> = current.iter().map(Tool::name).collect();
            let mut specs: Vec<ToolSpec> = request
                .tools
                .iter()
                .filter(|s| {
                    !self.initial_names.contains(&s.name)
                        && !current_names.contains(s.name.as_str())
                })
                .cloned()
                .collect();
            specs.extend(current.iter().map(|t| t.spec().clone()));
            request.tools = Arc::from(specs);
        }
        next.call(request).await
    }

    async fn wrap_tool_call(
        &self,
        call: ToolCall,
        ctx: ToolContext,
        _rt: &Runtime,
        next: ToolNext<'_>,
    ) -> Result<ToolExecution, Pause> {
        if !self.changed() {
            return next.call(call, ctx).await;
        }
        let current = self.current().await;
        let by_name: HashMap<&str, &Tool> = current.iter().map(|t| (t.name(), t)).collect();
        match by_name.get(call.name.as_str()) {
            Some(tool) => tool.execute(&call, ctx).await,
            None if self.initial_names.contains(&call.name) => {
                let mut names: Vec<&str> = by_name.keys().copied().collect();
                names.sort_unstable();
                Ok(ToolExecution::error(
                    &call,
                    format!(
                        "Error: the MCP server no longer offers `{}`; its tools now are [{}].",
                        call.name,
                        names.join(", ")
                    ),
                ))
            }
            None => next.call(call, ctx).await,
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::mcp::McpServer;

    /// The tools listed again are made once per list change: asked twice with no change in
    /// between, the toolset answers with the very same tools (making them compiles every
    /// schema, which once happened on every model and tool call after the first change).
    #[tokio::test]
    async fn tools_listed_again_are_made_once_per_change() {
        let ping = Tool::from_fn(
            "ping",
            "Replies pong.",
            serde_json::json!({"type": "object"}),
            |_, _| async { Ok::<_, crate::tool::ToolError>("pong") },
        );
        let (client_io, server_io) = tokio::io::duplex(64 * 1024);
        let _serving = McpServer::new("demo").tool(ping).serve(server_io);
        let client = McpClient::connect_with("demo", client_io).await.unwrap();
        let toolset = McpToolset::new([client.clone()]).await.unwrap();
        let (first_list, _) = toolset.per_server.split_at(1);
        let first = toolset.server_tools(0, &client, &first_list[0]).await;
        let second = toolset.server_tools(0, &client, &first_list[0]).await;
        assert_eq!(first.len(), 1);
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(toolset.current().await.len(), 1);
        // A different count of changes (as after a notice) makes them again.
        if let Some(Some((seen, _))) = toolset.relisted.lock().unwrap().get_mut(0) {
            *seen += 1;
        }
        let third = toolset.server_tools(0, &client, &first_list[0]).await;
        assert!(!Arc::ptr_eq(&first, &third));
        assert_eq!(third[0].name(), "ping");
    }
}
