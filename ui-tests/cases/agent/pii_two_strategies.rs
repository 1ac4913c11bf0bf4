// A PII type has one strategy.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email(redact, mask) >)]
struct Helper;

fn main() {}
