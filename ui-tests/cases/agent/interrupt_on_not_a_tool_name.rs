// interrupt_on names tools, whose names are letters, digits, `_` or `-`: `r#type` is not one.
#[kit::agent(model = "openai:gpt-4o-mini", interrupt_on< r#type = true >)]
struct Typist;

fn main() {}
