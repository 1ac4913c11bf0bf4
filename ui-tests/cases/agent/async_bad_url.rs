// A worker URL must be http(s).
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents< researcher(description = "digs", graph_id = "g", url = "localhost:8787") >,
)]
struct Supervisor;

fn main() {}
