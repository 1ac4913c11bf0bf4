// Async subagent names must be unique: the second one is reported.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents<
        researcher(description = "a", graph_id = "g1", url = "http://127.0.0.1:1"),
        researcher(description = "b", graph_id = "g2", url = "http://127.0.0.1:2"),
    >,
)]
struct Supervisor;

fn main() {}
