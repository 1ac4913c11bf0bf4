// An async subagent's `client` implements kit::protocol::RunClient.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents< researcher(description = "Digs", graph_id = "g", client = 42) >,
)]
struct Lead;

fn main() {}
