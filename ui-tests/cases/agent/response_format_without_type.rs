// response_format names the answer's type.
#[kit::agent(model = "openai:gpt-4o-mini", response_format)]
struct Writer;

fn main() {}
