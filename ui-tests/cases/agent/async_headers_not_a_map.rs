// An async subagent's `headers` is a map: `headers = {"Authorization": "Bearer .."}`.
#[kit::agent(
    model = "openai:gpt-4o-mini",
    async_subagents<
        researcher(description = "Digs", graph_id = "g", url = "http://127.0.0.1:1",
                   headers = "Authorization: Bearer token"),
    >,
)]
struct Supervisor;

fn main() {}
