// Each PII type is given once.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email(redact), email(mask) >)]
struct Helper;

fn main() {}
