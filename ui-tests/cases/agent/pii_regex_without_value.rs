// `regex` takes the pattern: `regex = ".."`; the bare word is refused.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email(redact, regex) >)]
struct Helper;

fn main() {}
