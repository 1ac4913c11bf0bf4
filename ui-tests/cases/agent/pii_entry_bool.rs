// A PII entry is a type with its strategy in parentheses (`email(redact)`), not `= true`.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email = true >)]
struct Helper;

fn main() {}
