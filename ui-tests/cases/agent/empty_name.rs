// An agent's name is a non-empty string literal.
#[kit::agent(name = "", model = "openai:gpt-4o-mini")]
struct Helper;

fn main() {}
