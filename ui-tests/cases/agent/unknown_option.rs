// A misspelt option is an error with a suggestion.
#[kit::agent(model = "openai:gpt-4o-mini", sytem_prompt = "hi")]
struct Helper;

fn main() {}
