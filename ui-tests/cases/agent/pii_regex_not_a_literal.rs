// A custom PII type's regex is checked at compile time, so it is a string literal.
const BADGE: &str = "B-\\d+";

#[kit::agent(model = "openai:gpt-4o-mini", pii< badge(regex = BADGE) >)]
struct Helper;

fn main() {}
