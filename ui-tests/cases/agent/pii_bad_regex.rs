// A custom PII type's regex is checked at compile time.
#[kit::agent(model = "openai:gpt-4o-mini", pii< employee_id(regex = "E-(\\d{6}", redact) >)]
struct Helper;

fn main() {}
