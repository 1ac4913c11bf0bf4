// Giving an option twice is an error at the second one.
#[kit::agent(model = "openai:gpt-4o-mini", model = "anthropic:claude-sonnet-4-5")]
struct Helper;

fn main() {}
