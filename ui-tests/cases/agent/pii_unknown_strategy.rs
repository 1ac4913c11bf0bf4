// The PII strategies are redact, mask, hash and block.
#[kit::agent(model = "openai:gpt-4o-mini", pii< email(redcat) >)]
struct Helper;

fn main() {}
