// The #[agent] syntax the docs show compiles.
use std::sync::Arc;

use kit::middleware::subagents::SubagentSpec;
use kit::middleware::todos::TodoMiddleware;

#[kit::agent(
    name = "supervisor",
    model = "openai:gpt-4o-mini",
    system_prompt = "You coordinate work.",
    tools = [],
    middleware = [TodoMiddleware::new()],
    subagents = [SubagentSpec::new("researcher", "Finds facts.")],
    checkpointer = Arc::new(kit::MemoryCheckpointer::new()),
    recursion_limit = 200,
    async_subagents<
        researcher_async(description = "Deep research", graph_id = "research", url = "http://127.0.0.1:8787"),
        writer(description = "Drafts", graph_id = "writer", url = "https://workers.example.com",
               headers = {"Authorization": "Bearer token"}),
    >,
)]
pub struct Supervisor;

fn main() {
    let _ = Supervisor::build;
    let _ = Supervisor::agent;
}
