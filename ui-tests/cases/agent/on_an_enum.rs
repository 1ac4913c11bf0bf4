// #[agent] goes on a unit struct that names the agent: an enum is refused.
#[kit::agent(model = "openai:gpt-4o-mini")]
enum Helper {
    Support,
}

fn main() {}
