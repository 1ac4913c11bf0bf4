// The definition lives in the attribute; fields would be ignored, so they are refused.
#[kit::agent(model = "openai:gpt-4o-mini")]
struct Helper {
    prompt: String,
}

fn main() {}
