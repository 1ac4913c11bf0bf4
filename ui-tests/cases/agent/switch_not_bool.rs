// A capability switch is a bool: `todos`, or `todos = cfg_flag()`.
#[kit::agent(model = "openai:gpt-4o-mini", compact_conversation = "yes")]
struct Helper;

fn main() {}
