// A tools entry of the wrong type points at that entry.
#[kit::agent(model = "openai:gpt-4o-mini", tools = ["search"])]
struct Helper;

fn main() {}
